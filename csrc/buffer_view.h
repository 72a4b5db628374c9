// A contiguous, read-only view of any Python bytes-like object. Holding it keeps the exporter from resizing
// or freeing the bytes, so they may be read with the GIL released; it is released with the GIL held.
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>

namespace torchdata_s3 {

class BufferView {
public:
    explicit BufferView(const pybind11::object& data) {
        if (PyObject_GetBuffer(data.ptr(), &view_, PyBUF_SIMPLE) != 0) throw pybind11::error_already_set();
    }
    ~BufferView() { PyBuffer_Release(&view_); }
    BufferView(const BufferView&) = delete;
    BufferView& operator=(const BufferView&) = delete;

    const uint8_t* data() const { return static_cast<const uint8_t*>(view_.buf); }
    size_t size() const { return static_cast<size_t>(view_.len); }

private:
    Py_buffer view_;
};

}  // namespace torchdata_s3
