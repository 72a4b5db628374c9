#include "crt_runtime.h"

#include <aws/auth/auth.h>
#include <aws/common/logging.h>
#include <aws/io/channel.h>
#include <aws/io/channel_bootstrap.h>
#include <aws/io/event_loop.h>
#include <aws/io/host_resolver.h>
#include <aws/io/tls_channel_handler.h>
#include <aws/s3/s3.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "fork_safe_mutex.h"

namespace torchdata_s3 {
namespace {

ForkSafeMutex g_runtime_mutex;
std::shared_ptr<CrtRuntime> g_runtime;  // guarded by g_runtime_mutex
pid_t g_runtime_pid = 0;

// aws_s3_library_init is not thread-safe on its first call; call_once makes it so. The initialised state
// is plain data, so a forked child inherits it intact and must not initialise again.
std::once_flag g_library_once;

constexpr size_t kChannelMessageBytes = 256 * 1024;

[[noreturn]] void throw_last_crt_error(const char* what) {
    throw std::runtime_error(std::string(what) + ": " + aws_error_name(aws_last_error()));
}

// The CRT's signer logs each canonical request at INFO, and a canonical request holds the session token
// (x-amz-security-token). The logger we install passes every line to the CRT's standard stderr logger but
// never lets the signer log below WARN, so that no log level writes credentials to stderr.
constexpr aws_log_level kSigningLogCeiling = AWS_LL_WARN;

aws_logger g_stderr_logger;  // the CRT's standard logger, initialised by enable_crt_logging

aws_log_level credential_safe_level(aws_logger* /*logger*/, aws_log_subject_t subject) {
    const aws_log_level level = g_stderr_logger.vtable->get_log_level(&g_stderr_logger, subject);
    return subject == AWS_LS_AUTH_SIGNING && level > kSigningLogCeiling ? kSigningLogCeiling : level;
}

int credential_safe_log(aws_logger* /*logger*/, aws_log_level level, aws_log_subject_t subject, const char* format,
                        ...) {
    va_list args;
    va_start(args, format);
    va_list measuring;
    va_copy(measuring, args);
    const int length = std::vsnprintf(nullptr, 0, format, measuring);
    va_end(measuring);
    std::vector<char> line(length > 0 ? static_cast<size_t>(length) + 1 : 1, '\0');
    std::vsnprintf(line.data(), line.size(), format, args);
    va_end(args);
    return g_stderr_logger.vtable->log(&g_stderr_logger, level, subject, "%s", line.data());
}

void credential_safe_clean_up(aws_logger* /*logger*/) { aws_logger_clean_up(&g_stderr_logger); }

int credential_safe_set_level(aws_logger* /*logger*/, aws_log_level level) {
    return aws_logger_set_log_level(&g_stderr_logger, level);
}

aws_logger_vtable g_credential_safe_vtable = {credential_safe_log, credential_safe_level, credential_safe_clean_up,
                                              credential_safe_set_level};
aws_logger g_credential_safe_logger = {&g_credential_safe_vtable, nullptr, nullptr};

}  // namespace

std::shared_ptr<CrtRuntime> CrtRuntime::for_this_process(uint16_t event_loop_threads) {
    std::lock_guard<ForkSafeMutex> lock(g_runtime_mutex);
    const pid_t pid = getpid();
    if (g_runtime && g_runtime_pid != pid) {
        // Inherited across fork: its event-loop threads do not exist here. Keep one reference forever so
        // that its destructor (which would talk to those threads) never runs.
        new std::shared_ptr<CrtRuntime>(std::move(g_runtime));
        g_runtime.reset();
    }
    if (!g_runtime) {
        g_runtime = std::shared_ptr<CrtRuntime>(new CrtRuntime(event_loop_threads));
        g_runtime_pid = pid;
    }
    return g_runtime;
}

size_t CrtRuntime::event_loop_threads() const { return aws_event_loop_group_get_loop_count(event_loop_group_); }

namespace {
// The process id, cached; a child of fork() (the only way Python starts a process that goes on running this
// module) learns its own in the atfork handler, before any of its code runs.
std::atomic<pid_t> g_this_process{0};
std::once_flag g_this_process_once;
void learn_this_process() { g_this_process.store(getpid(), std::memory_order_relaxed); }
}  // namespace

pid_t CrtRuntime::this_process() {
    // Asked on every call into a stream (PyObjectStream's guard): std::call_once reaches thread-local storage
    // each time (__tls_get_addr was 4% of `for line in stream`), a set pid needs none of it.
    const pid_t known = g_this_process.load(std::memory_order_relaxed);
    if (known != 0) return known;
    std::call_once(g_this_process_once, [] {
        learn_this_process();
        pthread_atfork(nullptr, nullptr, learn_this_process);
    });
    return g_this_process.load(std::memory_order_relaxed);
}

bool CrtRuntime::owned_by_this_process(pid_t creator_pid) { return creator_pid == this_process(); }

CrtRuntime::CrtRuntime(uint16_t event_loop_threads) : creator_pid_(getpid()), allocator_(aws_default_allocator()) {
    std::call_once(g_library_once, [this] {
        aws_s3_library_init(allocator_);
        // The CRT moves socket data through its channels in messages of this size (default 16 KiB). Every
        // message costs a dispatch through the socket, HTTP and S3 layers; bigger ones cut that overhead per
        // byte several-fold on fast links. Process-wide, but this copy of the CRT is linked privately into
        // our module, so only our clients see it. Set before the first channel exists.
        g_aws_channel_max_fragment_size = kChannelMessageBytes;
    });

    // Every socket read and the copy of its bytes into part buffers happen on these threads, so on a fast
    // link they, not the network, set the pace. How many is policy (see torchdata_s3.config).
    event_loop_group_ = aws_event_loop_group_new_default(allocator_, event_loop_threads, nullptr);
    if (!event_loop_group_) throw_last_crt_error("creating the CRT event loop group");

    aws_host_resolver_default_options resolver_options = {};
    resolver_options.el_group = event_loop_group_;
    resolver_options.max_entries = 64;
    host_resolver_ = aws_host_resolver_new_default(allocator_, &resolver_options);
    if (!host_resolver_) throw_last_crt_error("creating the CRT host resolver");

    aws_client_bootstrap_options bootstrap_options = {};
    bootstrap_options.event_loop_group = event_loop_group_;
    bootstrap_options.host_resolver = host_resolver_;
    bootstrap_ = aws_client_bootstrap_new(allocator_, &bootstrap_options);
    if (!bootstrap_) throw_last_crt_error("creating the CRT client bootstrap");
}

aws_tls_ctx* CrtRuntime::credentials_tls_context() {
    std::call_once(credentials_tls_once_, [this] {
        aws_tls_ctx_options options;
        aws_tls_ctx_options_init_default_client(&options, allocator_);
        credentials_tls_ = aws_tls_client_ctx_new(allocator_, &options);  // nullptr: the chain tries its own
        aws_tls_ctx_options_clean_up(&options);
    });
    return credentials_tls_;
}

CrtRuntime::~CrtRuntime() {
    if (!owned_by_this_process(creator_pid_)) return;
    if (credentials_tls_) aws_tls_ctx_release(credentials_tls_);  // each provider holds its own reference
    // Releases are asynchronous; the threads wind down on their own. We never call aws_s3_library_clean_up:
    // it joins every CRT thread without a timeout, and other clients may still be alive.
    aws_client_bootstrap_release(bootstrap_);
    aws_host_resolver_release(host_resolver_);
    aws_event_loop_group_release(event_loop_group_);
}

namespace {
// Counted before must_park() is asked: a setup either sees the interpreter finalising (and parks) or is counted
// when wait_for_client_setups() looks, which is at the end of the finalisation, long after it was marked.
std::atomic<int> g_setups_under_way{0};
// A fork() child has none of its parent's other threads, so none of their setups: counted, they would make its
// exit wait out the whole timeout.
void no_setups_in_child() { g_setups_under_way.store(0); }
const bool g_setups_reset_in_children = pthread_atfork(nullptr, nullptr, no_setups_in_child) == 0;
}  // namespace

ClientSetup::ClientSetup(bool (*must_park)()) {
    (void)g_setups_reset_in_children;
    g_setups_under_way.fetch_add(1);
    if (must_park()) {
        g_setups_under_way.fetch_sub(1);
        for (;;) pause();
    }
}

ClientSetup::~ClientSetup() { g_setups_under_way.fetch_sub(1); }

void wait_for_client_setups(uint32_t timeout_ms) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (g_setups_under_way.load() > 0 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

void enable_crt_logging(const char* level_name) {
    static bool initialised = false;
    static std::mutex mutex;
    std::lock_guard<std::mutex> lock(mutex);

    aws_log_level level = AWS_LL_NONE;
    if (aws_string_to_log_level(level_name, &level) != AWS_OP_SUCCESS) {
        throw std::invalid_argument(std::string("unknown CRT log level '") + level_name +
                                    "' (use none, fatal, error, warn, info, debug or trace)");
    }
    if (initialised) {
        aws_logger_set_log_level(&g_credential_safe_logger, level);
        return;
    }
    aws_logger_standard_options options = {};
    options.level = level;
    options.file = stderr;
    if (aws_logger_init_standard(&g_stderr_logger, aws_default_allocator(), &options) != AWS_OP_SUCCESS) {
        throw_last_crt_error("initialising CRT logging");
    }
    aws_logger_set(&g_credential_safe_logger);
    initialised = true;
}

}  // namespace torchdata_s3
