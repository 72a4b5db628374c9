#pragma once

#include <mutex>

namespace torchdata_s3 {

// A process-wide mutex that a fork() child never inherits held. fork() copies only the calling thread: a
// mutex another thread (a CRT thread, a Python thread with the GIL released) held at that moment stays held
// in the child, whose first use of it then waits forever (a DataLoader worker hanging on its first request).
// Every ForkSafeMutex is taken by the forking thread just before fork() and let go on both sides after it.
//
// Only for namespace-scope globals (registered while the module loads) that guard a short critical section:
// nothing may wait for the GIL or for another ForkSafeMutex while holding one (the forking thread holds the
// GIL and takes them all), and a holder that waits at all makes every fork() of the process wait with it.
class ForkSafeMutex {
public:
    ForkSafeMutex();
    ForkSafeMutex(const ForkSafeMutex&) = delete;
    ForkSafeMutex& operator=(const ForkSafeMutex&) = delete;

    void lock() { mutex_.lock(); }
    void unlock() { mutex_.unlock(); }

private:
    static void lock_all();
    static void unlock_all();

    std::mutex mutex_;
    ForkSafeMutex* next_ = nullptr;  // the one registered before this one
};

}  // namespace torchdata_s3
