// One aws_s3_client and everything it needs (credentials, signing, TLS), built from resolved options.
// Policy (defaults, environment variables, URL parsing) lives in Python; this is only the mechanism.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "connection_tuner.h"
#include "crt_runtime.h"
#include "node_budget.h"
#include "proxy_tunnel.h"
#include "send_pacer.h"
#include "tls_failures.h"

struct aws_credentials_provider;
struct aws_http_message;
struct aws_s3_client;
struct aws_tls_ctx;
struct aws_uri;

namespace torchdata_s3 {

enum class CredentialsSource { default_chain, profile, static_keys, anonymous };

// Everything a client is made from. Python's S3Config is the one place where defaults are decided: the values
// here are what it resolved, and a zero means "the CRT's own default" only where a comment says so.
struct ClientOptions {
    std::string region;
    std::string endpoint_scheme;  // "http" or "https"
    std::string endpoint_host;    // e.g. "s3.us-east-1.amazonaws.com" or "127.0.0.1"
    uint16_t endpoint_port = 0;   // 0: the scheme's default port
    bool path_style = false;      // true: /bucket/key on endpoint_host; false: bucket.endpoint_host/key

    CredentialsSource credentials = CredentialsSource::default_chain;
    std::string profile_name;  // for CredentialsSource::profile
    std::string access_key_id;
    std::string secret_access_key;
    std::string session_token;

    uint64_t part_size_bytes = 0;            // 0: the CRT's default (8 MiB)
    uint64_t multipart_threshold_bytes = 0;  // uploads above this many bytes are multipart; 0: the part size
    double throughput_target_gbps = 0;       // 0: the CRT's default (10 Gbps)
    uint32_t max_connections = 0;            // 0: the CRT's choice for the throughput target
    bool tune_connections = false;           // learn how many of them to use from the rate (connection_tuner.h)
    uint64_t memory_limit_bytes = 0;         // 0: the CRT's choice for the throughput target
    uint64_t read_window_bytes = 0;          // what each stream may buffer ahead of its reader (required)

    uint32_t connect_timeout_ms = 0;     // 0: the CRT's default (3000 ms)
    uint32_t stall_timeout_s = 0;        // a connection moving no byte this long is dropped; 0: the CRT's 30 s
    uint32_t completion_timeout_ms = 0;  // first-byte wait of a Complete or a copy; 0: stall_timeout_s's
    uint32_t max_retries = 0;            // 0: no retries (a single attempt)
    uint32_t retry_backoff_ms = 0;       // the backoff's scale: retry n waits up to 2^n times this; 0: the CRT's
    bool adaptive_rate = false;          // pace requests after throttling (send_pacer.h)
    uint32_t max_throttle_retries = 0;   // with adaptive_rate: retries of a throttled request

    // A proxy to connect through (CONNECT for https, forwarding for http); empty host: none.
    std::string proxy_host;
    uint16_t proxy_port = 0;
    std::string proxy_username;  // empty: no proxy authentication
    std::string proxy_password;

    bool verify_tls = true;
    std::string ca_file;  // empty: the system trust store
    // Every request says the requester pays for it (x-amz-request-payer), as Requester Pays buckets demand.
    bool requester_pays = false;
    // Threads of the process-wide event loop group, fixed by the first client of the process; 0: the CRT's
    // default (one per two cores).
    uint16_t event_loop_threads = 0;
    // One memory budget for every process of the node naming this file (node_budget.h); 0 bytes: none.
    std::string node_budget_path;
    uint64_t node_budget_bytes = 0;
};

// aws-c-s3's default buffer pool: of its memory limit it keeps this much for itself, and it refuses a limit
// below the minimum. Private constants of the CRT, restated once here (Python reads them from the module).
constexpr uint64_t kPoolReserveBytes = 128ull * 1024 * 1024;
constexpr uint64_t kMinimumMemoryLimitBytes = 256ull * 1024 * 1024;

class S3Client {
public:
    explicit S3Client(ClientOptions options);
    ~S3Client();
    S3Client(const S3Client&) = delete;
    S3Client& operator=(const S3Client&) = delete;

    const ClientOptions& options() const { return options_; }
    aws_s3_client* native() const { return client_; }
    aws_allocator* allocator() const { return runtime_->allocator(); }
    size_t event_loop_threads() const { return runtime_->event_loop_threads(); }
    bool usable_here() const { return CrtRuntime::owned_by_this_process(creator_pid_); }

    // A request message (`method`: "GET", "PUT", ...) for `bucket` with the given (already encoded)
    // path-and-query relative to the bucket, e.g. "/my%20key" or "?list-type=2". Host and path follow the
    // addressing style. Caller releases it.
    // The request path for `bucket` and an already encoded path-and-query relative to it ("/key?query"): the
    // bucket in front for path-style addressing.
    std::string request_path(const std::string& bucket, const std::string& encoded_suffix) const;
    aws_http_message* new_message(const std::string& method, const std::string& bucket,
                                  const std::string& encoded_suffix) const;

    // The connection endpoint for `bucket` (scheme, host, port). Caller cleans it up with aws_uri_clean_up.
    void endpoint_for(const std::string& bucket, aws_uri* out) const;

    // URI-encodes an object key for a path ('/' kept) or a query value ('/' encoded), with the CRT's rules.
    static std::string encode_path(const std::string& key);
    static std::string encode_query_value(const std::string& value);

    // Pool memory held by chunks handed out without copying (see body_chunk.h). Readers that may keep chunks
    // for as long as they like stop taking pool memory above pool_pin_budget(): the pool must always keep
    // room for the parts that downloads in progress still need.
    void pin_pool_bytes(uint64_t bytes) { pinned_pool_bytes_ += bytes; }
    void unpin_pool_bytes(uint64_t bytes) { pinned_pool_bytes_ -= bytes; }
    uint64_t pinned_pool_bytes() const { return pinned_pool_bytes_.load(); }
    uint64_t pool_pin_budget() const { return pool_pin_budget_; }
    // Bytes received straight into a reader's result, never held in a pool buffer (ObjectStream::land_in).
    void count_landed_bytes(uint64_t bytes) { landed_bytes_ += bytes; }
    uint64_t landed_bytes() const { return landed_bytes_.load(); }
    // The size of the pieces readers of this client last read large objects in (0: none worth scattering
    // parts over, or read whole; see scattered_results.h). One per client: a loader's objects are read by one loop.
    // Until a reader says otherwise, 1 MiB: the loader's read loop, and the buffer a BufferedReader over an
    // S3ObjectStream fills. Planning from the first object on keeps its parts out of pool buffers: a pool
    // keeps the memory it touched, and blocks learned later would come on top of it (s3like, 16 x 64 MiB:
    // peak RSS growth 749 MiB learning, against 512 MiB without blocks).
    void note_read_size(uint64_t bytes) { read_size_bytes_ = bytes; }
    uint64_t read_size_bytes() const { return read_size_bytes_.load(); }
    // Requests per second the client paces at after throttling; 0 while unpaced (or without adaptive_rate).
    double pacing_rate() const { return pacer_ ? pacer_->rate() : 0; }
    // The pacer, or null without adaptive_rate: requests consult it while they wait (meta_request.h).
    const std::shared_ptr<SendPacer>& pacer() const { return pacer_; }
    // The connection tuner, or null without tune_connections: GETs and uploads report their deliveries to it.
    const std::shared_ptr<ConnectionTuner>& tuner() const { return tuner_; }
    // The connections the client may use at once now (the configured number, or the tuner's limit).
    uint32_t connection_limit() const { return tuner_ ? tuner_->limit() : configured_connections_; }
    // The node's memory budget, or null: streams and uploads take what they buffer from it.
    const std::shared_ptr<NodeBudget>& budget() const { return budget_; }

private:
    void create_client();  // the aws_s3_client and its TLS context; the constructor cleans up if it throws
    std::string host_for(const std::string& bucket) const;

    ClientOptions options_;
    std::shared_ptr<CrtRuntime> runtime_;
    std::atomic<uint64_t> pinned_pool_bytes_{0};
    uint64_t pool_pin_budget_ = 0;
    std::atomic<uint64_t> landed_bytes_{0};
    std::atomic<uint64_t> read_size_bytes_{1024 * 1024};
    pid_t creator_pid_;
    aws_credentials_provider* credentials_ = nullptr;
    aws_tls_ctx* tls_ctx_ = nullptr;
    aws_s3_client* client_ = nullptr;
    struct ShutdownWaiter;
    std::unique_ptr<ShutdownWaiter> shutdown_;
    // Called from CRT threads until the shutdown completes: leaked with shutdown_ when that never happens.
    std::unique_ptr<TlsHandshakeWatch> tls_watch_;
    std::unique_ptr<ProxyWatch> proxy_watch_;  // through a proxy over TLS only; kept like tls_watch_
    std::shared_ptr<SendPacer> pacer_;         // with adaptive_rate; kept like tls_watch_
    std::shared_ptr<NodeBudget> budget_;
    uint32_t configured_connections_ = 0;
    std::shared_ptr<ConnectionTuner> tuner_;
};

}  // namespace torchdata_s3
