#include "scattered_results.h"

#include <algorithm>
#include <atomic>
#include <iterator>

#include "gil_release.h"

namespace torchdata_s3 {
namespace {

// Results the streams are past, kept for reuse once nobody else holds them. Fresh `bytes` for every block
// cost a page fault per 4 KiB received: glibc hands 1 MiB chunks freed in a stream's order back to the
// kernel (the heap's top is trimmed past twice the mmap threshold) and faults them in again, about 235,000
// faults per GiB read (measured, fast endpoint), which took read(1 MiB) from 0.39 to 0.95 CPU s/GB.
// Process-wide, touched only with the GIL held; never destroyed (the interpreter may be gone by then).
class Recycled {
public:
    // A result of `size` bytes nothing else refers to, its cached hash forgotten (it is refilled), or None.
    py::object take(uint64_t size) {
        size_t looked = 0;
        for (auto it = blocks_.rbegin(); it != blocks_.rend() && looked < kScan; ++it, ++looked) {
            PyObject* block = *it;
            if (static_cast<uint64_t>(PyBytes_GET_SIZE(block)) != size || Py_REFCNT(block) != 1) continue;
            blocks_.erase(std::next(it).base());
            bytes_ -= size;
            forget_hash(block);
            return py::reinterpret_steal<py::object>(block);
        }
        return py::none();
    }

    // Keeps `result` for reuse (its reader may still hold it: it is reused only once the reader let go).
    void give_back(py::object result) {
        bytes_ += static_cast<uint64_t>(PyBytes_GET_SIZE(result.ptr()));
        blocks_.push_back(result.release().ptr());
        while (bytes_ > kBytes) {
            PyObject* oldest = blocks_.front();
            blocks_.pop_front();
            bytes_ -= static_cast<uint64_t>(PyBytes_GET_SIZE(oldest));
            Py_DECREF(oldest);
        }
    }

    static Recycled& instance() {
        static Recycled* recycled = new Recycled();
        return *recycled;
    }

private:
    // As many as a read window of 1 MiB results: what one stream passes while the next is planned.
    static constexpr uint64_t kBytes = 64 * 1024 * 1024;
    static constexpr size_t kScan = 64;  // the most recent ones: results a reader still holds are skipped

    static void forget_hash(PyObject* block) {
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif
        // bytes cache their hash (ob_shash; deprecated in 3.13, still there): this one's content changes.
        reinterpret_cast<PyBytesObject*>(block)->ob_shash = -1;
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
    }

    std::deque<PyObject*> blocks_;
    uint64_t bytes_ = 0;
};

std::atomic<bool> enabled{true};

py::object new_result(uint64_t size) {
    py::object reused = Recycled::instance().take(size);
    if (!reused.is_none()) return reused;
    PyObject* raw = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(size));
    if (raw == nullptr) throw py::error_already_set();
    return py::reinterpret_steal<py::object>(raw);
}

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
    if (part % block != 0 || (!stream.size_if_known(&size) && size == 0)) return;
    const auto part_end = [part](uint64_t offset) { return (offset + part - 1) / part * part; };
    // A part is received into blocks only if they are there when its first byte arrives; a part whose first
    // byte came before leaves its blocks unwritten (they are reused once passed). Parts below the received
    // bytes are done with.
    const uint64_t from = std::max(stream.scatter_end(), part_end(stream.received_bytes()));
    const uint64_t until = std::min(size, part_end(stream.window_end() + ahead_bytes + part));
    for (uint64_t at = from; at < until;) {
        const uint64_t length = std::min(block, size - at);
        py::object bytes = new_result(length);
        stream.scatter_into(at, reinterpret_cast<uint8_t*>(PyBytes_AS_STRING(bytes.ptr())),
                            static_cast<size_t>(length));
        planned_.push_back(Planned{at, std::move(bytes)});
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
        Recycled::instance().give_back(std::move(planned_.front().bytes));
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
            Recycled::instance().give_back(std::move(planned.bytes));
        } else {
            planned.bytes.release();  // never free (or reuse) what a CRT thread may write
        }
    }
    planned_.clear();
}

}  // namespace torchdata_s3
