#include "literal_chains.hpp"

#include "gpufilter/core/utf8.hpp"
#include "regex_internal.hpp"

#include <algorithm>
#include <cstring>

namespace gpufilter::regex {
namespace {


// A printable ASCII byte that is neither a letter nor a digit: escaped, it stands for
// itself in PCRE's syntax (the locale plays no part, as in Hyperscan's parser).
bool ascii_sign(char c) noexcept {
  return c >= ' ' && c <= '~' && !(c >= '0' && c <= '9') && !(c >= 'a' && c <= 'z') && !(c >= 'A' && c <= 'Z');
}

// A byte that stands for itself in Hyperscan's (PCRE's) syntax outside brackets.
bool plain(char c) noexcept { return c != '\0' && std::strchr("\\^$.[]|()?*+{}", c) == nullptr; }

}  // namespace

bool LiteralChains::parse(const std::string& e, bool utf8, std::vector<std::string>& literals) {
  literals.clear();
  std::string run;
  for (std::size_t i = 0; i < e.size();) {
    const char c = e[i];
    if (c == '\\') {
      if (i + 1 >= e.size()) return false;
      const char next = e[i + 1];
      if (next == 'x' && i + 3 < e.size() && hex_digit(e[i + 2]) >= 0 && hex_digit(e[i + 3]) >= 0) {
        const int value = hex_digit(e[i + 2]) * 16 + hex_digit(e[i + 3]);
        if (value >= 0x80) return false;  // a code point, not a byte, in UTF-8 mode
        run.push_back(static_cast<char>(value));
        i += 4;
      } else if (ascii_sign(next)) {
        run.push_back(next);  // an escaped sign stands for itself
        i += 2;
      } else {
        return false;  // \d, \w, \n, \Q...: not a literal
      }
    } else if (c == '.') {
      // ".*" alone: any text of the line (never a '\n': the lines hold none). ".*?", ".*+"
      // and a lone "." are something else.
      if (i + 1 >= e.size() || e[i + 1] != '*') return false;
      if (i + 2 < e.size() && std::strchr("?+*{", e[i + 2]) != nullptr) return false;
      if (!run.empty()) literals.push_back(std::move(run));
      run.clear();
      i += 2;
    } else if (!plain(c)) {
      return false;
    } else {
      run.push_back(c);
      ++i;
    }
  }
  if (!run.empty()) literals.push_back(std::move(run));
  // A literal of valid UTF-8 found in a valid line starts and ends on its characters'
  // edges, so ".*" between two such takes whole characters, as Hyperscan's "." does.
  if (utf8)
    for (const std::string& l : literals)
      if (!valid_utf8(l)) return false;
  return true;
}

LiteralChains::LiteralChains(const std::vector<std::string>& expressions, const std::vector<std::uint32_t>& ids,
                             bool ignore_case, bool utf8, std::vector<std::string>& rest_expressions,
                             std::vector<std::uint32_t>& rest_ids)
    : ignore_case_(ignore_case) {
  const std::uint32_t patterns = ids.empty() ? 0 : *std::max_element(ids.begin(), ids.end()) + 1;
  index_.assign(patterns, kNone);
  std::vector<std::string> literals;
  for (std::size_t k = 0; k < expressions.size(); ++k) {
    if (!parse(expressions[k], utf8, literals)) {
      rest_expressions.push_back(expressions[k]);
      rest_ids.push_back(ids[k]);
      continue;
    }
    if (ignore_case)
      for (std::string& l : literals) std::transform(l.begin(), l.end(), l.begin(), ascii_lower);
    index_[ids[k]] = static_cast<std::uint32_t>(chains_.size());
    chains_.emplace_back(literals.begin(), literals.end());
  }
}

bool LiteralChains::matches(std::uint32_t pattern, std::string_view line) const noexcept {
  const char* at = line.data();
  const char* const end = line.data() + line.size();
  for (const PairFind& literal : chains_[index_[pattern]]) {
    const char* found = literal.find(at, end);
    if (found == nullptr) return false;
    at = found + literal.literal().size();
  }
  return true;
}

void LiteralChains::fold(std::string_view line, std::string& folded) {
  folded.resize(line.size());
  std::transform(line.begin(), line.end(), folded.begin(), ascii_lower);
}

}  // namespace gpufilter::regex
