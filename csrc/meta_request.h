// One aws-c-s3 meta request in flight, whatever its operation (GET, PUT, LIST, HEAD, DELETE): the parts every
// operation shares, so that each one only says what it sends and what it does with the answer.
//
// - RequestState: what the CRT callbacks and the caller share, under one mutex: the outcome (finished, the
//   first failure) and the names a failure reports. Each operation derives its own state from it.
// - MetaRequest: the caller's handle. It hands the CRT a holder of the state as `user_data` and deletes that
//   holder in the shutdown callback (the CRT's last call), so a caller that gives up early (timeout, error,
//   object destroyed) never leaves a callback pointing at freed memory. Waiting with a timeout cancels the
//   request when patience runs out.
//
// Threads: callbacks run on CRT threads and touch only the state, under its mutex; the caller's thread owns
// the MetaRequest. In a fork() child the CRT threads are gone: a handle created in the parent is leaked.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

#include "request_failure.h"
#include "send_pacer.h"

struct aws_s3_meta_request;
struct aws_s3_meta_request_options;
struct aws_s3_meta_request_result;

namespace torchdata_s3 {

class S3Client;

struct RequestState {
    virtual ~RequestState() = default;

    std::mutex mutex;
    std::condition_variable changed;
    bool finished = false;
    bool failed = false;
    RequestFailure failure;
    // What a failure names.
    std::string operation;  // e.g. "GetObject"
    std::string bucket;
    std::string key;

    RequestFailure make_failure(RequestFailure::Kind kind, std::string detail) const;
    // Records the first failure only (later ones are its consequences) and wakes every waiter.
    void fail_locked(RequestFailure f);
    // Records the CRT's outcome of the whole meta request; call from the finish callback, under the mutex.
    void finish_locked(const aws_s3_meta_request_result& result);

    // The state behind a callback's `user_data` (the holder MetaRequest::start made).
    template <class State>
    static State* of(void* user_data) {
        return static_cast<State*>(static_cast<std::shared_ptr<RequestState>*>(user_data)->get());
    }

protected:
    // Called once, under the mutex, when the request fails: drop what the reader must no longer see.
    virtual void on_failed_locked() {}
};

class MetaRequest {
public:
    MetaRequest() = default;
    ~MetaRequest();  // releases the caller's reference; does not cancel (call cancel() first to stop it)
    MetaRequest(const MetaRequest&) = delete;
    MetaRequest& operator=(const MetaRequest&) = delete;

    // Makes the meta request: fills in options.user_data and options.shutdown_callback (callbacks find the
    // state with RequestState::of). Throws a RequestFailure naming the state's operation if the CRT refuses.
    void start(S3Client& client, aws_s3_meta_request_options& options, std::shared_ptr<RequestState> state);

    aws_s3_meta_request* native() const { return native_; }
    bool usable_here() const;
    // Stops the request (asynchronously: callbacks may still run until shutdown). Safe to call repeatedly.
    void cancel();

    // Waits under `lock` (on the state's mutex) until `ready()` or `timeout_ms` passed (0: no limit); false on
    // timeout. Changes nothing.
    // While the client paces its requests after throttling (send_pacer.h), a wait that runs out starts again:
    // the request may have waited for its slot, which is the client's own restraint, not the endpoint's
    // silence. Once the client has let no request go for `timeout_ms`, the wait ends as any other.
    template <class Ready>
    bool wait_patiently(std::unique_lock<std::mutex>& lock, Ready ready, uint32_t timeout_ms) {
        if (timeout_ms == 0) {
            state_->changed.wait(lock, ready);
            return true;
        }
        const auto patience = std::chrono::milliseconds(timeout_ms);
        while (!state_->changed.wait_for(lock, patience, ready)) {
            if (!pacer_ || !pacer_->pacing_within(SendPacer::now_ns(), uint64_t{timeout_ms} * 1000000)) return false;
        }
        return true;
    }

    // The same, but running out of patience fails the request ("no <waiting_for> within N ms") and cancels it.
    // Then, or if the request failed meanwhile, throws the failure.
    template <class Ready>
    void wait_or_fail(std::unique_lock<std::mutex>& lock, Ready ready, uint32_t timeout_ms, const char* waiting_for) {
        if (!wait_patiently(lock, ready, timeout_ms)) {
            state_->fail_locked(state_->make_failure(RequestFailure::Kind::timed_out,
                                                     std::string("no ") + waiting_for + " within " +
                                                         std::to_string(timeout_ms) + " ms (request_timeout_ms)"));
            lock.unlock();
            cancel();
            lock.lock();
        }
        if (state_->failed) throw state_->failure;
    }

private:
    std::shared_ptr<RequestState> state_;
    std::shared_ptr<const SendPacer> pacer_;  // the client's, or null
    aws_s3_meta_request* native_ = nullptr;
    pid_t creator_pid_ = 0;
};

}  // namespace torchdata_s3
