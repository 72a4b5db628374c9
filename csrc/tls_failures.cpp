#include "tls_failures.h"

#include <aws/common/atomics.h>
#include <aws/io/io.h>
#include <aws/io/retry_strategy.h>
#include <s2n.h>

#include <mutex>

#include "proxy_tunnel.h"

// s2n's blinding delay, and why it applies after the handshake only.
//
// When s2n rejects what the peer sent, it picks a delay, uniform in 10-30 s by default, and aws-c-io holds the
// close of that connection for that long (S2N_SELF_SERVICE_BLINDING). The delay defeats timing attacks that
// measure how long a rejection took: Lucky 13 against CBC record decryption, which the CRT's default security
// policy (AWS-CRT-SDK-TLSv1.0-2025-PQ) still offers for servers that want it. So it is not simply turned off:
// - After the handshake, what s2n rejects is a record that does not decrypt or authenticate: exactly what such
//   an attack sends. s2n's default delay stays. It holds back only that connection's close: aws-c-http fails
//   the request at once and the S3 client retries it on another connection after the retry strategy's
//   jittered backoff (uniform over at least 0-500 ms, far wider than the microseconds such an attack
//   resolves), so readers do not wait and the exit of the process does not either
//   (tests/integration/test_tls_blinding.py).
// - During the handshake, the client rejects what the server presented: a certificate it does not trust, a
//   wrong host name or date, a protocol it refuses, bytes that are not TLS. The server knows all of that
//   already, so the time the rejection takes reveals nothing; a tampered handshake record is keyed to that one
//   handshake, so it cannot be replayed to average out noise. And here the delay hurts: the S3 client hears of
//   a failed connection only once it has closed, so every bad certificate cost 10-30 s (and a retry) before
//   its error. A patch of aws-c-io (cmake/AwsCrtPatches.cmake) applies the delay only to connections whose
//   handshake had succeeded (tests/integration/test_tls.py: each handshake failure within seconds).

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
