#include "request_failure.h"

#include <aws/common/byte_buf.h>
#include <aws/common/error.h>
#include <aws/common/xml_parser.h>
#include <aws/s3/s3_client.h>

#include "proxy_tunnel.h"
#include "tls_failures.h"
#include "xml_text.h"

namespace torchdata_s3 {
namespace {

struct ErrorDocument {
    std::string code;
    std::string message;
};

int on_error_child(aws_xml_node* node, void* user_data) {
    auto* doc = static_cast<ErrorDocument*>(user_data);
    const aws_byte_cursor name = aws_xml_node_get_name(node);
    if (aws_byte_cursor_eq_c_str(&name, "Code")) return xml_node_text(node, &doc->code);
    if (aws_byte_cursor_eq_c_str(&name, "Message")) return xml_node_text(node, &doc->message);
    return AWS_OP_SUCCESS;
}

int on_error_root(aws_xml_node* node, void* user_data) {
    const aws_byte_cursor name = aws_xml_node_get_name(node);
    if (!aws_byte_cursor_eq_c_str(&name, "Error")) return AWS_OP_SUCCESS;
    return aws_xml_node_traverse(node, on_error_child, user_data);
}

}  // namespace

void parse_s3_error_document(const aws_byte_buf* body, std::string* code, std::string* message) {
    if (body == nullptr || body->len == 0) return;
    ErrorDocument doc;
    if (!parse_xml(aws_byte_cursor_from_buf(body), 8, on_error_root, &doc)) return;
    *code = std::move(doc.code);
    *message = std::move(doc.message);
}

RequestFailure RequestFailure::from_result(const aws_s3_meta_request_result& result, std::string operation,
                                           std::string bucket, std::string key) {
    RequestFailure failure;
    failure.kind = Kind::crt;
    failure.crt_error_code = result.error_code;
    failure.crt_error_name = aws_error_name(result.error_code);
    failure.crt_error_message = aws_error_str(result.error_code);
    failure.http_status = result.response_status;
    parse_s3_error_document(result.error_response_body, &failure.s3_error_code, &failure.s3_error_message);
    if (result.error_response_operation_name != nullptr) {
        failure.operation.assign(aws_string_c_str(result.error_response_operation_name),
                                 result.error_response_operation_name->len);
    } else {
        failure.operation = std::move(operation);
    }
    failure.bucket = std::move(bucket);
    failure.key = std::move(key);
    if (failure.crt_error_name.rfind("AWS_IO_TLS_", 0) == 0) {
        TlsHandshakeFailure handshake = latest_tls_handshake_failure();
        failure.tls_endpoint = std::move(handshake.endpoint);
        failure.tls_reason = std::move(handshake.reason_name);
        failure.tls_reason_message = std::move(handshake.reason_message);
    }
    if (failure.crt_error_name.rfind("AWS_ERROR_HTTP_PROXY_CONNECT_FAILED", 0) == 0) {
        ProxyRefusal refusal = latest_proxy_refusal();
        failure.proxy = std::move(refusal.proxy);
        failure.proxy_status = refusal.status;
    }
    return failure;
}

const char* RequestFailure::what() const noexcept {
    what_ = operation + " s3://" + bucket + "/" + key + " failed: ";
    if (!s3_error_code.empty()) what_ += s3_error_code + " ";
    if (http_status != 0) what_ += "(HTTP " + std::to_string(http_status) + ") ";
    what_ += detail.empty() ? crt_error_name : detail;
    return what_.c_str();
}

}  // namespace torchdata_s3
