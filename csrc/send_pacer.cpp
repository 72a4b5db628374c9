#include "send_pacer.h"

#include <aws/common/clock.h>

#include <algorithm>

namespace torchdata_s3 {
namespace {

constexpr uint64_t kSecondNs = 1000000000ULL;
constexpr double kCut = 0.85;  // of the admitted rate, on a throttling episode
// Requests per second added per successful answer: below the rate the endpoint admitted at the last cut,
// quickly back up to it (+30% per second at the rate it sustains); past it, slowly at first (+2% per
// second) and faster the longer nothing is throttled (up to +22% per second after 5 s), so that the rate
// stays near the endpoint's limit and still finds a higher one.
constexpr double kRecoveryPerSuccess = 0.3;
constexpr double kProbePerSuccess = 0.02;
constexpr double kProbeGrowthPerSecond = 0.04;
constexpr double kLongestProbeGrowthS = 5.0;
constexpr double kSlowest = 0.5;  // requests per second: a floor, so that pacing never stops a client
// Rates are measured over the last second, or over the events so far if they span less (but at least this
// long, so that a few answers at once do not read as hundreds per second).
constexpr uint64_t kShortestSpanNs = 100 * 1000 * 1000;
constexpr uint64_t kFewestToMeasure = 5;
// One throttling episode cuts the rate once: answers to requests sent at the old rate keep arriving for a
// while. (Counting only requests sent after the cut as a new episode cut too often: a few requests bunched by
// the event loops are throttled at any rate near the limit, and each cut compounded.)
constexpr uint64_t kEpisodeNs = kSecondNs / 2;

}  // namespace

SendPacer::Rate SendPacer::Events::rate_at(uint64_t now_ns) const {
    const uint64_t kept = std::min<uint64_t>(count, times_ns.size());
    uint64_t counted = 0;
    uint64_t oldest = now_ns;
    for (uint64_t back = 1; back <= kept; ++back) {
        const uint64_t at = times_ns[(count - back) % times_ns.size()];
        if (at < now_ns && now_ns - at > kSecondNs) break;  // (slots still ahead count)
        counted += 1;
        oldest = std::min(oldest, at);
    }
    const uint64_t span = std::min(std::max(now_ns - oldest, kShortestSpanNs), kSecondNs);
    return Rate{counted * (static_cast<double>(kSecondNs) / static_cast<double>(span)), counted};
}

void SendPacer::Events::add(uint64_t at_ns) {
    times_ns[count % times_ns.size()] = at_ns;
    count += 1;
}

uint64_t SendPacer::reserve(uint64_t now_ns) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!pacing_) {
        next_slot_ns_ = now_ns;
    } else {
        const auto interval_ns = static_cast<uint64_t>(kSecondNs / rate_);
        next_slot_ns_ = std::max(next_slot_ns_ + interval_ns, now_ns);
    }
    sends_.add(next_slot_ns_);
    return next_slot_ns_ - now_ns;
}

void SendPacer::on_throttled(uint64_t now_ns) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (pacing_) {
        const uint64_t episode = std::max(kEpisodeNs, static_cast<uint64_t>(kSecondNs / rate_));
        if (now_ns - last_cut_ns_ < episode) return;  // answers to requests sent at the old rate
    }
    // What the endpoint admitted, if enough answers succeeded to tell; else half of what was sent (the first
    // throttled answer may come before any other).
    const Rate admitted = successes_.rate_at(now_ns);
    const double estimate = admitted.events >= kFewestToMeasure
                                ? admitted.per_second
                                : std::max(admitted.per_second, sends_.rate_at(now_ns).per_second / 2);
    admitted_at_cut_ = pacing_ ? std::min(rate_, estimate) : estimate;
    rate_ = std::max(kSlowest, kCut * admitted_at_cut_);
    pacing_ = true;
    last_cut_ns_ = now_ns;
    next_slot_ns_ = std::max(next_slot_ns_, now_ns);  // slots already handed out stand
}

void SendPacer::on_success(uint64_t now_ns) {
    std::lock_guard<std::mutex> lock(mutex_);
    successes_.add(now_ns);
    if (!pacing_) return;
    if (rate_ < admitted_at_cut_) {
        rate_ += kRecoveryPerSuccess;
        return;
    }
    const double since_cut_s = static_cast<double>(now_ns - last_cut_ns_) / kSecondNs;
    rate_ += kProbePerSuccess + kProbeGrowthPerSecond * std::min(since_cut_s, kLongestProbeGrowthS);
}

uint64_t SendPacer::now_ns() {
    uint64_t now = 0;
    aws_high_res_clock_get_ticks(&now);
    return now;
}

double SendPacer::rate() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return pacing_ ? rate_ : 0;
}

bool SendPacer::pacing_within(uint64_t now_ns, uint64_t window_ns) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return pacing_ && next_slot_ns_ + window_ns > now_ns;
}

}  // namespace torchdata_s3
