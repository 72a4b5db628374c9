// CopyObject: an object copied by S3 itself, its bytes never passing through this process.
#pragma once

#include <cstdint>
#include <string>

#include "s3_client.h"

namespace torchdata_s3 {

// Copies s3://source_bucket/source_key to s3://bucket/key within the client's endpoint (the CRT sends one
// CopyObject, or UploadPartCopy parts for a source of 1 GB or more). Blocks (the caller releases the GIL);
// throws RequestFailure on any failure, including a missing source and a timeout.
void copy_object(S3Client& client, const std::string& source_bucket, const std::string& source_key,
                 const std::string& bucket, const std::string& key, uint32_t timeout_ms);

}  // namespace torchdata_s3
