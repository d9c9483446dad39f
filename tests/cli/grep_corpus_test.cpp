// Differential cases on real material: the 16 Loghub 2k logs (CRLF, most without a final
// newline) with pattern sets taken from each log, and a text with one NUL byte.
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

std::vector<Knobs> corpus_knobs() {
  static const std::vector<Knobs> cycle = {{"4093", "2", "gpu"}, {"64K", "1", "cpu", "1"}, {"1000", "3", "gpu"},
                                           {"333", "2", "cpu", "0"}, {"128K", "3", "gpu"}, {"777", "2", "cpu", "1"}};
  static std::size_t next = 0;
  return {cycle[next++ % cycle.size()], {"", "", ""}};
}

class LoghubDifferential : public ::testing::TestWithParam<std::string> {};

TEST_P(LoghubDifferential, PatternSetsFromTheLog) {
  const std::string& name = GetParam();
  const std::string log = corpus_path("loghub/" + name + "_2k.log");
  const std::string text = read_file(log);
  const std::string csv = read_file(log + "_structured.csv");
  const std::vector<std::string> lines = split_lines(text);
  ASSERT_GE(lines.size(), 1000u) << log;
  std::seed_seq seq(name.begin(), name.end());
  std::mt19937 rng(seq);
  auto pick = [&rng](std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng); };

  // Words of random lines.
  std::vector<std::string> from_words;
  while (from_words.size() < 15) {
    const auto ws = words(lines[pick(lines.size())]);
    if (ws.empty()) continue;
    const std::string& w = ws[pick(ws.size())];
    if (w.size() >= 2) from_words.push_back(w);
  }
  // EventTemplate fragments without the <*> placeholders.
  std::vector<std::string> fragments = template_fragments(csv, 4);
  ASSERT_FALSE(fragments.empty()) << log;
  if (fragments.size() > 40) {
    std::shuffle(fragments.begin(), fragments.end(), rng);
    fragments.resize(40);
  }
  // A slice of a line, the last word of the (unterminated) last line, a word in upper case,
  // and a string that is not there.
  std::vector<std::string> mixed;
  const std::string& some_line = lines[pick(lines.size())];
  mixed.push_back(some_line.substr(pick(std::max<std::size_t>(1, some_line.size() / 2)), 12));
  const auto last_words = words(lines.back());
  if (!last_words.empty()) mixed.push_back(last_words.back());
  std::string upper = from_words[0];
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  mixed.push_back(upper);
  mixed.push_back("zzqqxx-not-there");

  TempDir dir;
  const std::vector<std::pair<std::string, std::vector<std::string>>> sets = {
      {"words", from_words}, {"template fragments", fragments}, {"mixed", mixed}};
  const std::vector<Args> flag_sets = {{"-n"}, {"-c"}, {"-o", "-b"}, {"-i", "-w"}, {"-v", "-c"}};
  for (const auto& [set_name, patterns] : sets) {
    const std::string pf = dir.write("patterns", pattern_file(patterns));
    const std::string note = name + " log, " + set_name + " patterns: \"" + escape(pattern_file(patterns), 1500) + "\"";
    for (const Args& f : flag_sets) {
      Args args = f;
      args.insert(args.end(), {"-f", pf, log});
      expect_same(args, {}, corpus_knobs(), note);
    }
  }
  // Patterns longer than the chunk.
  const std::string pf = dir.write("patterns", pattern_file(fragments));
  expect_same({"-n", "-f", pf, log}, {}, {{"61", "3", "gpu"}}, name + " log, template fragments, small chunks");
}

INSTANTIATE_TEST_SUITE_P(Loghub, LoghubDifferential, ::testing::ValuesIn(loghub_logs()),
                         [](const ::testing::TestParamInfo<std::string>& param_info) { return param_info.param; });

// One NUL byte at offset 77041 (line 1870): grep prints the matching lines it meets before
// it notices the NUL, then "binary file matches" on stderr.
TEST(SherlockNul, BinaryFileBehaviour) {
  const std::string path = corpus_path("text/sherlock-nul.txt");
  const std::vector<Args> pattern_sets = {
      {"Sherlock"}, {"-e", "Holmes", "-e", "Watson"}, {"abcdef"}, {"zzqqxx-not-there"}, {"the"}, {"-e", "studies", "-e", "Heaven"}};
  const std::vector<Args> flag_sets = {
      {},     {"-c"},      {"-n"},      {"-a", "-c"}, {"--binary-files=without-match"}, {"-v", "-c"}, {"-o", "-b"},
      {"-l"}, {"-q"},      {"-A2", "-n"}, {"-m", "5"}, {"-i", "-w", "-n"}, {"-a", "-n"}, {"-L"},
  };
  const std::vector<Knobs> cycle = {{"4096", "2", "gpu"}, {"61", "3", "cpu"}, {"1000", "1", "gpu"}, {"32K", "2", "cpu"}, {"77041", "1", "gpu"}, {"77042", "3", "cpu"}};
  std::size_t next = 0;
  for (std::size_t f = 0; f < flag_sets.size(); ++f) {
    for (std::size_t p = 0; p < pattern_sets.size(); ++p) {
      if ((f + p) % 2 != 0) continue;  // half of the pairs
      Args args = flag_sets[f];
      args.insert(args.end(), pattern_sets[p].begin(), pattern_sets[p].end());
      args.push_back(path);
      expect_same(args, {}, {cycle[next++ % cycle.size()], {"", "", ""}}, "sherlock-nul.txt");
    }
  }
  // On standard input too (only counts: where grep notices the NUL in a pipe depends on
  // how the pipe's reads happen to split the input).
  const std::string text = read_file(path);
  expect_same({"-c", "Sherlock"}, text, {{"4096", "2", "gpu"}, {"", "", ""}}, "sherlock-nul.txt on stdin");
  expect_same({"-c", "abcdef"}, text, {{"4096", "2", "gpu"}, {"", "", ""}}, "sherlock-nul.txt on stdin");
}

}  // namespace
}  // namespace gpufilter::test
