#include "one_literal.hpp"

#include <immintrin.h>

#include "gpufilter/core/pair_find.hpp"

#include <cstring>

namespace gpufilter {
namespace {

// The first start after an occurrence at `start` that the caller does not drop (see
// OneLiteral::scan): past every occurrence that would end by *drops_until.
std::size_t resume_after(std::size_t start, std::size_t length, const unsigned long long* drops_until) noexcept {
  if (drops_until == nullptr || *drops_until < start + length + 1) return start + 1;
  return static_cast<std::size_t>(*drops_until) - length + 1;
}

constexpr std::size_t kStopped = ~std::size_t{0};

// The candidates of the block of 32 starts at `at` (`mask`, a bit each): each confirmed and
// reported. Returns where the scan goes on (kStopped: report stopped it). Out of line, so
// that the loop over blocks keeps its registers.
__attribute__((noinline)) std::size_t block_matches(unsigned mask, std::size_t at, const std::string& literal,
                                                    const char* data, OneLiteral::Report report, void* context,
                                                    const unsigned long long* drops_until) noexcept {
  const std::size_t length = literal.size();
  while (mask != 0) {
    const std::size_t start = at + static_cast<std::size_t>(__builtin_ctz(mask));
    mask &= mask - 1;
    if (std::memcmp(data + start, literal.data(), length) != 0) continue;
    if (report(0, 0, start + length, 0, context) != 0) return kStopped;
    if (drops_until == nullptr) continue;
    const std::size_t resume = resume_after(start, length, drops_until);
    if (resume >= at + 32) return resume;
    mask &= ~0u << (resume - at);
  }
  return at + 32;
}

__attribute__((target("avx2"))) bool scan_avx2(const std::string& literal, std::size_t first, std::size_t second,
                                                const char* data, std::size_t size, OneLiteral::Report report,
                                                void* context, const unsigned long long* drops_until) noexcept {
  const std::size_t length = literal.size();
  if (size < length) return false;
  const std::size_t last_start = size - length;  // the last position an occurrence may start at
  const __m256i a = _mm256_set1_epi8(literal[first]);
  const __m256i b = _mm256_set1_epi8(literal[second]);
  std::size_t at = 0;
  // Blocks of 32 starting positions whose two loads stay inside data.
  while (at + 32 <= last_start + 1) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(data + at + first));
    const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(data + at + second));
    const auto mask = static_cast<unsigned>(_mm256_movemask_epi8(
        _mm256_and_si256(_mm256_cmpeq_epi8(x, a), _mm256_cmpeq_epi8(y, b))));
    if (mask == 0) {
      at += 32;
      continue;
    }
    at = block_matches(mask, at, literal, data, report, context, drops_until);
    if (at == kStopped) return true;
  }
  // The last starts (fewer than 32), their candidates found one by one.
  unsigned mask = 0;
  for (std::size_t i = at; i <= last_start; ++i)
    if (data[i + first] == literal[first] && data[i + second] == literal[second]) mask |= 1u << (i - at);
  return mask != 0 && block_matches(mask, at, literal, data, report, context, drops_until) == kStopped;
}

}  // namespace

bool OneLiteral::usable() noexcept {
  __builtin_cpu_init();  // (needed only before main(), harmless after)
  return __builtin_cpu_supports("avx2");
}

OneLiteral::OneLiteral(std::string_view literal) : literal_(literal) {
  rarest_pair(literal_, first_, second_);
}

bool OneLiteral::scan(const char* data, std::size_t size, Report report, void* context,
                      const unsigned long long* drops_until) const noexcept {
  if (literal_.empty()) return false;
  return scan_avx2(literal_, first_, second_, data, size, report, context, drops_until);
}

}  // namespace gpufilter
