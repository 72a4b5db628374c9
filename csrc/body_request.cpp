#include "body_request.h"

#include <aws/http/request_response.h>
#include <aws/s3/s3_client.h>
#include <strings.h>

#include <memory>
#include <mutex>

#include "meta_request.h"
#include "request_failure.h"
#include "request_message.h"

namespace torchdata_s3 {
namespace {

// Owns copies of everything it reports, so a caller that gave up (timeout) can return while the CRT is still
// winding the request down.
struct BodyRequestState : RequestState {
    BodyResponse response;

    static int on_headers(aws_s3_meta_request*, const aws_http_headers* headers, int status, void* user_data) {
        auto* self = of<BodyRequestState>(user_data);
        try {
            std::lock_guard<std::mutex> lock(self->mutex);
            self->response.status = status;
            self->response.headers.clear();
            for (size_t i = 0; i < aws_http_headers_count(headers); ++i) {
                aws_http_header header;
                if (aws_http_headers_get_index(headers, i, &header) != AWS_OP_SUCCESS) continue;
                self->response.headers.emplace_back(
                    std::string(reinterpret_cast<const char*>(header.name.ptr), header.name.len),
                    std::string(reinterpret_cast<const char*>(header.value.ptr), header.value.len));
            }
        } catch (const std::exception&) {  // never let a C++ exception cross the CRT's C frames
            return aws_raise_error(AWS_ERROR_OOM);
        }
        return AWS_OP_SUCCESS;
    }

    static int on_body(aws_s3_meta_request*, const aws_byte_cursor* data, uint64_t, void* user_data) {
        auto* self = of<BodyRequestState>(user_data);
        try {
            std::lock_guard<std::mutex> lock(self->mutex);
            self->response.body.append(reinterpret_cast<const char*>(data->ptr), data->len);
        } catch (const std::exception&) {
            return aws_raise_error(AWS_ERROR_OOM);
        }
        return AWS_OP_SUCCESS;
    }

    static void on_finish(aws_s3_meta_request*, const aws_s3_meta_request_result* result, void* user_data) {
        auto* self = of<BodyRequestState>(user_data);
        std::lock_guard<std::mutex> lock(self->mutex);
        try {
            self->finish_locked(*result);
        } catch (const std::exception&) {  // out of memory while describing the failure
            self->failed = true;
            self->finished = true;
            self->changed.notify_all();
        }
    }
};

}  // namespace

std::string BodyResponse::header(const std::string& name) const {
    for (const auto& entry : headers) {
        if (strcasecmp(entry.first.c_str(), name.c_str()) == 0) return entry.second;
    }
    return {};
}

BodyResponse perform_body_request(S3Client& client, const BodyRequest& request) {
    auto state = std::make_shared<BodyRequestState>();
    state->operation = request.operation;
    state->bucket = request.bucket;
    state->key = request.key;

    RequestMessage message(client, request.method, request.bucket, request.encoded_suffix);

    aws_s3_meta_request_options options = {};
    options.type = AWS_S3_META_REQUEST_TYPE_DEFAULT;
    options.operation_name = aws_byte_cursor_from_c_str(request.operation.c_str());
    message.describe(options);
    options.headers_callback = &BodyRequestState::on_headers;
    options.body_callback = &BodyRequestState::on_body;
    options.finish_callback = &BodyRequestState::on_finish;
    MetaRequest meta;
    meta.start(client, options, state);

    std::unique_lock<std::mutex> lock(state->mutex);
    // Cancelling after a timeout is asynchronous and may itself be held up (e.g. by a credentials provider that
    // does not answer): the wait does not wait for it, and the CRT keeps the state alive until its shutdown.
    meta.wait_or_fail(lock, [&] { return state->finished || state->failed; }, request.timeout_ms, "complete answer");
    return std::move(state->response);
}

}  // namespace torchdata_s3
