// The progress line: its text, its drawing and erasing (into memory), and the real binary
// on a pseudo-terminal made by script(1), where it must appear after a second and be gone
// before the count is printed; never when standard error is not a terminal.
#include "gpufilter/cli/progress.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "testutil/testutil.hpp"

namespace gpufilter::cli {
namespace {

using namespace std::chrono_literals;

TEST(ProgressText, BytesRateAndTimeLeft) {
  EXPECT_EQ(progress_text(0, std::nullopt, 0), "0 B");
  EXPECT_EQ(progress_text(1'500'000'000, 4'000'000'000, 0.5), "1.5 GB of 4.0 GB, 3.0 GB/s, 1 s left");
  EXPECT_EQ(progress_text(12'000'000, std::nullopt, 2), "12.0 MB, 6.0 MB/s");
  EXPECT_EQ(progress_text(100'000'000'000, 1'000'000'000'000, 10), "100 GB of 1.0 TB, 10.0 GB/s, 1 min 30 s left");
  EXPECT_EQ(progress_text(5, 5, 1), "5 B of 5 B, 5 B/s");  // done: no time left
}

// Draws, redraws, and erases before another write and at the end.
TEST(ProgressLine, DrawsAndErasesBeforeOtherWrites) {
  StringWriter terminal;
  std::atomic<std::uint64_t> bytes{2'000'000};
  ProgressLine line(terminal, [&] { return bytes.load(); }, 4'000'000, {0ms, 10ms});
  bool drawn = false;
  for (int i = 0; i < 2000 && !drawn; ++i) {
    line.erase_then([&] { drawn = terminal.text().find("2.0 MB of 4.0 MB") != std::string::npos; });
    if (!drawn) std::this_thread::sleep_for(5ms);
  }
  ASSERT_TRUE(drawn);
  line.erase_then([&] { terminal.write("count\n"); });
  line.stop();
  const std::string t = terminal.text();
  EXPECT_EQ(t.rfind("\r\033[K2.0 MB of 4.0 MB", 0), 0u) << ::testing::PrintToString(t);
  // The line is erased right before "count", and nothing is drawn after the stop.
  const std::size_t count = t.find("count\n");
  ASSERT_NE(count, std::string::npos);
  EXPECT_EQ(t.substr(count - 4, 4), "\r\033[K");
  line.stop();
  EXPECT_EQ(terminal.text(), t);
}

// A run shorter than the delay draws nothing.
TEST(ProgressLine, ShortRunDrawsNothing) {
  StringWriter terminal;
  {
    ProgressLine line(terminal, [] { return std::uint64_t{1}; }, std::nullopt);
  }
  EXPECT_EQ(terminal.text(), "");
}

// script(1) gives the child a terminal; a pipe that stays open 2 s makes a run that lasts.
std::string run_on_terminal(const std::string& command) {
  if (::system("command -v script >/dev/null 2>&1") != 0) return "no script";
  return gpufilter::test::command_output("script -qec " + gpufilter::test::shell_quote(command) + " /dev/null 2>&1");
}

TEST(ProgressOnATerminal, AppearsForASlowCountAndIsErasedBeforeIt) {
  const std::string bin = gpufilter::test::gpufilter_binary();
  const std::string out = run_on_terminal("(echo a; sleep 2; echo a) | " + bin + " --engine=host -c a");
  if (out == "no script") GTEST_SKIP() << "script(1) is not installed";
  EXPECT_NE(out.find("\r\033[K2 B, "), std::string::npos) << ::testing::PrintToString(out);
  EXPECT_NE(out.find("\r\033[K2\r\n"), std::string::npos) << ::testing::PrintToString(out);
  const std::string quiet = run_on_terminal("(echo a; sleep 2; echo a) | " + bin + " --engine=host --no-progress -c a");
  EXPECT_EQ(quiet, "2\r\n");
  // Lines to the terminal itself: no progress line among them.
  const std::string lines = run_on_terminal("(echo a; sleep 2; echo a) | " + bin + " --engine=host a");
  EXPECT_EQ(lines, "a\r\na\r\n");
}

}  // namespace
}  // namespace gpufilter::cli
