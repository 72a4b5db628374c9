#include "s3_client.h"

#include <aws/auth/credentials.h>
#include <aws/auth/signing_config.h>
#include <aws/common/uri.h>
#include <aws/http/connection.h>
#include <aws/http/proxy.h>
#include <aws/http/request_response.h>
#include <aws/io/channel_bootstrap.h>
#include <aws/io/retry_strategy.h>
#include <aws/io/tls_channel_handler.h>
#include <aws/s3/s3.h>
#include <aws/s3/s3_client.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>

#include "proxy_tunnel.h"
#include "retry_strategy.h"
#include "single_attempt_retry.h"
#include "tls_handshake_hook.h"

namespace torchdata_s3 {
namespace {

// How long a client's destruction waits for the CRT to wind down its connections and threads.
constexpr std::chrono::milliseconds kShutdownLimit(10000);

[[noreturn]] void throw_crt_error(const std::string& what) {
    throw std::runtime_error(what + ": " + aws_error_name(aws_last_error()) + " (" + aws_error_str(aws_last_error()) +
                             ")");
}

aws_byte_cursor cursor_of(const std::string& s) { return aws_byte_cursor_from_array(s.data(), s.size()); }

aws_credentials_provider* new_credentials_provider(const ClientOptions& options, CrtRuntime& runtime) {
    aws_allocator* allocator = runtime.allocator();
    switch (options.credentials) {
        case CredentialsSource::anonymous:
            return aws_credentials_provider_new_anonymous(allocator, nullptr);
        case CredentialsSource::static_keys: {
            aws_credentials_provider_static_options static_options = {};
            static_options.access_key_id = cursor_of(options.access_key_id);
            static_options.secret_access_key = cursor_of(options.secret_access_key);
            static_options.session_token = cursor_of(options.session_token);
            return aws_credentials_provider_new_static(allocator, &static_options);
        }
        case CredentialsSource::profile:
        case CredentialsSource::default_chain: {
            aws_credentials_provider_chain_default_options chain_options = {};
            chain_options.bootstrap = runtime.bootstrap();
            chain_options.tls_ctx = runtime.credentials_tls_context();
            if (options.credentials == CredentialsSource::profile) {
                // A profile named explicitly wins over keys in the environment, as it does in the AWS CLI.
                chain_options.profile_name_override = cursor_of(options.profile_name);
                chain_options.skip_environment_credentials_provider = true;
            }
            return aws_credentials_provider_new_chain_default(allocator, &chain_options);
        }
    }
    return nullptr;
}

std::string append_encoded(const std::string& raw, int (*encode)(aws_byte_buf*, const aws_byte_cursor*)) {
    aws_byte_buf buffer;
    aws_byte_buf_init(&buffer, aws_default_allocator(), raw.size() * 3 + 1);
    const aws_byte_cursor input = cursor_of(raw);
    if (encode(&buffer, &input) != AWS_OP_SUCCESS) {
        aws_byte_buf_clean_up(&buffer);
        throw_crt_error("URI-encoding '" + raw + "'");
    }
    std::string encoded(reinterpret_cast<const char*>(buffer.buffer), buffer.len);
    aws_byte_buf_clean_up(&buffer);
    return encoded;
}

}  // namespace

// The client's shutdown completes on a CRT thread; the destructor waits for it so that no callback can
// outlive the objects it refers to.
struct S3Client::ShutdownWaiter {
    std::mutex mutex;
    std::condition_variable done_cv;
    bool done = false;

    static void on_shutdown(void* user_data) {
        auto* self = static_cast<ShutdownWaiter*>(user_data);
        std::lock_guard<std::mutex> lock(self->mutex);
        self->done = true;
        self->done_cv.notify_all();
    }
    // False if the CRT did not finish shutting down in time (e.g. a credentials provider that never answers).
    bool wait_for(std::chrono::milliseconds limit) {
        std::unique_lock<std::mutex> lock(mutex);
        return done_cv.wait_for(lock, limit, [this] { return done; });
    }
};

S3Client::S3Client(ClientOptions options)
    : options_(std::move(options)),
      runtime_(CrtRuntime::for_this_process(options_.event_loop_threads)),
      creator_pid_(getpid()),
      shutdown_(new ShutdownWaiter()) {
    if (options_.endpoint_host.empty()) throw std::invalid_argument("the S3 endpoint host is empty");
    if (options_.endpoint_scheme != "http" && options_.endpoint_scheme != "https") {
        throw std::invalid_argument("endpoint scheme must be http or https, not '" + options_.endpoint_scheme + "'");
    }

    if (options_.node_budget_bytes != 0) {
        // Each process keeps one part free for the first part of the stream its reader waits on.
        budget_ = NodeBudget::open(options_.node_budget_path, options_.node_budget_bytes, options_.part_size_bytes);
    }
    credentials_ = new_credentials_provider(options_, *runtime_);
    if (!credentials_) throw_crt_error("creating the credentials provider");
    try {
        create_client();
    } catch (...) {
        // The destructor does not run for a half-built object: give back what was made so far.
        aws_credentials_provider_release(credentials_);
        if (tls_ctx_) {
            forget_tls_context(tls_ctx_);
            aws_tls_ctx_release(tls_ctx_);
        }
        throw;
    }
}

void S3Client::create_client() {
    aws_allocator* alloc = runtime_->allocator();
    aws_signing_config_aws signing_config = {};
    aws_s3_init_default_signing_config(&signing_config, cursor_of(options_.region), credentials_);

    aws_s3_client_config config = {};
    config.region = cursor_of(options_.region);
    config.client_bootstrap = runtime_->bootstrap();
    config.signing_config = &signing_config;
    config.part_size = options_.part_size_bytes;
    config.multipart_upload_threshold = options_.multipart_threshold_bytes;
    config.throughput_target_gbps = options_.throughput_target_gbps;
    config.max_active_connections_override = options_.max_connections;
    config.memory_limit_in_bytes = options_.memory_limit_bytes;
    config.connect_timeout_ms = options_.connect_timeout_ms;
    config.completion_timeout_ms = options_.completion_timeout_ms;
    // Read backpressure bounds what each open object may buffer; every stream then widens its own window.
    config.enable_read_backpressure = true;
    config.initial_read_window = options_.part_size_bytes;

    aws_http_connection_monitoring_options monitoring = {};
    monitoring.minimum_throughput_bytes_per_second = 1;
    monitoring.allowable_throughput_failure_interval_seconds = options_.stall_timeout_s;
    if (options_.stall_timeout_s != 0) config.monitoring_options = &monitoring;

    aws_tls_connection_options tls_connection = {};
    const bool use_tls = options_.endpoint_scheme == "https";
    if (use_tls) {
        aws_tls_ctx_options tls_options;
        aws_tls_ctx_options_init_default_client(&tls_options, alloc);
        aws_tls_ctx_options_set_verify_peer(&tls_options, options_.verify_tls);
        if (!options_.ca_file.empty() && aws_tls_ctx_options_override_default_trust_store_from_path(
                                             &tls_options, nullptr, options_.ca_file.c_str()) != AWS_OP_SUCCESS) {
            aws_tls_ctx_options_clean_up(&tls_options);
            throw_crt_error("loading the CA file " + options_.ca_file);
        }
        tls_ctx_ = aws_tls_client_ctx_new(alloc, &tls_options);
        aws_tls_ctx_options_clean_up(&tls_options);
        if (!tls_ctx_) throw_crt_error("creating the TLS context");
        aws_tls_connection_options_init_from_ctx(&tls_connection, tls_ctx_);
        const uint16_t port = options_.endpoint_port != 0 ? options_.endpoint_port : 443;
        tls_watch_.reset(new TlsHandshakeWatch(options_.endpoint_host + ":" + std::to_string(port)));
        watch_tls_context(tls_ctx_, tls_watch_.get());
        config.tls_mode = AWS_MR_TLS_ENABLED;
        config.tls_connection_options = &tls_connection;
    } else {
        config.tls_mode = AWS_MR_TLS_DISABLED;
    }

    // The CRT's strategy decides on retries and their backoff: its standard one (as the S3 client would make
    // it, with our backoff scale), or for "no retries" one of our own, since the CRT's always retries at
    // least once. Ours wraps it (retry_strategy.h): no retries that cannot help over TLS or a proxy, and
    // pacing after throttling.
    aws_retry_strategy* inner = nullptr;
    if (options_.max_retries == 0) {
        inner = new_single_attempt_retry_strategy(alloc);
    } else {
        aws_standard_retry_options standard = {};
        standard.backoff_retry_options.el_group = runtime_->bootstrap()->event_loop_group;
        standard.backoff_retry_options.max_retries = options_.max_retries;
        standard.backoff_retry_options.backoff_scale_factor_ms = options_.retry_backoff_ms;
        inner = aws_retry_strategy_new_standard(alloc, &standard);
    }
    RetryPolicies policies;
    policies.max_throttle_retries = options_.max_throttle_retries;
    if (use_tls) {
        policies.tls_watch = tls_watch_.get();
        if (!options_.proxy_host.empty()) {
            proxy_watch_.reset(new ProxyWatch(options_.proxy_host + ":" + std::to_string(options_.proxy_port)));
        }
        policies.proxy_watch = proxy_watch_.get();
    }
    if (options_.adaptive_rate) {
        pacer_ = std::make_shared<SendPacer>();
        policies.pacer = pacer_.get();
        policies.event_loop_group = runtime_->bootstrap()->event_loop_group;
    }
    aws_retry_strategy* retry_strategy = inner ? new_client_retry_strategy(alloc, inner, policies) : nullptr;
    if (inner) aws_retry_strategy_release(inner);
    if (!retry_strategy) {
        if (use_tls) aws_tls_connection_options_clean_up(&tls_connection);
        throw_crt_error("creating the retry strategy");
    }
    config.retry_strategy = retry_strategy;

    // Explicit proxy options only: which proxy (if any) the environment asks for is decided in Python.
    aws_http_proxy_options proxy = {};
    aws_http_proxy_strategy* tunnel = nullptr;
    if (!options_.proxy_host.empty()) {
        proxy.connection_type = use_tls ? AWS_HPCT_HTTP_TUNNEL : AWS_HPCT_HTTP_FORWARD;
        proxy.host = cursor_of(options_.proxy_host);
        proxy.port = options_.proxy_port;
        if (use_tls) {
            // Our tunnel strategy: it sends the credentials as aws-c-http's would, and sees the proxy's answer.
            tunnel = new_watched_tunnel_strategy(alloc, options_.proxy_username, options_.proxy_password,
                                                 proxy_watch_.get());
            if (tunnel == nullptr) {
                aws_retry_strategy_release(retry_strategy);
                aws_tls_connection_options_clean_up(&tls_connection);
                throw_crt_error("creating the proxy strategy");
            }
            proxy.proxy_strategy = tunnel;
        } else if (!options_.proxy_username.empty()) {
            proxy.auth_type = AWS_HPAT_BASIC;
            proxy.auth_username = cursor_of(options_.proxy_username);
            proxy.auth_password = cursor_of(options_.proxy_password);
        }
        config.proxy_options = &proxy;
    }

    config.shutdown_callback = &ShutdownWaiter::on_shutdown;
    config.shutdown_callback_user_data = shutdown_.get();

    // Half of the pool's part memory may be lent to readers holding chunks; the other half keeps downloads
    // moving. The pool keeps kPoolReserveBytes of the limit for itself (aws-c-s3's default buffer pool).
    const uint64_t limit = options_.memory_limit_bytes != 0
                               ? options_.memory_limit_bytes
                               : aws_s3_default_memory_limit_for_throughput(options_.throughput_target_gbps);
    pool_pin_budget_ = limit > kPoolReserveBytes ? (limit - kPoolReserveBytes) / 2 : 0;

    client_ = aws_s3_client_new(alloc, &config);
    aws_retry_strategy_release(retry_strategy);           // the client holds its own reference (or none, if it failed)
    if (tunnel) aws_http_proxy_strategy_release(tunnel);  // likewise
    if (use_tls) aws_tls_connection_options_clean_up(&tls_connection);
    if (!client_) throw_crt_error("creating the S3 client");
    configured_connections_ = aws_s3_client_limit_active_connections(client_, 0);
    if (options_.tune_connections) tuner_ = std::make_shared<ConnectionTuner>(client_, configured_connections_);
}

S3Client::~S3Client() {
    if (!usable_here()) {
        // Inherited across fork(): its threads are gone, releasing would crash or hang. Leak on purpose.
        shutdown_.release();
        tls_watch_.release();
        proxy_watch_.release();
        new std::shared_ptr<SendPacer>(std::move(pacer_));  // leaked like the watches
        return;
    }
    aws_s3_client_release(client_);
    if (!shutdown_->wait_for(kShutdownLimit)) {
        // Something inside the CRT is stuck; leaking beats hanging the caller (often interpreter exit).
        shutdown_.release();
        tls_watch_.release();
        proxy_watch_.release();
        new std::shared_ptr<SendPacer>(std::move(pacer_));  // leaked like the watches
        return;
    }
    aws_credentials_provider_release(credentials_);
    if (tls_ctx_) {
        forget_tls_context(tls_ctx_);  // no connection of this client is left to report
        aws_tls_ctx_release(tls_ctx_);
    }
}

std::string S3Client::host_for(const std::string& bucket) const {
    // No bucket (ListBuckets): the endpoint itself, in either addressing style.
    return options_.path_style || bucket.empty() ? options_.endpoint_host : bucket + "." + options_.endpoint_host;
}

void S3Client::endpoint_for(const std::string& bucket, aws_uri* out) const {
    aws_uri_builder_options builder = {};
    builder.scheme = cursor_of(options_.endpoint_scheme);
    const std::string host = host_for(bucket);
    builder.host_name = cursor_of(host);
    builder.port = options_.endpoint_port;
    if (aws_uri_init_from_builder_options(out, runtime_->allocator(), &builder) != AWS_OP_SUCCESS) {
        throw_crt_error("building the endpoint URI for host '" + host + "'");
    }
}

std::string S3Client::request_path(const std::string& bucket, const std::string& encoded_suffix) const {
    std::string path;
    if (options_.path_style && !bucket.empty()) path = "/" + encode_path(bucket);
    path += encoded_suffix;
    if (path.empty() || path[0] != '/') path.insert(0, "/");
    return path;
}

aws_http_message* S3Client::new_message(const std::string& method, const std::string& bucket,
                                        const std::string& encoded_suffix) const {
    const std::string path = request_path(bucket, encoded_suffix);

    aws_http_message* message = aws_http_message_new_request(runtime_->allocator());
    if (!message) throw_crt_error("creating an HTTP request");
    if (aws_http_message_set_request_method(message, cursor_of(method)) != AWS_OP_SUCCESS ||
        aws_http_message_set_request_path(message, cursor_of(path)) != AWS_OP_SUCCESS) {
        aws_http_message_release(message);
        throw_crt_error("preparing the HTTP request");
    }
    // No Host header: the CRT sets it from the endpoint URI, which guarantees the two agree.
    return message;
}

std::string S3Client::encode_path(const std::string& key) {
    return append_encoded(key, aws_byte_buf_append_encoding_uri_path);
}

std::string S3Client::encode_query_value(const std::string& value) {
    return append_encoded(value, aws_byte_buf_append_encoding_uri_param);
}

}  // namespace torchdata_s3
