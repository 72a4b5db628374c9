#include "fork_safe_mutex.h"

#include <pthread.h>

#include <atomic>

namespace torchdata_s3 {
namespace {
std::atomic<ForkSafeMutex*> g_last{nullptr};  // constant-initialised: usable before any constructor runs
}  // namespace

ForkSafeMutex::ForkSafeMutex() {
    static const bool handlers_installed = [] { return pthread_atfork(lock_all, unlock_all, unlock_all) == 0; }();
    (void)handlers_installed;
    next_ = g_last.load();
    while (!g_last.compare_exchange_weak(next_, this)) {
    }
}

void ForkSafeMutex::lock_all() {
    for (ForkSafeMutex* mutex = g_last.load(); mutex != nullptr; mutex = mutex->next_) mutex->mutex_.lock();
}

void ForkSafeMutex::unlock_all() {
    for (ForkSafeMutex* mutex = g_last.load(); mutex != nullptr; mutex = mutex->next_) mutex->mutex_.unlock();
}

}  // namespace torchdata_s3
