#include "delete_objects.h"

#include <aws/cal/hash.h>
#include <aws/common/encoding.h>
#include <aws/common/xml_parser.h>

#include <stdexcept>

#include "body_request.h"
#include "xml_text.h"

namespace torchdata_s3 {
namespace {

// `text` as XML character data. Tab, line feed and carriage return are written as references, because an
// XML parser would otherwise normalise them (a key's "\r\n" would reach S3 as "\n" and delete another key).
void append_escaped(std::string* out, const std::string& key) {
    for (const char c : key) {
        switch (c) {
            case '&':
                *out += "&amp;";
                break;
            case '<':
                *out += "&lt;";
                break;
            case '>':
                *out += "&gt;";
                break;
            case '"':
                *out += "&quot;";
                break;
            case '\'':
                *out += "&apos;";
                break;
            case '\t':
                *out += "&#9;";
                break;
            case '\n':
                *out += "&#10;";
                break;
            case '\r':
                *out += "&#13;";
                break;
            default:
                if (static_cast<unsigned char>(c) < 0x20) {
                    throw std::invalid_argument("the key '" + key +
                                                "' holds a control character XML cannot carry: delete it alone");
                }
                *out += c;
        }
    }
}

// Content-MD5 of the body: S3 (and every S3-compatible store) requires it, or a flexible checksum, on
// DeleteObjects; the CRT adds neither for a request of its default type.
std::string content_md5(const std::string& body, aws_allocator* allocator) {
    const aws_byte_cursor input = aws_byte_cursor_from_array(body.data(), body.size());
    uint8_t digest[AWS_MD5_LEN];
    aws_byte_buf digest_buf = aws_byte_buf_from_empty_array(digest, sizeof(digest));
    if (aws_md5_compute(allocator, &input, &digest_buf, 0) != AWS_OP_SUCCESS) {
        throw std::runtime_error(std::string("MD5 of the DeleteObjects body: ") + aws_error_name(aws_last_error()));
    }
    const aws_byte_cursor digest_cursor = aws_byte_cursor_from_buf(&digest_buf);
    size_t encoded_len = 0;
    aws_base64_compute_encoded_len(digest_cursor.len, &encoded_len);
    std::string encoded(encoded_len + 1, '\0');  // room for a terminator, which some versions write
    aws_byte_buf encoded_buf = aws_byte_buf_from_empty_array(encoded.data(), encoded.size());
    if (aws_base64_encode(&digest_cursor, &encoded_buf) != AWS_OP_SUCCESS) {
        throw std::runtime_error(std::string("base64 of an MD5: ") + aws_error_name(aws_last_error()));
    }
    encoded.resize(encoded_buf.len);
    while (!encoded.empty() && encoded.back() == '\0') encoded.pop_back();
    return encoded;
}

struct ResultContext {
    std::vector<DeleteFailure> failures;
    bool saw_result = false;
    DeleteFailure whole;  // the answer was an <Error> document for the whole request
    bool saw_error = false;
};

int on_error_child(aws_xml_node* node, void* user_data) {
    auto* failure = static_cast<DeleteFailure*>(user_data);
    if (xml_name_is(node, "Key")) return xml_node_text(node, &failure->key);
    if (xml_name_is(node, "Code")) return xml_node_text(node, &failure->code);
    if (xml_name_is(node, "Message")) return xml_node_text(node, &failure->message);
    return AWS_OP_SUCCESS;
}

int on_result_child(aws_xml_node* node, void* user_data) {
    if (!xml_name_is(node, "Error")) return AWS_OP_SUCCESS;  // <Deleted> entries: none in quiet mode
    auto* context = static_cast<ResultContext*>(user_data);
    try {  // never let a C++ exception cross the parser's C frames
        DeleteFailure failure;
        if (aws_xml_node_traverse(node, on_error_child, &failure) != AWS_OP_SUCCESS) return AWS_OP_ERR;
        context->failures.push_back(std::move(failure));
    } catch (const std::exception&) {
        return aws_raise_error(AWS_ERROR_OOM);
    }
    return AWS_OP_SUCCESS;
}

int on_root(aws_xml_node* node, void* user_data) {
    auto* context = static_cast<ResultContext*>(user_data);
    if (xml_name_is(node, "Error")) {
        context->saw_error = true;
        return aws_xml_node_traverse(node, on_error_child, &context->whole);
    }
    if (!xml_name_is(node, "DeleteResult")) return aws_raise_error(AWS_ERROR_INVALID_ARGUMENT);
    context->saw_result = true;
    return aws_xml_node_traverse(node, on_result_child, context);
}

}  // namespace

std::vector<DeleteFailure> delete_objects(S3Client& client, const std::string& bucket,
                                          const std::vector<std::string>& keys, uint32_t timeout_ms) {
    if (keys.empty() || keys.size() > kMaxKeysPerDelete) {
        throw std::invalid_argument("DeleteObjects takes 1 to 1000 keys, not " + std::to_string(keys.size()));
    }
    BodyRequest request;
    request.method = "POST";
    request.operation = "DeleteObjects";
    request.bucket = bucket;
    request.key = keys.front();
    request.encoded_suffix = "/?delete";
    request.timeout_ms = timeout_ms;
    request.body =
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
        "<Delete xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Quiet>true</Quiet>";
    for (const std::string& key : keys) {
        request.body += "<Object><Key>";
        append_escaped(&request.body, key);
        request.body += "</Key></Object>";
    }
    request.body += "</Delete>";
    request.headers.emplace_back("Content-MD5", content_md5(request.body, client.allocator()));
    request.headers.emplace_back("Content-Type", "application/xml");

    const BodyResponse response = perform_body_request(client, request);
    ResultContext context;
    if (!parse_xml(aws_byte_cursor_from_array(response.body.data(), response.body.size()), 8, on_root, &context) ||
        !(context.saw_result || context.saw_error)) {
        throw std::invalid_argument(std::string("malformed DeleteObjects response: ") +
                                    aws_error_name(aws_last_error()));
    }
    if (context.saw_error) {
        throw std::invalid_argument("DeleteObjects was answered with an error document: " + context.whole.code + " - " +
                                    context.whole.message);
    }
    return std::move(context.failures);
}

}  // namespace torchdata_s3
