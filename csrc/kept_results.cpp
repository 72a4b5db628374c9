#include "kept_results.h"

#include <deque>

namespace torchdata_s3 {
namespace {

struct Kept {
    PyObject* result;   // a reference of the pool's own
    uint64_t capacity;  // what its memory holds (its size may have been shortened since)
};

// Only the most recent are looked at: results their readers still hold are skipped, and are most of the oldest.
constexpr size_t kLooked = 64;

// Process-wide, touched only with the GIL held; never destroyed (the interpreter may be gone by then).
std::deque<Kept>& kept() {
    static std::deque<Kept>* results = new std::deque<Kept>();
    return *results;
}

uint64_t kept_bytes = 0;
uint64_t reused = 0;

void forget_hash(PyObject* result) {
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif
    // bytes cache their hash (ob_shash; deprecated in 3.13, still there): this one's content changes.
    reinterpret_cast<PyBytesObject*>(result)->ob_shash = -1;
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
}

}  // namespace

py::object result_for(uint64_t size, uint64_t* capacity) {
    if (size >= kMinKeptResultBytes) {
        std::deque<Kept>& results = kept();
        size_t looked = 0;
        for (auto it = results.rbegin(); it != results.rend() && looked < kLooked; ++it, ++looked) {
            // Sole holder, and filled at least half: shortening in place wastes no more than that.
            if (Py_REFCNT(it->result) != 1 || it->capacity < size || it->capacity / 2 > size) continue;
            PyObject* result = it->result;
            *capacity = it->capacity;
            kept_bytes -= it->capacity;
            results.erase(std::next(it).base());
            Py_SET_SIZE(result, static_cast<Py_ssize_t>(size));
            PyBytes_AS_STRING(result)[size] = '\0';  // as every bytes object ends
            forget_hash(result);
            ++reused;
            return py::reinterpret_steal<py::object>(result);
        }
    }
    PyObject* fresh = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(size));
    if (fresh == nullptr) throw py::error_already_set();
    *capacity = size;
    return py::reinterpret_steal<py::object>(fresh);
}

void keep_result(const py::object& result, uint64_t capacity) {
    if (capacity < kMinKeptResultBytes || capacity > kKeptResultsBytes) return;
    std::deque<Kept>& results = kept();
    results.push_back({result.inc_ref().ptr(), capacity});
    kept_bytes += capacity;
    while (kept_bytes > kKeptResultsBytes) {
        Kept oldest = results.front();
        results.pop_front();
        kept_bytes -= oldest.capacity;
        Py_DECREF(oldest.result);
    }
}

uint64_t results_reused() { return reused; }

}  // namespace torchdata_s3
