// ListBuckets: the buckets the caller owns, a page per request (S3 pages them when asked, and some
// S3-compatible stores always answer with one page).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "s3_client.h"

namespace torchdata_s3 {

struct BucketSummary {
    std::string name;
    std::string creation_date;  // ISO 8601, as S3 sends it
};

struct ListBucketsPage {
    std::vector<BucketSummary> buckets;
    std::string continuation_token;  // empty: the last page
};

// One ListBuckets page (`continuation_token` empty: the first). Throws RequestFailure, or
// std::invalid_argument for an answer that is not a ListAllMyBucketsResult.
ListBucketsPage list_buckets(S3Client& client, const std::string& continuation_token, uint32_t timeout_ms);

// Parses a ListBuckets XML document (exposed for tests). Throws std::invalid_argument if it is not one.
ListBucketsPage parse_list_buckets(const std::string& document);

}  // namespace torchdata_s3
