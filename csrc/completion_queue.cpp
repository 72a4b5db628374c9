#include "completion_queue.h"

#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

namespace torchdata_s3 {

struct CompletionQueue::State {
    std::mutex mutex;
    std::condition_variable pushed;      // a tag was pushed
    std::condition_variable work_added;  // work was handed over, or the queue is closing
    std::deque<uint64_t> tags;
    std::deque<std::pair<std::function<void()>, uint64_t>> work;
    bool closing = false;
    std::unique_ptr<std::thread> worker;  // started by the first push_after in this process
    pid_t pid = getpid();                 // the process this state belongs to
};

CompletionQueue::CompletionQueue() : state_(new State()) {}

CompletionQueue::~CompletionQueue() {
    State* const state = state_.load();
    if (state->pid != getpid()) return;  // inherited across fork(): leaked (see state_)
    {
        std::lock_guard<std::mutex> lock(state->mutex);
        state->closing = true;
    }
    state->work_added.notify_all();
    if (state->worker) state->worker->join();
    delete state;
}

CompletionQueue::State* CompletionQueue::state() {
    State* current = state_.load();
    if (current->pid == getpid()) return current;
    auto* fresh = new State();
    if (state_.compare_exchange_strong(current, fresh)) return fresh;  // the inherited one leaks (see state_)
    delete fresh;  // another thread of this process replaced it first
    return current;
}

void CompletionQueue::push(uint64_t tag) {
    State* const state = this->state();
    {
        std::lock_guard<std::mutex> lock(state->mutex);
        state->tags.push_back(tag);
    }
    state->pushed.notify_one();
}

void CompletionQueue::push_after(std::function<void()> work, uint64_t tag) {
    State* const state = this->state();
    {
        std::lock_guard<std::mutex> lock(state->mutex);
        // The thread first: if it cannot start, nothing was handed over and the caller does the work itself.
        if (!state->worker) state->worker = std::make_unique<std::thread>(&CompletionQueue::run_work, state);
        state->work.emplace_back(std::move(work), tag);
    }
    state->work_added.notify_one();
}

void CompletionQueue::run_work(State* state) {
    std::unique_lock<std::mutex> lock(state->mutex);
    while (true) {
        state->work_added.wait(lock, [state] { return state->closing || !state->work.empty(); });
        if (state->work.empty()) return;  // closing, and nothing left
        auto next = std::move(state->work.front());
        state->work.pop_front();
        lock.unlock();
        next.first();
        lock.lock();
        state->tags.push_back(next.second);
        state->pushed.notify_one();
    }
}

bool CompletionQueue::pop(uint64_t* tag, uint32_t timeout_ms) {
    State* const state = this->state();
    std::unique_lock<std::mutex> lock(state->mutex);
    if (!state->pushed.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                                [state] { return !state->tags.empty(); })) {
        return false;
    }
    *tag = state->tags.front();
    state->tags.pop_front();
    return true;
}

}  // namespace torchdata_s3
