// What the GNU and Perl matchers share inside gpufilter::regex.
#pragma once

#include <cstddef>
#include <cwchar>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpufilter/core/utf8.hpp"
#include "gpufilter/regex/line_regex.hpp"

namespace gpufilter::regex {

std::unique_ptr<LineRegex> compile_gnu(const std::vector<std::string>& patterns, const RegexOptions& options,
                                       const std::vector<PatternOrigin>& origins);
std::unique_ptr<LineRegex> compile_perl(const std::vector<std::string>& patterns, const RegexOptions& options);

// An ASCII letter lowered; any other byte as it is (-i's folding outside UTF-8 readings).
constexpr char ascii_lower(char c) noexcept { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// A hexadecimal digit's value, or -1.
inline int hex_digit(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Whether the C locale's class `name` holds byte c (glibc's and dfa.c's, ASCII alone);
// nothing for a name that is no class (dfa_view.cpp).
std::optional<bool> in_c_class(std::string_view name, unsigned char c);

// Under -i in a UTF-8 locale, the character at text[at] as grep's DFA reads it: its bytes
// first, then those of each of dfa.c's case_folded_counterparts() in the current locale
// (its upper case, that one's lower case, and the "lonesome" lower cases of the same upper
// case: 's' gives 'S' and U+017F, 'i' 'I' and U+0131, 'k' only 'K': U+212A is no
// counterpart of 'k' there); `length` is the character's. Empty (length 0) where no whole
// valid character starts there; nothing where the C library reads no UTF-8 or a
// counterpart cannot be written (no reading of the counterparts exists then).
std::optional<std::vector<std::string>> case_variants(std::string_view text, std::size_t at, std::size_t& length);

// "FILE:LINE: message" for a pattern read with -f, else the message.
std::string with_origin(const std::vector<PatternOrigin>& origins, std::size_t index, const char* message);

// A -G/-E pattern as grep's DFA reads it (dfa_view.cpp): `select` is the text that
// glibc's regex reads as the DFA does; `supported`: false when grep's DFA would hand the
// run to regex (a back-reference; in a UTF-8 locale word assertions and brackets);
// `warnings` are grep 3.8's; `error`, one that only the DFA reports.
struct DfaView {
  std::string select;
  bool supported = true;
  std::vector<std::string> warnings;
  std::optional<std::string> error;
  std::size_t warnings_before_error = 0;  // grep prints these before `error`
  bool stray_close = false;  // an ERE ')' that closes nothing (a literal; it closes grep's -w/-x wrapper)
  std::optional<std::string> refusal;  // a construct gpufilter refuses rather than answer unlike grep
  // The same reading in Hyperscan's syntax, which selects lines far faster than glibc;
  // pcre_ok is false where it cannot say the same (\< \>, back-references, UTF-8, ...).
  std::string pcre;
  bool pcre_ok = true;
  bool corner = false;  // a construct grep's DFA and its regex read differently
  // dfa.c's superset of the pattern (dfasuperset): `select` with what the DFA leaves to
  // regex (a back-reference; in UTF-8 most brackets, \s \S \w \W) as ".*" and UTF-8
  // word assertions as nothing. Where regex decides, grep asks it only about the lines
  // this matches.
  std::string superset;
  // An anchor ('^', '$') that is not the pattern's first or last character. With -z a
  // line may hold '\n', and glibc's matcher lets such an anchor match next to a '\n' it
  // has consumed ("a.^b", "a$.") where grep's DFA does not: refused with -z.
  bool inner_anchor = false;
  bool anchor = false;  // any anchor: under -w (grep's wrapper consumes a character first) every one is inner
  bool assertion = false;  // a word assertion (\< \> \b \B) or a buffer anchor (\` \')
  // An anchor beside other text in a branch of a group that '*', '+' or an interval
  // repeats ("(^a)+", "\([a-z]$\)\{2\}"; not "(^| )+"): glibc, which finds -o/--color
  // parts and decides lines where grep's DFA does not, answers it unlike grep: refused.
  bool anchor_in_repeated_group = false;
};
// `followed`: another pattern comes after this one in grep's list.
DfaView dfa_view(std::string_view pattern, Syntax syntax, bool utf8, bool ignore_case, bool followed = false);
// The same reading, but `pcre` is a superset of the pattern in Hyperscan's syntax: what
// grep's DFA leaves to regex (a back-reference; in UTF-8 brackets, \w \s) as ".*", a word
// assertion as nothing, as dfa.c's superset reads them. pcre_ok: Hyperscan can read it
// (not where the DFA and regex read a corner differently, nor with -i in UTF-8, whose
// folding is the C library's). A line it does not match, the pattern does not select:
// glibc, whose time can grow with the square of a line, need not be asked.
DfaView superset_view(std::string_view pattern, Syntax syntax, bool utf8, bool ignore_case, bool followed = false);

}  // namespace gpufilter::regex
