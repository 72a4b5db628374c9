#include "object_upload.h"

#include <aws/http/request_response.h>
#include <aws/io/stream.h>
#include <aws/s3/s3_client.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <stdexcept>

#include "request_message.h"

namespace torchdata_s3 {
namespace {

// S3's smallest part (but the last); the CRT raises smaller part sizes of uploads to it.
constexpr uint64_t kMinimumPartBytes = 5ull * 1024 * 1024;

}  // namespace

struct ObjectUpload::Shared : RequestState {
    std::string body;  // whole_body: the bytes the CRT reads, alive until the meta request shut down
    aws_input_stream* body_stream = nullptr;
    bool write_pending = false;  // a poll_write() was told to wait; its waker has not run yet
    // A streamed upload starts with CreateMultipartUpload. Cancelling while it is on the wire makes the CRT
    // forget it, yet the server may still create the upload: an orphan. abort() waits for it to come back.
    bool create_in_flight = false;
    uint64_t acknowledged_bytes = 0;
    std::string etag;
    // Each part's ETag as the server answered its UploadPart: what a completed object's multipart ETag is made
    // of, so that an upload whose CompleteMultipartUpload answer was lost can be recognised (see part_etags()).
    std::map<uint32_t, std::string> part_etags;
    bool completion_unanswered = false;      // a CompleteMultipartUpload attempt ended without any answer
    std::shared_ptr<ConnectionTuner> tuner;  // the client's (or null): told of each part sent, outside `mutex`

    ~Shared() override {
        if (body_stream != nullptr) aws_input_stream_release(body_stream);
    }
};

namespace {

ObjectUpload::Shared* shared_of(void* user_data) { return RequestState::of<ObjectUpload::Shared>(user_data); }

aws_byte_cursor cursor_of(const std::string& s) { return aws_byte_cursor_from_array(s.data(), s.size()); }

int on_headers(aws_s3_meta_request*, const aws_http_headers* headers, int status, void* user_data) {
    if (status < 200 || status > 299) return AWS_OP_SUCCESS;  // the failure arrives with the finish callback
    ObjectUpload::Shared* shared = shared_of(user_data);
    aws_byte_cursor etag;
    try {
        std::lock_guard<std::mutex> lock(shared->mutex);
        if (aws_http_headers_get(headers, aws_byte_cursor_from_c_str("ETag"), &etag) == AWS_OP_SUCCESS) {
            shared->etag.assign(reinterpret_cast<const char*>(etag.ptr), etag.len);
        }
    } catch (const std::exception&) {  // never let a C++ exception cross the CRT's C frames
        return aws_raise_error(AWS_ERROR_OOM);
    }
    return AWS_OP_SUCCESS;
}

// Each completed part (or the single PUT) reports its bytes: they left our memory for good.
void on_progress(aws_s3_meta_request*, const aws_s3_meta_request_progress* progress, void* user_data) {
    ObjectUpload::Shared* shared = shared_of(user_data);
    {
        std::lock_guard<std::mutex> lock(shared->mutex);
        shared->acknowledged_bytes += progress->bytes_transferred;
        shared->changed.notify_all();
    }
    if (shared->tuner && progress->bytes_transferred != 0) shared->tuner->on_delivered(progress->bytes_transferred);
}

void on_finish(aws_s3_meta_request*, const aws_s3_meta_request_result* result, void* user_data) {
    ObjectUpload::Shared* shared = shared_of(user_data);
    std::lock_guard<std::mutex> lock(shared->mutex);
    try {
        shared->finish_locked(*result);
    } catch (const std::exception&) {  // out of memory while describing the failure: never report success
        shared->failed = true;
        shared->finished = true;
        shared->changed.notify_all();
    }
}

// A part's ETag from its UploadPart's answer ("" without one, or for a failed attempt).
std::string part_etag_of(aws_s3_request_metrics* metrics) {
    int status = 0;
    if (aws_s3_request_metrics_get_response_status_code(metrics, &status) != AWS_OP_SUCCESS) return "";
    aws_http_headers* headers = nullptr;
    aws_byte_cursor etag;
    if (status / 100 != 2 || aws_s3_request_metrics_get_response_headers(metrics, &headers) != AWS_OP_SUCCESS ||
        aws_http_headers_get(headers, aws_byte_cursor_from_c_str("ETag"), &etag) != AWS_OP_SUCCESS) {
        return "";
    }
    return std::string(reinterpret_cast<const char*>(etag.ptr), etag.len);
}

// Runs once per finished HTTP request of the upload (each part, each retry, the create and complete calls).
void on_telemetry(aws_s3_meta_request*, aws_s3_request_metrics* metrics, void* user_data) {
    aws_s3_request_type type = AWS_S3_REQUEST_TYPE_UNKNOWN;
    aws_s3_request_metrics_get_request_type(metrics, &type);
    ObjectUpload::Shared* shared = shared_of(user_data);
    if (type == AWS_S3_REQUEST_TYPE_CREATE_MULTIPART_UPLOAD) {
        std::lock_guard<std::mutex> lock(shared->mutex);
        shared->create_in_flight = false;
        shared->changed.notify_all();
    } else if (type == AWS_S3_REQUEST_TYPE_UPLOAD_PART) {
        try {
            std::string etag = part_etag_of(metrics);
            if (etag.empty()) return;  // a failed attempt: the CRT sends the part again
            uint32_t part_number = 0;
            aws_s3_request_metrics_get_part_number(metrics, &part_number);
            std::lock_guard<std::mutex> lock(shared->mutex);
            shared->part_etags[part_number] = std::move(etag);
        } catch (const std::exception&) {  // out of memory: the ETags are only needed if an answer is lost
        }
    } else if (type == AWS_S3_REQUEST_TYPE_COMPLETE_MULTIPART_UPLOAD) {
        int status = 0;
        if (aws_s3_request_metrics_get_response_status_code(metrics, &status) == AWS_OP_SUCCESS) return;
        // Cut off or timed out before any answer: the server may have completed the upload all the same.
        std::lock_guard<std::mutex> lock(shared->mutex);
        shared->completion_unanswered = true;
    }
}

// The CRT calls this once a poll_write() that had to wait may be retried.
void on_write_possible(void* user_data) {
    auto* shared = static_cast<ObjectUpload::Shared*>(user_data);
    std::lock_guard<std::mutex> lock(shared->mutex);
    shared->write_pending = false;
    shared->changed.notify_all();
}

bool checksum_algorithm_from(const std::string& name, aws_s3_checksum_algorithm* out) {
    if (name == "crc32c")
        *out = AWS_SCA_CRC32C;
    else if (name == "crc64nvme")
        *out = AWS_SCA_CRC64NVME;
    else
        return false;
    return true;
}

}  // namespace

ObjectUpload::ObjectUpload(std::shared_ptr<S3Client> client, PutObjectRequest request)
    : client_(std::move(client)), request_(std::move(request)), shared_(std::make_shared<Shared>()) {
    shared_->operation = "PutObject";
    shared_->bucket = request_.bucket;
    shared_->key = request_.key;
    shared_->tuner = client_->tuner();
}

std::shared_ptr<ObjectUpload> ObjectUpload::start(std::shared_ptr<S3Client> client, PutObjectRequest request) {
    aws_s3_checksum_config checksum = {};
    if (!request.checksum_algorithm.empty()) {
        if (!checksum_algorithm_from(request.checksum_algorithm, &checksum.checksum_algorithm)) {
            throw std::invalid_argument("unknown checksum algorithm '" + request.checksum_algorithm +
                                        "' (crc32c or crc64nvme)");
        }
        // In a trailer: the CRT computes it while it sends, and S3 checks each part and the whole object.
        checksum.location = AWS_SCL_TRAILER;
    }

    std::shared_ptr<ObjectUpload> upload(new ObjectUpload(std::move(client), std::move(request)));
    S3Client& s3 = *upload->client_;
    const PutObjectRequest& req = upload->request_;
    Shared& shared = *upload->shared_;

    RequestMessage message(s3, "PUT", req.bucket, "/" + S3Client::encode_path(req.key));
    // The CRT repeats If-None-Match on CompleteMultipartUpload, where S3 decides a multipart upload's fate.
    if (req.if_none_match) message.add_header("If-None-Match", "*");

    aws_s3_meta_request_options options = {};
    options.type = AWS_S3_META_REQUEST_TYPE_PUT_OBJECT;
    message.describe(options);
    options.headers_callback = on_headers;
    options.progress_callback = on_progress;
    options.finish_callback = on_finish;
    options.telemetry_callback = on_telemetry;
    if (checksum.checksum_algorithm != AWS_SCA_NONE) options.checksum_config = &checksum;
    if (req.whole_body) {
        // The body moves into the shared state, which outlives every read the CRT makes of it.
        shared.body = std::move(upload->request_.body);
        const aws_byte_cursor body = cursor_of(shared.body);
        shared.body_stream = aws_input_stream_new_from_cursor(s3.allocator(), &body);
        if (shared.body_stream == nullptr) throw std::bad_alloc();
        message.add_header("Content-Length", std::to_string(shared.body.size()));
        aws_http_message_set_body_stream(message.native(), shared.body_stream);
    } else {
        options.send_using_async_writes = true;
        shared.create_in_flight = true;  // the CRT sends it at once
    }
    upload->meta_.start(s3, options, upload->shared_);
    return upload;
}

ObjectUpload::~ObjectUpload() {
    if (!ended_ && meta_.native() != nullptr) meta_.cancel();  // an abandoned upload must not commit
}

void ObjectUpload::feed(const uint8_t* data, size_t size, bool eof) {
    aws_byte_cursor rest = aws_byte_cursor_from_array(data, size);
    for (;;) {
        {
            std::unique_lock<std::mutex> lock(shared_->mutex);
            shared_->changed.wait(lock, [this] { return shared_->failed || !shared_->write_pending; });
            if (shared_->failed) throw shared_->failure;
            // Set before asking: the waker may run on another thread before poll_write() returns.
            shared_->write_pending = true;
        }
        const aws_s3_meta_request_poll_write_result result =
            aws_s3_meta_request_poll_write(meta_.native(), rest, eof, on_write_possible, shared_.get());
        if (result.is_pending) continue;  // the waker clears write_pending
        {
            std::lock_guard<std::mutex> lock(shared_->mutex);
            shared_->write_pending = false;
        }
        if (result.error_code != AWS_ERROR_SUCCESS) {
            // Usually the upload failed for its own reasons (e.g. CreateMultipartUpload was refused): that
            // failure, which arrives with the finish callback, is the one worth reporting.
            wait_finished();
            std::lock_guard<std::mutex> lock(shared_->mutex);
            RequestFailure failure = shared_->make_failure(RequestFailure::Kind::crt, "the upload refused data");
            failure.crt_error_code = result.error_code;
            failure.crt_error_name = aws_error_name(result.error_code);
            failure.crt_error_message = aws_error_str(result.error_code);
            shared_->fail_locked(std::move(failure));
            throw shared_->failure;
        }
        aws_byte_cursor_advance(&rest, result.bytes_processed);
        bytes_written_ += result.bytes_processed;
        if (rest.len == 0) return;  // with `eof`, the end was taken along with the last byte
    }
}

void ObjectUpload::write(const uint8_t* data, size_t size) {
    if (request_.whole_body) throw std::logic_error("write() on an upload whose whole body was given at start");
    if (ended_) throw std::logic_error("write() after complete() or abort()");
    // One write may be far larger than the window (torch.save hands over a whole tensor at once): feed it a
    // step at a time, each after the window has room, or the CRT would take it all into part buffers.
    const size_t step = static_cast<size_t>(std::max<uint64_t>(kMinimumPartBytes, client_->options().part_size_bytes));
    while (size != 0) {
        uint64_t limit = request_.in_flight_limit_bytes;
        if (client_->budget()) {
            // A write passes while the bytes in flight are below the limit, so the CRT may hold one step more:
            // the share covers that step too. Two steps are guaranteed: one part sent while the next fills.
            if (!budget_.active()) budget_.attach(client_->budget());
            const uint64_t want = std::max<uint64_t>(limit != 0 ? limit : client_->budget()->limit(), step) + step;
            limit = budget_.grow_to(want, 2 * step) - step;
        }
        if (limit != 0) {
            std::unique_lock<std::mutex> lock(shared_->mutex);
            shared_->changed.wait(lock, [this, limit] {
                return shared_->failed || bytes_written_ - shared_->acknowledged_bytes < limit;
            });
            if (shared_->failed) throw shared_->failure;
        }
        const size_t n = std::min(size, step);
        feed(data, n, false);
        data += n;
        size -= n;
    }
}

std::string ObjectUpload::complete() {
    if (ended_) throw std::logic_error("complete() after complete() or abort()");
    ended_ = true;
    // However complete() ends, the upload holds nothing more in the CRT.
    struct ReleaseOnExit {
        BudgetShare& share;
        ~ReleaseOnExit() { share.release(); }
    } release_on_exit{budget_};
    if (!request_.whole_body) {
        // Whatever is left in the current part buffer goes out, then the upload is completed.
        try {
            feed(nullptr, 0, true);
        } catch (...) {
            meta_.cancel();
            throw;
        }
    }
    wait_finished();
    std::lock_guard<std::mutex> lock(shared_->mutex);
    return shared_->etag;
}

void ObjectUpload::wait_finished() {
    std::unique_lock<std::mutex> lock(shared_->mutex);
    shared_->changed.wait(lock, [this] { return shared_->finished; });
    if (shared_->failed) throw shared_->failure;
}

void ObjectUpload::abort() {
    budget_.release();  // also after a failed complete(): nothing more is sent
    if (ended_) return;
    ended_ = true;
    std::unique_lock<std::mutex> lock(shared_->mutex);
    meta_.wait_patiently(
        lock, [this] { return shared_->finished || !shared_->create_in_flight; }, request_.abort_timeout_ms);
    lock.unlock();
    meta_.cancel();
    lock.lock();
    // The CRT sends AbortMultipartUpload before it finishes the meta request: wait, so that nothing of this
    // upload is left on the server when abort() returns.
    meta_.wait_patiently(lock, [this] { return shared_->finished; }, request_.abort_timeout_ms);
}

std::vector<std::pair<uint32_t, std::string>> ObjectUpload::part_etags() {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    return {shared_->part_etags.begin(), shared_->part_etags.end()};
}

bool ObjectUpload::completion_unanswered() {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    return shared_->completion_unanswered;
}

uint64_t ObjectUpload::bytes_acknowledged() {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    return shared_->acknowledged_bytes;
}

}  // namespace torchdata_s3
