#include "scattered_results.h"

#include <algorithm>
#include <atomic>
#include <iterator>

#include "gil_release.h"
#include "kept_results.h"

namespace torchdata_s3 {
namespace {

std::atomic<bool> enabled{true};

}  // namespace

void ScatteredResults::set_enabled(bool on) { enabled = on; }

uint64_t ScatteredResults::block_size_for(const ObjectStream& stream, uint64_t size) {
    return size >= kMinScatteredReadBytes && stream.part_size() % size == 0 ? size : 0;
}

void ScatteredResults::plan(ObjectStream& stream, uint64_t ahead_bytes) {
    release_passed(stream);
    const uint64_t block = stream.client().read_size_bytes();
    const GetObjectRequest& request = stream.request();
    if (block == 0 || !enabled || request.has_range || request.suffix_bytes != 0)
        return;  // parts from offset 0 on only
    const uint64_t part = stream.part_size();
    uint64_t size = request.size_hint;  // a listing's, until the answer tells
    if (part % block != 0) return;
    if (!stream.size_if_known(&size) && size == 0) {
        // Parts are asked for from offset 0 on, so their ranges are known before the size: planned on the
        // loader's guess. A first byte that arrives before this plan, or a shorter object, leaves blocks unused.
        size = request.guessed_length / part * part;
        if (size == 0) return;
    }
    const auto part_end = [part](uint64_t offset) { return (offset + part - 1) / part * part; };
    // A part is received into blocks only if they are there when its first byte arrives; a part whose first
    // byte came before leaves its blocks unwritten (they are reused once passed). Parts below the received
    // bytes are done with.
    const uint64_t from = std::max(stream.scatter_end(), part_end(stream.received_bytes()));
    const uint64_t until = std::min(size, part_end(stream.window_end() + ahead_bytes + part));
    for (uint64_t at = from; at < until;) {
        const uint64_t length = std::min(block, size - at);
        uint64_t capacity;
        py::object bytes = result_for(length, &capacity);
        stream.scatter_into(at, reinterpret_cast<uint8_t*>(PyBytes_AS_STRING(bytes.ptr())),
                            static_cast<size_t>(length));
        planned_.push_back(Planned{at, std::move(bytes), capacity});
        at += length;
    }
}

py::object ScatteredResults::take(ObjectStream& stream, uint64_t size) {
    const uint64_t position = stream.position();
    auto found = std::find_if(planned_.begin(), planned_.end(),
                              [position](const Planned& planned) { return planned.first == position; });
    uint64_t object_size;
    if (found == planned_.end() || !stream.size_if_known(&object_size)) return py::none();
    const uint64_t length = static_cast<uint64_t>(PyBytes_GET_SIZE(found->bytes.ptr()));
    // The object's last block is shorter: a read of at least what is left takes it.
    if (length != size && !(length < size && position + length == object_size)) return py::none();
    py::object result = found->bytes;  // the caller's reference; ours goes once the stream is past it
    const uint8_t* data = reinterpret_cast<const uint8_t*>(PyBytes_AS_STRING(result.ptr()));
    bool taken;
    {
        GilRelease release;  // nothing of Python in here, not even None
        taken = stream.take_block(data, static_cast<size_t>(length));
        // Reading to the end also confirms the transfer finished cleanly before we hand out the bytes.
        if (taken && position + length == object_size) stream.wait_for_data();
    }
    if (!taken) return py::none();
    release_passed(stream);
    return result;
}

void ScatteredResults::release_passed(ObjectStream& stream) {
    if (planned_.empty()) return;
    const uint64_t kept_from = std::min(stream.held_start(), stream.position());
    stream.forget_blocks_below(kept_from);  // first: no part may be given what is freed next
    while (!planned_.empty() &&
           planned_.front().first + static_cast<uint64_t>(PyBytes_GET_SIZE(planned_.front().bytes.ptr())) <=
               kept_from) {
        keep_result(planned_.front().bytes, planned_.front().capacity);
        planned_.pop_front();
    }
}

py::object ScatteredResults::owner_of(const uint8_t* data) const {
    for (const Planned& planned : planned_) {
        const uint8_t* start = reinterpret_cast<const uint8_t*>(PyBytes_AS_STRING(planned.bytes.ptr()));
        if (data >= start && data < start + PyBytes_GET_SIZE(planned.bytes.ptr())) return planned.bytes;
    }
    return py::none();
}

void ScatteredResults::drop(bool may_free) {
    for (Planned& planned : planned_) {
        if (may_free) {
            keep_result(planned.bytes, planned.capacity);
        } else {
            planned.bytes.release();  // never free (or reuse) what a CRT thread may write
        }
    }
    planned_.clear();
}

}  // namespace torchdata_s3
