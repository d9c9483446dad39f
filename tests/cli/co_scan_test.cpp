// --engine=both: the host engine and the OpenCL device (PoCL here) scan one file together.
// The output must be grep's, byte for byte, whichever engine took each chunk; the device
// is made to join before the first chunk (GPUFILTER_WAIT_FOR_DEVICE) and to take chunks of
// any size (--host-scan-below=0), so that both engines certainly scan.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "differential.hpp"
#include "testutil/testutil.hpp"

namespace gpufilter::test {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Real logs, several times over, with a NUL byte in the middle when `binary`.
std::string corpus_text(bool binary) {
  std::string text;
  for (int round = 0; round < 3; ++round)
    for (const char* log : {"OpenSSH_2k.log", "Apache_2k.log", "Linux_2k.log", "HDFS_2k.log", "Zookeeper_2k.log"})
      text += slurp(corpus_path(std::string("loghub/") + log));
  if (binary) text.insert(text.size() / 2, std::string("binary\0here", 11));
  return text;
}

// One lane of one chunk and 40 chunks in flight: the lane takes a chunk whenever it is
// free and the host engine the others, however fast either is (sanitizer builds too).
const std::vector<std::string> kEnv = {"GPUFILTER_WAIT_FOR_DEVICE=1", "GPUFILTER_CO_LANES=1,1", "LC_ALL=C"};
const std::vector<std::string> kKnobs = {"--engine=both", "--host-scan-below=0", "--chunk-size=64K", "--slots=40"};

TEST(CoScan, BothEnginesTogetherAnswerAsGrep) {
  TempDir dir;
  const std::string patterns = dir.write("patterns.txt", "Failed password\nerror\nblk_\nINFO\n404\nsession opened\n");
  for (const bool binary : {false, true}) {
    const std::string file = dir.write(binary ? "binary.log" : "text.log", corpus_text(binary));
    const std::vector<std::vector<std::string>> cases = {
        {"-c"}, {"-n"}, {"-o", "-b"}, {"--color=always"}, {"-v", "-c"}, {"-m", "7", "-n"},
        {"-a", "-c"}, {"-l"}, {"-w", "-c"}, {"-i", "-c"}, {"-x", "-c"}};
    for (const auto& options : cases) {
      std::vector<std::string> args = options;
      args.insert(args.end(), {"-f", patterns, file});
      std::vector<std::string> grep = {grep_binary(), "-F"};
      grep.insert(grep.end(), args.begin(), args.end());
      const ProcessResult expected = run_process(grep, {}, kEnv);
      std::vector<std::string> ours = {gpufilter_binary()};
      ours.insert(ours.end(), kKnobs.begin(), kKnobs.end());
      ours.insert(ours.end(), args.begin(), args.end());
      const ProcessResult actual = run_process(ours, {}, kEnv);
      SCOPED_TRACE(describe_args(args));
      EXPECT_EQ(actual.status, expected.status) << actual.err;
      EXPECT_TRUE(actual.out == expected.out) << "output differs from grep's (" << actual.out.size() << " bytes against "
                                              << expected.out.size() << ")";
    }
  }
}

// --stats says which engine took how many chunks: here both took some.
TEST(CoScan, StatsShowBothEnginesScanned) {
  TempDir dir;
  const std::string file = dir.write("text.log", corpus_text(false));
  std::vector<std::string> argv = {gpufilter_binary()};
  argv.insert(argv.end(), kKnobs.begin(), kKnobs.end());
  argv.insert(argv.end(), {"--stats", "-c", "sshd", file});
  const ProcessResult r = run_process(argv, {}, kEnv);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("\"engine\":\"cpu+gpu\""), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("\"device_joined\":true"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("\"device_chunks\":0,"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("\"host_chunks\":0}"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace gpufilter::test
