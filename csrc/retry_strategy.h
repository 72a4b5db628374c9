// The S3 client's retry strategy: the CRT's own (standard, or single_attempt_retry.h's) decides whether and
// after what backoff a failed request is tried again, and counts attempts against max_retries; this wrapper
// adds two policies of ours.
// - Stop retrying what another attempt cannot fix: a TLS handshake failing for good (tls_failures.h) or a
//   proxy refusing the tunnel (proxy_tunnel.h). The S3 client then fails the request with that error.
// - Pace requests after throttling (send_pacer.h): when an endpoint answers 503 SlowDown, every attempt that
//   follows, first attempts and retries alike, waits for its slot at the client's adapted rate before it is
//   sent. A throttled request is retried at its slot, without the inner strategy's backoff or retry quota,
//   up to max_throttle_retries times (apart from max_retries: being told to slow down is no failure). Without pacing,
//   each of the client's concurrent requests retries on its own backoff, most retries meet another 503, a request that
//   meets max_retries + 1 of them in a row fails the read or the upload, and the standard strategy's shared retry quota
//   drains.
#pragma once

#include <cstdint>

struct aws_allocator;
struct aws_event_loop_group;
struct aws_retry_strategy;

namespace torchdata_s3 {

class ProxyWatch;
class SendPacer;
class TlsHandshakeWatch;

struct RetryPolicies {
    const TlsHandshakeWatch* tls_watch = nullptr;      // null without TLS
    const ProxyWatch* proxy_watch = nullptr;           // null without a proxy tunnel
    SendPacer* pacer = nullptr;                        // null: no pacing
    aws_event_loop_group* event_loop_group = nullptr;  // where paced requests wait; required with a pacer
    uint32_t max_throttle_retries = 0;                 // retries per request for throttling, with a pacer
};

// Wraps `inner` (takes its own reference). Whatever `policies` points to must outlive the strategy's use.
// A new reference, or nullptr with the CRT error raised.
aws_retry_strategy* new_client_retry_strategy(aws_allocator* allocator, aws_retry_strategy* inner,
                                              const RetryPolicies& policies);

}  // namespace torchdata_s3
