#include "one_literal.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

namespace gpufilter {
namespace {

// How common a byte is in logs, roughly (higher: more common): the pair compared is made
// of the two rarest, so that few positions need a memcmp.
int commonness(unsigned char b) noexcept {
  static constexpr std::string_view kLower = "etaoinsrhldcumfpgwybvkxjqz";  // English order
  static constexpr std::string_view kUpper = "ETAOINSRHLDCUMFPGWYBVKXJQZ";
  if (b == ' ') return 255;
  if (const std::size_t i = kLower.find(static_cast<char>(b)); i != std::string_view::npos)
    return 240 - static_cast<int>(i) * 5;
  if (b >= '0' && b <= '9') return 200 - (b - '0');
  if (std::strchr(".:-/=_,[]()'\"", b) != nullptr && b != 0) return 150;
  if (const std::size_t i = kUpper.find(static_cast<char>(b)); i != std::string_view::npos)
    return 120 - static_cast<int>(i) * 3;
  if (b == '\t') return 60;
  if (b >= 0x20 && b < 0x7f) return 40;  // other punctuation
  return b >= 0x80 ? 20 : 1;             // UTF-8 bytes; control bytes
}

__attribute__((target("avx2"))) bool scan_avx2(const std::string& literal, std::size_t first, std::size_t second,
                                                const char* data, std::size_t size, OneLiteral::Report report,
                                                void* context) noexcept {
  const std::size_t length = literal.size();
  if (size < length) return false;
  const std::size_t last_start = size - length;  // the last position an occurrence may start at
  const __m256i a = _mm256_set1_epi8(literal[first]);
  const __m256i b = _mm256_set1_epi8(literal[second]);
  std::size_t at = 0;
  // Blocks of 32 starting positions whose two loads stay inside data.
  for (; at + 32 <= last_start + 1; at += 32) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(data + at + first));
    const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(data + at + second));
    auto mask = static_cast<unsigned>(_mm256_movemask_epi8(
        _mm256_and_si256(_mm256_cmpeq_epi8(x, a), _mm256_cmpeq_epi8(y, b))));
    while (mask != 0) {
      const std::size_t start = at + static_cast<std::size_t>(__builtin_ctz(mask));
      mask &= mask - 1;
      if (std::memcmp(data + start, literal.data(), length) == 0 &&
          report(0, 0, start + length, 0, context) != 0)
        return true;
    }
  }
  for (; at <= last_start; ++at) {
    if (data[at + first] == literal[first] && data[at + second] == literal[second] &&
        std::memcmp(data + at, literal.data(), length) == 0 && report(0, 0, at + length, 0, context) != 0)
      return true;
  }
  return false;
}

}  // namespace

bool OneLiteral::usable() noexcept {
  __builtin_cpu_init();  // (needed only before main(), harmless after)
  return __builtin_cpu_supports("avx2");
}

OneLiteral::OneLiteral(std::string_view literal) : literal_(literal) {
  // The rarest byte, then the rarest at another offset (a repeated byte is as good).
  const auto rank = [&](std::size_t i) { return commonness(static_cast<unsigned char>(literal_[i])); };
  for (std::size_t i = 1; i < literal_.size(); ++i)
    if (rank(i) < rank(first_)) first_ = i;
  second_ = first_;
  for (std::size_t i = 0; i < literal_.size(); ++i)
    if (i != first_ && (second_ == first_ || rank(i) < rank(second_))) second_ = i;
}

bool OneLiteral::scan(const char* data, std::size_t size, Report report, void* context) const noexcept {
  if (literal_.empty()) return false;
  return scan_avx2(literal_, first_, second_, data, size, report, context);
}

}  // namespace gpufilter
