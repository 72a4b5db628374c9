// A span of object bytes and whatever keeps it alive.
//
// Zero copy: a GET part arrives in a buffer of the client's CRT buffer pool. Instead of copying it out, a chunk
// can hold that buffer's ticket, so the same memory travels from the socket read to Python's buffer protocol.
// The pool belongs to the aws_s3_client, so a pinned chunk also holds the S3Client: the pool outlives every
// ticket, and the client is never destroyed from a CRT thread (chunks are released by readers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

struct aws_s3_buffer_ticket;

namespace torchdata_s3 {

class S3Client;

struct BodyChunk {
    const uint8_t* data = nullptr;
    size_t size = 0;
    std::shared_ptr<const void> keeper;  // owns `data`: a pool ticket or our own copy; none if borrowed

    explicit operator bool() const { return data != nullptr; }
    // Points into memory someone else owns (a reader's result the part landed in): valid only while that
    // reader's call lasts.
    bool borrowed() const { return data != nullptr && keeper == nullptr; }
};

// Holds `ticket` (the pool buffer of `held_bytes` that `data` points into) until the last copy of the chunk is
// gone; the client counts `held_bytes` as pinned meanwhile.
BodyChunk pin_pool_bytes(std::shared_ptr<S3Client> client, aws_s3_buffer_ticket* ticket, size_t held_bytes,
                         const uint8_t* data, size_t size);

// A chunk pointing into memory it does not own (see BodyChunk::borrowed).
BodyChunk borrow_bytes(const uint8_t* data, size_t size);

// A chunk owning `size` new bytes, uninitialised: the caller fills them through `*writable`.
BodyChunk fresh_bytes(size_t size, uint8_t** writable);

// A chunk with its own heap copy of `size` bytes at `data`.
BodyChunk copy_bytes(const uint8_t* data, size_t size);

}  // namespace torchdata_s3
