#include "body_chunk.h"

#include <aws/s3/s3_buffer_pool.h>

#include <cstring>

#include "s3_client.h"

namespace torchdata_s3 {
namespace {

// Releases the pool ticket when the last chunk sharing it goes away.
struct TicketRelease {
    std::shared_ptr<S3Client> client;
    size_t bytes;

    void operator()(aws_s3_buffer_ticket* ticket) const {
        // In a fork() child the pool (and its mutex) is a copy whose owner threads are gone: leak.
        if (client->usable_here()) aws_s3_buffer_ticket_release(ticket);
        client->unpin_pool_bytes(bytes);
    }
};

}  // namespace

BodyChunk pin_pool_bytes(std::shared_ptr<S3Client> client, aws_s3_buffer_ticket* ticket, size_t held_bytes,
                         const uint8_t* data, size_t size) {
    BodyChunk chunk;
    chunk.data = data;
    chunk.size = size;
    client->pin_pool_bytes(held_bytes);
    aws_s3_buffer_ticket_acquire(ticket);
    chunk.keeper = std::shared_ptr<aws_s3_buffer_ticket>(ticket, TicketRelease{std::move(client), held_bytes});
    return chunk;
}

BodyChunk borrow_bytes(const uint8_t* data, size_t size) {
    BodyChunk chunk;
    chunk.data = data;
    chunk.size = size;
    return chunk;
}

BodyChunk fresh_bytes(size_t size, uint8_t** writable) {
    std::shared_ptr<uint8_t> memory(new uint8_t[size], std::default_delete<uint8_t[]>());
    *writable = memory.get();
    BodyChunk chunk;
    chunk.data = memory.get();
    chunk.size = size;
    chunk.keeper = std::move(memory);
    return chunk;
}

BodyChunk copy_bytes(const uint8_t* data, size_t size) {
    uint8_t* copy;
    BodyChunk chunk = fresh_bytes(size, &copy);
    std::memcpy(copy, data, size);
    return chunk;
}

}  // namespace torchdata_s3
