#include "body_request.h"

#include <aws/http/request_response.h>
#include <aws/io/stream.h>
#include <aws/s3/s3_client.h>
#include <strings.h>

#include <memory>
#include <mutex>
#include <new>
#include <string>

#include "meta_request.h"
#include "request_failure.h"
#include "request_message.h"

namespace torchdata_s3 {

// Owns copies of everything it reports, so a caller that gave up (timeout) can return while the CRT is still
// winding the request down.
struct BodyRequestState : RequestState {
    BodyResponse response;
    BodyRequestDone on_done;   // see PendingBodyRequest
    std::string request_body;  // what body_stream reads: lives as long as the CRT may read it
    aws_input_stream* body_stream = nullptr;

    ~BodyRequestState() { aws_input_stream_release(body_stream); }

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
        if (self->on_done) self->on_done(self->failed ? nullptr : &self->response);
    }
};

BodyRequest object_request(const std::string& method, const std::string& operation, const std::string& bucket,
                           const std::string& key, uint32_t timeout_ms) {
    BodyRequest request;
    request.method = method;
    request.operation = operation;
    request.bucket = bucket;
    request.key = key;
    request.encoded_suffix = "/" + S3Client::encode_path(key);
    request.timeout_ms = timeout_ms;
    return request;
}

std::string BodyResponse::header(const std::string& name) const {
    for (const auto& entry : headers) {
        if (strcasecmp(entry.first.c_str(), name.c_str()) == 0) return entry.second;
    }
    return {};
}

PendingBodyRequest::PendingBodyRequest(S3Client& client, const BodyRequest& request, BodyRequestDone on_done)
    : state_(std::make_shared<BodyRequestState>()), timeout_ms_(request.timeout_ms) {
    state_->operation = request.operation;
    state_->bucket = request.bucket;
    state_->key = request.key;
    state_->on_done = std::move(on_done);

    RequestMessage message(client, request.method, request.bucket, request.encoded_suffix);
    for (const auto& header : request.headers) message.add_header(header.first.c_str(), header.second);
    if (!request.body.empty()) {
        state_->request_body = request.body;
        const aws_byte_cursor body =
            aws_byte_cursor_from_array(state_->request_body.data(), state_->request_body.size());
        state_->body_stream = aws_input_stream_new_from_cursor(client.allocator(), &body);
        if (state_->body_stream == nullptr) throw std::bad_alloc();
        message.add_header("Content-Length", std::to_string(body.len));
        aws_http_message_set_body_stream(message.native(), state_->body_stream);
    }

    aws_s3_meta_request_options options = {};
    options.type = AWS_S3_META_REQUEST_TYPE_DEFAULT;
    options.operation_name = aws_byte_cursor_from_c_str(request.operation.c_str());
    if (!request.copy_source_uri.empty()) {
        // The CRT parses its own copy of the URI when the meta request is made.
        options.type = AWS_S3_META_REQUEST_TYPE_COPY_OBJECT;
        options.copy_source_uri =
            aws_byte_cursor_from_array(request.copy_source_uri.data(), request.copy_source_uri.size());
    }
    if (!request.recv_filepath.empty()) {
        // The CRT keeps its own copy of the path.
        options.type = AWS_S3_META_REQUEST_TYPE_GET_OBJECT;
        options.recv_filepath = aws_byte_cursor_from_array(request.recv_filepath.data(), request.recv_filepath.size());
        options.recv_file_option = AWS_S3_RECV_FILE_CREATE_OR_REPLACE;
        options.recv_file_delete_on_failure = true;
    }
    aws_s3_file_io_options file_io = {};  // copied by the CRT when the meta request is made
    if (!request.recv_filepath.empty() && request.direct_io) {
        file_io.direct_io = true;
        options.fio_opts = &file_io;
    }
    if (!request.send_filepath.empty()) {
        options.type = AWS_S3_META_REQUEST_TYPE_PUT_OBJECT;
        options.send_filepath = aws_byte_cursor_from_array(request.send_filepath.data(), request.send_filepath.size());
    }
    options.max_active_connections_override = request.max_connections;
    message.describe(options);
    options.headers_callback = &BodyRequestState::on_headers;
    options.body_callback = &BodyRequestState::on_body;
    options.finish_callback = &BodyRequestState::on_finish;
    meta_.start(client, options, state_);
}

PendingBodyRequest::~PendingBodyRequest() {
    if (meta_.native() == nullptr || !meta_.usable_here()) return;  // never made, or inherited across fork()
    if (!done()) meta_.cancel();
}

bool PendingBodyRequest::done() {
    std::lock_guard<std::mutex> lock(state_->mutex);
    return state_->finished || state_->failed;
}

void PendingBodyRequest::cancel() {
    if (meta_.usable_here()) meta_.cancel();
}

BodyResponse PendingBodyRequest::wait() {
    std::unique_lock<std::mutex> lock(state_->mutex);
    // Cancelling after a timeout is asynchronous and may itself be held up (e.g. by a credentials provider that
    // does not answer): the wait does not wait for it, and the CRT keeps the state alive until its shutdown.
    meta_.wait_or_fail(lock, [&] { return state_->finished || state_->failed; }, timeout_ms_, "complete answer");
    return std::move(state_->response);
}

BodyResponse perform_body_request(S3Client& client, const BodyRequest& request) {
    return PendingBodyRequest(client, request).wait();
}

}  // namespace torchdata_s3
