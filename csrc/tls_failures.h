// TLS handshake failures: their cause, and failing fast on them.
//
// The CRT reports every failed handshake as AWS_IO_TLS_ERROR_NEGOTIATION_FAILURE and only logs s2n's reason
// (untrusted certificate, wrong host, expired, not TLS at all), and the S3 client retries the connection, up
// to max_retries times, although a certificate the client does not trust will not become trusted by
// retrying. This file records s2n's reason as the handshake fails (on the event loop thread, where s2n_errno
// is still set), and whether a retry could fix it: the client's retry strategy (retry_strategy.h) stops
// retrying while it cannot.
//
// s2n's blinding delay is kept after the handshake and skipped during it: why, in tls_failures.cpp.
#pragma once

#include <atomic>
#include <string>

namespace torchdata_s3 {

struct TlsHandshakeFailure {
    std::string endpoint;        // "host:port" the handshake was with
    std::string reason_name;     // s2n's error name, e.g. "S2N_ERR_CERT_UNTRUSTED"; empty if none recorded
    std::string reason_message;  // s2n's sentence for it
};

// The handshakes of one client (tls_handshake_hook.h routes them here). CRT threads call into it until the
// client's shutdown completes.
class TlsHandshakeWatch {
public:
    explicit TlsHandshakeWatch(std::string endpoint) : endpoint_(std::move(endpoint)) {}
    TlsHandshakeWatch(const TlsHandshakeWatch&) = delete;
    TlsHandshakeWatch& operator=(const TlsHandshakeWatch&) = delete;

    // A handshake ended: `error_code` is aws-c-io's, `s2n_error` s2n's reason (0 if none), read on the thread
    // where the handshake failed.
    void record_outcome(int error_code, int s2n_error);
    // The server's first bytes were not a TLS record (e.g. "HTTP/1.1 400 Bad Request"): it does not speak TLS.
    void record_not_tls(const std::string& first_bytes);

    // True from a handshake failure that another attempt cannot fix (a certificate or protocol error, a
    // server that does not speak TLS) until the next handshake that succeeds.
    bool failing_for_good() const { return failing_for_good_.load(std::memory_order_acquire); }

private:
    void record_failure(TlsHandshakeFailure failure, bool permanent);

    const std::string endpoint_;
    std::atomic<bool> failing_for_good_{false};
};

// The reason recorded for a server that answered the handshake with something other than TLS.
constexpr const char* kNotTlsReason = "NOT_TLS";

// The latest handshake failure in this process, whichever client had it: a request that failed with a TLS
// error is described with it. (Two clients failing at once against different endpoints could swap reasons;
// the endpoint is recorded so that a message never names the wrong host.)
TlsHandshakeFailure latest_tls_handshake_failure();

}  // namespace torchdata_s3
