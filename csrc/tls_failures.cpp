#include "tls_failures.h"

#include <aws/common/atomics.h>
#include <aws/io/retry_strategy.h>
#include <aws/io/tls_channel_handler.h>
#include <s2n.h>

#include <mutex>

#include "proxy_tunnel.h"

namespace torchdata_s3 {
namespace {

std::mutex g_latest_mutex;
TlsHandshakeFailure g_latest;  // guarded by g_latest_mutex

// s2n's protocol errors (bad certificate, unexpected bytes) and the peer's fatal alerts come from what the
// server presents: the same server presents the same thing to the next attempt. I/O and closed-connection
// errors can be transient, and are left to the retry strategy.
bool is_permanent(int s2n_error) {
    const int type = s2n_error_get_type(s2n_error);
    return type == S2N_ERR_T_PROTO || type == S2N_ERR_T_ALERT;
}

}  // namespace

void TlsHandshakeWatch::record_outcome(int error_code, int s2n_error) {
    if (error_code == AWS_ERROR_SUCCESS) {
        failing_for_good_.store(false, std::memory_order_release);
        return;
    }
    TlsHandshakeFailure failure;
    failure.endpoint = endpoint_;
    if (s2n_error != 0) {
        failure.reason_name = s2n_strerror_name(s2n_error);
        failure.reason_message = s2n_strerror(s2n_error, "EN");
    }
    record_failure(std::move(failure), s2n_error != 0 && is_permanent(s2n_error));
}

void TlsHandshakeWatch::record_not_tls(const std::string& first_bytes) {
    TlsHandshakeFailure failure;
    failure.endpoint = endpoint_;
    failure.reason_name = kNotTlsReason;
    // The first line, as far as it is text: for an HTTP server, its status line.
    for (char c : first_bytes) {
        if (c == '\r' || c == '\n') break;
        failure.reason_message += (c >= 0x20 && c < 0x7f) ? c : '?';
    }
    // The same server answers the next attempt the same way.
    record_failure(std::move(failure), true);
}

void TlsHandshakeWatch::record_failure(TlsHandshakeFailure failure, bool permanent) {
    {
        std::lock_guard<std::mutex> lock(g_latest_mutex);
        g_latest = std::move(failure);
    }
    // Set after the record, and before aws-c-io reports the failure to the S3 client (which then asks the
    // retry strategy): the refusal is in place when the retry is asked for.
    failing_for_good_.store(permanent, std::memory_order_release);
}

TlsHandshakeFailure latest_tls_handshake_failure() {
    std::lock_guard<std::mutex> lock(g_latest_mutex);
    return g_latest;
}

namespace {

// aws-c-io's s2n context begins with the public aws_tls_ctx (whose impl points back at the context itself)
// followed by its s2n_config. aws-c-io offers no setter for the blinding delay, so it is set on that config.
struct S2nContextPrefix {
    aws_tls_ctx ctx;
    s2n_config* config;
};

s2n_config* s2n_config_of(aws_tls_ctx* ctx) {
    // The layout check: the context's impl is the context itself (see the pinned aws-c-io's s2n handler).
    if (ctx == nullptr || ctx->impl != static_cast<void*>(ctx)) return nullptr;
    return reinterpret_cast<S2nContextPrefix*>(ctx)->config;
}

}  // namespace

bool enable_multi_record_reads(aws_tls_ctx* ctx) {
    s2n_config* config = s2n_config_of(ctx);
    // aws-c-io hands s2n_recv a channel message of up to the process's message size (crt_runtime.cpp raises
    // it to 256 KiB), but s2n returns one TLS record (at most 16 KiB) per call unless told it may return
    // several: without this, TLS would undo the larger messages, each record costing a trip through the
    // HTTP and S3 layers.
    return config != nullptr && s2n_config_set_recv_multi_record(config, true) == S2N_SUCCESS;
}

bool disable_blinding_delay(aws_tls_ctx* ctx) {
    s2n_config* config = s2n_config_of(ctx);
    if (config == nullptr) return false;
    // Blinding hides from a peer how long a failed check took, against timing attacks that need millions of
    // failed attempts (Lucky 13). A client that gives up after max_retries attempts per request never offers
    // those; what it would cost is a 10-30 s wait before every TLS error reaches the user.
    return s2n_config_set_max_blinding_delay(config, 0) == S2N_SUCCESS;
}

namespace {

struct TlsAwareStrategy {
    aws_retry_strategy base;
    aws_retry_strategy* inner;
    const TlsHandshakeWatch* watch;
    const ProxyWatch* proxy_watch;  // null without a proxy
};

// Our token wraps one of the inner strategy's; token.impl is the inner token.
aws_retry_token* inner_token_of(aws_retry_token* token) { return static_cast<aws_retry_token*>(token->impl); }

struct PendingAcquire {
    aws_retry_strategy* outer;
    aws_retry_strategy_on_retry_token_acquired_fn* on_acquired;
    void* user_data;
};

struct PendingRetry {
    aws_retry_token* outer_token;
    aws_retry_strategy_on_retry_ready_fn* retry_ready;
    void* user_data;
};

void destroy_strategy(aws_retry_strategy* strategy) {
    auto* self = static_cast<TlsAwareStrategy*>(strategy->impl);
    aws_retry_strategy_release(self->inner);
    aws_mem_release(strategy->allocator, self);
}

void on_inner_token(aws_retry_strategy*, int error_code, aws_retry_token* inner_token, void* user_data) {
    auto* pending = static_cast<PendingAcquire*>(user_data);
    aws_retry_strategy* outer = pending->outer;
    auto* on_acquired = pending->on_acquired;
    void* caller_data = pending->user_data;
    aws_mem_release(outer->allocator, pending);
    if (error_code != AWS_ERROR_SUCCESS) {
        on_acquired(outer, error_code, nullptr, caller_data);
        return;
    }
    auto* token = static_cast<aws_retry_token*>(aws_mem_calloc(outer->allocator, 1, sizeof(aws_retry_token)));
    if (token == nullptr) {
        aws_retry_token_release(inner_token);
        on_acquired(outer, aws_last_error(), nullptr, caller_data);
        return;
    }
    token->allocator = outer->allocator;
    token->retry_strategy = outer;
    token->impl = inner_token;
    aws_atomic_init_int(&token->ref_count, 1);
    aws_retry_strategy_acquire(outer);  // released with the token
    on_acquired(outer, AWS_ERROR_SUCCESS, token, caller_data);
}

int acquire_token(aws_retry_strategy* strategy, const aws_byte_cursor* partition_id,
                  aws_retry_strategy_on_retry_token_acquired_fn* on_acquired, void* user_data, uint64_t timeout_ms) {
    auto* self = static_cast<TlsAwareStrategy*>(strategy->impl);
    auto* pending = static_cast<PendingAcquire*>(aws_mem_calloc(strategy->allocator, 1, sizeof(PendingAcquire)));
    if (pending == nullptr) return AWS_OP_ERR;
    *pending = PendingAcquire{strategy, on_acquired, user_data};
    if (aws_retry_strategy_acquire_retry_token(self->inner, partition_id, on_inner_token, pending, timeout_ms) !=
        AWS_OP_SUCCESS) {
        aws_mem_release(strategy->allocator, pending);
        return AWS_OP_ERR;
    }
    return AWS_OP_SUCCESS;
}

void on_inner_retry_ready(aws_retry_token*, int error_code, void* user_data) {
    auto* pending = static_cast<PendingRetry*>(user_data);
    aws_retry_token* outer_token = pending->outer_token;
    auto* retry_ready = pending->retry_ready;
    void* caller_data = pending->user_data;
    aws_mem_release(outer_token->allocator, pending);
    retry_ready(outer_token, error_code, caller_data);
}

int schedule_retry(aws_retry_token* token, aws_retry_error_type error_type,
                   aws_retry_strategy_on_retry_ready_fn* retry_ready, void* user_data) {
    auto* self = static_cast<TlsAwareStrategy*>(token->retry_strategy->impl);
    // The S3 client then fails the request with the error that asked for the retry (the TLS error, or the
    // refused CONNECT).
    if (self->watch->failing_for_good() || (self->proxy_watch != nullptr && self->proxy_watch->refusing_for_good())) {
        return aws_raise_error(AWS_IO_MAX_RETRIES_EXCEEDED);
    }
    auto* pending = static_cast<PendingRetry*>(aws_mem_calloc(token->allocator, 1, sizeof(PendingRetry)));
    if (pending == nullptr) return AWS_OP_ERR;
    *pending = PendingRetry{token, retry_ready, user_data};
    if (aws_retry_strategy_schedule_retry(inner_token_of(token), error_type, on_inner_retry_ready, pending) !=
        AWS_OP_SUCCESS) {
        aws_mem_release(token->allocator, pending);
        return AWS_OP_ERR;
    }
    return AWS_OP_SUCCESS;
}

int record_success(aws_retry_token* token) { return aws_retry_token_record_success(inner_token_of(token)); }

void release_token(aws_retry_token* token) {
    aws_retry_strategy* strategy = token->retry_strategy;
    aws_retry_token_release(inner_token_of(token));
    aws_mem_release(token->allocator, token);
    aws_retry_strategy_release(strategy);
}

aws_retry_strategy_vtable tls_aware_vtable = {
    destroy_strategy, acquire_token, schedule_retry, record_success, release_token,
};

}  // namespace

aws_retry_strategy* new_tls_aware_retry_strategy(aws_allocator* allocator, aws_retry_strategy* inner,
                                                 const TlsHandshakeWatch* watch, const ProxyWatch* proxy_watch) {
    auto* self = static_cast<TlsAwareStrategy*>(aws_mem_calloc(allocator, 1, sizeof(TlsAwareStrategy)));
    if (self == nullptr) return nullptr;
    self->base.allocator = allocator;
    self->base.vtable = &tls_aware_vtable;
    self->base.impl = self;
    aws_atomic_init_int(&self->base.ref_count, 1);
    self->inner = inner;
    aws_retry_strategy_acquire(inner);
    self->watch = watch;
    self->proxy_watch = proxy_watch;
    return &self->base;
}

}  // namespace torchdata_s3
