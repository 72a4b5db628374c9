// The results of read(n) of a large object, received straight from the socket.
//
// A reader that reads an object in pieces of one size (the loader's read(1 MiB) loop) would get each piece
// copied out of a part's pool buffer into the `bytes` read() returns. Here, once the object's size is known,
// every part the download has not begun yet is planned as `bytes` objects of the size its reader last read in
// (S3Client::read_size_bytes), each lent to the CRT as a block (ObjectStream::scatter_into); a part received
// into them is delivered as one chunk per block, and a read() that reaches a whole block from its first byte
// hands that very object over. Any other way of reading copies out of blocks as out of pool buffers.
//
// Threads: the owner's (PyObjectStream's) calls, with the GIL held; take() releases it while it waits.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <deque>

#include "object_stream.h"

namespace torchdata_s3 {

namespace py = pybind11;

// A read size is worth scattering parts over when it divides a part (no block spans two parts, so a block is
// whole once its part is delivered) and is at least this large (fewer, larger pieces: a line-by-line or
// header-sized reader keeps the pool buffers).
constexpr uint64_t kMinScatteredReadBytes = 256 * 1024;

class ScatteredResults {
public:
    // Process-wide switch (on by default), for measurements: off, no part is scattered over results.
    static void set_enabled(bool enabled);

    // The read size to plan in, for a reader of `stream` that reads `size` bytes at a time (0: none).
    static uint64_t block_size_for(const ObjectStream& stream, uint64_t size);

    // Plans blocks for every part of `stream` (a whole object of known size: listed, or answered) not received
    // yet that may begin before the reader has read `ahead_bytes` more or widened its window by that much. Before
    // an object's size is known, only the parts its request guesses it fills (GetObjectRequest::guessed_length).
    void plan(ObjectStream& stream, uint64_t ahead_bytes);

    // The planned result that starts at the stream's position, if it is `size` bytes long (or the object's last,
    // shorter one) and its part was received into it: read and handed over. None otherwise (nothing read).
    py::object take(ObjectStream& stream, uint64_t size);

    // Lets go of the results the stream is past and keeps no chunk of (read, and not retained for seeking).
    void release_passed(ObjectStream& stream);

    // The result a chunk at `data` points into (it keeps the chunk's memory alive), or None.
    py::object owner_of(const uint8_t* data) const;

    bool empty() const { return planned_.empty(); }
    // After ObjectStream::stop_scattering: frees them, or leaks them when a CRT thread may still write there.
    void drop(bool may_free);

private:
    struct Planned {
        uint64_t first;  // object offset of its first byte
        py::object bytes;
        uint64_t capacity;  // what its memory holds (kept_results.h)
    };
    std::deque<Planned> planned_;
};

}  // namespace torchdata_s3
