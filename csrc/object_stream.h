// One GetObject in flight: the CRT's parallel ranged GETs deliver parts in order into a queue of chunks
// that the reader drains. Read backpressure keeps what is buffered within the stream's window.
//
// Threads: the CRT's callbacks only touch `Shared`, under its mutex. The reader (one thread at a time; the
// binding serialises) takes whole chunks out of the queue and reads them without the lock.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>

#include "body_chunk.h"
#include "meta_request.h"
#include "node_budget.h"
#include "request_failure.h"
#include "s3_client.h"

struct aws_s3_meta_request;

namespace torchdata_s3 {

struct GetObjectRequest {
    std::string bucket;
    std::string key;
    bool has_range = false;
    uint64_t range_start = 0;
    uint64_t range_end_inclusive = 0;
    uint64_t suffix_bytes = 0;     // nonzero: only the object's last `suffix_bytes` (Range: bytes=-N)
    std::string if_match;          // nonzero length: the object must still carry this ETag (else HTTP 412)
    std::string if_none_match;     // nonzero length: fails with HTTP 304 if the object still carries this ETag
    uint64_t window_bytes = 0;     // bytes the stream may buffer ahead of the reader; 0: the client's default
    uint32_t timeout_ms = 0;       // longest wait for the next byte; 0: no limit
    uint64_t part_size_bytes = 0;  // 0: the client's part size
    uint64_t size_hint = 0;        // the object's size if known (a listing's); 0: unknown
    // A whole object of unknown size that is probably small (the loader's guess from the objects before it):
    // the most its result may be. Memory of that size is lent to it, used if the object turns out to fill
    // between half of it and all of it (see ObjectStream::result_memory_length); 0: none.
    uint64_t landing_capacity = 0;
    // A whole object of unknown size that probably holds at least this many bytes (the loader's guess from the
    // objects before it; whole parts; 0: none): its parts up to there are received into the reader's results like
    // later ones (ScatteredResults::plan), their blocks planned before its size is known. If the object is
    // shorter, the blocks past its end go unused (held until the stream is closed).
    uint64_t guessed_length = 0;

    // The bytes this GET delivers, if known before it starts: a range's length (fewer if the object ends
    // first), or a whole object's listed size; 0 if unknown (a suffix, or no listing).
    uint64_t expected_length() const {
        if (suffix_bytes != 0) return 0;
        return has_range ? range_end_inclusive - range_start + 1 : size_hint;
    }
};

class ObjectStream {
public:
    // Starts the GET immediately; returns without waiting for any byte.
    //
    // `result_memory`: for a GET whose length the caller knows (request.expected_length(), no more than a part),
    // memory for all of it. Its one part is received straight there, as if land_in() had been called before the
    // first byte, so a read_fully() into it from position 0 copies nothing. It must stay valid until
    // stop_landing() returned true; land_in() is refused meanwhile. Bytes past that length (an object that grew
    // after its listing) arrive in pool buffers as usual.
    static std::shared_ptr<ObjectStream> start(std::shared_ptr<S3Client> client, GetObjectRequest request,
                                               uint8_t* result_memory = nullptr);
    // The length of the result_memory start() takes for `request` on `client`: its expected_length() if that is
    // known and at most a part; else its landing_capacity if that is at most half a part (the object's bytes
    // land there only if it fills at least half of it: is_result_memory_exact() is then false); else 0
    // (start() then takes none).
    static uint64_t result_memory_length(const S3Client& client, const GetObjectRequest& request);
    // Whether result_memory_length() is the GET's length (else it is only the most it may be).
    static bool is_result_memory_exact(const GetObjectRequest& request) { return request.expected_length() != 0; }
    ~ObjectStream();
    ObjectStream(const ObjectStream&) = delete;
    ObjectStream& operator=(const ObjectStream&) = delete;

    const GetObjectRequest& request() const { return request_; }

    // Non-blocking: if bytes are ready, points `data`/`size` at them (valid until the next consume() or
    // wait) and returns true. Throws the request's failure once it is known.
    bool try_peek(const uint8_t** data, size_t* size);
    // Marks `n` bytes of the peeked span as read.
    void consume(size_t n);
    // The unread rest of the chunk at hand, without waiting or moving on to the next chunk (false: none left).
    bool peek_current(const uint8_t** data, size_t* size) const {
        if (current_offset_ == current_.size) return false;
        *data = current_.data + current_offset_;
        *size = current_.size - current_offset_;
        return true;
    }
    // Blocks until try_peek() would succeed (true) or the object is complete (false); throws on failure.
    bool wait_for_data();

    // Blocks until the response headers arrived; returns the byte count this stream will deliver.
    uint64_t wait_for_size();
    // The same without waiting: false until the response headers arrived (or if the request failed).
    bool size_if_known(uint64_t* size);
    // The endpoint's round trip as this GET saw it: the shortest time any of its requests took from its
    // first byte sent to the first byte of the response. False until a request's body was delivered.
    bool first_byte_latency(double* seconds);
    // The same, blocking until it is known, the GET ended or failed, or the request timeout passed (then
    // false; the stream itself is left as it was).
    bool wait_for_first_byte_latency(double* seconds);
    // Blocks until the response headers arrived; returns the object offset of this stream's first byte and
    // the whole object's size (from Content-Range when a range was asked for).
    void wait_for_placement(uint64_t* first_offset, uint64_t* object_size);
    // The ETag of the object (empty until the headers arrived).
    std::string etag();
    // Bytes consumed so far, counted from the stream's first byte.
    uint64_t position() const { return position_; }
    // Bytes received so far (consumed or not).
    uint64_t received_bytes();
    // Bytes received and not yet consumed: what a forward skip can pass over without waiting.
    uint64_t buffered_bytes();

    // Keeps consumed bytes in memory, at least the most recent `limit_bytes` of them (whole chunks: up to a
    // chunk more), so that read_held() can serve them again. 0 (the default) keeps nothing.
    void retain(uint64_t limit_bytes);
    // The lowest stream offset read_held() can serve (== position() when nothing is held).
    uint64_t held_start() const;
    // Copies bytes from `offset` (a stream offset below position(), or in the chunk being read) out of the
    // retained chunks into `dst`; returns how many (0 when `offset` is not held). Never waits.
    size_t read_held(uint64_t offset, uint8_t* dst, size_t size) const;
    // False in a fork() child: the CRT threads serving this stream exist only in the parent.
    bool usable_here() const { return meta_.usable_here(); }

    // Receives the parts of the rest of the stream that have not begun yet straight into `dst`, the caller's
    // memory for the next `size` bytes (from position()), instead of into pool buffers: their chunks then point
    // into `dst` and read_fully() skips copying them. `dst` must stay valid until stop_landing() returned true.
    // False (nothing changed, no stop_landing() owed) once the transfer is over, before its headers came, or while
    // the stream lands in memory given to start().
    bool land_in(uint8_t* dst, size_t size);
    // Gives no further part the caller's memory. After a failed read it drops every chunk pointing into it and
    // stops the transfer; after a read that got all it wanted, the bytes retain() keeps may stay in it (see
    // holds_borrowed_bytes) unless a copy of them is much smaller than the result. True when no CRT thread can
    // still write into the memory; else, after waiting up to `patience_ms` for the cancelled transfer to wind
    // down, false (the memory must then never be freed).
    bool stop_landing(bool read_failed, uint32_t patience_ms);
    // Whether chunks still point into a caller's memory (land_in): the caller keeps it alive while they do.
    bool holds_borrowed_bytes() const;

    // Scattering (cmake/AwsCrtPatches.cmake, "a GET part's body can be scattered"): `data`, the caller's memory
    // for object bytes [first, first + size), where first == scatter_end() (blocks come in object order, each
    // where the last one ended). A part not begun yet whose every byte is covered by blocks when its first
    // byte arrives is received straight into them; its chunks then point into them, one per block. A block
    // must stay valid until forget_blocks_below() passed it or stop_scattering() returned true.
    void scatter_into(uint64_t first, uint8_t* data, size_t size);
    uint64_t scatter_end() const;
    // Blocks ending at or below `offset` (at most position(): every part over them was delivered) are given
    // to no part any more.
    void forget_blocks_below(uint64_t offset);
    // If the next unread bytes are the whole block at `data` (one chunk of `size` bytes pointing at it), reads
    // them as take_chunk() would and returns true; else reads nothing and returns false. Blocks like
    // wait_for_data() until a chunk is there.
    bool take_block(const uint8_t* data, size_t size);
    // Gives no block to any further part and, if some part was given blocks, cancels the transfer and waits
    // up to `patience_ms` for it to wind down. True when no CRT thread can still write into a block; false
    // (the blocks must then never be freed) if the transfer would not end.
    bool stop_scattering(uint32_t patience_ms);
    // The object offset the CRT's read window reaches: a part starting below it may have begun.
    uint64_t window_end() const { return window_bytes_ + returned_bytes_; }
    uint64_t part_size() const { return part_bytes(); }
    S3Client& client() const { return *client_; }

    // Lets the download run up to `window_bytes` ahead of the reader (never shrinks the window). With a node
    // budget (node_budget.h), only as far as the budget grants: the rest when bytes come back to it.
    void widen_window(uint64_t window_bytes);

    // Stops the transfer; later reads raise. Safe to call more than once.
    void cancel();

    // Implementation types, public only so that the CRT callbacks in object_stream.cpp can name them.
    using Chunk = BodyChunk;
    // Everything the CRT callbacks touch. The CRT holds its own reference until the meta request shuts
    // down, so a stream dropped mid-transfer never leaves a callback pointing at freed memory.
    struct Shared;

    // Takes the unread rest of the current chunk out of the stream, without copying when nothing of it was
    // read yet. Returns an empty chunk at the end of the object. Blocks like wait_for_data().
    Chunk take_chunk();

private:
    ObjectStream(std::shared_ptr<S3Client> client, GetObjectRequest request);
    bool advance();  // moves the next queued chunk into `current_`; false if none is queued
    void return_read_window(size_t bytes);
    uint64_t part_bytes() const { return part_bytes_of(*client_, request_); }
    static uint64_t part_bytes_of(const S3Client& client, const GetObjectRequest& request) {
        return request.part_size_bytes != 0 ? request.part_size_bytes : client.options().part_size_bytes;
    }
    // Opens the CRT's window towards window_wanted_, as far as the node budget allows.
    void apply_window();
    // Gives the node budget back once the reader has consumed every byte the stream will deliver.
    void release_budget_if_all_read();
    // MetaRequest::wait_or_fail with the request's timeout; a failure or timeout first gives the stream's
    // node budget back (a failed stream buffers nothing more), then is thrown.
    template <typename Predicate>
    void wait_or_fail(std::unique_lock<std::mutex>& lock, Predicate done, const char* what) {
        try {
            meta_.wait_or_fail(lock, done, request_.timeout_ms, what);
        } catch (...) {
            if (lock.owns_lock()) lock.unlock();
            budget_.release();
            throw;
        }
    }
    // The chunk being read is done with: back to the read window, and into the retained chunks if enabled.
    void release_current();
    // The chunk being read was handed out from the current offset to its end (`passed` bytes; the chunk was
    // `chunk_size` long): as release_current, and the position moves past it.
    void pass_current(size_t chunk_size, size_t passed);
    // Waits (lock held) until the CRT reports the transfer finished: nothing of it runs any more, so memory
    // it was lent may go. False if it did not finish within `patience_ms` (the memory must then be leaked).
    bool wait_until_finished(std::unique_lock<std::mutex>& lock, uint32_t patience_ms);
    void hold(const Chunk& chunk, uint64_t start);
    void trim_held();
    // Replaces retained chunks that borrow the caller's memory (land_in) with one copy of their own.
    void own_retained_bytes();

    std::shared_ptr<S3Client> client_;
    GetObjectRequest request_;
    std::shared_ptr<Shared> shared_;
    MetaRequest meta_;
    uint64_t window_bytes_ = 0;    // the read window granted so far
    uint64_t returned_bytes_ = 0;  // consumed bytes handed back to the read window (it slides by them)
    uint64_t window_wanted_ = 0;   // the read window asked for (more than granted while the budget is short)
    // Of the client's node budget: what the window may buffer. Given back once the stream buffers nothing
    // more (its end, a failure, close).
    BudgetShare budget_;
    uint64_t first_budget_bytes_ = 0;  // the guaranteed share: the first part (or the object, if smaller)

    // reader side only (no lock):
    Chunk current_;
    size_t current_offset_ = 0;
    uint64_t position_ = 0;
    // Consumed chunks kept for read_held(), oldest first, with their stream offsets.
    struct HeldChunk {
        uint64_t start;
        Chunk chunk;
    };
    std::deque<HeldChunk> held_;
    uint64_t held_bytes_ = 0;
    uint64_t retain_limit_ = 0;
};

}  // namespace torchdata_s3
