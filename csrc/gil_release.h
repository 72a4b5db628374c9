// Releasing the GIL around blocking waits, safely even while the interpreter shuts down. Used by every
// binding file; no S3 here.
#pragma once

#include <pybind11/pybind11.h>
#include <unistd.h>

namespace torchdata_s3 {

bool interpreter_finalizing();

// threading.main_thread().ident, the thread that finalises the interpreter; set when the module loads.
extern unsigned long g_main_thread;

// Whether the calling thread is one CPython would park: the interpreter has finalised and this thread is not
// the one running the exit. GIL not needed.
inline bool parked_at_exit() { return interpreter_finalizing() && PyThread_get_thread_ident() != g_main_thread; }

// Releases the GIL for a blocking wait. pybind11's guard reacquires it in a noexcept destructor; if the
// interpreter finalised meanwhile (a daemon thread waiting for S3 at exit), CPython ends that thread with
// pthread_exit, whose forced unwind through a noexcept frame aborts the whole process. This guard parks
// such a thread instead (the process is exiting anyway) and lets a forced unwind pass. The main thread is
// the one running the finalisation (and our destructors during it): it always takes the GIL back.
class GilRelease {
public:
    GilRelease() : state_(PyEval_SaveThread()) {}
    ~GilRelease() noexcept(false) {
        if (parked_at_exit()) {
            for (;;) pause();
        }
        PyEval_RestoreThread(state_);
    }
    GilRelease(const GilRelease&) = delete;
    GilRelease& operator=(const GilRelease&) = delete;

private:
    PyThreadState* state_;
};

}  // namespace torchdata_s3
