// The OpenCL device failing mid-run, through the gpufilter binary (issue 8):
// GPUFILTER_INJECT_DEVICE_FAULT makes the scanner's own OpenCL calls throw real errors
// (DeviceFaults). gpufilter must say so once on standard error, finish the search on the
// CPU and print byte for byte what LC_ALL=C grep -F prints, with grep's exit status: no
// line lost or doubled, from a file and from a pipe.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "differential.hpp"
#include "testutil/testutil.hpp"

namespace {

using gpufilter::test::corpus_path;
using gpufilter::test::escape;
using gpufilter::test::first_difference;
using gpufilter::test::GrepRun;
using gpufilter::test::Knobs;
using gpufilter::test::read_file;
using gpufilter::test::run_gpufilter;
using gpufilter::test::run_grep;

constexpr const char* kPlanVariable = "GPUFILTER_INJECT_DEVICE_FAULT";

// The device engine with 16 KiB chunks, 3 in flight, every chunk on the device (no host
// scan of small chunks): a corpus log is 14 or more chunks.
const Knobs kDevice{"16K", "3", "gpu"};

struct Plan {
  std::string spec;  // KIND:N
  std::string call;  // what the warning names
};

const std::vector<Plan>& plans() {
  static const std::vector<Plan> list = {
      {"submit:1", "clEnqueueNDRangeKernel: CL error -5, CL_OUT_OF_RESOURCES"},
      {"submit:6", "clEnqueueNDRangeKernel: CL error -5, CL_OUT_OF_RESOURCES"},
      {"finish:2", "clWaitForEvents: CL error -14, CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST"},
      {"finish:14", "clWaitForEvents: CL error -14, CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST"},
      {"lost:9", "clFlush: CL error -5, CL_OUT_OF_RESOURCES"},
      {"alloc:1", "clCreateBuffer: CL error -4, CL_MEM_OBJECT_ALLOCATION_FAILURE"},
  };
  return list;
}

std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// Exactly one warning line on standard error, naming the failed call and the input.
void expect_one_warning(const std::string& err, const Plan& plan, const std::string& input, const std::string& what) {
  const std::string head = "gpufilter: warning: OpenCL device failed (" + plan.call + ") while scanning " + input;
  const std::string tail = "; continuing on the CPU\n";
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << what << ": \"" << escape(err) << "\"";
  EXPECT_EQ(err.rfind(head, 0), 0u) << what << ": \"" << escape(err) << "\"";
  EXPECT_TRUE(err.size() >= tail.size() && err.compare(err.size() - tail.size(), tail.size(), tail) == 0)
      << what << ": \"" << escape(err) << "\"";
}

// Standard output and exit status equal grep's; the one warning on standard error.
void expect_like_grep(const std::vector<std::string>& args, const std::string& input, const Plan& plan,
                      const std::string& input_name, const std::string& note) {
  const GrepRun expected = run_grep(args, input);
  const std::vector<std::string> env = {std::string(kPlanVariable) + "=" + plan.spec};
  const GrepRun actual = run_gpufilter(with(args, {"--host-scan-below=0"}), input, kDevice, env);
  const std::string what = plan.spec + " " + note;
  EXPECT_EQ(actual.status, expected.status) << what;
  EXPECT_EQ(first_difference(expected.out, actual.out), "") << what;
  expect_one_warning(actual.err, plan, input_name, what);
}

// From a regular file: selected lines (with line numbers and byte offsets), a count (-c),
// every line but the selected ones (-v), and a search that selects nothing (status 1).
TEST(CliDeviceFault, FileOutputEqualsGrep) {
  const std::string log = corpus_path("loghub/OpenSSH_2k.log");
  for (const Plan& plan : plans()) {
    expect_like_grep({"-n", "-b", "-e", "Failed password", "-e", "preauth", "-e", "1", log}, "", plan, log, "lines");
    expect_like_grep({"-c", "-e", "Invalid user", "-e", "root", log}, "", plan, log, "-c");
  }
  const Plan& some = plans()[2];
  expect_like_grep({"-v", "-e", "preauth", log}, "", some, log, "-v");
  expect_like_grep({"-e", "no such text in this log", log}, "", some, log, "no match");
}

// From a pipe: chunks are cut where the reads end as well as where a chunk fills; the
// warning names standard input.
TEST(CliDeviceFault, PipeOutputEqualsGrep) {
  const std::string input = read_file(corpus_path("loghub/OpenSSH_2k.log"));
  for (const Plan& plan : plans()) {
    expect_like_grep({"-e", "Failed password", "-e", "Accepted", "-e", "1"}, input, plan, "(standard input)",
                     "pipe lines");
    expect_like_grep({"-c", "-e", "authentication failure"}, input, plan, "(standard input)", "pipe -c");
  }
}

// No memory to grow an occurrence buffer: digits fill more than a 64 KiB chunk's first
// buffer (4096 occurrences), so the first and the second chunk each grow one.
TEST(CliDeviceFault, FailedBufferGrowthEqualsGrep) {
  const std::string log = corpus_path("loghub/OpenSSH_2k.log");
  std::vector<std::string> args = {"-o"};
  for (char d = '0'; d <= '9'; ++d) args.insert(args.end(), {"-e", std::string(1, d)});
  args.push_back(log);
  for (const char* spec : {"oom:1", "oom:2"}) {
    const Plan plan{spec, "clCreateBuffer: CL error -4, CL_MEM_OBJECT_ALLOCATION_FAILURE"};
    const GrepRun expected = run_grep(args, "");
    const GrepRun actual = run_gpufilter(args, "", Knobs{"64K", "3", "gpu"}, {std::string(kPlanVariable) + "=" + spec});
    EXPECT_EQ(actual.status, expected.status) << spec;
    EXPECT_EQ(first_difference(expected.out, actual.out), "") << spec;
    EXPECT_GT(std::count(actual.out.begin(), actual.out.end(), '\n'), 20000) << spec;
    expect_one_warning(actual.err, plan, log, spec);
  }
}

// Several files: the device stays abandoned after the fault, so one warning for the run,
// and every file's lines are there.
TEST(CliDeviceFault, OneWarningAcrossFiles) {
  const std::vector<std::string> logs = {corpus_path("loghub/OpenSSH_2k.log"), corpus_path("loghub/Linux_2k.log"),
                                         corpus_path("loghub/Apache_2k.log")};
  const std::vector<std::string> args = with({"-n", "-e", "error", "-e", "session", "-e", "1"}, logs);
  const Plan plan = plans()[1];  // submit:6, in the first file
  expect_like_grep(args, "", plan, logs[0], "three files");
}

// --pattern-counts after a fault: exact where the device's counters could be read (the
// counts of a run without faults and of the host engine, status 0); after a lost device they cannot be, so the
// lines are still complete but the counts are flagged and the status is 2.
TEST(CliDeviceFault, PatternCounts) {
  const std::string log = corpus_path("loghub/Linux_2k.log");
  const std::vector<std::string> patterns = {"-e", "session", "-e",       "kernel",
                                             "-e", "1",       "-e", "authentication failure"};
  const std::vector<std::string> args = with(with({"--pattern-counts", "-c"}, patterns), {"--host-scan-below=0", log});
  const GrepRun clean = run_gpufilter(args, "", kDevice);
  ASSERT_EQ(clean.status, 0) << clean.err;
  ASSERT_EQ(clean.err, "");
  const GrepRun grep_count = run_grep(with(with({"-c"}, patterns), {log}));
  EXPECT_EQ(clean.out.rfind(grep_count.out, 0), 0u) << "the -c line first: " << escape(clean.out);
  EXPECT_EQ(run_gpufilter(args, "", Knobs{"16K", "3", "cpu"}).out, clean.out) << "the host engine's counts";
  for (const char* spec : {"submit:4", "finish:4", "alloc:2"}) {
    const GrepRun r = run_gpufilter(args, "", kDevice, {std::string(kPlanVariable) + "=" + spec});
    EXPECT_EQ(r.status, 0) << spec << ": " << r.err;
    EXPECT_EQ(r.out, clean.out) << spec;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << spec << ": " << escape(r.err);
  }
  const GrepRun lost = run_gpufilter(args, "", kDevice, {std::string(kPlanVariable) + "=lost:4"});
  EXPECT_EQ(lost.status, 2) << lost.err;
  EXPECT_EQ(lost.out.rfind(grep_count.out, 0), 0u) << "the -c line is still right: " << escape(lost.out);
  EXPECT_NE(lost.err.find("warning: OpenCL device failed (clFlush"), std::string::npos) << escape(lost.err);
  EXPECT_NE(lost.err.find("gpufilter: --pattern-counts: the counts are inexact"), std::string::npos)
      << escape(lost.err);
}

// A malformed plan is a setup error naming the variable: status 2, nothing searched.
TEST(CliDeviceFault, MalformedPlanIsRefused) {
  const std::string log = corpus_path("loghub/OpenSSH_2k.log");
  for (const char* spec : {"submit", "submit:0", "melt:1", "finish:2,"}) {
    const GrepRun r = run_gpufilter({"preauth", log}, "", kDevice, {std::string(kPlanVariable) + "=" + spec});
    EXPECT_EQ(r.status, 2) << spec;
    EXPECT_EQ(r.out, "") << spec;
    EXPECT_EQ(r.err.rfind(std::string("gpufilter: ") + kPlanVariable + ": device fault plan '" + spec + "'", 0), 0u)
        << spec << ": " << escape(r.err);
  }
}

}  // namespace
