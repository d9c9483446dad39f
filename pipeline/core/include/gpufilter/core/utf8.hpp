// UTF-8 validity as the C library's mbrtowc reads it in the current locale (grep's
// buf_has_encoding_errors): the one copy for the Searcher's output rule and the regex
// matchers.
#pragma once

#include <cstddef>
#include <cwchar>
#include <string_view>

namespace gpufilter {

// ASCII runs are skipped a byte at a time without a call.
inline bool valid_utf8(std::string_view text) {
  std::mbstate_t state{};
  for (std::size_t i = 0; i < text.size();) {
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
  unsigned char any = 0;
  for (char c : text) any |= static_cast<unsigned char>(c);
  return any < 0x80;
}

}  // namespace gpufilter
