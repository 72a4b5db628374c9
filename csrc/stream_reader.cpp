#include "stream_reader.h"

#include <algorithm>
#include <cstring>

namespace torchdata_s3 {

size_t read_fully(ObjectStream& stream, uint8_t* dst, size_t size) {
    size_t filled = 0;
    while (filled < size) {
        const uint8_t* data;
        size_t available;
        if (!stream.try_peek(&data, &available)) {
            if (!stream.wait_for_data()) break;
            continue;
        }
        const size_t n = std::min(available, size - filled);
        if (data != dst + filled) std::memcpy(dst + filled, data, n);  // equal: the part landed there (land_in)
        stream.consume(n);
        filled += n;
    }
    return filled;
}

size_t read_available(ObjectStream& stream, uint8_t* dst, size_t size) {
    if (size == 0 || !stream.wait_for_data()) return 0;
    const uint8_t* data;
    size_t available;
    stream.try_peek(&data, &available);
    const size_t n = std::min(available, size);
    std::memcpy(dst, data, n);
    stream.consume(n);
    return n;
}

void read_line(ObjectStream& stream, std::string* line, int64_t limit) {
    size_t budget = limit < 0 ? SIZE_MAX : static_cast<size_t>(limit);
    while (budget > 0) {
        const uint8_t* data;
        size_t available;
        if (!stream.try_peek(&data, &available)) {
            if (!stream.wait_for_data()) return;
            continue;
        }
        const size_t scan = std::min(available, budget);
        const void* newline = std::memchr(data, '\n', scan);
        const size_t n = newline ? static_cast<const uint8_t*>(newline) - data + 1 : scan;
        line->append(reinterpret_cast<const char*>(data), n);
        stream.consume(n);
        if (newline) return;
        budget -= n;
    }
}

uint64_t skip(ObjectStream& stream, uint64_t count) {
    uint64_t skipped = 0;
    while (skipped < count) {
        const uint8_t* data;
        size_t available;
        if (!stream.try_peek(&data, &available)) {
            if (!stream.wait_for_data()) break;
            continue;
        }
        const size_t n = static_cast<size_t>(std::min<uint64_t>(available, count - skipped));
        stream.consume(n);
        skipped += n;
    }
    return skipped;
}

}  // namespace torchdata_s3
