// Byte helpers for text: UTF-8 validity as the C library's mbrtowc reads it in the
// current locale (grep's buf_has_encoding_errors), the one copy for the Searcher's output
// rule and the regex matchers; ASCII tests eight bytes at a time, byte counts sixteen.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <cwchar>
#include <string_view>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace gpufilter {

namespace detail {
inline std::uint64_t load8(const char* p) noexcept {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
constexpr std::uint64_t kHighBits = 0x8080808080808080ULL;
}  // namespace detail

// ASCII runs are skipped eight bytes at a time without a call.
inline bool valid_utf8(std::string_view text) {
  std::mbstate_t state{};
  for (std::size_t i = 0; i < text.size();) {
    if (i + 8 <= text.size() && (detail::load8(text.data() + i) & detail::kHighBits) == 0) {
      i += 8;
      continue;
    }
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    wchar_t wc;
    const std::size_t n = std::mbrtowc(&wc, text.data() + i, text.size() - i, &state);
    if (n == static_cast<std::size_t>(-1) || n == static_cast<std::size_t>(-2)) return false;
    i += n == 0 ? 1 : n;
  }
  return true;
}

// No byte of `text` is above 0x7f.
inline bool all_ascii(std::string_view text) noexcept {
  std::uint64_t any = 0;
  std::size_t i = 0;
  for (; i + 8 <= text.size(); i += 8) any |= detail::load8(text.data() + i);
  for (; i < text.size(); ++i) any |= static_cast<unsigned char>(text[i]);
  return (any & detail::kHighBits) == 0;
}

// The offset of the first byte of `text` above 0x7f (text.size(): none): with SSE2 (every
// x86-64) 64 bytes a step and the byte found from the step's mask, else 32 bytes a step.
// A line of a log in French holds one such byte every hundred bytes or so: the byte loop
// that found it in its step was a fifth of deciding `.` over such a log.
inline std::size_t first_beyond_ascii(std::string_view text) noexcept {
  std::size_t i = 0;
  const char* const data = text.data();
#if defined(__SSE2__)
  const auto mask16 = [data](std::size_t at) {
    return static_cast<unsigned>(_mm_movemask_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(data + at))));
  };
  for (; i + 64 <= text.size(); i += 64) {
    const auto* p = reinterpret_cast<const __m128i*>(data + i);
    const __m128i any = _mm_or_si128(_mm_or_si128(_mm_loadu_si128(p), _mm_loadu_si128(p + 1)),
                                     _mm_or_si128(_mm_loadu_si128(p + 2), _mm_loadu_si128(p + 3)));
    if (_mm_movemask_epi8(any) != 0) break;
  }
  for (; i + 16 <= text.size(); i += 16)
    if (const unsigned high = mask16(i); high != 0) return i + static_cast<std::size_t>(__builtin_ctz(high));
#else
  for (; i + 32 <= text.size(); i += 32) {
    const char* p = data + i;
    if (((detail::load8(p) | detail::load8(p + 8) | detail::load8(p + 16) | detail::load8(p + 24)) &
         detail::kHighBits) != 0)
      break;
  }
#endif
  for (; i < text.size(); ++i)
    if (static_cast<unsigned char>(data[i]) > 0x7f) return i;
  return text.size();
}

// The length of the longest prefix of `text` that is well-formed UTF-8 (RFC 3629: no
// overlong form, surrogate or code point past U+10FFFF), ASCII runs 32 bytes a step.
// What it takes, valid_utf8() takes in a UTF-8 locale; it may stop where glibc would not.
inline std::size_t well_formed_utf8_prefix(std::string_view text) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  for (std::size_t i = 0; (i += first_beyond_ascii(text.substr(i))) < n;) {
    const unsigned char c = p[i];
    std::size_t length = 2;
    unsigned char low = 0x80, high = 0xbf;  // the second byte's range
    if (c >= 0xe0 && c <= 0xef) {
      length = 3;
      if (c == 0xe0) low = 0xa0;
      if (c == 0xed) high = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      length = 4;
      if (c == 0xf0) low = 0x90;
      if (c == 0xf4) high = 0x8f;
    } else if (c < 0xc2 || c > 0xdf) {
      return i;
    }
    if (n - i < length || p[i + 1] < low || p[i + 1] > high) return i;
    for (std::size_t k = 2; k < length; ++k)
      if ((p[i + k] & 0xc0) != 0x80) return i;
    i += length;
  }
  return n;
}

// How many bytes of `text` are `byte` (-n's line numbers: a newline count of every byte
// read). With SSE2 (every x86-64), sixteen a step, each lane's count summed every 255
// steps: 250 MB in 10 ms here, against 66 ms for the eight-byte SWAR loop below, whose
// popcount is a call without -mpopcnt.
inline std::size_t count_byte(std::string_view text, char byte) noexcept {
  std::size_t n = 0, i = 0;
#if defined(__SSE2__)
  const __m128i pattern16 = _mm_set1_epi8(byte);
  while (i + 16 <= text.size()) {
    __m128i lanes = _mm_setzero_si128();  // each lane counts up to 255
    const std::size_t stop = std::min(text.size() - 15, i + 255 * 16);
    for (; i < stop; i += 16) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(text.data() + i));
      lanes = _mm_sub_epi8(lanes, _mm_cmpeq_epi8(v, pattern16));
    }
    const __m128i sums = _mm_sad_epu8(lanes, _mm_setzero_si128());
    n += static_cast<std::size_t>(_mm_cvtsi128_si64(sums)) +
         static_cast<std::size_t>(_mm_cvtsi128_si64(_mm_unpackhi_epi64(sums, sums)));
  }
#else
  const std::uint64_t pattern = 0x0101010101010101ULL * static_cast<unsigned char>(byte);
  constexpr std::uint64_t low7 = 0x7f7f7f7f7f7f7f7fULL;
  for (; i + 8 <= text.size(); i += 8) {
    const std::uint64_t v = detail::load8(text.data() + i) ^ pattern;  // zero bytes where equal
    const std::uint64_t zero = ~(((v & low7) + low7) | v | low7);       // high bit of each zero byte
    n += static_cast<std::size_t>(__builtin_popcountll(zero));
  }
#endif
  for (; i < text.size(); ++i) n += text[i] == byte;
  return n;
}

}  // namespace gpufilter
