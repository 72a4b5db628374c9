#include "body_request.h"

#include <aws/common/uri.h>
#include <aws/http/request_response.h>
#include <aws/s3/s3_client.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>

#include "request_failure.h"

namespace torchdata_s3 {
namespace {

// Shared between the caller and the CRT callbacks; the CRT's reference is dropped in the shutdown callback,
// which is the last callback the CRT makes for a meta request. It owns copies of everything it reports,
// so a caller that gave up (timeout) can return while the CRT is still winding the request down.
struct BodyRequestState {
    std::mutex mutex;
    std::condition_variable changed;
    std::string body;
    bool finished = false;
    bool failed = false;
    RequestFailure failure;
    std::string operation;
    std::string bucket;
    std::string key;

    // user_data is the CRT's holder: a heap-allocated shared_ptr to the state.
    static BodyRequestState* from(void* user_data) {
        return static_cast<std::shared_ptr<BodyRequestState>*>(user_data)->get();
    }

    static int on_body(aws_s3_meta_request*, const aws_byte_cursor* data, uint64_t, void* user_data) {
        auto* self = from(user_data);
        try {
            std::lock_guard<std::mutex> lock(self->mutex);
            self->body.append(reinterpret_cast<const char*>(data->ptr), data->len);
        } catch (const std::exception&) {  // never let a C++ exception cross the CRT's C frames
            return aws_raise_error(AWS_ERROR_OOM);
        }
        return AWS_OP_SUCCESS;
    }

    static void on_finish(aws_s3_meta_request*, const aws_s3_meta_request_result* result, void* user_data) {
        auto* self = from(user_data);
        std::lock_guard<std::mutex> lock(self->mutex);
        if (result->error_code != AWS_ERROR_SUCCESS) {
            try {
                self->failure = RequestFailure::from_result(*result, self->operation, self->bucket, self->key);
            } catch (const std::exception&) {
                self->failure = RequestFailure();  // out of memory while describing the failure
            }
            self->failed = true;
        }
        self->finished = true;
        self->changed.notify_all();
    }

    static void on_shutdown(void* user_data) {
        // Deleting the holder drops the CRT's share of the state.
        delete static_cast<std::shared_ptr<BodyRequestState>*>(user_data);
    }
};

}  // namespace

std::string perform_body_request(S3Client& client, const BodyRequest& request) {
    auto state = std::make_shared<BodyRequestState>();
    state->operation = request.operation;
    state->bucket = request.bucket;
    state->key = request.key;

    aws_uri endpoint;
    client.endpoint_for(request.bucket, &endpoint);
    aws_http_message* message = client.new_get_message(request.bucket, request.encoded_suffix);

    aws_s3_meta_request_options options = {};
    options.type = AWS_S3_META_REQUEST_TYPE_DEFAULT;
    options.operation_name = aws_byte_cursor_from_c_str(request.operation.c_str());
    options.message = message;
    options.endpoint = &endpoint;
    options.body_callback = &BodyRequestState::on_body;
    options.finish_callback = &BodyRequestState::on_finish;
    options.shutdown_callback = &BodyRequestState::on_shutdown;
    auto* holder = new std::shared_ptr<BodyRequestState>(state);
    options.user_data = holder;

    aws_s3_meta_request* meta_request = aws_s3_client_make_meta_request(client.native(), &options);
    aws_http_message_release(message);
    aws_uri_clean_up(&endpoint);
    if (!meta_request) {
        delete holder;
        RequestFailure failure;
        failure.crt_error_code = aws_last_error();
        failure.crt_error_name = aws_error_name(failure.crt_error_code);
        failure.crt_error_message = aws_error_str(failure.crt_error_code);
        failure.operation = request.operation;
        failure.bucket = request.bucket;
        failure.key = request.key;
        throw failure;
    }

    std::unique_lock<std::mutex> lock(state->mutex);
    const auto finished = [&] { return state->finished; };
    if (request.timeout_ms == 0) {
        state->changed.wait(lock, finished);
    } else if (!state->changed.wait_for(lock, std::chrono::milliseconds(request.timeout_ms), finished)) {
        lock.unlock();
        // Cancelling is asynchronous and may itself be held up (e.g. by a credentials provider that does not
        // answer): do not wait for it. The CRT keeps the state alive until its shutdown callback.
        aws_s3_meta_request_cancel(meta_request);
        aws_s3_meta_request_release(meta_request);
        RequestFailure failure;
        failure.kind = RequestFailure::Kind::timed_out;
        failure.operation = request.operation;
        failure.bucket = request.bucket;
        failure.key = request.key;
        failure.detail = "no complete answer within " + std::to_string(request.timeout_ms) + " ms";
        throw failure;
    }
    lock.unlock();
    aws_s3_meta_request_release(meta_request);

    lock.lock();
    if (state->failed) throw state->failure;
    return std::move(state->body);
}

}  // namespace torchdata_s3
