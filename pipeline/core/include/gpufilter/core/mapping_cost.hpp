// Whether a file's cached pages are read faster through a mapping or through pread():
// measured on the file itself, on three pieces of it mapped afresh.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpufilter {

// True when touching the pages of a fresh mapping of `fd` costs less than copying them
// with read() would (1 us a 4 KiB page, 4 GB/s): the host engine then scans the file where
// it lies in the page cache (ChunkerConfig::mapping). Timed on the first, middle and last
// whole 2 MiB of its `size` bytes from `offset` (0.1-3 ms), each mapped afresh and touched
// once a page; false (read) where the file has no whole 2 MiB or the mapping fails.
//
// The answer depends on the machine and on the file. On the H200 machine's host mapping
// won (docs/PERFORMANCE.md). On a virtual machine with shadow page tables (this project's
// 2-core one) each page a process first touches traps, and a mapping of a file whose page
// cache lies in 4 KiB pages faults once a page: scanned at 0.4-0.5x of reading it. A file
// just written in large writes lies in large folios there, a whole 2 MiB of it mapped by
// one fault, and scanned mapped at 1.5-2.5x of reading it: both on one machine.
bool mapping_beats_reading(int fd, std::uint64_t offset, std::size_t size) noexcept;

}  // namespace gpufilter
