// What grep's DFA parser (dfa.c) says of a -G/-E pattern beyond glibc's regex errors: the
// warnings of grep 3.8 for a repetition at the start of an ERE (sub)expression, and its
// error for "[:space:]" written without the outer brackets.
#include <cctype>

#include "gpufilter/regex/line_regex.hpp"
#include "regex_internal.hpp"

namespace gpufilter::regex {
namespace {

// A bracket expression from p[i] == '[': its end (one past ']'), and whether grep calls it
// "[:space:]" written for "[[:space:]]" (dfa.c: it starts and ends with ':' and holds
// something else).
std::size_t bracket_end(std::string_view p, std::size_t i, bool& confusing) {
  std::size_t j = i + 1;
  if (j < p.size() && p[j] == '^') ++j;
  const std::size_t first = j;
  bool colon_first = j < p.size() && p[j] == ':';
  bool other = false;
  bool colon_last = false;
  for (; j < p.size(); ++j) {
    const char c = p[j];
    if (c == ']' && j != first) break;
    if (c == '[' && j + 1 < p.size() && (p[j + 1] == ':' || p[j + 1] == '=' || p[j + 1] == '.')) {
      const char kind = p[j + 1];
      const std::size_t close = p.find(std::string{kind, ']'}, j + 2);
      if (close != std::string_view::npos) {
        j = close + 1;
        other = true;
        colon_last = false;
        continue;
      }
    }
    colon_last = c == ':';
    if (c != ':') other = true;
  }
  confusing = colon_first && colon_last && other;
  return j < p.size() ? j + 1 : p.size();
}

// An ERE interval "{M}", "{M,}", "{,N}", "{M,N}" at p[i] == '{' (else '{' is a literal).
bool valid_interval(std::string_view p, std::size_t i) {
  std::size_t j = i + 1;
  long low = -1, high = -1;
  for (; j < p.size() && std::isdigit(static_cast<unsigned char>(p[j])); ++j) low = (low < 0 ? 0 : low * 10) + (p[j] - '0');
  if (j < p.size() && p[j] == ',') {
    if (low < 0) low = 0;
    for (++j; j < p.size() && std::isdigit(static_cast<unsigned char>(p[j])); ++j)
      high = (high < 0 ? 0 : high * 10) + (p[j] - '0');
  } else {
    high = low;
  }
  return j < p.size() && p[j] == '}' && low >= 0 && (high < 0 || low <= high);
}

struct Scan {
  std::vector<std::string> warnings;
  std::optional<std::string> error;
};

Scan scan(std::string_view p, Syntax syntax) {
  Scan result;
  const bool extended = syntax == Syntax::kExtended;
  bool start = true;  // dfa.c's laststart: only zero-width tokens since a (sub)expression began
  for (std::size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '[') {
      bool confusing = false;
      i = bracket_end(p, i, confusing) - 1;
      if (confusing) {
        result.error = "character class syntax is [[:space:]], not [:space:]";
        return result;
      }
      start = false;
      continue;
    }
    if (c == '\\' && i + 1 < p.size()) {
      const char n = p[++i];
      if (!extended && (n == '(' || n == '|')) start = true;
      else if (std::string_view("<>bB`'").find(n) == std::string_view::npos) start = false;
      continue;
    }
    if (!extended) {
      if (c != '^') start = false;
      continue;
    }
    if (c == '(' || c == '|') {
      start = true;
    } else if (c == '^' || c == '$') {
      // zero-width
    } else if (c == '*' || c == '+' || c == '?' || (c == '{' && valid_interval(p, i))) {
      if (start) result.warnings.push_back(c == '{' ? "{...} at start of expression" : std::string(1, c) + " at start of expression");
      if (c == '{') i = p.find('}', i);
      start = false;
    } else {
      start = false;
    }
  }
  return result;
}

}  // namespace

std::optional<std::string> dfa_only_error(std::string_view pattern, Syntax syntax) {
  if (syntax != Syntax::kBasic && syntax != Syntax::kExtended) return std::nullopt;
  return scan(pattern, syntax).error;
}

std::vector<std::string> warnings(const std::vector<std::string>& patterns, Syntax syntax) {
  std::vector<std::string> out;
  if (syntax != Syntax::kBasic && syntax != Syntax::kExtended) return out;
  for (const std::string& p : patterns)
    for (std::string& w : scan(p, syntax).warnings) out.push_back("warning: " + std::move(w));
  return out;
}

}  // namespace gpufilter::regex
