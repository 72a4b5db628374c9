// The Python view of one ObjectStream: a binary, forward-only file object, plus what the reader policy in
// torchdata_s3/reader.py needs (placement, retained bytes, skipping). Blocking calls release the GIL.
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <memory>
#include <optional>
#include <string>

#include "fresh_memory.h"
#include "gil_release.h"
#include "kept_results.h"
#include "object_stream.h"
#include "scattered_results.h"
#include "stream_reader.h"

namespace torchdata_s3 {

namespace py = pybind11;

// How long a failed read() waits for its transfer to wind down before it gives up on the memory the parts were
// landing in (and leaks it rather than free memory a CRT thread might write to). Cancelled requests end within
// a connection's round trip; this only bounds a hung one.
constexpr uint32_t kLandingPatienceMs = 60000;

// Owns a block of memory handed out from a stream; Python reads it through the buffer protocol.
struct Buffer {
    ObjectStream::Chunk chunk;
    py::object owner;  // the bytes a borrowed chunk points into (PyObjectStream::whole_result_), else None
};

[[noreturn]] inline void raise_unsupported(const std::string& message) {
    py::object unsupported = py::module_::import("io").attr("UnsupportedOperation");
    PyErr_SetString(unsupported.ptr(), message.c_str());
    throw py::error_already_set();
}

// The Python file object around an ObjectStream. One reader at a time: a second thread entering while
// another waits for data gets an error instead of corrupting the read position.
class PyObjectStream {
public:
    PyObjectStream(std::shared_ptr<ObjectStream> stream, std::string name)
        : stream_(std::move(stream)), name_(std::move(name)) {}
    PyObjectStream(PyObjectStream&&) = default;  // leaves the moved-from stream without a request to wind down
    ~PyObjectStream() {
        // Dropped unclosed while its result is still landing: the memory must outlive every write into it.
        if (stream_ && whole_result_ && stream_->usable_here() && !stop_whole_result_landing(true)) {
            whole_result_.release();
        }
        if (stream_ && !scattered_.empty()) scattered_.drop(stream_->usable_here() && stop_scattering());
    }

    // Starts `request` (its GET runs at once). A GET of one part whose length is known (an object of listed size,
    // a byte range) is received straight into the `bytes` that a read() of all of it then returns: its bytes are
    // not copied in this process. Whatever else the reader does, they are read from there like any received bytes.
    // So is an object of unknown size given a landing_capacity, if it fills half of that `bytes` or more: read()
    // then returns it shortened to the object's length (see read_whole_result).
    static PyObjectStream start(std::shared_ptr<S3Client> client, GetObjectRequest request, std::string name) {
        const uint64_t length = ObjectStream::result_memory_length(*client, request);
        const bool exact = ObjectStream::is_result_memory_exact(request);  // before start() takes the request
        py::object whole;
        uint8_t* memory = nullptr;
        if (length != 0) {
            PyObject* raw = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(length));
            if (raw == nullptr) throw py::error_already_set();
            whole = py::reinterpret_steal<py::object>(raw);
            memory = reinterpret_cast<uint8_t*>(PyBytes_AS_STRING(raw));
        }
        std::shared_ptr<ObjectStream> stream;
        {
            GilRelease release;
            stream = ObjectStream::start(std::move(client), std::move(request), memory);
        }
        PyObjectStream opened(std::move(stream), std::move(name));
        opened.whole_result_ = std::move(whole);
        opened.whole_result_exact_ = exact;
        // A larger object of listed size: its parts can be received into results from the first one on.
        if (length == 0) opened.scattered_.plan(*opened.stream_, 0);
        return opened;
    }

    const std::string& name() const { return name_; }
    bool closed() const { return stream_ == nullptr; }

    void close() {
        if (!stream_) return;
        if (!stream_->usable_here()) {
            // Inherited across fork(): forget it without touching the parent's request (its destructor leaks
            // the CRT side on purpose). Raising here would only spam garbage-collection warnings.
            stream_.reset();
            return;
        }
        Entry entry(*this);
        stream_->cancel();
        if (whole_result_ && !stop_whole_result_landing(true)) whole_result_.release();  // never free it then
        whole_result_ = py::object();
        if (!scattered_.empty()) scattered_.drop(stop_scattering());
        std::shared_ptr<ObjectStream> released = std::move(stream_);
        {
            GilRelease release;
            released.reset();
        }
        landed_results_ = py::list();
    }

    uint64_t size() {
        Entry entry(*this);
        GilRelease release;
        return stream_->wait_for_size();
    }

    std::optional<uint64_t> size_if_known() {
        Entry entry(*this);
        uint64_t size;
        if (!stream_->size_if_known(&size)) return std::nullopt;
        return size;
    }

    std::optional<double> first_byte_latency() {
        Entry entry(*this);
        double seconds;
        if (!stream_->first_byte_latency(&seconds)) return std::nullopt;
        return seconds;
    }

    std::optional<double> wait_for_first_byte_latency() {
        Entry entry(*this);
        double seconds;
        bool known;
        {
            GilRelease release;
            known = stream_->wait_for_first_byte_latency(&seconds);
        }
        if (!known) return std::nullopt;
        return seconds;
    }

    std::string etag() {
        Entry entry(*this);
        return stream_->etag();
    }

    void widen_window(uint64_t window_bytes) {
        Entry entry(*this);
        scattered_.plan(*stream_, window_bytes);  // before the parts it lets begin do begin
        stream_->widen_window(window_bytes);
    }

    // read(size) served by the planned result at the position, without copying (see scattered_results.h), or
    // None (nothing read). Also tells the client the size its reader reads in.
    py::object take_landed(uint64_t size) {
        Entry entry(*this);
        if (size >= kMinScatteredReadBytes) {
            stream_->client().note_read_size(ScatteredResults::block_size_for(*stream_, size));
        }
        scattered_.plan(*stream_, size);
        return scattered_.take(*stream_, size);
    }

    uint64_t tell() {
        Entry entry(*this);
        return stream_->position();
    }

    py::tuple placement() {
        Entry entry(*this);
        uint64_t first_offset, object_size;
        {
            GilRelease release;
            stream_->wait_for_placement(&first_offset, &object_size);
        }
        return py::make_tuple(first_offset, object_size);
    }

    uint64_t received_bytes() {
        Entry entry(*this);
        return stream_->received_bytes();
    }

    uint64_t buffered_bytes() {
        Entry entry(*this);
        return stream_->buffered_bytes();
    }

    void retain(uint64_t limit_bytes) {
        Entry entry(*this);
        stream_->retain(limit_bytes);
    }

    uint64_t held_start() {
        Entry entry(*this);
        return stream_->held_start();
    }

    size_t read_held(uint64_t offset, const py::object& target) {
        Entry entry(*this);
        WritableView view(target);
        GilRelease release;
        return stream_->read_held(offset, view.data(), view.size());
    }

    uint64_t skip_ahead(uint64_t count) {
        Entry entry(*this);
        uint64_t skipped;
        {
            GilRelease release;
            skipped = skip(*stream_, count);
        }
        scattered_.release_passed(*stream_);
        return skipped;
    }

    py::bytes read(int64_t size) {
        Entry entry(*this);
        uint64_t remaining;
        {
            GilRelease release;
            remaining = stream_->wait_for_size() - stream_->position();
        }
        const uint64_t want = size < 0 ? remaining : std::min<uint64_t>(static_cast<uint64_t>(size), remaining);
        if (want == remaining && stream_->position() == 0 && remaining > stream_->part_size()) {
            // Readers of this client read large objects whole: results of pieces would only be copied from.
            stream_->client().note_read_size(0);
        }
        if (whole_result_ && want == remaining && stream_->position() == 0 && fits_whole_result(want)) {
            return read_whole_result(want);
        }
        Released passed(*this);
        uint64_t capacity;
        py::object bytes = result_for(want, &capacity);  // a large one is a kept one when it can be
        PyObject* raw = bytes.ptr();
        uint8_t* dst = reinterpret_cast<uint8_t*>(PyBytes_AS_STRING(raw));
        size_t got;
        bool landing_over = true;  // false: a CRT thread may still write into `dst`
        try {
            GilRelease release;
            prefer_huge_pages(dst, want);
            // All the rest is wanted: parts not begun yet are received straight into the result.
            const bool landing = want == remaining && stream_->land_in(dst, want);
            try {
                got = read_fully(*stream_, dst, want);
                // Reading to the end also confirms the transfer finished cleanly before we hand out the bytes.
                if (got == remaining) stream_->wait_for_data();
            } catch (...) {
                if (landing) landing_over = stream_->stop_landing(true, kLandingPatienceMs);
                throw;
            }
            if (landing) landing_over = stream_->stop_landing(got != want, kLandingPatienceMs);
        } catch (...) {
            if (!landing_over) bytes.release();  // never free memory the CRT may still write to
            throw;
        }
        if (got != want) {
            if (!landing_over) {
                py::bytes copy(reinterpret_cast<const char*>(dst), static_cast<Py_ssize_t>(got));
                bytes.release();  // as above
                return copy;
            }
            raw = bytes.release().ptr();
            if (_PyBytes_Resize(&raw, static_cast<Py_ssize_t>(got)) != 0) throw py::error_already_set();
            bytes = py::reinterpret_steal<py::object>(raw);
        }
        // The bytes kept for seeking back may be the result's own: they live as long as this stream.
        if (stream_->holds_borrowed_bytes()) landed_results_.append(bytes);
        if (got == want && landing_over) keep_result(bytes, capacity);  // (a shortened one may have moved)
        return py::reinterpret_steal<py::bytes>(bytes.release());
    }

    py::bytes read1(int64_t size) {
        Entry entry(*this);
        Released passed(*this);
        const uint8_t* data;
        size_t available;
        bool more;
        {
            GilRelease release;
            more = stream_->wait_for_data();
        }
        if (!more) return py::bytes();  // built with the GIL held, after the guard gave it back
        stream_->try_peek(&data, &available);
        const size_t n = size < 0 ? available : std::min<size_t>(available, static_cast<size_t>(size));
        py::bytes out(reinterpret_cast<const char*>(data), n);
        stream_->consume(n);
        return out;
    }

    size_t readinto(const py::object& target, bool one_call) {
        Entry entry(*this);
        WritableView view(target);
        scattered_.plan(*stream_, view.size());
        Released passed(*this);
        GilRelease release;
        return one_call ? read_available(*stream_, view.data(), view.size())
                        : read_fully(*stream_, view.data(), view.size());
    }

    py::bytes readline(int64_t limit) {
        Entry entry(*this);
        // Fast path: the whole line is in the chunk at hand; no GIL release, one copy into the result.
        const uint8_t* data;
        size_t available;
        if (limit != 0 && stream_->try_peek(&data, &available)) {
            const size_t scan = limit < 0 ? available : std::min<size_t>(available, static_cast<size_t>(limit));
            const void* newline = std::memchr(data, '\n', scan);
            if (newline != nullptr || scan == static_cast<size_t>(limit)) {
                const size_t n = newline ? static_cast<const uint8_t*>(newline) - data + 1 : scan;
                py::bytes line(reinterpret_cast<const char*>(data), n);
                stream_->consume(n);
                return line;
            }
        }
        std::string line;
        {
            Released passed(*this);
            GilRelease release;
            read_line(*stream_, &line, limit);
        }
        return py::bytes(line);
    }

    // The line iterator (line_iterator.h) cuts lines from this stream while attached: from the reader's
    // attach_lines() until its detach_lines() (torchdata_s3/reader.py: any other call on the reader).
    void attach_lines() {
        Entry entry(*this);
        lines_attached_ = true;
    }
    void detach_lines() { lines_attached_ = false; }
    bool lines_attached() const { return lines_attached_ && stream_ != nullptr; }

    // A line whole in the chunk at hand, cut with the GIL held, without waiting or moving on to the next chunk
    // (chunk boundaries stay with readline(), which lets go of the results passed): a new reference, or nullptr
    // when there is none at hand or the stream is not attached, is in use on another thread or was inherited
    // across fork(); nullptr with an error set if the line could not be allocated.
    PyObject* cut_line() {
        if (!lines_attached() || busy_ || !stream_->usable_here()) return nullptr;
        const uint8_t* data;
        size_t available;
        if (!stream_->peek_current(&data, &available)) return nullptr;
        const void* newline = std::memchr(data, '\n', available);
        if (newline == nullptr) return nullptr;
        const size_t n = static_cast<size_t>(static_cast<const uint8_t*>(newline) - data) + 1;
        PyObject* line = PyBytes_FromStringAndSize(reinterpret_cast<const char*>(data), static_cast<Py_ssize_t>(n));
        if (line != nullptr) stream_->consume(n);
        return line;
    }

    py::bytes next_line() {
        py::bytes line = readline(-1);
        if (PyBytes_GET_SIZE(line.ptr()) == 0) throw py::stop_iteration();
        return line;
    }

    py::list readlines(int64_t hint) {
        py::list lines;
        int64_t total = 0;
        while (true) {
            py::bytes line = readline(-1);
            const Py_ssize_t n = PyBytes_GET_SIZE(line.ptr());
            if (n == 0) break;
            lines.append(std::move(line));
            total += n;
            if (hint > 0 && total >= hint) break;
        }
        return lines;
    }

    std::optional<Buffer> read_chunk() {
        Entry entry(*this);
        Buffer buffer;
        scattered_.plan(*stream_, stream_->part_size());
        {
            GilRelease release;
            buffer.chunk = stream_->take_chunk();
        }
        if (!buffer.chunk) return std::nullopt;
        // The only memory chunks outside a read() borrow: a planned result, or the one from start(). Found
        // before the stream lets go of the results it has passed, this one among them.
        if (buffer.chunk.borrowed()) {
            buffer.owner = scattered_.owner_of(buffer.chunk.data);
            if (buffer.owner.is_none()) buffer.owner = whole_result_;
        }
        scattered_.release_passed(*stream_);
        return buffer;
    }

    uint64_t seek(int64_t offset, int whence) {
        Entry entry(*this);
        int64_t base;
        if (whence == 0) {
            base = 0;
        } else if (whence == 1) {
            base = static_cast<int64_t>(stream_->position());
        } else if (whence == 2) {
            GilRelease release;
            base = static_cast<int64_t>(stream_->wait_for_size());
        } else {
            throw py::value_error("invalid whence (" + std::to_string(whence) + ", should be 0, 1 or 2)");
        }
        const int64_t target = base + offset;
        if (target < 0) throw py::value_error("negative seek position " + std::to_string(target));
        const uint64_t position = stream_->position();
        if (static_cast<uint64_t>(target) < position) {
            raise_unsupported(name_ + " is a forward-only stream: cannot seek back from " + std::to_string(position) +
                              " to " + std::to_string(target) + ". Read it into io.BytesIO for random access.");
        }
        Released passed(*this);
        GilRelease release;
        return position + skip(*stream_, static_cast<uint64_t>(target) - position);
    }

private:
    // Whether a read() of all the stream, `length` bytes, is served by the memory it was landing in since start().
    bool fits_whole_result(uint64_t length) const {
        const uint64_t capacity = static_cast<uint64_t>(PyBytes_GET_SIZE(whole_result_.ptr()));
        if (whole_result_exact_) return length == capacity;
        return length != 0 && length <= capacity && 2 * length >= capacity;  // as on_part_landing decides
    }

    // read() of all the stream, `want` bytes, delivers into the memory it was landing in since start(): hands over
    // those bytes, shortened to `want` if that memory was only the most the object could be.
    py::bytes read_whole_result(size_t want) {
        py::object whole = std::move(whole_result_);  // never read or given out again, whatever happens
        uint8_t* dst = reinterpret_cast<uint8_t*>(PyBytes_AS_STRING(whole.ptr()));
        size_t got = 0;
        bool landing_over;
        {
            GilRelease release;
            try {
                got = read_fully(*stream_, dst, want);      // copies only bytes that arrived elsewhere (a retry's)
                if (got == want) stream_->wait_for_data();  // the transfer ended cleanly
            } catch (...) {
                if (!stream_->stop_landing(true, kLandingPatienceMs)) whole.release();  // a CRT thread may write
                throw;
            }
            landing_over = stream_->stop_landing(got != want, kLandingPatienceMs);
        }
        if (got != want || !landing_over) {
            py::bytes copy(reinterpret_cast<const char*>(dst), static_cast<Py_ssize_t>(got));
            if (!landing_over) whole.release();  // as above
            return copy;
        }
        const bool shorter = want < static_cast<size_t>(PyBytes_GET_SIZE(whole.ptr()));
        // Only the sole holder may shorten it (as for _PyBytes_Resize). Never otherwise: nothing else got it yet.
        const bool copy_instead = shorter && Py_REFCNT(whole.ptr()) != 1;
        // The bytes kept for seeking back are the result's own: they live as long as this stream.
        if (stream_->holds_borrowed_bytes()) landed_results_.append(whole);
        if (copy_instead) return py::bytes(reinterpret_cast<const char*>(dst), static_cast<Py_ssize_t>(want));
        if (shorter) {
            // Shortened where it lies, not reallocated (as _PyBytes_Resize would): the bytes kept for seeking back
            // point into it. The rest of its memory, under half, goes when it goes.
            dst[want] = '\0';  // a bytes object's data ends with a NUL
            Py_SET_SIZE(whole.ptr(), static_cast<Py_ssize_t>(want));
        }
        return py::reinterpret_steal<py::bytes>(whole.release());
    }

    // Ends scattering into planned results (see ObjectStream::stop_scattering), the GIL released while it waits.
    bool stop_scattering() {
        GilRelease release;
        return stream_->stop_scattering(kLandingPatienceMs);
    }

    // On leaving a reading call (its scope), lets go of the planned results the stream has passed: declared
    // before the GilRelease of the call, so it runs with the GIL held again.
    class Released {
    public:
        explicit Released(PyObjectStream& owner) : owner_(owner) {}
        ~Released() {
            if (owner_.stream_) owner_.scattered_.release_passed(*owner_.stream_);
        }
        Released(const Released&) = delete;
        Released& operator=(const Released&) = delete;

    private:
        PyObjectStream& owner_;
    };

    // Ends the landing begun in start() (see ObjectStream::stop_landing), the GIL released while it waits.
    bool stop_whole_result_landing(bool read_failed) {
        GilRelease release;
        return stream_->stop_landing(read_failed, kLandingPatienceMs);
    }

    // Guards one call: the stream is open and no other thread is inside it.
    class Entry {
    public:
        explicit Entry(PyObjectStream& owner) : owner_(owner) {
            if (!owner_.stream_) throw py::value_error("I/O operation on closed file.");
            if (!owner_.stream_->usable_here()) {
                throw std::runtime_error(owner_.name_ +
                                         " was opened in another process (before fork()); open it again here");
            }
            if (owner_.busy_) throw std::runtime_error("concurrent reads of one S3 stream from several threads");
            owner_.busy_ = true;
        }
        ~Entry() { owner_.busy_ = false; }

    private:
        PyObjectStream& owner_;
    };

    // A caller's writable buffer. PyBUF_WRITABLE without PyBUF_STRIDES: only a contiguous block is accepted,
    // so writing len bytes from buf can never land outside (or scattered across) the caller's buffer.
    class WritableView {
    public:
        explicit WritableView(const py::object& target) {
            if (PyObject_GetBuffer(target.ptr(), &view_, PyBUF_WRITABLE) != 0) throw py::error_already_set();
        }
        ~WritableView() { PyBuffer_Release(&view_); }
        WritableView(const WritableView&) = delete;
        WritableView& operator=(const WritableView&) = delete;
        uint8_t* data() { return static_cast<uint8_t*>(view_.buf); }
        size_t size() const { return static_cast<size_t>(view_.len); }

    private:
        Py_buffer view_;
    };

    // Results of read() that chunks of the stream still point into (ObjectStream::holds_borrowed_bytes): let go
    // of after the stream (declared first, so destroyed last).
    py::list landed_results_;
    // The result's memory from start() while the stream is still landing there (see start()); None otherwise.
    py::object whole_result_;
    bool whole_result_exact_ = true;  // its length is the GET's; else only the most it may be
    // Results planned for the parts not begun yet, while the stream may still scatter parts over them.
    ScatteredResults scattered_;
    std::shared_ptr<ObjectStream> stream_;
    std::string name_;
    bool busy_ = false;
    bool lines_attached_ = false;  // see attach_lines()
};

// Adds Buffer and ObjectStream to the module.
void bind_object_stream(py::module_& m);

}  // namespace torchdata_s3
