// The standard descriptors as the shell hands them over, against GNU grep 3.8 -F:
//   - a closed standard input, output or error (`<&-`, `>&-`): the descriptors that
//     gpufilter creates itself (the stop signal's pipe) must not take their place;
//   - a seekable standard input left just after the last selected line by -m, so that
//     `(gpufilter -m1 x; cat) < file` goes on where grep would;
//   - an input file that is also the output (`gpufilter x io >> io`).
// Each case is one shell script run twice, with $P as `grep -F` and as gpufilter, in a
// fresh directory; stdout, stderr (program names aside) and the exit status must agree.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "differential.hpp"
#include "testutil/testutil.hpp"

namespace gpufilter::test {
namespace {

struct ScriptRun {
  std::string out;
  std::string err;
  int status;
};

// "grep: " and "gpufilter: " at the start of a message, and both names in the output of
// `cat` (a file that was written by $P), read as "PROG".
std::string without_program_name(std::string text) {
  for (const std::string name : {grep_binary() + ":", std::string("grep:"), gpufilter_binary() + ":",
                                 std::string("gpufilter:")}) {
    for (std::size_t at = text.find(name); at != std::string::npos; at = text.find(name, at))
      text.replace(at, name.size(), "PROG:");
  }
  return text;
}

// Runs `script` under /bin/sh in a fresh directory with $P set to `program`; a hang
// fails after 20 s (timeout's status 124) instead of holding up the suite.
ScriptRun run_script(const std::string& program, const std::string& script) {
  TempDir dir;
  const ProcessResult r = run_process(
      {"/bin/sh", "-c", "cd " + shell_quote(dir.path()) + " && " + script}, {},
      {"P=timeout 20 " + program});
  return ScriptRun{without_program_name(r.out), without_program_name(r.err), r.status};
}

// The script with $P as grep -F and as gpufilter: the same bytes and status.
void expect_same_script(const std::string& script) {
  SCOPED_TRACE(script);
  const ScriptRun grep = run_script(grep_binary() + " -F", script);
  const ScriptRun ours = run_script(gpufilter_binary(), script);
  EXPECT_EQ(ours.out, grep.out);
  EXPECT_EQ(ours.err, grep.err);
  EXPECT_EQ(ours.status, grep.status);
}

const std::string kLines = "printf 'a1\\nb2\\na3\\nb4\\na5\\nb6\\n' > m1 && ";

// `gpufilter a <&-` used to read its own stop-signal pipe, which took descriptor 0, and
// hang; grep says "(standard input): Bad file descriptor" and exits 2.
TEST(StandardIo, ClosedStandardDescriptorsAreReportedAsGrepReportsThem) {
  expect_same_script("$P a <&-; echo status $?");
  expect_same_script("$P --label=foo a <&-; echo status $?");
  expect_same_script(kLines + "$P -c a m1 - <&-; echo status $?");
  expect_same_script(kLines + "$P -L a m1 - <&-; echo status $?");
  expect_same_script(kLines + "$P a m1 >&-; echo status $?");
  expect_same_script(kLines + "$P -q a m1 >&-; echo status $?");
  expect_same_script(kLines + "$P a m1 nothere 2>&-; echo status $?");
}

// grep's manual: after -m NUM, a seekable standard input is left just after the last
// selected line, trailing context or not; -q, -l, -L and a search to the end leave it at
// the end. The read-ahead used to leave it wherever its last read stopped.
TEST(StandardIo, MaxCountLeavesStandardInputAfterTheLastSelectedLine) {
  for (const std::string script : {
           "(P -m1 a; echo status $?; cat) < m1",
           "(P -m2 -A1 a; cat) < m1",
           "(P -m1 -A3 a; cat) < m1",
           "(P -m1 -c a; cat) < m1",
           "(P -m1 -v a; cat) < m1",
           "(P -m1 -n -b a; cat) < m1",
           "(P -m1 a; P -m1 a; cat) < m1",
           "(P -m1 a; P -m1 -c b; P -m3 x; cat) < m1",
           "(P -m3 a; echo status $?; cat) < m1",
           "(P -m1 a m1 -; cat) < m1",
           "(P -q a; echo status $?; cat) < m1",
           "(P -m1 -q a; cat) < m1",
           "(P -l a; cat) < m1",
           "(P -m1 -L a; cat) < m1",
           "(P -c a; cat) < m1",
           "(P -m1 x; cat) < un",
           "(P -m2 a; cat) < un",
           "cat m1 | (P -m1 a; cat)",
           // Several MB: the read-ahead and the threaded reads go far past the line.
           "(P -m1 'line 7'; P -m2 -A1 'line 99999'; P -m1 -c 'line 1999'; cat) < big | cksum",
       }) {
    std::string with_p = script;
    for (std::size_t at = with_p.find("P "); at != std::string::npos; at = with_p.find("P ", at + 2)) {
      if (at == 0 || with_p[at - 1] == '(' || with_p[at - 1] == ' ') with_p.replace(at, 1, "$P");
    }
    expect_same_script(kLines + "printf 'x1\\na2\\nx3\\na4' > un && "
                       "awk 'BEGIN { for (i = 1; i <= 400000; i++) print \"line \" i }' > big && " + with_p);
  }
}

// `gpufilter a io >> io` read its own output and grew io without end. grep skips such an
// input ("io: input file is also the output"), goes on with the others and exits 2,
// unless nothing but a count or names can be written (-q, -l, -L, -c, -m 1). The file
// size limit bounds what a regression would write before the test sees it.
TEST(StandardIo, AnInputThatIsTheOutputIsSkippedAsGrepSkipsIt) {
  const std::string files = "ulimit -f 2048 && printf 'a1\\nb2\\n' > io && printf 'a9\\n' > other && ";
  for (const std::string script : {
           "$P a io >> io", "$P a other io >> io", "$P a io other >> io", "$P a io > io",
           "$P a - < io >> io", "$P --label=L a - < io >> io", "$P a ./io >> io", "$P a io 1<>io",
           "$P zz io >> io", "$P -v zz other io >> io", "$P -o a io >> io", "$P -s a io >> io",
           "$P -m2 a io >> io", "$P -q a io >> io", "$P -l a io >> io", "$P -L a io >> io",
           "$P -c a io >> io", "$P -m1 a io >> io", "$P -A1 -m1 a io >> io",
       }) {
    expect_same_script(files + script + "; echo status $?; cat io");
  }
}

// --follow has no grep to compare with. A --state file that is also a followed file was
// read back after each save and saved again, forever; standard output appended to a
// followed file was the same loop. Both are refused at the start with exit 2.
TEST(StandardIo, FollowRefusesItsOwnStateFileAndOutput) {
  const std::string files = "ulimit -f 2048 && printf 'a1\\n' > log && ";
  struct Case {
    std::string script;
    std::string err;
  };
  for (const Case& c : std::vector<Case>{
           {"$P --follow --state log a log", "PROG: log: the --state file is also a followed file\n"},
           {"$P --follow --state ./st a other st", "PROG: ./st: the --state file is also a followed file\n"},
           {"$P --follow --state st a log ./st", "PROG: st: the --state file is also a followed file\n"},
           {"$P --follow --from-start a log >> log", "PROG: log: input file is also the output\n"},
           {"$P --follow a other log > log", "PROG: log: input file is also the output\n"},
       }) {
    SCOPED_TRACE(c.script);
    const ScriptRun r = run_script("timeout 10 " + gpufilter_binary(), files + c.script + "; echo status $?");
    EXPECT_EQ(r.out, "status 2\n");
    EXPECT_EQ(r.err, c.err);
  }
}

}  // namespace
}  // namespace gpufilter::test
