#include "patterns_mode.hpp"

#include <langinfo.h>

#include <clocale>
#include <cstdlib>
#include <cstring>
#include <functional>

namespace gpufilter::cli {
namespace {

// A fixed string as a BRE that matches exactly it.
std::string escaped(const std::string& literal) {
  std::string out;
  for (char c : literal) {
    if (std::strchr("\\[.*^$", c) != nullptr && c != '\0') out += '\\';
    out += c;
  }
  return out;
}

// -F in a UTF-8 locale where bytes are not characters: -w must see multibyte letters as
// word characters, and -i must fold non-ASCII letters (and 'k', 's', which fold to
// U+212A and U+017F). The regex path does both, as grep does.
bool fixed_needs_characters(const Options& o, bool utf8) {
  if (!utf8) return false;
  if (o.word) return true;
  if (!o.ignore_case) return false;
  for (const std::string& p : o.patterns.patterns())
    for (unsigned char c : p)
      if (c >= 0x80 || c == 'k' || c == 'K' || c == 's' || c == 'S') return true;
  return false;
}

}  // namespace

bool utf8_locale() {
  const char* codeset = ::nl_langinfo(CODESET);
  return MB_CUR_MAX > 1 && codeset != nullptr && std::strcmp(codeset, "UTF-8") == 0;
}

std::unique_ptr<RegexLines> regex_lines_for(Options& o, bool utf8,
                                            const std::function<void(const std::string&)>& warn) {
  std::vector<std::string> patterns = o.patterns.patterns();
  regex::Syntax syntax = o.syntax;
  if (syntax != regex::Syntax::kPerl) {
    std::vector<std::string> fixed;
    if (regex::as_fixed_strings(patterns, syntax, o.ignore_case, utf8, fixed)) {
      PatternSet literals;
      for (const std::string& f : fixed) literals.add(f);
      o.patterns = std::move(literals);
      o.syntax = regex::Syntax::kFixed;
      if (!fixed_needs_characters(o, utf8)) return nullptr;
      patterns.clear();
      for (const std::string& f : fixed) patterns.push_back(escaped(f));
      syntax = regex::Syntax::kBasic;
    }
  }
  regex::RegexOptions options;
  options.syntax = syntax;
  options.ignore_case = o.ignore_case;
  options.word = o.word;
  options.whole_line = o.whole_line;
  options.utf8 = utf8;
  auto compiled = regex::compile(patterns, options, o.origins);
  for (const std::string& w : regex::warnings(patterns, syntax)) warn(w);
  return std::make_unique<RegexLines>(std::move(compiled), patterns, syntax, o.ignore_case, utf8);
}

}  // namespace gpufilter::cli
