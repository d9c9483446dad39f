// Regexes confirmed on several threads (Searcher::predecide): all Loghub logs as one input
// of about 4.5 MB, in chunks large enough that their complete lines are decided by the
// worker pool before they are delivered in order. Compared with GNU grep 3.8 byte for byte:
// regexes with and without factors, selected lines far apart and close together, -v, -m
// with context, -b, -i and -w in UTF-8 (Hyperscan on the ASCII lines, glibc on the others),
// -x, -P. A concurrency test: the ThreadSanitizer job runs it.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "corpus_util.hpp"
#include "differential.hpp"
#include "testutil/testutil.hpp"

namespace gpufilter::test {
namespace {

using Args = std::vector<std::string>;

TEST(RegexParallel, WholeLoghubCorpusInLargeChunks) {
  if (!std::ifstream(corpus_path("loghub/OpenSSH_2k.log")).good())
    GTEST_SKIP() << "no corpus at " << corpus_path("loghub");
  std::string input;
  for (const std::string& name : loghub_logs()) {
    input += read_file(corpus_path("loghub/" + name + "_2k.log"));
    // Lines that are not UTF-8, between the logs: hidden in a UTF-8 locale, as by grep.
    input += "bad byte \xff in 2048\nbad again \xc3( 4096 \x85!\n";
  }
  const std::vector<std::string> ere = {
      "Failed password for .* from [0-9.]+",
      "(ERROR|WARN).*disk",
      "session (opened|closed) for user [a-z]+",
      "Receiving block blk_-?[0-9]+ src: /[0-9.:]+",
      "PacketResponder [0-9]+ for block .* terminating",
      "^[0-9]{6} [0-9]{6} [0-9]+ INFO",
      "instance: [a-f0-9-]{36}",
      "\\bkernel\\b.*(error|fail)",
  };
  TempDir dir;
  const std::string log = dir.write("all.log", input);
  const std::string ere_file = dir.write("ere", pattern_file(ere));
  const std::vector<Knobs> knobs = {{"", "", "cpu"}, {"1M", "2", "gpu"}, {"256K", "3", "cpu"}};
  const std::vector<std::string> utf8 = {"LC_ALL=C.UTF-8"};
  auto check = [&](const char* m, const Args& args, const std::vector<std::string>& env = {}) {
    expect_same_with(m, args, {}, knobs, "the whole Loghub corpus", env);
  };
  check("-E", {"-n", "-f", ere_file, log});
  check("-E", {"-c", "-v", "-f", ere_file, log});
  check("-E", {"-n", "-e", "[0-9]{4}$", log});  // no factor: every line is asked
  // Vectorscan 5.4.9 matched this before the "\r\n" of Mac_2k.log's long lines (CMakeLists.txt).
  check("-E", {"-n", "-e", "[0-9]+$", log});
  check("-E", {"-c", "-v", "-e", "^[A-Z]", log});
  // No factor, a match on most lines: lines decided by LineDfa where one pass costs more.
  check("-G", {"-c", "-e", "[0-9]\\{4\\}", log});
  check("-G", {"-n", "-e", "[0-9][0-9]*", "-e", "^[a-z]", log});
  check("-E", {"-c", "-v", "-e", "[0-9]{2}:[0-9]{2}[^0-9]", log});
  check("-E", {"-c", "-v", "-m", "9000", "-e", "[0-9]{3}", log});  // -m reached in a chunk counted whole
  check("-E", {"-c", "-v", "-w", "-e", "[0-9]+", log}, utf8);
  check("-G", {"-L", "-v", "-x", "-e", ".*[0-9].*", log});
  check("-E", {"-c", "-w", "-e", "[0-9]+", log});
  check("-E", {"-c", "-x", "-e", "[^a-z]+[a-z ]*[0-9.,]*", log});
  check("-E", {"-n", "-e", "[^ a-z]{3}.{2}[A-Z]$", log}, utf8);
  check("-E", {"-c", "-e", "([a-f0-9]{2}[:-]){2}|[0-9]{3}", log}, utf8);
  check("-E", {"-n", "-m", "7", "-A", "2", "-e", "(error|fail)[a-z]*", log});
  check("-G", {"-b", "-e", "session \\(opened\\|closed\\)", log});
  check("-E", {"-c", "-i", "-e", "error.*(time|fail)", log}, utf8);
  check("-E", {"-c", "-i", "-w", "-e", "[a-z]+ing", log}, utf8);
  check("-E", {"-c", "-x", "-e", ".*(user|root).*", log});
  check("-P", {"-n", "-e", "(?<=port )\\d{4,5}\\b", log});
  // Without factors every regex runs over a whole piece of lines at once (Hyperscan, many
  // lines per scan): no class, \s, \W nor anchor may reach across a line's end.
  check("-E", {"-c", "-e", "e[^q]*E", log});
  check("-E", {"-c", "-e", "T[[:space:]]*9", "-e", "a\\s+9", log});
  check("-G", {"-c", "-e", "x\\W*Q", log});
  // \s written as Hyperscan's \v took '\n' (a line ending in a digit before one starting
  // with a capital matched) and left \x85 out of \S in the C locale.
  check("-E", {"-c", "-e", "[0-9]\\s[A-Z]", "-e", "zz\\s*q", log});
  check("-G", {"-c", "-e", "4096 \\S!", log});
  // Empty matches ("\b" between a line's end and the next one's start) have no byte to
  // name their line by: they stay with glibc.
  check("-G", {"-c", "-e", "\\b", log});
  check("-G", {"-c", "-e", "xq\\|\\b", log});
  check("-E", {"-n", "-e", "\\bQ|^\\b[0-9]", log});
  check("-E", {"-c", "-w", "-e", "e[^q]*E", log});
  check("-E", {"-n", "-e", "^[A-Z][^:]*[0-9]$", log});
  check("-E", {"-c", "-x", "-e", "[^x]*", log});
  check("-E", {"-c", "-e", ".*[0-9]{3}.*", "-e", "^.*[a-c]{4}", log});
  check("-E", {"-c", "-i", "-e", "k[^q]*S", log}, utf8);
  check("-E", {"-c", "-i", "-e", "[0-c]+$", "-e", "[A-Z]{3}[0-9]", log}, utf8);  // regex folds case, then compares
  check("-E", {"-c", "-i", "-e", "[0-c]+$", log});  // grep's DFA: both cases of the range
  // Plain lines: runs of adjacent selected lines go to the printer at once.
  check("-E", {"-e", "[0-9]{4}$", log});
  check("-E", {"-e", "[0-9]{4}$", log}, utf8);
  check("-E", {"-m", "5000", "-e", "[a-z]+ [0-9]", log});
  check("-E", {"-e", "[0-9]", "-e", "xyzzy", log}, utf8);
}

// Literals whose occurrences are dense (most lines selected) are decided on the worker pool
// too (Searcher::predecide) and printed in runs: the same bytes as grep -F.
TEST(LiteralParallel, DenseLinesDecidedOnWorkers) {
  if (!std::ifstream(corpus_path("loghub/OpenSSH_2k.log")).good())
    GTEST_SKIP() << "no corpus at " << corpus_path("loghub");
  std::string input;
  for (const std::string& name : loghub_logs()) input += read_file(corpus_path("loghub/" + name + "_2k.log"));
  // Invalid UTF-8 in a selected line mid-input and at the end: in a UTF-8 locale the
  // workers' check of each piece's lines must hide them as grep does.
  const std::size_t middle = input.find('\n', input.size() / 2) + 1;
  input.insert(middle, "mid-input bad byte \xc3( in INFO\n");
  input += "bad byte \xff in INFO\nno newline at the end: INFO";
  TempDir dir;
  const std::string log = dir.write("all.log", input);
  const std::string dense = dir.write("dense", pattern_file({"INFO", "Dec", "Jul", "WARN", "exe", "error", "1"}));
  const std::vector<Knobs> knobs = {{"", "", "cpu"}, {"256K", "3", "cpu"}, {"1M", "2", "gpu"}};
  auto check = [&](const Args& args, const std::vector<std::string>& env = {}) {
    expect_same_with("-F", args, {}, knobs, "the whole Loghub corpus, dense literals", env);
  };
  check({"-f", dense, log});
  check({"-c", "-f", dense, log});
  check({"-n", "-b", "-f", dense, log});
  check({"-w", "-f", dense, log});
  check({"-x", "-e", "1", "-e", "- - -", log});
  check({"-i", "-o", "-f", dense, log});
  check({"-m", "3000", "-A", "1", "-f", dense, log});
  check({"-v", "-c", "-f", dense, log});
  check({"-w", "-i", "-f", dense, log}, {"LC_ALL=C.UTF-8"});
  check({"-f", dense, log}, {"LC_ALL=C.UTF-8"});
}

// Inputs that cross the edges of deciding lines ahead: a line longer than a chunk (the
// chunks that end and begin inside it) and a last line without its newline, a NUL byte late
// in the input (binary mode starts inside the decided lines), and -z records.
struct AheadInputs {
  std::string log, bin, nul;
};

AheadInputs ahead_inputs(TempDir& dir) {
  std::string logs;
  for (const std::string& name : loghub_logs()) logs += read_file(corpus_path("loghub/" + name + "_2k.log"));
  std::string input = logs.substr(0, logs.size() / 2);
  input += std::string(600 << 10, 'x') + " INFO in a long line 2048 " + std::string(300 << 10, 'y') + "\n";
  input += logs.substr(logs.size() / 2);
  // (Without the long line: after one, grep reads in larger buffers, and where its binary
  // mode starts differs; docs/grep-compatibility.md.)
  std::string binary = logs;
  binary.insert(binary.find('\n', binary.size() * 3 / 4) + 1, std::string("a NUL \0 byte, INFO 2048\n", 24));
  std::string records = logs;
  for (char& c : records) c = c == '\n' ? '\0' : c;
  return {dir.write("long.log", input + "last line INFO 4096"), dir.write("binary.log", binary),
          dir.write("records", records)};
}

// Dense lines are decided where each chunk was scanned, ahead of delivery (the host
// engine's workers: Searcher::work_ahead).
TEST(LiteralParallel, DenseLinesDecidedAheadAroundLongLinesAndNul) {
  if (!std::ifstream(corpus_path("loghub/OpenSSH_2k.log")).good())
    GTEST_SKIP() << "no corpus at " << corpus_path("loghub");
  TempDir dir;
  const auto [log, bin, nul] = ahead_inputs(dir);
  const std::string dense = dir.write("dense", pattern_file({"INFO", "Dec", "Jul", "WARN", "exe", "error", "1"}));
  const std::vector<Knobs> knobs = {{"", "", "cpu"}, {"256K", "3", "cpu"}, {"128K", "2", "cpu"}};
  auto check = [&](const Args& args, const std::vector<std::string>& env = {}) {
    expect_same_with("-F", args, {}, knobs, "dense literals around a long line and a NUL", env);
  };
  check({"-f", dense, log});
  check({"-n", "-b", "-f", dense, log});
  check({"-c", "-w", "-f", dense, log});
  check({"-f", dense, bin});
  check({"-c", "-f", dense, bin});
  check({"-a", "-n", "-f", dense, bin});
  check({"-f", dense, log}, {"LC_ALL=C.UTF-8"});
  check({"-z", "-f", dense, nul});
  check({"-z", "-c", "-x", "-e", "1", nul});
}

// The same for regexes, decided by the engine's workers on leased lanes (RegexLines::
// lease_ahead): in one pass over a piece of lines with a factor on most lines, and
// without any (every line asked); line by line where candidates are rare (`rare`); in
// UTF-8 a chunk with a non-ASCII byte is decided in turn instead.
TEST(RegexParallel, LinesDecidedAheadAroundLongLinesAndNul) {
  if (!std::ifstream(corpus_path("loghub/OpenSSH_2k.log")).good())
    GTEST_SKIP() << "no corpus at " << corpus_path("loghub");
  TempDir dir;
  const auto [log, bin, nul] = ahead_inputs(dir);
  const std::string dense = dir.write("dense", pattern_file({"(INFO|Dec|Jul) [0-9]+", "[0-9]{2}:[0-9]{2}", "WARN.*e"}));
  const std::string bare = dir.write("bare", pattern_file({"[0-9]{4}$", "^[A-Z][a-z]+ +[0-9]"}));
  const std::string rare = dir.write("rare", pattern_file({"Failed password for (invalid user )?[^ ]+ from [0-9.]+",
                                                           "session (opened|closed) for user r[a-z]*", "rhost=[^ ]+ +user=\\w"}));
  const std::vector<Knobs> knobs = {{"", "", "cpu"}, {"256K", "3", "cpu"}, {"128K", "2", "cpu"}};
  auto check = [&](const Args& args, const std::vector<std::string>& env = {}) {
    expect_same_with("-E", args, {}, knobs, "dense regexes around a long line and a NUL", env);
  };
  for (const std::string& set : {dense, bare, rare}) {
    check({"-f", set, log});
    check({"-n", "-b", "-f", set, log});
    check({"-c", "-v", "-f", set, log});
    check({"-f", set, bin});
    check({"-c", "-f", set, bin});
    check({"-a", "-n", "-f", set, bin});
    check({"-m", "4000", "-A", "1", "-f", set, log});
    check({"-f", set, log}, {"LC_ALL=C.UTF-8"});
    check({"-z", "-c", "-f", set, nul});
  }
}

}  // namespace
}  // namespace gpufilter::test
