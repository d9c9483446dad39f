#include "gpufilter/core/slot_memory.hpp"

#include <sys/mman.h>

#include <new>

namespace gpufilter {

SlotMemory slot_memory(std::size_t bytes, bool huge_pages) {
  constexpr std::size_t kHugePage = std::size_t{2} << 20;
  void* p = nullptr;
  if (huge_pages && bytes >= kHugePage) {
    const std::size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    p = std::aligned_alloc(kHugePage, rounded);
    if (p != nullptr) (void)::madvise(p, rounded, MADV_HUGEPAGE);  // advice only: 4 KiB pages where refused
  } else {
    p = std::malloc(bytes == 0 ? 1 : bytes);
  }
  if (p == nullptr) throw std::bad_alloc();
  return SlotMemory(static_cast<char*>(p));
}

}  // namespace gpufilter
