// Hand-written differential cases: every supported grep flag alone and combined, the input
// shapes that trip line-oriented tools, and bad usage.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "differential.hpp"
#include "testutil/testutil.hpp"

namespace gpufilter::test {
namespace {

using namespace std::string_literals;
const std::string kText =
    "foo\n"
    "bar\n"
    "Foo bar baz\n"
    "baz foo qux\n"
    "\n"
    "foobar foo\n"
    "FOO\n"
    "abc foo_bar\n"
    "xfoo foox\n"
    "the end\n";

// Matches of "ERR" on lines 1, 5, 6, 12, 20 and 29 of 30: groups that touch, overlap and stand apart.
std::string context_text() {
  std::string s;
  for (int i = 1; i <= 30; ++i) {
    const bool hit = i == 1 || i == 5 || i == 6 || i == 12 || i == 20 || i == 29;
    s += (hit ? "ERR line " : "ok line ") + std::to_string(i) + "\n";
  }
  return s;
}

class GrepDifferential : public ::testing::Test {
 protected:
  TempDir dir;
  std::string text = dir.write("text.txt", kText);
  std::string ctx = dir.write("context.txt", context_text());
};

TEST_F(GrepDifferential, EachFlagAloneOnAFile) {
  const std::vector<Args> flags = {
      {},          {"-i"},        {"-v"},       {"-c"},        {"-n"},          {"-b"},
      {"-o"},      {"-w"},        {"-x"},       {"-m", "0"},   {"-m", "1"},     {"-m", "2"},
      {"-m", "-1"}, {"-m1"},      {"--max-count=2"}, {"-l"},   {"-L"},          {"-H"},
      {"-h"},      {"-q"},        {"-s"},       {"-a"},        {"-A", "1"},     {"-B", "1"},
      {"-C", "1"}, {"-2"},        {"--group-separator=XX"},    {"--no-group-separator"},
      {"--color=always"},         {"--line-buffered"},         {"-F"},          {"--fixed-strings"},
      {"--ignore-case"},          {"--invert-match"},          {"--count"},     {"--line-number"},
      {"--byte-offset"},          {"--only-matching"},         {"--word-regexp"}, {"--line-regexp"},
      {"--files-with-matches"},   {"--files-without-match"},   {"--with-filename"}, {"--no-filename"},
      {"--quiet"},                {"--silent"},                {"--no-messages"}, {"--text"},
  };
  for (std::size_t i = 0; i < flags.size(); ++i) {
    if (i % 2 == 0) expect_same(flags[i] + Args{"foo", text}, {}, rotating_knobs(2));
    else expect_same(flags[i] + Args{"-e", "foo", "--", text}, {}, rotating_knobs(2));
  }
}

TEST_F(GrepDifferential, EachFlagAloneOnStandardInput) {
  const std::vector<Args> flags = {
      {},         {"-i"},      {"-v"},      {"-c"},       {"-n"},      {"-b"},           {"-o"},
      {"-w"},     {"-x"},      {"-m", "1"}, {"-l"},       {"-L"},      {"-H"},           {"-q"},
      {"-A", "1"}, {"-B", "2"}, {"-C", "1"}, {"--color=always"},       {"--label=X", "-H"},
      {"--label=X", "-l"},      {"--label=X", "-c", "-H"}, {"--label=LBL", "-L", "zzz"},
  };
  for (const Args& f : flags) expect_same(f + Args{"bar"}, kText, rotating_knobs(2));
  expect_same({"foo", "-"}, kText);
  expect_same({"--label=in", "-n", "foo", "-", text}, kText);
}

TEST_F(GrepDifferential, FlagCombinations) {
  const std::vector<Args> combos = {
      {"-i", "-n"},        {"-i", "-o", "-b"},      {"-v", "-n"},          {"-v", "-c"},
      {"-c", "-i", "-w"},  {"-o", "-n", "-b", "-H"}, {"-w", "-x"},          {"-i", "-x"},
      {"-i", "-w", "-o"},  {"-v", "-o"},             {"-v", "-x"},          {"-v", "-w", "-n"},
      {"-c", "-m", "2"},   {"-o", "-m", "1"},        {"-v", "-m", "2", "-n"}, {"-l", "-v"},
      {"-L", "-v"},        {"-c", "-v", "-x"},       {"-q", "-v"},          {"-l", "-c"},
      {"-c", "-o"},        {"-n", "-b", "-H", "-i"}, {"-h", "-n"},          {"-m", "0", "-c"},
      {"-m", "0", "-v"},   {"-m", "-1", "-c"},       {"-o", "-x"},          {"-b", "-v"},          {"-m", "99999999999999999999"},
      {"-v", "-m", "-1"},       {"-v", "-c", "-m", "-1"},
      {"-a", "-n", "-i"},  {"-s", "-c"},             {"-q", "-c"},          {"-l", "-L"},
      {"-L", "-l"},        {"-c", "-l"},             {"-c", "-q"},          {"-i", "--no-ignore-case"},
      {"-y"},              {"-x", "-o", "-i"},
  };
  for (std::size_t i = 0; i < combos.size(); ++i) {
    if (i % 2 == 0) expect_same(combos[i] + Args{"foo", text}, {}, rotating_knobs(2));
    else expect_same(combos[i] + Args{"-e", "Foo", "-e", "bar", text}, {}, rotating_knobs(2));
  }
}

TEST_F(GrepDifferential, SeveralPatterns) {
  expect_same({"-e", "foo", "-e", "bar", text});
  expect_same({"-e", "foo", "-e", "bar", "-e", "qux", "-o", "-n", text});
  expect_same({"-e", "foo\nbar", text});                  // a newline separates patterns
  expect_same({"foo\nbaz", text});                        // also in the operand
  expect_same({"foo\nbaz\n", "-c", text});                // a trailing newline adds an empty pattern
  expect_same({"-e", "", text});                          // the empty pattern matches every line
  expect_same({"-e", "", "-c", text});
  expect_same({"-e", "", "-o", text});
  expect_same({"-e", "", "-v", text});
  expect_same({"-e", "", "-x", "-n", text});              // only the empty line
  expect_same({"-e", "", "-w", "-n", text});
  expect_same({"-e", "foo", "-e", "", "-o", "-b", text});
  expect_same({"", text});
  expect_same({"\n", "-n", text});
  expect_same({"-e", "foo", "-e", "foo", "-o", text});     // the same pattern twice
  expect_same({"-e", "nothing", "-e", "neither", text});
  expect_same({"-e", "-v", "-e", "--", text});            // patterns that look like options
  expect_same({"--regexp=foo", "--regexp", "baz", text});
}

TEST_F(GrepDifferential, PatternFiles) {
  const std::string in = dir.write("in.txt",
                                   "foo\r\nbar\nbaz\r\nqux\n"
                                   "x\0y\n"s
                                   "a\0b line\n"s
                                   "foo bar\n"
                                   "\n"
                                   "plain\n");
  const std::string f1 = dir.write("f1", "foo\nbar\n");
  const std::string f2 = dir.write("f2", "baz\n");
  const std::string with_empty = dir.write("with_empty", "qux\n\nnever\n");
  const std::string empty = dir.write("empty", "");
  const std::string only_newlines = dir.write("only_newlines", "\n\n\n");
  const std::string with_nul = dir.write("with_nul", "x\0y\nnothing\n"s);
  const std::string with_nul2 = dir.write("with_nul2", "\0\n"s);
  const std::string crlf = dir.write("crlf", "foo\r\nbaz\r\nplain\r\n");
  const std::string no_final_newline = dir.write("no_final_newline", "bar\nplain");
  const std::string dup = dir.write("dup", "foo\nfoo\nfo\no\n");
  const Args inputs = {in, text};
  const std::vector<Args> forms = {
      {"-f", f1},         {"-f", f1, "-f", f2},      {"-f", with_empty},   {"-f", empty},
      {"-f", empty, "-v"}, {"-f", empty, "-c"},      {"-f", empty, "-L"},  {"-f", only_newlines},
      {"-f", with_nul},   {"-f", with_nul, "-a"},    {"-f", with_nul, "-c"}, {"-f", with_nul2, "-a", "-o", "-b"},
      {"-f", crlf},       {"-f", crlf, "-o"},        {"-f", crlf, "-x"},   {"-f", no_final_newline, "-n"},
      {"-f", dup, "-o"},  {"-f", f1, "-e", "qux"},   {"-e", "plain", "-f", f2, "-n"}, {"-f", f1, "-f", f1},
      {"-f", empty, "-e", "bar"},                    {"-f", empty, "-f", f2}, {"--file=" + f2, "-c"},
      {"-f", f1, "-w"},   {"-f", crlf, "-w", "-n"},  {"-f", with_empty, "-o", "-b"},
  };
  for (const Args& f : forms) expect_same(f + inputs);
}

TEST_F(GrepDifferential, Context) {
  const std::vector<Args> forms = {
      {"-A", "1"},  {"-A", "2"},  {"-A", "0"},  {"-B", "1"},  {"-B", "3"},  {"-C", "1"},
      {"-C", "2"},  {"-1"},       {"-3"},       {"-12"},      {"-1", "-2"}, {"-2n"},
      {"-n1"},      {"-A", "1", "-B", "2"},     {"-C", "1", "-A", "0"},     {"-B", "5", "-C", "1"},
      {"--context=2"}, {"--after-context=1"},   {"--before-context=1"},     {"-A1", "-n", "-b"},
      {"-C1", "-H", "-n"}, {"-C1", "-b"},       {"-A1", "--group-separator=XX"},
      {"-B1", "--group-separator="},            {"-C1", "--group-separator", "::"},
      {"-C1", "--no-group-separator"},          {"-C1", "--no-group-separator", "--group-separator=G"},
      {"-C1", "--group-separator=G", "--no-group-separator"},
      {"-A3", "-m", "2"},  {"-B2", "-m", "1"},  {"-C1", "-v"},  {"-A1", "-v", "-n"},  {"-C1", "-o"},
      {"-A2", "-o", "-n"}, {"-C1", "-c"},       {"-C1", "-l"},  {"-C1", "-q"},        {"-C100"},
      {"-A", "99999999999999999999"},           {"-C1", "-x"},  {"-C2", "-i", "-w"},  {"-A1", "-B1", "-m", "3", "-n"},
  };
  for (const Args& f : forms) expect_same(f + Args{"ERR", ctx});
  expect_same({"-C1", "ERR", ctx, ctx});                  // groups across two files
  expect_same({"-A1", "-n", "line 1", ctx});              // adjacent matches fill the context
  expect_same({"-C1", "-n", "ERR"}, context_text());
  expect_same({"-A1", "ERR"}, "ERR\nx\ny\nERR\nz");       // context at the unterminated end
  expect_same({"-B1", "z"}, "ERR\nx\ny\nERR\nz");
  expect_same({"-A", "x", "ERR", ctx});                   // invalid context length
  expect_same({"-C", "-1", "ERR", ctx});
}

// Matches far apart, with lines between them that are not valid UTF-8 (grep hides them in
// a UTF-8 locale) and selected lines that are not either (their trailing context then
// starts at the last output: lines that lag). Context without -v visits only the lines
// near a selected one (Searcher::context_gap()); the rest are counted.
TEST_F(GrepDifferential, ContextBetweenDistantMatches) {
  std::string lines;
  std::uint32_t state = 12345;
  auto next = [&](std::uint32_t below) {
    state = state * 1103515245u + 12345u;
    return (state >> 8) % below;
  };
  for (int i = 0; i < 1500; ++i) {
    const std::uint32_t kind = next(40);
    if (kind == 0) lines += "ERR bad \xff byte " + std::to_string(i) + "\n";
    else if (kind < 3) lines += "ERR line " + std::to_string(i) + (kind == 2 ? "\r\n" : "\n");
    else if (kind < 5) lines += "ok \xc3 " + std::to_string(i) + "\n";
    else lines += "ok line " + std::to_string(i) + "\n";
  }
  const std::string file = dir.write("distant.txt", lines);
  const std::string open_end = dir.write("open-end.txt", lines + "ok no newline");
  const std::string erred_end = dir.write("erred-end.txt", lines + "ok ERR no newline");
  const std::vector<Args> forms = {
      {"-C2"},        {"-B3"},  {"-A2"},       {"-A1", "-B4", "-n"}, {"-C1", "-m", "5"}, {"-B2", "-m", "3", "-n"},
      {"-A70", "-n"}, {"-C2", "-b", "--color=always"}, {"-C3", "-c"}, {"-B1", "-o"}, {"-C1", "-a"}, {"-A0", "-B0"},
  };
  for (const char* locale : {"LC_ALL=C.UTF-8", "LC_ALL=C"}) {
    for (const Args& f : forms) {
      for (const std::string& input : {file, open_end, erred_end})
        expect_same(f + Args{"ERR", input}, {}, rotating_knobs(2), locale, {locale});
    }
  }
}

// -v counted where an occurrence is a match: the chunk's lines less those with one
// (Searcher::count_unmatched()); -m, -w, -x, the empty pattern and binary data keep the
// line-by-line path. Several occurrences a line, a line without a final newline, CRLF,
// and pieces that end in a line's middle (the knobs' small chunks).
TEST_F(GrepDifferential, InvertedCountsOfLinesWithoutAnOccurrence) {
  std::string lines;
  for (int i = 0; i < 900; ++i) {
    lines += i % 7 == 0 ? "ok line " : i % 3 == 0 ? "ERR ERR twice ERR " : "a line with ERR ";
    lines += std::to_string(i) + (i % 11 == 0 ? "\r\n" : "\n");
  }
  const std::string file = dir.write("inverted.txt", lines);
  const std::string open_end = dir.write("inverted-open.txt", lines + "ok no newline");
  const std::string matched_end = dir.write("inverted-matched.txt", lines + "ERR no newline");
  const std::string nul = dir.write("inverted-nul.txt", lines + "ok \0 line\n" + lines);
  const std::vector<Args> forms = {
      {"-v", "-c"}, {"-v", "-c", "-n"}, {"-v", "-c", "-m", "5"}, {"-v", "-c", "-m", "1000"}, {"-v", "-c", "-i"},
      {"-v", "-L"}, {"-v", "-l"}, {"-v", "-q"}, {"-v", "-c", "-w"}, {"-v", "-c", "-x"}, {"-v", "-c", "-a"},
      {"-v", "-c", "-e", "zzz", "-e"},
  };
  for (const Args& f : forms) {
    expect_same(f + Args{"ERR", file, open_end, matched_end, nul});
    expect_same(f + Args{"ok"}, lines);
  }
  expect_same({"-v", "-c", "-e", "", "-e", "ERR", file});
}

TEST_F(GrepDifferential, Color) {
  const std::vector<Args> forms = {
      {},       {"-n"},        {"-b", "-H"},  {"-o"},       {"-o", "-b", "-n"}, {"-v"},  {"-i"},
      {"-C1"},  {"-c"},        {"-l"},        {"-L"},       {"-w"},              {"-x"},  {"-A1", "-n", "-H"},
      {"-v", "-C1", "-n"},     {"-m", "1", "-A", "1"},
  };
  for (const Args& f : forms) {
    expect_same(Args{"--color=always"} + f + Args{"foo", text, ctx}, {}, rotating_knobs(2));
    expect_same(Args{"--color=always"} + f + Args{"-e", "o", "-e", "oo", "-e", "line 2", text, ctx}, {},
                rotating_knobs(2));
  }
  const std::vector<std::vector<std::string>> envs = {
      {"GREP_COLORS=mt=01;32:fn=34"}, {"GREP_COLORS=sl=1:cx=2"}, {"GREP_COLORS=rv"}, {"GREP_COLORS=sl=1:cx=2:rv"},
      {"GREP_COLORS=ms=4:mc=5:ln=33:bn=36:se=35:ne"}, {"GREP_COLOR=1;32"}, {"GREP_COLORS=mt=7", "GREP_COLOR=1;32"},
      {"GREP_COLORS="}, {"GREP_COLORS=mt=:fn=:ln="},
  };
  const std::vector<Args> env_forms = {{"-n", "-H"}, {"-o", "-b"}, {"-v", "-C1"}, {"-c"}};
  for (const auto& env : envs) {
    for (const Args& f : env_forms) {
      expect_same(Args{"--color=always"} + f + Args{"foo", text, ctx}, {}, rotating_knobs(2), {}, env);
    }
  }
  expect_same({"--colour=always", "foo", text});
  expect_same({"--color=never", "foo", text});
  expect_same({"--color=auto", "foo", text});
  expect_same({"--color", "foo", text});
  expect_same({"--color=always", "-e", "", text});
  expect_same({"--color=always", "-e", "", "-o", text});
  expect_same({"--color=always", "-C1", "ERR", ctx});
}

// grep skips unknown and empty GREP_COLORS entries, honours rv and ne with a value too,
// stops at a malformed entry keeping what came before, and with an empty match colour
// colours the whole line once in sl/cx instead of reopening it after each match.
TEST_F(GrepDifferential, GrepColorsEntriesSkippedHonouredOrEndingTheParse) {
  const std::string input = dir.write("colors.txt", "foo bar foo baz\nxx\nfoo\r\nlast foo\n");
  const std::vector<std::string> specs = {
      "ne=1",          "xx=1:fn=32",  "::fn=32",      "ms=:sl=1",   "sl=1:cx=2:rv=1", "rv=0:sl=1:cx=2",
      "mt=:sl=1",      "mt:ms=4",     "ms=4:mt",      "fn",         "=1:fn=32",       "fn=32=1:ln=1",
      "fn=3x:ln=1",    "ne:ms=",      "mc=:cx=2:sl=1", "sl=1:ms=",  "mc=4:cx=2:sl=1:rv=x",
  };
  const std::vector<Args> forms = {{"-H"},           {"-v"},         {"-n", "-b"},   {"-o"}, {"-C1"},
                                   {"-v", "-n", "-C1"}, {"-v", "-o"}, {"-c", "-H"}, {"-l"}};
  for (const std::string& spec : specs) {
    for (const Args& f : forms)
      expect_same(Args{"--color=always"} + f + Args{"foo", input}, {}, rotating_knobs(2), {}, {"GREP_COLORS=" + spec});
  }
  // grep warns of GREP_COLOR only while its own string is still ms or mc: an entry that
  // sets the same value silences the warning, a bare "mt" copies ms to mc with it.
  for (const char* spec : {"mt=1;32", "ms=1;32:mc=7", "mc=1;32", "mt=1;32:mt", "ms=4:mt", "mc=:mt", "ms=x:mc=1"})
    expect_same({"--color=always", "-v", "-C1", "foo", input}, {}, rotating_knobs(1), {},
                {"GREP_COLOR=1;32", "GREP_COLORS="s + spec});
}

// -m 0 and a negative -m against -q, -l, -L, -c, -v and missing files. grep lets -q override
// -L before it gives up on -m 0 (exit 1, no file opened); a negative -m with -v selects
// nothing, but -q still exits 0 at the first line that would be selected.
TEST_F(GrepDifferential, ZeroAndNegativeMaxCountWithListsQuietAndMissingFiles) {
  const std::string lines = dir.write("lines.txt", "x\ny\nxy\n");
  const std::string none = dir.write("none.txt", "zzz\n");
  const std::string missing = dir.path() + "/missing.txt";
  const std::vector<Args> inputs = {{lines}, {missing, lines}, {lines, missing}, {missing}, {none, lines}, {none}};
  const std::vector<Args> modes = {{},         {"-q"},       {"-l"},       {"-L"},       {"-c"},      {"-q", "-s"},
                                   {"-L", "-q"}, {"-l", "-q"}, {"-c", "-q"}, {"-L", "-c"}, {"-o", "-q"}};
  SweepShare share;
  for (const char* max : {"-m0", "-m-1", "-m-5"}) {
    for (const Args& mode : modes) {
      for (const Args& invert : std::vector<Args>{{}, {"-v"}}) {
        for (const Args& in : inputs) {
          for (const char* pattern : {"y", "z"})
            if (share.take()) expect_same(Args{max} + mode + invert + Args{pattern} + in, {}, rotating_knobs(1));
        }
      }
    }
  }
  expect_same({"-v", "-q", "-m-1", "y"}, "x\n");
  expect_same({"-L", "-q", "-m0", "a", missing});
}

// A negative -m with -v and context: grep prints no selected line, but the context of
// each run it would select, and its late trailing context (from its last output on) takes
// the hidden lines as context. Found by an outside-style fuzzer.
TEST_F(GrepDifferential, NegativeMaxCountWithInvertPrintsOnlyContext) {
  const std::vector<std::string> inputs = {"a\nb\nc\na\nd\ne\n", "x\ny\nz\nw\nx\nx\nq\nx\n",
                                           "x\nx\ny\nx\nz\nw\nx\nx\nq\nx\nr\n", "x\ny",
                                           std::string("x\ny\n\0z\nx\nw\n", 11)};  // binary: nothing to report
  const std::vector<Args> modes = {{"-B1"},      {"-A1"},         {"-C1"},       {"-n", "-A2"}, {"-o", "-A1"},
                                   {"-A5"},      {"-B3", "-n"},   {"-C2", "-o"}, {"-B2", "-A1", "-n"},
                                   {"-B1", "-A3"}, {"-C3", "-b"}, {"-C1", "--color=always", "-n"}, {"-c", "-A1"},
                                   {"-L"},         {"-l", "-A1"}};
  for (std::size_t i = 0; i < modes.size(); ++i)
    for (std::size_t k = 0; k < 2; ++k)
      expect_same(Args{"-v", i % 2 == 0 ? "-m-1" : "-m-3"} + modes[i] + Args{(i + k) % 3 == 0 ? "a" : "x"},
                  inputs[(i + k) % inputs.size()], rotating_knobs(i));
}

// With -v, a line grep prints as context need not match: trailing context after -m, and
// the selected lines a negative -m hides. grep still marks its -o/--color parts, and its
// regex matcher (one -G/-E pattern, even one without an operator) leaves -x out there, so
// "a0" shows its 'a'; -F and several fixed strings keep -x.
TEST_F(GrepDifferential, PartsOfContextLinesUnderInvertAfterMaxCount) {
  const std::vector<std::string> inputs = {"b\na0\nax\nx\na\naa\n", "a\nb a\nxa\n\na\n", "q\nxa\naxa\nx\n"};
  const std::vector<Args> modes = {{"-m1", "-A1", "-o"},       {"-m1", "-A2", "--color=always"}, {"-m-1", "-A1", "-o"},
                                   {"-m2", "-A3", "-o", "-n"}, {"-m-1", "-B1", "-o", "-b"},        {"-m1", "-C2", "-o"}};
  const std::vector<std::pair<std::string, Args>> patterns = {
      {"-G", {"a"}}, {"-E", {"a|x"}}, {"-F", {"a"}}, {"-G", {"-e", "a", "-e", "x"}}, {"-P", {"a"}}, {"-G", {"x*a"}}};
  for (std::size_t i = 0; i < modes.size(); ++i)
    for (std::size_t k = 0; k < patterns.size(); ++k)
      expect_same_with(patterns[k].first, Args{"-v", "-x"} + modes[i] + patterns[k].second,
                       inputs[(i + k) % inputs.size()], rotating_knobs(1 + (i + k) % 3));
}

TEST_F(GrepDifferential, SeveralFiles) {
  const std::string other = dir.write("other.txt", "nothing here\nfoo again\n");
  const std::string none = dir.write("none.txt", "no match\n");
  const std::string missing = dir.path() + "/missing.txt";
  const std::string sub = dir.make_dir("subdir");
  const std::vector<Args> inputs = {
      {text, text},           {text, none, other},   {text, missing},         {missing, text},
      {missing},              {none, missing},       {sub},                   {text, sub, other},
      {text, "-", other},     {missing, "-"},        {"/dev/null", text},
  };
  const std::vector<Args> flags = {
      {}, {"-h", "-n"}, {"-c"}, {"-l"}, {"-L"}, {"-q"}, {"-s", "-c"}, {"-v", "-l", "--label=LBL"},
      {"-o", "-b", "-m", "1", "-A", "1"},
  };
  for (const Args& in : inputs) {
    for (const Args& f : flags) expect_same(f + Args{"foo"} + in, "stdin foo\nstdin bar\n", rotating_knobs(2));
  }
  // -q: a match gives 0 even after an error, an error without a match gives 2.
  expect_same({"-q", "foo", missing, text});
  expect_same({"-q", "foo", text, missing});
  expect_same({"-q", "zzz", text, missing});
  expect_same({"-q", "-s", "zzz", missing, text});
  expect_same({"foo", sub});
  expect_same({"-s", "foo", sub, text});
}

// -T pads numbers to the digits of the input's size (of INTMAX_MAX for a pipe) and puts a
// tab before a non-empty line; -Z writes a NUL byte after a file name instead of ':' or
// the newline of -l, -L and -c, uncoloured.
TEST_F(GrepDifferential, InitialTabAndNullAfterName) {
  const std::string other = dir.write("other.txt", "foo again\n");
  const std::string big = dir.write("big.txt", std::string(5000, 'x') + "\nfoo\n\nfoo\r\n");
  const std::vector<Args> flags = {
      {"-T"},       {"-T", "-n"},        {"-T", "-H"},       {"-T", "-b"},         {"-T", "-n", "-b", "-H"},
      {"-T", "-c"}, {"-T", "-o", "-n"},  {"-T", "-n", "-C", "1"}, {"-Z"},       {"-Z", "-l"},
      {"-Z", "-L"}, {"-Z", "-c"},        {"-Z", "-n", "-h"}, {"-TZ", "-n"},        {"-Z", "--color=always", "-n"},
      {"-Z", "-l", "--color=always"},    {"-T", "-n", "--color=always", "-o"},   {"-T", "-bo", "--null"},
      {"--initial-tab", "-n", "-v"},
  };
  for (const Args& f : flags) {
    expect_same(f + Args{"foo", text, other, big});
    expect_same(f + Args{"foo", big});
    expect_same(f + Args{"foo", "-", text}, "stdin foo\n\nfoo\n", rotating_knobs(2));
    expect_same(f + Args{"foo"}, "stdin foo\n", rotating_knobs(2));
  }
}

TEST_F(GrepDifferential, ExitStatus) {
  const std::string empty = dir.write("empty.txt", "");
  expect_same({"foo", text});
  expect_same({"zzz", text});
  expect_same({"-v", "", text});
  expect_same({"-v", "zzz", text});
  expect_same({"foo", empty});
  expect_same({"-v", "foo", empty});
  expect_same({"-c", "zzz", text});
  expect_same({"-L", "zzz", text});
  expect_same({"-L", "foo", text});
  expect_same({"-l", "zzz", text});
  expect_same({"foo", dir.path() + "/nope"});
  expect_same({"-s", "foo", dir.path() + "/nope"});
  expect_same({});                                                   // no pattern
  expect_same({"-m", "x", "foo", text});                             // invalid max count
  expect_same({"-f", dir.path() + "/nope", text});                   // unreadable pattern file
  expect_same({"-f", dir.path(), text});                             // a directory as pattern file
  expect_same({"--binary-files=bogus", "foo", text});
}

TEST_F(GrepDifferential, InputShapes) {
  struct Shape {
    const char* name;
    std::string bytes;
  };
  const std::vector<Shape> shapes = {
      {"crlf", "foo\r\nbar\r\nfoo bar\r\n\r\nfoo\r\n"},
      {"crlf no final newline", "foo\r\nbar\r\nlast foo\r"},
      {"no final newline", "foo\nbar\nlast foo"},
      {"no final newline, no match at end", "foo\nbar\nlast"},
      {"empty lines", "\n\nfoo\n\n\nbar\n\n"},
      {"only newline", "\n"},
      {"only newlines", "\n\n\n\n"},
      {"empty", ""},
      {"single byte", "f"},
      {"one line no newline", "foo"},
      {"lone cr", "\r"},
      {"cr inside", "fo\ro\nfoo\rbar\n"},
      {"tabs", "foo\tbar\n\tfoo\n"},
  };
  const std::vector<Args> flags = {
      {}, {"-c"}, {"-v", "-n"}, {"-o", "-b"}, {"-x"}, {"-w", "-A1"}, {"-B1", "-n"}, {"-v", "-c"}, {"-L"},
      {"-e", "", "-x", "-n"}, {"--color=always"},
  };
  // Each shape is a file of its own; one call searches them all.
  Args paths;
  std::string note = "files:";
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    paths.push_back(dir.write("shape" + std::to_string(i) + ".txt", shapes[i].bytes));
    note += " shape" + std::to_string(i) + ".txt=\"" + escape(shapes[i].bytes) + "\"";
  }
  for (const Args& f : flags) expect_same(f + Args{"-e", "foo"} + paths, {}, rotating_knobs(3), note);
  for (const Args& f : std::vector<Args>{{"-c", "-h"}, {"-x", "-n", "-e", "foo\r"}, {"-o", "-b", "-e", "\r"}}) {
    expect_same(f + Args{"-e", "foo"} + paths, {}, rotating_knobs(3), note);
  }
  // And each on standard input, so that each case stands alone.
  for (const Shape& s : shapes) {
    expect_same(Args{"-n", "-e", "foo"}, s.bytes, rotating_knobs(2));
    expect_same(Args{"-o", "-b", "-e", "\r", "-e", "foo"}, s.bytes, rotating_knobs(2));
  }
}

TEST_F(GrepDifferential, BinaryFiles) {
  const std::vector<std::string> inputs = {
      "foo\0bar\nbaz\n"s,
      "before foo\nthe nul \0 line\nafter foo\n"s,
      "no match here\n\0\nfoo\n"s,
      "foo first\nnothing\nnul\0 without match\n"s,
      "\0"s,
      "foo\0"s,
      "\0foo\n\0\n"s,
      "foo\nbar\n\0"s,
  };
  const std::vector<Args> flags = {
      {},          {"-a"},      {"-c"},      {"-v"},     {"--binary-files=without-match"}, {"--binary-files=text", "-n"},
      {"-l"},      {"-L"},      {"-o"},      {"-q"},     {"-m", "1", "-A", "1"},           {"-v", "-c"},
      {"-a", "-o", "-b"},       {"-I", "-c"}, {"-I", "-v"}, {"--color=always", "-x"},
  };
  Args paths;
  std::string note = "files:";
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    paths.push_back(dir.write("bin" + std::to_string(i) + ".txt", inputs[i]));
    note += " bin" + std::to_string(i) + ".txt=\"" + escape(inputs[i]) + "\"";
  }
  for (const Args& f : flags) expect_same(f + Args{"foo"} + paths, {}, rotating_knobs(3), note);
  expect_same(Args{"-c", "-e", "nul"} + paths, {}, rotating_knobs(3), note);
  // Context groups: a binary file's suppressed match still counts as output before the
  // next file's first group.
  for (const Args& f : std::vector<Args>{{"-A1"}, {"-B1", "-n"}, {"-C1", "--group-separator=XX"}}) {
    expect_same(f + Args{"foo", paths[0], text}, {}, rotating_knobs(2), note);
    expect_same(f + Args{"foo", text, paths[1], text}, {}, rotating_knobs(2), note);
  }
  for (const std::string& in : inputs) {
    expect_same({"foo"}, in, rotating_knobs(2));                 // on standard input
    expect_same({"-c", "-v", "foo"}, in, rotating_knobs(2));
  }
  // A NUL far after the first matches: grep prints lines until it meets the NUL.
  std::string big;
  for (int i = 0; big.size() < 200000; ++i) big += "line " + std::to_string(i) + (i % 7 == 0 ? " foo" : "") + "\n";
  big.insert(150000, 1, '\0');
  const std::string big_path = dir.write("big.bin", big);
  for (const Args& f : std::vector<Args>{{}, {"-c"}, {"-n"}, {"-a", "-c"}, {"-I"}, {"-v", "-c"}, {"-o", "-b"}})
    expect_same(f + Args{"foo", big_path}, {}, large_knobs());
}

// grep reads files in buffers of 96 KiB and notices a NUL only in the buffer that holds it:
// lines in earlier buffers are printed as text. NULs around buffer edges, and after a line
// longer than the buffer.
TEST_F(GrepDifferential, BinaryFilesNulNearReadBoundaries) {
  std::string lines;
  for (int i = 0; lines.size() < 220000; ++i) lines += "foo " + std::to_string(i) + "\n";
  for (const std::size_t at : {32768u, 98303u, 98304u, 98305u, 196607u, 196608u}) {
    std::string in = lines;
    in.insert(at, 1, '\0');
    const std::string path = dir.write("nul_at_" + std::to_string(at), in);
    for (const Args& f : std::vector<Args>{{"-n"}, {"-c", "-v"}, {"-o", "-b", "-m", "12000"}, {"-A1", "-n"}, {"-l"}})
      expect_same(f + Args{"foo", path}, {}, {{"4096", "2", "gpu"}, {"", "", ""}}, "NUL at " + std::to_string(at));
  }
  std::string long_line = std::string(100000, 'x') + " foo\nfoo\n";
  long_line += "bar\0\nfoo\n"s;
  const std::string path = dir.write("long_then_nul", "foo\n" + long_line);
  expect_same({"-n", "foo", path}, {}, {{"4096", "2", "gpu"}, {"", "", ""}});
  expect_same({"-c", "foo", path}, {}, {{"4096", "2", "gpu"}, {"", "", ""}});
}

// -I (--binary-files=without-match): grep drops a binary input before it searches the
// buffer that holds the first NUL, so -q, -l and -L, which stop at the first match, must
// not stop at a match in that buffer; a match in an earlier buffer still counts for them.
TEST_F(GrepDifferential, WithoutMatchBinaryFilesBeforeQuietAndLists) {
  const std::string bin = dir.write("bin1", "a\n\0\n"s);
  const std::string late = dir.write("late_nul", "b\n" + std::string(8, 'c') + "\na\0\n"s);
  std::string filler;
  while (filler.size() < 110000) filler += "filler line\n";
  const std::string after_block = dir.write("nul_after_block", "a first\n" + filler + "\0\na late\n"s);
  const std::string in_block = dir.write("nul_in_block", filler + "a mid\n" + "filler\n\0\n"s);
  const std::string missing = dir.path() + "/missing";
  const std::vector<Args> inputs = {{bin},  {bin, missing}, {missing, bin}, {bin, text},   {late},
                                    {after_block}, {in_block}, {after_block, bin, in_block}};
  const std::vector<Args> modes = {{"-q"}, {"-l"}, {"-L"}, {"-c"}, {"-o"}, {"-m1"}, {"-m2", "-c"},
                                   {"-q", "-s"}, {"-l", "-m1"}, {"-L", "-c"}, {"-v", "-l"}, {"-w", "-q"}};
  for (const Args& mode : modes) {
    for (const Args& in : inputs) expect_same(Args{"-I"} + mode + Args{"a"} + in, {}, rotating_knobs(2));
  }
  for (const Args& mode : std::vector<Args>{{"-q"}, {"-l"}, {"-L"}})
    expect_same(Args{"--binary-files=without-match"} + mode + Args{"a", bin, text});
  expect_same({"-q", "-I", "a"}, "a\n\0\n"s);  // standard input
}

// Lines longer than the chunk, with matches at every offset around chunk edges.
TEST_F(GrepDifferential, LongLinesAndChunkEdges) {
  std::string in;
  const std::vector<std::string> needles = {"needle", "ab", "x", "a-long-needle-of-forty-bytes-0123456789"};
  for (std::size_t n = 0; n < needles.size(); ++n) {
    for (int offset = 0; offset < 70; ++offset) {
      in += std::string(static_cast<std::size_t>(offset), '.') + needles[n] + std::string(static_cast<std::size_t>(offset % 9), ',') + "\n";
    }
  }
  const std::string edges = dir.write("edges.txt", in);
  const std::vector<Knobs> knobs = {{"17", "3", "gpu"}, {"64", "1", "cpu"}, {"", "", ""}};
  for (const Args& f : std::vector<Args>{{}, {"-o", "-b"}, {"-c"}, {"-n", "-v"}, {"-w", "-o", "-b"}}) {
    for (const std::string& n : needles) expect_same(f + Args{"-e", n, edges}, {}, knobs);
    expect_same(f + Args{"-e", needles[0], "-e", needles[3], "-e", "9\n.."s, edges}, {}, knobs);
  }
  expect_same({"-o", "-b", "-e", needles[3], "-e", "x", edges}, {}, {{"5", "3", "gpu"}, {"6", "1", "cpu"}});

  // Very long lines: matches at the start, in the middle and at the end of a 10000-byte line.
  std::string long_line = "start" + std::string(4090, 'y') + "mid" + std::string(5900, 'z') + "end";
  const std::string lines = dir.write("long.txt", "short\n" + long_line + "\n" + long_line + "\nshort end");
  for (const Args& f : std::vector<Args>{{}, {"-o", "-b"}, {"-c"}, {"-n"}, {"-x", "-c"}}) {
    for (const char* p : {"start", "mid", "end", "yyyyyyyyyymid", "ymidz", "zend", "short", "zzzzzzzzzz"})
      expect_same(f + Args{"-e", p, lines}, {}, {{"17", "3", "gpu"}, {"4096", "1", "cpu"}, {"", "", ""}});
  }
  expect_same({"-o", "-b", "mid", lines}, {}, {{"5", "3", "gpu"}, {"5", "1", "cpu"}});
  // A 300-byte pattern, much longer than the chunk.
  expect_same({"-o", "-b", long_line.substr(4000, 300), lines}, {}, {{"4096", "2", "gpu"}, {"", "", ""}});
  expect_same({"-x", long_line, lines}, {}, {{"4096", "2", "gpu"}, {"", "", ""}});
}

TEST_F(GrepDifferential, MatchesAtLineEdges) {
  const std::string in = "foo\nxfoo\nfoox\nxfoox\nfoo foo\n foo \nfoofoo\nfo\no\nfoo";
  for (const Args& f : std::vector<Args>{{}, {"-o", "-b"}, {"-w", "-o", "-n"}, {"-x"}, {"-x", "-v"}, {"-c"},
                                         {"--color=always"}, {"-w", "--color=always"}}) {
    expect_same(f + Args{"foo"}, in);
    expect_same(f + Args{"-e", "foo", "-e", "ofo", "-e", "oo"}, in);
  }
}

TEST_F(GrepDifferential, OverlappingAndPrefixPatterns) {
  const std::string in = "ababab\nabab\nab\nb\nbab\nxababx\nabcabc abx\naaaa\n";
  const std::vector<Args> pattern_sets = {
      {"-e", "ab", "-e", "abab", "-e", "b"},
      {"-e", "b", "-e", "abab", "-e", "ab"},
      {"-e", "a", "-e", "ab", "-e", "abc"},
      {"-e", "abc", "-e", "ab", "-e", "a"},
      {"-e", "bc", "-e", "abc", "-e", "c"},
      {"-e", "aa", "-e", "aaa"},
      {"-e", "bab", "-e", "aba"},
      {"-e", "ababab", "-e", "bab"},
  };
  const std::vector<Args> flags = {{}, {"-o"}, {"-o", "-b"}, {"-c"}, {"-w", "-o"}, {"-x", "-o"},
                                   {"--color=always"}, {"-i", "-o", "-v"}};
  for (const Args& p : pattern_sets) {
    for (const Args& f : flags) expect_same(f + p, in, rotating_knobs(2));
  }
}

TEST_F(GrepDifferential, WordMatching) {
  const std::vector<std::string> inputs = {
      "foobar foo\n", "foobar\n", "foo_bar foo\n", "foo-bar\n", "xfoo foo\n", "foo1 foo\n", "foofoo foo\n",
      "foobarfoo foobar\n", "afoobar foobarx foobar\n", "foo\r\n", "_foo\n", "foo.\n", "\xe9" "foo\n",
      "foo\xe9\n", "foobar foobar foo\n", "a foobarfoo b\n", "\n", "foo  bar\n",
  };
  const std::vector<Args> pattern_sets = {
      {"-e", "foo", "-e", "foobar"}, {"-e", "foobar", "-e", "foo"}, {"-e", "foo"}, {"-e", "bar"},
      {"-e", "oob", "-e", "foobar"}, {"-e", "foo bar"},            {"-e", ""},    {"-e", "foo", "-e", ""},
      {"-e", "o"},                   {"-e", "foobarfoo", "-e", "barfoo", "-e", "foo"},
  };
  std::string all;
  for (const std::string& in : inputs) all += in;
  for (const Args& p : pattern_sets) {
    for (const Args& f : std::vector<Args>{{"-w"}, {"-w", "-o", "-b"}, {"-w", "-c", "-v"}, {"-w", "-x"}, {"-w", "-n", "--color=always"}}) {
      expect_same(f + p, all, {{"3", "1", "gpu"}, {"11", "2", "cpu"}, {"", "", ""}});
    }
  }
  // One line at a time too, so that each case stands alone.
  for (const std::string& in : inputs) {
    expect_same(Args{"-w", "-o", "-e", "foo", "-e", "foobar"}, in, {{"", "", ""}});
    expect_same(Args{"-w", "-e", "foobar", "-e", "foo"}, in, {{"3", "2", "gpu"}, {"3", "1", "cpu"}});
  }
}

// GNU grep 3.8 in the C locale runs -F -w with exactly one distinct pattern (duplicates
// count once, before -i) through its regex matcher (grep.c, fgrep_to_grep_pattern), and
// with more through the fixed-string one. Their -o/--color walks differ: the regex one
// judges each match's word boundary against the whole line (dfasearch.c, EGexecute), the
// fixed-string one restarts at the last match's end without seeing the byte before it
// (kwsearch.c, Fexecute); and with -x as well the regex match is the line with its
// newline. Established by running /bin/grep (each row: input, flags, patterns, grep's
// stdout):
//   " b b\n"   -o -w " b"              " b\n"          (-e " b" -e zzz: " b\n b\n")
//   " b b b\n" -o -b -w " b"           "0: b\n"
//   " A a\n"   -o -i -w " a"           " A\n"          (-e " a" -e " A": " A\n a\n")
//   "a\n", "a" -o -x -w a              "a\n\n"         (-e a -e zz: "a\n")
//   "a\n"      -x -w --color=always a  SGR "a\n" SGR-end, no newline after it
//   "\n"       -o -b -x -w ""          "0:\n\n"        (the empty match takes the newline)
//   "a\nb\n"   -o -x -w -v -A1 b       "b\n\n"         (a matching context line too)
// and the rows below where both matchers agree, which must keep agreeing.
TEST_F(GrepDifferential, OnePatternWordMatchesAsGrepsRegexMatcher) {
  struct Case {
    std::string input;
    Args args;
  };
  const std::vector<Case> cases = {
      {" b b\n", {"-o", "-w", " b"}},
      {" b b\n", {"--color=always", "-w", " b"}},
      {" b b\n", {"-o", "-w", "-e", " b", "-e", " b"}},
      {" b b\n", {"-o", "-w", "-e", " b", "-e", "zzz"}},
      {" b b b\n", {"-o", "-b", "-w", " b"}},
      {" b b b\n", {"-w", "-n", "--color=always", " b"}},
      {" b b", {"-o", "-w", " b"}},
      {" b b\r\n", {"-o", "-w", " b"}},
      {" b  b\n", {"-o", "-w", " b"}},
      {"b  b \n", {"-o", "-w", "b "}},
      {"- - -\n", {"-o", "-w", "-e", "- "}},
      {" A a\n", {"-o", "-i", "-w", " a"}},
      {" A a\n", {"-o", "-i", "-w", "-e", " a", "-e", " A"}},
      {" A a\n", {"-o", "-i", "-w", "-e", " a", "-e", " a"}},
      {" b b\n", {"-c", "-w", " b"}},
      {" b b\n", {"-v", "-w", " b"}},
      {" b b\n x\n", {"--color=always", "-w", "-B1", " x"}},
      {" b b\n x\n", {"--color=always", "-w", "-A1", "-v", " x"}},
      {"aaa b aa\n", {"-o", "-w", "aa"}},
      {"b b b b\n", {"-o", "-w", "b b"}},
      {"x b b b\n", {"-o", "-w", "b b"}},
      {"...\n", {"-o", "-w", ".."}},
      {"a*b *\n", {"-o", "-w", "*"}},
      {" a\n", {"-o", "-w", ""}},
      {" a\n", {"--color=always", "-w", ""}},
      {"a\n", {"-o", "-x", "-w", "a"}},
      {"a", {"-o", "-x", "-w", "a"}},
      {"a\n", {"-o", "-x", "-w", "-e", "a", "-e", "a"}},
      {"a\n", {"-o", "-x", "-w", "-e", "a", "-e", "zz"}},
      {"A\n", {"-o", "-x", "-w", "-i", "a"}},
      {"a\n", {"--color=always", "-x", "-w", "a"}},
      {"a", {"--color=always", "-x", "-w", "a"}},
      {"a\n", {"--color=always", "--line-buffered", "-x", "-w", "a"}},
      {"a\n", {"--color=always", "-x", "-w", "-n", "-b", "-H", "a"}},
      {"a\r\n", {"--color=always", "-x", "-w", "a\r"}},
      {"a\r\n", {"-o", "-x", "-w", "a\r"}},
      {"\n", {"-o", "-b", "-x", "-w", ""}},
      {"\n", {"--color=always", "-x", "-w", ""}},
      {"\nx\n", {"-c", "-x", "-w", ""}},
      {"x a\na\n", {"-o", "-n", "-x", "-w", "a"}},
      {"x a\na\n", {"-o", "-b", "-x", "-w", "a"}},
      {"a\nb\n", {"-o", "-x", "-w", "-v", "-A1", "b"}},
      {"a\nb\n", {"--color=always", "-x", "-w", "-v", "-A1", "b"}},
      {"a\nb\n", {"--color=always", "-x", "-w", "-B1", "b"}},
      {"a ab\n", {"-o", "-x", "-w", "a"}},
      {"a\0b\na\n"s, {"-o", "-x", "-w", "a"}},
  };
  for (const Case& c : cases) {
    expect_same(c.args, c.input, {{"3", "1", "gpu"}, {"", "", "cpu"}}, "input " + escape(c.input));
  }
  // How the patterns are given changes nothing but their count: a -f file, a newline in
  // -e (a trailing one adds the empty pattern, a second distinct one) or in the operand.
  expect_same({"-o", "-w", "-f", dir.write("one", " b\n"), "-"}, " b b\n");
  expect_same({"-o", "-w", "-f", dir.write("twice", " b\n b\n"), "-"}, " b b\n");
  expect_same({"-o", "-w", "-f", dir.write("and_empty", " b\n\n"), "-"}, " b b\n");
  expect_same({"-o", "-w", "-e", " b\n"}, " b b\n");
  expect_same({"-o", "-w", " b\n b"}, " b b\n");
  // A line colour and a context colour around a match that takes the newline.
  expect_same({"--color=always", "-x", "-w", "-A1", "a"}, "a\nb\n", {}, {}, {"GREP_COLORS=sl=1:cx=2"});
  expect_same({"--color=always", "-x", "-w", "-v", "-A1", "b"}, "a\nb\n", {}, {}, {"GREP_COLORS=sl=1:cx=2:rv"});
}

// In a UTF-8 locale grep keeps -F (and two or more fixed -G/-E patterns) on its
// fixed-string matcher, Fexecute, whose -w walk takes the empty pattern's match as a
// shorter one at the same place and whose -x match leaves the newline out; one -G/-E
// pattern stays with the regex matcher in every locale.
TEST_F(GrepDifferential, FixedStringsInUtf8KeepTheFixedStringMatcher) {
  struct Case {
    std::string input;
    Args args;
  };
  const std::vector<Case> cases = {
      {"a\n", {"-F", "-x", "-w", "-o", "a"}},
      {"a\n", {"-F", "-x", "-w", "--color=always", "a"}},
      {"a\n", {"-x", "-w", "-o", "a"}},
      {"a\n\n", {"-F", "-x", "-w", "--color=always", "-e", "", "-e", "b"}},
      {" a\n", {"-F", "-w", "-e", "", "-e", " "}},
      {" a\n", {"-E", "-w", "-e", " ", "-e", ""}},
      {" a\n", {"-F", "-w", "-o", "-e", "", "-e", " ", "-e", "-"}},
      {"ba A._ba\n", {"-E", "-w", "-e", " b", "-e", "a", "-e", "ba_", "-e", ""}},
      {"-_._baa _A\n", {"-F", "-v", "-w", "-e", "-", "-e", "", "-e", "a ", "-e", "-bb"}},
      {"caf\xc3\xa9 caf\n", {"-F", "-w", "-o", "-e", "caf", "-e", ""}},
      {" \xc3\xa9 a\n", {"-F", "-w", "--color=always", "-e", " ", "-e", ""}},
  };
  for (const Case& c : cases)
    for (const char* locale : {"LC_ALL=C.UTF-8", "LC_ALL=C"})
      expect_same(c.args, c.input, {}, std::string(locale) + " input " + escape(c.input), {locale});
}

// -F -w in a UTF-8 locale is decided on the literal path (the regex matcher had read every
// line of a one-byte pattern: 5x grep's time on the Loghub logs): a multibyte letter or
// digit beside an occurrence is a word character, an encoding error or a symbol is not, and
// a failed occurrence skips the run of word characters as Fexecute does.
TEST_F(GrepDifferential, FixedWordsInUtf8ReadCharactersOnTheLiteralPath) {
  const std::string in =
      "caf\xc3\xa9 e \xc3\xa9" "e e\xc3\xa9 _e e_ 1e\n"
      "\xce\xb1" "e\xce\xb1 \xe2\x80\x94" "e\xe2\x80\x94 \xc2\xa0" "e\xc2\xa0\n"
      "\xff" "e\xff \xc3" "e \x80" "e e\xe4\xb8\xad e\xf0\x9f\x98\x80\n"
      "ee e-e ee.e\r\n"
      "in\xc3\xa9 in to into \xc3\xa9to to\n";
  const std::vector<Args> sets = {{"e"},       {"-e", "e", "-e", "ee"}, {"-e", "in", "-e", "to"}, {"-o", "e"},
                                  {"-c", "e"}, {"-o", "-b", "-e", "e", "-e", "e-e"}, {"--color=always", "-e", "e", "-e", "to"},
                                  {"-v", "e"}, {"-x", "ee e-e ee.e\r"},  {"-i", "-o", "-e", "E", "-e", "TO"}};
  for (const Args& args : sets) {
    expect_same(Args{"-w"} + args, in, rotating_knobs(3), "UTF-8", {"LC_ALL=C.UTF-8"});
    expect_same_with("-E", Args{"-w"} + args, in, rotating_knobs(2), "UTF-8", {"LC_ALL=C.UTF-8"});
  }
  // On the literal path: --stats names no regex.
  const GrepRun stats = run_gpufilter({"-F", "-w", "-c", "--stats", "e"}, in, {}, {"LC_ALL=C.UTF-8"});
  EXPECT_EQ(stats.out, "4\n");
  EXPECT_EQ(stats.err.find("regex_"), std::string::npos) << stats.err;
}

// -o in a UTF-8 locale: a matched part that is not valid UTF-8 is not printed, and nor
// are the line's parts after it (grep's print_line_head stops the line there).
TEST_F(GrepDifferential, OnlyMatchingStopsAtAPartThatIsNotUtf8) {
  for (const char* locale : {"LC_ALL=C.UTF-8", "LC_ALL=C"}) {
    expect_same({"-o", "-e", "\xff", "-e", "c"}, "a\xff" "c\nc\nca\xff" "c\n", {}, locale, {locale});
    expect_same({"-o", "-b", "-E", "-e", "c|\xff"}, "c\xff" "c\n", {}, locale, {locale});
    expect_same({"-o", "-P", "\\C"}, "\xc3\xa9t\n", {}, locale, {locale});
  }
}

// -m, -A, -B and -C read numbers as grep's xstrtoimax does: blanks, then a sign.
TEST_F(GrepDifferential, CountsAndContextLengthsReadAsGrepReadsThem) {
  for (const std::string n : {"-0", "+1", " 1", "\t2", " +1", "-00", "+0", "1x", "", " ", "-1", "+", "99999999999999999999"}) {
    expect_same({"-m", n, "foo", text});
    expect_same({"-A", n, "foo", text});
    expect_same({"-C", n, "-v", "foo", text});
  }
}

TEST_F(GrepDifferential, CaseFolding) {
  const std::string in =
      "FoO\nfoo\nFOO BAR\nfOo_bar\n"
      "\xc4\x42\x43\n\xe4\x62\x63\n"   // Latin-1 A/a umlaut: no folding in the C locale
      "Stra\xdf" "e STRASSE\n"
      "\xff\xfe foo \x80\n"
      "[FOO]\n@`{|}~^_\n";
  const std::vector<Args> pattern_sets = {
      {"-e", "foo"},        {"-e", "fOo", "-e", "BaR"}, {"-e", "\xc4" "bc"}, {"-e", "\xe4" "BC", "-e", "\xdf" "E"},
      {"-e", "strasse"},    {"-e", "\xff\xfe", "-e", "\x80"},            {"-e", "[foo]", "-e", "@`", "-e", "{|}~^_"},
      {"-e", "@@", "-e", "_"},
  };
  for (const Args& p : pattern_sets) {
    for (const Args& f : std::vector<Args>{{"-i"}, {"-i", "-o", "-b"}, {"-i", "-w", "-n"}, {"-i", "-x"},
                                           {"-i", "-c", "-v"}, {"-i", "--color=always"}}) {
      expect_same(f + p, in, rotating_knobs(2));
    }
  }
}

// -i in a UTF-8 locale: grep searches fixed strings with a letter that folds beyond ASCII
// ('s' to U+017F, 'i' to U+0131, 'é' to 'É') with its regex matcher; without -w and -z
// gpufilter scans their case variants on the literal path instead (1,000,000 literals: 35 s
// to start through the regex path). Seeded random cases over such letters, lonesome lower
// cases (ς, ǅ, µ), U+212A and U+0130 (no counterparts of 'k' and 'i'), encoding errors and
// cut characters; -F and operator-free -G/-E, every option that reads the selection.
TEST_F(GrepDifferential, CaseVariantsOfFixedStringsInUtf8) {
  const std::vector<std::string> tokens = {
      "s", "S", "\xc5\xbf", "i", "I", "\xc4\xb1", "\xc4\xb0", "k", "K", "\xe2\x84\xaa", "\xc3\xa9", "\xc3\x89",
      "\xcf\x83", "\xce\xa3", "\xcf\x82", "\xc3\x9f", "\xe1\xba\x9e", "a", "b", " ", "x", "\xc7\x85", "\xc7\x84",
      "\xc7\x86", "\xc2\xb5", "\xce\x9c", "\xce\xbc"};
  const std::vector<std::string> odd = {"\xff", "\xc5", "\xe2\x84"};
  const std::vector<Args> options = {{"-c"}, {"-o"}, {"-n"}, {"-v", "-c"}, {"--color=always"}, {"-b", "-o"}, {},
                                     {"-m", "2"}, {"-l"}, {"-A1", "-n"}, {"-x", "-c"},
                                     {"-x", "-v", "-m1", "-A2", "--color=always"}};
  std::mt19937 rng(20261207);
  const auto pick = [&rng](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  for (int c = 0; c < case_count(60); ++c) {
    std::string input;
    for (std::size_t line = pick(12) + 1; line > 0; --line) {
      for (std::size_t t = pick(11); t > 0; --t) input += pick(30) == 0 ? odd[pick(odd.size())] : tokens[pick(tokens.size())];
      input += '\n';
    }
    if (pick(5) == 0) input.pop_back();
    Args args = Args{"-i"} + options[pick(options.size())];
    for (std::size_t n = pick(5) + 1; n > 0; --n) {
      std::string p;
      for (std::size_t t = pick(3) + 1; t > 0; --t) p += tokens[pick(tokens.size())];
      args = args + Args{"-e", p};
    }
    const char* matcher = c % 3 == 0 ? "-F" : c % 3 == 1 ? "-G" : "-E";
    expect_same_with(matcher, args, input, rotating_knobs(2), "case " + std::to_string(c) + " input " + escape(input),
                     {"LC_ALL=C.UTF-8"});
  }
  // -w stays with the regex matcher's walk, which differs from the fixed-string matcher's:
  // " s s" gives one " s" under -w -o. Under -x that matcher shows the parts of a context
  // line after -m although it is not whole, and so do the variants.
  for (const Args& a : {Args{"-w", "-o", "-e", " s"}, Args{"-w", "-o", "-e", " s", "-e", "zzz"},
                        Args{"-x", "-v", "-m1", "-A3", "--color=always", "-e", "s", "-e", "ab"}})
    expect_same_with("-F", Args{"-i"} + a, " s s\n s  s \nsx\ns\nab s\nS\n", rotating_knobs(2), "-w/-x",
                     {"LC_ALL=C.UTF-8"});
  // On the literal path: --stats names no regex.
  const GrepRun stats = run_gpufilter({"-F", "-i", "-c", "--stats", "-e", "sshd", "-e", "caf\xc3\xa9"},
                                      "SSHD\n\xc5\xbfshd\nCAF\xc3\x89\n", {}, {"LC_ALL=C.UTF-8"});
  EXPECT_EQ(stats.out, "3\n");
  EXPECT_EQ(stats.err.find("regex_"), std::string::npos) << stats.err;
}

// A list of 150,000 patterns is spelled out in pieces on every core: each pattern's
// variants keep their place and their pattern, whichever piece made them (grep -i in UTF-8
// takes minutes on such a list: the answer is written out here).
TEST_F(GrepDifferential, CaseVariantsOfALargeListInPieces) {
  const auto word = [](std::size_t k) {
    std::string w = "s";
    for (int d = 0; d < 4; ++d, k /= 26) w += static_cast<char>('a' + k % 26);
    return w + "q";
  };
  std::string patterns, input, expected_lines, expected_parts;
  for (std::size_t k = 0; k < 150000; ++k) patterns += word(k) + "\n";
  std::size_t line = 0;
  for (std::size_t k : {std::size_t{0}, std::size_t{777}, std::size_t{70000}, std::size_t{149999}}) {
    const std::string w = word(k);
    const std::string long_s = "\xc5\xbf" + w.substr(1) + " tail";
    std::string upper = w;
    for (char& c : upper) c = static_cast<char>(c - 'a' + 'A');
    for (const std::string& l : {std::string("nothing here"), long_s, upper}) {
      input += l + "\n";
      ++line;
      if (l == "nothing here") continue;
      expected_lines += std::to_string(line) + ":" + l + "\n";
      expected_parts += l.substr(0, l.find(' ')) + "\n";
    }
  }
  const std::string list = dir.write("large-list", patterns);
  const std::vector<std::string> utf8 = {"LC_ALL=C.UTF-8"};
  const GrepRun lines = run_gpufilter({"-F", "-i", "-n", "--stats", "-f", list}, input, {}, utf8);
  EXPECT_EQ(lines.out, expected_lines);
  EXPECT_EQ(lines.err.find("regex_"), std::string::npos) << lines.err.substr(0, 400);
  EXPECT_EQ(run_gpufilter({"-F", "-i", "-o", "-f", list}, input, {}, utf8).out, expected_parts);
}

TEST_F(GrepDifferential, StandardInputAmongFilesAndLabels) {
  const std::string in = "stdin foo\nstdin bar\n";
  expect_same({"foo", "-"}, in);
  expect_same({"-H", "foo", "-"}, in);
  expect_same({"--label=LBL", "foo", "-", text}, in);
  expect_same({"--label=LBL", "-c", "foo", text, "-"}, in);
  expect_same({"--label=LBL", "-l", "bar", text, "-"}, in);
  expect_same({"--label=", "-H", "foo"}, in);
  expect_same({"--label", "L2", "-Hn", "foo"}, in);
  expect_same({"-n", "foo", "-", "-"}, in);      // the second '-' reads an exhausted stdin
  expect_same({"-c", "foo"}, "");
}

// Bad usage: gpufilter refuses regular expressions and unknown options with status 2.
// -E, -F, -G and -P are grep's matchers; two different ones are refused as grep refuses them.
TEST(GrepDifferentialUsage, ConflictingMatchersAreRefusedAsInGrep) {
  for (const Args& a : std::vector<Args>{{"-E", "-G", "foo"}, {"-P", "--extended-regexp", "foo"}, {"-G", "-F", "foo"}}) {
    const GrepRun r = run_gpufilter(a, "foo\n");
    EXPECT_EQ(r.status, 2) << describe_args(a);
    EXPECT_EQ(r.out, "") << describe_args(a);
    EXPECT_EQ(r.err, "gpufilter: conflicting matchers specified\n") << describe_args(a);
  }
  for (const Args& a : std::vector<Args>{{"-E", "-E", "fo+"}, {"-G", "--basic-regexp", "fo*"}}) {
    const GrepRun r = run_gpufilter(a, "foo\n");
    EXPECT_EQ(r.status, 0) << describe_args(a);
    EXPECT_EQ(r.out, "foo\n") << describe_args(a);
  }
}

TEST(GrepDifferentialUsage, UnknownOptionsAndMissingArguments) {
  for (const Args& a : std::vector<Args>{{"--bogus-option", "foo"}, {"-Q", "foo"}, {"-e"}, {"-f"}, {"-m"}, {"-A"},
                                         {"--context"}, {"--max-count=", "foo"}, {"--binary-files=bogus", "foo"}}) {
    const GrepRun g = run_grep(a, "foo\n");
    const GrepRun r = run_gpufilter(a, "foo\n");
    EXPECT_EQ(g.status, 2) << describe_args(a);
    EXPECT_EQ(r.status, 2) << describe_args(a);
    EXPECT_EQ(r.out, g.out) << describe_args(a);
    EXPECT_NE(r.err, "") << describe_args(a);
  }
}

// The first line of the message names the problem as grep's does. Found while writing
// cli_options_fuzz: a valid long option without its argument was called unrecognized
// ("--chunk-size"), an ambiguous abbreviation unrecognized, "--file" reported as -f, and
// "-:" as an option that requires an argument. The fuzzer's message check then caught a
// byte above 0x7f inside a bundle named as "unrecognized option 'gpufilter'" in the first
// version of the fix (tests/fuzz/regressions/cli_options_fuzz/).
TEST(GrepDifferentialUsage, OptionErrorsNameTheProblemAsGrepDoes) {
  // The message without the program's name (grep's is its path).
  const auto first_line = [](const std::string& err) {
    const std::string line = err.substr(0, err.find('\n'));
    const std::size_t colon = line.find(": ");
    return colon == std::string::npos ? "(no 'PROGRAM: ') " + line : line.substr(colon + 2);
  };
  for (const Args& a : std::vector<Args>{{"foo", "--file"}, {"foo", "--max-cou"}, {"--co", "foo"}, {"--co=3", "foo"},
                                         {"--help=3", "foo"}, {"--nosuch=4", "foo"}, {"-:", "foo"}, {"foo", "-A"},
                                         {"--col", "foo", "--fixed-", "--context"}, {"--color", "-nQv", "foo"},
                                         {"--file=/dev/null", "-Q", "foo"}, {"--count", "-vA"},
                                         {"-o\xff\xffv", "foo"}}) {
    const GrepRun g = run_grep(a, "foo\n");
    const GrepRun r = run_gpufilter(a, "foo\n");
    EXPECT_EQ(r.status, g.status) << describe_args(a);
    EXPECT_EQ(first_line(r.err), first_line(g.err)) << describe_args(a);
  }
  // Options of gpufilter's own, which grep does not know.
  const GrepRun r = run_gpufilter({"foo", "--chunk-size"}, "foo\n");
  EXPECT_EQ(first_line(r.err), "option '--chunk-size' requires an argument");
  const GrepRun s = run_gpufilter({"--stat", "foo"}, "foo\n");
  EXPECT_EQ(first_line(s.err), "option '--stat' is ambiguous; possibilities: '--stats' '--state'");
}

// A prefix that names one of grep's options among grep's is that option, though it also
// begins gpufilter's own (--max-packets, --match-frame, --hex, --pcap, --threads, --device,
// --batch-timeout, --byline, --stats): grep's command lines run unchanged. Option
// arguments that look like options stay what they are.
TEST(GrepDifferentialUsage, AbbreviationsOfGrepsOptionsAreGreps) {
  const std::string input = "a\nab\nb\n--ma\n";
  for (const Args& a : std::vector<Args>{{"--ma=1", "a"}, {"--m", "1", "a"}, {"--p", "a"}, {"--t", "a"},
                                         {"--by", "a"}, {"--dev=read", "a"}, {"--ba", "a"}, {"--s", "a"},
                                         {"-e", "--ma"}, {"--regexp", "--ma"}, {"-ce--ma"}, {"--", "--ma"}}) {
    Args grep = {grep_binary()}, ours = {gpufilter_binary()};
    grep.insert(grep.end(), a.begin(), a.end());
    ours.insert(ours.end(), a.begin(), a.end());
    const ProcessResult g = run_process(grep, input, {"LC_ALL=C"});
    const ProcessResult r = run_process(ours, input, {"LC_ALL=C"});
    EXPECT_EQ(r.status, g.status) << describe_args(a) << r.err;
    EXPECT_EQ(r.out, g.out) << describe_args(a);
  }
  const GrepRun help = run_gpufilter({"--he"}, "");
  EXPECT_EQ(help.status, 0);
  EXPECT_EQ(help.out.rfind("Usage: gpufilter", 0), 0u) << help.out;
}

// grep 3.8 answers an invalid --color argument with its --help text on stdout and status 0.
// The help texts differ by nature, so: the same status, and gpufilter's own help.
// A deliberate difference (docs/grep-compatibility.md): grep 3.8 answers a bad --color
// value with its help text and exit status 0, which hides the typo in a script; gpufilter
// names the bad value and exits 2.
TEST(GrepDifferentialUsage, InvalidColorArgumentIsAnError) {
  const Args args = {"--color=bogus", "foo"};
  const GrepRun g = run_grep(args, "foo\n");
  EXPECT_EQ(g.status, 0);
  EXPECT_EQ(g.out.rfind("Usage: grep", 0), 0u) << g.out;
  const GrepRun r = run_gpufilter(args, "foo\n");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("'bogus'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--color"), std::string::npos) << r.err;
}

TEST(GrepDifferentialUsage, HelpAndVersion) {
  const GrepRun help = run_gpufilter({"--help"});
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.out.find("Usage:"), std::string::npos) << help.out;
  const GrepRun version = run_gpufilter({"--version"});
  EXPECT_EQ(version.status, 0);
  const std::string first = version.out.substr(0, version.out.find('\n'));
  EXPECT_EQ(first.rfind("gpufilter ", 0), 0u) << first;
  EXPECT_NE(first.find_first_of("0123456789"), std::string::npos) << first;
  const GrepRun v2 = run_gpufilter({"-V"});
  EXPECT_EQ(v2.status, 0);
  EXPECT_EQ(v2.out, version.out);
}

}  // namespace
}  // namespace gpufilter::test
