// `for line in stream` over a GET read in order (torchdata_s3/reader.py: S3ObjectStream.__iter__).
//
// A type of CPython's C API rather than a pybind11 class: pybind11's call dispatch costs more than a line of
// text does (the native stream's pybind11 __next__ ran lines of 256 bytes at 438 MB/s, io.BytesIO at 2,800).
// A line whole in the chunk at hand is cut with no call into Python (PyObjectStream::cut_line); a line across
// chunks, or one whose bytes are still on their way, comes from the stream's own readline(), which waits with
// the GIL released. Once that GET is done, or once the reader detached it (any other call on the reader moved
// or read it), every line comes from the fallback: the buffered stream's readline(), with all of its policy.
#pragma once

#include <pybind11/pybind11.h>

namespace torchdata_s3 {

namespace py = pybind11;

// Adds lines(stream, fallback) to the module.
void bind_line_iterator(py::module_& m);

}  // namespace torchdata_s3
