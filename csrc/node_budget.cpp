#include "node_budget.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>

#include "fork_safe_mutex.h"

namespace torchdata_s3 {
namespace {

constexpr uint64_t kMagic = 0x7464733362756467ull;  // "tds3budg"
constexpr uint32_t kVersion = 1;
constexpr uint32_t kSlots = 1024;  // processes attached at once, per budget file
// A process short of bytes looks for dead processes' slots at most this often: each look is a syscall per
// attached process.
constexpr int64_t kReclaimIntervalNs = 100'000'000;

struct Header {
    uint64_t magic;
    uint32_t version;
    uint32_t slot_count;
    std::atomic<uint64_t> peak;
    std::atomic<uint64_t> reclaimed;
    std::atomic<uint32_t> generation;
    uint32_t unused;
};

struct Slot {
    std::atomic<uint64_t> held;
    std::atomic<int32_t> pid;  // for people reading the file; liveness is the slot's lock, never the pid
    std::atomic<uint32_t> in_use;
};

static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared counters must be lock-free");
static_assert(std::atomic<uint32_t>::is_always_lock_free, "shared counters must be lock-free");

constexpr size_t kFileBytes = sizeof(Header) + kSlots * sizeof(Slot);

// Serialises every budget change of this process (record locks do not exclude threads of one process).
// Held across fork() so that a child never inherits it locked. Its holder may wait on another process's record
// lock (held for a few counter updates): a fork() meanwhile waits as long.
ForkSafeMutex g_mutex;
// Guarded by g_mutex. Kept for the life of the process: closing any descriptor of a file drops every record
// lock this process holds on it, its slot's included, so a file is never closed and reopened.
auto* g_files = new std::map<std::string, std::shared_ptr<NodeBudget::File>>();

int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

constexpr const char* kNotABudgetFile = "is not a budget file of this version (remove it once no process uses it)";

[[noreturn]] void fail(const std::string& path, const std::string& what) {
    throw std::runtime_error("node memory budget " + path + ": " + what);
}

// A record lock of `type` on the one byte at `at`.
struct flock one_byte(short type, off_t at) {
    struct flock fl = {};
    fl.l_type = type;
    fl.l_whence = SEEK_SET;
    fl.l_start = at;
    fl.l_len = 1;
    return fl;
}

bool set_lock(int fd, off_t at, short type, bool wait) {
    struct flock fl = one_byte(type, at);
    while (fcntl(fd, wait ? F_SETLKW : F_SETLK, &fl) != 0) {
        if (errno != EINTR) return false;
    }
    return true;
}

// Whether another process holds the lock on byte `at` (our own locks never conflict with us).
bool locked_by_another(int fd, off_t at) {
    struct flock fl = one_byte(F_WRLCK, at);
    if (fcntl(fd, F_GETLK, &fl) != 0) return true;  // unknown: never reclaim on a failed look
    return fl.l_type != F_UNLCK;
}

off_t slot_byte(uint32_t slot) { return 1 + static_cast<off_t>(slot); }

}  // namespace

struct NodeBudget::File {
    std::string path;
    int fd = -1;
    void* map = nullptr;
    Header* header = nullptr;
    Slot* slots = nullptr;
    pid_t attached_pid = 0;  // the process that owns `slot`; another pid (a fork child) attaches anew
    uint32_t slot = 0;
    int64_t last_reclaim_ns = 0;

    // Only an open() that failed ends a file: see g_files.
    ~File() {
        if (map != nullptr) munmap(map, kFileBytes);
        if (fd >= 0) close(fd);
    }

    // Byte 0's lock, across processes; callers hold g_mutex.
    struct TableLock {
        explicit TableLock(const File& file) : fd(file.fd) {
            if (!set_lock(fd, 0, F_WRLCK, true)) fail(file.path, std::string("cannot lock: ") + strerror(errno));
        }
        ~TableLock() { set_lock(fd, 0, F_UNLCK, false); }
        int fd;
    };

    Slot& own() { return slots[slot]; }

    // Callers hold g_mutex and the table lock.
    void attach() {
        const pid_t pid = getpid();
        if (attached_pid == pid) return;
        for (uint32_t i = 0; i < kSlots; ++i) {
            Slot& s = slots[i];
            if (s.in_use.load() != 0) {
                if (locked_by_another(fd, slot_byte(i))) continue;
                reclaim(s);
            }
            if (!set_lock(fd, slot_byte(i), F_WRLCK, false)) continue;
            s.held.store(0);
            s.pid.store(pid);
            s.in_use.store(1);
            slot = i;
            attached_pid = pid;
            return;
        }
        fail(path, "all " + std::to_string(kSlots) + " slots are held by live processes");
    }

    void reclaim(Slot& s) {
        const uint64_t bytes = s.held.exchange(0);
        s.in_use.store(0);
        header->reclaimed.fetch_add(bytes);
        header->generation.fetch_add(1);  // its bytes and its reserve came back, even with nothing held
    }

    // Callers hold g_mutex and the table lock. True if a dead process's bytes came back.
    bool reclaim_dead_if_due() {
        const int64_t now = now_ns();
        if (now - last_reclaim_ns < kReclaimIntervalNs) return false;
        last_reclaim_ns = now;
        bool any = false;
        for (uint32_t i = 0; i < kSlots; ++i) {
            if (i == slot || slots[i].in_use.load() == 0 || locked_by_another(fd, slot_byte(i))) continue;
            any = true;  // its bytes, and the reserve kept for it, are free again
            reclaim(slots[i]);
        }
        return any;
    }

    uint64_t sum_held(uint32_t* attached = nullptr) const {
        uint64_t sum = 0;
        uint32_t count = 0;
        for (uint32_t i = 0; i < kSlots; ++i) {
            if (slots[i].in_use.load(std::memory_order_relaxed) != 0) {
                sum += slots[i].held.load();
                ++count;
            }
        }
        if (attached != nullptr) *attached = count;
        return sum;
    }

    // What a take that is not guaranteed could get: `limit` less what is in use (returned in `used`) and
    // `reserve` for each process attached.
    uint64_t free_bytes(uint64_t limit, uint64_t reserve, uint64_t* used) const {
        uint32_t attached = 0;
        *used = sum_held(&attached);
        const uint64_t kept = *used + reserve * attached;
        return limit > kept ? limit - kept : 0;
    }

    // Callers hold g_mutex. `grant(free)` says what to take of the free bytes (free_bytes).
    template <typename Grant>
    uint64_t take_with(uint64_t limit, uint64_t reserve, uint64_t want, Grant grant) {
        TableLock lock(*this);
        attach();
        uint64_t used = 0;
        uint64_t free = free_bytes(limit, reserve, &used);
        if (free < want && reclaim_dead_if_due()) free = free_bytes(limit, reserve, &used);
        const uint64_t taken = grant(free);
        if (taken != 0) {
            own().held.fetch_add(taken);
            const uint64_t now_used = used + taken;
            uint64_t peak = header->peak.load();
            while (now_used > peak && !header->peak.compare_exchange_weak(peak, now_used)) {
            }
        }
        return taken;
    }
};

std::shared_ptr<NodeBudget> NodeBudget::open(const std::string& path, uint64_t limit_bytes, uint64_t reserve_bytes) {
    std::lock_guard<ForkSafeMutex> guard(g_mutex);
    std::shared_ptr<File>& known = (*g_files)[path];
    if (known) return std::shared_ptr<NodeBudget>(new NodeBudget(known, limit_bytes, reserve_bytes));
    g_files->erase(path);  // a failed open below leaves no entry
    auto file = std::make_shared<File>();
    file->path = path;
    file->fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (file->fd < 0) fail(path, std::string("cannot open: ") + strerror(errno));
    {
        File::TableLock lock(*file);  // the first process to come sizes and stamps the file
        struct stat st = {};
        if (fstat(file->fd, &st) != 0) fail(path, std::string("cannot stat: ") + strerror(errno));
        const bool fresh = st.st_size == 0;
        if (fresh && ftruncate(file->fd, kFileBytes) != 0) {
            fail(path, std::string("cannot size: ") + strerror(errno));
        }
        if (!fresh && static_cast<size_t>(st.st_size) != kFileBytes) {
            fail(path, kNotABudgetFile);
        }
        file->map = mmap(nullptr, kFileBytes, PROT_READ | PROT_WRITE, MAP_SHARED, file->fd, 0);
        if (file->map == MAP_FAILED) {
            file->map = nullptr;
            fail(path, std::string("cannot map: ") + strerror(errno));
        }
        file->header = static_cast<Header*>(file->map);
        file->slots = reinterpret_cast<Slot*>(static_cast<char*>(file->map) + sizeof(Header));
        if (fresh) {
            file->header->magic = kMagic;
            file->header->version = kVersion;
            file->header->slot_count = kSlots;
        } else if (file->header->magic != kMagic || file->header->version != kVersion) {
            fail(path, kNotABudgetFile);
        }
    }
    (*g_files)[path] = file;
    return std::shared_ptr<NodeBudget>(new NodeBudget(file, limit_bytes, reserve_bytes));
}

const std::string& NodeBudget::path() const { return file_->path; }

uint64_t NodeBudget::take(uint64_t want, uint64_t guaranteed) {
    if (want == 0) return 0;
    if (guaranteed > want) guaranteed = want;
    std::lock_guard<ForkSafeMutex> guard(g_mutex);
    return file_->take_with(limit_, reserve_, want,
                            [&](uint64_t free) { return std::max(guaranteed, std::min(want, free)); });
}

bool NodeBudget::take_all_or_nothing(uint64_t bytes) {
    if (bytes == 0) return true;
    std::lock_guard<ForkSafeMutex> guard(g_mutex);
    return file_->take_with(limit_, reserve_, bytes, [&](uint64_t free) { return free >= bytes ? bytes : 0; }) != 0;
}

void NodeBudget::give(uint64_t bytes) {
    if (bytes == 0) return;
    std::lock_guard<ForkSafeMutex> guard(g_mutex);
    if (file_->attached_pid != getpid()) return;  // the parent's bytes, seen from a fork child: not ours
    Slot& own = file_->own();
    uint64_t held = own.held.load();
    while (!own.held.compare_exchange_weak(held, held - std::min(held, bytes))) {
    }
    file_->header->generation.fetch_add(1);
}

uint64_t NodeBudget::in_use() const { return file_->sum_held(); }

uint64_t NodeBudget::available() const {
    uint64_t used = 0;
    return file_->free_bytes(limit_, reserve_, &used);
}
uint64_t NodeBudget::peak() const { return file_->header->peak.load(); }
void NodeBudget::reset_peak() { file_->header->peak.store(file_->sum_held()); }
uint64_t NodeBudget::reclaimed() const { return file_->header->reclaimed.load(); }
uint32_t NodeBudget::generation() const { return file_->header->generation.load(); }

uint64_t NodeBudget::held_here() const {
    std::lock_guard<ForkSafeMutex> guard(g_mutex);
    return file_->attached_pid == getpid() ? file_->own().held.load() : 0;
}

uint64_t BudgetShare::grow_to(uint64_t want, uint64_t guaranteed) {
    if (!budget_) return held_;
    if (held_ != 0 && owner_ != getpid()) held_ = 0;  // the parent's share, seen from a fork child
    if (held_ >= want) return held_;
    if (refused_ && held_ >= guaranteed && budget_->generation() == refused_at_) return held_;
    refused_at_ = budget_->generation();
    held_ += budget_->take(want - held_, guaranteed > held_ ? guaranteed - held_ : 0);
    owner_ = getpid();
    refused_ = held_ < want;
    return held_;
}

void BudgetShare::shrink_to(uint64_t keep) {
    if (!budget_ || held_ <= keep) return;
    // A fork child's copy of its parent's share is the parent's to give back: dropped here, never given.
    if (owner_ == getpid()) budget_->give(held_ - keep);
    held_ = keep;
}

}  // namespace torchdata_s3
