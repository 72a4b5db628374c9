#include "tls_failures.h"

#include <aws/common/error.h>
#include <s2n.h>

#include <mutex>

#include "fork_safe_mutex.h"

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

ForkSafeMutex g_latest_mutex;
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
        std::lock_guard<ForkSafeMutex> lock(g_latest_mutex);
        g_latest = std::move(failure);
    }
    // Set after the record, and before aws-c-io reports the failure to the S3 client (which then asks the
    // retry strategy): the refusal is in place when the retry is asked for.
    failing_for_good_.store(permanent, std::memory_order_release);
}

TlsHandshakeFailure latest_tls_handshake_failure() {
    std::lock_guard<ForkSafeMutex> lock(g_latest_mutex);
    return g_latest;
}

}  // namespace torchdata_s3
