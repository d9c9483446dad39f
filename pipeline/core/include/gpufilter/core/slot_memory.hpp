// The bytes of a scan slot, where a chunk is read before it is scanned.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>

namespace gpufilter {

struct SlotMemoryFree {
  void operator()(char* p) const noexcept { std::free(p); }
};
using SlotMemory = std::unique_ptr<char[], SlotMemoryFree>;

// `bytes` of memory, uninitialised. With `huge_pages`, from 2 MiB on, aligned to 2 MiB and
// asked for in transparent huge pages (madvise), so that the first fill of a 4 MiB slot
// costs two page faults, not a thousand (a pipe's 512 MB went through ten fresh slots:
// 10,541 faults, a sixth of the run's time on a virtual machine). Without, for slots that
// small files touch only the start of (a huge page is zeroed whole at its first touch).
// Throws std::bad_alloc.
SlotMemory slot_memory(std::size_t bytes, bool huge_pages);

}  // namespace gpufilter
