// What a failed S3 request tells us, gathered on a CRT thread and thrown on the caller's.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

struct aws_byte_buf;
struct aws_s3_meta_request_result;

namespace torchdata_s3 {

struct RequestFailure : std::exception {
    enum class Kind {
        crt,          // the CRT reported an error (network, TLS, HTTP status, ...): see crt_error_*
        timed_out,    // no progress for request_timeout_ms; we cancelled the request
        short_body,   // the body ended before the announced length: never hand out such bytes
        out_of_order  // body data arrived at an offset other than the next expected one
    };

    Kind kind = Kind::crt;
    int crt_error_code = 0;
    std::string crt_error_name;     // e.g. "AWS_ERROR_S3_INVALID_RESPONSE_STATUS"
    std::string crt_error_message;  // the CRT's sentence for it
    int http_status = 0;            // 0 when no HTTP answer was received
    std::string s3_error_code;      // from the S3 error document, e.g. "NoSuchKey"
    std::string s3_error_message;
    std::string operation;  // "GetObject", "ListObjectsV2", ...
    std::string bucket;
    std::string key;
    std::string detail;  // our own explanation for the non-CRT kinds
    // For a TLS error: the latest failed handshake's endpoint ("host:port") and s2n's reason (see tls_failures.h).
    std::string tls_endpoint;
    std::string tls_reason;  // e.g. "S2N_ERR_CERT_UNTRUSTED"
    std::string tls_reason_message;
    // For a refused CONNECT: the latest refusing proxy ("host:port") and its answer (see proxy_tunnel.h).
    std::string proxy;
    int proxy_status = 0;

    const char* what() const noexcept override;

    // Builds a failure from a finished meta request. Must run inside the finish callback, where the error
    // body and headers are still valid.
    static RequestFailure from_result(const aws_s3_meta_request_result& result, std::string operation,
                                      std::string bucket, std::string key);

private:
    mutable std::string what_;
};

// Extracts <Code> and <Message> from an S3 XML error document; leaves the outputs empty if it is not one.
void parse_s3_error_document(const aws_byte_buf* body, std::string* code, std::string* message);

}  // namespace torchdata_s3
