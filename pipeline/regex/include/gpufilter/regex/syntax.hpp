// How a run's patterns are read: grep's -F, -G (the default), -E and -P.
#pragma once

namespace gpufilter::regex {

enum class Syntax {
  kFixed,     // -F: every pattern is a string of bytes
  kBasic,     // -G: POSIX basic regular expressions as GNU grep reads them
  kExtended,  // -E: POSIX extended regular expressions as GNU grep reads them
  kPerl,      // -P: Perl-compatible regular expressions (PCRE2), one pattern
};

}  // namespace gpufilter::regex
