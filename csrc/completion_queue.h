// Many requests in flight, one waiter: the tags of requests whose answers are ready, in the order they became
// ready, plus a thread of the queue's own for the work an answer still needs before it is ready.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>

namespace torchdata_s3 {

class CompletionQueue {
public:
    CompletionQueue();
    ~CompletionQueue();  // finishes the work already handed over, then stops the thread
    CompletionQueue(const CompletionQueue&) = delete;
    CompletionQueue& operator=(const CompletionQueue&) = delete;

    void push(uint64_t tag);
    // Runs `work` (which must not throw) on the queue's thread, in the order handed over, then pushes `tag`;
    // throws, having handed nothing over, if it cannot (no memory, no thread). For the work of CRT callbacks:
    // aws-c-s3 calls a request's finish callback on the thread that schedules every request of the client,
    // so parsing a ListObjectsV2 page there (about 1 ms for 1,000 keys) held back the sending and completion
    // of every other request in flight.
    void push_after(std::function<void()> work, uint64_t tag);
    // The next ready request's tag; false if none was ready within timeout_ms (0: do not wait).
    bool pop(uint64_t* tag, uint32_t timeout_ms);

private:
    struct State;
    State* state();  // this process's
    static void run_work(State* state);

    // Everything the thread shares, on the heap: a child made by fork() inherits the state of a thread it does
    // not have (a condition variable the thread waits on cannot be destroyed: pthread_cond_destroy waits for
    // it), so it leaks the whole state and starts afresh with its own.
    std::atomic<State*> state_;
};

}  // namespace torchdata_s3
