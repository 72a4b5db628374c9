// One memory budget shared by every process of a node that names the same budget file: the bytes that
// readers may buffer ahead of their consumers and writers may hold unacknowledged, summed over all of them.
//
// Mechanism: a small file (in /dev/shm by default) holds one slot per attached process: the bytes it holds.
// A process owns its slot through a POSIX record lock on the slot's byte, which the kernel drops when the
// process dies, however it dies: a slot whose lock nobody holds belongs to a dead process, and its bytes go
// back to the budget the next time somebody is short (no pid is trusted: pids are reused). Byte 0's lock
// serialises changes across processes; a process-wide mutex serialises them among threads.
//
// Takers never wait: a request is granted what is free, possibly less, and its owner retries when
// generation() says bytes came back. A caller that must make progress asks for a guaranteed amount, which is
// granted even above the limit: waiting for it could deadlock (a DataLoader worker's buffered bytes wait for
// the main process, which waits for another worker's batch).
//
// Fork: a child holds none of its parent's bytes and attaches its own slot at its first call.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

namespace torchdata_s3 {

class NodeBudget {
public:
    // The budget of `path` (created if missing), enforced at `limit_bytes` by this handle. Processes that
    // disagree on the limit each enforce their own. Takes that are not guaranteed leave `reserve_bytes` per
    // attached process free, so that the guaranteed bytes each process needs (a stream's first part) fit
    // within the limit too. Throws std::runtime_error naming the path.
    static std::shared_ptr<NodeBudget> open(const std::string& path, uint64_t limit_bytes, uint64_t reserve_bytes = 0);

    uint64_t limit() const { return limit_; }
    uint64_t reserve() const { return reserve_; }
    const std::string& path() const;

    // Takes up to `want` bytes: `guaranteed` of them (<= want) even above the limit, the rest as far as the
    // limit (less the reserves) allows. Returns what was taken.
    uint64_t take(uint64_t want, uint64_t guaranteed = 0);
    // Takes `bytes` only if all of them fit within the limit.
    bool take_all_or_nothing(uint64_t bytes);
    // Gives back bytes this process took.
    void give(uint64_t bytes);

    // Bytes held by every process attached (dead ones included until reclaimed).
    uint64_t in_use() const;
    // What a take that is not guaranteed could get now: the limit less what is in use and the reserves.
    uint64_t available() const;
    // The highest in_use() any take() has produced since the file was made or reset_peak() was called.
    uint64_t peak() const;
    void reset_peak();
    // Bytes this process holds.
    uint64_t held_here() const;
    // Bytes taken back from dead processes so far.
    uint64_t reclaimed() const;
    // Changes whenever bytes are given back or reclaimed: a taker refused earlier retries when it changed.
    uint32_t generation() const;

    struct File;  // the shared mapping, one per path per process

private:
    NodeBudget(std::shared_ptr<File> file, uint64_t limit, uint64_t reserve)
        : file_(std::move(file)), limit_(limit), reserve_(reserve) {}
    std::shared_ptr<File> file_;
    uint64_t limit_;
    uint64_t reserve_;
};

// What one stream or upload holds of a node budget (none without a budget); given back when released or
// destroyed. One thread at a time.
class BudgetShare {
public:
    BudgetShare() = default;
    explicit BudgetShare(std::shared_ptr<NodeBudget> budget) : budget_(std::move(budget)) {}
    ~BudgetShare() { release(); }
    BudgetShare(const BudgetShare&) = delete;
    BudgetShare& operator=(const BudgetShare&) = delete;

    // Starts taking from `budget` (a share made before its budget was known); holds nothing yet.
    void attach(std::shared_ptr<NodeBudget> budget) {
        release();
        budget_ = std::move(budget);
    }
    bool active() const { return budget_ != nullptr; }
    uint64_t held() const { return held_; }
    // Grows the share towards `want` bytes, `guaranteed` of them even above the budget's limit. After a
    // refusal the budget is asked again only once bytes came back to it (a load of one shared counter), so
    // this may be called on every chunk. Returns held().
    uint64_t grow_to(uint64_t want, uint64_t guaranteed = 0);
    // Gives back what the share holds above `keep` bytes.
    void shrink_to(uint64_t keep);
    void release() { shrink_to(0); }

private:
    std::shared_ptr<NodeBudget> budget_;
    uint64_t held_ = 0;
    pid_t owner_ = 0;  // the process that took held_: a fork child drops its copy without giving it back
    bool refused_ = false;
    uint32_t refused_at_ = 0;  // the budget's generation when it last refused this share
};

}  // namespace torchdata_s3
