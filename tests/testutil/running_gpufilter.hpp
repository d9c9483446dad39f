// A gpufilter that runs while a test talks to it (--listen, --follow): its standard output
// and error are collected by a thread as they come, so a full pipe never stalls it, and it
// is killed if a test leaves it running.
#pragma once

#include <netinet/in.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace gpufilter::test {

class RunningGpufilter {
 public:
  using milliseconds = std::chrono::milliseconds;

  // gpufilter ARGS, or `sh -c 'SETUP && exec gpufilter ARGS'` to set a limit (ulimit -n)
  // or the environment first. Its standard input is closed.
  explicit RunningGpufilter(const std::vector<std::string>& args, const std::string& setup = {});
  ~RunningGpufilter();
  RunningGpufilter(const RunningGpufilter&) = delete;
  RunningGpufilter& operator=(const RunningGpufilter&) = delete;

  std::string out() const;
  std::string err() const;
  // Waits until `done(stdout, stderr)` holds.
  bool wait_for(const std::function<bool(const std::string&, const std::string&)>& done, milliseconds limit);
  bool out_has(const std::string& text, milliseconds limit);
  bool err_has(const std::string& text, milliseconds limit);

  // The URLs of the first `count` "gpufilter: listening on URL" lines (start-up includes
  // the engine's); a test failure when they do not come within a minute.
  std::vector<std::string> listening(std::size_t count);
  // The first of them, or "".
  std::string listening();

  void signal(int sig) const;
  // From /proc while it runs.
  long rss_kb() const;
  long descriptors() const;
  double cpu_seconds() const;

  // The exit status (or 128 + signal) once its output is read to the end; the peak
  // resident set is then max_rss_kb().
  std::optional<int> wait_exit(milliseconds limit);
  long max_rss_kb() const { return max_rss_kb_; }

 private:
  long status_field(const std::string& key) const;
  void collect(int out, int err);

  pid_t pid_ = -1;
  bool exited_ = false;
  long max_rss_kb_ = 0;
  std::thread reader_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::string out_;
  std::string err_;
  bool eof_ = false;
};

// Talking to it on loopback, given the URL it printed ("tcp://127.0.0.1:PORT").
std::uint16_t port_of(const std::string& url);
sockaddr_in loopback(const std::string& url);
// A connected TCP socket (a test failure, and -1 or an unconnected one, when it fails).
int tcp_connect(const std::string& url);
// A TCP socket listening on 127.0.0.1 at a port the kernel chose (in `port`); -1 and a
// test failure when it cannot be made.
int tcp_listen_loopback(int backlog, std::uint16_t& port);
// Sends all of `data`; false on an error (a peer that closed).
bool write_all(int fd, std::string_view data);
// "tcp://127.0.0.1:PORT" or "udp://...": the input name gpufilter gives what `fd` sends.
std::string local_name(const char* scheme, int fd);

}  // namespace gpufilter::test
