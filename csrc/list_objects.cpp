#include "list_objects.h"

#include <aws/common/xml_parser.h>

#include <chrono>
#include <stdexcept>

#include "body_request.h"
#include "decimal.h"
#include "xml_text.h"

namespace torchdata_s3 {
namespace {

int parse_size(aws_xml_node* node, uint64_t* out) {
    std::string text;
    if (xml_node_text(node, &text) != AWS_OP_SUCCESS) return AWS_OP_ERR;
    return parse_decimal_u64(text, out) ? AWS_OP_SUCCESS : aws_raise_error(AWS_ERROR_INVALID_ARGUMENT);
}

int on_contents_child(aws_xml_node* node, void* user_data) {
    auto* object = static_cast<ObjectSummary*>(user_data);
    if (xml_name_is(node, "Key")) return xml_node_text(node, &object->key);
    if (xml_name_is(node, "Size")) return parse_size(node, &object->size);
    if (xml_name_is(node, "ETag")) return xml_node_text(node, &object->etag);
    return AWS_OP_SUCCESS;
}

// The same and the details a file system shows (a string allocation more per key: only when asked).
int on_detailed_contents_child(aws_xml_node* node, void* user_data) {
    auto* object = static_cast<ObjectSummary*>(user_data);
    if (xml_name_is(node, "LastModified")) return xml_node_text(node, &object->last_modified);
    if (xml_name_is(node, "StorageClass")) return xml_node_text(node, &object->storage_class);
    return on_contents_child(node, user_data);
}

int on_common_prefix_child(aws_xml_node* node, void* user_data) {
    if (!xml_name_is(node, "Prefix")) return AWS_OP_SUCCESS;
    auto* page = static_cast<ListObjectsPage*>(user_data);
    page->common_prefixes.emplace_back();
    return xml_node_text(node, &page->common_prefixes.back());
}

struct ParseContext {
    ListObjectsPage* page;
    bool details;
    bool saw_result = false;
};

int on_result_child(aws_xml_node* node, void* user_data) {
    auto* context = static_cast<ParseContext*>(user_data);
    ListObjectsPage* page = context->page;
    if (xml_name_is(node, "Contents")) {
        page->objects.emplace_back();
        return aws_xml_node_traverse(node, context->details ? on_detailed_contents_child : on_contents_child,
                                     &page->objects.back());
    }
    if (xml_name_is(node, "CommonPrefixes")) return aws_xml_node_traverse(node, on_common_prefix_child, page);
    if (xml_name_is(node, "NextContinuationToken")) return xml_node_text(node, &page->next_continuation_token);
    if (xml_name_is(node, "IsTruncated")) {
        std::string text;
        if (xml_node_text(node, &text) != AWS_OP_SUCCESS) return AWS_OP_ERR;
        page->is_truncated = text == "true";
    }
    return AWS_OP_SUCCESS;
}

int on_root(aws_xml_node* node, void* user_data) {
    auto* context = static_cast<ParseContext*>(user_data);
    if (!xml_name_is(node, "ListBucketResult")) return aws_raise_error(AWS_ERROR_INVALID_ARGUMENT);
    context->saw_result = true;
    return aws_xml_node_traverse(node, on_result_child, context);
}

}  // namespace

ListObjectsPage parse_list_objects_v2(const std::string& document, bool details) {
    ListObjectsPage page;
    ParseContext context{&page, details};
    if (!parse_xml(aws_byte_cursor_from_array(document.data(), document.size()), 16, on_root, &context) ||
        !context.saw_result) {
        throw std::invalid_argument(std::string("malformed ListObjectsV2 response: ") +
                                    aws_error_name(aws_last_error()));
    }
    if (page.is_truncated && page.next_continuation_token.empty()) {
        throw std::invalid_argument("malformed ListObjectsV2 response: truncated without a continuation token");
    }
    if (!page.is_truncated) page.next_continuation_token.clear();
    return page;
}

namespace {

BodyRequest list_request(const ListObjectsRequest& request) {
    // Query parameters in the order S3 documents them; values encoded with the CRT's query rules.
    std::string query = "?list-type=2";
    const auto add = [&query](const char* name, const std::string& value) {
        if (!value.empty()) query += std::string("&") + name + "=" + S3Client::encode_query_value(value);
    };
    add("continuation-token", request.continuation_token);
    add("delimiter", request.delimiter);
    if (request.max_keys != 0) query += "&max-keys=" + std::to_string(request.max_keys);
    add("prefix", request.prefix);
    add("start-after", request.start_after);

    BodyRequest body_request;
    body_request.operation = "ListObjectsV2";
    body_request.bucket = request.bucket;
    body_request.key = request.prefix;
    body_request.encoded_suffix = "/" + query;
    body_request.timeout_ms = request.timeout_ms;
    return body_request;
}

}  // namespace

ListObjectsPage list_objects_v2(S3Client& client, const ListObjectsRequest& request) {
    return parse_list_objects_v2(perform_body_request(client, list_request(request)).body, request.details);
}

PendingListPage::PendingListPage(std::shared_ptr<S3Client> client, const ListObjectsRequest& request,
                                 std::shared_ptr<CompletionQueue> queue, uint64_t tag)
    : client_(std::move(client)),
      parsed_(std::make_shared<Parsed>()),
      details_(request.details),
      request_(*client_, list_request(request),
               [parsed = parsed_, queue = std::move(queue), tag, details = request.details](BodyResponse* response) {
                   // Runs on a CRT thread: nothing may throw out of it.
                   // Parses the document (none: the request failed), then marks the page ready.
                   const auto settle = [parsed, details](const std::string* document) noexcept {
                       if (document != nullptr) {  // nullptr: the request failed, and wait() throws why
                           try {
                               parsed->page = parse_list_objects_v2(*document, details);
                           } catch (...) {  // malformed (std::invalid_argument), or out of memory
                               parsed->error = std::current_exception();
                           }
                       }
                       {
                           std::lock_guard<std::mutex> lock(parsed->mutex);
                           parsed->ready = true;
                       }
                       parsed->changed.notify_all();
                   };
                   if (response == nullptr) {
                       settle(nullptr);
                       queue->push(tag);
                       return;
                   }
                   std::shared_ptr<std::string> document;
                   try {
                       document = std::make_shared<std::string>(std::move(response->body));
                       queue->push_after([document, settle] { settle(document.get()); }, tag);
                   } catch (const std::exception&) {  // no memory or no thread to hand it over: parse it here
                       settle(document ? document.get() : &response->body);
                       queue->push(tag);
                   }
               }) {}

bool PendingListPage::done() {
    std::lock_guard<std::mutex> lock(parsed_->mutex);
    return parsed_->ready;
}

ListObjectsPage PendingListPage::wait() {
    request_.wait();  // throws the request's failure
    std::unique_lock<std::mutex> lock(parsed_->mutex);
    parsed_->changed.wait(lock, [this] { return parsed_->ready; });
    if (parsed_->error) std::rethrow_exception(parsed_->error);
    return std::move(parsed_->page);
}

}  // namespace torchdata_s3
