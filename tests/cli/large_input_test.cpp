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

}  // namespace
}  // namespace gpufilter::test
