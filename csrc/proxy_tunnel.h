// HTTPS through a proxy: the CONNECT that opens the tunnel, and what the proxy answered to it.
//
// aws-c-http reports a CONNECT the proxy refused only as AWS_ERROR_HTTP_PROXY_CONNECT_FAILED, without the
// status, and the S3 client retries it like a dropped connection, although a proxy that asks for credentials
// (407) or refuses the destination (403) answers the same to every attempt. The proxy strategy made here
// opens tunnels as aws-c-http's own would (CONNECT, with Basic credentials when given), records the proxy's
// answer, and tells the retry strategy (tls_failures.h) when retrying cannot help.
#pragma once

#include <atomic>
#include <string>

struct aws_allocator;
struct aws_http_proxy_strategy;

namespace torchdata_s3 {

struct ProxyRefusal {
    std::string proxy;  // "host:port" of the proxy
    int status = 0;     // its answer to CONNECT; 0 if none recorded
};

// The tunnels of one client. CRT threads call into it until the client's shutdown completes.
class ProxyWatch {
public:
    explicit ProxyWatch(std::string proxy) : proxy_(std::move(proxy)) {}
    ProxyWatch(const ProxyWatch&) = delete;
    ProxyWatch& operator=(const ProxyWatch&) = delete;

    void record_connect_status(int status);
    // True from a CONNECT answered 403 or 407 until the next one answered 200.
    bool refusing_for_good() const { return refusing_for_good_.load(std::memory_order_acquire); }

private:
    const std::string proxy_;
    std::atomic<bool> refusing_for_good_{false};
};

// The latest refused CONNECT in this process, whichever client had it: a request that failed with
// AWS_ERROR_HTTP_PROXY_CONNECT_FAILED is described with it.
ProxyRefusal latest_proxy_refusal();

// A tunnelling proxy strategy sending Basic credentials when `username` is not empty, reporting to `watch`
// (which must outlive the strategy's use). A new reference, or nullptr with the CRT error raised.
aws_http_proxy_strategy* new_watched_tunnel_strategy(aws_allocator* allocator, const std::string& username,
                                                     const std::string& password, ProxyWatch* watch);

}  // namespace torchdata_s3
