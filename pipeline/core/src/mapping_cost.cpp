#include "gpufilter/core/mapping_cost.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

namespace gpufilter {
namespace {

using Clock = std::chrono::steady_clock;

double micros_since(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

}  // namespace

bool mapping_beats_reading(int fd, std::uint64_t offset, std::size_t size) noexcept {
  constexpr std::uint64_t kProbe = std::uint64_t{2} << 20;  // a huge page's worth
  // A copy by read() costs about 1 us a 4 KiB page at 4 GB/s; the machines measured
  // read 5-20 GB/s from the page cache.
  constexpr double kMicrosPerPage = 1.0;
  const std::uint64_t from = (offset + kProbe - 1) / kProbe * kProbe;
  if (offset + size < from + kProbe) return false;  // too small to tell: read
  const long page = ::sysconf(_SC_PAGESIZE);
  if (page <= 0) return false;
  void* p = ::mmap(nullptr, kProbe, PROT_READ, MAP_PRIVATE, fd, static_cast<off_t>(from));
  if (p == MAP_FAILED) return false;
  const Clock::time_point start = Clock::now();
  unsigned sum = 0;
  for (std::uint64_t at = 0; at < kProbe; at += static_cast<std::uint64_t>(page))
    sum += static_cast<const volatile unsigned char*>(p)[at];
  const double touched = micros_since(start);
  ::munmap(p, kProbe);
  static_cast<void>(sum);
  return touched <= kMicrosPerPage * static_cast<double>(kProbe / static_cast<std::uint64_t>(page));
}

}  // namespace gpufilter
