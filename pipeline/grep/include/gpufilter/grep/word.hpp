// grep's -w and -x rule for a literal occurrence, the one copy that every consumer of
// occurrences applies (the Searcher, gpufilterd's rules, packets and flows).
#pragma once

#include <cstddef>
#include <string_view>

#include "gpufilter/regex/line_regex.hpp"

namespace gpufilter {

// Word constituents in the C locale, as grep -w sees them: letters, digits and '_'.
constexpr bool is_word_byte(unsigned char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// -w: no word constituent touches either end of line[begin, end). With `utf8` (grep's
// fixed-string matcher in a UTF-8 locale) a multibyte letter or digit is one too.
inline bool is_whole_word(std::string_view line, std::size_t begin, std::size_t end, bool utf8 = false) {
  if (utf8) return !regex::word_before(line, begin, true) && !regex::word_after(line, end, true);
  if (begin > 0 && is_word_byte(static_cast<unsigned char>(line[begin - 1]))) return false;
  if (end < line.size() && is_word_byte(static_cast<unsigned char>(line[end]))) return false;
  return true;
}

// -x: the occurrence is the whole line (or record).
constexpr bool is_whole_line(std::string_view line, std::size_t begin, std::size_t end) noexcept {
  return begin == 0 && end == line.size();
}

// Whether an occurrence of line[begin, end) counts under -x (`whole_line`, which wins) or
// -w (`word`; `utf8` as is_whole_word()).
inline bool occurrence_counts(std::string_view line, std::size_t begin, std::size_t end, bool word, bool whole_line,
                              bool utf8 = false) {
  if (whole_line) return is_whole_line(line, begin, end);
  return !word || is_whole_word(line, begin, end, utf8);
}

}  // namespace gpufilter
