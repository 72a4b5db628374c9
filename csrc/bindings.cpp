// Python bindings: only binding. Blocking waits release the GIL; the GIL is held only to build Python
// objects. Failures reach Python through an error factory that the Python package installs, so the
// mapping from S3 errors to exception classes stays Python policy.
#include <aws/checksums/crc.h>
#include <aws/io/channel.h>
#include <aws/s3/s3_client.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <optional>
#include <string>

#include "body_request.h"
#include "buffer_view.h"
#include "crt_runtime.h"
#include "delete_objects.h"
#include "gil_release.h"
#include "line_iterator.h"
#include "list_buckets.h"
#include "list_objects.h"
#include "node_budget.h"
#include "object_copy.h"
#include "object_stream.h"
#include "object_upload.h"
#include "py_object_stream.h"
#include "py_object_upload.h"
#include "request_failure.h"
#include "s3_client.h"

namespace py = pybind11;
using namespace torchdata_s3;

namespace {

PyObject* g_error_factory = nullptr;  // strong reference, deliberately never released (lives to exit)

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
        info["proxy"] = failure.proxy;
        info["proxy_status"] = failure.proxy_status;
        py::object exception = py::reinterpret_borrow<py::object>(g_error_factory)(info);
        PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exception.ptr())), exception.ptr());
    } catch (py::error_already_set& e) {
        e.restore();
    }
}

// Clients can take a while to shut down (they wait for the CRT): never with the GIL held, and never while
// the interpreter is finalising, when waiting for CRT threads could hang the exit.
std::shared_ptr<S3Client> make_client(ClientOptions options) {
    S3Client* client;
    {
        GilRelease release;
        ClientSetup setup(parked_at_exit);  // the end of the interpreter's finalisation waits for it (crt_runtime.h)
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

CredentialsSource credentials_source_from(const std::string& name) {
    if (name == "default") return CredentialsSource::default_chain;
    if (name == "profile") return CredentialsSource::profile;
    if (name == "static") return CredentialsSource::static_keys;
    if (name == "anonymous") return CredentialsSource::anonymous;
    throw py::value_error("unknown credentials source '" + name + "' (default, profile, static, anonymous)");
}

std::string copy_of_buffer(const py::object& data) {
    BufferView view(data);
    return std::string(reinterpret_cast<const char*>(view.data()), view.size());
}

py::object utf8_str(const std::string& text) {
    return py::reinterpret_steal<py::object>(
        PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), nullptr));
}

// (key, size, etag), or with `details` (key, size, etag, last modified, storage class). Built with the C API
// (py::make_tuple's casts cost a third of a page's conversion) and untracked by the garbage collector, which
// would otherwise walk every buffered entry of a listing in each young collection until it untracked them
// itself: a tuple of str and int can hold no reference cycle.
py::object entry_to_python(const ObjectSummary& o, bool details) {
    py::object fields[5] = {utf8_str(o.key), py::reinterpret_steal<py::object>(PyLong_FromUnsignedLongLong(o.size)),
                            utf8_str(o.etag)};
    const Py_ssize_t count = details ? 5 : 3;
    if (details) {
        fields[3] = utf8_str(o.last_modified);
        fields[4] = utf8_str(o.storage_class);
    }
    for (Py_ssize_t i = 0; i < count; ++i) {
        if (!fields[i]) throw py::error_already_set();
    }
    PyObject* entry = PyTuple_New(count);
    if (entry == nullptr) throw py::error_already_set();
    for (Py_ssize_t i = 0; i < count; ++i) PyTuple_SET_ITEM(entry, i, fields[i].release().ptr());
    PyObject_GC_UnTrack(entry);
    return py::reinterpret_steal<py::object>(entry);
}

py::tuple page_to_python(const ListObjectsPage& page, bool details = false) {
    py::list objects(page.objects.size());
    for (size_t i = 0; i < page.objects.size(); ++i) {
        PyList_SET_ITEM(objects.ptr(), static_cast<Py_ssize_t>(i),
                        entry_to_python(page.objects[i], details).release().ptr());
    }
    return py::make_tuple(objects, py::cast(page.common_prefixes),
                          page.next_continuation_token.empty() ? py::none() : py::cast(page.next_continuation_token));
}

}  // namespace

PYBIND11_MODULE(_core, m) {
    m.doc() = "Native core of torchdata_s3 (private): AWS CRT S3 client, listing and object streams.";
    m.attr("__version__") = TORCHDATA_S3_VERSION;
    m.attr("CRT_POOL_RESERVE_BYTES") = kPoolReserveBytes;
    m.attr("CRT_MINIMUM_MEMORY_LIMIT_BYTES") = kMinimumMemoryLimitBytes;
    g_main_thread = py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();
    // Last in the interpreter's finalisation, before exit() runs OpenSSL's exit handler (crt_runtime.h).
    Py_AtExit([] { wait_for_client_setups(kExitWaitsForClientSetupsMs); });

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
        py::arg("factory"), "Installs callable(info: dict) -> BaseException used for every failed request.");
    m.def("enable_crt_logging", &enable_crt_logging, py::arg("level"),
          "Sends the CRT's own log lines at `level` and above to stderr (process-wide).");
    m.def(
        "parse_list_objects_v2",
        [](const py::bytes& document) { return page_to_python(parse_list_objects_v2(document)); }, py::arg("document"),
        "Parses a ListObjectsV2 XML document (for tests and fuzzing).");
    m.def(
        "crc32c",
        [](const py::object& data, uint32_t previous) {
            BufferView view(data);
            GilRelease release;
            return aws_checksums_crc32c_ex(view.data(), view.size(), previous);
        },
        py::arg("data"), py::arg("previous") = 0,
        "The CRT's CRC32C of a bytes-like object (S3's x-amz-checksum-crc32c).");
    m.def(
        "crc64nvme",
        [](const py::object& data, uint64_t previous) {
            BufferView view(data);
            GilRelease release;
            return aws_checksums_crc64nvme_ex(view.data(), view.size(), previous);
        },
        py::arg("data"), py::arg("previous") = 0, "The CRT's CRC64NVME of a bytes-like object.");
    m.def("encode_path", &S3Client::encode_path, py::arg("key"), "URI-encodes an object key as a path, CRT rules.");
    m.def("bytes_received_in_place", &aws_s3_bytes_received_in_place,
          "GET body bytes read from the socket straight into their part buffers, over the process's life.");
    m.def("set_receive_in_place", &aws_s3_set_receive_in_place, py::arg("enabled"),
          "Process-wide: GET bodies received straight into part buffers (default) or copied out of messages.");
    m.def("set_client_socket_read_size", &aws_io_set_client_socket_read_size, py::arg("bytes"),
          "Process-wide: the most bytes a new connection's socket is read per event-loop tick; returns the old "
          "value (0: only returns it).");

    py::class_<CompletionQueue, std::shared_ptr<CompletionQueue>>(
        m, "CompletionQueue", "Tags of finished requests, in the order they finished.")
        .def(py::init<>())
        .def(
            "pop",
            [](CompletionQueue& queue, uint32_t timeout_ms) -> std::optional<uint64_t> {
                uint64_t tag;
                bool got;
                {
                    GilRelease release;
                    got = queue.pop(&tag, timeout_ms);
                }
                if (!got) return std::nullopt;
                return tag;
            },
            py::arg("timeout_ms"), "The next finished request's tag, or None if none finished within timeout_ms.");
    py::class_<PendingListPage>(m, "ListPageRequest", "One ListObjectsV2 page in flight.")
        .def_property_readonly("done", &PendingListPage::done, "Whether it finished or failed.")
        .def("cancel", &PendingListPage::cancel, "Stops it; result() then raises.")
        .def(
            "result",
            [](PendingListPage& request) {
                ListObjectsPage page;
                {
                    GilRelease release;
                    page = request.wait();
                }
                return page_to_python(page, request.details());
            },
            "Waits for the page: ([(key, size, etag)], [common prefixes], next token or None), each entry with "
            "LastModified and StorageClass after them if asked for with details. Call once.");

    bind_object_stream(m);
    bind_line_iterator(m);
    bind_object_upload(m);

    py::class_<ConnectionTuner, std::shared_ptr<ConnectionTuner>>(
        m, "ConnectionTuner", "How many connections a client uses at once, learned from its rate (connection_tuner.h).")
        .def(py::init([](uint32_t configured) { return std::make_shared<ConnectionTuner>(nullptr, configured); }),
             py::arg("configured"), "A tuner that only decides (no client): for tests of its rules.")
        .def("on_delivered_at", &ConnectionTuner::on_delivered_at, py::arg("bytes"), py::arg("now_ns"),
             py::arg("in_use"), "A delivery of `bytes` made at `now_ns`, with `in_use` requests on connections.")
        .def_property_readonly("limit", &ConnectionTuner::limit)
        .def_property_readonly("windows", &ConnectionTuner::windows)
        .def_property_readonly("probes_kept", &ConnectionTuner::probes_kept);

    py::class_<NodeBudget, std::shared_ptr<NodeBudget>>(
        m, "NodeBudget", "Bytes buffered by every process of the node sharing one budget file (node_budget.h).")
        .def(py::init([](const std::string& path, uint64_t limit_bytes, uint64_t reserve_bytes) {
                 GilRelease release;  // may wait for another process's lock on the file
                 return NodeBudget::open(path, limit_bytes, reserve_bytes);
             }),
             py::arg("path"), py::arg("limit_bytes"), py::arg("reserve_bytes") = 0)
        .def_property_readonly("reserve", &NodeBudget::reserve)
        .def_property_readonly("path", &NodeBudget::path)
        .def_property_readonly("limit", &NodeBudget::limit)
        .def("take", &NodeBudget::take, py::arg("want"), py::arg("guaranteed") = 0, py::call_guard<GilRelease>(),
             "Takes up to `want` bytes: `guaranteed` of them even above the limit. Returns what it took.")
        .def("take_all_or_nothing", &NodeBudget::take_all_or_nothing, py::arg("bytes"), py::call_guard<GilRelease>(),
             "Takes `bytes` only if all fit within the limit.")
        .def("give", &NodeBudget::give, py::arg("bytes"), py::call_guard<GilRelease>(),
             "Gives back bytes this process took.")
        .def_property_readonly("in_use", &NodeBudget::in_use, "Bytes held by every process attached.")
        .def_property_readonly("available", &NodeBudget::available,
                               "What a take that is not guaranteed could get now (the limit less use and reserves).")
        .def_property_readonly("peak", &NodeBudget::peak, "The highest in_use a take produced.")
        .def("reset_peak", &NodeBudget::reset_peak, "Starts the peak again from what is in use now.")
        .def_property_readonly("held_here", &NodeBudget::held_here, "Bytes this process holds.")
        .def_property_readonly("reclaimed", &NodeBudget::reclaimed, "Bytes taken back from dead processes.")
        .def_property_readonly("generation", &NodeBudget::generation, "Changes whenever bytes come back.");

    py::class_<S3Client, std::shared_ptr<S3Client>>(m, "S3Client", "One CRT S3 client (connection pool, threads).")
        .def_property_readonly("pinned_pool_bytes", &S3Client::pinned_pool_bytes,
                               "Bytes of the CRT's buffer pool held by chunks not yet released.")
        .def_property_readonly("event_loop_threads", &S3Client::event_loop_threads,
                               "Threads of the process's shared CRT event loop group (fixed by its first client).")
        .def_property_readonly("pool_pin_budget", &S3Client::pool_pin_budget,
                               "Above this many pinned bytes, arriving parts are copied out of the pool.")
        .def_property_readonly("pacing_rate", &S3Client::pacing_rate,
                               "Requests per second the client paces at since the endpoint throttled; 0: unpaced.")
        .def_property_readonly("node_budget", &S3Client::budget, "The node's memory budget, or None.")
        .def_property_readonly("connection_limit", &S3Client::connection_limit,
                               "Connections the client may use at once now (its tuner's limit, if it tunes).")
        .def_property_readonly("connection_tuner", &S3Client::tuner, "The connection tuner, or None without tuning.")
        .def_property_readonly("landed_bytes", &S3Client::landed_bytes,
                               "Bytes received straight into a read()'s result, with no copy out of the pool.")
        .def(py::init([](const std::string& region, const std::string& endpoint_scheme,
                         const std::string& endpoint_host, uint16_t endpoint_port, bool path_style,
                         const std::string& credentials, const std::string& profile_name,
                         const std::string& access_key_id, const std::string& secret_access_key,
                         const std::string& session_token, uint64_t part_size_bytes, double throughput_target_gbps,
                         uint32_t max_connections, uint64_t memory_limit_bytes, uint64_t read_window_bytes,
                         uint32_t connect_timeout_ms, uint32_t stall_timeout_s, uint32_t max_retries, bool verify_tls,
                         const std::string& ca_file, uint16_t event_loop_threads, const std::string& proxy_host,
                         uint16_t proxy_port, const std::string& proxy_username, const std::string& proxy_password,
                         uint64_t multipart_threshold_bytes, bool requester_pays, uint32_t retry_backoff_ms,
                         bool adaptive_rate, uint32_t max_throttle_retries, const std::string& node_budget_path,
                         uint64_t node_budget_bytes, bool tune_connections, uint32_t completion_timeout_ms) {
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
                 o.multipart_threshold_bytes = multipart_threshold_bytes;
                 o.requester_pays = requester_pays;
                 o.retry_backoff_ms = retry_backoff_ms;
                 o.adaptive_rate = adaptive_rate;
                 o.max_throttle_retries = max_throttle_retries;
                 o.node_budget_path = node_budget_path;
                 o.node_budget_bytes = node_budget_bytes;
                 o.tune_connections = tune_connections;
                 o.completion_timeout_ms = completion_timeout_ms;
                 return make_client(std::move(o));
             }),
             py::kw_only(), py::arg("region"), py::arg("endpoint_scheme"), py::arg("endpoint_host"),
             py::arg("endpoint_port"), py::arg("path_style"), py::arg("credentials"), py::arg("profile_name"),
             py::arg("access_key_id"), py::arg("secret_access_key"), py::arg("session_token"),
             py::arg("part_size_bytes"), py::arg("throughput_target_gbps"), py::arg("max_connections"),
             py::arg("memory_limit_bytes"), py::arg("read_window_bytes"), py::arg("connect_timeout_ms"),
             py::arg("stall_timeout_s"), py::arg("max_retries"), py::arg("verify_tls"), py::arg("ca_file"),
             py::arg("event_loop_threads") = 0, py::arg("proxy_host") = "", py::arg("proxy_port") = 0,
             py::arg("proxy_username") = "", py::arg("proxy_password") = "", py::arg("multipart_threshold_bytes") = 0,
             py::arg("requester_pays") = false, py::arg("retry_backoff_ms") = 0, py::arg("adaptive_rate") = false,
             py::arg("max_throttle_retries") = 0, py::arg("node_budget_path") = "", py::arg("node_budget_bytes") = 0,
             py::arg("tune_connections") = false, py::arg("completion_timeout_ms") = 0)
        .def(
            "list_objects_v2",
            [](S3Client& client, const std::string& bucket, const std::string& prefix, const std::string& delimiter,
               const std::string& continuation_token, const std::string& start_after, uint32_t max_keys,
               uint32_t timeout_ms, bool details) {
                ListObjectsRequest request{bucket,      prefix,   delimiter,  continuation_token,
                                           start_after, max_keys, timeout_ms, details};
                ListObjectsPage page;
                {
                    GilRelease release;
                    page = list_objects_v2(client, request);
                }
                return page_to_python(page, details);
            },
            py::arg("bucket"), py::kw_only(), py::arg("prefix") = "", py::arg("delimiter") = "",
            py::arg("continuation_token") = "", py::arg("start_after") = "", py::arg("max_keys") = 0,
            py::arg("timeout_ms") = 0, py::arg("details") = false,
            "One ListObjectsV2 page: ([(key, size, etag)], [common prefixes], next token or None); with details, "
            "each entry is (key, size, etag, LastModified, StorageClass).")
        .def(
            "list_buckets",
            [](S3Client& client, const std::string& continuation_token, uint32_t timeout_ms) {
                ListBucketsPage page;
                {
                    GilRelease release;
                    page = list_buckets(client, continuation_token, timeout_ms);
                }
                py::list buckets;
                for (const BucketSummary& bucket : page.buckets) {
                    buckets.append(py::make_tuple(bucket.name, bucket.creation_date));
                }
                py::object token = py::none();
                if (!page.continuation_token.empty()) token = py::str(page.continuation_token);
                return py::make_tuple(buckets, token);
            },
            py::kw_only(), py::arg("continuation_token") = "", py::arg("timeout_ms") = 0,
            "One ListBuckets page: ([(name, creation date)], next continuation token or None).")
        .def(
            "start_list_objects_v2",
            [](std::shared_ptr<S3Client> client, const std::string& bucket, std::shared_ptr<CompletionQueue> queue,
               uint64_t tag, const std::string& prefix, const std::string& delimiter,
               const std::string& continuation_token, const std::string& start_after, uint32_t max_keys,
               uint32_t timeout_ms, bool details) {
                ListObjectsRequest request{bucket,      prefix,   delimiter,  continuation_token,
                                           start_after, max_keys, timeout_ms, details};
                return std::make_unique<PendingListPage>(std::move(client), request, std::move(queue), tag);
            },
            py::arg("bucket"), py::kw_only(), py::arg("queue"), py::arg("tag"), py::arg("prefix") = "",
            py::arg("delimiter") = "", py::arg("continuation_token") = "", py::arg("start_after") = "",
            py::arg("max_keys") = 0, py::arg("timeout_ms") = 0, py::arg("details") = false,
            "Sends one ListObjectsV2 page request and returns at once; `tag` goes to `queue` when it is done.")
        .def(
            "get_object",
            [](std::shared_ptr<S3Client> client, const std::string& bucket, const std::string& key,
               std::optional<std::pair<uint64_t, uint64_t>> byte_range, uint64_t suffix_bytes,
               const std::string& if_match, const std::string& if_none_match, uint64_t window_bytes,
               uint32_t timeout_ms, uint64_t part_size_bytes, uint64_t size_hint, uint64_t landing_capacity,
               uint64_t guessed_length) {
                GetObjectRequest request;
                request.bucket = bucket;
                request.key = key;
                if (byte_range) {
                    if (byte_range->second < byte_range->first) throw py::value_error("byte_range end before start");
                    request.has_range = true;
                    request.range_start = byte_range->first;
                    request.range_end_inclusive = byte_range->second;
                }
                if (suffix_bytes != 0 && byte_range)
                    throw py::value_error("byte_range and suffix_bytes exclude each other");
                request.suffix_bytes = suffix_bytes;
                request.if_match = if_match;
                request.if_none_match = if_none_match;
                request.window_bytes = window_bytes;
                request.timeout_ms = timeout_ms;
                request.part_size_bytes = part_size_bytes;
                request.size_hint = size_hint;
                request.landing_capacity = landing_capacity;
                request.guessed_length = guessed_length;
                return PyObjectStream::start(std::move(client), std::move(request), "s3://" + bucket + "/" + key);
            },
            // Not keyword-only: the loader passes every argument in this order, since matching eleven keywords
            // cost about 5 us of a small GET's 20 us here (pybind11's keyword_index, perf on the loader's thread).
            py::arg("bucket"), py::arg("key"), py::arg("byte_range") = py::none(), py::arg("suffix_bytes") = 0,
            py::arg("if_match") = "", py::arg("if_none_match") = "", py::arg("window_bytes") = 0,
            py::arg("timeout_ms") = 0, py::arg("part_size_bytes") = 0, py::arg("size_hint") = 0,
            py::arg("landing_capacity") = 0, py::arg("guessed_length") = 0,
            "Starts a GetObject (whole, byte_range=(first, last) inclusive, or the last suffix_bytes; if_match: only "
            "this ETag; if_none_match: fail with HTTP 304 if still this ETag) and returns its stream at once.")
        .def(
            "put_object",
            [](std::shared_ptr<S3Client> client, const std::string& bucket, const std::string& key,
               const py::object& body, bool if_none_match, const std::string& checksum_algorithm,
               uint64_t in_flight_limit_bytes, uint32_t abort_timeout_ms) {
                PutObjectRequest request;
                request.bucket = bucket;
                request.key = key;
                request.if_none_match = if_none_match;
                request.checksum_algorithm = checksum_algorithm;
                request.in_flight_limit_bytes = in_flight_limit_bytes;
                request.abort_timeout_ms = abort_timeout_ms;
                if (!body.is_none()) {
                    request.whole_body = true;
                    request.body = copy_of_buffer(body);
                }
                std::shared_ptr<ObjectUpload> upload;
                {
                    GilRelease release;
                    upload = ObjectUpload::start(std::move(client), std::move(request));
                }
                return PyObjectUpload(std::move(upload), "s3://" + bucket + "/" + key);
            },
            py::arg("bucket"), py::arg("key"), py::kw_only(), py::arg("body") = py::none(),
            py::arg("if_none_match") = false, py::arg("checksum_algorithm") = "", py::arg("in_flight_limit_bytes") = 0,
            py::arg("abort_timeout_ms") = 0,
            "Starts a PutObject: of `body` whole, or (body None) streamed through the returned upload's write().")
        .def(
            "head_object",
            [](S3Client& client, const std::string& bucket, const std::string& key, uint32_t timeout_ms) {
                const BodyRequest request = object_request("HEAD", "HeadObject", bucket, key, timeout_ms);
                BodyResponse response;
                {
                    GilRelease release;
                    response = perform_body_request(client, request);
                }
                return py::make_tuple(response.header("Content-Length"), response.header("ETag"),
                                      response.header("Last-Modified"), response.header("x-amz-storage-class"));
            },
            py::arg("bucket"), py::arg("key"), py::kw_only(), py::arg("timeout_ms") = 0,
            "HeadObject: (Content-Length as sent, ETag, Last-Modified, x-amz-storage-class; '' where absent).")
        .def(
            "copy_object",
            [](S3Client& client, const std::string& source_bucket, const std::string& source_key,
               const std::string& bucket, const std::string& key, uint32_t timeout_ms) {
                GilRelease release;
                copy_object(client, source_bucket, source_key, bucket, key, timeout_ms);
            },
            py::arg("source_bucket"), py::arg("source_key"), py::arg("bucket"), py::arg("key"), py::kw_only(),
            py::arg("timeout_ms") = 0, "CopyObject (UploadPartCopy parts from 1 GB): S3 copies, nothing passes here.")
        .def(
            "delete_objects",
            [](S3Client& client, const std::string& bucket, const std::vector<std::string>& keys, uint32_t timeout_ms) {
                std::vector<DeleteFailure> failures;
                {
                    GilRelease release;
                    failures = delete_objects(client, bucket, keys, timeout_ms);
                }
                py::list out;
                for (const DeleteFailure& failure : failures) {
                    out.append(py::make_tuple(failure.key, failure.code, failure.message));
                }
                return out;
            },
            py::arg("bucket"), py::arg("keys"), py::kw_only(), py::arg("timeout_ms") = 0,
            "DeleteObjects of 1 to 1000 keys (quiet): [(key, code, message)] for each key S3 did not delete.")
        .def(
            "download_file",
            [](S3Client& client, const std::string& bucket, const std::string& key, const std::string& path,
               bool direct_io) {
                BodyRequest request = object_request("GET", "GetObject", bucket, key, 0);
                request.recv_filepath = path;
                request.direct_io = direct_io;
                GilRelease release;
                perform_body_request(client, request);
            },
            py::arg("bucket"), py::arg("key"), py::arg("path"), py::kw_only(), py::arg("direct_io") = false,
            "GetObject into a new or replaced local file (parts in parallel, written at their offsets by the CRT); "
            "the file is deleted if the request fails. direct_io: write with O_DIRECT, past the page cache.")
        .def(
            "upload_file",
            [](S3Client& client, const std::string& path, const std::string& bucket, const std::string& key,
               bool if_none_match, uint32_t max_parts_in_flight) {
                BodyRequest request = object_request("PUT", "PutObject", bucket, key, 0);
                request.send_filepath = path;
                request.max_connections = max_parts_in_flight;
                if (if_none_match) request.headers.emplace_back("If-None-Match", "*");
                GilRelease release;
                perform_body_request(client, request);
            },
            py::arg("path"), py::arg("bucket"), py::arg("key"), py::kw_only(), py::arg("if_none_match") = false,
            py::arg("max_parts_in_flight") = 0,
            "PutObject of a local file, read by the CRT (parallel parts above the multipart threshold, at most "
            "max_parts_in_flight at once if non-zero); with if_none_match, refused (HTTP 412) if the object exists.")
        .def(
            "delete_object",
            [](S3Client& client, const std::string& bucket, const std::string& key, uint32_t timeout_ms) {
                const BodyRequest request = object_request("DELETE", "DeleteObject", bucket, key, timeout_ms);
                GilRelease release;
                perform_body_request(client, request);
            },
            py::arg("bucket"), py::arg("key"), py::kw_only(), py::arg("timeout_ms") = 0,
            "DeleteObject (S3 answers success for a key that does not exist).");
}
