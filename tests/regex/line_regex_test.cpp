// Unit tests of gpufilter::regex's LineRegex: grep's error messages, warnings, the
// fixed-string rule, and the -w/-x/-o walk on cases whose answers were taken from GNU
// grep 3.8 (LC_ALL=C). The differential suites (tests/cli/regex_differential_test.cpp)
// compare whole runs with grep.
#include <gtest/gtest.h>

#include <clocale>

#include <string>
#include <tuple>
#include <vector>

#include "gpufilter/regex/line_regex.hpp"

namespace gpufilter::regex {
namespace {

RegexOptions basic(bool word = false, bool whole_line = false) {
  RegexOptions o;
  o.syntax = Syntax::kBasic;
  o.word = word;
  o.whole_line = whole_line;
  return o;
}

RegexOptions extended() {
  RegexOptions o;
  o.syntax = Syntax::kExtended;
  return o;
}

std::vector<std::string> errors_of(const std::vector<std::string>& patterns, Syntax syntax,
                                   const std::vector<PatternOrigin>& origins = {}) {
  RegexOptions o;
  o.syntax = syntax;
  try {
    compile(patterns, o, origins);
  } catch (const RegexError& e) {
    return e.messages();
  }
  return {};
}

// Every non-empty -o part of `line`, as grep prints them.
std::vector<std::string> parts(LineRegex& r, std::string_view line) {
  std::vector<std::string> out;
  std::size_t from = 0;
  Found f;
  while (from <= line.size() && r.find(line, from, {}, f)) {
    if (f.length == 0) {
      from = f.begin + 1;
      continue;
    }
    out.emplace_back(line.substr(f.begin, std::min(f.length, line.size() - f.begin)));
    from = f.begin + f.length;
  }
  return out;
}

TEST(LineRegex, CompileErrorsAreGrepsMessages) {
  EXPECT_EQ(errors_of({"a\\("}, Syntax::kBasic), std::vector<std::string>{"Unmatched ( or \\("});
  EXPECT_EQ(errors_of({"a("}, Syntax::kExtended), std::vector<std::string>{"Unmatched ( or \\("});
  EXPECT_EQ(errors_of({"[b-a]"}, Syntax::kBasic), std::vector<std::string>{"Invalid range end"});
  EXPECT_EQ(errors_of({"a\\{1"}, Syntax::kBasic), std::vector<std::string>{"Unmatched \\{"});
  EXPECT_EQ(errors_of({"\\"}, Syntax::kBasic), std::vector<std::string>{"Trailing backslash"});
  EXPECT_EQ(errors_of({"[[:foo:]]"}, Syntax::kBasic), std::vector<std::string>{"Invalid character class name"});
  EXPECT_EQ(errors_of({"[:space:]"}, Syntax::kBasic),
            std::vector<std::string>{"character class syntax is [[:space:]], not [:space:]"});
  EXPECT_EQ(errors_of({"\\(a\\)\\2"}, Syntax::kBasic), std::vector<std::string>{"Invalid back reference"});
  EXPECT_EQ(errors_of({"a{2,1}"}, Syntax::kExtended), std::vector<std::string>{"Invalid content of \\{\\}"});
  EXPECT_EQ(errors_of({"("}, Syntax::kPerl), std::vector<std::string>{"missing closing parenthesis"});
  EXPECT_EQ(errors_of({"a", "b"}, Syntax::kPerl),
            std::vector<std::string>{"the -P option only supports a single pattern"});
  EXPECT_TRUE(errors_of({"a{1", "x{"}, Syntax::kExtended).empty());  // '{' is literal there
}

// Repetitions that glibc (and grep) would expand without bound are refused before glibc
// runs (regex_fuzz found "m" and 38 '+': 2 GB and counting); what grep takes in a
// reasonable amount of memory still compiles.
TEST(LineRegex, RepetitionsExpandedBeyondBoundsAreRefused) {
  const std::string refusal =
      "the expression repeats too much for the regex matcher (more than 131072 copies, or options nested too deep, "
      "once its repetitions are expanded); repeat less, or nest fewer repetitions";
  for (const auto& [pattern, syntax] : std::vector<std::pair<std::string, Syntax>>{
           {"m{2}{2}{2}{2}{2}{2}{2}{2}{2}{2}{2}{2}{2}{2}{2}{2}{2}{2}", Syntax::kExtended},
           {"a{1,32767}", Syntax::kExtended},
           {"a\\{1,32767\\}", Syntax::kBasic},
           {"(((((((((((((((((((((m+)+)+)+)+)+)+)+)+)+)+)+)+)+)+)+)+)+)+)+)+)+", Syntax::kExtended},
           {"((a{100}){100}){100}", Syntax::kExtended}}) {
    EXPECT_EQ(errors_of({pattern}, syntax), std::vector<std::string>{refusal}) << pattern;
  }
  // Stacked '+' are one '+' (collapse_repeats): "m" and 38 '+' took 2 GB before.
  for (const std::string& ok : std::vector<std::string>{"a{1,1000}", "x{32767}", "m" + std::string(38, '+'), "[+++++++++++++++++++++++++++++++++]",
                               "[0-9]{1,3}(\\.[0-9]{1,3}){3}", "\\+\\+\\+\\+\\+\\+\\+\\+\\+\\+\\+\\+\\+\\+\\+\\+\\+\\+\\+\\+"})
    EXPECT_TRUE(errors_of({ok}, Syntax::kExtended).empty()) << ok;
  // Past RE_DUP_MAX, glibc's own message, as grep gives it.
  EXPECT_EQ(errors_of({"a{1,40000}"}, Syntax::kExtended), std::vector<std::string>{"Regular expression too big"});
}

// Repetitions that copy what can match the empty string, nested: glibc's compile time
// grows exponentially with their depth (regex_fuzz found "^(++++)+++++)$", 37 s; "(^|$)*+++"
// ran for more than ten minutes). Refused past a depth; shallower ones and stacked '*' pass.
TEST(LineRegex, DeepRepetitionsOfTheEmptyStringAreRefused) {
  const std::string refusal =
      "the expression nests repetitions of what can match the empty string too deep for the "
      "regex matcher, which takes exponential time to compile them; nest fewer repetitions";
  for (const auto& [pattern, syntax] : std::vector<std::pair<std::string, Syntax>>{
           {"^((((()+)+)+)+)+", Syntax::kExtended},
           {"((((^|$)*)+)+)+", Syntax::kExtended},
           {"((((^$)+)+)+)+", Syntax::kExtended},
           {"(((((((((a*)+)+)+)+)+)+)+)+)+", Syntax::kExtended},
           {"^(a*){2}{2}{2}{2}{2}", Syntax::kExtended},
           {"0*{3309}+", Syntax::kExtended},  // a large operand that can match empty, repeated again
           {"0*{,309}+", Syntax::kExtended},  // its nested options, plussed (fuzzed)
           {"()?{309,}", Syntax::kExtended},   // copies of an optional empty group, then a loop (fuzzed)
           {"^()?{20,}", Syntax::kExtended},   // (grep 3.8: 3 s)
           {"(a?)?{16,}", Syntax::kExtended},
           {"\\(a\\|\\)\\?\\{15,\\}", Syntax::kBasic},
           {"^()?{309}", Syntax::kExtended},   // bounded, behind an anchor (grep 3.8: memory exhausted)
           {"()?{309}$", Syntax::kExtended},
           {"0*{,2}{20}*", Syntax::kExtended},  // a loop over copies of optional copies (fuzzed; grep 3.8 hangs)
           {"(0*){,4}{10}*", Syntax::kExtended},
           {"0*{3309}", Syntax::kExtended},   // many copies of what can match empty
           {"0*{,309}", Syntax::kExtended},
           {"(a*){5000}", Syntax::kExtended},
           {"(a?){,1000}", Syntax::kExtended},
           {"((a?){,10}){100}", Syntax::kExtended},
           {"(0*){1,30}{20}", Syntax::kExtended},
           {"0*{,309}{39}", Syntax::kExtended},
           {"\\(0*\\)\\{1,80\\}*", Syntax::kBasic},
           {"^((((()+)*)+)+)+", Syntax::kExtended},
           {"\\(\\(\\(\\(\\(\\(\\(\\(\\(\\(x*\\)*\\)*\\)*\\)*\\)*\\)*\\)*\\)*\\)*\\)*", Syntax::kBasic},
           {"\\(\\(\\(\\(\\<\\|a\\)*\\)\\+\\)\\+\\)\\+", Syntax::kBasic},
           // Loops over groups that can match empty, one after another behind an anchor:
           // "^()*{20,}" took 14 s (regex_fuzz found "++)*{309,}..." under -x, whose
           // wrapper adds the '^'), "(()*{12}$)+" 2.2 s (grep 3.8 the same).
           {"^()*{17}", Syntax::kExtended},
           {"^()*{20,}", Syntax::kExtended},
           {"^x*(()*){17}", Syntax::kExtended},
           {"(^)()*{17}", Syntax::kExtended},
           {"a|$()*{17}", Syntax::kExtended},
           {"\\<\\(\\(a*\\)*\\)\\{17\\}", Syntax::kBasic},
           {"(()*{8}$)+", Syntax::kExtended},
           {"^(++)*{309,}3009,}3,30*zz{,0.)$", Syntax::kExtended}}) {
    EXPECT_EQ(errors_of({pattern}, syntax), std::vector<std::string>{refusal}) << pattern;
  }
  for (const auto& [pattern, syntax] : std::vector<std::pair<std::string, Syntax>>{
           {"^()++++$", Syntax::kExtended},
           {"^()*{16}", Syntax::kExtended},      // 0.3 s
           {"^x()*{40}", Syntax::kExtended},     // a character between: no cost
           {"()*{40}$", Syntax::kExtended},      // the anchor after them: none either
           {"^a|()*{40}", Syntax::kExtended},    // nor in another alternative
           {"(()*{16}$){2}", Syntax::kExtended}, // the second copy's loops follow the '$'
           {"^(a*){160,}", Syntax::kExtended},   // copies of a group, one loop
           {"(^|$)*+", Syntax::kExtended},
           {"(a*)++++++++", Syntax::kExtended},
           {"((a*)*)*", Syntax::kExtended},
           {"(a|)+++++", Syntax::kExtended},
           {"x" + std::string(9, '*'), Syntax::kBasic},
           // Stacked operators are one (collapse_repeats), however many.
           {"^()+*+++", Syntax::kExtended},
           {"(^|$)*+++", Syntax::kExtended},
           {"0*{500}", Syntax::kExtended},
           {"(a?){,200}", Syntax::kExtended},
           {"a{,3000}", Syntax::kExtended},
           {"(^|c|)+", Syntax::kExtended},  // glibc's search of it without registers ends
           {"a" + std::string(300, '|') + "b", Syntax::kExtended},  // one empty alternative
           {"(^|b)+", Syntax::kExtended},  // ("(^a|b)+" holds an anchor beside text: refused)
           {"(|ba)\\1+++", Syntax::kExtended},  // collapsed after a back-reference
           {"(a?){,60}{2}", Syntax::kExtended},
           {"(" + std::string(6000, 'w') + "|)?x", Syntax::kExtended},  // one copy of a large group
           {"(" + std::string(600, 'w') + "|)*x", Syntax::kExtended},
           {"(0*){1,30}+", Syntax::kExtended},
           {"((a?){,60}b)+", Syntax::kExtended},
           {"(a*)" + std::string(30, '+'), Syntax::kExtended},
           {"x" + std::string(30, '*') + "\\+\\+\\+\\+\\+\\+\\+\\+\\+\\+\\+\\+\\+\\+\\+\\+\\+\\+", Syntax::kBasic},
           {"m" + std::string(12, '+'), Syntax::kExtended},
           {"()?{14,}", Syntax::kExtended},  // 0.06 s
           {"(a?){20,}", Syntax::kExtended},
           {"()?{20}", Syntax::kExtended},
           {"()?{309}", Syntax::kExtended},
           {"^()?{100}", Syntax::kExtended},
           {"0*{,2}{10}*", Syntax::kExtended},  // 0.1 s
           {"0*{,9}{39}", Syntax::kExtended},
           {"^(a|b?)*(c+|d)*$", Syntax::kExtended}}) {
    EXPECT_TRUE(errors_of({pattern}, syntax).empty()) << pattern;
  }
}

// A repetition of a repetition: ERE "j+?" is "(j+)?", which matches the empty string; read
// as PCRE's lazy "j+?" (Hyperscan's text) it did not (regex_fuzz: an empty line under -w).
TEST(LineRegex, StackedQuantifiersRepeatTheRepetition) {
  for (const auto& [pattern, syntax] : std::vector<std::pair<std::string, Syntax>>{
           {"j+?", Syntax::kExtended}, {"j*?", Syntax::kExtended}, {"(ab)+?", Syntax::kExtended},
           {"j{2}?", Syntax::kExtended}, {"j\\+\\?", Syntax::kBasic}, {"\\(ab\\)\\{2\\}*", Syntax::kBasic}}) {
    for (const bool whole_line : {false, true}) {
      RegexOptions o;
      o.syntax = syntax;
      o.whole_line = whole_line;
      o.word = !whole_line;
      const auto r = compile({pattern}, o);
      const std::vector<std::uint32_t> all{0};
      EXPECT_TRUE(r->selects(0, "")) << pattern;
      EXPECT_TRUE(r->selects_any("", all, nullptr)) << pattern << (whole_line ? " -x" : " -w");
    }
  }
}

// With -w or -x a stray ')' closes the group the wrapper puts around the whole expression,
// so what follows it repeats everything before: regex_fuzz found "m+++++++)" and fourteen
// '+' under -E -w -x taking glibc past 2 GB (stacked '+' are one now; intervals are not).
// The wrapped text is measured too.
TEST(LineRegex, AStrayParenUnderWordOrLineRepeatsTheWrapperAndIsMeasured) {
  const std::string pattern = "m{9}){9}{9}{9}{9}{9}";
  for (const bool word : {false, true}) {
    RegexOptions o;
    o.syntax = Syntax::kExtended;
    o.word = word;
    o.whole_line = !word;
    try {
      compile({pattern}, o);
      ADD_FAILURE() << "compiled";
    } catch (const RegexError& e) {
      ASSERT_EQ(e.messages().size(), 1u);
      EXPECT_NE(e.messages()[0].find("repeats too much"), std::string::npos) << e.messages()[0];
    }
  }
  EXPECT_TRUE(errors_of({pattern}, Syntax::kExtended).empty());  // without a wrapper: 9^5 copies of ')'
  RegexOptions o;
  o.syntax = Syntax::kExtended;
  o.whole_line = true;
  EXPECT_NO_THROW(compile({"m+)+"}, o));
}

TEST(LineRegex, EveryBadPatternIsNamedWithItsFileAndLine) {
  const auto pats = std::make_shared<const std::string>("pats");
  const std::vector<PatternOrigin> origins{{nullptr, 0}, {pats, 1}, {pats, 2}};
  EXPECT_EQ(errors_of({"a\\(", "ok", "[x"}, Syntax::kBasic, origins),
            (std::vector<std::string>{"Unmatched ( or \\(", "pats:2: Unmatched [, [^, [:, [., or [="}));
}

TEST(LineRegex, WarnsOfRepetitionAtTheStartOfAnExtendedExpression) {
  EXPECT_EQ(warnings({"*a(+b|{1}c)"}, Syntax::kExtended),
            (std::vector<std::string>{"warning: * at start of expression", "warning: + at start of expression",
                                      "warning: {...} at start of expression"}));
  EXPECT_TRUE(warnings({"*a", "a\\|*b", "\\(*a\\)"}, Syntax::kBasic).empty());
  EXPECT_TRUE(warnings({"a**", "a+*", "a{1}{2}", "x{"}, Syntax::kExtended).empty());
}

// grep's DFA reads the patterns in turn and stops at its first error: the warnings before
// it come first, those after it never (glibc's own errors come before any warning).
TEST(LineRegex, WarningsBeforeAnErrorOfGrepsDfaComeWithIt) {
  const std::string space = "character class syntax is [[:space:]], not [:space:]";
  EXPECT_EQ(errors_of({"*a", "b", "[:space:]", "+c"}, Syntax::kExtended),
            (std::vector<std::string>{"warning: * at start of expression", space}));
  EXPECT_EQ(errors_of({"*[:space:]|+a"}, Syntax::kExtended),
            (std::vector<std::string>{"warning: * at start of expression", space}));
  EXPECT_EQ(errors_of({"[:space:]|*a"}, Syntax::kExtended), std::vector<std::string>{space});
  EXPECT_EQ(errors_of({"*a", "a("}, Syntax::kExtended), std::vector<std::string>{"Unmatched ( or \\("});
}

TEST(LineRegex, PatternsWithoutOperatorsAreFixedStringsAsGrepMakesThem) {
  std::vector<std::string> fixed;
  EXPECT_TRUE(as_fixed_strings({"a+b", "c\\.d", "x|y", "{}"}, Syntax::kBasic, false, false, fixed));
  EXPECT_EQ(fixed, (std::vector<std::string>{"a+b", "c.d", "x|y", "{}"}));
  EXPECT_FALSE(as_fixed_strings({"a+b"}, Syntax::kExtended, false, false, fixed));
  EXPECT_FALSE(as_fixed_strings({"a\\+b"}, Syntax::kBasic, false, false, fixed));
  EXPECT_FALSE(as_fixed_strings({"a.b"}, Syntax::kBasic, false, false, fixed));
  EXPECT_FALSE(as_fixed_strings({"\\<a"}, Syntax::kBasic, false, false, fixed));
  EXPECT_FALSE(as_fixed_strings({"a\\"}, Syntax::kBasic, false, false, fixed));
  EXPECT_TRUE(as_fixed_strings({"a\\+b"}, Syntax::kExtended, false, false, fixed));
  EXPECT_EQ(fixed, std::vector<std::string>{"a+b"});
  // A BRE "\)" goes to the regex compiler, which refuses it; an ERE one is a ')'.
  EXPECT_FALSE(as_fixed_strings({"x\\)y", "z"}, Syntax::kBasic, false, false, fixed));
  EXPECT_TRUE(as_fixed_strings({"x\\)y", "z"}, Syntax::kExtended, false, false, fixed));
  EXPECT_EQ(fixed, (std::vector<std::string>{"x)y", "z"}));
  // -i in UTF-8: 'i' also matches U+0131 DOTLESS I, so it stays a regex; 'k' folds within
  // ASCII to grep (U+212A is no counterpart of it in dfa.c).
  EXPECT_FALSE(as_fixed_strings({"kilo"}, Syntax::kBasic, true, true, fixed));
  EXPECT_TRUE(as_fixed_strings({"kilo"}, Syntax::kBasic, true, false, fixed));
  EXPECT_TRUE(as_fixed_strings({"kelp"}, Syntax::kBasic, true, true, fixed));
  EXPECT_FALSE(as_fixed_strings({"a"}, Syntax::kPerl, false, false, fixed));
}

TEST(LineRegex, BackReferencesAreSeenAsGrepSeesThem) {
  EXPECT_TRUE(possible_backrefs("\\(a\\)\\1"));
  EXPECT_FALSE(possible_backrefs("a\\\\1"));
  EXPECT_FALSE(possible_backrefs("a\\"));
  EXPECT_TRUE(possible_backrefs("[\\1]"));  // a false alarm, as in grep: harmless
}

TEST(LineRegex, SelectsUnderWordAndLineRules) {
  auto r = compile({"ab*"}, basic(true));
  EXPECT_TRUE(r->selects(0, "x abb y"));
  EXPECT_FALSE(r->selects(0, "xabb"));
  EXPECT_TRUE(r->selects(0, "abbx a"));  // a later match is a word
  auto x = compile({"a\\|ab"}, basic(false, true));
  EXPECT_TRUE(x->selects(0, "ab"));
  EXPECT_FALSE(x->selects(0, "abc"));
  auto backref = compile({"\\(a*\\)b\\1"}, basic(true));
  EXPECT_TRUE(backref->selects(0, "x aabaa y"));
  EXPECT_FALSE(backref->selects(0, "xaabaa"));
}

TEST(LineRegex, OnlyMatchingPartsAreGreps) {
  // grep -o 'ab*\|b' <<< 'abbb bab' prints abbb, b, ab.
  auto r = compile({"ab*\\|b"}, basic());
  EXPECT_EQ(parts(*r, "abbb bab"), (std::vector<std::string>{"abbb", "b", "ab"}));
  // grep -ow 'ab\|aby\|xaby' <<< 'xaby' prints xaby.
  auto w = compile({"ab\\|aby\\|xaby"}, basic(true));
  EXPECT_EQ(parts(*w, "xaby"), std::vector<std::string>{"xaby"});
  // Empty matches print nothing: grep -o 'x*' <<< 'axxb' prints xx.
  auto e = compile({"x*"}, basic());
  EXPECT_EQ(parts(*e, "axxb"), std::vector<std::string>{"xx"});
  RegexOptions perl;
  perl.syntax = Syntax::kPerl;
  auto p = compile({"ab|a"}, perl);  // Perl takes the first alternative, not the longest
  EXPECT_EQ(parts(*p, "abab"), (std::vector<std::string>{"ab", "ab"}));
}

TEST(LineRegex, WholeLineWithWordTakesTheNewline) {
  auto r = compile({"a.c"}, basic(true, true));
  Found f;
  ASSERT_TRUE(r->find("abc", 0, {}, f));
  EXPECT_EQ(f.begin, 0u);
  EXPECT_EQ(f.length, 4u);
  EXPECT_TRUE(f.newline);
}

// find() keeps each pattern's next match along a walk (from 0, then further on): the
// spans are those of asking every pattern anew each time (the leftmost, then longest),
// also when a walk skips ahead, and a new walk over the same buffer with other bytes
// forgets the last one.
TEST(LineRegex, AWalkAlongOneLineKeepsEachPatternsNextMatch) {
  const std::vector<std::string> patterns = {"^b", "a", "ab*", "b a", "x$", "b.*x", ""};
  for (const auto& [word, whole_line] : {std::pair(false, false), std::pair(false, true), std::pair(true, true)}) {
  RegexOptions o = extended();
  o.word = word;
  o.whole_line = whole_line;
  auto all = compile(patterns, o);
  // Every pattern compiled anew for each question: nothing kept from an earlier one.
  const auto fresh = [&](std::string_view line, std::size_t from) {
    Found best{line.size() + 1, 0, false};
    for (const std::string& p : patterns) {
      Found f;
      if (compile({p}, o)->find(line, from, {}, f) &&
          (f.begin < best.begin || (f.begin == best.begin && f.length > best.length)))
        best = f;
    }
    return best;
  };
  std::string line = "abba ab a bx";
  for (int round = 0; round < 3; ++round) {
    for (const std::size_t step : {1, 3}) {
      for (std::size_t from = 0; from <= line.size(); from += step) {
        Found f;
        const Found want = fresh(line, from);
        const bool found = all->find(line, from, {}, f);
        ASSERT_EQ(found, want.begin <= line.size()) << line << " from " << from << " -w " << word << " -x " << whole_line;
        if (found) {
          EXPECT_EQ(std::tuple(f.begin, f.length, f.newline), std::tuple(want.begin, want.length, want.newline))
              << line << " from " << from << " -w " << word << " -x " << whole_line;
        }
      }
    }
    // The same size and, most likely, the same bytes' address; then a line -x takes.
    line.replace(0, line.size(), round == 0 ? "b ab abb aax" : "bbbbbbbbbbbx");
  }
  }
}

TEST(LineRegex, ACloneMatchesAlike) {
  auto r = compile({"[0-9]\\{3\\}"}, basic());
  auto c = r->clone();
  EXPECT_EQ(parts(*r, "a1234 56 789"), parts(*c, "a1234 56 789"));
}

// select_lines() decides a piece block by block, in one pass or line by line, whichever
// has been cheaper (HsSelect's Pace): a piece of many blocks goes both ways, and every
// way must select the lines that a fresh copy selects in a piece of that line alone (one
// pass: a copy's first block always goes that way; glibc's selects() would take minutes
// on the long lines).
TEST(LineRegex, SelectLinesInPiecesAgreesWithLineByLine) {
  const std::vector<std::string> patterns = {"Received block .* of size [0-9]+", "ERROR.*(disk|timeout)",
                                             "^[a-z]+ [0-9]{2}$", "x{3,}$", "z.*z.*z"};
  auto r = compile(patterns, extended());
  ASSERT_TRUE(r->prepare_lines());
  std::string piece;
  unsigned seed = 7;
  const auto next = [&seed] { return seed = seed * 1103515245u + 12345u, (seed >> 16) & 0x7fff; };
  const std::vector<std::string> parts = {"Received block ", "blk_1", " of size ", "42", "ERROR ", "disk", "timeout",
                                          "ab", " ", "17", "xxx", "z", "q", "\r"};
  while (piece.size() < (2u << 20)) {
    const unsigned kind = next() % 5000;
    if (kind == 0) piece += std::string(70000, 'x');  // a line longer than a block
    if (kind != 1)                                    // kind 1: an empty line
      for (unsigned n = next() % 8; n > 0; --n) piece += parts[next() % parts.size()];
    piece += '\n';
  }
  piece += "ERROR on disk";  // no final newline
  std::vector<const char*> expected, expected_ends;  // a line's end: its '\n', or the piece's end
  for (std::size_t begin = 0; begin < piece.size();) {
    const std::size_t end = std::min(piece.find('\n', begin), piece.size());
    r->clone()->select_lines(std::string_view(piece.data() + begin, end - begin), expected, expected_ends);
    begin = end + 1;
  }
  ASSERT_GT(expected.size(), 1000u);
  for (int round = 0; round < 3; ++round) {
    auto copy = r->clone();
    for (std::size_t step : {piece.size(), std::size_t{300000}, std::size_t{20000}}) {
      std::vector<const char*> got, got_ends;
      for (std::size_t begin = 0; begin < piece.size();) {
        std::size_t end = std::min(begin + step, piece.size());
        end = end == piece.size() ? end : std::min(piece.find('\n', end), piece.size() - 1) + 1;
        ASSERT_TRUE(copy->select_lines(std::string_view(piece.data() + begin, end - begin), got, got_ends));
        begin = end;
      }
      // As offsets: gtest would print a const char* as the text it points to.
      const auto offsets = [&piece](const std::vector<const char*>& starts) {
        std::vector<std::size_t> out;
        for (const char* s : starts) out.push_back(static_cast<std::size_t>(s - piece.data()));
        return out;
      };
      EXPECT_EQ(offsets(got), offsets(expected)) << "round " << round << ", pieces of " << step;
      EXPECT_EQ(offsets(got_ends), offsets(expected_ends)) << "round " << round << ", pieces of " << step;
    }
  }
}

// -P decides a piece line by line itself: the lines selects() selects, each with its end,
// empty lines, a last line without '\n', a pattern that matches the empty string, -w, -x,
// -i and, in a UTF-8 locale, lines holding encoding errors (a barrier, as grep reads them).
TEST(LineRegex, PerlSelectLinesIsSelectsLineByLine) {
  const std::string before = std::setlocale(LC_ALL, nullptr);
  ASSERT_NE(std::setlocale(LC_ALL, "C.UTF-8"), nullptr);
  const std::string piece =
      "ab 12\n\nx\n\xff""ab\nab\xff\n12-34\nAB\ncaf\xc3\xa9 ab\n\xc3""ab\nfoo_ab bar\n 12 \nlast ab";
  for (const char* pattern : {"ab", "\\d+", "^$", "x*", "\\bab\\b", "(?<=\\s)\\d", "ab$", "^ab", "\\w+ \\w+"})
    for (int variant = 0; variant < 8; ++variant) {
      RegexOptions o;
      o.syntax = Syntax::kPerl;
      o.word = (variant & 1) != 0;
      o.whole_line = (variant & 2) != 0;
      o.ignore_case = (variant & 4) != 0;
      for (const bool utf8 : {false, true}) {
        o.utf8 = utf8;
        auto r = compile({pattern}, o);
        ASSERT_TRUE(r->prepare_lines());
        std::vector<std::size_t> expected, expected_ends, got, got_ends;
        for (std::size_t begin = 0; begin < piece.size();) {
          const std::size_t end = std::min(piece.find('\n', begin), piece.size());
          if (r->selects(0, std::string_view(piece).substr(begin, end - begin))) {
            expected.push_back(begin);
            expected_ends.push_back(end);
          }
          begin = end + 1;
        }
        std::vector<const char*> starts, ends;
        ASSERT_TRUE(r->clone()->select_lines(piece, starts, ends));
        for (const char* s : starts) got.push_back(static_cast<std::size_t>(s - piece.data()));
        for (const char* e : ends) got_ends.push_back(static_cast<std::size_t>(e - piece.data()));
        EXPECT_EQ(got, expected) << pattern << " variant " << variant << " utf8 " << utf8;
        EXPECT_EQ(got_ends, expected_ends) << pattern << " variant " << variant << " utf8 " << utf8;
      }
    }
  RegexOptions z;
  z.syntax = Syntax::kPerl;
  z.null_data = true;  // records end in NUL: not cut at '\n'
  EXPECT_FALSE(compile({"ab"}, z)->prepare_lines());
  std::setlocale(LC_ALL, before.c_str());
}

// In a UTF-8 locale a piece is decided at once where its lines are ASCII; a line with a
// byte beyond ASCII (valid UTF-8 or not), wherever it falls in a block, is asked alone:
// every answer as line by line (selects_any with every pattern a candidate), and each
// selected line's end its '\n'.
TEST(LineRegex, SelectLinesAsksLinesBeyondAsciiAlone) {
  // The C library reads characters as the locale does (valid_utf8(): mbrtowc).
  const std::string before = std::setlocale(LC_ALL, nullptr);
  ASSERT_NE(std::setlocale(LC_ALL, "C.UTF-8"), nullptr);
  RegexOptions o = extended();
  o.utf8 = true;
  const std::vector<std::string> patterns = {"[0-9]+x", "caf.$"};
  auto r = compile(patterns, o);
  ASSERT_TRUE(r->prepare_lines());
  const std::vector<std::string> odd = {"caf\xc3\xa9", "caf\xc3\xa9 7x", "\xc3\xa9l\xc3\xa8ve", "bad \xff 9x",
                                        "caf\xff", "\xe2\x82\xac"};
  std::string piece;
  unsigned seed = 3;
  const auto next = [&seed] { return seed = seed * 1103515245u + 12345u, (seed >> 16) & 0x7fff; };
  while (piece.size() < (1u << 20)) {
    const unsigned kind = next() % 200;
    piece += kind == 0       ? odd[next() % odd.size()]
             : kind % 3 == 0 ? "line 42x of text"
             : kind % 3 == 1 ? "cafe"
                             : "none";
    piece += '\n';
  }
  piece += odd[1];  // no final newline
  const std::vector<std::uint32_t> every = {0, 1};
  std::vector<std::size_t> expected, expected_ends;
  auto alone = r->clone();
  for (std::size_t begin = 0; begin < piece.size();) {
    const std::size_t end = std::min(piece.find('\n', begin), piece.size());
    if (alone->selects_any(std::string_view(piece.data() + begin, end - begin), every, nullptr)) {
      expected.push_back(begin);
      expected_ends.push_back(end);
    }
    begin = end + 1;
  }
  std::vector<const char*> starts, ends;
  ASSERT_TRUE(r->select_lines(piece, starts, ends));
  std::vector<std::size_t> got, got_ends;
  for (const char* s : starts) got.push_back(static_cast<std::size_t>(s - piece.data()));
  for (const char* e : ends) got_ends.push_back(static_cast<std::size_t>(e - piece.data()));
  EXPECT_GT(expected.size(), 1000u);
  EXPECT_EQ(got, expected);
  EXPECT_EQ(got_ends, expected_ends);
  std::setlocale(LC_ALL, before.c_str());
}

// -i in UTF-8 on the literal path: a fixed string's case variants beyond ASCII, for a
// search that folds ASCII itself ('s' to U+017F, 'i' to U+0131, 'é' to 'É'; U+212A is no
// counterpart of 'k'), the string itself first; none where a character is not valid or the
// variants pass the limit.
TEST(FoldedVariants, SpellOutTheCounterpartsBeyondAscii) {
  const std::string before = std::setlocale(LC_ALL, nullptr);
  ASSERT_NE(std::setlocale(LC_ALL, "C.UTF-8"), nullptr);
  const FoldedVariants variants;
  using V = std::vector<std::string>;
  EXPECT_EQ(variants.of("ab", 8), V{"ab"});
  EXPECT_EQ(variants.of("kelvin", 8), (V{"kelvin", "kelv\xc4\xb1n"}));
  EXPECT_EQ(variants.of("Ss", 8), (V{"Ss", "S\xc5\xbf", "\xc5\xbfs", "\xc5\xbf\xc5\xbf"}));
  EXPECT_EQ(variants.of("\xc5\xbf", 8), (V{"\xc5\xbf", "S"}));
  EXPECT_EQ(variants.of("caf\xc3\xa9", 8), (V{"caf\xc3\xa9", "caf\xc3\x89"}));
  EXPECT_EQ(variants.of("\xcf\x83", 8), (V{"\xcf\x83", "\xce\xa3", "\xcf\x82"}));
  EXPECT_EQ(variants.of("\xe2\x84\xaa", 8), V{"\xe2\x84\xaa"});
  EXPECT_EQ(variants.of("sss", 8).size(), 8u);
  EXPECT_TRUE(variants.of("ssss", 8).empty());
  EXPECT_TRUE(variants.of("a\xff", 8).empty());
  EXPECT_TRUE(variants.of("\xc3", 8).empty());
  EXPECT_TRUE(variants.of(std::string("a\0b", 3), 8).empty());
  std::setlocale(LC_ALL, before.c_str());
}

}  // namespace
}  // namespace gpufilter::regex
