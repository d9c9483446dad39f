// gpufilter-latency: how long a line waits, from the moment it is written to gpufilter's
// input to the moment gpufilter's output holds it.
//
//   gpufilter-latency --gpufilter build/gpufilter [--rates 1000,10000,100000]
//                     [--modes pipe,tcp] [--seconds 3] [--json FILE] [-- GPUFILTER-ARGS...]
//
// For each mode and rate, a fresh gpufilter runs with the pattern "lat=" (plus the
// arguments after "--"). A writer thread sends lines "lat=<ns since start> <padding>"
// paced to the rate, through gpufilter's standard input (pipe) or a TCP connection to
// --listen tcp://127.0.0.1:0 (tcp); every line matches. A reader thread takes gpufilter's
// output and subtracts each line's timestamp from the clock (CLOCK_MONOTONIC, one
// machine). Before timing, one line is sent and awaited, so the start-up is not counted.
// Prints p50/p99/p99.9/max per run and checks that every line came back, exactly once.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

std::int64_t now_ns(Clock::time_point origin) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - origin).count();
}

struct Child {
  pid_t pid = -1;
  int in = -1;   // our end of its stdin
  int out = -1;  // our end of its stdout
  int err = -1;  // our end of its stderr
};

Child spawn(const std::vector<std::string>& args) {
  int in[2], out[2], err[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    std::perror("pipe");
    std::exit(2);
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  Child c;
  if (::posix_spawn(&c.pid, argv[0], &actions, nullptr, argv.data(), environ) != 0) {
    std::fprintf(stderr, "gpufilter-latency: cannot run %s\n", argv[0]);
    std::exit(2);
  }
  posix_spawn_file_actions_destroy(&actions);
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  c.in = in[1];
  c.out = out[0];
  c.err = err[0];
  return c;
}

// Reads the child's stderr until "listening on tcp://HOST:PORT" and returns the port.
int listening_port(int err_fd) {
  std::string seen;
  char buffer[4096];
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < deadline) {
    pollfd p{err_fd, POLLIN, 0};
    if (::poll(&p, 1, 1000) <= 0) continue;
    const ssize_t n = ::read(err_fd, buffer, sizeof buffer);
    if (n <= 0) break;
    seen.append(buffer, static_cast<std::size_t>(n));
    const std::size_t at = seen.find("listening on tcp://");
    if (at == std::string::npos) continue;
    const std::size_t end = seen.find('\n', at);
    if (end == std::string::npos) continue;
    const std::size_t colon = seen.rfind(':', end);
    return std::atoi(seen.c_str() + colon + 1);
  }
  std::fprintf(stderr, "gpufilter-latency: gpufilter did not say where it listens; it said:\n%s\n", seen.c_str());
  std::exit(2);
}

int connect_tcp(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    std::perror("connect");
    std::exit(2);
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

bool write_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

struct Result {
  std::string mode;
  long rate = 0;
  std::uint64_t sent = 0, received = 0, duplicates = 0;
  double p50 = 0, p99 = 0, p999 = 0, max = 0;  // milliseconds
  int status = 0;
};

Result run(const std::string& binary, const std::string& mode, long rate, double seconds,
           const std::vector<std::string>& extra) {
  std::vector<std::string> args = {binary};
  if (mode == "tcp") args.push_back("--listen=tcp://127.0.0.1:0");
  args.insert(args.end(), extra.begin(), extra.end());
  args.push_back("lat=");
  Child child = spawn(args);
  int data_fd = child.in;
  if (mode == "tcp") data_fd = connect_tcp(listening_port(child.err));

  const Clock::time_point origin = Clock::now();
  const std::uint64_t total = static_cast<std::uint64_t>(static_cast<double>(rate) * seconds);
  std::vector<std::int64_t> latency;  // per sequence number; -1: not seen
  latency.assign(total + 1, -1);
  std::atomic<std::uint64_t> received{0};
  std::uint64_t duplicates = 0;

  std::thread reader([&] {
    std::string pending;
    char buffer[1 << 16];
    for (;;) {
      const ssize_t n = ::read(child.out, buffer, sizeof buffer);
      if (n <= 0) break;
      const std::int64_t at = now_ns(origin);
      pending.append(buffer, static_cast<std::size_t>(n));
      std::size_t start = 0;
      for (std::size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1) {
        // "lat=<seq>:<ns> ..."
        const char* line = pending.c_str() + start;
        const char* p = std::strstr(line, "lat=");
        if (p == nullptr || p > pending.c_str() + nl) continue;
        char* end = nullptr;
        const std::uint64_t seq = std::strtoull(p + 4, &end, 10);
        const std::int64_t sent_at = std::strtoll(end + 1, nullptr, 10);
        if (seq > total) continue;
        if (latency[seq] >= 0) ++duplicates;
        latency[seq] = at - sent_at;
        received.fetch_add(1, std::memory_order_relaxed);
      }
      pending.erase(0, start);
    }
  });

  // Warm-up: sequence 0, awaited.
  char line[160];
  const std::string padding(60, 'x');
  auto send = [&](std::uint64_t seq) {
    const int n = std::snprintf(line, sizeof line, "lat=%" PRIu64 ":%" PRId64 " %s\n", seq, now_ns(origin),
                                padding.c_str());
    return write_all(data_fd, line, static_cast<std::size_t>(n));
  };
  send(0);
  const auto warm_deadline = Clock::now() + std::chrono::seconds(120);
  while (received.load() == 0) {
    int status = 0;
    if (::waitpid(child.pid, &status, WNOHANG) == child.pid || Clock::now() > warm_deadline) {
      char text[4096];
      const ssize_t n = ::read(child.err, text, sizeof text - 1);
      text[n > 0 ? n : 0] = '\0';
      std::fprintf(stderr, "gpufilter-latency: gpufilter never echoed the first line; it said: %s\n", text);
      std::exit(2);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  // Paced: every line goes out at (or just after) its due time, stamped when written.
  const Clock::time_point begin = Clock::now();
  std::uint64_t seq = 1;
  while (seq <= total) {
    const double elapsed = std::chrono::duration<double>(Clock::now() - begin).count();
    const std::uint64_t due = std::min<std::uint64_t>(total, static_cast<std::uint64_t>(elapsed * static_cast<double>(rate)) + 1);
    for (; seq <= due; ++seq)
      if (!send(seq)) break;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  // Everything out: wait for the last line (at most 10 s), then stop gpufilter cleanly.
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (received.load() < total + 1 && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (mode == "tcp") {
    ::close(data_fd);
    ::kill(child.pid, SIGTERM);
  }
  ::close(child.in);
  int status = 0;
  ::waitpid(child.pid, &status, 0);
  reader.join();
  ::close(child.out);
  ::close(child.err);

  Result r;
  r.mode = mode;
  r.rate = rate;
  r.sent = total;
  r.duplicates = duplicates;
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::vector<double> ms;
  for (std::uint64_t s = 1; s <= total; ++s)
    if (latency[s] >= 0) ms.push_back(static_cast<double>(latency[s]) / 1e6);
  r.received = ms.size();
  std::sort(ms.begin(), ms.end());
  auto pct = [&](double q) { return ms.empty() ? 0.0 : ms[std::min(ms.size() - 1, static_cast<std::size_t>(q * static_cast<double>(ms.size())))]; };
  r.p50 = pct(0.50);
  r.p99 = pct(0.99);
  r.p999 = pct(0.999);
  r.max = ms.empty() ? 0 : ms.back();
  return r;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> v;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = s.find(',', start);
    v.push_back(s.substr(start, comma - start));
    if (comma == std::string::npos) return v;
    start = comma + 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string binary = "build/gpufilter";
  std::string rates = "1000,10000,100000";
  std::string modes = "pipe,tcp";
  std::string json_path;
  double seconds = 3;
  std::vector<std::string> extra;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "gpufilter-latency: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--gpufilter") binary = value();
    else if (a == "--rates") rates = value();
    else if (a == "--modes") modes = value();
    else if (a == "--seconds") seconds = std::atof(value().c_str());
    else if (a == "--json") json_path = value();
    else if (a == "--") {
      extra.assign(argv + i + 1, argv + argc);
      break;
    } else {
      std::fprintf(stderr, "usage: gpufilter-latency [--gpufilter PATH] [--rates R,...] [--modes pipe,tcp] "
                           "[--seconds S] [--json FILE] [-- GPUFILTER-ARGS...]\n");
      return 2;
    }
  }
  ::signal(SIGPIPE, SIG_IGN);
  std::string args_text;
  for (const std::string& e : extra) args_text += " " + e;
  std::printf("gpufilter latency, write to output, ms (extra args:%s)\n", args_text.empty() ? " none" : args_text.c_str());
  std::printf("| mode | lines/s | sent | received | p50 | p99 | p99.9 | max |\n|---|---|---|---|---|---|---|---|\n");
  std::string json = "[";
  bool ok = true;
  for (const std::string& mode : split(modes)) {
    for (const std::string& rate_text : split(rates)) {
      const Result r = run(binary, mode, std::atol(rate_text.c_str()), seconds, extra);
      std::printf("| %s | %ld | %" PRIu64 " | %" PRIu64 " | %.3f | %.3f | %.3f | %.3f |\n", r.mode.c_str(), r.rate, r.sent,
                  r.received, r.p50, r.p99, r.p999, r.max);
      std::fflush(stdout);
      if (r.received != r.sent || r.duplicates != 0 || r.status != 0) {
        std::fprintf(stderr, "gpufilter-latency: %s at %ld lines/s: %" PRIu64 " of %" PRIu64 " lines back, %" PRIu64
                             " duplicates, exit status %d\n",
                     r.mode.c_str(), r.rate, r.received, r.sent, r.duplicates, r.status);
        ok = false;
      }
      if (json.size() > 1) json += ",";
      char item[512];
      std::snprintf(item, sizeof item,
                    "{\"mode\":\"%s\",\"rate\":%ld,\"sent\":%" PRIu64 ",\"received\":%" PRIu64
                    ",\"p50_ms\":%.4f,\"p99_ms\":%.4f,\"p999_ms\":%.4f,\"max_ms\":%.4f,\"args\":\"%s\"}",
                    r.mode.c_str(), r.rate, r.sent, r.received, r.p50, r.p99, r.p999, r.max, args_text.c_str());
      json += item;
    }
  }
  json += "]\n";
  if (!json_path.empty()) {
    FILE* f = std::fopen(json_path.c_str(), "w");
    if (f != nullptr) {
      std::fputs(json.c_str(), f);
      std::fclose(f);
    }
  }
  return ok ? 0 : 1;
}
