#include "proxy_tunnel.h"

#include <aws/common/encoding.h>
#include <aws/http/proxy.h>
#include <aws/http/request_response.h>

#include <mutex>

#include "fork_safe_mutex.h"

namespace torchdata_s3 {
namespace {

ForkSafeMutex g_latest_mutex;
ProxyRefusal g_latest;  // guarded by g_latest_mutex

struct WatchedStrategy {
    aws_http_proxy_strategy base;
    std::string authorization;  // the Proxy-Authorization value, or empty
    ProxyWatch* watch;
};

struct WatchedNegotiator {
    aws_http_proxy_negotiator base;
    WatchedStrategy* strategy;  // holds a reference
};

void transform_connect(aws_http_proxy_negotiator* negotiator, aws_http_message* message,
                       aws_http_proxy_negotiation_terminate_fn* terminate,
                       aws_http_proxy_negotiation_http_request_forward_fn* forward, void* internal_user_data) {
    auto* self = static_cast<WatchedNegotiator*>(negotiator->impl);
    const std::string& authorization = self->strategy->authorization;
    if (!authorization.empty()) {
        aws_http_header header = {};
        header.name = aws_byte_cursor_from_c_str("Proxy-Authorization");
        header.value = aws_byte_cursor_from_array(authorization.data(), authorization.size());
        if (aws_http_message_add_header(message, header) != AWS_OP_SUCCESS) {
            terminate(message, aws_last_error(), internal_user_data);
            return;
        }
    }
    forward(message, internal_user_data);
}

int on_connect_status(aws_http_proxy_negotiator* negotiator, aws_http_status_code status) {
    static_cast<WatchedNegotiator*>(negotiator->impl)->strategy->watch->record_connect_status(status);
    return AWS_OP_SUCCESS;
}

// No get_retry_directive: aws-c-http then never re-sends CONNECT by itself (the S3 client's retry strategy
// decides whether a new connection is worth it).
aws_http_proxy_negotiator_tunnelling_vtable g_tunnelling_vtable = {
    transform_connect, nullptr, on_connect_status, nullptr, nullptr,
};

void destroy_negotiator(void* value) {
    auto* self = static_cast<WatchedNegotiator*>(value);
    aws_http_proxy_strategy_release(&self->strategy->base);
    delete self;
}

aws_http_proxy_negotiator* create_negotiator(aws_http_proxy_strategy* strategy, aws_allocator*) {
    auto* self = new WatchedNegotiator();
    self->strategy = static_cast<WatchedStrategy*>(strategy->impl);
    aws_http_proxy_strategy_acquire(strategy);
    aws_ref_count_init(&self->base.ref_count, self, destroy_negotiator);
    self->base.impl = self;
    self->base.strategy_vtable.tunnelling_vtable = &g_tunnelling_vtable;
    return &self->base;
}

aws_http_proxy_strategy_vtable g_strategy_vtable = {create_negotiator};

void destroy_strategy(void* value) { delete static_cast<WatchedStrategy*>(value); }

std::string basic_authorization(const std::string& username, const std::string& password) {
    const std::string credentials = username + ":" + password;
    const aws_byte_cursor input = aws_byte_cursor_from_array(credentials.data(), credentials.size());
    size_t encoded_length = 0;
    if (aws_base64_compute_encoded_len(credentials.size(), &encoded_length) != AWS_OP_SUCCESS) return "";
    std::string encoded(encoded_length, '\0');
    aws_byte_buf output = aws_byte_buf_from_empty_array(&encoded[0], encoded.size());
    if (aws_base64_encode(&input, &output) != AWS_OP_SUCCESS) return "";
    encoded.resize(output.len);
    return "Basic " + encoded;
}

}  // namespace

void ProxyWatch::record_connect_status(int status) {
    if (status == AWS_HTTP_STATUS_CODE_200_OK) {
        refusing_for_good_.store(false, std::memory_order_release);
        return;
    }
    {
        std::lock_guard<ForkSafeMutex> lock(g_latest_mutex);
        g_latest = ProxyRefusal{proxy_, status};
    }
    // Credentials refused or missing, or a destination the proxy will not reach for us: the same answer to
    // every attempt. Other answers (502, 503, 504: the proxy could not reach the endpoint) may pass.
    const bool permanent = status == AWS_HTTP_STATUS_CODE_403_FORBIDDEN ||
                           status == AWS_HTTP_STATUS_CODE_407_PROXY_AUTHENTICATION_REQUIRED;
    refusing_for_good_.store(permanent, std::memory_order_release);
}

ProxyRefusal latest_proxy_refusal() {
    std::lock_guard<ForkSafeMutex> lock(g_latest_mutex);
    return g_latest;
}

aws_http_proxy_strategy* new_watched_tunnel_strategy(aws_allocator* allocator, const std::string& username,
                                                     const std::string& password, ProxyWatch* watch) {
    (void)allocator;  // C++ allocation: the CRT only ever releases the strategy through its ref count
    auto* self = new WatchedStrategy();
    self->watch = watch;
    if (!username.empty()) {
        self->authorization = basic_authorization(username, password);
        if (self->authorization.empty()) {
            delete self;
            return nullptr;
        }
    }
    aws_ref_count_init(&self->base.ref_count, self, destroy_strategy);
    self->base.vtable = &g_strategy_vtable;
    self->base.impl = self;
    self->base.proxy_connection_type = AWS_HPCT_HTTP_TUNNEL;
    return &self->base;
}

}  // namespace torchdata_s3
