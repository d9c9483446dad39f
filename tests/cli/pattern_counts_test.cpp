// --pattern-counts: after grep's normal output, one line per pattern (in the order given):
// how many start positions of the input it occurs at (overlaps included; -i folds ASCII
// case), a tab, and the pattern's bytes. The counts are computed here; the output before
// them must equal grep -F's for the same arguments, and so must the exit status.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "corpus_util.hpp"
#include "differential.hpp"
#include "testutil/testutil.hpp"

namespace gpufilter::test {
namespace {

using Args = std::vector<std::string>;

char fold(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

std::uint64_t occurrences(const std::string& text, const std::string& pattern, bool ignore_case) {
  if (pattern.empty() || pattern.size() > text.size()) return 0;
  std::uint64_t n = 0;
  for (std::size_t at = 0; at + pattern.size() <= text.size(); ++at) {
    std::size_t k = 0;
    if (ignore_case) {
      while (k < pattern.size() && fold(text[at + k]) == fold(pattern[k])) ++k;
    } else {
      while (k < pattern.size() && text[at + k] == pattern[k]) ++k;
    }
    if (k == pattern.size()) ++n;
  }
  return n;
}

// Checks gpufilter --pattern-counts ARGS against grep -F ARGS plus the counts of `patterns`
// over `inputs` (each input counted on its own).
void expect_counts(const Args& args, const std::vector<std::string>& patterns, const std::vector<std::string>& inputs,
                   const std::string& stdin_input, const std::vector<Knobs>& knobs, const std::string& note) {
  bool ignore_case = false;
  for (const auto& a : args) ignore_case = ignore_case || a == "-i";
  const GrepRun grep = run_grep(args, stdin_input);
  std::string expected = grep.out;
  for (const std::string& p : patterns) {
    std::uint64_t n = 0;
    for (const std::string& in : inputs) n += occurrences(in, p, ignore_case);
    expected += std::to_string(n) + "\t" + p + "\n";
  }
  Args with = args;
  with.insert(with.begin(), "--pattern-counts");
  for (const Knobs& k : knobs) {
    const GrepRun r = run_gpufilter(with, stdin_input, k);
    EXPECT_EQ(r.status, grep.status) << "args " << describe_args(with) << "\n  knobs " << k.describe() << "\n  " << note;
    EXPECT_TRUE(r.out == expected) << "args " << describe_args(with) << "\n  knobs " << k.describe() << "\n  " << note
                                   << "\n  stdout (expected: grep's output, then the counts) "
                                   << first_difference(expected, r.out);
  }
}

class PatternCounts : public ::testing::Test {
 protected:
  TempDir dir;
};

TEST_F(PatternCounts, OverlapsAndDuplicates) {
  const std::string in = "ababab\nabab\nxx\naaaa\n";
  const std::string path = dir.write("in", in);
  expect_counts({"-e", "ab", "-e", "abab", "-e", "b", path}, {"ab", "abab", "b"}, {in}, {}, small_knobs(), in);
  expect_counts({"-e", "aa", "-e", "aaa", "-e", "aa", path}, {"aa", "aaa", "aa"}, {in}, {}, small_knobs(), in);
  expect_counts({"-e", "zz", "-e", "x", path}, {"zz", "x"}, {in}, {}, rotating_knobs(), in);
  expect_counts({"-e", "ba\nab", path}, {"ba", "ab"}, {in}, {}, rotating_knobs(), in);
}

TEST_F(PatternCounts, WithOutputModes) {
  const std::string in = "Foo foo FOO\nbar\r\nfoofoo\nno match\nfOo bar foo";
  const std::string path = dir.write("in", in);
  const std::vector<std::string> patterns = {"foo", "oo", "bar", "\r", "o f"};
  const Args pattern_args = {"-e", "foo", "-e", "oo", "-e", "bar", "-e", "\r", "-e", "o f"};
  const std::vector<Args> flag_sets = {{}, {"-c"}, {"-o", "-b"}, {"-n"}, {"-i"}, {"-i", "-o", "-b"}, {"-v"},
                                       {"-w"}, {"-x"}, {"-l"}, {"-m", "1"}, {"-A1", "-n"}, {"-i", "-c"}};
  for (const Args& f : flag_sets) {
    Args args = f;
    args.insert(args.end(), pattern_args.begin(), pattern_args.end());
    args.push_back(path);
    expect_counts(args, patterns, {in}, {}, rotating_knobs(), "input \"" + escape(in) + "\"");
  }
  // Standard input and several files: the counts add up over all inputs.
  expect_counts(Args{"-e", "foo", "-e", "o"}, {"foo", "o"}, {in}, in, rotating_knobs(), "stdin");
  expect_counts(Args{"-e", "foo", "-e", "o", path, "-", path}, {"foo", "o"}, {in, "stdin foo\n", in}, "stdin foo\n",
                rotating_knobs(), "three inputs");
}

// -i in a UTF-8 locale: a pattern's case variants beyond ASCII ('s' as U+017F, 'é' as 'É')
// are counted with it; "S" and "ſ" are one another's variants, each counted whole.
TEST_F(PatternCounts, CaseVariantsInUtf8CountWithTheirPattern) {
  const std::string in = "Sshd \xc5\xbfshd sSHD\ncaf\xc3\xa9 CAF\xc3\x89 caf\xc3\xa9\n\xc4\xb1" "d \xc4\xb0" "d ID\n";
  const GrepRun r = run_gpufilter({"--pattern-counts", "-F", "-i", "-c", "-e", "sshd", "-e", "caf\xc3\xa9", "-e", "S",
                                   "-e", "\xc5\xbf", "-e", "id", "-e", "sshd"},
                                  in, {}, {"LC_ALL=C.UTF-8"});
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.out, "3\n3\tsshd\n3\tcaf\xc3\xa9\n6\tS\n6\t\xc5\xbf\n2\tid\n3\tsshd\n");
  // With -w grep's regex matcher decides: refused, saying why (not "give -F").
  const GrepRun x = run_gpufilter({"--pattern-counts", "-F", "-i", "-w", "-e", "sshd"}, in, {}, {"LC_ALL=C.UTF-8"});
  EXPECT_EQ(x.status, 2);
  EXPECT_NE(x.err.find("LC_ALL=C"), std::string::npos) << x.err;
}

TEST_F(PatternCounts, RandomInputs) {
  for (std::uint32_t i = 0; i < 40; ++i) {
    const std::uint32_t seed = 7100 + i;
    std::mt19937 rng(seed);
    auto uniform = [&rng](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    std::string in;
    const int size = uniform(0, 1500);
    for (int k = 0; k < size; ++k) in.push_back("aAbB \n\r\xe9"[uniform(0, 7)]);
    std::vector<std::string> patterns;
    const int n = uniform(1, 12);
    Args args;
    for (int k = 0; k < n; ++k) {
      std::string p;
      const int len = uniform(1, k % 4 == 3 ? 40 : 4);
      for (int j = 0; j < len; ++j) p.push_back("aAbB \r\xe9"[uniform(0, 6)]);
      patterns.push_back(p);
    }
    const std::string pf = dir.write("patterns", pattern_file(patterns));
    if (uniform(0, 2) == 0) args.push_back("-i");
    if (uniform(0, 2) == 0) args.insert(args.end(), {"-o", "-b"});
    if (uniform(0, 3) == 0) args.push_back("-c");
    args.insert(args.end(), {"-f", pf, dir.write("in", in)});
    std::vector<Knobs> knobs = random_knobs(rng, 1, 200);
    knobs.push_back({"", "", ""});
    expect_counts(args, patterns, {in}, {}, knobs,
                  "seed " + std::to_string(seed) + ", input \"" + escape(in, 300) + "\", patterns \"" +
                      escape(pattern_file(patterns), 300) + "\"");
  }
}

TEST_F(PatternCounts, LogWithTemplateFragments) {
  const std::string log = corpus_path("loghub/OpenSSH_2k.log");
  const std::string text = read_file(log);
  std::vector<std::string> fragments = template_fragments(read_file(log + "_structured.csv"), 3);
  fragments.push_back("sshd");
  fragments.push_back("Dec 10");
  const std::string pf = dir.write("patterns", pattern_file(fragments));
  expect_counts({"-c", "-f", pf, log}, fragments, {text}, {}, large_knobs(), "OpenSSH_2k.log");
  expect_counts({"-i", "-o", "-b", "-f", pf, log}, fragments, {text}, {}, {{"4093", "2", "gpu"}, {"4093", "2", "cpu"}}, "OpenSSH_2k.log");
}

}  // namespace
}  // namespace gpufilter::test
