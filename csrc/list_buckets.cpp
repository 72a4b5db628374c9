#include "list_buckets.h"

#include <aws/common/xml_parser.h>

#include <stdexcept>

#include "body_request.h"
#include "xml_text.h"

namespace torchdata_s3 {
namespace {

int on_bucket_child(aws_xml_node* node, void* user_data) {
    auto* bucket = static_cast<BucketSummary*>(user_data);
    if (xml_name_is(node, "Name")) return xml_node_text(node, &bucket->name);
    if (xml_name_is(node, "CreationDate")) return xml_node_text(node, &bucket->creation_date);
    return AWS_OP_SUCCESS;
}

int on_buckets_child(aws_xml_node* node, void* user_data) {
    if (!xml_name_is(node, "Bucket")) return AWS_OP_SUCCESS;
    auto* page = static_cast<ListBucketsPage*>(user_data);
    page->buckets.emplace_back();
    return aws_xml_node_traverse(node, on_bucket_child, &page->buckets.back());
}

int on_result_child(aws_xml_node* node, void* user_data) {
    auto* page = static_cast<ListBucketsPage*>(user_data);
    if (xml_name_is(node, "Buckets")) return aws_xml_node_traverse(node, on_buckets_child, page);
    if (xml_name_is(node, "ContinuationToken")) return xml_node_text(node, &page->continuation_token);
    return AWS_OP_SUCCESS;
}

struct ParseContext {
    ListBucketsPage* page;
    bool saw_result = false;
};

int on_root(aws_xml_node* node, void* user_data) {
    auto* context = static_cast<ParseContext*>(user_data);
    if (!xml_name_is(node, "ListAllMyBucketsResult")) return aws_raise_error(AWS_ERROR_INVALID_ARGUMENT);
    context->saw_result = true;
    return aws_xml_node_traverse(node, on_result_child, context->page);
}

}  // namespace

ListBucketsPage parse_list_buckets(const std::string& document) {
    ListBucketsPage page;
    ParseContext context{&page};
    if (!parse_xml(aws_byte_cursor_from_array(document.data(), document.size()), 16, on_root, &context) ||
        !context.saw_result) {
        throw std::invalid_argument(std::string("malformed ListBuckets response: ") + aws_error_name(aws_last_error()));
    }
    return page;
}

ListBucketsPage list_buckets(S3Client& client, const std::string& continuation_token, uint32_t timeout_ms) {
    BodyRequest request;
    request.operation = "ListBuckets";
    // No bucket: the request goes to the endpoint itself (see S3Client::host_for).
    request.encoded_suffix = "/";
    if (!continuation_token.empty()) {
        request.encoded_suffix += "?continuation-token=" + S3Client::encode_query_value(continuation_token);
    }
    request.timeout_ms = timeout_ms;
    return parse_list_buckets(perform_body_request(client, request).body);
}

}  // namespace torchdata_s3
