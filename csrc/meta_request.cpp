#include "meta_request.h"

#include <aws/s3/s3_client.h>
#include <unistd.h>

#include "crt_runtime.h"
#include "s3_client.h"

namespace torchdata_s3 {
namespace {

// The CRT's last call for a meta request: dropping the holder drops the CRT's share of the state.
void on_shutdown(void* user_data) { delete static_cast<std::shared_ptr<RequestState>*>(user_data); }

}  // namespace

RequestFailure RequestState::make_failure(RequestFailure::Kind kind, std::string detail) const {
    RequestFailure f;
    f.kind = kind;
    f.operation = operation;
    f.bucket = bucket;
    f.key = key;
    f.detail = std::move(detail);
    return f;
}

void RequestState::fail_locked(RequestFailure f) {
    if (failed) return;
    failed = true;
    failure = std::move(f);
    on_failed_locked();
    changed.notify_all();
}

void RequestState::finish_locked(const aws_s3_meta_request_result& result) {
    finished = true;
    if (result.error_code != AWS_ERROR_SUCCESS)
        fail_locked(RequestFailure::from_result(result, operation, bucket, key));
    changed.notify_all();
}

void MetaRequest::start(S3Client& client, aws_s3_meta_request_options& options, std::shared_ptr<RequestState> state) {
    state_ = std::move(state);
    pacer_ = client.pacer();
    creator_pid_ = CrtRuntime::this_process();
    auto* holder = new std::shared_ptr<RequestState>(state_);
    options.user_data = holder;
    options.shutdown_callback = on_shutdown;
    native_ = aws_s3_client_make_meta_request(client.native(), &options);
    if (native_ == nullptr) {
        delete holder;  // no shutdown callback comes for a request that was never made
        RequestFailure failure = state_->make_failure(RequestFailure::Kind::crt, "");
        failure.crt_error_code = aws_last_error();
        failure.crt_error_name = aws_error_name(failure.crt_error_code);
        failure.crt_error_message = aws_error_str(failure.crt_error_code);
        throw failure;
    }
}

bool MetaRequest::usable_here() const { return CrtRuntime::owned_by_this_process(creator_pid_); }

void MetaRequest::cancel() {
    if (native_ != nullptr && usable_here()) aws_s3_meta_request_cancel(native_);
}

MetaRequest::~MetaRequest() {
    if (native_ == nullptr || !usable_here()) return;  // inherited across fork(): leak
    aws_s3_meta_request_release(native_);
}

}  // namespace torchdata_s3
