// Whether this machine reads a file's cached pages faster through a mapping or through
// read(): asked once per process, measured on the running binary's own file.
#pragma once

namespace gpufilter {

// True when touching the pages of a fresh mapping costs less than copying the same bytes
// with pread: the host engine then scans a regular file where it lies in the page cache
// (ChunkerConfig::map_file). On the H200 machine's host the mapping won (docs/
// PERFORMANCE.md); on a virtual machine with shadow page tables each 4 KiB page first
// touched costs a trap, and scanning a mapping ran at 0.4x of reading the file (512 KiB:
// about 170 us mapped against 23 us read). True when it cannot be measured.
bool mapping_beats_reading() noexcept;

}  // namespace gpufilter
