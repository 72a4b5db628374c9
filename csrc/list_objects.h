// ListObjectsV2: one page per call, or many pages in flight at once (PendingListPage + CompletionQueue), which
// the listing policy in torchdata_s3/listing.py splits a prefix into.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "body_request.h"
#include "completion_queue.h"
#include "s3_client.h"

namespace torchdata_s3 {

struct ObjectSummary {
    std::string key;
    uint64_t size = 0;
    std::string etag;
    std::string last_modified;  // ISO 8601, as S3 sends it ("2026-11-26T10:00:00.000Z"); details only
    std::string storage_class;  // e.g. "STANDARD"; details only, empty if the server sent none
};

struct ListObjectsPage {
    std::vector<ObjectSummary> objects;
    std::vector<std::string> common_prefixes;
    std::string next_continuation_token;  // empty when this is the last page
    bool is_truncated = false;
};

struct ListObjectsRequest {
    std::string bucket;
    std::string prefix;
    std::string delimiter;
    std::string continuation_token;
    std::string start_after;
    uint32_t max_keys = 0;  // 0: the server's default (1000 on S3)
    uint32_t timeout_ms = 0;
    bool details = false;  // also parse each object's LastModified and StorageClass
};

ListObjectsPage list_objects_v2(S3Client& client, const ListObjectsRequest& request);

// One ListObjectsV2 page in flight; its tag goes to `queue` once it failed, or once its answer is parsed (on
// the queue's thread: neither the CRT's threads, which schedule every other request, nor the thread that
// collects many pages, which only turns them into Python objects).
class PendingListPage {
public:
    PendingListPage(std::shared_ptr<S3Client> client, const ListObjectsRequest& request,
                    std::shared_ptr<CompletionQueue> queue, uint64_t tag);
    // Whether its tag was pushed: failed, or answered and parsed.
    bool done();
    void cancel() { request_.cancel(); }
    // Whether its entries carry LastModified and StorageClass (ListObjectsRequest::details).
    bool details() const { return details_; }
    // Blocks until the page is complete and parsed; throws RequestFailure, or std::invalid_argument for an
    // answer that is no ListObjectsV2 result. Call once.
    ListObjectsPage wait();

private:
    struct Parsed {
        std::mutex mutex;
        std::condition_variable changed;
        bool ready = false;  // the tag was pushed (parsed, or failed)
        ListObjectsPage page;
        std::exception_ptr error;
    };
    // Held, and destroyed last, as an ObjectStream holds its client: a page whose Python object outlived the
    // client's (both freed in one garbage collection, in any order) made the client's destructor wait for a
    // request it still held, then give up after 10 s.
    std::shared_ptr<S3Client> client_;
    std::shared_ptr<Parsed> parsed_;
    bool details_;
    PendingBodyRequest request_;
};

// Parses a ListObjectsV2 XML document (exposed for tests and fuzzing). Throws std::invalid_argument if the
// document is not a ListBucketResult.
ListObjectsPage parse_list_objects_v2(const std::string& document, bool details = false);

}  // namespace torchdata_s3
