// Required factors (factors.hpp): hand cases for each rule in each syntax, and a randomized
// property check against the real engines (glibc's GNU regex as grep compiles it, and PCRE2):
// every match any engine finds must contain one of the factors, ASCII-folded under -i.
#include <gtest/gtest.h>

#include <regex.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cstdint>
#include <clocale>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "gpufilter/regex/factors.hpp"

namespace gpufilter::regex {
namespace {

using Factors = std::optional<std::vector<std::string>>;
using Strings = std::vector<std::string>;

struct Opt {
  bool icase = false;
  bool utf8 = false;
  std::size_t min = 2;
  bool fewest = false;
};

Factors factors(std::string_view pattern, Syntax syntax, Opt o = {}) {
  Factors f = required_factors(pattern, syntax, FactorOptions{o.icase, o.utf8, o.min, o.fewest});
  if (f) std::sort(f->begin(), f->end());
  return f;
}

Factors basic(std::string_view p, Opt o = {}) { return factors(p, Syntax::kBasic, o); }
Factors ere(std::string_view p, Opt o = {}) { return factors(p, Syntax::kExtended, o); }
Factors perl(std::string_view p, Opt o = {}) { return factors(p, Syntax::kPerl, o); }
Factors fixed(std::string_view p, Opt o = {}) { return factors(p, Syntax::kFixed, o); }

Factors set(Strings s) {
  std::sort(s.begin(), s.end());
  return s;
}

const Factors kNone = std::nullopt;

// ---------------------------------------------------------------------------------------
// Hand cases.

TEST(Factors, Fixed) {
  EXPECT_EQ(fixed("abc"), set({"abc"}));
  EXPECT_EQ(fixed("a.*["), set({"a.*["}));
  EXPECT_EQ(fixed("a"), kNone);
  EXPECT_EQ(fixed("a", {.min = 1}), set({"a"}));
  EXPECT_EQ(fixed(""), kNone);
  // UTF-8 -i: k, s, i and bytes >= 0x80 fold beyond ASCII; the longest piece between them.
  EXPECT_EQ(fixed("rusk", {.icase = true, .utf8 = true}), set({"ru"}));
  EXPECT_EQ(fixed("risk", {.icase = true, .utf8 = true}), kNone);
  EXPECT_EQ(fixed("abc\xC3\xA9xyzw", {.icase = true, .utf8 = true}), set({"xyzw"}));
  EXPECT_EQ(fixed("risk", {.icase = true}), set({"risk"}));
  EXPECT_EQ(fixed("caf\xC3\xA9", {.utf8 = true}), set({"caf\xC3\xA9"}));
}

TEST(Factors, BasicLiteralsAndBreaks) {
  EXPECT_EQ(basic("Failed password for .* from [0-9.]\\+"), set({"Failed password for "}));
  EXPECT_EQ(basic("abc"), set({"abc"}));
  EXPECT_EQ(basic("abc*"), set({"ab"}));
  EXPECT_EQ(basic("ab*c"), kNone);
  EXPECT_EQ(basic("ab*c", {.min = 1}).value().size(), 1u);
  EXPECT_EQ(basic("xyzab*c"), set({"xyza"}));
  EXPECT_EQ(basic(".*"), kNone);
  EXPECT_EQ(basic("[0-9]\\+$"), kNone);
  EXPECT_EQ(basic("^abc$"), set({"abc"}));
  EXPECT_EQ(basic("ab.cde"), set({"cde"}));
  // Operators of ERE are literals in a BRE.
  EXPECT_EQ(basic("a|b+c?(d){1}"), set({"a|b+c?(d){1}"}));
  // Escaped specials are their literal character.
  EXPECT_EQ(basic("ab\\.c\\*d\\[e\\$\\^"), set({"ab.c*d[e$^"}));
  EXPECT_EQ(basic("\\a\\n\\t"), set({"ant"}));
}

TEST(Factors, BasicQuantifiers) {
  EXPECT_EQ(basic("ab\\+cd"), set({"bcd"}));
  EXPECT_EQ(basic("xab\\?cd"), set({"xa"}));  // "xa" and "cd" tie: the first found
  EXPECT_EQ(basic("xyab\\?cd"), set({"xya"}));
  EXPECT_EQ(basic("a\\{2\\}bc"), set({"abc"}));
  EXPECT_EQ(basic("ab\\{0,1\\}c"), kNone);
  EXPECT_EQ(basic("ab\\{,3\\}cd"), set({"cd"}));
  EXPECT_EQ(basic("ab\\{2,\\}cd"), set({"bcd"}));
  EXPECT_EQ(basic("\\(ab\\)*cd"), set({"cd"}));
  EXPECT_EQ(basic("\\(ab\\)\\{1,3\\}cd"), set({"abcd"}));
  // '*' first, after \( or \| or ^ is a literal: taken as a break, never as a character.
  EXPECT_EQ(basic("*abc"), set({"abc"}));
  EXPECT_EQ(basic("\\(*ab\\)"), set({"ab"}));
  EXPECT_EQ(basic("^*ab"), set({"ab"}));
  EXPECT_EQ(basic("xy\\|*ab"), set({"ab", "xy"}));
  EXPECT_EQ(basic("abc**d"), set({"ab"}));
}

TEST(Factors, BasicBrackets) {
  EXPECT_EQ(basic("[]a]xyz"), set({"xyz"}));
  EXPECT_EQ(basic("[^]a]xyz"), set({"xyz"}));
  EXPECT_EQ(basic("[[:alpha:]]xyz"), set({"xyz"}));
  EXPECT_EQ(basic("[[=a=]]xyz"), set({"xyz"}));
  EXPECT_EQ(basic("[[.-.]]xyz"), set({"xyz"}));
  EXPECT_EQ(basic("[a[.].]b]xyz"), set({"xyz"}));
  // A backslash is literal in a bracket: "[\]" is a whole bracket, then "ab]cd".
  EXPECT_EQ(basic("[\\]ab]cd"), set({"ab]cd"}));
}

TEST(Factors, BasicGroupsAndGnuEscapes) {
  EXPECT_EQ(basic("abc\\|de"), set({"abc", "de"}));
  EXPECT_EQ(basic("abc\\|d"), kNone);
  EXPECT_EQ(basic("x\\(ERROR\\|WARN\\).*disk"), set({"xERROR", "xWARN"}));
  EXPECT_EQ(basic("\\(ab\\)\\1cd").value().size(), 1u);
  EXPECT_EQ(basic("\\<word\\>"), set({"word"}));
  EXPECT_EQ(basic("ab\\wcde"), set({"cde"}));
  EXPECT_EQ(basic("ab\\Scde\\bfghi"), set({"fghi"}));
  EXPECT_EQ(basic("\\`abc\\'"), set({"abc"}));
  EXPECT_EQ(basic("a^bc"), set({"bc"}));
  EXPECT_EQ(basic("ab$c"), set({"ab"}));
}

TEST(Factors, Extended) {
  EXPECT_EQ(ere("Failed password for .* from [0-9.]+"), set({"Failed password for "}));
  const Factors ew = ere("(ERROR|WARN).*disk");
  EXPECT_TRUE(ew == set({"disk"}) || ew == set({"ERROR", "WARN"}));
  EXPECT_EQ(ere("(ERROR|WARN).*d"), set({"ERROR", "WARN"}));
  EXPECT_EQ(ere("abc|de"), set({"abc", "de"}));
  EXPECT_EQ(ere("abc|d"), kNone);
  EXPECT_EQ(ere("abc|"), kNone);
  EXPECT_EQ(ere("a(b|c)d"), set({"abd", "acd"}));
  EXPECT_EQ(ere("(abc|de)fg"), set({"abcfg", "defg"}));
  EXPECT_EQ(ere("(a|)bc"), set({"abc", "bc"}));
  EXPECT_EQ(ere("(ab)+cd"), set({"abcd"}));
  EXPECT_EQ(ere("(ab)*cd"), set({"cd"}));
  EXPECT_EQ(ere("(ab)?cd"), set({"cd"}));
  EXPECT_EQ(ere("ab{,2}cd"), set({"cd"}));
  EXPECT_EQ(ere("ab{2,3}cd"), set({"bcd"}));
  EXPECT_EQ(ere("ab{0}cd"), set({"cd"}));
  EXPECT_EQ(ere("*abc"), set({"abc"}));
  EXPECT_EQ(ere("ab)cd").value().size(), 1u);  // an unmatched ')' is a literal; a break here
  // Escaped operators are literals; "\{" is a literal '{'.
  EXPECT_EQ(ere("\\{abc\\|d\\(e\\)\\+"), set({"{abc|d(e)+"}));
  // An invalid interval makes '{' a literal (RE_INVALID_INTERVAL_ORD): a break here.
  EXPECT_EQ(ere("xya{1z"), set({"xy"}));
  EXPECT_EQ(ere("xya{zw"), set({"xy"}));
  EXPECT_EQ(ere("wxyz{"), set({"wxy"}));
  EXPECT_EQ(ere("ab{1\\,2}cd"), kNone);  // glibc reads "\," as a comma there: not sure, give up
  EXPECT_EQ(ere("xyza{0000001}bcdef"), kNone);  // glibc: "{1}"; digits beyond ours: give up
  EXPECT_EQ(perl("xyza{0000001}bcdef"), kNone);
  EXPECT_EQ(ere("ab}cd"), set({"ab"}));
  EXPECT_EQ(ere("a+bc"), set({"abc"}));
  EXPECT_EQ(ere("[]a]xyz|[[:digit:]]uvw"), set({"uvw", "xyz"}));
  EXPECT_EQ(ere("^(abc)$"), set({"abc"}));
  EXPECT_EQ(ere("\\<(foo|bar)\\>"), set({"bar", "foo"}));
  EXPECT_EQ(ere("(a(b(c(d))))"), set({"abcd"}));
}

TEST(Factors, IgnoreCase) {
  const Opt i{.icase = true};
  const Opt iu{.icase = true, .utf8 = true};
  EXPECT_EQ(ere("Error|ERROR|error", i).value().size(), 1u);  // one literal after folding
  EXPECT_EQ(ere("(ab|AB)cd", i).value().size(), 1u);
  EXPECT_EQ(ere("risky", i), set({"risky"}));
  EXPECT_EQ(ere("kiss", iu), kNone);
  EXPECT_EQ(ere("abskcde", iu), set({"cde"}));
  EXPECT_EQ(ere("ab\xC3\xA9xyz", iu), set({"xyz"}));
  // Bytes >= 0x80 fold beyond ASCII under -i in any locale: a break.
  EXPECT_EQ(basic("ab\xE9xyz", i), set({"xyz"}));
  EXPECT_EQ(perl("abs\\.kcd", iu), set({"ab"}));
  EXPECT_EQ(perl("risk\\.ok", iu), set({".o"}));
  EXPECT_EQ(perl("rusk\\.k", iu), set({"ru"}));
}

// In a UTF-8 locale, under -i a GNU pattern's letter with counterparts beyond ASCII is an
// OR of them (as grep's DFA reads it), not a break: "user " needs "user " or "u" U+017F "er ".
TEST(Factors, IgnoreCaseInAUtf8Locale) {
  ASSERT_NE(std::setlocale(LC_ALL, "C.UTF-8"), nullptr);
  const Opt iu{.icase = true, .utf8 = true};
  EXPECT_EQ(ere("user [a-z]+", iu), set({"user ", "u\xC5\xBF" "er "}));
  EXPECT_EQ(ere("ab\xC3\xA9xyz", iu), set({"ab\xC3\x89xyz", "ab\xC3\xA9xyz"}));
  // i, s, s: two each beyond ASCII folding; 'k' has none (U+212A is not its counterpart).
  EXPECT_EQ(ere("kiss", iu).value().size(), 8u);
  EXPECT_EQ(basic("risk", iu).value().size(), 4u);
  EXPECT_EQ(perl("abs\\.kcd", iu), set({"ab"}));  // -P folds as PCRE2 does: still a break
  std::setlocale(LC_ALL, "C");
}

TEST(Factors, MultibyteCharacters) {
  const Opt u{.utf8 = true};
  // Without -i multibyte bytes are literal bytes, but a quantifier takes the whole character.
  EXPECT_EQ(ere("caf\xC3\xA9", u), set({"caf\xC3\xA9"}));
  EXPECT_EQ(ere("abc\xC3\xA9*de", u), set({"abc"}));
  EXPECT_EQ(basic("abc\xC3\xA9\\?de", u), set({"abc"}));
  EXPECT_EQ(basic("abc\xC3\xA9\\?de"), set({"abc"}));  // any locale: never half a character
  EXPECT_EQ(perl("x\xE2\x82\xAC+yz", u), set({"\xE2\x82\xACyz"}));
}

TEST(Factors, MinLength) {
  EXPECT_EQ(ere("ab|c", {.min = 1}), set({"ab", "c"}));
  EXPECT_EQ(ere("ab|c", {.min = 2}), kNone);
  EXPECT_EQ(ere("abcd.ef", {.min = 5}), kNone);
  EXPECT_EQ(ere("abcd.efghi", {.min = 5}), set({"efghi"}));
}

// fewest: the set with the fewest literals (a date template's '/' rather than its twelve
// month names, which every syslog line holds one of), then the longer.
TEST(Factors, FewestLiterals) {
  const std::string date = "(?=^|\\b|\\W)((?P<d>3[01]|[12]\\d|0?[1-9])/(?P<b>jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)"
                           "[^/]*/(?P<Y>\\d{4}):(?P<H>[0-2]?\\d):(?P<M>[0-5]\\d))";
  EXPECT_EQ(perl(date, {.min = 1}).value().size(), 12u);
  EXPECT_EQ(perl(date, {.min = 1, .fewest = true}), set({"/"}));
  EXPECT_EQ(ere("(abc|abd)x+yy", {.min = 1, .fewest = true}), set({"xyy"}));
  EXPECT_EQ(ere("(abc|abd)x+yy", {.min = 1}), set({"abcx", "abdx"}));
}

TEST(Factors, Perl) {
  EXPECT_EQ(perl("Failed password for .* from [0-9.]+"), set({"Failed password for "}));
  EXPECT_EQ(perl("foo\\.bar\\/baz"), set({"foo.bar/baz"}));
  EXPECT_EQ(perl("(?:abc|def)gh"), set({"abcgh", "defgh"}));
  EXPECT_EQ(perl("^(?<host>\\S+) sshd\\[\\d+\\]"), set({" sshd["}));
  EXPECT_EQ(perl("(?P<h>ab|cd)ef"), set({"abef", "cdef"}));
  EXPECT_EQ(perl("(?'h'ab)cd"), set({"abcd"}));
  EXPECT_EQ(perl("(?>abc)d"), set({"abcd"}));
  EXPECT_EQ(perl("ab+?cd"), set({"bcd"}));
  EXPECT_EQ(perl("ab++cd"), set({"bcd"}));
  EXPECT_EQ(perl("ab*+cd"), set({"cd"}));
  EXPECT_EQ(perl("a{2}bc"), set({"abc"}));
  EXPECT_EQ(perl("a{2,}?bc"), set({"abc"}));
  EXPECT_EQ(perl("ab{0,3}cd"), set({"cd"}));
  EXPECT_EQ(perl("a{x}bc"), set({"a{x}bc"}));
  EXPECT_EQ(perl("\\Qa.b*\\E*cd"), set({"a.b"}));
  EXPECT_EQ(perl("\\Q(x)\\Eyz"), set({"(x)yz"}));
  EXPECT_EQ(perl("[\\]a]bc"), set({"bc"}));
  EXPECT_EQ(perl("[]a]bc"), set({"bc"}));
  EXPECT_EQ(perl("[[:alpha:]]bc"), set({"bc"}));
  EXPECT_EQ(perl("\\d+abc\\w\\s\\bxyz"), set({"abc"}));
  EXPECT_EQ(perl("\\d+abcd\\w\\s\\bxyz"), set({"abcd"}));
  // A lookaround matches the empty string: its neighbours stay adjacent, its content adds nothing.
  EXPECT_EQ(perl("abc(?=x)"), set({"abc"}));
  EXPECT_EQ(perl("ab(?!x)cd"), set({"abcd"}));
  EXPECT_EQ(perl("(?<=x)abc"), set({"abc"}));
  EXPECT_EQ(perl("a(?<!x|yz)bc(?=(?:d|e)f)"), set({"abc"}));
  EXPECT_EQ(perl("(?:[0-9a-f]{1,4}|(?<=:):)host"), set({"host"}));
  EXPECT_EQ(perl("(?=abc)"), kNone);
  // A conditional group is one of its branches, or nothing: optional.
  EXPECT_EQ(perl("(?<u>x)?abc(?(<u>)def|ghi)jk"), set({"abc"}));
  EXPECT_EQ(perl("(a)?(?(1)bc|de)fgh"), set({"fgh"}));
  EXPECT_EQ(perl("ab(?(?=x)c|d)"), kNone);
  // A back-reference by name matches what its group took: a break.
  EXPECT_EQ(perl("(?P<c>[0-9]+): error:(?P=c):SSL"), set({": error:"}));
  EXPECT_EQ(perl("(?P<c>x)abc(?P=c)+de"), set({"xabc"}));
  // Not understood: give up on the whole pattern.
  for (const char* p : {"(?i)abc", "\\x41bc", "abc\\p{L}",
                        "abc\\N{U+41}", "ab\\Kcd", "(*UTF)abc", "abc\\Edef", "ab{,3}cd", "ab{ 2 }cd", "abc\\1",
                        "(?#c)abc", "(?i:abc)", "abc(?1)", "\\cJabc"})
    EXPECT_EQ(perl(p), kNone) << p;
}

// ---------------------------------------------------------------------------------------
// Property: random patterns against the real engines.

struct Stats {
  std::size_t patterns = 0;  // patterns that compiled
  std::size_t answered = 0;  // (pattern, options) pairs with factors
  std::size_t matches = 0;   // matches checked against factors
};

bool contains_factor(std::string_view text, const std::vector<std::string>& f, bool icase) {
  auto fold = [](std::string s) {
    for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    return s;
  };
  const std::string t = icase ? fold(std::string(text)) : std::string(text);
  return std::any_of(f.begin(), f.end(),
                     [&](const std::string& s) { return t.find(icase ? fold(s) : s) != std::string::npos; });
}

std::string show(const std::vector<std::string>& f) {
  std::string out;
  for (const auto& s : f) out += "\"" + s + "\" ";
  return out;
}

class Generator {
 public:
  Generator(std::uint64_t seed, std::vector<std::string> atoms, std::vector<std::string> quants, std::string open,
            std::string close, std::string alt)
      : rng_(seed), atoms_(std::move(atoms)), quants_(std::move(quants)), open_(std::move(open)),
        close_(std::move(close)), alt_(std::move(alt)) {}

  std::string pattern() {
    std::string p = alternation(0);
    if (pick(8) == 0) {  // some noise: an unbalanced or misplaced token anywhere
      const std::string noise[] = {open_, close_, alt_, quants_[pick(3)]};
      p.insert(pick(p.size() + 1), noise[pick(4)]);
    }
    return p;
  }

  // Subjects over the pattern's alphabet, and some glued from pieces of the pattern.
  std::string subject(const std::string& pattern) {
    static const std::string kChars = "abcabcabcABC.*+?{}()|^$[]\\,1 -";
    std::string s;
    const std::size_t n = pick(14);
    for (std::size_t i = 0; i < n; ++i) {
      if (!pattern.empty() && pick(3) == 0) {
        const std::size_t at = pick(pattern.size());
        s += pattern.substr(at, 1 + pick(4));
      } else if (!letters_.empty()) {
        s += letters_[pick(letters_.size())];
      } else {
        s += kChars[pick(pick(2) ? 6 : kChars.size())];
      }
    }
    return s;
  }

  // Subjects made of these strings (characters) instead of the ASCII default.
  void set_letters(std::vector<std::string> letters) { letters_ = std::move(letters); }

  std::size_t pick(std::size_t n) { return n == 0 ? 0 : std::uniform_int_distribution<std::size_t>(0, n - 1)(rng_); }

 private:
  std::string alternation(int depth) {
    std::string p = concatenation(depth);
    while (pick(5) == 0) p += alt_ + concatenation(depth);
    return p;
  }

  std::string concatenation(int depth) {
    std::string p;
    const std::size_t n = pick(7);
    for (std::size_t i = 0; i < n; ++i) {
      if (depth < 3 && pick(6) == 0) {
        // A group repeated by a plain quantifier only: glibc's epsilon closures blow up on
        // nested groups under stacked quantifiers and intervals (seconds per pattern).
        p += open_ + alternation(depth + 1) + close_;
        if (pick(4) == 0) p += quants_[pick(3)];
      } else {
        // A '*' atom only where a BRE reads it as a literal (first in a branch or group), so
        // that it never stacks another quantifier onto a group (see above).
        std::string atom = atoms_[pick(atoms_.size())];
        if (atom == "*" && i > 0) atom = "a";
        p += atom;
        if (pick(4) == 0) p += quantifier(depth);
      }
    }
    return p;
  }

  // glibc copies a repeated subexpression per count: nested intervals grow its automaton
  // exponentially, so a pattern gets at most two. Stacked quantifiers inside a repeated
  // group make its matcher take seconds: only outside groups.
  std::string quantifier(int depth) {
    std::string q = quants_[pick(quants_.size())];
    if (q.find('{') != std::string::npos && ++intervals_ > 2) q = quants_[0];
    if (depth > 0 && (q == "**" || q == "\\+\\?" || q == "+?")) q = quants_[0];
    return q;
  }

  std::mt19937_64 rng_;
  int intervals_ = 0;
  std::vector<std::string> atoms_, quants_, letters_;
  std::string open_, close_, alt_;
};

// Checks one compiled pattern's matches (at every start of every subject) against `f`.
template <typename Match>
void check_matches(Generator& gen, const std::string& pattern, const std::vector<std::string>& f, bool icase,
                   std::uint64_t seed, Stats& stats, Match match) {
  for (int k = 0; k < 6; ++k) {
    const std::string subject = gen.subject(pattern);
    for (std::size_t start = 0; start <= subject.size(); ++start) {
      const std::optional<std::size_t> end = match(subject, start);
      if (!end) continue;
      ++stats.matches;
      const std::string_view text = std::string_view(subject).substr(start, *end - start);
      ASSERT_TRUE(contains_factor(text, f, icase))
          << "seed " << seed << " pattern \"" << pattern << "\" icase " << icase << " subject \"" << subject
          << "\" match \"" << text << "\" factors " << show(f);
    }
  }
}

// Options for one round: -i or not, UTF-8 flag (more conservative only; the locale is C),
// min_length 1 or 2, the default choice of set or the fewest literals.
std::vector<FactorOptions> option_sets(bool icase) {
  return {FactorOptions{icase, false, 1}, FactorOptions{icase, false, 2}, FactorOptions{icase, true, 1},
          FactorOptions{icase, true, 1, true}};
}

void posix_property(Syntax syntax, std::uint64_t base, int cases, Stats& stats) {
  const bool extended = syntax == Syntax::kExtended;
  std::vector<std::string> atoms = {"a", "b", "c", "a", "b", "c", "ab", "A", ".", "[ab]", "[^a]", "[]a]", "[[:alpha:]]",
                                    "[[.a.]]", "[\\]", "^", "$", "\\<", "\\>", "\\b", "\\B", "\\w", "\\W", "\\s",
                                    "\\`", "\\'", "\\1", "\\.", "\\*", "\\[", "\\a", "\\^", "\\$", "*", ",", "1"};
  std::vector<std::string> quants;
  if (extended) {
    atoms.insert(atoms.end(), {"\\(", "\\)", "\\|", "\\{", "\\+", "\\?", "}", "{", "{1", "{a}", "{1,x}"});
    quants = {"*", "+", "?", "{1}", "{0,2}", "{2,}", "{,1}", "{0}", "{1,1}", "**", "+?"};
  } else {
    atoms.insert(atoms.end(), {"(", ")", "|", "{", "}", "+", "?", "\\}"});
    quants = {"*", "\\+", "\\?", "\\{1\\}", "\\{0,2\\}", "\\{2,\\}", "\\{,1\\}", "\\{0\\}", "**", "\\+\\?"};
  }
  for (int n = 0; n < cases; ++n) {
    const std::uint64_t seed = base + static_cast<std::uint64_t>(n);
    Generator gen(seed, atoms, quants, extended ? "(" : "\\(", extended ? ")" : "\\)", extended ? "|" : "\\|");
    const std::string pattern = gen.pattern();
    for (const bool icase : {false, true}) {
      re_pattern_buffer buf{};
      re_set_syntax((extended ? RE_SYNTAX_EGREP : RE_SYNTAX_GREP) | (icase ? RE_ICASE : 0));
      if (re_compile_pattern(pattern.data(), pattern.size(), &buf) != nullptr) {
        regfree(&buf);
        break;
      }
      stats.patterns += !icase;
      re_registers regs{};
      auto match = [&](const std::string& subject, std::size_t start) -> std::optional<std::size_t> {
        const regoff_t at = re_search(&buf, subject.data(), static_cast<regoff_t>(subject.size()),
                                      static_cast<regoff_t>(start), 0, &regs);
        if (at < 0) return std::nullopt;
        return static_cast<std::size_t>(regs.end[0]);
      };
      for (const FactorOptions& o : option_sets(icase)) {
        const Factors f = required_factors(pattern, syntax, o);
        if (!f) continue;
        ++stats.answered;
        check_matches(gen, pattern, *f, icase, seed, stats, match);
        if (::testing::Test::HasFatalFailure()) break;
      }
      std::free(regs.start);
      std::free(regs.end);
      regfree(&buf);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

TEST(FactorsProperty, Basic) {
  Stats stats;
  posix_property(Syntax::kBasic, 1'000'000, 20'000, stats);
  std::printf("kBasic: %zu patterns compiled, %zu answers, %zu matches checked\n", stats.patterns, stats.answered,
              stats.matches);
  EXPECT_GT(stats.matches, 10'000u);
}

TEST(FactorsProperty, Extended) {
  Stats stats;
  posix_property(Syntax::kExtended, 2'000'000, 20'000, stats);
  std::printf("kExtended: %zu patterns compiled, %zu answers, %zu matches checked\n", stats.patterns,
              stats.answered, stats.matches);
  EXPECT_GT(stats.matches, 10'000u);
}

void perl_property(std::uint64_t base, int cases, Stats& stats) {
  const std::vector<std::string> atoms = {
      "a", "b", "c", "a", "b", "c", "ab", "A", ".", "[ab]", "[^a]", "[]a]", "[\\]a]", "[[:alpha:]]", "\\d", "\\w",
      "\\s", "\\W", "\\.", "\\*", "\\(", "\\{", "\\Qa.\\E", "\\Q\\E", "\\Qb", "^", "$", "\\b", "\\B", "\\A", "\\z",
      "\\Z", "{", "}", "{x}", "]", ",", "1", "(?:a|b)", "(?<n>c)", "(?|a|bc)", "(?>ab|a)", "(?=a)", "(?!b)", "(?<=c)", "(?<!a)", "(?=ab|c)", "(?(<n>)ab|c)", "(?(<n>)bc)", "(?(DEFINE)ab)", "(?P=n)"};
  const std::vector<std::string> quants = {"*", "+", "?", "*?", "+?", "??", "*+", "++", "?+", "{2}", "{1,2}", "{0,1}",
                                           "{2,}", "{0}", "{1}?"};
  for (int n = 0; n < cases; ++n) {
    const std::uint64_t seed = base + static_cast<std::uint64_t>(n);
    Generator gen(seed, atoms, quants, "(", ")", "|");
    const std::string pattern = gen.pattern();
    for (const bool icase : {false, true}) {
      int error = 0;
      PCRE2_SIZE offset = 0;
      pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                       PCRE2_DOLLAR_ENDONLY | (icase ? PCRE2_CASELESS : 0), &error, &offset, nullptr);
      if (code == nullptr) break;
      stats.patterns += !icase;
      pcre2_match_data* data = pcre2_match_data_create_from_pattern(code, nullptr);
      auto match = [&](const std::string& subject, std::size_t start) -> std::optional<std::size_t> {
        const int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(subject.data()), subject.size(), start,
                                   PCRE2_ANCHORED, data, nullptr);
        if (rc < 0) return std::nullopt;
        return pcre2_get_ovector_pointer(data)[1];
      };
      for (const FactorOptions& o : option_sets(icase)) {
        const Factors f = required_factors(pattern, Syntax::kPerl, o);
        if (!f) continue;
        ++stats.answered;
        check_matches(gen, pattern, *f, icase, seed, stats, match);
        if (::testing::Test::HasFatalFailure()) break;
      }
      pcre2_match_data_free(data);
      pcre2_code_free(code);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

TEST(FactorsProperty, Perl) {
  Stats stats;
  perl_property(3'000'000, 20'000, stats);
  std::printf("kPerl: %zu patterns compiled, %zu answers, %zu matches checked\n", stats.patterns, stats.answered,
              stats.matches);
  EXPECT_GT(stats.matches, 10'000u);
}

// UTF-8 under -i: 'k' and 's' also match U+212A KELVIN SIGN and U+017F LONG S, and
// non-ASCII letters fold to other bytes; the answers (utf8 on) must hold in a UTF-8 locale.
TEST(FactorsProperty, Utf8IgnoreCase) {
  ASSERT_NE(std::setlocale(LC_ALL, "C.UTF-8"), nullptr);
  const std::vector<std::string> atoms = {"a", "k", "s", "K", "S", "ak", "\xC3\xA9", "\xC3\x89", ".", "[ks]", "\\w"};
  const std::vector<std::string> letters = {"a", "k", "s", "K", "S", "\xE2\x84\xAA", "\xC5\xBF", "\xC3\xA9",
                                            "\xC3\x89", "b"};
  Stats stats;
  for (int n = 0; n < 4'000 && !HasFatalFailure(); ++n) {
    const std::uint64_t seed = 4'000'000 + static_cast<std::uint64_t>(n);
    const bool extended = n % 2 == 0;
    Generator gen(seed, atoms, {"*", "+", "?"}, "(", ")", "|");
    gen.set_letters(letters);
    const std::string pattern = gen.pattern();
    const Syntax syntax = extended ? Syntax::kExtended : Syntax::kPerl;
    const Factors f = required_factors(pattern, syntax, FactorOptions{true, true, 1});
    if (extended) {
      re_pattern_buffer buf{};
      re_set_syntax(RE_SYNTAX_EGREP | RE_ICASE);
      if (re_compile_pattern(pattern.data(), pattern.size(), &buf) != nullptr) {
        regfree(&buf);
        continue;
      }
      ++stats.patterns;
      re_registers regs{};
      if (f) {
        ++stats.answered;
        check_matches(gen, pattern, *f, true, seed, stats, [&](const std::string& subject, std::size_t start) {
          const regoff_t at = re_search(&buf, subject.data(), static_cast<regoff_t>(subject.size()),
                                        static_cast<regoff_t>(start), 0, &regs);
          return at < 0 ? std::nullopt : std::optional<std::size_t>(regs.end[0]);
        });
      }
      std::free(regs.start);
      std::free(regs.end);
      regfree(&buf);
    } else {
      int error = 0;
      PCRE2_SIZE offset = 0;
      pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                       PCRE2_CASELESS | PCRE2_UTF | PCRE2_MATCH_INVALID_UTF, &error, &offset, nullptr);
      if (code == nullptr) continue;
      ++stats.patterns;
      pcre2_match_data* data = pcre2_match_data_create_from_pattern(code, nullptr);
      if (f) {
        ++stats.answered;
        check_matches(gen, pattern, *f, true, seed, stats, [&](const std::string& subject, std::size_t start) {
          const int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(subject.data()), subject.size(), start,
                                     PCRE2_ANCHORED, data, nullptr);
          return rc < 0 ? std::nullopt : std::optional<std::size_t>(pcre2_get_ovector_pointer(data)[1]);
        });
      }
      pcre2_match_data_free(data);
      pcre2_code_free(code);
    }
  }
  std::setlocale(LC_ALL, "C");
  std::printf("UTF-8 -i: %zu patterns compiled, %zu answers, %zu matches checked\n", stats.patterns, stats.answered,
              stats.matches);
  EXPECT_GT(stats.matches, 1'000u);
}

}  // namespace
}  // namespace gpufilter::regex
