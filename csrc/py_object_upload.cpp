#include "py_object_upload.h"

#include <pybind11/stl.h>

#include "buffer_view.h"
#include "gil_release.h"

namespace torchdata_s3 {

ObjectUpload& PyObjectUpload::upload() const {
    if (!upload_->usable_here()) {
        throw py::value_error("the upload of " + name_ +
                              " was started in another process (before fork()): open a new writer in this one");
    }
    return *upload_;
}

void PyObjectUpload::write(const py::object& data) {
    ObjectUpload& target = upload();
    // Holding the view keeps the exporter from resizing or freeing the bytes while the GIL is released.
    BufferView view(data);
    GilRelease release;
    target.write(view.data(), view.size());
}

std::string PyObjectUpload::complete() {
    ObjectUpload& target = upload();
    GilRelease release;
    return target.complete();
}

void PyObjectUpload::abort() {
    if (!upload_->usable_here()) return;  // the parent's upload: not ours to touch (nor to commit)
    GilRelease release;
    upload_->abort();
}

uint64_t PyObjectUpload::bytes_written() const { return upload_->bytes_written(); }

uint64_t PyObjectUpload::bytes_acknowledged() const {
    GilRelease release;
    return upload_->bytes_acknowledged();
}

std::vector<std::pair<uint32_t, std::string>> PyObjectUpload::part_etags() const {
    GilRelease release;
    return upload_->part_etags();
}

bool PyObjectUpload::completion_unanswered() const {
    GilRelease release;
    return upload_->completion_unanswered();
}

void bind_object_upload(py::module_& m) {
    py::class_<PyObjectUpload>(m, "ObjectUpload", "One S3 PutObject in flight (single or multipart).")
        .def_property_readonly("name", &PyObjectUpload::name)
        .def("write", &PyObjectUpload::write, py::arg("data"),
             "Copies a bytes-like object into the upload; waits while the in-flight limit is reached.")
        .def("complete", &PyObjectUpload::complete, "Ends the body and commits the object; returns its ETag.")
        .def("abort", &PyObjectUpload::abort, "Abandons the upload; a multipart upload is aborted on the server.")
        .def_property_readonly("bytes_written", &PyObjectUpload::bytes_written, "Bytes handed to the upload.")
        .def_property_readonly("bytes_acknowledged", &PyObjectUpload::bytes_acknowledged,
                               "Bytes the server acknowledged (parts completed).")
        .def("part_etags", &PyObjectUpload::part_etags,
             "(part number, ETag) of every part the server acknowledged, in order; empty for a single PUT.")
        .def_property_readonly("completion_unanswered", &PyObjectUpload::completion_unanswered,
                               "Whether a CompleteMultipartUpload attempt ended without any answer.")
        .def_property_readonly("usable_here", &PyObjectUpload::usable_here,
                               "False in a fork() child: the upload belongs to the parent.")
        .def("__repr__", [](const PyObjectUpload& u) { return "<torchdata_s3 ObjectUpload " + u.name() + ">"; });
}

}  // namespace torchdata_s3
