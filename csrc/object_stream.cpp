#include "object_stream.h"

#include <aws/http/request_response.h>
#include <aws/s3/s3_buffer_pool.h>
#include <aws/s3/s3_client.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <set>
#include <stdexcept>

#include "decimal.h"
#include "request_message.h"

namespace torchdata_s3 {
namespace {

std::string header_value(const aws_http_headers* headers, const char* name) {
    aws_byte_cursor value;
    if (aws_http_headers_get(headers, aws_byte_cursor_from_c_str(name), &value) != AWS_OP_SUCCESS) return {};
    return std::string(reinterpret_cast<const char*>(value.ptr), value.len);
}

// Content-Range: "bytes FIRST-LAST/TOTAL". False if absent or malformed.
bool parse_content_range(const std::string& value, uint64_t* first, uint64_t* total) {
    const std::string prefix = "bytes ";
    if (value.compare(0, prefix.size(), prefix) != 0) return false;
    const size_t dash = value.find('-', prefix.size());
    const size_t slash = value.find('/', prefix.size());
    if (dash == std::string::npos || slash == std::string::npos || dash > slash) return false;
    return parse_decimal_u64(value.substr(prefix.size(), dash - prefix.size()), first) &&
           parse_decimal_u64(value.substr(slash + 1), total);
}

}  // namespace

struct ObjectStream::Shared : RequestState {
    std::deque<Chunk> queue;
    bool headers_received = false;
    // The shortest wait of any of this GET's requests from its first byte sent to the first response byte
    // (the endpoint's round trip, without queueing or transfer time); -1 until a request reported it. The
    // loader sizes its read-ahead by it.
    int64_t first_byte_latency_ns = -1;
    uint64_t expected_bytes = 0;    // Content-Length of the whole (synthesised) response
    uint64_t first_offset = 0;      // object offset of the response's first byte
    uint64_t object_size = 0;       // the whole object's size
    bool suffix_range = false;      // the first offset is learned from the headers
    uint64_t next_body_offset = 0;  // object offset the next body callback must start at
    uint64_t received_bytes = 0;
    std::string etag;
    // The reader's memory for object bytes [landing_first, landing_end) while landing_open (see land_in).
    uint8_t* landing = nullptr;
    uint64_t landing_first = 0;
    uint64_t landing_end = 0;
    bool landing_open = false;
    bool landing_handed_out = false;  // some part was given that memory
    // The memory's length is only the most the object may be (GetObjectRequest::landing_capacity): a part
    // lands there only if the object fills half of it or more, and none of it lands otherwise.
    bool landing_bounds_only = false;
    // The reader's blocks (ObjectStream::scatter_into), in object order and contiguous, and the first offsets of
    // the parts given them that were not delivered yet.
    struct Block {
        uint64_t first;
        uint8_t* data;
        size_t size;
        uint64_t end() const { return first + size; }
    };
    std::deque<Block> blocks;
    std::set<uint64_t> scattered_parts;  // a part's first byte can arrive before an earlier part's
    bool blocks_handed_out = false;      // some part was given blocks
    // The block holding object offset `offset`, or null.
    const Block* block_at_locked(uint64_t offset) const {
        auto after = std::upper_bound(blocks.begin(), blocks.end(), offset,
                                      [](uint64_t value, const Block& block) { return value < block.first; });
        if (after == blocks.begin()) return nullptr;
        const Block& block = *(after - 1);
        return offset < block.end() ? &block : nullptr;
    }
    // Memory of its own size given to a part much smaller than its pool buffer (on_part_landing), until the
    // part's body is delivered: its chunk then owns it.
    std::deque<Chunk> own_landings;
    uint64_t part_bytes = 0;  // the meta request's part size
    bool is_landed_locked(const uint8_t* data) const {
        return landing != nullptr && data >= landing && data < landing + (landing_end - landing_first);
    }
    // Every byte of the response has been delivered (or it failed): a wider read window can bring nothing.
    bool body_complete_locked() const {
        return failed || finished || (headers_received && received_bytes >= expected_bytes);
    }
    // For pinning pool buffers. Never the last reference: the stream holds the client while callbacks can
    // add chunks, and its destructor empties the queue (see ~ObjectStream).
    std::weak_ptr<S3Client> client;
    // The client's connection tuner (or null): told of each part delivered, outside `mutex`.
    std::shared_ptr<ConnectionTuner> tuner;

protected:
    void on_failed_locked() override { queue.clear(); }  // a failed stream hands out no further byte
};

namespace {

ObjectStream::Shared* shared_of(void* user_data) { return RequestState::of<ObjectStream::Shared>(user_data); }

// The callbacks run on CRT threads inside C code: each catches everything (allocation failures) and turns
// it into a CRT error, which fails the request instead of unwinding through frames that cannot unwind.
int on_headers_unguarded(const aws_http_headers* headers, ObjectStream::Shared* shared) {
    std::lock_guard<std::mutex> lock(shared->mutex);
    uint64_t length = 0;
    if (!parse_decimal_u64(header_value(headers, "Content-Length"), &length)) {
        shared->fail_locked(shared->make_failure(RequestFailure::Kind::crt, "response without a valid Content-Length"));
        return aws_raise_error(AWS_ERROR_S3_INVALID_CONTENT_LENGTH_HEADER);
    }
    shared->expected_bytes = length;
    uint64_t first = 0, total = length;
    const std::string content_range = header_value(headers, "Content-Range");
    if (!content_range.empty() && !parse_content_range(content_range, &first, &total)) {
        shared->fail_locked(shared->make_failure(RequestFailure::Kind::crt,
                                                 "response with a malformed Content-Range: " + content_range));
        return aws_raise_error(AWS_ERROR_S3_INVALID_CONTENT_RANGE_HEADER);
    }
    if (shared->suffix_range) shared->next_body_offset = first;
    shared->first_offset = first;
    shared->object_size = total;
    shared->etag = header_value(headers, "ETag");
    shared->headers_received = true;
    shared->changed.notify_all();
    return AWS_OP_SUCCESS;
}

int on_body_unguarded(const aws_byte_cursor* body, const aws_s3_meta_request_receive_body_extra_info& info,
                      ObjectStream::Shared* shared) {
    std::lock_guard<std::mutex> lock(shared->mutex);
    if (shared->failed) return aws_raise_error(AWS_ERROR_S3_CANCELED);
    if (info.range_start != shared->next_body_offset) {
        shared->fail_locked(shared->make_failure(RequestFailure::Kind::out_of_order,
                                                 "body data for offset " + std::to_string(info.range_start) +
                                                     " arrived where offset " +
                                                     std::to_string(shared->next_body_offset) + " was expected"));
        return aws_raise_error(AWS_ERROR_S3_CANCELED);
    }
    shared->next_body_offset += body->len;
    shared->received_bytes += body->len;
    if (shared->headers_received && shared->received_bytes > shared->expected_bytes) {
        shared->fail_locked(shared->make_failure(RequestFailure::Kind::short_body,
                                                 "the server sent more bytes than its Content-Length announced"));
        return aws_raise_error(AWS_ERROR_S3_CANCELED);
    }
    if (body->len == 0) return AWS_OP_SUCCESS;
    if (shared->scattered_parts.count(info.range_start) != 0) {
        // Received straight into the reader's blocks (on_part_scatter): a chunk per block, no copy. The pool
        // buffer `body` points into only counted the bytes.
        shared->scattered_parts.erase(info.range_start);
        const uint64_t end = info.range_start + body->len;
        for (uint64_t at = info.range_start; at < end;) {
            const ObjectStream::Shared::Block* block = shared->block_at_locked(at);
            if (block == nullptr) {  // never: blocks are forgotten only once every part over them was delivered
                shared->fail_locked(
                    shared->make_failure(RequestFailure::Kind::crt, "a scattered part lost its blocks"));
                return aws_raise_error(AWS_ERROR_S3_CANCELED);
            }
            const size_t n = static_cast<size_t>(std::min(block->end(), end) - at);
            shared->queue.push_back(borrow_bytes(block->data + (at - block->first), n));
            at += n;
        }
        if (std::shared_ptr<S3Client> client = shared->client.lock()) client->count_landed_bytes(body->len);
        shared->changed.notify_all();
        return AWS_OP_SUCCESS;
    }
    for (auto own = shared->own_landings.begin(); own != shared->own_landings.end(); ++own) {
        if (body->ptr >= own->data && body->ptr + body->len <= own->data + own->size) {
            // Received straight into memory of its own size (on_part_landing): the chunk keeps it, no copy.
            ObjectStream::Chunk chunk = std::move(*own);
            shared->own_landings.erase(own);
            chunk.data = body->ptr;
            chunk.size = body->len;
            shared->queue.push_back(std::move(chunk));
            shared->changed.notify_all();
            return AWS_OP_SUCCESS;
        }
    }
    if (shared->is_landed_locked(body->ptr)) {
        // Received straight into the reader's memory (on_part_landing): nothing to copy or pin.
        if (std::shared_ptr<S3Client> client = shared->client.lock()) client->count_landed_bytes(body->len);
        shared->queue.push_back(borrow_bytes(body->ptr, body->len));
        shared->changed.notify_all();
        return AWS_OP_SUCCESS;
    }

    // Zero copy when the part fills most of its pool buffer and the pool has room to spare. Otherwise this is
    // the one copy into memory Python can read: a small object would hold a whole part-sized buffer.
    std::shared_ptr<S3Client> client = shared->client.lock();
    const size_t held = info.ticket != nullptr ? aws_s3_buffer_ticket_claim(info.ticket).capacity : 0;
    if (client && held != 0 && body->len >= held / 2 &&
        client->pinned_pool_bytes() + held <= client->pool_pin_budget()) {
        shared->queue.push_back(pin_pool_bytes(std::move(client), info.ticket, held, body->ptr, body->len));
    } else {
        shared->queue.push_back(copy_bytes(body->ptr, body->len));
    }
    shared->changed.notify_all();
    return AWS_OP_SUCCESS;
}

// Asked on a part's connection thread when its first body byte arrives: the reader's memory for bytes
// [range_start, range_end] of the object, if the reader is waiting for all of them (land_in). The part's body
// can never write past the slice: the CRT fails a body longer than the memory it was given.
aws_byte_buf on_part_landing_unguarded(uint64_t range_start, uint64_t range_end, ObjectStream::Shared* shared) {
    aws_byte_buf memory = {};
    std::lock_guard<std::mutex> lock(shared->mutex);
    if (shared->failed || range_end < range_start) return memory;
    shared->scattered_parts.erase(range_start);  // until this attempt is scattered: each delivers where it landed
    if (shared->landing_open && shared->landing_bounds_only) {
        // An object of unknown size offered memory on a guess: the answer's length decides, now, for good.
        const uint64_t capacity = shared->landing_end - shared->landing_first;
        const uint64_t length = range_end - range_start + 1;
        if (range_start != shared->landing_first || length > capacity || 2 * length < capacity) {
            shared->landing_open = false;
        }
    }
    if (!shared->landing_open || range_start < shared->landing_first || range_start >= shared->landing_end) {
        // The reader's blocks, if they cover the whole part: a retry of a part asks again, and gets them again.
        const ObjectStream::Shared::Block* first = shared->block_at_locked(range_start);
        if (first != nullptr && shared->blocks.back().end() > range_end) {
            shared->scattered_parts.insert(range_start);
            shared->blocks_handed_out = true;
            memory.capacity = static_cast<size_t>(range_end - range_start + 1);  // no buffer: scattered
            return memory;
        }
        // No reader's memory for it. A body of less than half a part (a small object asked for before its size
        // was known, in a part-sized pool buffer) would be copied out of that buffer by on_body: it gets memory
        // of its own size instead. At most one part of a GET is that small (its only or its last), so a retry
        // of it is given the memory its earlier attempt had.
        const uint64_t size = range_end - range_start + 1;
        if (size >= shared->part_bytes / 2) return memory;
        uint8_t* writable = nullptr;
        for (const ObjectStream::Chunk& own : shared->own_landings) {
            if (own.size == size) writable = const_cast<uint8_t*>(own.data);
        }
        if (writable == nullptr) shared->own_landings.push_back(fresh_bytes(static_cast<size_t>(size), &writable));
        memory.buffer = writable;
        memory.capacity = static_cast<size_t>(size);
        return memory;
    }
    // The first part is asked for before the object's size is known and may end past it: its slice ends
    // where the object does, which is as many bytes as its response announced.
    const uint64_t end = std::min(range_end + 1, shared->landing_end);
    memory.buffer = shared->landing + (range_start - shared->landing_first);
    memory.capacity = static_cast<size_t>(end - range_start);
    shared->landing_handed_out = true;
    return memory;
}

aws_byte_buf on_part_landing(aws_s3_meta_request*, uint64_t range_start, uint64_t range_end, void* user_data) {
    try {
        return on_part_landing_unguarded(range_start, range_end, shared_of(user_data));
    } catch (const std::exception&) {
        return aws_byte_buf{};  // out of memory: the part's pool buffer, as without this callback
    }
}

// Asked on a scattered part's connection thread for each place its next bytes go (see on_part_landing).
aws_byte_buf on_part_scatter(aws_s3_meta_request*, uint64_t offset, size_t max_bytes, void* user_data) {
    ObjectStream::Shared* shared = shared_of(user_data);
    aws_byte_buf place = {};
    std::lock_guard<std::mutex> lock(shared->mutex);
    if (shared->failed) return place;  // fails the part: the stream hands out no further byte anyway
    const ObjectStream::Shared::Block* block = shared->block_at_locked(offset);
    if (block == nullptr) return place;
    place.buffer = block->data + (offset - block->first);
    place.capacity = static_cast<size_t>(std::min<uint64_t>(block->end() - offset, max_bytes));
    return place;
}

void on_finish_unguarded(const aws_s3_meta_request_result* result, ObjectStream::Shared* shared) {
    std::lock_guard<std::mutex> lock(shared->mutex);
    shared->finish_locked(*result);
    if (shared->failed) return;
    if (shared->headers_received && shared->received_bytes != shared->expected_bytes) {
        shared->fail_locked(shared->make_failure(RequestFailure::Kind::short_body,
                                                 "the body ended after " + std::to_string(shared->received_bytes) +
                                                     " of " + std::to_string(shared->expected_bytes) + " bytes"));
    } else if (!shared->headers_received) {
        // An empty object: the CRT answers it without a headers callback and without body data.
        shared->expected_bytes = shared->received_bytes;
        shared->object_size = shared->received_bytes;
        shared->headers_received = true;
    }
    shared->changed.notify_all();
}

int on_headers(aws_s3_meta_request*, const aws_http_headers* headers, int response_status, void* user_data) {
    // The CRT can hand over the headers of an error answer too (seen: a 416 for a range past the end),
    // whose Content-Length is that of the error document. Only a successful answer describes the object;
    // the failure itself arrives with the finish callback.
    if (response_status < 200 || response_status > 299) return AWS_OP_SUCCESS;
    try {
        return on_headers_unguarded(headers, shared_of(user_data));
    } catch (const std::exception&) {
        return aws_raise_error(AWS_ERROR_OOM);
    }
}

int on_body(aws_s3_meta_request*, const aws_byte_cursor* body, const aws_s3_meta_request_receive_body_extra_info info,
            void* user_data) {
    try {
        ObjectStream::Shared* shared = shared_of(user_data);
        const int result = on_body_unguarded(body, info, shared);
        if (result == AWS_OP_SUCCESS && body->len != 0 && shared->tuner) shared->tuner->on_delivered(body->len);
        return result;
    } catch (const std::exception&) {
        return aws_raise_error(AWS_ERROR_OOM);
    }
}

void on_finish(aws_s3_meta_request*, const aws_s3_meta_request_result* result, void* user_data) {
    ObjectStream::Shared* shared = shared_of(user_data);
    try {
        on_finish_unguarded(result, shared);
    } catch (const std::exception&) {
        // Out of memory while recording the outcome: still never let a reader wait forever or see success.
        std::lock_guard<std::mutex> lock(shared->mutex);
        shared->finished = true;
        shared->failed = true;
        shared->queue.clear();
        shared->changed.notify_all();
    }
}

// Runs once per finished request (each part, each retry), on the meta request's event thread, after the
// request's body was delivered.
//
// The round trip is taken from the first byte of the request sent, not the last: the CRT stamps "send end"
// in a completion callback that a busy event loop can run after the response has begun to arrive. On a
// loopback endpoint we saw "receive start" up to 5.5 ms before "send end"; a GET's request is a few hundred
// bytes, so its first and last byte leave together.
void on_telemetry(aws_s3_meta_request*, aws_s3_request_metrics* metrics, void* user_data) {
    uint64_t sent = 0, answered = 0;
    if (aws_s3_request_metrics_get_send_start_timestamp_ns(metrics, &sent) != AWS_OP_SUCCESS ||
        aws_s3_request_metrics_get_receive_start_timestamp_ns(metrics, &answered) != AWS_OP_SUCCESS) {
        return;  // never sent or never answered: no round trip to learn from
    }
    ObjectStream::Shared* shared = shared_of(user_data);
    const int64_t latency = answered > sent ? static_cast<int64_t>(answered - sent) : 0;
    std::lock_guard<std::mutex> lock(shared->mutex);
    if (shared->first_byte_latency_ns < 0 || latency < shared->first_byte_latency_ns) {
        shared->first_byte_latency_ns = latency;
        shared->changed.notify_all();
    }
}

}  // namespace

ObjectStream::ObjectStream(std::shared_ptr<S3Client> client, GetObjectRequest request)
    : client_(std::move(client)), request_(std::move(request)), shared_(std::make_shared<Shared>()) {
    shared_->operation = "GetObject";
    shared_->bucket = request_.bucket;
    shared_->key = request_.key;
    shared_->client = client_;
    shared_->tuner = client_->tuner();
    shared_->next_body_offset = request_.has_range ? request_.range_start : 0;
    shared_->suffix_range = request_.suffix_bytes != 0;
}

std::shared_ptr<ObjectStream> ObjectStream::start(std::shared_ptr<S3Client> client, GetObjectRequest request,
                                                  uint8_t* result_memory) {
    std::shared_ptr<ObjectStream> stream(new ObjectStream(std::move(client), std::move(request)));
    S3Client& s3 = *stream->client_;
    const GetObjectRequest& req = stream->request_;
    stream->shared_->part_bytes = stream->part_bytes();
    const uint64_t length = result_memory_length(s3, req);
    if (result_memory != nullptr) {
        if (length == 0)
            throw std::invalid_argument("result_memory needs a GET of one part of known length, or a landing_capacity");
        // Set before the request exists: the first part's memory is asked for when its first body byte arrives.
        Shared& shared = *stream->shared_;
        shared.landing = result_memory;
        shared.landing_first = req.has_range ? req.range_start : 0;
        shared.landing_end = shared.landing_first + length;
        shared.landing_open = true;
        shared.landing_bounds_only = !is_result_memory_exact(req);
    }

    RequestMessage message(s3, "GET", req.bucket, "/" + S3Client::encode_path(req.key));
    if (req.suffix_bytes != 0) {
        message.add_header("Range", "bytes=-" + std::to_string(req.suffix_bytes));
    } else if (req.has_range) {
        message.add_header("Range",
                           "bytes=" + std::to_string(req.range_start) + "-" + std::to_string(req.range_end_inclusive));
    }
    // The CRT adds If-Match to the parts after the first itself; a re-fetch of an object already seen asks
    // for the same version from its first request on.
    if (!req.if_match.empty()) message.add_header("If-Match", req.if_match);
    if (!req.if_none_match.empty()) message.add_header("If-None-Match", req.if_none_match);

    aws_s3_meta_request_options options = {};
    options.type = AWS_S3_META_REQUEST_TYPE_GET_OBJECT;
    message.describe(options);
    options.part_size = req.part_size_bytes;
    // A listing's size lets the CRT fetch an object that fits in one part with one GET sized to it (not a
    // part-sized buffer for 110 kB); a stale one costs the rest in ranged parts, never wrong bytes.
    if (req.size_hint != 0 && !req.has_range && req.suffix_bytes == 0) options.object_size_hint = &req.size_hint;
    options.headers_callback = on_headers;
    options.body_callback_ex = on_body;
    options.part_landing_callback = on_part_landing;
    // A GET that lands in one piece (one part at most): no hop to another thread between its steps (the CRT
    // patch "every step of a small GET hops between three event-loop threads").
    options.events_on_scheduler_loop = length != 0;
    options.part_scatter_callback = on_part_scatter;
    options.finish_callback = on_finish;
    options.telemetry_callback = on_telemetry;
    stream->meta_.start(s3, options, stream->shared_);
    // The client opens every stream with a window of one part; widen this one to its own budget.
    stream->window_bytes_ = s3.options().part_size_bytes;
    if (s3.budget()) {
        // The CRT fetches the first part whatever the window: it is the stream's guaranteed share.
        const uint64_t part = stream->part_bytes();
        const uint64_t first = req.size_hint != 0 ? std::min(part, req.size_hint) : part;
        stream->budget_.attach(s3.budget());
        stream->budget_.grow_to(first, first);
        stream->first_budget_bytes_ = first;
    }
    stream->widen_window(req.window_bytes != 0 ? req.window_bytes : s3.options().read_window_bytes);
    return stream;
}

uint64_t ObjectStream::result_memory_length(const S3Client& client, const GetObjectRequest& request) {
    const uint64_t part = part_bytes_of(client, request);
    const uint64_t length = request.expected_length();
    if (length != 0) return length <= part ? length : 0;
    const bool whole_object = !request.has_range && request.suffix_bytes == 0;
    // No more than half a part: a larger object gets a pool buffer of its own without a copy (on_body).
    return whole_object && request.landing_capacity <= part / 2 ? request.landing_capacity : 0;
}

void ObjectStream::widen_window(uint64_t window_bytes) {
    if (window_bytes <= window_wanted_) return;
    window_wanted_ = window_bytes;
    apply_window();
}

void ObjectStream::apply_window() {
    uint64_t window = window_wanted_;
    if (budget_.active()) {
        // The CRT starts a part once the window reaches any byte of it: a window buffers in whole parts.
        const uint64_t part = part_bytes();
        uint64_t need = (window + part - 1) / part * part;
        if (request_.size_hint != 0) need = std::min(need, request_.size_hint);
        {
            std::lock_guard<std::mutex> lock(shared_->mutex);
            if (shared_->failed || shared_->body_complete_locked()) return;                 // nothing more will arrive
            if (shared_->headers_received) need = std::min(need, shared_->expected_bytes);  // its size
        }
        const uint64_t held = budget_.grow_to(need);
        if (held < need) {
            // Only whole parts widen the window: a partial grant beyond the first part goes back at once.
            const uint64_t usable = std::max(held / part * part, first_budget_bytes_);
            if (usable < held) budget_.shrink_to(usable);
            window = std::min(window, held / part * part);
        }
    }
    if (window <= window_bytes_) return;
    const uint64_t more = window - window_bytes_;
    window_bytes_ = window;
    // Each increment wakes the client's event loop for a pass over every request in flight. A small object
    // has usually arrived whole before its reader widens its window: nothing to wake it for.
    {
        std::lock_guard<std::mutex> lock(shared_->mutex);
        if (shared_->body_complete_locked()) return;
    }
    aws_s3_meta_request_increment_read_window(meta_.native(), more);
}

ObjectStream::~ObjectStream() {
    if (meta_.native() == nullptr || !meta_.usable_here()) return;  // inherited across fork(): leak
    budget_.release();
    bool finished;
    {
        std::lock_guard<std::mutex> lock(shared_->mutex);
        finished = shared_->finished;
        // Failing the stream releases its queued chunks here, on the reader's side, and no callback queues
        // another: a chunk left for the CRT's shutdown callback could hold the last reference to the client,
        // whose destruction must not run on a CRT thread. (This stream still holds the client meanwhile.)
        shared_->fail_locked(shared_->make_failure(RequestFailure::Kind::crt, "the stream was destroyed"));
    }
    if (!finished) meta_.cancel();
}

bool ObjectStream::land_in(uint8_t* dst, size_t size) {
    if (size == 0) return false;
    std::lock_guard<std::mutex> lock(shared_->mutex);
    if (!shared_->headers_received || shared_->failed || shared_->finished || shared_->landing_open) return false;
    shared_->landing = dst;
    shared_->landing_first = shared_->first_offset + position_;
    shared_->landing_end = shared_->landing_first + size;
    shared_->landing_open = true;
    shared_->landing_handed_out = false;
    return true;
}

bool ObjectStream::stop_landing(bool read_failed, uint32_t patience_ms) {
    std::unique_lock<std::mutex> lock(shared_->mutex);
    shared_->landing_open = false;
    const uint64_t landing_size = shared_->landing_end - shared_->landing_first;
    lock.unlock();
    if (read_failed) {
        cancel();  // also drops every chunk pointing into the caller's memory
    } else {
        if (current_.borrowed() && current_offset_ == current_.size) release_current();  // into the held ones
        // Retaining a small tail of a large result: a copy of it costs less than keeping the whole result.
        if (retain_limit_ < landing_size / 4) own_retained_bytes();
    }
    lock.lock();
    // The CRT reports a meta request finished only once none of its requests is in flight any more. (A read
    // that did not fail got every byte and saw the transfer finish.)
    if (shared_->landing_handed_out && !wait_until_finished(lock, patience_ms)) return false;
    shared_->landing = nullptr;
    return true;
}

bool ObjectStream::wait_until_finished(std::unique_lock<std::mutex>& lock, uint32_t patience_ms) {
    return shared_->finished || meta_.wait_patiently(lock, [this] { return shared_->finished; }, patience_ms);
}

bool ObjectStream::holds_borrowed_bytes() const {
    if (current_.borrowed()) return true;
    for (const HeldChunk& held : held_) {
        if (held.chunk.borrowed()) return true;
    }
    return false;
}

void ObjectStream::scatter_into(uint64_t first, uint8_t* data, size_t size) {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    const uint64_t end = shared_->blocks.empty() ? first : shared_->blocks.back().end();
    if (first != end || size == 0) throw std::invalid_argument("blocks must follow one another");
    shared_->blocks.push_back(Shared::Block{first, data, size});
}

uint64_t ObjectStream::scatter_end() const {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    return shared_->blocks.empty() ? 0 : shared_->blocks.back().end();
}

void ObjectStream::forget_blocks_below(uint64_t offset) {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    while (!shared_->blocks.empty() && shared_->blocks.front().end() <= offset) shared_->blocks.pop_front();
}

bool ObjectStream::take_block(const uint8_t* data, size_t size) {
    const uint8_t* next;
    size_t available;
    while (!try_peek(&next, &available)) {
        if (!wait_for_data()) return false;
    }
    if (current_offset_ != 0 || current_.data != data || current_.size != size) return false;
    pass_current(size, size);
    return true;
}

bool ObjectStream::stop_scattering(uint32_t patience_ms) {
    bool handed_out;
    {
        std::lock_guard<std::mutex> lock(shared_->mutex);
        shared_->blocks.clear();
        handed_out = shared_->blocks_handed_out;
    }
    if (!handed_out) return true;
    cancel();  // also drops every chunk pointing into a block
    std::unique_lock<std::mutex> lock(shared_->mutex);
    return wait_until_finished(lock, patience_ms);
}

void ObjectStream::cancel() {
    if (!usable_here()) return;  // the parent's request: not ours to touch
    budget_.release();           // nothing more is kept (parts still landing are dropped as they come)
    {
        std::lock_guard<std::mutex> lock(shared_->mutex);
        if (shared_->finished && !shared_->failed && shared_->queue.empty()) return;
        RequestFailure closed = shared_->make_failure(RequestFailure::Kind::crt, "the stream was closed");
        closed.crt_error_name = "AWS_ERROR_S3_CANCELED";
        shared_->fail_locked(std::move(closed));
    }
    current_ = Chunk();
    current_offset_ = 0;
    held_.clear();
    held_bytes_ = 0;
    meta_.cancel();
}

bool ObjectStream::advance() {
    std::unique_lock<std::mutex> lock(shared_->mutex);
    if (shared_->failed) {
        RequestFailure failure = shared_->failure;
        lock.unlock();
        budget_.release();  // a failed stream buffers nothing more
        throw failure;
    }
    if (shared_->queue.empty()) return false;
    current_ = std::move(shared_->queue.front());
    shared_->queue.pop_front();
    current_offset_ = 0;
    return true;
}

void ObjectStream::release_current() {
    return_read_window(current_.size);
    hold(current_, position_ - current_offset_);
    current_ = Chunk();
    current_offset_ = 0;
}

void ObjectStream::hold(const Chunk& chunk, uint64_t start) {
    if (retain_limit_ == 0 || !chunk || chunk.size == 0) return;
    held_.push_back(HeldChunk{start, chunk});
    held_bytes_ += chunk.size;
    trim_held();
}

void ObjectStream::own_retained_bytes() {
    if (!holds_borrowed_bytes()) return;
    // One owned copy of the most recent `retain_limit_` bytes replaces the chunks: what retain() promises.
    const uint64_t start = std::max(held_start(), position_ - std::min<uint64_t>(position_, retain_limit_));
    const size_t size = static_cast<size_t>(position_ - start);
    uint8_t* copy;
    Chunk owned = fresh_bytes(size, &copy);
    read_held(start, copy, size);
    held_.clear();
    held_bytes_ = 0;
    if (size != 0) {
        held_.push_back(HeldChunk{start, std::move(owned)});
        held_bytes_ = size;
    }
}

void ObjectStream::retain(uint64_t limit_bytes) {
    retain_limit_ = limit_bytes;
    if (limit_bytes == 0) {
        held_.clear();
        held_bytes_ = 0;
    }
    trim_held();
}

void ObjectStream::trim_held() {
    // Drops the oldest chunks while the rest still cover the limit: the most recent `retain_limit_` bytes
    // stay held even when the newest chunk is a short one (the end of the object).
    while (held_.size() > 1 && held_bytes_ - held_.front().chunk.size >= retain_limit_) {
        held_bytes_ -= held_.front().chunk.size;
        held_.pop_front();
    }
}

uint64_t ObjectStream::held_start() const {
    if (!held_.empty()) return held_.front().start;
    return position_ - current_offset_;
}

size_t ObjectStream::read_held(uint64_t offset, uint8_t* dst, size_t size) const {
    size_t copied = 0;
    const auto copy_from = [&](const Chunk& chunk, uint64_t start) {
        const uint64_t at = offset + copied;
        if (copied == size || !chunk || at < start || at >= start + chunk.size) return;
        const size_t n = static_cast<size_t>(std::min<uint64_t>(start + chunk.size - at, size - copied));
        std::memcpy(dst + copied, chunk.data + (at - start), n);
        copied += n;
    };
    // Chunks are contiguous and in order, so one pass copies a run that spans several.
    for (const HeldChunk& held : held_) copy_from(held.chunk, held.start);
    copy_from(current_, position_ - current_offset_);
    return copied;
}

bool ObjectStream::try_peek(const uint8_t** data, size_t* size) {
    if (current_offset_ == current_.size) {
        if (current_) release_current();
        if (!advance()) return false;
    }
    *data = current_.data + current_offset_;
    *size = current_.size - current_offset_;
    return true;
}

void ObjectStream::consume(size_t n) {
    current_offset_ += n;
    position_ += n;
    if (current_offset_ == current_.size) release_budget_if_all_read();
}

void ObjectStream::release_budget_if_all_read() {
    // A reader that stops at the last byte (read() of a known size) never asks for more: the end of the
    // object is noticed here, so that the stream's budget does not wait for it to be closed.
    if (budget_.held() == 0) return;
    {
        std::lock_guard<std::mutex> lock(shared_->mutex);
        if (!shared_->headers_received || position_ < shared_->expected_bytes) return;
    }
    budget_.release();
}

void ObjectStream::return_read_window(size_t bytes) {
    returned_bytes_ += bytes;
    // Handing bytes back a whole chunk at a time keeps the CRT's locking off the per-line path; once the
    // body is complete, not at all (see widen_window).
    {
        std::lock_guard<std::mutex> lock(shared_->mutex);
        if (shared_->body_complete_locked()) return;
    }
    aws_s3_meta_request_increment_read_window(meta_.native(), bytes);
    // A window the budget cut short grows once bytes came back to the budget.
    if (window_bytes_ < window_wanted_ && budget_.active()) apply_window();
}

bool ObjectStream::wait_for_data() {
    const uint8_t* data;
    size_t size;
    if (try_peek(&data, &size)) return true;
    std::unique_lock<std::mutex> lock(shared_->mutex);
    wait_or_fail(lock, [this] { return shared_->failed || !shared_->queue.empty() || shared_->finished; }, "data");
    if (!shared_->queue.empty()) return true;
    lock.unlock();
    budget_.release();  // finished, nothing left: the stream buffers nothing more
    return false;
}

uint64_t ObjectStream::wait_for_size() {
    std::unique_lock<std::mutex> lock(shared_->mutex);
    wait_or_fail(lock, [this] { return shared_->failed || shared_->headers_received; }, "response");
    return shared_->expected_bytes;
}

bool ObjectStream::first_byte_latency(double* seconds) {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    if (shared_->first_byte_latency_ns < 0) return false;
    *seconds = static_cast<double>(shared_->first_byte_latency_ns) / 1e9;
    return true;
}

bool ObjectStream::wait_for_first_byte_latency(double* seconds) {
    {
        std::unique_lock<std::mutex> lock(shared_->mutex);
        // A small object can finish before its request's telemetry is delivered: then this knows nothing yet.
        const auto settled = [this] {
            return shared_->failed || shared_->finished || shared_->first_byte_latency_ns >= 0;
        };
        // Waiting here is a measurement, not a read: running out of patience leaves the stream as it is (its
        // reader applies the timeout to its own wait), and a failure is the reader's to see.
        meta_.wait_patiently(lock, settled, request_.timeout_ms);
    }
    return first_byte_latency(seconds);
}

bool ObjectStream::size_if_known(uint64_t* size) {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    if (shared_->failed || !shared_->headers_received) return false;
    *size = shared_->expected_bytes;
    return true;
}

ObjectStream::Chunk ObjectStream::take_chunk() {
    const uint8_t* data;
    size_t available;
    while (!try_peek(&data, &available)) {
        if (!wait_for_data()) return Chunk();  // the end of the object, verified complete
    }
    const size_t chunk_size = current_.size;
    Chunk taken;
    if (current_offset_ == 0) {
        taken = std::move(current_);
    } else {
        // The unread tail shares the chunk's memory: no copy either.
        taken = current_;
        taken.data += current_offset_;
        taken.size -= current_offset_;
    }
    pass_current(chunk_size, taken.size);
    return taken;
}

void ObjectStream::pass_current(size_t chunk_size, size_t passed) {
    return_read_window(chunk_size);
    hold(current_, position_ - current_offset_);  // nothing, if the chunk itself was handed out
    position_ += passed;
    current_ = Chunk();
    current_offset_ = 0;
    release_budget_if_all_read();
}

void ObjectStream::wait_for_placement(uint64_t* first_offset, uint64_t* object_size) {
    std::unique_lock<std::mutex> lock(shared_->mutex);
    wait_or_fail(lock, [this] { return shared_->failed || shared_->headers_received; }, "response");
    *first_offset = shared_->first_offset;
    *object_size = shared_->object_size;
}

uint64_t ObjectStream::received_bytes() {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    return shared_->received_bytes;
}

uint64_t ObjectStream::buffered_bytes() {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    return shared_->received_bytes - position_;
}

std::string ObjectStream::etag() {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    return shared_->etag;
}

}  // namespace torchdata_s3
