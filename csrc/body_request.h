// A request whose whole (small) answer we want in memory: ListObjectsV2 pages, HeadObject, DeleteObject,
// CopyObject; and the transfers between a local file and an object, whose bytes the CRT moves itself.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "meta_request.h"
#include "s3_client.h"

namespace torchdata_s3 {

struct BodyRequest {
    std::string method = "GET";  // GET, HEAD, DELETE; PUT for a copy
    std::string operation;       // e.g. "ListObjectsV2": names the request in errors and to the CRT
    std::string bucket;
    std::string key;                                           // for error messages; may be a prefix
    std::string encoded_suffix;                                // path/query after the bucket, already URI-encoded
    uint32_t timeout_ms = 0;                                   // 0: wait as long as it takes
    std::vector<std::pair<std::string, std::string>> headers;  // added as given
    std::string body;  // non-empty: sent as the request's body, with its Content-Length
    // Non-empty: a CopyObject (the CRT's copy meta request: CopyObject, or UploadPartCopy parts for a large
    // source) of the object at this URI (scheme://host[:port]/path, as this client addresses it).
    std::string copy_source_uri;
    // Non-empty: a GetObject whose body the CRT writes into this (new or replaced) file, parts in parallel at
    // their own offsets; the file is deleted if the request fails.
    std::string recv_filepath;
    // With recv_filepath: write the parts with O_DIRECT, past the page cache (the CRT falls back to buffered
    // writes where the file system or an unaligned part refuses it).
    bool direct_io = false;
    // Non-empty: a PutObject whose body the CRT reads from this file (parallel parts above the multipart
    // threshold).
    std::string send_filepath;
    uint32_t max_connections = 0;  // non-zero: at most this many of the client's connections at once
};

// A request about one object: `method` on the object `key` of `bucket`.
BodyRequest object_request(const std::string& method, const std::string& operation, const std::string& bucket,
                           const std::string& key, uint32_t timeout_ms);

struct BodyResponse {
    int status = 0;
    std::vector<std::pair<std::string, std::string>> headers;  // as received
    std::string body;

    // The value of header `name` (case-insensitive), or "" when absent.
    std::string header(const std::string& name) const;
};

struct BodyRequestState;

// Called once when a body request finishes, on a CRT thread, under the request's lock: with the complete
// response, or with nullptr if the request failed. It must not call back into the request. It may take the
// body (wait() then returns the response without it).
using BodyRequestDone = std::function<void(BodyResponse* response)>;

// A body request in flight; `on_done` (optional) sees its outcome first.
class PendingBodyRequest {
public:
    PendingBodyRequest(S3Client& client, const BodyRequest& request, BodyRequestDone on_done = {});
    ~PendingBodyRequest();  // cancels it if it has not finished
    PendingBodyRequest(const PendingBodyRequest&) = delete;
    PendingBodyRequest& operator=(const PendingBodyRequest&) = delete;

    bool done();
    // Blocks until the answer is complete (the caller releases the GIL); throws RequestFailure on any failure,
    // including an error status and running out of request.timeout_ms. Call once.
    BodyResponse wait();
    void cancel();

private:
    std::shared_ptr<BodyRequestState> state_;
    MetaRequest meta_;
    uint32_t timeout_ms_;
};

// Sends the request and returns the answer. Blocks the calling thread (the caller releases the GIL); throws
// RequestFailure on any failure, including an error status and a timeout.
BodyResponse perform_body_request(S3Client& client, const BodyRequest& request);

}  // namespace torchdata_s3
