// The Python view of one ObjectUpload: the mechanism under torchdata_s3/writer.py's S3ObjectWriter, which
// decides buffering, when to stream and what to raise. Blocking calls release the GIL.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "object_upload.h"

namespace torchdata_s3 {

namespace py = pybind11;

class PyObjectUpload {
public:
    PyObjectUpload(std::shared_ptr<ObjectUpload> upload, std::string name)
        : upload_(std::move(upload)), name_(std::move(name)) {}

    const std::string& name() const { return name_; }
    // Copies `data` (any contiguous buffer) into the upload; waits while the in-flight limit is reached.
    void write(const py::object& data);
    // Commits the object; returns its ETag.
    std::string complete();
    void abort();
    uint64_t bytes_written() const;
    uint64_t bytes_acknowledged() const;
    std::vector<std::pair<uint32_t, std::string>> part_etags() const;
    bool completion_unanswered() const;
    bool usable_here() const { return upload_ && upload_->usable_here(); }

private:
    ObjectUpload& upload() const;

    std::shared_ptr<ObjectUpload> upload_;
    std::string name_;
};

void bind_object_upload(py::module_& m);

}  // namespace torchdata_s3
