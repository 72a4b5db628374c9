#include "connection_tuner.h"

#include <aws/common/clock.h>
#include <aws/s3/s3_client.h>

#include <algorithm>

namespace torchdata_s3 {

namespace {

// A probe with more connections is kept for this much more rate: they cost CPU on both ends.
constexpr double kUpGain = 1.10;
// A probe with fewer connections is kept while it moves at least this much of the rate: the CPU it saves
// is worth a little speed, and a window's noise on a loopback endpoint is a few percent.
constexpr double kDownKeep = 0.97;
// A window lasts at least this long (8 MiB parts arriving at 2-3 GB/s are a few ms apart: shorter is noise)
// and holds at least as many deliveries as the limit, within bounds (a connection that has not delivered
// anything in the window has not shown what it adds; more is slow to react).
constexpr uint64_t kMinWindowNs = 50'000'000;
constexpr uint32_t kMinWindowDeliveries = 8;
constexpr uint32_t kMaxWindowDeliveries = 32;
// A pause this long between deliveries is a reader that stopped (or an endpoint that did): not a rate.
constexpr uint64_t kIdleNs = 1'000'000'000;
// The fewest connections the tuner goes down to: with one, a stalled connection would stop every request of
// the client until the stall timeout drops it, and each part would wait for the one before it.
constexpr uint32_t kMinLimit = 2;
// After a failed probe its direction waits 4, then 16, then 64 windows: a failed probe with fewer connections
// costs a far endpoint rate while it lasts (probing that direction costs one window in 65 when settled).
constexpr uint32_t kFirstBackoff = 4;
constexpr uint32_t kBackoffGrowth = 4;
constexpr uint32_t kMaxBackoff = 64;
// A probe with fewer connections is ended a quarter of the way through its window when the rate is already
// below this share of the base: on a far endpoint halving the connections halves the rate, and a whole window
// of it would cost four times as much.
constexpr double kDownAbortBelow = 0.8;

}  // namespace

ConnectionTuner::ConnectionTuner(aws_s3_client* client, uint32_t configured)
    : client_(client),
      configured_(std::max<uint32_t>(configured, 1)),
      limit_(configured_),
      backoff_down_(kFirstBackoff),
      backoff_up_(kFirstBackoff) {}

uint32_t ConnectionTuner::limit() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return limit_;
}

uint64_t ConnectionTuner::windows() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return windows_;
}

uint64_t ConnectionTuner::probes_kept() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return probes_kept_;
}

uint32_t ConnectionTuner::window_deliveries_locked() const {
    return std::clamp<uint32_t>(limit_, kMinWindowDeliveries, kMaxWindowDeliveries);
}

void ConnectionTuner::on_delivered(uint64_t bytes) {
    uint64_t now_ns = 0;
    aws_high_res_clock_get_ticks(&now_ns);
    on_delivered_at(bytes, now_ns, client_ != nullptr ? aws_s3_client_requests_on_connections(client_) : 0);
}

void ConnectionTuner::on_delivered_at(uint64_t bytes, uint64_t now_ns, uint32_t in_use) {
    std::lock_guard<std::mutex> lock(mutex_);
    peak_in_use_ = std::max(peak_in_use_, in_use);
    const bool idle = last_ns_ != 0 && now_ns - last_ns_ > kIdleNs;
    last_ns_ = now_ns;
    if (idle || start_ns_ == 0) {
        // The window restarts here; these bytes took an unknown time to come.
        restart_window_locked(now_ns);
        return;
    }
    if (settle_left_ > 0) {
        if (--settle_left_ == 0) restart_window_locked(now_ns);
        return;
    }
    deliveries_ += 1;
    bytes_ += bytes;
    const uint64_t elapsed_ns = now_ns - start_ns_;
    const double rate = static_cast<double>(bytes_) / static_cast<double>(elapsed_ns);
    const bool full = deliveries_ >= window_deliveries_locked() && elapsed_ns >= kMinWindowNs;
    const bool quarter = 4 * deliveries_ >= window_deliveries_locked() && 4 * elapsed_ns >= kMinWindowNs;
    if (!full && !(quarter && probe_ == Direction::down && rate < base_rate_ * kDownAbortBelow)) return;
    const uint32_t peak_in_use = peak_in_use_;
    windows_ += 1;
    restart_window_locked(now_ns);
    close_window_locked(rate, peak_in_use);
}

void ConnectionTuner::restart_window_locked(uint64_t now_ns) {
    start_ns_ = now_ns;
    deliveries_ = 0;
    bytes_ = 0;
    peak_in_use_ = 0;
}

void ConnectionTuner::close_window_locked(double rate, uint32_t peak_in_use) {
    if (probe_ != Direction::none) {
        const Direction probe = probe_;
        const bool kept = probe == Direction::up ? rate >= base_rate_ * kUpGain : rate >= base_rate_ * kDownKeep;
        probe_ = Direction::none;
        if (kept) {
            probes_kept_ += 1;
            base_rate_ = rate;
            // The other direction waits a window at least: it would most likely undo what was just learned.
            if (probe == Direction::up) {
                backoff_up_ = kFirstBackoff;
                wait_down_ = std::max<uint32_t>(wait_down_, 1);
            } else {
                backoff_down_ = kFirstBackoff;
                wait_up_ = std::max<uint32_t>(wait_up_, 1);
            }
            start_probe_locked(probe, peak_in_use);  // keep going while it pays
            return;
        }
        uint32_t& backoff = probe == Direction::up ? backoff_up_ : backoff_down_;
        (probe == Direction::up ? wait_up_ : wait_down_) = backoff;
        backoff = std::min(kBackoffGrowth * backoff, kMaxBackoff);
        base_rate_ = 0;
        set_limit_locked(probe_from_);
        return;
    }
    base_rate_ = rate;
    if (wait_down_ == 0 && limit_ > kMinLimit) {
        start_probe_locked(Direction::down, peak_in_use);
    } else if (wait_up_ == 0 && limit_ < configured_) {
        start_probe_locked(Direction::up, peak_in_use);
    } else {
        if (wait_down_ > 0) wait_down_ -= 1;
        if (wait_up_ > 0) wait_up_ -= 1;
    }
}

void ConnectionTuner::start_probe_locked(Direction direction, uint32_t peak_in_use) {
    // Down: half the limit, or straight to the most connections the last window used, if fewer (a limit far
    // above what the reader keeps busy takes one probe, not one per halving).
    const uint32_t next = direction == Direction::up ? std::min(2 * limit_, configured_)
                                                     : std::max(std::min(limit_ / 2, peak_in_use), kMinLimit);
    if (next == limit_) return;  // at a bound: nothing to probe; the window just measured stays the base
    probe_ = direction;
    probe_from_ = limit_;
    set_limit_locked(next);
}

void ConnectionTuner::set_limit_locked(uint32_t limit) {
    // The deliveries of requests already on connections under the old limit belong to it.
    settle_left_ = std::min(std::max(limit, limit_), kMaxWindowDeliveries / 2);
    limit_ = limit;
    if (client_ != nullptr) aws_s3_client_limit_active_connections(client_, limit == configured_ ? 0 : limit);
}

}  // namespace torchdata_s3
