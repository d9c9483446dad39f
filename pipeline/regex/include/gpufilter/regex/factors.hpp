// Required factors: the literals that a regular expression cannot match without. The GPU
// (or the host literal engine) looks for them; only lines holding one become candidates
// for the regex engine on the host (the prefilter of the engine layer, docs/REGEX.md).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpufilter/regex/syntax.hpp"

namespace gpufilter::regex {

struct FactorOptions {
  bool ignore_case = false;  // -i: the literal engine will fold ASCII case when it scans
  bool utf8 = false;         // the locale's character set is UTF-8
  // Every literal of the answer is at least this long; a shorter one filters too little.
  std::size_t min_length = 2;
  // Of the sets found, the one with the fewest literals (then the longest shortest one),
  // for a check made with memchr/find per literal; by default the one whose shortest
  // literal is longest (a literal engine scans for every literal at once).
  bool fewest = false;
};

// A set of literals, one of which every match of `pattern` contains (an OR-set): any string
// that `pattern` matches (under `syntax`, as GNU grep 3.8 and PCRE2 read it) contains at
// least one of them as a substring, compared with ASCII case folded when ignore_case.
// nullopt when no such set was found (".*", "[0-9]+$", a construct not understood): the
// caller then scans every line with the regex engine. Never wrong, only sometimes absent:
// when unsure it answers nullopt. `pattern` has already compiled without error.
std::optional<std::vector<std::string>> required_factors(std::string_view pattern, Syntax syntax,
                                                         const FactorOptions& options);

}  // namespace gpufilter::regex
