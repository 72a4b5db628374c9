// A request whose whole (small) response body we want in memory: used for ListObjectsV2 pages.
#pragma once

#include <cstdint>
#include <string>

#include "s3_client.h"

namespace torchdata_s3 {

struct BodyRequest {
    std::string operation;  // e.g. "ListObjectsV2"
    std::string bucket;
    std::string key;             // for error messages; may be a prefix
    std::string encoded_suffix;  // path/query after the bucket, already URI-encoded
    uint32_t timeout_ms = 0;     // 0: wait as long as it takes
};

// Sends a GET and returns the response body. Blocks the calling thread (the caller releases the GIL);
// throws RequestFailure on any failure, including a timeout.
std::string perform_body_request(S3Client& client, const BodyRequest& request);

}  // namespace torchdata_s3
