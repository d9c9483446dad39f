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
#include <algorithm>
#include <bitset>
#include <cctype>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

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

// Whether dfa.c reads a bracket expression itself in a UTF-8 locale (parse_bracket_exp
// without BACKREF, and an MBCSET that addtok() turns into an alternation of its
// characters): not negated, no class but [:digit:], no equivalence class or collating
// symbol, ranges of digits only. Under -i as well: dfa.c adds each character's folded
// counterparts (U+212A beside 'k' and 'K'), and [:upper:]/[:lower:], which it reads as
// [:alpha:], are classes it leaves to regex anyway.
bool dfa_reads_bracket(std::string_view b) {
  if (b.size() < 3 || b[1] == '^') return false;
  const std::string_view inner = b.substr(1, b.size() - 2);
  for (std::size_t j = 0; j < inner.size(); ++j) {
    if (inner[j] == '[' && j + 1 < inner.size() && (inner[j + 1] == ':' || inner[j + 1] == '=' || inner[j + 1] == '.')) {
      if (inner.compare(j, 9, "[:digit:]") != 0) return false;
      j += 8;
      continue;
    }
    if (j > 0 && inner[j] == '-' && j + 1 < inner.size()) {
      const char low = inner[j - 1], high = inner[j + 1];
      if (!(low >= '0' && low <= '9' && high >= '0' && high <= '9')) return false;
    }
  }
  return true;
}

// The most times a repetition operator ("?", "*", "+", "{2}", "\{0,1\}", "{3,}", ...)
// takes its atom; nullopt: no bound. Intervals' numbers read as numbers ("{00}" is 0),
// saturating far past any count that matters here.
std::optional<long> repeat_max(std::string_view op) {
  std::string digits;
  for (char c : op)
    if (c != '\\' && c != '{' && c != '}') digits += c;
  if (digits == "?") return 1;
  if (digits.empty() || digits == "*" || digits == "+") return std::nullopt;
  const std::size_t comma = digits.find(',');
  const std::string high = comma == std::string::npos ? digits : digits.substr(comma + 1);
  if (high.empty() || high.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;  // "{n,}"
  long n = 0;
  for (char c : high) n = std::min(n * 10 + (c - '0'), 1L << 40);
  return n;
}

// A repetition operator that takes its atom no time at all ("{0}", "\{,0\}", "{0,0}").
bool repeats_none(std::string_view op) {
  if (op.empty() || (op.front() != '{' && op.front() != '\\')) return false;
  return repeat_max(op) == 0L;
}

// A repetition operator ("?", "*", "\{0,1\}", "{2}", ...) that takes its atom at most once.
bool at_most_once(std::string_view op) {
  const std::optional<long> most = repeat_max(op);
  return most && *most <= 1;
}

// An interval at p[i] ('{' for ERE, the '{' after '\' for BRE): one past its end and its
// minimum, or 0 when it is not a valid interval.
std::size_t interval_end(std::string_view p, std::size_t i, bool bk, long& low) {
  std::size_t j = i + 1;
  long high = -1;
  low = -1;
  // dfa.c caps a count at RE_DUP_MAX + 1 as it reads it (a longer one would overflow).
  constexpr long kCap = 32767 + 1;
  for (; j < p.size() && std::isdigit(static_cast<unsigned char>(p[j])); ++j)
    low = std::min(kCap, (low < 0 ? 0 : low * 10) + (p[j] - '0'));
  if (j < p.size() && p[j] == ',') {
    if (low < 0) low = 0;
    for (++j; j < p.size() && std::isdigit(static_cast<unsigned char>(p[j])); ++j)
      high = std::min(kCap, (high < 0 ? 0 : high * 10) + (p[j] - '0'));
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

// A literal byte as Hyperscan's PCRE syntax reads it.
std::string pcre_byte(unsigned char c) {
  if (std::isalnum(c) || c == '_' || c == ' ') return std::string(1, static_cast<char>(c));
  static const char* hex = "0123456789abcdef";
  return std::string{'\\', 'x', hex[c >> 4], hex[c & 15]};
}

// A bracket's element at p[j] == '[' ("[:name:]", "[=c=]", "[.c.]"): its kind (':',
// '=', '.'), its name and where its closing "x]" is; kind 0 when p[j] starts none, and
// `close` npos when it is not closed before `end`.
struct BracketElement {
  char kind = 0;
  std::string_view name;
  std::size_t close = std::string_view::npos;
};
BracketElement bracket_element(std::string_view p, std::size_t j, std::size_t end) {
  if (p[j] != '[' || j + 1 >= end || (p[j + 1] != ':' && p[j + 1] != '=' && p[j + 1] != '.')) return {};
  BracketElement e{p[j + 1], {}, p.find(std::string{p[j + 1], ']'}, j + 2)};
  if (e.close == std::string_view::npos || e.close >= end) e.close = std::string_view::npos;
  else e.name = p.substr(j + 2, e.close - (j + 2));
  return e;
}

// A POSIX bracket expression p[i, end) in Hyperscan's syntax (C locale), or nothing.
std::optional<std::string> pcre_bracket(std::string_view p, std::size_t i, std::size_t end, bool ignore_case,
                                        bool utf8) {
  // In UTF-8 only plain ASCII members: classes are the C library's there, not Hyperscan's.
  if (utf8)
    for (std::size_t k = i; k < end; ++k)
      if (static_cast<unsigned char>(p[k]) >= 0x80 || (p[k] == '[' && k > i)) return std::nullopt;
  // No class takes '\n' (a line never holds one): the same text then selects lines in a
  // buffer of many (HS_FLAG_MULTILINE), where a class must not cross a line's end.
  std::string out = "[";
  std::size_t j = i + 1;
  if (j < end && p[j] == '^') {
    out += "^\\x0a";
    ++j;
  }
  const std::size_t first = j;
  for (; j < end - 1; ++j) {
    const unsigned char c = static_cast<unsigned char>(p[j]);
    if (const auto [kind, name, close] = bracket_element(p, j, end); kind != 0) {
      if (close == std::string_view::npos) return std::nullopt;
      if (kind == ':') {
        if (ignore_case && (name == "upper" || name == "lower")) return std::nullopt;
        if (name == "space") out += "\\x09\\x0b-\\x0d\\x20";
        else if (name == "cntrl") out += "\\x00-\\x09\\x0b-\\x1f\\x7f";
        else out += "[:" + std::string(name) + ":]";
      } else {
        if (name.size() != 1) return std::nullopt;
        // A collating symbol that starts a range ("[[.a.]-c]"): left to glibc.
        if (close + 3 < end && p[close + 2] == '-' && p[close + 3] != ']') return std::nullopt;
        out += pcre_byte(static_cast<unsigned char>(name[0]));
      }
      j = close + 1;
      continue;
    }
    if (c == ']' && j != first) break;
    if (j + 2 < end - 1 && p[j + 1] == '-' && p[j + 2] != ']') {
      if (p[j + 2] == '[') return std::nullopt;
      const unsigned char high = static_cast<unsigned char>(p[j + 2]);
      if (c <= '\n' && high >= '\n' && c <= high) {  // the range less '\n'
        if (c < '\n') out += pcre_byte(c) + "-\\x09";
        if (high > '\n') out += "\\x0b-" + pcre_byte(high);
      } else {
        out += pcre_byte(c) + "-" + pcre_byte(high);
      }
      j += 2;
      continue;
    }
    out += pcre_byte(c);
  }
  return out + "]";
}

// Whether glibc's -i reading of the range [low-high] (a byte whose upper case is in
// [toupper(low), toupper(high)]) is the DFA's (a byte in it, or whose other case is): when
// the range holds no letter, or its ends are letters of one case ("[a-z]", "[0-9]"; not
// "[0-c]", which glibc reads as [0-C] and the DFA as holding 'Q').
bool folds_alike(unsigned char low, unsigned char high) {
  const auto lower = [](unsigned char c) { return c >= 'a' && c <= 'z'; };
  const auto upper = [](unsigned char c) { return c >= 'A' && c <= 'Z'; };
  if ((lower(low) && lower(high)) || (upper(low) && upper(high))) return true;
  for (unsigned b = low; b <= high; ++b)
    if (lower(static_cast<unsigned char>(b)) || upper(static_cast<unsigned char>(b))) return false;
  return true;
}

// Under -i in the C locale, the bytes dfa.c's bracket p[i, end) takes: each member and
// range byte by byte with its other case, [:upper:] and [:lower:] as [:alpha:]. glibc's
// regex reads a range after folding its ends to upper case ("[A-b]" is "[A-B]"), so
// where the DFA decides it needs these bytes spelled out. Nothing for a form it does not
// take apart (a collating symbol as a range end, an unknown class, a bad range).
// `ranged`: it holds a range whose ends glibc's regex folds first into another reading.
std::optional<std::bitset<256>> folded_bracket(std::string_view p, std::size_t i, std::size_t end, bool& negated,
                                               bool& ranged) {
  std::bitset<256> set;
  std::size_t j = i + 1;
  negated = j < end && p[j] == '^';
  if (negated) ++j;
  ranged = false;
  const std::size_t first = j;
  for (; j < end - 1; ++j) {
    const unsigned char c = static_cast<unsigned char>(p[j]);
    if (const auto [kind, name, close] = bracket_element(p, j, end); kind != 0) {
      if (close == std::string_view::npos) return std::nullopt;
      if (kind == ':') {
        const std::string_view read = name == "upper" || name == "lower" ? "alpha" : name;
        for (int b = 0; b < 256; ++b) {
          const std::optional<bool> in = in_c_class(read, static_cast<unsigned char>(b));
          if (!in) return std::nullopt;
          if (*in) set.set(static_cast<std::size_t>(b));
        }
      } else {
        if (name.size() != 1 || (close + 3 < end && p[close + 2] == '-' && p[close + 3] != ']')) return std::nullopt;
        set.set(static_cast<unsigned char>(name[0]));
      }
      j = close + 1;
      continue;
    }
    if (c == ']' && j != first) break;
    if (j + 2 < end - 1 && p[j + 1] == '-' && p[j + 2] != ']') {
      const unsigned char high = static_cast<unsigned char>(p[j + 2]);
      if (p[j + 2] == '[' || high < c) return std::nullopt;
      for (unsigned b = c; b <= high; ++b) set.set(b);
      ranged = ranged || !folds_alike(c, high);
      j += 2;
      continue;
    }
    set.set(c);
  }
  for (unsigned b = 'A'; b <= 'Z'; ++b)
    if (set[b] || set[b + 32]) set.set(b).set(b + 32);
  return set;
}

// Whether the bracket p[i, end) names or spans a letter: a member, a class's name, a
// range's end or a byte between its ends. Where it cannot tell (folded_bracket() does not
// take the form apart), it says so too.
bool holds_a_letter(std::string_view p, std::size_t i, std::size_t end) {
  const std::string_view text = p.substr(i, end - i);
  if (std::any_of(text.begin(), text.end(), [](char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }))
    return true;
  bool negated = false, ranged = false;
  const std::optional<std::bitset<256>> set = folded_bracket(p, i, end, negated, ranged);
  if (!set) return true;
  for (unsigned b = 'A'; b <= 'Z'; ++b)
    if ((*set)[b]) return true;
  return false;
}

// A bracket of exactly `set` (every byte listed, no range), negated or not: in glibc's
// syntax (']' first, '^' not first, '-' last) or in Hyperscan's (pcre_bracket's, '\n' never).
std::string listed_bracket(const std::bitset<256>& set, bool negated, bool for_hyperscan) {
  std::string members;
  for (int b = 0; b < 256; ++b) {
    const auto byte = static_cast<unsigned char>(b);
    if (!set[byte]) continue;
    if (for_hyperscan) {
      if (byte != '\n') members += pcre_byte(byte);
    } else if (byte != ']' && byte != '^' && byte != '-') {
      members += static_cast<char>(byte);
    }
  }
  if (for_hyperscan) return (negated ? "[^\\x0a" : "[") + members + "]";
  if (set[']']) members = ']' + members;
  if (set['^']) members += members.empty() ? "[.^.]" : "^";
  if (set['-']) members += '-';
  return (negated ? "[^" : "[") + members + "]";
}

class Reader {
 public:
  Reader(std::string_view p, Syntax syntax, bool utf8, bool ignore_case, bool followed, bool superset = false)
      : p_(p),
        ere_(syntax == Syntax::kExtended),
        utf8_(utf8),
        ignore_case_(ignore_case),
        followed_(followed),
        superset_(superset) {
  }
  DfaView read();

 private:
  // The DFA's first error ends its reading: only the warnings before it are printed.
  void fail(const char* error) {
    if (view_.error) return;
    view_.error = error;
    view_.warnings_before_error = view_.warnings.size();
  }
  // An atom: its text for glibc and for Hyperscan.
  void atom(std::string_view text, std::string_view pcre, bool zero_width) {
    after_open_ = false;
    has_atom_ = true;
    zero_width_ = zero_width;
    quantified_ = false;
    atom_start_ = view_.pcre.size();
    view_.select.append(text);
    view_.superset.append(superset_atom_ ? *superset_atom_ : std::string(text));
    // superset_view(): what regex decides reads as what the DFA's superset says.
    view_.pcre.append(superset_ && superset_atom_ ? (superset_atom_->empty() ? "" : "(?:.*)") : std::string(pcre));
    superset_atom_.reset();
    if (!zero_width) start_ = false;
    if (!zero_width && !closing_group_) branch_.text = true;
    atom_to_regex_ = closing_group_ ? atom_to_regex_ : to_regex_pending_;
    to_regex_pending_ = 0;
    group_holds_assertion_ = false;  // close() says so for a group, after this
    group_mixes_anchor_ = false;
  }
  // An anchor ('^', '$', '\`', '\'') or a word boundary (\b, \B) in the branch being read.
  void note_anchor() { branch_.anchor = true; }
  // The branch being read ends ('|', a newline between patterns, a group's ')').
  void end_branch() {
    if (branch_.anchor && branch_.text) branch_.mixes = true;
    mixes_in_group_ = mixes_in_group_ || branch_.mixes;
    anchor_in_group_ = anchor_in_group_ || branch_.anchor;
    text_in_group_ = text_in_group_ || branch_.text;
    branch_ = {};
  }
  // A \< or \> inside the groups open now (see repeat()).
  void note_assertion() {
    for (char& held : groups_hold_assertion_) held = 1;
  }
  // A literal byte; in UTF-8 a byte of a multibyte character stays itself, so that the
  // character is one codepoint for Hyperscan (and an operator after it repeats all of it).
  void literal(std::string_view text, unsigned char c) {
    atom(text, utf8_ && c >= 0x80 ? std::string(1, static_cast<char>(c)) : pcre_byte(c), false);
  }
  // Under -i in UTF-8 the character at p_[i] as dfa.c reads it (atom(): the character or
  // each of its case_folded_counterparts), written out for Hyperscan, which then reads it
  // without folding; false (nothing read) for a character without counterparts or not a
  // whole valid character: its bytes are literals as without -i. Where the counterparts
  // cannot be written, also false, and the pattern has no Hyperscan reading.
  bool folded_character(std::size_t& i);
  // Something that begins an expression: "(", "|", a newline between patterns.
  void open(std::string_view text, std::string_view pcre) {
    end_branch();
    view_.select.append(text);
    view_.superset.append(text);
    view_.pcre.append(pcre);
    start_ = after_open_ = true;
    has_atom_ = false;
    quantified_ = false;
  }
  void close(std::string_view text) {
    --depth_;
    end_branch();
    const bool mixes = mixes_in_group_, anchor = anchor_in_group_, text_inside = text_in_group_;
    if (!outer_branches_.empty()) {
      std::tie(branch_, mixes_in_group_, anchor_in_group_, text_in_group_) = outer_branches_.back();
      outer_branches_.pop_back();
    }
    // The group is an atom of the branch around it, with what it holds.
    branch_.anchor = branch_.anchor || anchor;
    branch_.text = branch_.text || text_inside;
    branch_.mixes = branch_.mixes || mixes;
    atom_to_regex_ = 0;
    if (!to_regex_at_group_.empty()) {  // an unmatched ')' (grep has failed already) opened none
      atom_to_regex_ = to_regex_ - to_regex_at_group_.back();
      to_regex_at_group_.pop_back();
    }
    closing_group_ = true;
    atom(text, ")", false);  // the group is the atom
    closing_group_ = false;
    group_mixes_anchor_ = mixes;
    if (!group_starts_.empty()) {
      atom_start_ = group_starts_.back();
      group_starts_.pop_back();
      group_holds_assertion_ = groups_hold_assertion_.back() != 0;
      groups_hold_assertion_.pop_back();
    }
  }
  void open_group(std::string_view text) {
    outer_branches_.emplace_back(branch_, mixes_in_group_, anchor_in_group_, text_in_group_);
    to_regex_at_group_.push_back(to_regex_);
    branch_ = {};
    mixes_in_group_ = anchor_in_group_ = text_in_group_ = false;
    group_starts_.push_back(view_.pcre.size());
    groups_hold_assertion_.push_back(0);
    open(text, "(?:");
  }
  // A repetition operator on the atom before it: its glibc text and Hyperscan's.
  void repeat(std::string_view text, std::string_view pcre, const char* warning) {
    after_open_ = false;
    if (start_ && !ere_) {  // a BRE operator where an expression starts is a literal
      atom_start_ = view_.pcre.size();
      quantified_ = false;
      for (char c : text)
        if (c != '\\') view_.pcre += pcre_byte(static_cast<unsigned char>(c));
      view_.select.append(text);
      view_.superset.append(text);
      has_atom_ = true;
      zero_width_ = false;
      start_ = false;
      return;
    }
    if (start_) {
      view_.warnings.push_back(std::string("warning: ") + warning + " at start of expression");
      if (text.front() == '{') start_ = false;  // dfa.c ends its start state after an interval only
    }
    if (!has_atom_) {  // it repeats nothing (grep's regex reads it otherwise)
      view_.corner = true;
      return;
    }
    if (zero_width_) {
      // grep's DFA and its regex read a repeated anchor or word assertion differently,
      // and which one answers depends on the options: refused rather than guessed.
      view_.refusal = "repeating an anchor or a word assertion (\"" + std::string(p_) + "\") is not supported";
      return;
    }
    // glibc lets an anchor in a later repetition of a group match where it should not
    // ("\(^ \)\{2\}" finds two spaces at the start of "  b"), and what it answers
    // depends on how far past the line the text it searches reaches (inside grep, the rest
    // of grep's buffer): refused (GnuRegex), as -o, --color and the lines glibc decides
    // would show it.
    if (group_mixes_anchor_ && !at_most_once(text)) view_.anchor_in_repeated_group = true;
    // dfa.c drops an atom repeated at most zero times (closure(): its tokens are removed),
    // and with it what it left to regex: "\a[[=b=]]{0}" is the DFA's to decide.
    if (repeats_none(text)) {
      to_regex_ -= atom_to_regex_;
      atom_to_regex_ = 0;
    }
    if (group_holds_assertion_ && text != "?" && text != "\\?") {
      // glibc's regex answers a repeated group that holds \< or \> otherwise than grep's
      // DFA ("(\<[a-z]+\> ?){3}" selected lines grep does not), and otherwise than itself
      // in grep, whose search reads past the line ("(..\>.)+" on "11-b--": grep -o prints
      // "-b-", glibc on the line alone "11-b--"): refused rather than wrong. '?' agrees.
      view_.refusal = "a repetition ('*', '+' or an interval) of a group that holds \\< or \\> (\"" +
                      std::string(p_) + "\") is not supported; write the repetitions out";
      return;
    }
    view_.select.append(text);
    view_.superset.append(text);
    // A quantifier after a quantifier repeats the repetition (ERE "j+?" is "(j+)?"); in
    // PCRE it would make the first lazy or possessive: the repetition is grouped first.
    if (quantified_) {
      view_.pcre.insert(atom_start_, "(?:");
      view_.pcre.append(")");
    }
    view_.pcre.append(pcre);
    quantified_ = true;
  }
  void interval(std::size_t from, std::size_t end, bool bk, const char* warning);
  bool escape(std::size_t& i);
  void bracket(std::size_t& i);
  // The construct about to be appended is left to grep's regex (view_.supported); in
  // dfa.c's superset it stands for `superset` (".*", or "" for a word assertion).
  void left_to_regex(const char* superset = ".*");
  bool anchor_end(std::size_t i) const;
  // A BRE '$' at p_[i] before a bare ')' or '|' that more of the list follows (dfa.c's lex
  // looks two bytes ahead where the first is not the backslash it expects).
  bool bare_close_or_bar_after(std::size_t i) const {
    return i + 1 < p_.size() && (p_[i + 1] == ')' || p_[i + 1] == '|') && (i + 2 < p_.size() || followed_);
  }

  std::string_view p_;
  bool ere_;
  bool utf8_;
  bool ignore_case_;
  bool followed_;  // another pattern follows in grep's list (dfa.c reads them joined by '\n')
  bool superset_;  // superset_view()
  DfaView view_;
  std::optional<std::string> superset_atom_;  // the next atom's superset text, if not its own
  bool start_ = true;       // dfa.c's laststart
  bool after_open_ = true;  // the last token began an expression: a BRE '^' anchors here
  bool has_atom_ = false;   // the current expression has an atom for an operator to repeat
  bool zero_width_ = true;
  int depth_ = 0;
  bool quantified_ = false;         // the last token was a repetition operator
  std::size_t atom_start_ = 0;      // where the last atom's Hyperscan text begins
  std::vector<std::size_t> group_starts_;  // where each open group's "(?:" begins
  std::vector<char> groups_hold_assertion_;  // per open group: a \< or \> inside
  bool group_holds_assertion_ = false;        // the last atom is a group holding one
  // Anchors beside text in one branch of a group (see repeat()): the branch being read,
  // what the branches of the innermost open group held so far, and the same saved for
  // each group around it.
  struct Branch {
    bool anchor = false, text = false, mixes = false;
  };
  Branch branch_;
  bool mixes_in_group_ = false, anchor_in_group_ = false, text_in_group_ = false;
  std::vector<std::tuple<Branch, bool, bool, bool>> outer_branches_;
  bool closing_group_ = false;      // atom() is the group that close() ends
  // Constructs left to grep's regex (left_to_regex()): in all, not yet taken by an atom,
  // in the last atom, and when each open group began. DfaView::supported: none left.
  std::size_t to_regex_ = 0, to_regex_pending_ = 0, atom_to_regex_ = 0;
  std::vector<std::size_t> to_regex_at_group_;
  bool group_mixes_anchor_ = false;  // the last atom is a group with a branch holding an anchor and text
};

// '$' is an anchor in an ERE, and in a BRE at the end or before "\)" or "\|" (to dfa.c
// also before a bare ')' or '|': see read()).
bool Reader::anchor_end(std::size_t i) const {
  if (ere_ || i + 1 == p_.size()) return true;
  if (bare_close_or_bar_after(i)) return true;
  return p_.compare(i + 1, 2, "\\)") == 0 || p_.compare(i + 1, 2, "\\|") == 0;
}

// An interval p_[from, end) ("{m,n}" or "\{m,n\}"): "{,n}" is "{0,n}" for Hyperscan.
void Reader::interval(std::size_t from, std::size_t end, bool bk, const char* warning) {
  std::string pcre;
  for (std::size_t k = from; k < end; ++k)
    if (p_[k] != '\\') pcre += p_[k];
  if (pcre.size() > 1 && pcre[1] == ',') pcre = "{0" + pcre.substr(1);
  (void)bk;
  repeat(p_.substr(from, end - from), pcre, warning);
}

void Reader::bracket(std::size_t& i) {
  bool confusing = false, collating = false;
  const std::size_t end = bracket_end(p_, i, confusing, collating);
  if (confusing) fail("character class syntax is [[:space:]], not [:space:]");
  // dfa.c gives an equivalence class or a collating symbol to regex in every locale
  // (parse_bracket_exp: known_bracket_exp), and most multibyte brackets.
  if (collating || (utf8_ && !dfa_reads_bracket(p_.substr(i, end - i)))) left_to_regex();
  std::string text(p_.substr(i, end - i));
  std::optional<std::string> pcre;
  bool negated = false, ranged = false;
  // Under -i in the C locale the DFA's bytes (folded_bracket()): glibc would fold a
  // range's ends first, and Hyperscan's caseless classes are not the DFA's. Listed for
  // both, but where regex decides anyway (an equivalence class or a collating symbol).
  const auto folded = ignore_case_ && !utf8_ ? folded_bracket(p_, i, end, negated, ranged) : std::nullopt;
  if (folded && !collating) {
    text = listed_bracket(*folded, negated, false);
    pcre = listed_bracket(*folded, negated, true);
  } else {
    pcre = pcre_bracket(p_, i, end, ignore_case_, utf8_);
  }
  // Under -i in UTF-8 Hyperscan reads without folding (folded_character()): a bracket
  // with a letter (a member, a range's end or span, "[ -_]" holding 'A'-'Z', a class's
  // name) would need its members' counterparts; left to the slower readings.
  if (utf8_ && ignore_case_ && pcre && holds_a_letter(p_, i, end)) pcre.reset();
  if (!pcre && !superset_) view_.pcre_ok = false;
  // Where grep's regex decides, a range reads with its ends folded first ("[[=a=]A-b]"
  // holds no '_' there): a corner.
  if (ranged) view_.corner = true;
  // superset_view(): one character, whatever Hyperscan cannot say of which (a collating
  // symbol, an equivalence class; in UTF-8 a bracket the DFA reads as one character).
  atom(text, pcre.value_or(superset_ ? "." : ""), false);
  i = end - 1;
}

bool Reader::folded_character(std::size_t& i) {
  std::size_t length = 0;
  const std::optional<std::vector<std::string>> variants = case_variants(p_, i, length);
  if (!variants) view_.pcre_ok = false;  // not to be read unfolded either
  if (!variants || variants->size() < 2) return false;
  // Each as its UTF-8 bytes: Hyperscan's UTF-8 mode reads "\xHH" as a code point.
  std::string pcre = "(?:";
  for (const std::string& v : *variants) {
    if (pcre.size() > 3) pcre.push_back('|');
    pcre.append(v.size() == 1 ? pcre_byte(static_cast<unsigned char>(v[0])) : v);
  }
  pcre.push_back(')');
  atom(p_.substr(i, length), pcre, false);
  i += length - 1;
  return true;
}

void Reader::left_to_regex(const char* superset) {
  ++to_regex_;
  ++to_regex_pending_;
  superset_atom_ = superset;
}

// The escape at p_[i] == '\\'; false when the pattern ends (glibc has reported it).
bool Reader::escape(std::size_t& i) {
  if (i + 1 >= p_.size()) return false;
  const char n = p_[++i];
  const std::string_view text = p_.substr(i - 1, 2);
  if (!ere_ && n == '(') {
    ++depth_;
    open_group(text);
  } else if (!ere_ && n == ')') {
    if (depth_ == 0) fail("Unmatched ) or \\)");
    close(text);
  } else if (!ere_ && n == '|') {
    open(text, "|");
  } else if (!ere_ && (n == '+' || n == '?')) {
    repeat(text, std::string(1, n), n == '+' ? "+" : "?");
  } else if (!ere_ && n == '{') {
    long low = 0;
    const std::size_t end = interval_end(p_, i, true, low);
    if (start_ || end == 0) {
      // Not where an expression starts, dfa.c reads an interval and refuses a bad one;
      // glibc has refused it already unless an anchor comes before ("1\\<\\{"), where it
      // reads a literal '{' and grep still exits 2 with dfa.c's message.
      if (!start_) fail("invalid content of \\{\\}");
      literal(text, '{');
    } else {
      interval(i - 1, end, true, "{...}");
      i = end - 1;
    }
  } else if (n >= '1' && n <= '9') {
    left_to_regex();  // a back-reference: grep's DFA hands the line to regex
    if (!superset_) view_.pcre_ok = false;
    atom(text, "", false);
  } else if (n == '<' || n == '>' || n == 'b' || n == 'B') {
    if (utf8_ || superset_) left_to_regex("");  // dfa.c supports word assertions in unibyte locales only
    if (!superset_ && (n == '<' || n == '>' || utf8_)) view_.pcre_ok = false;  // Hyperscan has no \< or \>; UTF-8 words are the C library's
    if (n == '<' || n == '>') note_assertion();
    else note_anchor();  // \b and \B: glibc reads them in later repetitions as it reads anchors
    view_.assertion = true;
    atom(text, text, true);
  } else if (n == '`' || n == '\'') {
    note_anchor();
    view_.assertion = true;
    atom(text, n == '`' ? "^" : "$", true);  // dfa.c reads them as line anchors
  } else if (n == 'w' || n == 'W') {
    // In UTF-8 dfa.c reads \w \W \s \S as brackets of multibyte classes, which it leaves
    // to regex (parse_bracket_exp's BACKREF).
    if (utf8_) {
      left_to_regex();
      if (!superset_) view_.pcre_ok = false;
    }
    atom(text, n == 'w' ? "\\w" : "[^\\w\\n]", false);
  } else if (n == 's' || n == 'S') {
    if (utf8_) {
      left_to_regex();
      if (!superset_) view_.pcre_ok = false;
    }
    // \x0b, not \v: in Hyperscan's (PCRE's) syntax \v is every vertical space, '\n' and \x85 included.
    atom(text, n == 's' ? "[\\t\\x0b\\f\\r ]" : "[^\\t\\n\\x0b\\f\\r ]", false);  // '\n': see pcre_bracket
  } else if (ignore_case_ && n >= 'a' && n <= 'z') {
    // "\a" under -i: dfa.c reads the letter and folds it; glibc's regex folds the line to
    // upper case but takes an escaped character as written, so its "\a" matches nothing.
    // grep selects with the DFA where it can (the letter in either case) and finds -o
    // spans with regex (none): the DFA's reading is the letter alone, Hyperscan's never.
    view_.corner = true;
    if (!superset_) view_.pcre_ok = false;  // the superset's reading holds either way
    atom(text.substr(1), pcre_byte(static_cast<unsigned char>(n)), false);
  } else {
    // An escaped character beyond ASCII under -i in UTF-8: dfa.c folds it, Hyperscan would
    // read its bytes without folding (folded_character() reads unescaped ones).
    if (utf8_ && ignore_case_ && static_cast<unsigned char>(n) >= 0x80) view_.pcre_ok = false;
    literal(text, static_cast<unsigned char>(n));
  }
  return true;
}

DfaView Reader::read() {
  for (std::size_t i = 0; i < p_.size(); ++i) {
    const char c = p_[i];
    if (c == '[') {
      bracket(i);
    } else if (c == '\\') {
      if (!escape(i)) break;
    } else if (c == '^' && (ere_ || after_open_)) {
      view_.anchor = true;
      if (i != 0) view_.inner_anchor = true;
      note_anchor();
      atom("^", "^", true);
    } else if (c == '$' && anchor_end(i)) {
      view_.anchor = true;
      if (i + 1 != p_.size()) view_.inner_anchor = true;
      note_anchor();
      if (!ere_ && bare_close_or_bar_after(i)) {
        // dfa.c's look past a BRE '$' skips a backslash that is not there: before a bare
        // ')' or '|' it reads an anchor ("$|*" selects every line) where glibc reads a
        // '$'. The DFA's reading, as glibc writes an anchor there: "\($\)".
        view_.corner = true;
        atom("\\($\\)", "$", true);
      } else {
        atom("$", "$", true);
      }
    } else if (c == '*') {
      repeat("*", "*", "*");
    } else if (ere_ && (c == '+' || c == '?')) {
      repeat(std::string_view(&p_[i], 1), std::string_view(&p_[i], 1), c == '+' ? "+" : "?");
    } else if (ere_ && c == '{') {
      long low = 0;
      const std::size_t end = interval_end(p_, i, false, low);
      if (end == 0) {
        literal("\\{", '{');  // a literal '{', spelled so that glibc cannot take it otherwise
        view_.corner = true;
      } else {
        interval(i, end, false, "{...}");
        i = end - 1;
      }
    } else if (ere_ && c == '(') {
      ++depth_;
      open_group("(");
    } else if (ere_ && c == ')') {
      if (depth_ == 0) {
        literal("\\)", ')');  // closes nothing: a literal ')'
        view_.stray_close = view_.corner = true;
      } else {
        close(")");
      }
    } else if (ere_ && c == '|') {
      open("|", "|");
    } else if (c == '\n') {  // between patterns of a list: an alternation (RE_NEWLINE_ALT)
      open("\n", "|");
    } else if (c == '.') {
      atom(".", ".", false);
    } else if (!(utf8_ && ignore_case_ && folded_character(i))) {
      literal(p_.substr(i, 1), static_cast<unsigned char>(c));
    }
  }
  // Hyperscan reads the pattern as grep's DFA does: right where the DFA decides, or where
  // no corner makes the DFA and grep's regex differ.
  view_.supported = to_regex_ == 0;
  if (view_.refusal || (!view_.supported && view_.corner)) view_.pcre_ok = false;
  // A superset must hold whichever of the DFA and regex decides: not where they differ.
  if (superset_ && view_.corner) view_.pcre_ok = false;
  return std::move(view_);
}

}  // namespace

std::optional<bool> in_c_class(std::string_view name, unsigned char c) {
  const bool upper = c >= 'A' && c <= 'Z', lower = c >= 'a' && c <= 'z', digit = c >= '0' && c <= '9';
  const bool graph = c > ' ' && c < 0x7f;
  if (name == "alpha") return upper || lower;
  if (name == "upper") return upper;
  if (name == "lower") return lower;
  if (name == "digit") return digit;
  if (name == "alnum") return upper || lower || digit;
  if (name == "xdigit") return digit || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
  if (name == "space") return c == ' ' || (c >= '\t' && c <= '\r');
  if (name == "blank") return c == ' ' || c == '\t';
  if (name == "punct") return graph && !upper && !lower && !digit;
  if (name == "graph") return graph;
  if (name == "print") return graph || c == ' ';
  if (name == "cntrl") return c < ' ' || c == 0x7f;
  return std::nullopt;
}

DfaView superset_view(std::string_view pattern, Syntax syntax, bool utf8, bool ignore_case, bool followed) {
  return Reader(pattern, syntax, utf8, ignore_case, followed, true).read();
}

DfaView dfa_view(std::string_view pattern, Syntax syntax, bool utf8, bool ignore_case, bool followed) {
  return Reader(pattern, syntax, utf8, ignore_case, followed).read();
}

std::vector<std::string> warnings(const std::vector<std::string>& patterns, Syntax syntax) {
  std::vector<std::string> out;
  if (syntax != Syntax::kBasic && syntax != Syntax::kExtended) return out;
  for (std::size_t i = 0; i < patterns.size(); ++i)
    for (std::string& w : dfa_view(patterns[i], syntax, false, false, i + 1 < patterns.size()).warnings)
      out.push_back(std::move(w));
  return out;
}

}  // namespace gpufilter::regex
