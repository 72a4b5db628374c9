// Large `bytes` results kept, once their reader let go of them, for the next result of a similar size: the
// blocks of pieces read in order (scattered_results.h) and read() results alike.
//
// A fresh result is fresh memory: the kernel zeroes every page of it on first touch, on the thread the socket's
// bytes are written from. Fresh 1 MiB blocks cost a page fault per 4 KiB received (glibc hands chunks freed in a
// stream's order back to the kernel): about 235,000 faults per GiB, which took read(1 MiB) from 0.39 to 0.95 CPU
// s/GB. Reading 64 MiB objects whole, a process's first pass spent 29% of its samples in clear_page_erms; with the
// last results reused, its CPU per GB went 0.91-0.99 -> 0.50-0.58 (later passes 0.50-0.65 -> 0.38-0.42; 3
// interleaved runs, fast endpoint, 2026-11-27). A `bytes` is reused only while this process-wide pool holds its
// sole reference (no memoryview, numpy array or slice of it survives anywhere), and only for a result that fills
// at least half of it: it is shortened in place.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>

namespace torchdata_s3 {

namespace py = pybind11;

// The smallest result kept (the smallest block scattered_results.h plans). Smaller ones come back from the
// allocator's own free lists without fresh pages.
constexpr uint64_t kMinKeptResultBytes = 256 * 1024;
// The most kept at once, the oldest let go first: a read window of 1 MiB blocks twice over, or the last two
// results of 64 MiB objects read whole (a reader's loop still holds the one before when it reads the next).
constexpr uint64_t kKeptResultsBytes = 128ull << 20;

// A `bytes` of `size` bytes to receive into (GIL held): a recently kept one nobody else holds, shortened in place,
// or a new one. `*capacity`: the bytes its memory can hold, for keep_result().
py::object result_for(uint64_t size, uint64_t* capacity);

// Keeps `result` (of memory for `capacity` bytes, as result_for() said) for a later result_for() once nobody
// else holds it (GIL held). Results under kMinKeptResultBytes, or over kKeptResultsBytes, are not kept.
void keep_result(const py::object& result, uint64_t capacity);

// How many results result_for() reused, process-wide (tests read it: nothing else can tell a reused result).
uint64_t results_reused();

}  // namespace torchdata_s3
