// The streaming rule, on real pipes: a selected line reaches stdout while the input pipe
// stays open (no --line-buffered needed), a closed stdout ends gpufilter quietly, -m 1 and
// -q end it at the first match without waiting for EOF, and an unreadable -f file ends it
// before it reads any input. A stdout that nobody reads holds gpufilter's memory to its
// slots (file, pipe and --follow; --listen is Listen.SlowOutputClosesTheSendersWindow)
// and loses nothing once it is read again.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "differential.hpp"
#include "testutil/testutil.hpp"


namespace gpufilter::test {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// gpufilter with pipes on stdin, stdout and stderr; killed if a test leaves it running.
class Child {
 public:
  explicit Child(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {gpufilter_binary()};
    argv.insert(argv.end(), args.begin(), args.end());
    const SpawnedProcess child = spawn_process(argv);
    pid_ = child.pid;
    in_ = child.in;
    out_ = child.out;
    err_ = child.err;
  }

  ~Child() {
    kill_now();
    close_stdin();
    close_stdout();
    if (err_ >= 0) ::close(err_);
  }

  void kill_now() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
      exited_ = true;
    }
  }

  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  int stdin_fd() const { return in_; }
  int stdout_fd() const { return out_; }
  pid_t pid() const { return pid_; }
  void signal(int number) { ::kill(pid_, number); }
  // Waits until the child has read everything written to its standard input (the pipe is
  // empty: FIONREAD works on either end of a Linux pipe).
  bool wait_stdin_drained(milliseconds limit) {
    const auto deadline = Clock::now() + limit;
    for (;;) {
      int unread = 0;
      if (::ioctl(in_, FIONREAD, &unread) == 0 && unread == 0) return true;
      if (Clock::now() >= deadline) return false;
      std::this_thread::sleep_for(milliseconds(5));
    }
  }

  bool write_all(std::string_view data) {
    while (!data.empty()) {
      const ssize_t n = ::write(in_, data.data(), data.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return false;
      }
      data.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }

  void close_stdin() {
    if (in_ >= 0) ::close(in_);
    in_ = -1;
  }
  void close_stdout() {
    if (out_ >= 0) ::close(out_);
    out_ = -1;
  }

  // Reads stdout into `got` until it holds `wanted` (true), EOF or the deadline (false).
  bool read_until(std::string& got, const std::string& wanted, milliseconds limit) {
    const auto deadline = Clock::now() + limit;
    while (got.find(wanted) == std::string::npos) {
      if (!read_some(out_, got, deadline)) return false;
    }
    return true;
  }

  // Appends what stdout holds (one read, waiting up to `limit`): false at EOF or when
  // nothing came.
  bool read_some_output(std::string& got, milliseconds limit) { return read_some(out_, got, Clock::now() + limit); }

  // Reads stdout to EOF (true) or until the deadline (false).
  bool read_to_eof(std::string& got, milliseconds limit) {
    const auto deadline = Clock::now() + limit;
    while (read_some(out_, got, deadline)) {
    }
    return eof_seen_;
  }

  // Everything on stderr; call after the process has exited.
  std::string drain_stderr() {
    std::string s;
    const auto deadline = Clock::now() + milliseconds(2000);
    const bool saved = eof_seen_;
    while (read_some(err_, s, deadline)) {
    }
    eof_seen_ = saved;
    return s;
  }

  // The exit status (or 128 + signal) if the process ends before the deadline.
  std::optional<int> wait_exit(milliseconds limit) {
    const auto deadline = Clock::now() + limit;
    for (;;) {
      int status = 0;
      const pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        exited_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      if (Clock::now() >= deadline) return std::nullopt;
      std::this_thread::sleep_for(milliseconds(2));
    }
  }

 private:
  // One read with poll; false at EOF or past the deadline.
  bool read_some(int fd, std::string& got, Clock::time_point deadline) {
    for (;;) {
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return false;
      pollfd p{fd, POLLIN, 0};
      const int r = ::poll(&p, 1, static_cast<int>(left));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      char buffer[65536];
      const ssize_t n = ::read(fd, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        eof_seen_ = true;
        return false;
      }
      got.append(buffer, static_cast<std::size_t>(n));
      return true;
    }
  }

  pid_t pid_ = -1;
  int in_ = -1, out_ = -1, err_ = -1;
  bool exited_ = false;
  bool eof_seen_ = false;
};

class Streaming : public ::testing::Test {
 protected:
  // Writing into a pipe whose reader has gone must be an error here, not a signal.
  void SetUp() override { ::signal(SIGPIPE, SIG_IGN); }
};

// `numbered`: the arguments include -n. A first selected line waits out start-up (the
// OpenCL context and kernel build: seconds on a busy GPU machine); the lines after it must
// each arrive within 1000 ms while stdin stays open.
void check_lines_arrive_while_input_stays_open(const std::vector<std::string>& args, bool numbered) {
  SCOPED_TRACE(describe_args(args));
  auto n = [&](int line) { return numbered ? std::to_string(line) + ":" : std::string(); };
  Child child(args);
  ASSERT_TRUE(child.write_all("ERROR ready\n"));
  std::string got;
  std::string expected = n(1) + "ERROR ready\n";
  ASSERT_TRUE(child.read_until(got, expected, milliseconds(60000))) << "no output within 60 s of start";

  ASSERT_TRUE(child.write_all("noise\n"));
  ASSERT_TRUE(child.write_all("ERROR one\n"));
  expected += n(3) + "ERROR one\n";
  EXPECT_TRUE(child.read_until(got, expected, milliseconds(1000)))
      << "a selected line did not reach stdout within 1000 ms while stdin stayed open; got \"" << escape(got) << "\"";
  EXPECT_EQ(got, expected);

  ASSERT_TRUE(child.write_all("more noise\nERROR two\n"));
  expected += n(5) + "ERROR two\n";
  EXPECT_TRUE(child.read_until(got, expected, milliseconds(1000)))
      << "the second selected line did not arrive within 1000 ms; got \"" << escape(got) << "\"";

  // A line that arrives in two writes.
  ASSERT_TRUE(child.write_all("ERR"));
  std::this_thread::sleep_for(milliseconds(30));
  ASSERT_TRUE(child.write_all("OR three\n"));
  expected += n(6) + "ERROR three\n";
  EXPECT_TRUE(child.read_until(got, expected, milliseconds(1000)))
      << "a line written in two pieces did not arrive within 1000 ms; got \"" << escape(got) << "\"";

  child.close_stdin();
  EXPECT_TRUE(child.read_to_eof(got, milliseconds(5000)));
  EXPECT_EQ(got, expected);
  const std::optional<int> status = child.wait_exit(milliseconds(5000));
  ASSERT_TRUE(status.has_value()) << "gpufilter did not exit after its stdin was closed";
  EXPECT_EQ(*status, 0);
  EXPECT_EQ(child.drain_stderr(), "");
}

TEST_F(Streaming, SelectedLinesArriveWhileInputStaysOpen) {
  check_lines_arrive_while_input_stays_open({"ERROR"}, false);
  check_lines_arrive_while_input_stays_open({"-n", "--slots=1", "ERROR"}, true);
  check_lines_arrive_while_input_stays_open({"--chunk-size=4096", "--slots=3", "ERROR"}, false);
}

TEST_F(Streaming, ClosedStdoutEndsGpufilterQuietly) {
  Child child({"y"});
  const int stdin_fd = child.stdin_fd();
  std::thread writer([stdin_fd] {
    const std::string block = [] {
      std::string b;
      while (b.size() < 65536) b += "y\n";
      return b;
    }();
    for (std::size_t written = 0; written < (50u << 20);) {
      const ssize_t n = ::write(stdin_fd, block.data(), block.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return;  // EPIPE: gpufilter is gone
      }
      written += static_cast<std::size_t>(n);
    }
  });
  std::string got;
  const bool some = child.read_until(got, "y\ny\n", milliseconds(10000));
  child.close_stdout();
  const auto closed = Clock::now();
  std::optional<int> status = child.wait_exit(milliseconds(5000));
  const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - closed).count();
  if (!status) child.kill_now();  // so that the writer thread ends
  writer.join();
  EXPECT_TRUE(some) << "no output before stdout was closed";
  ASSERT_TRUE(status.has_value()) << "gpufilter still ran 5 s after its stdout was closed";
  EXPECT_NE(*status, 0);
  EXPECT_LT(took, 5000);
  EXPECT_EQ(child.drain_stderr(), "") << "exit status " << *status;
}

TEST_F(Streaming, MaxCountEndsAtTheFirstMatchWithoutEof) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"-m", "1", "ERROR"}, {"-m1", "-n", "ERROR"}, {"-q", "ERROR"}, {"-l", "ERROR"}}) {
    SCOPED_TRACE(describe_args(args));
    Child child(args);
    ASSERT_TRUE(child.write_all("noise\nERROR one\nnoise\nERROR two\n"));
    // Generous: start-up is included, and a stalled gpufilter would wait for ever.
    const std::optional<int> status = child.wait_exit(milliseconds(30000));
    ASSERT_TRUE(status.has_value()) << "gpufilter waited for EOF after its last possible selected line";
    EXPECT_EQ(*status, 0);
    std::string got;
    child.read_to_eof(got, milliseconds(1000));
    const GrepRun grep = run_grep(args, "noise\nERROR one\nnoise\nERROR two\n");
    EXPECT_EQ(got, grep.out);
    EXPECT_EQ(child.drain_stderr(), "");
  }
}

TEST_F(Streaming, UnreadablePatternFileFailsBeforeReadingInput) {
  TempDir dir;
  for (const std::string& file : {dir.path() + "/missing", dir.path()}) {
    SCOPED_TRACE(file);
    Child child({"-f", file, "x"});
    const std::optional<int> status = child.wait_exit(milliseconds(3000));
    ASSERT_TRUE(status.has_value()) << "gpufilter waited for input although -f " << file << " cannot be read";
    EXPECT_EQ(*status, 2);
    std::string got;
    child.read_to_eof(got, milliseconds(1000));
    EXPECT_EQ(got, "");
    EXPECT_NE(child.drain_stderr(), "");
  }
}

}  // namespace
}  // namespace gpufilter::test

namespace gpufilter::test {
namespace {

// SIGTERM and SIGINT while standard input stays open: gpufilter stops reading, searches
// what it read (an unterminated last line included), flushes, and exits 0, even when
// nothing was selected; -c still prints its count.
TEST_F(Streaming, StopSignalsFinishWhatWasReadAndExitZero) {
  for (const char* engine : {"--engine=cpu", "--engine=gpu"}) {
    for (const int number : {SIGTERM, SIGINT}) {
      SCOPED_TRACE(std::string(engine) + " signal " + std::to_string(number));
      {
        Child child({engine, "ERROR"});
        ASSERT_TRUE(child.write_all("ERROR a\nnoise\nERROR b\n"));
        std::string got;
        ASSERT_TRUE(child.read_until(got, "ERROR b\n", milliseconds(60000)));
        ASSERT_TRUE(child.write_all("ERROR partial"));
        std::this_thread::sleep_for(milliseconds(50));
        child.signal(number);
        EXPECT_TRUE(child.read_to_eof(got, milliseconds(5000)));
        EXPECT_EQ(got, "ERROR a\nERROR b\nERROR partial\n");
        const std::optional<int> status = child.wait_exit(milliseconds(5000));
        ASSERT_TRUE(status.has_value()) << "gpufilter did not exit after the signal";
        EXPECT_EQ(*status, 0);
        EXPECT_EQ(child.drain_stderr(), "");
      }
      {
        Child child({engine, "-c", "ERROR"});
        ASSERT_TRUE(child.write_all("ERROR a\nnoise\nERROR b\n"));
        // No output to wait for: wait until it has read the lines (past start-up).
        ASSERT_TRUE(child.wait_stdin_drained(milliseconds(60000)));
        std::this_thread::sleep_for(milliseconds(50));
        child.signal(number);
        std::string got;
        EXPECT_TRUE(child.read_to_eof(got, milliseconds(60000)));
        EXPECT_EQ(got, "2\n");
        const std::optional<int> status = child.wait_exit(milliseconds(5000));
        ASSERT_TRUE(status.has_value());
        EXPECT_EQ(*status, 0);
      }
      {
        Child child({engine, "absent"});
        ASSERT_TRUE(child.write_all("nothing here\n"));
        ASSERT_TRUE(child.wait_stdin_drained(milliseconds(60000)));
        child.signal(number);
        std::string got;
        EXPECT_TRUE(child.read_to_eof(got, milliseconds(60000)));
        EXPECT_EQ(got, "");
        const std::optional<int> status = child.wait_exit(milliseconds(5000));
        ASSERT_TRUE(status.has_value());
        EXPECT_EQ(*status, 0) << "a stop by signal is a clean end, selected or not";
      }
    }
  }
}

// Before the scan begins (here: still reading the patterns of -f - from a pipe that stays
// open), SIGINT and SIGTERM end gpufilter at once, as they end grep: a slow start (a large
// pattern list, a device build) can be interrupted. It used to take the signal as "stop
// reading" and go on until the patterns ended.
TEST_F(Streaming, StopSignalsBeforeTheScanEndTheProcess) {
  for (const int number : {SIGTERM, SIGINT}) {
    SCOPED_TRACE("signal " + std::to_string(number));
    Child child({"--engine=cpu", "-f", "-", "/dev/null"});
    ASSERT_TRUE(child.write_all("first pattern\n"));
    ASSERT_TRUE(child.wait_stdin_drained(milliseconds(60000)));
    std::this_thread::sleep_for(milliseconds(50));
    child.signal(number);
    const std::optional<int> status = child.wait_exit(milliseconds(5000));
    ASSERT_TRUE(status.has_value()) << "gpufilter went on reading its patterns after the signal";
    EXPECT_EQ(*status, 128 + number);
  }
}

}  // namespace
}  // namespace gpufilter::test

namespace gpufilter::test {
namespace {

// The resident set of a running process, in KiB: its peak so far (VmHWM) and now (VmRSS).
struct ResidentSet {
  long peak_kb = -1;
  long now_kb = -1;
};
ResidentSet resident_set(pid_t pid) {
  ResidentSet r;
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  while (status >> key) {
    if (key == "VmHWM:") status >> r.peak_kb;
    else if (key == "VmRSS:") status >> r.now_kb;
    status.ignore(1 << 20, '\n');
  }
  return r;
}

// Waits until gpufilter is blocked writing its output: the pipe is at least half full and
// neither it nor `progress` (the input side) has changed for 300 ms.
bool wait_output_blocked(int fd, const std::function<std::uint64_t()>& progress, milliseconds limit) {
  const int capacity = ::fcntl(fd, F_GETPIPE_SZ);
  const auto deadline = Clock::now() + limit;
  int last_unread = -1;
  std::uint64_t last_progress = 0;
  auto since = Clock::now();
  while (Clock::now() < deadline) {
    int unread = 0;
    if (::ioctl(fd, FIONREAD, &unread) != 0) return false;
    const std::uint64_t now_progress = progress();
    if (unread != last_unread || now_progress != last_progress) {
      last_unread = unread;
      last_progress = now_progress;
      since = Clock::now();
    } else if (unread >= capacity / 2 && Clock::now() - since >= milliseconds(300)) {
      return true;
    }
    std::this_thread::sleep_for(milliseconds(10));
  }
  return false;
}

// Writes about `bytes` of input for the blocked-output tests to `path`, a piece at a time:
// every other line is selected by "seq=".
void write_numbered_file(const std::string& path, std::size_t bytes) {
  std::ofstream file(path, std::ios::binary);
  std::string piece;
  std::size_t written = 0;
  for (std::uint64_t i = 0; written < bytes; ++i) {
    piece += i % 2 == 0 ? "seq=" : "noise ";
    piece += std::to_string(i);
    piece += ' ';
    piece.append(20 + i * 13 % 50, 'x');
    piece += '\n';
    if (piece.size() >= (1u << 20)) {
      file << piece;
      written += piece.size();
      piece.clear();
    }
  }
  file << piece;
  if (!file.flush()) throw std::runtime_error("cannot write " + path);
}

// Compares a stream with a file as it arrives, holding neither: the test's own memory
// stays small whatever the size (it runs under the sanitizers too).
class CompareWithFile {
 public:
  explicit CompareWithFile(const std::string& path) : file_(path, std::ios::binary) {
    file_.seekg(0, std::ios::end);
    size_ = static_cast<std::uint64_t>(file_.tellg());
    file_.seekg(0);
  }
  void feed(std::string_view got) {
    expected_.resize(got.size());
    file_.read(expected_.data(), static_cast<std::streamsize>(got.size()));
    expected_.resize(static_cast<std::size_t>(file_.gcount()));
    if (!mismatch_ && got != expected_) {
      std::size_t i = 0;
      while (i < got.size() && i < expected_.size() && got[i] == expected_[i]) ++i;
      mismatch_ = seen_ + i;
    }
    seen_ += got.size();
  }
  std::uint64_t seen() const { return seen_; }
  std::uint64_t size() const { return size_; }
  // "" when everything arrived and matched; else where it went wrong.
  std::string verdict() const {
    if (mismatch_) return "the output differs from grep's at byte " + std::to_string(*mismatch_);
    if (seen_ != size_) return std::to_string(seen_) + " bytes of output, grep's has " + std::to_string(size_);
    return {};
  }

 private:
  std::ifstream file_;
  std::uint64_t size_ = 0;
  std::uint64_t seen_ = 0;
  std::string expected_;
  std::optional<std::uint64_t> mismatch_;
};

// Nobody reads gpufilter's standard output while far more input than its memory bound
// streams in: from a regular file, from a pipe (whose writer must then block too), and
// from a followed file. Its resident set, peak included, stays within the slots it was
// given; once the output is read again, every selected line arrives exactly as grep
// selects it. The slots are fixed (2 of 2 MiB on the host engine) so that the bound does
// not depend on the machine's cores.
TEST_F(Streaming, BlockedStdoutHoldsMemoryAndThenDeliversEverything) {
#if defined(GPUFILTER_SANITIZED)
  // The sanitizers' runtime, shadow memory and quarantine weigh on the resident set
  // (ThreadSanitizer's most): a higher bound, and an input still well above it.
  constexpr long kBoundKb = 128 * 1024;
  constexpr std::size_t kInputBytes = 256u << 20;
#else
  constexpr long kBoundKb = 32 * 1024;
  constexpr std::size_t kInputBytes = 96u << 20;
#endif
  const std::vector<std::string> knobs = {"--engine=cpu", "--chunk-size=2M", "--slots=2"};
  TempDir dir;
  const std::string log = dir.path() + "/app.log";
  write_numbered_file(log, kInputBytes);
  const std::string expected = dir.path() + "/expected";
  ASSERT_EQ(run_process({"/bin/sh", "-c",
                         "exec " + shell_quote(grep_binary()) + " -F seq= " + shell_quote(log) + " > " +
                             shell_quote(expected)})
                .status,
            0);

  enum class Mode { kFile, kPipe, kFollow };
  for (const Mode mode : {Mode::kFile, Mode::kPipe, Mode::kFollow}) {
    const char* name = mode == Mode::kFile ? "file" : mode == Mode::kPipe ? "pipe" : "--follow";
    SCOPED_TRACE(name);
    std::vector<std::string> args = knobs;
    if (mode == Mode::kFollow) args.insert(args.end(), {"--follow", "--from-start"});
    args.push_back("seq=");
    if (mode != Mode::kPipe) args.push_back(log);
    Child child(args);
    std::atomic<std::uint64_t> written{0};
    std::thread writer;
    if (mode == Mode::kPipe) {
      writer = std::thread([&] {
        std::ifstream input(log, std::ios::binary);
        std::string piece(1u << 16, '\0');
        while (input.read(piece.data(), static_cast<std::streamsize>(piece.size())) || input.gcount() > 0) {
          const std::string_view data(piece.data(), static_cast<std::size_t>(input.gcount()));
          if (!child.write_all(data)) return;  // gpufilter is gone: the test fails below
          written += data.size();
        }
        child.close_stdin();
      });
    } else {
      child.close_stdin();
    }
    // A writer still blocked when an assertion ends the test: gpufilter goes first.
    struct Join {
      std::thread& thread;
      Child& child;
      ~Join() {
        if (!thread.joinable()) return;
        child.kill_now();
        thread.join();
      }
    } join{writer, child};

    const bool blocked = wait_output_blocked(child.stdout_fd(), [&] { return written.load(); }, milliseconds(60000));
    ASSERT_TRUE(blocked) << "gpufilter's output never filled up";
    const ResidentSet held = resident_set(child.pid());
    ASSERT_GT(held.peak_kb, 0) << "gpufilter is gone";
    EXPECT_LT(held.peak_kb, kBoundKb) << "peak resident set while the output was blocked";
    if (mode == Mode::kPipe) {
      EXPECT_LT(written.load(), kInputBytes / 2) << "the writer never blocked: gpufilter buffered its input";
    }

    // Now read it all, watching the peak (VmHWM) until the end.
    CompareWithFile compare(expected);
    std::string got;
    long run_peak_kb = held.peak_kb;
    auto read_some = [&](milliseconds limit) {
      got.clear();
      const bool more = child.read_some_output(got, limit);
      compare.feed(got);
      run_peak_kb = std::max(run_peak_kb, resident_set(child.pid()).peak_kb);  // -1 once it has exited
      return more;
    };
    if (mode == Mode::kFollow) {
      // A followed file has no end: read until grep's output is all there, then stop it.
      const auto deadline = Clock::now() + milliseconds(60000);
      while (compare.seen() < compare.size() && Clock::now() < deadline && read_some(milliseconds(1000))) {
      }
      child.signal(SIGTERM);
    }
    const auto deadline = Clock::now() + milliseconds(60000);
    while (Clock::now() < deadline && read_some(milliseconds(1000))) {
    }
    const std::optional<int> status = child.wait_exit(milliseconds(10000));
    ASSERT_TRUE(status.has_value());
    if (writer.joinable()) writer.join();  // it wrote everything: gpufilter read it all
    EXPECT_EQ(*status, 0);
    EXPECT_EQ(compare.verdict(), "");
    EXPECT_LT(run_peak_kb, kBoundKb) << "peak resident set over the whole run";
    EXPECT_EQ(child.drain_stderr(), "");
    std::printf("[ %s ] output blocked: gpufilter peak resident %ld KiB (now %ld KiB, %ld KiB over the run) with "
                "%zu MiB of input\n",
                name, held.peak_kb, held.now_kb, run_peak_kb, kInputBytes >> 20);
  }
}

}  // namespace
}  // namespace gpufilter::test
