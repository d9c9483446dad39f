// Inputs far larger than a chunk: a 1 GiB file without a single newline is one line that
// the chunker splits into overlapping pieces; the answer must be exact and memory must
// stay bounded by the slots, the chunk size and the pattern tables, not by the line.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "differential.hpp"
#include "testutil/testutil.hpp"

namespace gpufilter::test {
namespace {

constexpr std::uint64_t kSize = std::uint64_t{1} << 30;
// 3 slots x 4 MiB (given explicitly: the defaults scale with the device and the cores)
// + 16 MiB of line in memory + what an OpenCL driver keeps (NVIDIA's, compiling the kernel
// on a cold cache, took the process past 256 MiB once). Half the line, so a run that held
// the line in memory cannot pass.
constexpr long kMemoryBoundKb = 512 * 1024;

// Writes `size` bytes of 'a' with `needle` at `at` (no newline anywhere).
void write_long_line(const std::string& path, std::uint64_t size, std::uint64_t at, const std::string& needle) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  std::string block(1 << 20, 'a');
  for (std::uint64_t written = 0; written < size;) {
    std::string piece = block.substr(0, static_cast<std::size_t>(std::min<std::uint64_t>(block.size(), size - written)));
    if (at >= written && at < written + piece.size()) piece.replace(static_cast<std::size_t>(at - written), needle.size(), needle);
    ASSERT_EQ(::write(fd, piece.data(), piece.size()), static_cast<ssize_t>(piece.size()));
    written += piece.size();
  }
  ::close(fd);
}

TEST(LargeInput, GigabyteLineWithoutNewlineInBoundedMemory) {
  TempDir dir;
  const std::string file = dir.path() + "/one-line.txt";
  const std::uint64_t at = kSize - 1000;  // near the end: every piece before it is scanned
  write_long_line(file, kSize, at, "NEEDLE");

  for (const char* engine : {"--engine=gpu", "--engine=cpu"}) {
    SCOPED_TRACE(engine);
    const std::vector<std::string> knobs{engine, "--chunk-size=4M", "--slots=3"};
    auto command = [&](std::vector<std::string> args) {
      args.insert(args.begin(), knobs.begin(), knobs.end());
      args.insert(args.begin(), gpufilter_binary());
      return args;
    };
    const ProcessResult count = run_process_measured(command({"-c", "NEEDLE", file}));
    EXPECT_EQ(count.status, 0) << count.err;
    EXPECT_EQ(count.out, "1\n");
    EXPECT_LT(count.max_rss_kb, kMemoryBoundKb) << "peak resident memory grew with the line";

    const ProcessResult located = run_process_measured(command({"-o", "-b", "-e", "NEEDLE", "-e", "aNEE", file}));
    EXPECT_EQ(located.status, 0) << located.err;
    // Leftmost-longest, no overlaps: "aNEE" starts one byte before NEEDLE and hides it.
    EXPECT_EQ(located.out, std::to_string(at - 1) + ":aNEE\n");
    EXPECT_LT(located.max_rss_kb, kMemoryBoundKb);

    const ProcessResult none = run_process(command({"-c", "NEEDLES", file}));
    EXPECT_EQ(none.status, 1);
    EXPECT_EQ(none.out, "0\n");
  }
}

// A search that stops at its first answer (-l, -q, -m) on a large file reads and scans
// little more than the lines up to that answer: the first chunks are small and each is
// delivered before the next is read (ChunkerConfig::first_capacity), and the file is
// mapped, or the mapping's cost measured, only after them. `-l ERROR` had read 40 MB of
// a 250 MB file (every slot filled before the first was delivered): 25 ms, grep 5.
TEST(LargeInput, AnEarlyAnswerReadsLittleOfALargeFile) {
  TempDir dir;
  std::string text;
  for (int i = 0; text.size() < (std::size_t{48} << 20); ++i) {
    text += "2026-12-06 12:00:" + std::to_string(i % 60) + " host" + std::to_string(i % 97) + " service started, all fine\n";
    if (i == 4000 || i == 700000) text += "2026-12-06 12:00:00 host1 ERROR disk full\n";
  }
  const std::string file = dir.write("big.log", text);
  for (const std::string map : {"0", "1", ""}) {
    for (const std::string engine : {"--engine=cpu", "--engine=gpu"}) {
      for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
               {"-l", "ERROR"}, {"-q", "ERROR"}, {"-m1", "-n", "ERROR"}, {"-c", "-m1", "-F", "disk full"}}) {
        const std::string label = describe_args(args) + " " + engine + " GPUFILTER_MAP_FILES=" + map;
        std::vector<std::string> argv = {gpufilter_binary(), engine, "--stats"};
        argv.insert(argv.end(), args.begin(), args.end());
        argv.push_back(file);
        const ProcessResult ours = run_process(argv, {}, map.empty() ? std::vector<std::string>{}
                                                                     : std::vector<std::string>{"GPUFILTER_MAP_FILES=" + map});
        std::vector<std::string> grep_args = args;
        grep_args.push_back(file);
        const GrepRun theirs = run_grep(grep_args);
        EXPECT_EQ(ours.out, theirs.out) << label;
        EXPECT_EQ(ours.status, theirs.status) << label << ours.err;
        const std::size_t at = ours.err.find("\"bytes\":");
        ASSERT_NE(at, std::string::npos) << label << ours.err;
        EXPECT_LT(std::stoull(ours.err.substr(at + 8)), std::uint64_t{2} << 20) << label << ours.err;
      }
    }
  }
}

}  // namespace
}  // namespace gpufilter::test
