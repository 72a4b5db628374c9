// ListObjectsV2, one page per call.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "s3_client.h"

namespace torchdata_s3 {

struct ObjectSummary {
    std::string key;
    uint64_t size = 0;
    std::string etag;
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
};

ListObjectsPage list_objects_v2(S3Client& client, const ListObjectsRequest& request);

// Parses a ListObjectsV2 XML document (exposed for tests and fuzzing). Throws std::invalid_argument if the
// document is not a ListBucketResult.
ListObjectsPage parse_list_objects_v2(const std::string& document);

}  // namespace torchdata_s3
