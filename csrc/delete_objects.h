// DeleteObjects: up to 1,000 keys of one bucket deleted by one request.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "s3_client.h"

namespace torchdata_s3 {

// At most this many keys per DeleteObjects request (S3's limit).
constexpr size_t kMaxKeysPerDelete = 1000;

// A key S3 did not delete, and why (S3's error code and message for it).
struct DeleteFailure {
    std::string key;
    std::string code;
    std::string message;
};

// Deletes `keys` (1 to kMaxKeysPerDelete) from `bucket` with one DeleteObjects request, in quiet mode: the
// answer names only the keys S3 could not delete, which are returned. Keys that do not exist count as
// deleted, as with DeleteObject. Blocks (the caller releases the GIL); throws RequestFailure if the request
// itself fails, std::invalid_argument for a key XML 1.0 cannot carry (control characters other than tab,
// line feed and carriage return: delete those one by one) or a malformed answer.
std::vector<DeleteFailure> delete_objects(S3Client& client, const std::string& bucket,
                                          const std::vector<std::string>& keys, uint32_t timeout_ms);

}  // namespace torchdata_s3
