// Output and disk faults, the binary end to end (issue 8, fault injection):
//   - standard output on /dev/full (ENOSPC): "gpufilter: write error: No space left on
//     device" and exit 2, as GNU grep says it, for plain files, standard input, -c,
//     --json, --follow and captures; a closed pipe (EPIPE) stays quiet in every mode;
//   - --pcap-out on /dev/full, or past RLIMIT_FSIZE in the middle of a run: one message
//     naming the file, exit 2, and what was written before is a readable capture;
//   - the --state file cannot be written (RLIMIT_FSIZE): gpufilter goes on filtering and
//     says so, exits 2 at the stop naming the file, and the previous state file is left
//     whole, so a restart loses nothing;
//   - the state file is created 0600 through a fresh temporary file, whatever lies at its
//     temporary name; one that other users could write, or that is not a regular file,
//     is refused with exit 2.
// A disk-full condition without root: the child gets RLIMIT_FSIZE with SIGXFSZ ignored,
// so that a write past the limit fails with EFBIG ("File too large"), as it would on a
// full disk with ENOSPC.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "differential.hpp"
#include "gpufilter/core/errors.hpp"
#include "gpufilter/sources/file_trust.hpp"
#include "gpufilter/sources/follow_state.hpp"
#include "gpufilter/sources/packet.hpp"
#include "gpufilter/sources/pcap_reader.hpp"
#include "testutil/testutil.hpp"

extern char** environ;

namespace gpufilter::test {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kPatience{60000};  // start-up included; a hang fails after this
const std::string kNoSpace = "write error: No space left on device";

// gpufilter in a child with a chosen standard input and output, standard error (and
// standard output when no path is given) on pipes that this process reads, and optionally
// RLIMIT_FSIZE with SIGXFSZ ignored. Killed if a test leaves it running.
class Proc {
 public:
  struct Setup {
    std::string stdin_path = "/dev/null";
    std::string stdout_path;                // empty: a pipe, read into out()
    std::optional<rlim_t> file_size_limit;  // bytes
    std::string locale = "C";               // LC_ALL
  };

  Proc(const std::vector<std::string>& args, const Setup& setup) {
    std::vector<std::string> argv = {gpufilter_binary()};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string_view v(*e);
      if (v.starts_with("LANG=") || v.starts_with("LC_") || v.starts_with("GREP_")) continue;
      env.emplace_back(v);
    }
    env.emplace_back("LC_ALL=" + setup.locale);
    std::vector<char*> cargv, cenv;
    for (std::string& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    for (std::string& e : env) cenv.push_back(e.data());
    cenv.push_back(nullptr);
    int err_pipe[2] = {-1, -1}, out_pipe[2] = {-1, -1};
    if (::pipe2(err_pipe, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
    if (setup.stdout_path.empty() && ::pipe2(out_pipe, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
    const char* in_path = setup.stdin_path.c_str();
    const char* out_path = setup.stdout_path.empty() ? nullptr : setup.stdout_path.c_str();
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
    if (pid_ == 0) {
      // The child: only async-signal-safe calls until exec.
      const int in = ::open(in_path, O_RDONLY);
      const int out = out_path != nullptr ? ::open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644) : out_pipe[1];
      if (in < 0 || out < 0 || ::dup2(in, 0) < 0 || ::dup2(out, 1) < 0 || ::dup2(err_pipe[1], 2) < 0) ::_exit(126);
      struct sigaction action {};
      sigemptyset(&action.sa_mask);
      action.sa_handler = SIG_DFL;  // this process ignores SIGPIPE; the child must not
      ::sigaction(SIGPIPE, &action, nullptr);
      if (setup.file_size_limit) {
        action.sa_handler = SIG_IGN;  // write() past the limit fails with EFBIG
        ::sigaction(SIGXFSZ, &action, nullptr);
        const rlimit limit{*setup.file_size_limit, *setup.file_size_limit};
        if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) ::_exit(126);
      }
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      ::execve(cargv[0], cargv.data(), cenv.data());
      ::_exit(127);
    }
    ::close(err_pipe[1]);
    err_fd_ = err_pipe[0];
    if (out_pipe[1] >= 0) {
      ::close(out_pipe[1]);
      out_fd_ = out_pipe[0];
    }
  }
  ~Proc() {
    if (!exited_) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
    close_out();
    if (err_fd_ >= 0) ::close(err_fd_);
  }
  Proc(const Proc&) = delete;
  Proc& operator=(const Proc&) = delete;

  void signal(int number) const { ::kill(pid_, number); }
  const std::string& out() const { return out_; }
  const std::string& err() const { return err_; }
  bool exited() const { return exited_; }
  // Closes this end of the standard output pipe: the child's next write gets EPIPE.
  void close_out() {
    if (out_fd_ >= 0) ::close(out_fd_);
    out_fd_ = -1;
  }

  // Reads the pipes and reaps the child until `done()` holds (true) or the deadline.
  bool pump_until(const std::function<bool()>& done, milliseconds limit = kPatience) {
    const auto deadline = Clock::now() + limit;
    for (;;) {
      reap();
      if (done()) return true;
      if (Clock::now() >= deadline) return false;
      pollfd p[2];
      nfds_t n = 0;
      if (err_fd_ >= 0) p[n++] = {err_fd_, POLLIN, 0};
      if (out_fd_ >= 0) p[n++] = {out_fd_, POLLIN, 0};
      if (n == 0) {
        std::this_thread::sleep_for(milliseconds(2));
        continue;
      }
      if (::poll(p, n, 10) <= 0) continue;
      for (nfds_t i = 0; i < n; ++i) {
        if (p[i].revents == 0) continue;
        char buffer[65536];
        const ssize_t got = ::read(p[i].fd, buffer, sizeof buffer);
        if (got < 0 && errno == EINTR) continue;
        const bool is_err = p[i].fd == err_fd_;
        if (got <= 0) {
          ::close(p[i].fd);
          (is_err ? err_fd_ : out_fd_) = -1;
          continue;
        }
        (is_err ? err_ : out_).append(buffer, static_cast<std::size_t>(got));
      }
    }
  }
  // The exit status (or 128 + signal) once it has exited and its pipes are drained.
  std::optional<int> wait_exit(milliseconds limit = kPatience) {
    if (!pump_until([&] { return exited_ && err_fd_ < 0 && out_fd_ < 0; }, limit)) return std::nullopt;
    return status_;
  }

 private:
  void reap() {
    if (exited_) return;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      exited_ = true;
      status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
  }

  pid_t pid_ = -1;
  int out_fd_ = -1, err_fd_ = -1;
  std::string out_, err_;
  bool exited_ = false;
  int status_ = -1;
};

// Runs gpufilter to its end (a hang fails the test) and returns it.
std::unique_ptr<Proc> run_to_end(const std::vector<std::string>& args, const Proc::Setup& setup) {
  auto proc = std::make_unique<Proc>(args, setup);
  EXPECT_TRUE(proc->wait_exit().has_value()) << "gpufilter " << describe_args(args) << " did not end";
  return proc;
}

std::optional<int> status_of(Proc& proc) { return proc.wait_exit(milliseconds(0)); }

// `lines` lines, every other one selected by "seq=": "seq=N <padding>" and "noise N ...".
std::string numbered_lines(std::uint64_t first, std::uint64_t count) {
  std::string text;
  for (std::uint64_t i = first; i < first + count; ++i) {
    text += (i % 2 == 0 ? "seq=" : "noise ") + std::to_string(i) + " ";
    text.append(20 + i * 13 % 50, i % 2 == 0 ? 'x' : 'y');
    text += '\n';
  }
  return text;
}

// A classic pcap (Ethernet, IPv4, UDP, microseconds) of `count` packets whose payloads
// alternate between a "seq=N" line and a "noise N" line; returns the payloads.
std::vector<std::string> write_capture(const std::string& path, std::size_t count) {
  std::string file;
  auto u16be = [](std::string& s, unsigned v) {
    s += static_cast<char>(v >> 8);
    s += static_cast<char>(v & 0xff);
  };
  auto u32le = [](std::string& s, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) s += static_cast<char>((v >> (8 * i)) & 0xff);
  };
  u32le(file, 0xa1b2c3d4);
  file += std::string("\x02\x00\x04\x00", 4);  // version 2.4
  u32le(file, 0);                              // thiszone
  u32le(file, 0);                              // sigfigs
  u32le(file, 65535);                          // snaplen
  u32le(file, 1);                              // Ethernet
  std::vector<std::string> payloads;
  for (std::size_t i = 0; i < count; ++i) {
    const std::string payload = (i % 2 == 0 ? "seq=" : "noise ") + std::to_string(i) + " " +
                                std::string(60 + i * 7 % 40, i % 2 == 0 ? 'x' : 'y') + "\n";
    payloads.push_back(payload);
    std::string udp;
    u16be(udp, 40000);
    u16be(udp, 514);
    u16be(udp, static_cast<unsigned>(8 + payload.size()));
    u16be(udp, 0);  // no checksum
    udp += payload;
    std::string ip = "\x45";
    ip += '\0';
    u16be(ip, static_cast<unsigned>(20 + udp.size()));
    u16be(ip, static_cast<unsigned>(i & 0xffff));
    u16be(ip, 0);
    ip += '\x40';  // TTL
    ip += '\x11';  // UDP
    u16be(ip, 0);  // header checksum (not checked by anyone here)
    ip += std::string("\x0a\x00\x00\x01\x0a\x00\x00\x02", 8);
    ip += udp;
    std::string frame = std::string("\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x01\x08\x00", 14) + ip;
    u32le(file, static_cast<std::uint32_t>(1000 + i / 1000));
    u32le(file, static_cast<std::uint32_t>(i % 1000));
    u32le(file, static_cast<std::uint32_t>(frame.size()));
    u32le(file, static_cast<std::uint32_t>(frame.size()));
    file += frame;
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0 || ::write(fd, file.data(), file.size()) != static_cast<ssize_t>(file.size()) || ::close(fd) != 0)
    throw std::runtime_error("cannot write " + path);
  return payloads;
}

// The payloads of a capture as far as it can be read (a record cut short ends it).
std::vector<std::string> captured_payloads(const std::string& path) {
  std::vector<std::string> payloads;
  const std::unique_ptr<PcapReader> reader = PcapReader::open_file(path);
  RawPacket raw;
  for (;;) {
    try {
      if (!reader->next(raw)) break;
    } catch (const PcapError&) {
      break;  // the record the limit cut
    }
    const PacketInfo info = decode_packet(reader->link_type(), raw.data);
    payloads.emplace_back(reinterpret_cast<const char*>(raw.data.data()) + info.payload_offset, info.payload_length);
  }
  return payloads;
}

std::uint64_t file_size(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

class Faults : public ::testing::Test {
 protected:
  // Writing into a pipe whose reader has gone must be an error here, not a signal.
  void SetUp() override { ::signal(SIGPIPE, SIG_IGN); }
};

// Standard output on /dev/full: every mode ends with grep's message and exit status 2,
// once; GNU grep, given the same file, says the same.
TEST_F(Faults, FullStandardOutputIsAWriteErrorAsInGrep) {
  TempDir dir;
  // 2 MB: far more than the 64 KiB output buffer, so the error comes in the middle of the
  // run, not only at the final flush.
  const std::string log = dir.write("app.log", numbered_lines(0, 40000));
  const std::string capture = dir.path() + "/app.pcap";
  write_capture(capture, 20000);
  const std::string ssh = corpus_path("loghub/OpenSSH_2k.log");

  // GNU grep first: the wording to match.
  const GrepRun grep = [&] {
    const ProcessResult r =
        run_process({"/bin/sh", "-c", "exec " + grep_binary() + " -F seq= " + shell_quote(log) + " > /dev/full"});
    return GrepRun{r.out, r.err, r.status};
  }();
  ASSERT_EQ(grep.status, 2);
  // After the program name, which grep takes from its argv[0].
  const std::size_t name_end = grep.err.find(": ");
  ASSERT_NE(name_end, std::string::npos) << grep.err;
  ASSERT_EQ(grep.err.substr(name_end + 2), kNoSpace + "\n");

  struct Case {
    std::vector<std::string> args;
    std::string stdin_path = "/dev/null";
  };
  const std::vector<Case> cases = {
      {{"seq=", log}},
      {{"sshd", ssh}},
      {{"-c", "seq=", log}},  // one short line, written at the end
      {{"-n", "seq="}, log},  // standard input
      {{"--json", "seq=", log}},
      {{"--chunk-size=64K", "seq=", log}},
      {{"--follow", "--from-start", "seq=", log}},
      {{"--follow", "--from-start", "--json", "seq=", log}},
      {{"--follow", "--from-start", "--poll-interval=20", "-n", "seq=", log, ssh}},
      {{"--pcap", capture, "seq="}},
      {{"--pcap", capture, "--chunk-size=64K", "seq="}},  // fails inside the packet loop
      {{"--pcap", capture, "--json", "--chunk-size=64K", "seq="}},
      {{"--pcap", capture, "--hexdump", "seq="}},
      {{"--pcap", capture, "--pcap", capture, "--chunk-size=64K", "seq="}},  // no second try
      {{"--pcap", capture, "--stream", "seq="}},
      {{"--pcap", capture, "--pcap-out", "-", "--chunk-size=64K", "seq="}},  // the capture on stdout
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(describe_args(c.args));
    Proc::Setup setup;
    setup.stdout_path = "/dev/full";
    setup.stdin_path = c.stdin_path;
    const std::unique_ptr<Proc> proc = run_to_end(c.args, setup);
    EXPECT_EQ(status_of(*proc), 2);
    EXPECT_EQ(proc->err(), "gpufilter: " + kNoSpace + "\n") << "grep says \"" << grep.err << "\"";
  }
}

// A closed standard output ends every mode at once and quietly, as it ends grep (the
// plain case is Streaming.ClosedStdoutEndsGpufilterQuietly).
TEST_F(Faults, ClosedStandardOutputStaysQuietInEveryMode) {
  TempDir dir;
  const std::string log = dir.write("app.log", numbered_lines(0, 200000));  // 10 MB
  const std::string capture = dir.path() + "/app.pcap";
  write_capture(capture, 60000);
  const std::vector<std::vector<std::string>> cases = {
      {"--follow", "--from-start", "seq=", log},
      {"--follow", "--from-start", "--json", "seq=", log},
      {"--pcap", capture, "seq="},
      {"--pcap", capture, "--json", "--chunk-size=64K", "seq="},
      {"--pcap", capture, "--pcap-out", "-", "seq="},
  };
  for (const std::vector<std::string>& args : cases) {
    SCOPED_TRACE(describe_args(args));
    Proc proc(args, {});
    ASSERT_TRUE(proc.pump_until([&] { return proc.out().size() >= 4096 || proc.exited(); })) << proc.err();
    ASSERT_FALSE(proc.exited()) << "it ended before its output was closed: " << proc.err();
    proc.close_out();
    const auto closed = Clock::now();
    const std::optional<int> status = proc.wait_exit(milliseconds(10000));
    ASSERT_TRUE(status.has_value()) << "still running 10 s after its standard output was closed";
    EXPECT_LT(Clock::now() - closed, milliseconds(10000));
    EXPECT_EQ(*status, 128 + SIGPIPE);
    EXPECT_EQ(proc.err(), "");
  }
}

// --pcap-out on /dev/full, and past a file size limit in the middle of the run, in one
// pass and in --stream's two passes: one message naming the file, exit 2; the packets
// written before the limit read back whole, the selected ones in order.
TEST_F(Faults, CaptureOutputThatCannotBeWrittenNamesTheFile) {
  TempDir dir;
  const std::string capture = dir.path() + "/in.pcap";
  const std::vector<std::string> payloads = write_capture(capture, 20000);
  std::vector<std::string> selected;
  for (const std::string& p : payloads) {
    if (p.starts_with("seq=")) selected.push_back(p);
  }
  for (const bool stream : {false, true}) {
    SCOPED_TRACE(stream ? "--stream (two passes)" : "one pass");
    std::vector<std::string> args = {"--engine=cpu", "--chunk-size=64K", "--pcap", capture, "seq="};
    if (stream) args.insert(args.begin(), "--stream");
    {
      std::vector<std::string> full = args;
      full.insert(full.begin(), {"--pcap-out", "/dev/full"});
      Proc::Setup setup;
      setup.stdout_path = "/dev/null";
      const std::unique_ptr<Proc> proc = run_to_end(full, setup);
      EXPECT_EQ(status_of(*proc), 2);
      EXPECT_EQ(proc->err(), "gpufilter: /dev/full: " + kNoSpace + "\n");
    }
    {
      const std::string out = dir.path() + (stream ? "/stream.pcap" : "/out.pcap");
      constexpr rlim_t kLimit = 64 * 1024;
      std::vector<std::string> limited = args;
      limited.insert(limited.begin(), {"--pcap-out", out});
      Proc::Setup setup;
      setup.stdout_path = "/dev/null";  // not a regular file: the limit does not apply
      setup.file_size_limit = kLimit;
      const std::unique_ptr<Proc> proc = run_to_end(limited, setup);
      EXPECT_EQ(status_of(*proc), 2);
      EXPECT_EQ(proc->err(), "gpufilter: " + out + ": write error: File too large\n");
      EXPECT_LE(file_size(out), kLimit);
      const std::vector<std::string> written = captured_payloads(out);
      ASSERT_GT(written.size(), 10u) << "the packets before the limit are missing";
      ASSERT_LT(written.size(), selected.size());
      EXPECT_EQ(written, std::vector<std::string>(selected.begin(), selected.begin() + written.size()));
      std::printf("[ %s ] --pcap-out stopped at %llu bytes after %zu of %zu selected packets\n",
                  stream ? "stream" : "packets", static_cast<unsigned long long>(file_size(out)), written.size(),
                  selected.size());
    }
  }
}

// The state file cannot be written (RLIMIT_FSIZE below its size): gpufilter keeps
// filtering and says so once, and at the stop it exits 2 naming the file. The state file
// stays exactly as the previous run left it, no temporary file is left behind, and a
// restart from it prints every line the failed run read.
TEST_F(Faults, StateFileThatCannotBeWrittenStaysAsItWas) {
  TempDir dir;
  const std::string log = dir.write("app.log", numbered_lines(0, 100));
  const std::string state = dir.path() + "/follow.state";
  const std::vector<std::string> args = {"--engine=cpu", "--follow", "--from-start", "--state=" + state, "seq=", log};
  auto wait_for_line = [](Proc& proc, const std::string& line) {
    return proc.pump_until([&] { return proc.out().find(line + " ") != std::string::npos || proc.exited(); }) &&
           !proc.exited();
  };

  // A first run saves the state of all 100 lines.
  std::string saved;
  {
    Proc proc(args, {});
    ASSERT_TRUE(wait_for_line(proc, "seq=98")) << proc.err();
    proc.signal(SIGTERM);
    ASSERT_EQ(proc.wait_exit(), 0) << proc.err();
    EXPECT_EQ(proc.out(), run_grep({"seq="}, numbered_lines(0, 100)).out);
    saved = read_file(state);
    const std::vector<FollowStateEntry> entries = load_follow_state(state);
    ASSERT_EQ(entries.size(), 1u);
    EXPECT_EQ(entries[0].offset, file_size(log));
    struct stat st {};
    ASSERT_EQ(::stat(state.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0600u) << "the state file is private";
    EXPECT_FALSE(exists(state + ".tmp"));
  }

  // 100 more lines; a run that cannot write 16 bytes to any file.
  {
    const std::string more = numbered_lines(100, 100);
    std::FILE* f = std::fopen(log.c_str(), "ab");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(std::fwrite(more.data(), 1, more.size(), f), more.size());
    std::fclose(f);
  }
  const std::string failure = "gpufilter: " + state + ": cannot write the state file: " + state +
                              ".tmp: File too large\n";
  {
    Proc::Setup setup;
    setup.file_size_limit = 16;
    Proc proc(args, setup);
    ASSERT_TRUE(wait_for_line(proc, "seq=198")) << proc.err();
    // The periodic save fails (every 100 ms); it is said once, and filtering goes on.
    ASSERT_TRUE(proc.pump_until([&] { return proc.err().find(failure) != std::string::npos || proc.exited(); }));
    ASSERT_FALSE(proc.exited()) << proc.err();
    EXPECT_EQ(proc.out(), run_grep({"seq="}, numbered_lines(100, 100)).out);
    EXPECT_EQ(read_file(state), saved) << "a failed save changed the state file";
    EXPECT_FALSE(exists(state + ".tmp"));
    proc.signal(SIGTERM);
    EXPECT_EQ(proc.wait_exit(), 2);
    EXPECT_EQ(proc.err(), failure + failure) << "the periodic failure once, then the final save's";
    EXPECT_EQ(read_file(state), saved);
    EXPECT_EQ(load_follow_state(state).size(), 1u);
    EXPECT_FALSE(exists(state + ".tmp"));
  }

  // A restart from the state the failed run could not replace: nothing is lost.
  {
    Proc proc(args, {});
    ASSERT_TRUE(wait_for_line(proc, "seq=198")) << proc.err();
    proc.signal(SIGTERM);
    ASSERT_EQ(proc.wait_exit(), 0) << proc.err();
    EXPECT_EQ(proc.out(), run_grep({"seq="}, numbered_lines(100, 100)).out);
    const std::vector<FollowStateEntry> entries = load_follow_state(state);
    ASSERT_EQ(entries.size(), 1u);
    EXPECT_EQ(entries[0].offset, file_size(log));
  }
}

// save_follow_state() makes its own temporary file, mode 0600 whatever the umask, and
// replaces anything at that name without writing through it: a stale file left by a
// kill, or a symbolic link planted to make gpufilter overwrite another file.
TEST_F(Faults, StateFileIsPrivateAndNeverWrittenThroughALink) {
  TempDir dir;
  const std::string state = dir.path() + "/follow.state";
  const std::string victim = dir.write("victim", "precious\n");
  const std::vector<FollowStateEntry> entries = {{1, 2, 3, 3, 4, "/var/log/app.log"}};
  const std::string text = format_follow_state(entries);

  const mode_t old_umask = ::umask(0);
  save_follow_state(state, text);
  ::umask(old_umask);
  struct stat st {};
  ASSERT_EQ(::stat(state.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(load_follow_state(state), entries);

  dir.write("follow.state.tmp", "stale half of a state fi");
  save_follow_state(state, text);
  EXPECT_EQ(read_file(state), text);
  EXPECT_FALSE(exists(state + ".tmp"));

  ASSERT_EQ(::symlink(victim.c_str(), (state + ".tmp").c_str()), 0);
  save_follow_state(state, text);
  EXPECT_EQ(read_file(victim), "precious\n") << "the state was written through a planted link";
  EXPECT_EQ(read_file(state), text);
  ASSERT_EQ(::lstat(state.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_FALSE(exists(state + ".tmp"));

  // A directory that cannot be written: a clear error, and the state file as it was.
  const std::string locked = dir.make_dir("locked");
  const std::string locked_state = locked + "/follow.state";
  save_follow_state(locked_state, text);
  ASSERT_EQ(::chmod(locked.c_str(), 0500), 0);
  if (::access(locked.c_str(), W_OK) != 0) {  // root may write anyway
    try {
      save_follow_state(locked_state, format_follow_state({}));
      ADD_FAILURE() << "no ConfigError";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(locked_state + ": cannot write the state file: "), std::string::npos)
          << e.what();
    }
    EXPECT_EQ(read_file(locked_state), text);
  }
  ::chmod(locked.c_str(), 0700);
}

// A state file tells a restart where to resume: one that other users can write, that
// belongs to another user, or that is not a regular file is refused (exit 2, the file and
// the reason named, nothing read), as ssh's StrictModes refuses such key files.
TEST_F(Faults, UntrustedStateFileIsRefused) {
  // The rule itself, for any user this test runs as.
  EXPECT_NO_THROW(check_state_file_trust("S", 0100600, 1000, 1000));
  EXPECT_NO_THROW(check_state_file_trust("S", 0100644, 1000, 1000));
  EXPECT_NO_THROW(check_state_file_trust("S", 0100644, 0, 1000)) << "root's files are trusted, as by ssh";
  EXPECT_THROW(check_state_file_trust("S", 0100620, 1000, 1000), ConfigError);
  EXPECT_THROW(check_state_file_trust("S", 0100602, 1000, 1000), ConfigError);
  EXPECT_THROW(check_state_file_trust("S", 0100600, 1001, 1000), ConfigError);
  EXPECT_THROW(check_state_file_trust("S", 0100600, 1000, 0), ConfigError);

  TempDir dir;
  const std::string log = dir.write("app.log", numbered_lines(0, 10));
  const std::string header = "gpufilter-follow-state 1\n";
  struct Bad {
    std::string name;
    std::function<void(const std::string&)> make;
    std::string reason;
  };
  // A valid state file (no entries) at `path` with `mode` (chmod: the umask does not apply).
  auto valid_with_mode = [&](mode_t mode) {
    return [&, mode](const std::string& path) {
      dir.write(path.substr(path.rfind('/') + 1), header);
      ASSERT_EQ(::chmod(path.c_str(), mode), 0);
    };
  };
  std::vector<Bad> cases = {
      {"group-writable", valid_with_mode(0660), "the state file is writable by other users (mode 0660)"},
      {"world-writable", valid_with_mode(0602), "the state file is writable by other users (mode 0602)"},
      {"a directory", [](const std::string& path) { ASSERT_EQ(::mkdir(path.c_str(), 0700), 0); },
       "the state file is not a regular file"},
      {"a FIFO", [](const std::string& path) { ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0); },
       "the state file is not a regular file"},
  };
  if (::geteuid() == 0) {
    // Only root can give a file away; other users get the rule checked above.
    cases.push_back({"another user's",
                     [&](const std::string& path) {
                       valid_with_mode(0600)(path);
                       ASSERT_EQ(::chown(path.c_str(), 65534, 65534), 0);
                     },
                     "the state file belongs to uid 65534, not to this user (uid 0) or root"});
  }
  int n = 0;
  for (const Bad& bad : cases) {
    SCOPED_TRACE(bad.name);
    const std::string state = dir.path() + "/state" + std::to_string(n++);
    bad.make(state);
    Proc proc({"--engine=cpu", "--follow", "--from-start", "--state=" + state, "seq=", log}, {});
    const std::optional<int> status = proc.wait_exit(milliseconds(20000));
    ASSERT_TRUE(status.has_value()) << "gpufilter did not refuse " << bad.name << " state file";
    EXPECT_EQ(*status, 2);
    EXPECT_EQ(proc.out(), "");
    EXPECT_NE(proc.err().find("gpufilter: " + state + ": " + bad.reason), std::string::npos) << proc.err();
  }
}

// The directories above a state file count too: in one that other users may write
// (without the sticky bit of /tmp), or that belongs to another user, anyone could put a
// state file of theirs in place of ours. Refused at start, before anything is read.
TEST_F(Faults, StateFileInADirectoryOthersMayWriteIsRefused) {
  // The rule, for any user this test runs as.
  EXPECT_FALSE(directory_trust_problem(040755, 1000, 1000).has_value());
  EXPECT_FALSE(directory_trust_problem(040700, 0, 1000).has_value()) << "root's directories are trusted";
  EXPECT_FALSE(directory_trust_problem(041777, 0, 1000).has_value()) << "/tmp: sticky, so only an entry's owner may swap it";
  EXPECT_EQ(directory_trust_problem(040775, 1000, 1000), "group or others may write it (mode 0775) and it has no sticky bit");
  EXPECT_TRUE(directory_trust_problem(040757, 1000, 1000).has_value());
  EXPECT_EQ(directory_trust_problem(040755, 1001, 1000), "it belongs to uid 1001, who could replace what is in it");

  TempDir dir;
  const std::string log = dir.write("app.log", numbered_lines(0, 10));
  const std::string shared = dir.make_dir("shared");
  const std::string inner = shared + "/inner";  // safe itself, but below `shared`
  ASSERT_EQ(::mkdir(inner.c_str(), 0700), 0);
  // A link from a safe directory to a state file in `shared` is judged by where it leads.
  const std::string target = shared + "/target.state";
  dir.write("shared/target.state", "gpufilter-follow-state 1\n");
  ASSERT_EQ(::chmod(target.c_str(), 0600), 0);
  const std::string link = dir.path() + "/link.state";
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  ASSERT_EQ(::chmod(shared.c_str(), 0777), 0);
  for (const std::string& state : {shared + "/follow.state", inner + "/follow.state", inner + "/../follow.state", link}) {
    SCOPED_TRACE(state);
    Proc proc({"--engine=cpu", "--follow", "--from-start", "--state=" + state, "seq=", log}, {});
    const std::optional<int> status = proc.wait_exit(milliseconds(20000));
    ASSERT_TRUE(status.has_value()) << "gpufilter did not refuse the state file";
    EXPECT_EQ(*status, 2);
    EXPECT_EQ(proc.out(), "");
    EXPECT_NE(proc.err().find("gpufilter: " + state + ": refused: the directory " + shared +
                              " is not safe: group or others may write it (mode 0777) and it has no sticky bit; "
                              "fix: chmod go-w " + shared),
              std::string::npos)
        << proc.err();
  }
  // With the sticky bit, as /tmp has, the directory is safe: the run starts and saves.
  ASSERT_EQ(::chmod(shared.c_str(), 01777), 0);
  const std::string state = inner + "/follow.state";
  {
    Proc proc({"--engine=cpu", "--follow", "--from-start", "--state=" + state, "seq=", log}, {});
    ASSERT_TRUE(proc.pump_until([&] { return proc.out().find("seq=8 ") != std::string::npos || proc.exited(); }) &&
                !proc.exited())
        << proc.err();
    proc.signal(SIGTERM);
    EXPECT_EQ(proc.wait_exit(milliseconds(20000)), 0) << proc.err();
  }
  EXPECT_TRUE(std::filesystem::exists(state));
  if (::geteuid() == 0) {  // only root can give a directory to another user
    ASSERT_EQ(::chown(inner.c_str(), 65534, 65534), 0);
    try {
      check_directories_trust(state, 0);
      ADD_FAILURE() << "no ConfigError";
    } catch (const ConfigError& e) {
      EXPECT_EQ(std::string(e.what()), state + ": refused: the directory " + inner +
                                           " is not safe: it belongs to uid 65534, who could replace what is in it; "
                                           "fix: move the file elsewhere, or chown 0 " + inner);
    }
  }
  ::chmod(shared.c_str(), 0700);
}

// A first SIGTERM lets what was read finish, for kStopGraceSeconds (5) at most; a second
// ends the process at once. glibc decides this back-reference on a line of 'x' in time
// that grows faster than the line (grep's too): 4,000 bytes take minutes.
class LongRegex {
 public:
  explicit LongRegex(TempDir& dir) : line_(dir.write("long.txt", std::string(4000, 'x') + "\n")) {
    setup_.locale = "C.UTF-8";
  }
  std::unique_ptr<Proc> start() const {
    auto proc = std::make_unique<Proc>(std::vector<std::string>{"-c", "-E", "-e", "\\w(x*)\\1\\s", line_}, setup_);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    proc->signal(SIGTERM);
    return proc;
  }

 private:
  std::string line_;
  Proc::Setup setup_;
};

TEST_F(Faults, ASecondStopSignalEndsALongRegexAtOnce) {
  TempDir dir;
  const std::unique_ptr<Proc> proc = LongRegex(dir).start();
  ASSERT_FALSE(proc->pump_until([&] { return proc->exited(); }, std::chrono::milliseconds(300)))
      << "the line was decided at once: the test needs a slower regex";
  proc->signal(SIGTERM);
  EXPECT_EQ(proc->wait_exit(std::chrono::seconds(2)), 128 + SIGTERM) << proc->err();
}

// One SIGTERM (as `timeout` sends) ends such a run too, after the grace: grep ends at once.
TEST_F(Faults, OneStopSignalEndsALongRegexAfterTheGrace) {
  TempDir dir;
  const std::unique_ptr<Proc> proc = LongRegex(dir).start();
  EXPECT_EQ(proc->wait_exit(std::chrono::seconds(15)), 128 + SIGTERM) << proc->err();
}

}  // namespace
}  // namespace gpufilter::test
