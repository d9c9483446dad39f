// How this run reads its patterns: as fixed strings (the literal path, every engine), or
// as grep's regular expressions behind a literal prefilter (RegexLines). The one place
// that decides it.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "gpufilter/cli/options.hpp"
#include "gpufilter/grep/regex_lines.hpp"

namespace gpufilter::cli {

// The locale's character set is UTF-8 (LC_ALL, LC_CTYPE, LANG, as setlocale reads them).
bool utf8_locale();

// `o` holds one distinct pattern, however often given: grep then keeps -G/-E (and, in a
// single-byte locale, -F -w) on its regex matcher (grep.c, fgrep_to_grep_pattern).
bool one_distinct_pattern(const Options& o);

// Decides fixed strings or regexes for `o` (after -f, -X and --escapes were read). Fixed:
// returns nullptr and leaves o.patterns as the literals to scan for (-G/-E patterns
// without an operator become fixed strings, as grep makes them). Regexes: compiles them
// (RegexError with grep's messages when some do not compile) and returns the matcher,
// whose factors() are what the engines scan for. `warn` receives grep's warnings.
std::unique_ptr<RegexLines> regex_lines_for(Options& o, bool utf8, const std::function<void(const std::string&)>& warn);

}  // namespace gpufilter::cli
