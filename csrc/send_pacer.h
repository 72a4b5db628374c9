// A client-side request rate that adapts to an endpoint's throttling (HTTP 503 SlowDown), in the manner of
// TCP's congestion control. While nothing is throttled, requests go out unpaced. A throttled answer cuts the
// rate to 85% of the rate of answers that succeeded over the last second (what the endpoint admits when the
// client asks for more; half the rate sent, if too few answers came to tell), once per episode (half a
// second, or one slot at slow rates: answers to requests sent at the old rate keep coming). Each answer that
// succeeds raises the rate: quickly back up to the admitted rate of the last cut (+30% per second at the
// rate it sustains), then slowly past it (+2% per second, growing to +22% per second after 5 s without
// throttling), probing for more. Requests leave one slot apart, so the client stays just under what the
// endpoint admits instead of hammering it with retries that would be throttled again.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>

namespace torchdata_s3 {

class SendPacer {
public:
    // The clock of every call below (aws_high_res_clock), in nanoseconds.
    static uint64_t now_ns();

    // A request is about to be sent at `now_ns`: how long it must wait first. Reserves its slot.
    uint64_t reserve(uint64_t now_ns);
    // A request was throttled, seen at `now_ns`.
    void on_throttled(uint64_t now_ns);
    // A request succeeded.
    void on_success(uint64_t now_ns);

    // The rate in requests per second, 0 while unpaced (for tests and logs).
    double rate() const;
    // Whether the client is pacing and let a request go within the `window_ns` before `now_ns`: a reader
    // waiting that long for an answer may be waiting for its slot, not on a silent endpoint.
    bool pacing_within(uint64_t now_ns, uint64_t window_ns) const;

private:
    struct Rate {
        double per_second;
        uint64_t events;  // how many it was measured on
    };
    // The latest events (a ring; count counts them all), for their rate over the last second.
    struct Events {
        std::array<uint64_t, 512> times_ns{};
        uint64_t count = 0;
        void add(uint64_t at_ns);
        Rate rate_at(uint64_t now_ns) const;
    };

    mutable std::mutex mutex_;
    bool pacing_ = false;
    double rate_ = 0;             // requests per second, while pacing_
    uint64_t next_slot_ns_ = 0;   // when the last reserved request may leave
    uint64_t last_cut_ns_ = 0;    // when the rate was last cut
    double admitted_at_cut_ = 0;  // the rate of successful answers then
    Events sends_;                // when each request left (or will leave: its slot)
    Events successes_;            // when each successful answer came: the rate the endpoint admits
};

}  // namespace torchdata_s3
