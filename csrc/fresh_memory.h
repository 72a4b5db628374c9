// Preparing freshly allocated memory that is about to be filled (a whole object's bytes).
#pragma once

#include <cstddef>

namespace torchdata_s3 {

// Asks the kernel to back [data, data + size) with huge pages where the range allows (2 MiB-aligned
// spans). A large result buffer is fresh memory from mmap: filling it page by page costs a fault per 4 KiB,
// which in a virtual machine costs more than copying the page. Never fails: it is advice.
void prefer_huge_pages(void* data, size_t size);

}  // namespace torchdata_s3
