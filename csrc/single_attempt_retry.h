// A CRT retry strategy that never retries: what max_retries=0 asks for. The CRT's own strategies cannot say
// it (the S3 client and both backoff strategies read 0 as "the default", i.e. 5 retries), and its no-retry
// strategy refuses even the first attempt's token, which fails every S3 request before it is sent.
#pragma once

struct aws_allocator;
struct aws_retry_strategy;

namespace torchdata_s3 {

// A new reference (give it back with aws_retry_strategy_release), or nullptr with the CRT error raised.
aws_retry_strategy* new_single_attempt_retry_strategy(aws_allocator* allocator);

}  // namespace torchdata_s3
