#include "request_message.h"

#include <aws/http/request_response.h>
#include <aws/s3/s3_client.h>

#include <stdexcept>

#include "s3_client.h"

namespace torchdata_s3 {

RequestMessage::RequestMessage(const S3Client& client, const std::string& method, const std::string& bucket,
                               const std::string& encoded_suffix) {
    client.endpoint_for(bucket, &endpoint_);
    try {
        message_ = client.new_message(method, bucket, encoded_suffix);
        // The CRT copies this header into every request it derives (parts, CreateMultipartUpload, HEAD, ...).
        if (client.options().requester_pays) add_header("x-amz-request-payer", "requester");
    } catch (...) {
        aws_http_message_release(message_);  // the destructor does not run for a constructor that throws
        aws_uri_clean_up(&endpoint_);
        throw;
    }
}

RequestMessage::~RequestMessage() {
    aws_http_message_release(message_);
    aws_uri_clean_up(&endpoint_);
}

void RequestMessage::add_header(const char* name, const std::string& value) {
    aws_http_header header = {};
    header.name = aws_byte_cursor_from_c_str(name);
    header.value = aws_byte_cursor_from_array(value.data(), value.size());
    if (aws_http_message_add_header(message_, header) != AWS_OP_SUCCESS) {
        throw std::runtime_error(std::string("adding the header ") + name + ": " + aws_error_name(aws_last_error()));
    }
}

void RequestMessage::describe(aws_s3_meta_request_options& options) {
    options.message = message_;
    options.endpoint = &endpoint_;
}

}  // namespace torchdata_s3
