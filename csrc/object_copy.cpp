#include "object_copy.h"

#include <aws/common/uri.h>

#include <memory>
#include <stdexcept>

#include "body_request.h"

namespace torchdata_s3 {

void copy_object(S3Client& client, const std::string& source_bucket, const std::string& source_key,
                 const std::string& bucket, const std::string& key, uint32_t timeout_ms) {
    const std::string source_suffix = "/" + S3Client::encode_path(source_key);
    BodyRequest request = object_request("PUT", "CopyObject", bucket, key, timeout_ms);
    request.headers.emplace_back("x-amz-copy-source", "/" + S3Client::encode_path(source_bucket) + source_suffix);

    // Where the source is, as this client addresses it: without it the CRT assumes a virtual-hosted endpoint
    // and derives the source's host from the destination's, which is wrong for path-style endpoints.
    aws_uri endpoint;
    client.endpoint_for(source_bucket, &endpoint);
    std::unique_ptr<aws_uri, void (*)(aws_uri*)> release(&endpoint, aws_uri_clean_up);
    const aws_byte_cursor scheme = *aws_uri_scheme(&endpoint);
    const aws_byte_cursor host = *aws_uri_host_name(&endpoint);
    request.copy_source_uri = std::string(reinterpret_cast<const char*>(scheme.ptr), scheme.len) + "://" +
                              std::string(reinterpret_cast<const char*>(host.ptr), host.len);
    if (aws_uri_port(&endpoint) != 0) request.copy_source_uri += ":" + std::to_string(aws_uri_port(&endpoint));
    request.copy_source_uri += client.request_path(source_bucket, source_suffix);

    perform_body_request(client, request);
}

}  // namespace torchdata_s3
