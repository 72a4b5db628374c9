#include "crt_runtime.h"

#include <aws/common/logging.h>
#include <aws/io/channel.h>
#include <aws/io/channel_bootstrap.h>
#include <aws/io/event_loop.h>
#include <aws/io/host_resolver.h>
#include <aws/s3/s3.h>
#include <unistd.h>

#include <mutex>
#include <stdexcept>
#include <string>

namespace torchdata_s3 {
namespace {

std::mutex g_runtime_mutex;
std::shared_ptr<CrtRuntime> g_runtime;  // guarded by g_runtime_mutex
pid_t g_runtime_pid = 0;

// aws_s3_library_init is not thread-safe on its first call; call_once makes it so. The initialised state
// is plain data, so a forked child inherits it intact and must not initialise again.
std::once_flag g_library_once;

constexpr size_t kChannelMessageBytes = 256 * 1024;

[[noreturn]] void throw_last_crt_error(const char* what) {
    throw std::runtime_error(std::string(what) + ": " + aws_error_name(aws_last_error()));
}

}  // namespace

std::shared_ptr<CrtRuntime> CrtRuntime::for_this_process() {
    std::lock_guard<std::mutex> lock(g_runtime_mutex);
    const pid_t pid = getpid();
    if (g_runtime && g_runtime_pid != pid) {
        // Inherited across fork: its event-loop threads do not exist here. Keep one reference forever so
        // that its destructor (which would talk to those threads) never runs.
        new std::shared_ptr<CrtRuntime>(std::move(g_runtime));
        g_runtime.reset();
    }
    if (!g_runtime) {
        g_runtime = std::shared_ptr<CrtRuntime>(new CrtRuntime());
        g_runtime_pid = pid;
    }
    return g_runtime;
}

bool CrtRuntime::owned_by_this_process(pid_t creator_pid) { return creator_pid == getpid(); }

CrtRuntime::CrtRuntime() : creator_pid_(getpid()), allocator_(aws_default_allocator()) {
    std::call_once(g_library_once, [this] {
        aws_s3_library_init(allocator_);
        // The CRT moves socket data through its channels in messages of this size (default 16 KiB). Every
        // message costs a dispatch through the socket, HTTP and S3 layers; bigger ones cut that overhead per
        // byte several-fold on fast links. Process-wide, but this copy of the CRT is linked privately into
        // our module, so only our clients see it. Set before the first channel exists.
        g_aws_channel_max_fragment_size = kChannelMessageBytes;
    });

    // One event loop per core is what the CRT's own clients use; the S3 client adds its own streaming loops.
    event_loop_group_ = aws_event_loop_group_new_default(allocator_, 0, nullptr);
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

CrtRuntime::~CrtRuntime() {
    if (!owned_by_this_process(creator_pid_)) return;
    // Releases are asynchronous; the threads wind down on their own. We never call aws_s3_library_clean_up:
    // it joins every CRT thread without a timeout, and other clients may still be alive.
    aws_client_bootstrap_release(bootstrap_);
    aws_host_resolver_release(host_resolver_);
    aws_event_loop_group_release(event_loop_group_);
}

void enable_crt_logging(const char* level_name) {
    static aws_logger logger;
    static bool initialised = false;
    static std::mutex mutex;
    std::lock_guard<std::mutex> lock(mutex);

    aws_log_level level = AWS_LL_NONE;
    if (aws_string_to_log_level(level_name, &level) != AWS_OP_SUCCESS) {
        throw std::invalid_argument(std::string("unknown CRT log level '") + level_name +
                                    "' (use none, fatal, error, warn, info, debug or trace)");
    }
    if (initialised) {
        aws_logger_set_log_level(&logger, level);
        return;
    }
    aws_logger_standard_options options = {};
    options.level = level;
    options.file = stderr;
    if (aws_logger_init_standard(&logger, aws_default_allocator(), &options) != AWS_OP_SUCCESS) {
        throw_last_crt_error("initialising CRT logging");
    }
    aws_logger_set(&logger);
    initialised = true;
}

}  // namespace torchdata_s3
