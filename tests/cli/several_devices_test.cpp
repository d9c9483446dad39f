// Several OpenCL devices on one input (--device all, repeated --device, a comma list).
// PoCL gives two real devices when POCL_DEVICES names two. The output must be grep's, byte
// for byte, whichever device took each chunk; --stats names each device's share; a device
// that fails mid-run leaves its share to the CPU and the other device going; a bad list is
// refused by name.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "differential.hpp"
#include "testutil/testutil.hpp"

namespace gpufilter::test {
namespace {

// Two PoCL devices, and only PoCL's platform where a GPU's is registered too (the GPU
// machine, whose environment also lists both libraries in OCL_ICD_FILENAMES, which the
// ICD loader reads instead of its folder), so that "all" means these two devices everywhere.
std::vector<std::string> two_devices() {
  std::vector<std::string> env = {"POCL_DEVICES=pthread pthread", "LC_ALL=C"};
  const std::string icd = "/etc/OpenCL/vendors/pocl.icd";
  std::ifstream in(icd);
  std::string library;
  if (in >> library) env.insert(env.end(), {"OCL_ICD_VENDORS=" + icd, "OCL_ICD_FILENAMES=" + library});
  return env;
}
const std::vector<std::string> kTwoDevices = two_devices();

std::string corpus_text() {
  std::string text;
  for (int round = 0; round < 2; ++round)
    for (const char* log : {"OpenSSH_2k.log", "Apache_2k.log", "Linux_2k.log", "HDFS_2k.log"})
      text += read_file(corpus_path(std::string("loghub/") + log));
  return text;
}

ProcessResult gpufilter_run(std::vector<std::string> args, const std::vector<std::string>& env = kTwoDevices) {
  args.insert(args.begin(), gpufilter_binary());
  return run_process(args, {}, env);
}

// The device list as --stats tells it: one {device, chunks, bytes} per device.
nlohmann::json shares_of(const std::string& err) {
  const std::string head = "gpufilter-stats: ";
  const std::size_t at = err.find(head);
  if (at == std::string::npos) return nullptr;
  const std::size_t end = err.find('\n', at);
  const auto stats = nlohmann::json::parse(err.substr(at + head.size(), end - at - head.size()));
  return stats.contains("device_shares") ? stats["device_shares"] : nlohmann::json(nullptr);
}

// Both devices alone (the device engine) and beside the host engine (--engine=both), with
// chunks small enough that each device takes many: grep's output every time.
TEST(SeveralDevices, AnswerAsGrep) {
  TempDir dir;
  const std::string file = dir.write("text.log", corpus_text());
  const std::string patterns = dir.write("patterns.txt", "Failed password\nerror\nblk_\nINFO\n404\nsession opened\n");
  const std::vector<std::vector<std::string>> engines = {
      {"--engine=gpu", "--device=all", "--chunk-size=64K", "--host-scan-below=0"},
      {"--engine=gpu", "--device=0:1", "--device=0:0", "--chunk-size=5K", "--slots=2", "--host-scan-below=0"},
      {"--engine=both", "--device=0:0,0:1", "--chunk-size=64K", "--host-scan-below=0", "--slots=40"}};
  const std::vector<std::vector<std::string>> cases = {
      {"-c"}, {"-n"}, {"-o", "-b"}, {"-v", "-c"}, {"-m", "7", "-n"}, {"-w", "-c"}, {"-i", "-c"}, {"-x", "-c"}};
  std::vector<std::string> env = kTwoDevices;
  env.insert(env.end(), {"GPUFILTER_WAIT_FOR_DEVICE=1", "GPUFILTER_CO_LANES=1,1"});
  for (const auto& options : cases) {
    std::vector<std::string> args = options;
    args.insert(args.end(), {"-f", patterns, file});
    std::vector<std::string> grep = {grep_binary(), "-F"};
    grep.insert(grep.end(), args.begin(), args.end());
    const ProcessResult expected = run_process(grep, {}, env);
    for (const auto& engine : engines) {
      std::vector<std::string> ours = engine;
      ours.insert(ours.end(), args.begin(), args.end());
      const ProcessResult actual = gpufilter_run(ours, env);
      SCOPED_TRACE(describe_args(ours));
      EXPECT_EQ(actual.status, expected.status) << actual.err;
      EXPECT_EQ(first_difference(expected.out, actual.out), "");
    }
  }
}

// --stats: every device took a share, and the shares add up to the input.
TEST(SeveralDevices, StatsGiveEachDevicesShare) {
  TempDir dir;
  const std::string text = corpus_text();
  const std::string file = dir.write("text.log", text);
  const ProcessResult r =
      gpufilter_run({"--engine=gpu", "--device=all", "--chunk-size=64K", "--stats", "-c", "sshd", file});
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json shares = shares_of(r.err);
  ASSERT_TRUE(shares.is_array()) << r.err;
  ASSERT_EQ(shares.size(), 2u) << r.err;
  std::uint64_t bytes = 0;
  for (const auto& share : shares) {
    EXPECT_GT(share["chunks"].get<std::uint64_t>(), 2u) << r.err;
    bytes += share["bytes"].get<std::uint64_t>();
  }
  EXPECT_EQ(bytes, text.size());
  EXPECT_NE(r.err.find("\"device\":\"2 devices: "), std::string::npos) << r.err;
  // One device named twice is one device.
  const ProcessResult one = gpufilter_run({"--engine=gpu", "--device=0:0,0:0", "--stats", "-c", "sshd", file});
  EXPECT_EQ(one.status, 0) << one.err;
  EXPECT_TRUE(shares_of(one.err).is_null()) << one.err;
}

// A fault on each device: each says so once, naming its device, and the CPU takes its
// share; the output stays grep's.
TEST(SeveralDevices, AFailingDeviceLeavesItsShareToTheCpu) {
  TempDir dir;
  const std::string file = dir.write("text.log", corpus_text());
  const ProcessResult expected = run_process({grep_binary(), "-F", "-n", "sshd", file}, {}, kTwoDevices);
  for (const char* plan : {"submit:2", "lost:3", "finish:4", "alloc:1"}) {
    std::vector<std::string> env = kTwoDevices;
    env.push_back(std::string("GPUFILTER_INJECT_DEVICE_FAULT=") + plan);
    const ProcessResult r = gpufilter_run(
        {"--engine=gpu", "--device=all", "--chunk-size=16K", "--host-scan-below=0", "-n", "sshd", file}, env);
    SCOPED_TRACE(plan);
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(first_difference(expected.out, r.out), "");
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 2) << escape(r.err);
    // PoCL 3 names its CPU devices "pthread-...", PoCL 5 (the GPU machine's) "cpu-...".
    EXPECT_TRUE(r.err.find(" on pthread") != std::string::npos || r.err.find(" on cpu") != std::string::npos)
        << escape(r.err);
  }
}

TEST(SeveralDevices, BadListsAreRefusedByName) {
  for (const auto& [spec, says] : std::vector<std::pair<std::string, std::string>>{
           {"0:0,,0:1", "invalid device list '0:0,,0:1': an empty entry"},
           {"0:0,0:7", "no OpenCL device 0:7"},
           {"all,nonsense", "invalid device 'nonsense'"}}) {
    const ProcessResult r = gpufilter_run({"--engine=gpu", "--device=" + spec, "x", "/dev/null"});
    EXPECT_EQ(r.status, 2) << spec;
    EXPECT_NE(r.err.find(says), std::string::npos) << spec << ": " << r.err;
  }
}

}  // namespace
}  // namespace gpufilter::test
