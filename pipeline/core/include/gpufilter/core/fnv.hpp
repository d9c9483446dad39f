// FNV-1a, 64 bit: the checksum of a followed file's head (sources/follow_state) and of a
// cached Hyperscan database (hs_cache), where a byte loop is fast enough.
#pragma once

#include <cstdint>
#include <string_view>

namespace gpufilter {

// Continuing from `hash` (the offset basis starts a new one).
inline constexpr std::uint64_t kFnvOffsetBasis = 0xcbf29ce484222325ULL;
inline std::uint64_t fnv1a64(std::string_view bytes, std::uint64_t hash = kFnvOffsetBasis) noexcept {
  for (const char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

}  // namespace gpufilter
