// File-object reading on top of ObjectStream: copying into caller memory and finding line ends.
// No Python here; the binding decides where the GIL is released.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "object_stream.h"

namespace torchdata_s3 {

// Copies up to `size` bytes into `dst`, blocking for data as needed; fewer only at the end of the object.
size_t read_fully(ObjectStream& stream, uint8_t* dst, size_t size);

// Copies what is available now (at least one byte unless at the end), at most `size` bytes.
size_t read_available(ObjectStream& stream, uint8_t* dst, size_t size);

// Appends bytes up to and including the next '\n' (or `limit` bytes, or the end) to `line`.
// `limit` < 0: no limit.
void read_line(ObjectStream& stream, std::string* line, int64_t limit);

// Reads and discards `count` bytes; returns how many there were before the end.
uint64_t skip(ObjectStream& stream, uint64_t count);

}  // namespace torchdata_s3
