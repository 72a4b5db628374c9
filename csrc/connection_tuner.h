// How many connections a client uses at once, learned from the rate its bytes move at, as TCP learns a window.
//
// The CRT sizes a client's connections for a far endpoint (S3 gives about 0.1 GB/s per connection). A near
// endpoint gives GB/s per connection, and there every connection beyond a few costs CPU and speed (most
// likely because bytes wait in more socket buffers and are copied out cold): two connections read 14% faster at
// 10% less CPU per GB on a loopback endpoint (docs/benchmarks.md, run 33). An endpoint that limits each
// connection's rate wants them all (two connections: 0.45x). No rule on latency tells the two apart; the rate
// does.
//
// The tuner starts at the client's own number and measures the rate over windows of deliveries (a GET part's
// body, an upload part's acknowledgement). After each window at the current limit it may probe: fewer
// connections (half, or straight down to the most the window had in use, if that is fewer), kept if the rate
// stays within 3% (fewer connections for the same bytes is CPU saved); or twice as many, kept only for 10% more.
// A kept probe is followed by another in the same direction; a probe that fails is undone and that direction
// waits 4, then 16, then 64 windows, so a settled client spends few windows probing. A probe with fewer
// connections that is clearly slower (below 80%) is undone a quarter of the way through its window.
// Windows that hold an idle second (a reader that stopped) are dropped.
#pragma once

#include <cstdint>
#include <mutex>

struct aws_s3_client;

namespace torchdata_s3 {

class ConnectionTuner {
public:
    // For `client`, whose own number of connections (before any limit) is `configured`. Without a client
    // (tests), it only decides.
    ConnectionTuner(aws_s3_client* client, uint32_t configured);

    // A delivery of `bytes` was made just now. Moves the client's limit when a window closes with a decision.
    // Called from the CRT's threads, for requests of the client (alive while they are), with no lock of ours
    // held: it may take the client's.
    void on_delivered(uint64_t bytes);
    // The same, made at `now_ns` (aws_high_res_clock's nanoseconds) with `in_use` requests on connections
    // (tests give their own).
    void on_delivered_at(uint64_t bytes, uint64_t now_ns, uint32_t in_use);

    // The limit in force (the configured number until the first probe).
    uint32_t limit() const;
    // Windows measured and probes kept, for tests and logs.
    uint64_t windows() const;
    uint64_t probes_kept() const;

private:
    enum class Direction { none, down, up };
    void restart_window_locked(uint64_t now_ns);
    void close_window_locked(double rate, uint32_t peak_in_use);
    void start_probe_locked(Direction direction, uint32_t peak_in_use);
    void set_limit_locked(uint32_t limit);
    uint32_t window_deliveries_locked() const;

    aws_s3_client* const client_;
    const uint32_t configured_;
    mutable std::mutex mutex_;
    uint32_t limit_;
    // The probe being measured: its direction and the limit to return to when it fails.
    Direction probe_ = Direction::none;
    uint32_t probe_from_ = 0;
    double base_rate_ = 0;  // bytes per ns at limit_, measured in the last window without a probe
    // Windows (without a probe) each direction still waits, and what it waits after its next failure.
    uint32_t wait_down_ = 0, wait_up_ = 0;
    uint32_t backoff_down_, backoff_up_;
    // The window being measured, after `settle_left_` deliveries that still belonged to the previous limit.
    uint32_t settle_left_ = 0;
    uint32_t deliveries_ = 0;
    uint64_t bytes_ = 0;
    uint64_t start_ns_ = 0;
    uint64_t last_ns_ = 0;
    uint32_t peak_in_use_ = 0;  // the most requests on connections seen at a delivery of the window
    uint64_t windows_ = 0;
    uint64_t probes_kept_ = 0;
};

}  // namespace torchdata_s3
