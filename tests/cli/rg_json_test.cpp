// --json against ripgrep (rg --json), the oracle for its format: both tools run on the
// same inputs (Loghub logs read in place, small generated files, standard input), both
// outputs are parsed with nlohmann::json, and the begin, match, context and end records
// and the summary are compared field by field. Left out of the comparison, where gpufilter
// differs on purpose (sinks/json_printer.hpp, docs/JSON.md): our extra "patterns";
// timings; bytes_printed (our records are longer by "patterns"); bytes_searched under -m
// or with a NUL (rg stops at the line or the NUL, we read whole chunks); the summary's
// searches (rg 13 counts only inputs with a match). -m is run without -A: rg 13 prints
// matches in the trailing context after the last one counted as matches, past -m, where
// grep (and we) print them as context. Patterns are fixed strings, listed
// longest first where they overlap: there grep's leftmost-longest (ours) and rg's
// leftmost-first agree. Skipped where rg is not installed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <string>
#include <vector>

#include "differential.hpp"
#include "json_records.hpp"
#include "testutil/testutil.hpp"

namespace gpufilter::test {
namespace {

using json = nlohmann::json;

// rg on PATH, or "" when it is not installed.
std::string rg_binary() {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  for (std::size_t begin = 0; begin <= dirs.size();) {
    std::size_t end = dirs.find(':', begin);
    if (end == std::string::npos) end = dirs.size();
    const std::string candidate = dirs.substr(begin, end - begin) + "/rg";
    if (end > begin && ::access(candidate.c_str(), X_OK) == 0) return candidate;
    begin = end + 1;
  }
  return {};
}

// What the comparison leaves out beyond what always differs.
struct Leave {
  bool bytes_searched = false;  // -m, or a NUL: rg stops reading early
};

// A record as compared: without the fields that differ on purpose.
json comparable(json r, const Leave& leave) {
  json& data = r.at("data");
  const std::string type = r.at("type").get<std::string>();
  if (type == "match" || type == "context") data.erase("patterns");
  if (type == "end") {
    json& stats = data.at("stats");
    stats.erase("elapsed");
    stats.erase("bytes_printed");
    if (leave.bytes_searched) stats.erase("bytes_searched");
  }
  if (type == "summary") {
    const json& stats = data.at("stats");
    data = json{{"matched_lines", stats.at("matched_lines")},
                {"matches", stats.at("matches")},
                {"searches_with_match", stats.at("searches_with_match")}};
  }
  return r;
}

class RgJson : public ::testing::Test {
 protected:
  void SetUp() override {
    rg_ = rg_binary();
    if (rg_.empty()) GTEST_SKIP() << "rg (ripgrep) is not installed";
  }

  // gpufilter --json ARGS and rg --json ARGS, record by record.
  void expect_same(const std::vector<std::string>& args, const std::string& input = {}, Leave leave = {}) {
    std::vector<std::string> ours_argv = {gpufilter_binary(), "--json"};
    // One thread: rg searches its inputs in the order given, as we do.
    std::vector<std::string> rg_argv = {rg_, "--json", "--no-config", "--threads", "1"};
    ours_argv.insert(ours_argv.end(), args.begin(), args.end());
    rg_argv.insert(rg_argv.end(), args.begin(), args.end());
    const std::string note = describe_args(args);
    const ProcessResult ours = run_process(ours_argv, input);
    const ProcessResult theirs = run_process(rg_argv, input);
    ASSERT_EQ(ours.status, theirs.status) << note << "\n" << ours.err << theirs.err;
    std::vector<json> a, b;
    ASSERT_NO_THROW(a = json_records(ours.out)) << note << ": " << escape(ours.out);
    ASSERT_NO_THROW(b = json_records(theirs.out)) << note << ": " << escape(theirs.out);
    ASSERT_EQ(a.size(), b.size()) << note << "\n" << first_difference(theirs.out, ours.out);
    std::size_t differences = 0;
    for (std::size_t i = 0; i < a.size() && differences < 5; ++i) {
      const json ours_record = comparable(a[i], leave);
      const json rg_record = comparable(b[i], leave);
      if (ours_record == rg_record) continue;
      ++differences;
      ADD_FAILURE() << note << " record " << i << "\n  ours: " << ours_record.dump() << "\n  rg:   " << rg_record.dump();
    }
    EXPECT_GT(a.size(), 0u) << note;
  }

  std::string rg_;
};

std::vector<std::string> with_files(std::vector<std::string> args, const std::vector<std::string>& files) {
  args.insert(args.end(), files.begin(), files.end());
  return args;
}

TEST_F(RgJson, LoghubLogs) {
  const std::vector<std::string> logs = {corpus_path("loghub/OpenSSH_2k.log"), corpus_path("loghub/Apache_2k.log"),
                                         corpus_path("loghub/HDFS_2k.log"), corpus_path("loghub/Linux_2k.log")};
  const std::vector<std::string> patterns = {"-F", "-e", "password", "-e", "pass", "-e", "ssword for", "-e", "error",
                                             "-e", "Failed"};
  for (const std::vector<std::string>& flags : std::vector<std::vector<std::string>>{
           {}, {"-v"}, {"-C", "2"}, {"-A", "1", "-B", "3"}, {"-w"}, {"-i"}, {"-x", "-e", "Failed"}}) {
    std::vector<std::string> args = flags;
    args.insert(args.end(), patterns.begin(), patterns.end());
    expect_same(with_files(args, logs));
  }
  expect_same(with_files({"-F", "-m", "3", "-B", "2", "-e", "error", "-e", "Failed"}, logs), {},
              Leave{.bytes_searched = true});
  for (const std::string& log : logs) expect_same({"-F", "-e", "session", "-e", "block", log});
}

// Line terminators (CRLF, none at the end), invalid UTF-8 in lines and in a path, control
// bytes and quotes, several matches in a line, inputs without a match (no begin or end),
// an empty input.
TEST_F(RgJson, GeneratedFiles) {
  TempDir dir;
  const std::vector<std::string> files = {
      dir.write("crlf.txt", "a foo b\r\nbar\r\nfoo foo\r\n"),
      dir.write("unterminated.txt", "one foo\ntwo\nfoo three"),
      dir.write("utf8.txt", "caf\xc3\xa9 foo\nbad \xff\xfe foo \xc3\nfoo\tq\"\\\x01\x7f\n"),
      dir.write("nomatch.txt", "nothing\nhere\n"),
      dir.write("empty.txt", ""),
      dir.write("p\xff-name.txt", "foo in a file whose name is not UTF-8\n"),
      dir.write("context.txt", "l1\nfoo\nl3\nl4\nl5\nl6\nfoo\nl8\nfoo\n"),
  };
  for (const std::vector<std::string>& flags : std::vector<std::vector<std::string>>{
           {}, {"-v"}, {"-C", "1"}, {"-v", "-C", "1"}, {"-B", "2"}, {"-A", "5"}}) {
    std::vector<std::string> args = flags;
    args.insert(args.end(), {"-F", "-e", "foo", "-e", "\xc3\xa9"});
    expect_same(with_files(args, files));
  }
  expect_same(with_files({"-F", "-m", "1", "-B", "1", "foo"}, files), {}, Leave{.bytes_searched = true});
  expect_same(with_files({"-F", "-e", "oo", "-e", "o f"}, files));  // overlaps: the leftmost, then on
}

// A NUL in a matched line: rg searches a named file to its end and reports where the
// first NUL was (binary_offset), as we do for a NUL in a line written.
TEST_F(RgJson, BinaryInput) {
  TempDir dir;
  const std::string file = dir.write("b.bin", std::string("foo one\nab\0cd foo\nfoo three\n", 28));
  expect_same({"-F", "foo", file}, {}, Leave{.bytes_searched = true});
}

// Standard input: rg's "<stdin>" path.
TEST_F(RgJson, StandardInput) {
  expect_same({"-F", "-e", "foo"}, "x foo\nbar\nfoo foo\r\nlast foo");
  expect_same({"-F", "-C", "1", "-e", "bar"}, "x foo\nbar\nfoo foo\r\nlast foo");
}

}  // namespace
}  // namespace gpufilter::test
