// Many files searched at once (-j, --threads; cli/file_farm.cpp): each file's output is
// held until the files before it are written, so every run must equal grep's byte for
// byte, standard error and exit status included, whatever the number of threads: group
// separators that depend on earlier files, -q and -m stopping early, errors in their
// places, files larger than the farm takes (searched in their turn), binary files, output
// past what a waiting file may hold, and a reader that goes away.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <random>
#include <regex>
#include <string>
#include <vector>

#include "differential.hpp"
#include "testutil/testutil.hpp"

namespace gpufilter::test {
namespace {

// grep and gpufilter -j THREADS on the same command line, in `locale`.
void expect_same_at_once(const Args& args, const std::string& threads, const std::string& locale = "C") {
  const ProcessResult expected = run_process(Args{grep_binary()} + args, {}, {"LC_ALL=" + locale});
  const ProcessResult actual = run_process(Args{gpufilter_binary(), "-j", threads} + args, {}, {"LC_ALL=" + locale});
  const std::string what = describe_args(args) + " -j " + threads + " " + locale;
  EXPECT_EQ(actual.status, expected.status) << what;
  EXPECT_TRUE(actual.out == expected.out) << what << "\n" << first_difference(expected.out, actual.out);
  // Each names itself in its messages.
  auto named = [](std::string err, const std::string& name) {
    for (std::size_t at = 0; (at = err.find(name, at)) != std::string::npos;) err.replace(at, name.size(), "grep:");
    return err;
  };
  EXPECT_EQ(named(actual.err, "gpufilter:"), named(expected.err, grep_binary() + ":")) << what;
}

// 300 files in 12 folders: most small, with matches dense, sparse or none, CRLF, no final
// newline, empty, binary; two larger than the farm takes; names that sort and list in
// different orders.
class FilesAtOnce : public ::testing::Test {
 protected:
  void SetUp() override {
    std::mt19937 rng(20261127);
    dir.make_dir("t");
    for (int d = 0; d < 12; ++d) {
      const std::string sub = "t/d" + std::to_string((d * 7) % 12);
      dir.make_dir(sub);
      for (int f = 0; f < 25; ++f) {
        std::string text;
        const int lines = static_cast<int>(rng() % 60);
        for (int l = 0; l < lines; ++l) {
          switch (rng() % 6) {
            case 0: text += "foo at line " + std::to_string(l) + "\n"; break;
            case 1: text += "a café, déjà vu, FOO bar\n"; break;
            case 2: text += "error: 12345 timeout\r\n"; break;
            default: text += "nothing " + std::to_string(rng() % 1000) + "\n"; break;
          }
        }
        if (f % 11 == 3) text += "last foo without newline";
        if (f % 13 == 5) text = std::string("foo\0binary\nfoo\n", 15);
        if (f % 17 == 0) text.clear();
        dir.write(sub + "/f" + std::to_string((f * 7) % 25) + ".log", text);
      }
    }
    // Past the farm's size: searched in turn on the main pipeline.
    std::string big;
    while (big.size() < (9u << 20)) big += (big.size() % 4096 == 0 ? "foo large\n" : "padding line of text\n");
    dir.write("t/d3/big1.log", big);
    dir.write("t/d8/big2.log", big + "foo\n");
  }

  TempDir dir;
  std::string root = dir.path() + "/t";
};

TEST_F(FilesAtOnce, OutputModesAsGrepWithAnyThreadCount) {
  const std::vector<Args> flags = {
      {"-r"},        {"-rn"},          {"-rc"},           {"-rl"},        {"-rL"},          {"-rh", "-o"},
      {"-r", "-A1"}, {"-r", "-B2"},    {"-r", "-C1", "-n"}, {"-r", "-m2", "-A1"}, {"-rv", "-c"}, {"-rq"},
      {"-rw"},       {"-r", "--color=always", "-n", "-A1"}, {"-rZl"},        {"-rb"},       {"-r", "-C0"},
      {"-r", "-A3", "--group-separator=::"}, {"-r", "-B1", "--no-group-separator"}, {"-r", "-I", "-A1"},
      {"-r", "-a", "-c"}, {"-r", "-m1", "-l"},
  };
  SweepShare share;
  for (const Args& f : flags)
    for (const char* threads : {"1", "3", "16"})
      if (share.take()) expect_same_at_once(f + Args{"foo", root}, threads);
}

TEST_F(FilesAtOnce, RegexesAsGrepInUtf8AndC) {
  const std::vector<Args> cases = {
      {"-rE", "fo+ (at|bar)"},   {"-rn", "-i", "café"},     {"-rw", "-o", "caf"},  {"-rP", "-c", "\\d{5}"},
      {"-rE", "-A1", "^error"},  {"-r", "-x", "-E", "foo.*[0-9]"}, {"-ri", "-l", "déjà"},
  };
  for (const Args& c : cases)
    for (const char* locale : {"C", "C.UTF-8"}) {
      expect_same_at_once(c + Args{root}, "4", locale);
      expect_same_at_once(c + Args{root}, "1", locale);
    }
}

// rg's JSON from several threads (a printer each): the same records as from one, and
// one summary over every file; only the times differ.
TEST_F(FilesAtOnce, JsonRecordsAndSummaryAsFromOneThread) {
  auto records = [&](const std::string& threads, const Args& flags) {
    const ProcessResult r = run_process(Args{gpufilter_binary(), "-j", threads, "--json"} + flags + Args{"foo", root});
    EXPECT_EQ(r.status, 0) << r.err;
    return std::regex_replace(r.out, std::regex("\"elapsed(_total)?\":\\{[^}]*\\}"), "");
  };
  for (const Args& flags : {Args{"-r"}, Args{"-r", "-C1"}, Args{"-rc"}, Args{"-r", "-o", "-m2"}}) {
    const std::string one = records("1", flags);
    EXPECT_NE(one.find("\"type\":\"summary\""), std::string::npos);
    EXPECT_TRUE(records("8", flags) == one) << describe_args(flags);
  }
}

// Operands, some of which cannot be read: the messages come in their places, and -q
// answers 0 at the first selected file even after an error, as grep.
TEST_F(FilesAtOnce, ErrorsInTheirPlacesAndQuietAsGrep) {
  const Args operands = {root + "/d1/f1.log", root + "/missing", root + "/d2", root + "/d2/f2.log",
                         root + "/d5/f0.log", "/nonexistent/x", root + "/d3/big1.log", root + "/d4/f4.log"};
  for (const Args& f : {Args{}, Args{"-n"}, Args{"-q"}, Args{"-s"}, Args{"-c"}, Args{"-A1"}, Args{"-l"}}) {
    expect_same_at_once(f + Args{"foo"} + operands, "4");
    expect_same_at_once(f + Args{"-r", "foo"} + operands, "4");
  }
}

// Every line selected in files of 3 MiB: each waiting file holds more than its bound and
// its thread waits for its turn; the output is still grep's. A reader that closes the
// pipe early ends the search at once.
TEST(FilesAtOnceLarge, OutputPastTheHeldBoundAndAClosedPipe) {
  TempDir dir;
  dir.make_dir("t");
  std::string text;
  for (int i = 0; text.size() < (3u << 20); ++i) text += "line " + std::to_string(i) + " with x in it\n";
  for (int f = 0; f < 10; ++f) dir.write("t/f" + std::to_string(f), text + std::to_string(f) + " x\n");
  const std::string root = dir.path() + "/t";
  for (const Args& f : {Args{"-r"}, Args{"-rn"}, Args{"-r", "-A1"}}) expect_same_at_once(f + Args{"x", root}, "4");
  const ProcessResult r = run_process(
      {"/bin/sh", "-c", "\"$1\" -j 4 -r x \"$2\" | head -c 100 >/dev/null; echo done", "sh", gpufilter_binary(), root});
  EXPECT_EQ(r.out, "done\n");
}

// Small files between large ones: the writer, waiting for a small file and the files
// after it, is woken when a large one's thread waits for room, and the small files'
// output comes in its place.
TEST(FilesAtOnceLarge, SmallFilesBetweenOnesPastTheHeldBound) {
  TempDir dir;
  dir.make_dir("t");
  std::string text;
  for (int i = 0; text.size() < (3u << 20) / 2; ++i) text += "line " + std::to_string(i) + " with x in it\n";
  for (int f = 0; f < 40; ++f) {
    const std::string name = "t/f" + std::string(f < 10 ? "0" : "") + std::to_string(f);
    dir.write(name, f % 5 == 2 ? text : "small " + std::to_string(f) + " x\nno\n");
  }
  const std::string root = dir.path() + "/t";
  for (const char* threads : {"2", "4", "16"})
    for (const Args& f : {Args{"-r"}, Args{"-rc"}, Args{"-rn", "-B1"}})
      expect_same_at_once(f + Args{"x", root}, threads);
}

}  // namespace
}  // namespace gpufilter::test
