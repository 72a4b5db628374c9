#include "py_object_stream.h"

namespace torchdata_s3 {

void bind_object_stream(py::module_& m) {
    py::class_<Buffer>(m, "Buffer", py::buffer_protocol(), "Bytes owned by the native core, readable without copying.")
        .def_buffer([](Buffer& b) {
            return py::buffer_info(const_cast<uint8_t*>(b.chunk.data), 1, py::format_descriptor<uint8_t>::format(), 1,
                                   {static_cast<py::ssize_t>(b.chunk.size)}, {1}, /*readonly=*/true);
        })
        .def("__len__", [](const Buffer& b) { return b.chunk.size; });

    m.attr("MIN_SCATTERED_READ_BYTES") = kMinScatteredReadBytes;
    m.def("results_reused", &results_reused,
          "Large read() results given to a later read() once nobody else held them, over the process's life.");
    m.def("set_scattered_reads", &ScatteredResults::set_enabled, py::arg("enabled"),
          "Process-wide: parts of large objects received straight into read(n)'s results (default) or not.");
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
        .def("take_landed", &PyObjectStream::take_landed, py::arg("size"),
             "read(size) served without a copy by a result the download was received into, or None (nothing read).")
        .def("read_chunk", &PyObjectStream::read_chunk,
             "The next block of the object as a Buffer (no copy), or None at the end.")
        .def("__iter__", [](py::object self) { return self; })
        .def("__next__", &PyObjectStream::next_line)
        .def("attach_lines", &PyObjectStream::attach_lines,
             "Lets lines() cut lines from this stream until detach_lines() (the reader's to call).")
        .def("detach_lines", &PyObjectStream::detach_lines)
        .def("widen_window", &PyObjectStream::widen_window, py::arg("window_bytes"),
             "Lets the download run up to window_bytes ahead of the reader (never shrinks).")
        .def("tell", &PyObjectStream::tell, "Bytes consumed, counted from this stream's first byte.")
        .def("placement", &PyObjectStream::placement,
             "(object offset of this stream's first byte, the whole object's size); waits for the headers.")
        .def_property_readonly("received_bytes", &PyObjectStream::received_bytes, "Bytes received so far.")
        .def_property_readonly("buffered_bytes", &PyObjectStream::buffered_bytes,
                               "Bytes received and not yet consumed.")
        .def("retain", &PyObjectStream::retain, py::arg("limit_bytes"),
             "Keeps the most recent limit_bytes consumed (at least the last chunk) for read_held; 0: none.")
        .def_property_readonly("held_start", &PyObjectStream::held_start,
                               "The lowest stream offset read_held can serve.")
        .def("read_held", &PyObjectStream::read_held, py::arg("offset"), py::arg("buffer"),
             "Copies retained bytes from stream offset `offset` into buffer; returns how many (0: not held).")
        .def("skip", &PyObjectStream::skip_ahead, py::arg("count"),
             "Consumes count bytes (retaining them if enabled); returns how many there were.")
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
}

}  // namespace torchdata_s3
