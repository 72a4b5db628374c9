// One S3 request before it starts: its HTTP message and the endpoint it is sent to, made for a bucket by the
// client (addressing style, scheme, port) and released when this goes out of scope. A meta request takes its
// own references when it starts, so every operation (GET, PUT, the small body requests) builds one of these,
// adds its headers, points the CRT's options at it and lets it go, on success and on a throw alike.
#pragma once

#include <aws/common/uri.h>

#include <string>

struct aws_http_message;
struct aws_s3_meta_request_options;

namespace torchdata_s3 {

class S3Client;

class RequestMessage {
public:
    // `method`: "GET", "PUT", ...; `encoded_suffix`: the already encoded path-and-query relative to the bucket
    // (see S3Client::new_message).
    RequestMessage(const S3Client& client, const std::string& method, const std::string& bucket,
                   const std::string& encoded_suffix);
    ~RequestMessage();
    RequestMessage(const RequestMessage&) = delete;
    RequestMessage& operator=(const RequestMessage&) = delete;

    void add_header(const char* name, const std::string& value);
    aws_http_message* native() const { return message_; }
    // Points options.message and options.endpoint here: valid until this goes out of scope.
    void describe(aws_s3_meta_request_options& options);

private:
    aws_uri endpoint_;
    aws_http_message* message_ = nullptr;
};

}  // namespace torchdata_s3
