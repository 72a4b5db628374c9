#include "fresh_memory.h"

#include <sys/mman.h>

#include <cstdint>

namespace torchdata_s3 {

void prefer_huge_pages(void* data, size_t size) {
    constexpr uintptr_t huge_page = 2u << 20;
    const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + huge_page - 1) & ~(huge_page - 1);
    const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + size) & ~(huge_page - 1);
    if (end <= begin) return;
    // Measured on this project's 2-core VM (8 x 64 MiB, read() of each object): 1.17 s of CPU per GB
    // without, 0.80 with; read_chunk(), which copies nothing, takes 0.45.
    madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

}  // namespace torchdata_s3
