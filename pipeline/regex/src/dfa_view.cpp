// How grep's DFA (dfa.c) reads a -G/-E pattern, where it differs from glibc's regex.
// grep selects lines with its DFA whenever the DFA supports the whole pattern list, and
// uses regex (re_search) only for back-references, for constructs its DFA does not
// support, and for the -o/--color positions. The two disagree on a few corners, and the
// DFA's reading wins for selection:
// - an ERE repetition at the start of an expression ("{1}a", "x|*b") repeats nothing;
// - a repeated zero-width assertion ("b$?", "^*b", "b\>\{2\}") is optional or kept once;
// - an ERE '{' that starts no valid interval, and a ')' that closes nothing, are literal.
// dfa_view() rewrites a pattern into the text that glibc reads as the DFA does, and says
// when the DFA would not be used at all. It also yields grep 3.8's warnings and the errors
// only the DFA reports.
#include <cctype>

#include "gpufilter/regex/line_regex.hpp"
#include "regex_internal.hpp"

namespace gpufilter::regex {
namespace {

// A bracket expression from p[i] == '[': one past its ']', and whether grep calls it
// "[:space:]" written for "[[:space:]]" (it starts and ends with ':' and holds more).
std::size_t bracket_end(std::string_view p, std::size_t i, bool& confusing, bool& collating) {
  std::size_t j = i + 1;
  if (j < p.size() && p[j] == '^') ++j;
  const std::size_t first = j;
  const bool colon_first = j < p.size() && p[j] == ':';
  bool other = false, colon_last = false;
  for (; j < p.size(); ++j) {
    const char c = p[j];
    if (c == ']' && j != first) break;
    if (c == '[' && j + 1 < p.size() && (p[j + 1] == ':' || p[j + 1] == '=' || p[j + 1] == '.')) {
      const char kind = p[j + 1];
      const std::size_t close = p.find(std::string{kind, ']'}, j + 2);
      if (close != std::string_view::npos) {
        collating = collating || kind != ':';
        j = close + 2;
        other = true;
        colon_last = false;
        if (j < p.size() && p[j] == ']') break;
        --j;
        continue;
      }
    }
    colon_last = c == ':';
    if (c != ':') other = true;
  }
  confusing = colon_first && colon_last && other;
  return j < p.size() ? j + 1 : p.size();
}

// An interval at p[i] ('{' for ERE, the '{' after '\' for BRE): one past its end and its
// minimum, or 0 when it is not a valid interval.
std::size_t interval_end(std::string_view p, std::size_t i, bool bk, long& low) {
  std::size_t j = i + 1;
  long high = -1;
  low = -1;
  for (; j < p.size() && std::isdigit(static_cast<unsigned char>(p[j])); ++j) low = (low < 0 ? 0 : low * 10) + (p[j] - '0');
  if (j < p.size() && p[j] == ',') {
    if (low < 0) low = 0;
    for (++j; j < p.size() && std::isdigit(static_cast<unsigned char>(p[j])); ++j)
      high = (high < 0 ? 0 : high * 10) + (p[j] - '0');
  } else {
    high = low;
  }
  if (bk) {
    if (j >= p.size() || p[j] != '\\') return 0;
    ++j;
  }
  if (j >= p.size() || p[j] != '}' || low < 0 || (high >= 0 && low > high)) return 0;
  return j + 1;
}

class Reader {
 public:
  Reader(std::string_view p, Syntax syntax, bool utf8) : p_(p), ere_(syntax == Syntax::kExtended), utf8_(utf8) {}
  DfaView read();

 private:
  void atom(std::string_view text, bool zero_width) {
    after_open_ = false;
    has_atom_ = true;
    atom_at_ = view_.select.size();
    zero_width_ = zero_width;
    view_.select.append(text);
    if (!zero_width) start_ = false;
  }
  // A repetition operator `text` on the atom before it.
  void repeat(std::string_view text, const char* warning) {
    after_open_ = false;
    if (start_ && !ere_) {  // a BRE operator where an expression starts is a literal
      atom(text, false);
      return;
    }
    if (start_) {
      view_.warnings.push_back(std::string("warning: ") + warning + " at start of expression");
      if (text.front() == '{') start_ = false;  // dfa.c ends its start state after an interval only
    }
    if (!has_atom_) return;  // it repeats nothing
    if (zero_width_) {
      // grep's DFA and its regex read a repeated anchor or word assertion differently,
      // and which one answers depends on the options: refused rather than guessed.
      view_.refusal = "repeating an anchor or a word assertion (\"" + std::string(p_) + "\") is not supported";
      return;
    }
    view_.select.append(text);
  }
  bool escape(std::size_t& i);
  bool anchor_end(std::size_t i) const;

  std::string_view p_;
  bool ere_;
  bool utf8_;
  DfaView view_;
  bool start_ = true;       // dfa.c's laststart
  bool after_open_ = true;  // the last token began an expression: a BRE '^' anchors here
  bool has_atom_ = false;   // the current expression has an atom for an operator to repeat
  std::size_t atom_at_ = 0;
  bool zero_width_ = true;
  int depth_ = 0;
};

// '$' is an anchor in an ERE, and in a BRE at the end or before "\)" or "\|".
bool Reader::anchor_end(std::size_t i) const {
  if (ere_ || i + 1 == p_.size()) return true;
  return p_.compare(i + 1, 2, "\\)") == 0 || p_.compare(i + 1, 2, "\\|") == 0;
}

// The escape at p_[i] == '\\'; false when the pattern ends (glibc has reported it).
bool Reader::escape(std::size_t& i) {
  if (i + 1 >= p_.size()) return false;
  const char n = p_[++i];
  const std::string_view text = p_.substr(i - 1, 2);
  if (!ere_ && n == '(') {
    ++depth_;
    view_.select.append(text);
    start_ = after_open_ = true;
    has_atom_ = false;
  } else if (!ere_ && n == ')') {
    if (depth_ == 0 && !view_.error) view_.error = "Unmatched ) or \\)";
    --depth_;
    atom("", false);  // the group is the atom (kept whole: not zero-width)
    view_.select.append(text);
  } else if (!ere_ && n == '|') {
    view_.select.append(text);
    start_ = after_open_ = true;
    has_atom_ = false;
  } else if (!ere_ && (n == '+' || n == '?')) {
    repeat(text, n == '+' ? "+" : "?");
  } else if (!ere_ && n == '{') {
    long low = 0;
    const std::size_t end = interval_end(p_, i, true, low);
    if (start_ || end == 0) {
      atom(text, false);
    } else {
      repeat(p_.substr(i - 1, end - (i - 1)), "{...}");
      i = end - 1;
    }
  } else if (n >= '1' && n <= '9') {
    view_.supported = false;  // a back-reference: grep's DFA hands the line to regex
    atom(text, false);
  } else if (n == '<' || n == '>' || n == 'b' || n == 'B') {
    if (utf8_) view_.supported = false;  // dfa.c supports word assertions in unibyte locales only
    atom(text, true);
  } else if (n == '`' || n == '\'') {
    atom(text, true);
  } else {
    atom(text, false);
  }
  return true;
}

DfaView Reader::read() {
  for (std::size_t i = 0; i < p_.size(); ++i) {
    const char c = p_[i];
    if (c == '[') {
      bool confusing = false, collating = false;
      const std::size_t end = bracket_end(p_, i, confusing, collating);
      if (confusing && !view_.error) view_.error = "character class syntax is [[:space:]], not [:space:]";
      if (utf8_) view_.supported = false;  // multibyte brackets: dfa.c often gives them to regex
      atom(p_.substr(i, end - i), false);
      i = end - 1;
    } else if (c == '\\') {
      if (!escape(i)) break;
    } else if (c == '^' && (ere_ || after_open_)) {
      atom("^", true);
    } else if (c == '$' && anchor_end(i)) {
      atom("$", true);
    } else if (c == '*') {
      repeat("*", "*");
    } else if (ere_ && (c == '+' || c == '?')) {
      repeat(std::string_view(&p_[i], 1), c == '+' ? "+" : "?");
    } else if (ere_ && c == '{') {
      long low = 0;
      const std::size_t end = interval_end(p_, i, false, low);
      if (end == 0) {
        atom("\\{", false);  // a literal '{', spelled so that glibc cannot take it otherwise
      } else {
        repeat(p_.substr(i, end - i), "{...}");
        i = end - 1;
      }
    } else if (ere_ && c == '(') {
      ++depth_;
      view_.select += '(';
      start_ = true;
      has_atom_ = false;
    } else if (ere_ && c == ')') {
      if (depth_ == 0) {
        atom("\\)", false);  // closes nothing: a literal ')'
        view_.stray_close = true;
      } else {
        --depth_;
        atom("", false);
        view_.select += ')';
      }
    } else if (ere_ && c == '|') {
      view_.select += '|';
      start_ = true;
      has_atom_ = false;
    } else if (c == '\n') {  // between patterns of a list: an alternation (RE_NEWLINE_ALT)
      view_.select += '\n';
      start_ = after_open_ = true;
    has_atom_ = false;
    } else {
      atom(p_.substr(i, 1), false);
    }
  }
  return std::move(view_);
}

}  // namespace

DfaView dfa_view(std::string_view pattern, Syntax syntax, bool utf8) {
  return Reader(pattern, syntax, utf8).read();
}

std::vector<std::string> warnings(const std::vector<std::string>& patterns, Syntax syntax) {
  std::vector<std::string> out;
  if (syntax != Syntax::kBasic && syntax != Syntax::kExtended) return out;
  for (const std::string& p : patterns)
    for (std::string& w : dfa_view(p, syntax, false).warnings) out.push_back(std::move(w));
  return out;
}

}  // namespace gpufilter::regex
