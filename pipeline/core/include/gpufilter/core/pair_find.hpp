// PairFind: the first occurrence of one literal in a short text (a log line), found as
// ripgrep's memchr crate finds one (its "packed pair"): the two bytes of the literal that
// are least common in logs compared at 16 positions at once (SSE2), each position where
// both agree confirmed with memcmp. glibc's memmem() sets up a hash of the needle in every
// call, which a line of 100-200 bytes does not repay: the template set's chains of
// literals (LiteralChains) spent a fifth of their run in it.
#pragma once

#include <cstddef>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace gpufilter {

// How common a byte is in logs, roughly (higher: more common).
inline int byte_commonness(unsigned char b) noexcept {
  constexpr std::string_view kLower = "etaoinsrhldcumfpgwybvkxjqz";  // English order
  constexpr std::string_view kUpper = "ETAOINSRHLDCUMFPGWYBVKXJQZ";
  if (b == ' ') return 255;
  if (const std::size_t i = kLower.find(static_cast<char>(b)); i != std::string_view::npos)
    return 240 - static_cast<int>(i) * 5;
  if (b >= '0' && b <= '9') return 200 - (b - '0');
  if (b != 0 && std::strchr(".:-/=_,[]()'\"", b) != nullptr) return 150;
  if (const std::size_t i = kUpper.find(static_cast<char>(b)); i != std::string_view::npos)
    return 120 - static_cast<int>(i) * 3;
  if (b == '\t') return 60;
  if (b >= 0x20 && b < 0x7f) return 40;  // other punctuation
  return b >= 0x80 ? 20 : 1;             // UTF-8 bytes; control bytes
}

// The offsets of the two bytes of `literal` to compare: the rarest, then the rarest at
// another offset (equal for a literal of one byte).
inline void rarest_pair(std::string_view literal, std::size_t& first, std::size_t& second) noexcept {
  const auto rank = [&](std::size_t i) { return byte_commonness(static_cast<unsigned char>(literal[i])); };
  first = 0;
  for (std::size_t i = 1; i < literal.size(); ++i)
    if (rank(i) < rank(first)) first = i;
  second = first;
  for (std::size_t i = 0; i < literal.size(); ++i)
    if (i != first && (second == first || rank(i) < rank(second))) second = i;
}

class PairFind {
 public:
  PairFind() = default;
  explicit PairFind(std::string literal) : literal_(std::move(literal)) { rarest_pair(literal_, first_, second_); }

  const std::string& literal() const noexcept { return literal_; }

  // The first occurrence of the literal in [at, end), or null. An empty literal is found at
  // `at`.
  const char* find(const char* at, const char* end) const noexcept {
    const std::size_t length = literal_.size();
    if (static_cast<std::size_t>(end - at) < length) return nullptr;
    if (length == 0) return at;
    const char* const last_start = end - length;  // the last place an occurrence may start
    const char a = literal_[first_], b = literal_[second_];
#if defined(__SSE2__)
    const __m128i va = _mm_set1_epi8(a), vb = _mm_set1_epi8(b);
    // Blocks of 16 starts whose two loads stay inside the text.
    for (; last_start - at >= 15; at += 16) {
      const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(at + first_));
      const __m128i y = _mm_loadu_si128(reinterpret_cast<const __m128i*>(at + second_));
      auto mask = static_cast<unsigned>(_mm_movemask_epi8(_mm_and_si128(_mm_cmpeq_epi8(x, va), _mm_cmpeq_epi8(y, vb))));
      while (mask != 0) {
        const char* start = at + __builtin_ctz(mask);
        if (std::memcmp(start, literal_.data(), length) == 0) return start;
        mask &= mask - 1;
      }
    }
#endif
    for (; at <= last_start; ++at)
      if (at[first_] == a && at[second_] == b && std::memcmp(at, literal_.data(), length) == 0) return at;
    return nullptr;
  }

 private:
  std::string literal_;
  std::size_t first_ = 0, second_ = 0;
};

}  // namespace gpufilter
