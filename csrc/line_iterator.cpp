#include "line_iterator.h"

#include <string>

#include "py_object_stream.h"

namespace torchdata_s3 {
namespace {

struct Lines {
    PyObject_HEAD PyObject* stream;  // the native ObjectStream lines are cut from; nullptr once they no longer are
    PyObjectStream* native;          // its C++ object, kept alive by `stream`
    PyObject* fallback;              // returns the next line by the general path (b"" at the end)
};

PyTypeObject* lines_type = nullptr;
PyObject* readline_name = nullptr;

// The fallback's next line; nullptr at the end (no error set: StopIteration) or with its error set.
PyObject* next_by_fallback(Lines* self) {
    PyObject* line = PyObject_CallNoArgs(self->fallback);
    if (line == nullptr) return nullptr;
    if (!PyBytes_Check(line)) {
        PyErr_Format(PyExc_TypeError, "readline() returned %.100s, not bytes", Py_TYPE(line)->tp_name);
        Py_DECREF(line);
        return nullptr;
    }
    if (PyBytes_GET_SIZE(line) == 0) {
        Py_DECREF(line);
        return nullptr;
    }
    return line;
}

PyObject* lines_next(PyObject* object) {
    Lines* self = reinterpret_cast<Lines*>(object);
    if (self->fallback == nullptr) {
        PyErr_SetString(PyExc_TypeError, "torchdata_s3 line iterators are made by iter() of a stream");
        return nullptr;
    }
    if (self->stream != nullptr) {
        PyObject* line = self->native->cut_line();
        if (line != nullptr || PyErr_Occurred()) return line;
        if (self->native->lines_attached()) {
            // A line across chunks, or bytes still on their way (or another thread inside the stream: its
            // readline says so).
            line = PyObject_CallMethodNoArgs(self->stream, readline_name);
            if (line == nullptr) return nullptr;
            if (PyBytes_GET_SIZE(line) != 0) return line;
            Py_DECREF(line);  // the GET is done: the reader goes on from where it ended
        }
        Py_CLEAR(self->stream);
        self->native = nullptr;
    }
    return next_by_fallback(self);
}

void lines_dealloc(PyObject* object) {
    Lines* self = reinterpret_cast<Lines*>(object);
    PyTypeObject* type = Py_TYPE(object);
    Py_CLEAR(self->stream);
    Py_CLEAR(self->fallback);
    type->tp_free(object);
    Py_DECREF(type);  // instances of a heap type hold a reference to it
}

PyType_Slot lines_slots[] = {
    {Py_tp_dealloc, reinterpret_cast<void*>(lines_dealloc)},
    {Py_tp_iter, reinterpret_cast<void*>(PyObject_SelfIter)},
    {Py_tp_iternext, reinterpret_cast<void*>(lines_next)},
    {Py_tp_doc, const_cast<char*>("The lines of an S3 object stream (iter() of the stream makes one).")},
    {0, nullptr},
};

#ifdef Py_TPFLAGS_DISALLOW_INSTANTIATION
constexpr unsigned long kLinesFlags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION;
#else
constexpr unsigned long kLinesFlags = Py_TPFLAGS_DEFAULT;  // Python 3.9: lines_next refuses a bare instance
#endif

PyType_Spec lines_spec = {
    "torchdata_s3._core.Lines", static_cast<int>(sizeof(Lines)), 0, static_cast<unsigned int>(kLinesFlags), lines_slots,
};

}  // namespace

void bind_line_iterator(py::module_& m) {
    readline_name = PyUnicode_InternFromString("readline");
    lines_type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&lines_spec));
    if (readline_name == nullptr || lines_type == nullptr) throw py::error_already_set();
    m.def(
        "lines",
        [](py::object stream, py::object fallback) {
            if (!py::isinstance<PyObjectStream>(stream)) {
                throw py::type_error("lines() cuts lines from an ObjectStream, not " +
                                     std::string(Py_TYPE(stream.ptr())->tp_name));
            }
            PyObjectStream* native = stream.cast<PyObjectStream*>();
            PyObject* made = lines_type->tp_alloc(lines_type, 0);  // takes a reference to the type
            if (made == nullptr) throw py::error_already_set();
            Lines* self = reinterpret_cast<Lines*>(made);
            self->stream = stream.release().ptr();
            self->native = native;
            self->fallback = fallback.release().ptr();
            return py::reinterpret_steal<py::object>(made);
        },
        py::arg("stream"), py::arg("fallback"),
        "An iterator over lines: cut from `stream` (an ObjectStream) while its reader keeps it attached "
        "(attach_lines), then from fallback() (the buffered stream's readline) up to its first b\"\".");
}

}  // namespace torchdata_s3
