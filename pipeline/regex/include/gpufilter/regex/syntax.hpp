// How a run's patterns are read: grep's -F, -G (the default), -E and -P.
#pragma once

namespace gpufilter::regex {

enum class Syntax {
  kFixed,     // -F: every pattern is a string of bytes
  kBasic,     // -G: POSIX basic regular expressions as GNU grep reads them
  kExtended,  // -E: POSIX extended regular expressions as GNU grep reads them
  kPerl,      // -P: Perl-compatible regular expressions (PCRE2), one pattern
};

// In a UTF-8 locale grep's -i folds these ASCII letters to characters beyond ASCII as well
// (dfa.c's case_folded_counterparts: 's' to U+017F LONG S, 'i' to U+0131 DOTLESS I; not
// 'k', whose U+212A KELVIN SIGN is no counterpart there). A pattern byte for which this
// holds cannot be matched (or prefiltered) by ASCII folding alone.
constexpr bool folds_beyond_ascii(unsigned char c) noexcept { return c == 's' || c == 'S' || c == 'i' || c == 'I'; }

// The same for any reader of the pattern, PCRE2 included, whose caseless 'k' also matches
// U+212A: where a prefilter must hold for every syntax.
constexpr bool folds_beyond_ascii_any_syntax(unsigned char c) noexcept {
  return folds_beyond_ascii(c) || c == 'k' || c == 'K';
}

}  // namespace gpufilter::regex
