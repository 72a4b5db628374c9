// Process-wide CRT state: library initialisation and the event-loop / resolver / bootstrap trio that every
// client of this process shares.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

struct aws_allocator;
struct aws_client_bootstrap;
struct aws_event_loop_group;
struct aws_host_resolver;
struct aws_tls_ctx;

namespace torchdata_s3 {

class CrtRuntime {
public:
    // The runtime of the calling process, created on first use with `event_loop_threads` threads (0: the
    // CRT's default); later calls share it whatever they ask for. A forked child gets a fresh one: CRT threads
    // do not survive fork(), so the parent's objects are abandoned (leaked), never touched.
    static std::shared_ptr<CrtRuntime> for_this_process(uint16_t event_loop_threads);

    // Whether an object created in process `creator_pid` may be used (or released) from here.
    static bool owned_by_this_process(pid_t creator_pid);
    // getpid(), without its system call: every stream call checks it (1% of a small object's CPU).
    static pid_t this_process();

    aws_allocator* allocator() const { return allocator_; }
    aws_client_bootstrap* bootstrap() const { return bootstrap_; }
    // Threads of the shared event loop group (the CRT's S3 client starts further loops of its own).
    size_t event_loop_threads() const;
    // A client TLS context with the system's trust store, made on first use (nullptr if it cannot be made),
    // for the CRT's credential sources that speak https (STS, SSO, container endpoints). The default chain
    // otherwise builds one per client, and building one parses every certificate of the store: 33 ms of each
    // client's creation here, against 0.3 ms with static keys.
    aws_tls_ctx* credentials_tls_context();

    CrtRuntime(const CrtRuntime&) = delete;
    CrtRuntime& operator=(const CrtRuntime&) = delete;
    ~CrtRuntime();

private:
    explicit CrtRuntime(uint16_t event_loop_threads);

    pid_t creator_pid_;
    aws_allocator* allocator_ = nullptr;
    aws_event_loop_group* event_loop_group_ = nullptr;
    aws_host_resolver* host_resolver_ = nullptr;
    aws_client_bootstrap* bootstrap_ = nullptr;
    std::once_flag credentials_tls_once_;
    aws_tls_ctx* credentials_tls_ = nullptr;  // set once, under credentials_tls_once_
};

// Held by a thread while it sets up a client: the CRT's one-time initialisation (s2n reads the system's trust
// store) and the client's TLS contexts use the TLS library's process-wide state. Built against the system's
// OpenSSL, that state is freed by OpenSSL's own exit handler (OPENSSL_cleanup, which exit() runs once the
// interpreter has finalised) whatever other threads are doing with it: a daemon thread making the process's first
// client as the main thread returned read freed memory under ASan, and such a process died with SIGSEGV in 17
// of 24 tries instead of exiting 0. So the end of the interpreter's finalisation waits for setups under way
// (wait_for_client_setups), and a thread told to park (`must_park()`, asked once this setup is counted, so that
// the two cannot miss each other: true once the interpreter has finalised, for any thread but the one running
// the exit) pauses until the process ends instead of starting one, as CPython parks daemon threads at exit.
class ClientSetup {
public:
    explicit ClientSetup(bool (*must_park)());
    ~ClientSetup();
    ClientSetup(const ClientSetup&) = delete;
    ClientSetup& operator=(const ClientSetup&) = delete;
};

// How long the exit waits for client setups under way: one takes milliseconds; the bound is for a stuck one.
constexpr uint32_t kExitWaitsForClientSetupsMs = 10000;

// Waits until no ClientSetup is under way, or `timeout_ms` has passed.
void wait_for_client_setups(uint32_t timeout_ms);

// Turns on the CRT's own logging to stderr ("error", "warn", "info", "debug", "trace"). Process-wide. The
// request signer never logs below "warn": its INFO lines hold session tokens.
void enable_crt_logging(const char* level_name);

}  // namespace torchdata_s3
