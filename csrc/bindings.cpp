// Python bindings: only binding. Blocking waits release the GIL; the GIL is held only to build Python
// objects. Failures reach Python through an error factory that the Python package installs, so the
// mapping from S3 errors to exception classes stays Python policy.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <optional>
#include <string>

#include "crt_runtime.h"
#include "list_objects.h"
#include "object_stream.h"
#include "request_failure.h"
#include "s3_client.h"
#include "stream_reader.h"

namespace py = pybind11;
using namespace torchdata_s3;

namespace {

PyObject* g_error_factory = nullptr;  // strong reference, deliberately never released (lives to exit)

bool interpreter_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
    return Py_IsFinalizing();
#else
    return _Py_IsFinalizing();
#endif
}

unsigned long g_main_thread = 0;  // threading.main_thread().ident: the thread that finalises the interpreter

// Releases the GIL for a blocking wait. pybind11's guard reacquires it in a noexcept destructor; if the
// interpreter finalised meanwhile (a daemon thread waiting for S3 at exit), CPython ends that thread with
// pthread_exit, whose forced unwind through a noexcept frame aborts the whole process. This guard parks
// such a thread instead (the process is exiting anyway) and lets a forced unwind pass. The main thread is
// the one running the finalisation (and our destructors during it): it always takes the GIL back.
class GilRelease {
public:
    GilRelease() : state_(PyEval_SaveThread()) {}
    ~GilRelease() noexcept(false) {
        if (interpreter_finalizing() && PyThread_get_thread_ident() != g_main_thread) {
            for (;;) pause();
        }
        PyEval_RestoreThread(state_);
    }
    GilRelease(const GilRelease&) = delete;
    GilRelease& operator=(const GilRelease&) = delete;

private:
    PyThreadState* state_;
};

const char* kind_name(RequestFailure::Kind kind) {
    switch (kind) {
        case RequestFailure::Kind::crt:
            return "crt";
        case RequestFailure::Kind::timed_out:
            return "timed_out";
        case RequestFailure::Kind::short_body:
            return "short_body";
        case RequestFailure::Kind::out_of_order:
            return "out_of_order";
    }
    return "crt";
}

void raise_request_failure(const RequestFailure& failure) {
    if (g_error_factory == nullptr) {
        PyErr_SetString(PyExc_OSError, failure.what());
        return;
    }
    try {
        py::dict info;
        info["kind"] = kind_name(failure.kind);
        info["crt_error_code"] = failure.crt_error_code;
        info["crt_error_name"] = failure.crt_error_name;
        info["crt_error_message"] = failure.crt_error_message;
        info["http_status"] = failure.http_status;
        info["s3_error_code"] = failure.s3_error_code;
        info["s3_error_message"] = failure.s3_error_message;
        info["operation"] = failure.operation;
        info["bucket"] = failure.bucket;
        info["key"] = failure.key;
        info["detail"] = failure.detail;
        info["tls_endpoint"] = failure.tls_endpoint;
        info["tls_reason"] = failure.tls_reason;
        info["tls_reason_message"] = failure.tls_reason_message;
        py::object exception = py::reinterpret_borrow<py::object>(g_error_factory)(info);
        PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exception.ptr())), exception.ptr());
    } catch (py::error_already_set& e) {
        e.restore();
    }
}

// Owns a block of memory handed out from a stream; Python reads it through the buffer protocol.
struct Buffer {
    ObjectStream::Chunk chunk;
};

// Clients can take a while to shut down (they wait for the CRT): never with the GIL held, and never while
// the interpreter is finalising, when waiting for CRT threads could hang the exit.
std::shared_ptr<S3Client> make_client(ClientOptions options) {
    S3Client* client;
    {
        GilRelease release;
        client = new S3Client(std::move(options));
    }
    return std::shared_ptr<S3Client>(client, [](S3Client* c) {
        if (interpreter_finalizing()) return;  // leak: the process is exiting
        if (PyGILState_Check()) {
            GilRelease release;
            delete c;
        } else {
            delete c;
        }
    });
}

[[noreturn]] void raise_unsupported(const std::string& message) {
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
        std::shared_ptr<ObjectStream> released = std::move(stream_);
        GilRelease release;
        released.reset();
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
        stream_->widen_window(window_bytes);
    }

    uint64_t tell() {
        Entry entry(*this);
        return stream_->position();
    }

    py::bytes read(int64_t size) {
        Entry entry(*this);
        uint64_t remaining;
        {
            GilRelease release;
            remaining = stream_->wait_for_size() - stream_->position();
        }
        const uint64_t want = size < 0 ? remaining : std::min<uint64_t>(static_cast<uint64_t>(size), remaining);
        PyObject* raw = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(want));
        if (raw == nullptr) throw py::error_already_set();
        py::object bytes = py::reinterpret_steal<py::object>(raw);
        size_t got;
        {
            GilRelease release;
            got = read_fully(*stream_, reinterpret_cast<uint8_t*>(PyBytes_AS_STRING(raw)), want);
            // Reading to the end also confirms the transfer finished cleanly before we hand out the bytes.
            if (got == remaining) stream_->wait_for_data();
        }
        if (got != want) {
            raw = bytes.release().ptr();
            if (_PyBytes_Resize(&raw, static_cast<Py_ssize_t>(got)) != 0) throw py::error_already_set();
            bytes = py::reinterpret_steal<py::object>(raw);
        }
        return py::reinterpret_steal<py::bytes>(bytes.release());
    }

    py::bytes read1(int64_t size) {
        Entry entry(*this);
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
        // PyBUF_WRITABLE without PyBUF_STRIDES: only a contiguous block is accepted, so writing len bytes
        // from buf can never land outside (or scattered across) the caller's buffer.
        Py_buffer view;
        if (PyObject_GetBuffer(target.ptr(), &view, PyBUF_WRITABLE) != 0) throw py::error_already_set();
        std::unique_ptr<Py_buffer, void (*)(Py_buffer*)> held(&view, PyBuffer_Release);
        auto* dst = static_cast<uint8_t*>(view.buf);
        const size_t size = static_cast<size_t>(view.len);
        GilRelease release;
        return one_call ? read_available(*stream_, dst, size) : read_fully(*stream_, dst, size);
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
            GilRelease release;
            read_line(*stream_, &line, limit);
        }
        return py::bytes(line);
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
        {
            GilRelease release;
            buffer.chunk = stream_->take_chunk();
        }
        if (!buffer.chunk) return std::nullopt;
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
        GilRelease release;
        return position + skip(*stream_, static_cast<uint64_t>(target) - position);
    }

private:
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

    std::shared_ptr<ObjectStream> stream_;
    std::string name_;
    bool busy_ = false;
};

CredentialsSource credentials_source_from(const std::string& name) {
    if (name == "default") return CredentialsSource::default_chain;
    if (name == "profile") return CredentialsSource::profile;
    if (name == "static") return CredentialsSource::static_keys;
    if (name == "anonymous") return CredentialsSource::anonymous;
    throw py::value_error("unknown credentials source '" + name + "' (default, profile, static, anonymous)");
}

py::tuple page_to_python(const ListObjectsPage& page) {
    py::list objects(page.objects.size());
    for (size_t i = 0; i < page.objects.size(); ++i) {
        const ObjectSummary& o = page.objects[i];
        objects[i] = py::make_tuple(o.key, o.size, o.etag);
    }
    return py::make_tuple(objects, py::cast(page.common_prefixes),
                          page.next_continuation_token.empty() ? py::none() : py::cast(page.next_continuation_token));
}

}  // namespace

PYBIND11_MODULE(_core, m) {
    m.doc() = "Native core of torchdata_s3 (private): AWS CRT S3 client, listing and object streams.";
    m.attr("__version__") = TORCHDATA_S3_VERSION;
    g_main_thread = py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();

    py::register_exception_translator([](std::exception_ptr pointer) {
        try {
            if (pointer) std::rethrow_exception(pointer);
        } catch (const RequestFailure& failure) {
            raise_request_failure(failure);
        }
    });

    m.def(
        "set_error_factory",
        [](py::object factory) {
            Py_XDECREF(g_error_factory);
            g_error_factory = factory.release().ptr();
        },
        "Installs callable(info: dict) -> BaseException used for every failed request.");
    m.def("enable_crt_logging", &enable_crt_logging, py::arg("level"),
          "Sends the CRT's own log lines at `level` and above to stderr (process-wide).");
    m.def(
        "parse_list_objects_v2",
        [](const py::bytes& document) { return page_to_python(parse_list_objects_v2(document)); }, py::arg("document"),
        "Parses a ListObjectsV2 XML document (for tests and fuzzing).");
    m.def("encode_path", &S3Client::encode_path, py::arg("key"), "URI-encodes an object key as a path, CRT rules.");

    py::class_<Buffer>(m, "Buffer", py::buffer_protocol(), "Bytes owned by the native core, readable without copying.")
        .def_buffer([](Buffer& b) {
            return py::buffer_info(const_cast<uint8_t*>(b.chunk.data), 1, py::format_descriptor<uint8_t>::format(), 1,
                                   {static_cast<py::ssize_t>(b.chunk.size)}, {1}, /*readonly=*/true);
        })
        .def("__len__", [](const Buffer& b) { return b.chunk.size; });

    py::class_<PyObjectStream>(m, "ObjectStream", "A binary, forward-only file object over one S3 GetObject.")
        .def_property_readonly("name", &PyObjectStream::name)
        .def_property_readonly("closed", &PyObjectStream::closed)
        .def_property_readonly("size", &PyObjectStream::size, "Bytes this stream delivers (waits for the headers).")
        .def_property_readonly("size_if_known", &PyObjectStream::size_if_known,
                               "Bytes this stream delivers, or None while the headers are still on their way.")
        .def_property_readonly("first_byte_latency", &PyObjectStream::first_byte_latency,
                               "Seconds the quickest of this GET's requests waited for its first response byte, or "
                               "None before one finished.")
        .def("wait_for_first_byte_latency", &PyObjectStream::wait_for_first_byte_latency,
             "first_byte_latency, waiting for the first request to finish; None if the GET failed or ended without "
             "one.")
        .def_property_readonly("etag", &PyObjectStream::etag)
        .def("read", &PyObjectStream::read, py::arg("size") = -1)
        .def("read1", &PyObjectStream::read1, py::arg("size") = -1)
        .def("readall", [](PyObjectStream& s) { return s.read(-1); })
        .def(
            "readinto", [](PyObjectStream& s, const py::object& b) { return s.readinto(b, false); }, py::arg("buffer"))
        .def(
            "readinto1", [](PyObjectStream& s, const py::object& b) { return s.readinto(b, true); }, py::arg("buffer"))
        .def("readline", &PyObjectStream::readline, py::arg("size") = -1)
        .def("readlines", &PyObjectStream::readlines, py::arg("hint") = -1)
        .def("read_chunk", &PyObjectStream::read_chunk,
             "The next block of the object as a Buffer (no copy), or None at the end.")
        .def("__iter__", [](py::object self) { return self; })
        .def("__next__", &PyObjectStream::next_line)
        .def("widen_window", &PyObjectStream::widen_window, py::arg("window_bytes"),
             "Lets the download run up to window_bytes ahead of the reader (never shrinks).")
        .def("tell", &PyObjectStream::tell)
        .def("seek", &PyObjectStream::seek, py::arg("offset"), py::arg("whence") = 0,
             "Forward seeks skip ahead; seeking backwards raises io.UnsupportedOperation.")
        .def("seekable", [](const PyObjectStream&) { return false; })
        .def("readable", [](const PyObjectStream&) { return true; })
        .def("writable", [](const PyObjectStream&) { return false; })
        .def("isatty", [](const PyObjectStream&) { return false; })
        .def("flush", [](const PyObjectStream&) {})
        .def("fileno", [](const PyObjectStream& s) -> int { raise_unsupported(s.name() + " has no file descriptor"); })
        .def("close", &PyObjectStream::close)
        .def("__enter__", [](py::object self) { return self; })
        .def("__exit__", [](PyObjectStream& s, py::args) { s.close(); })
        .def("__repr__", [](const PyObjectStream& s) { return "<torchdata_s3 ObjectStream " + s.name() + ">"; });

    py::class_<S3Client, std::shared_ptr<S3Client>>(m, "S3Client", "One CRT S3 client (connection pool, threads).")
        .def_property_readonly("pinned_pool_bytes", &S3Client::pinned_pool_bytes,
                               "Bytes of the CRT's buffer pool held by chunks not yet released.")
        .def_property_readonly("event_loop_threads", &S3Client::event_loop_threads,
                               "Threads of the process's shared CRT event loop group (fixed by its first client).")
        .def_property_readonly("pool_pin_budget", &S3Client::pool_pin_budget,
                               "Above this many pinned bytes, arriving parts are copied out of the pool.")
        .def(py::init([](const std::string& region, const std::string& endpoint_scheme,
                         const std::string& endpoint_host, uint16_t endpoint_port, bool path_style,
                         const std::string& credentials, const std::string& profile_name,
                         const std::string& access_key_id, const std::string& secret_access_key,
                         const std::string& session_token, uint64_t part_size_bytes, double throughput_target_gbps,
                         uint32_t max_connections, uint64_t memory_limit_bytes, uint64_t read_window_bytes,
                         uint32_t connect_timeout_ms, uint32_t stall_timeout_s, uint32_t max_retries, bool verify_tls,
                         const std::string& ca_file, uint16_t event_loop_threads, const std::string& proxy_host,
                         uint16_t proxy_port, const std::string& proxy_username, const std::string& proxy_password) {
                 ClientOptions o;
                 o.region = region;
                 o.endpoint_scheme = endpoint_scheme;
                 o.endpoint_host = endpoint_host;
                 o.endpoint_port = endpoint_port;
                 o.path_style = path_style;
                 o.credentials = credentials_source_from(credentials);
                 o.profile_name = profile_name;
                 o.access_key_id = access_key_id;
                 o.secret_access_key = secret_access_key;
                 o.session_token = session_token;
                 o.part_size_bytes = part_size_bytes;
                 o.throughput_target_gbps = throughput_target_gbps;
                 o.max_connections = max_connections;
                 o.memory_limit_bytes = memory_limit_bytes;
                 o.read_window_bytes = read_window_bytes;
                 o.connect_timeout_ms = connect_timeout_ms;
                 o.stall_timeout_s = stall_timeout_s;
                 o.max_retries = max_retries;
                 o.verify_tls = verify_tls;
                 o.ca_file = ca_file;
                 o.event_loop_threads = event_loop_threads;
                 o.proxy_host = proxy_host;
                 o.proxy_port = proxy_port;
                 o.proxy_username = proxy_username;
                 o.proxy_password = proxy_password;
                 return make_client(std::move(o));
             }),
             py::kw_only(), py::arg("region"), py::arg("endpoint_scheme"), py::arg("endpoint_host"),
             py::arg("endpoint_port"), py::arg("path_style"), py::arg("credentials"), py::arg("profile_name"),
             py::arg("access_key_id"), py::arg("secret_access_key"), py::arg("session_token"),
             py::arg("part_size_bytes"), py::arg("throughput_target_gbps"), py::arg("max_connections"),
             py::arg("memory_limit_bytes"), py::arg("read_window_bytes"), py::arg("connect_timeout_ms"),
             py::arg("stall_timeout_s"), py::arg("max_retries"), py::arg("verify_tls"), py::arg("ca_file"),
             py::arg("event_loop_threads") = 0, py::arg("proxy_host") = "", py::arg("proxy_port") = 0,
             py::arg("proxy_username") = "", py::arg("proxy_password") = "")
        .def(
            "list_objects_v2",
            [](S3Client& client, const std::string& bucket, const std::string& prefix, const std::string& delimiter,
               const std::string& continuation_token, const std::string& start_after, uint32_t max_keys,
               uint32_t timeout_ms) {
                ListObjectsRequest request{bucket,      prefix,   delimiter, continuation_token,
                                           start_after, max_keys, timeout_ms};
                ListObjectsPage page;
                {
                    GilRelease release;
                    page = list_objects_v2(client, request);
                }
                return page_to_python(page);
            },
            py::arg("bucket"), py::kw_only(), py::arg("prefix") = "", py::arg("delimiter") = "",
            py::arg("continuation_token") = "", py::arg("start_after") = "", py::arg("max_keys") = 0,
            py::arg("timeout_ms") = 0,
            "One ListObjectsV2 page: ([(key, size, etag)], [common prefixes], next token or None).")
        .def(
            "get_object",
            [](std::shared_ptr<S3Client> client, const std::string& bucket, const std::string& key,
               std::optional<std::pair<uint64_t, uint64_t>> byte_range, uint64_t window_bytes, uint32_t timeout_ms,
               uint64_t part_size_bytes) {
                GetObjectRequest request;
                request.bucket = bucket;
                request.key = key;
                if (byte_range) {
                    if (byte_range->second < byte_range->first) throw py::value_error("byte_range end before start");
                    request.has_range = true;
                    request.range_start = byte_range->first;
                    request.range_end_inclusive = byte_range->second;
                }
                request.window_bytes = window_bytes;
                request.timeout_ms = timeout_ms;
                request.part_size_bytes = part_size_bytes;
                std::shared_ptr<ObjectStream> stream;
                {
                    GilRelease release;
                    stream = ObjectStream::start(std::move(client), std::move(request));
                }
                return PyObjectStream(std::move(stream), "s3://" + bucket + "/" + key);
            },
            py::arg("bucket"), py::arg("key"), py::kw_only(), py::arg("byte_range") = py::none(),
            py::arg("window_bytes") = 0, py::arg("timeout_ms") = 0, py::arg("part_size_bytes") = 0,
            "Starts a GetObject (whole, or byte_range=(first, last) inclusive) and returns its stream at once.");
}
