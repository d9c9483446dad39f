// regex_fuzz: grep's regular expressions on untrusted pattern bytes.
//
// Input: one flags byte, then a pattern, a NUL byte, then lines to match (split on '\n').
//   flags bits 0-1: syntax (-G, -E, -P, -G)   bit 2: -i   bit 3: -w   bit 4: -x
// The pattern goes through the real path: regex::compile (glibc with grep's syntax bits,
// PCRE2, dfa_view's rewrite and its Hyperscan text) and regex::required_factors. A
// RegexError is an expected answer, and so is a MatchError while matching (PCRE2 past its
// backtracking limit: grep -P dies there too, "exceeded PCRE's backtracking limit", exit
// 2). Checked, for every line:
//  * selects_any (Hyperscan where dfa_view translated the pattern, else glibc/PCRE2)
//    agrees with selects() (glibc's or PCRE2's own reading);
//  * a selected line holds one of the pattern's required factors (the prefilter's promise:
//    never wrong, only sometimes absent);
//  * grep's -o walk (find from each end) terminates and yields spans inside the line.
#include <algorithm>
#include <clocale>
#include <cstdio>
#include <memory>
#include <optional>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gpufilter/core/errors.hpp"
#include "gpufilter/regex/factors.hpp"
#include "gpufilter/regex/line_regex.hpp"

#include "fuzz_support.hpp"

namespace {

using namespace gpufilter;
using namespace gpufilter::regex;

[[noreturn]] void fuzz_fail(const char* what) {
  std::fprintf(stderr, "regex_fuzz: %s\n", what);
  __builtin_trap();
}

bool holds_factor(std::string_view line, const std::vector<std::string>& factors, bool ignore_case) {
  auto fold = [&](char c) { return ignore_case && c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; };
  for (const std::string& f : factors) {
    if (f.size() > line.size()) continue;
    for (std::size_t at = 0; at + f.size() <= line.size(); ++at) {
      std::size_t k = 0;
      while (k < f.size() && fold(line[at + k]) == fold(f[k])) ++k;
      if (k == f.size()) return true;
    }
  }
  return false;
}

// `compare`: selects_any (Hyperscan) must agree with selects (glibc). Not with -i and a
// bracket: glibc folds the line's case before it compares with a range, grep's DFA adds
// both cases of the range ('Q' is in [0-c] for grep -i in the C locale, not for glibc),
// and Hyperscan gives grep's answer there (tests/cli differential tests hold it to grep).
void check_line(LineRegex& r, std::string_view line, const std::optional<std::vector<std::string>>& factors,
                const RegexOptions& o, bool compare) {
  const std::vector<std::uint32_t> all{0};
  const bool own = r.selects(0, line);
  const bool any = r.selects_any(line, all, nullptr);
  if (compare && own != any) fuzz_fail("Hyperscan and the regex engine disagree on a line");
  if (own && factors && !o.word && !o.whole_line && !holds_factor(line, *factors, o.ignore_case))
    fuzz_fail("a selected line holds none of the required factors");
  std::size_t from = 0, steps = 0;
  Found f;
  while (from <= line.size() && r.find(line, from, {}, f)) {
    if (f.begin > line.size() || f.begin < from) fuzz_fail("a match outside the searched part of the line");
    from = f.length == 0 ? f.begin + 1 : f.begin + f.length;
    if (++steps > line.size() + 2) fuzz_fail("the -o walk does not advance");
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  std::setlocale(LC_ALL, "C");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2 || size > 4096) return 0;
  const std::uint8_t flags = data[0];
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::size_t nul = rest.find('\0');
  const std::string pattern(rest.substr(0, nul == std::string_view::npos ? rest.size() : nul));
  const std::string_view text = nul == std::string_view::npos ? std::string_view() : rest.substr(nul + 1);
  if (pattern.find('\n') != std::string::npos) return 0;  // the pattern list splits on newlines first
  RegexOptions o;
  const Syntax syntaxes[] = {Syntax::kBasic, Syntax::kExtended, Syntax::kPerl, Syntax::kBasic};
  o.syntax = syntaxes[flags & 3];
  o.ignore_case = flags & 4;
  o.word = flags & 8;
  o.whole_line = flags & 16;
  std::unique_ptr<LineRegex> r;
  try {
    r = compile({pattern}, o);
  } catch (const RegexError&) {
    return 0;
  }
  FactorOptions fo;
  fo.ignore_case = o.ignore_case;
  fo.min_length = 1;
  const auto factors = required_factors(pattern, o.syntax, fo);
  std::size_t begin = 0;
  try {
    while (begin <= text.size()) {
      const std::size_t end = std::min(text.find('\n', begin), text.size());
      check_line(*r, text.substr(begin, end - begin), factors, o,
                 !(o.ignore_case && pattern.find('[') != std::string::npos));
      begin = end + 1;
    }
  } catch (const MatchError&) {
    return 0;
  }
  return 0;
}
