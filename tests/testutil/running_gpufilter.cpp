#include "testutil/running_gpufilter.hpp"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include <gtest/gtest.h>

#include "testutil/testutil.hpp"

namespace gpufilter::test {

using Clock = std::chrono::steady_clock;

RunningGpufilter::RunningGpufilter(const std::vector<std::string>& args, const std::string& setup) {
  std::vector<std::string> argv;
  if (setup.empty()) argv = {gpufilter_binary()};
  else argv = {"/bin/sh", "-c", setup + " && exec \"$0\" \"$@\"", gpufilter_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  const SpawnedProcess child = spawn_process(argv);
  pid_ = child.pid;
  ::close(child.in);  // with --listen or --follow, standard input is not an input
  reader_ = std::thread([this, out = child.out, err = child.err] { collect(out, err); });
}

RunningGpufilter::~RunningGpufilter() {
  if (!exited_) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  reader_.join();
}

std::string RunningGpufilter::out() const {
  std::lock_guard lock(mutex_);
  return out_;
}

std::string RunningGpufilter::err() const {
  std::lock_guard lock(mutex_);
  return err_;
}

bool RunningGpufilter::wait_for(const std::function<bool(const std::string&, const std::string&)>& done,
                                milliseconds limit) {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, limit, [&] { return done(out_, err_); });
}

bool RunningGpufilter::out_has(const std::string& text, milliseconds limit) {
  return wait_for([&](const std::string& out, const std::string&) { return out.find(text) != std::string::npos; },
                  limit);
}

bool RunningGpufilter::err_has(const std::string& text, milliseconds limit) {
  return wait_for([&](const std::string&, const std::string& err) { return err.find(text) != std::string::npos; },
                  limit);
}

std::vector<std::string> RunningGpufilter::listening(std::size_t count) {
  std::vector<std::string> urls;
  const bool all = wait_for(
      [&](const std::string&, const std::string& err) {
        urls.clear();
        const std::string mark = "gpufilter: listening on ";
        for (std::size_t at = err.find(mark); at != std::string::npos; at = err.find(mark, at + 1)) {
          const std::size_t end = err.find('\n', at);
          if (end == std::string::npos) break;
          urls.push_back(err.substr(at + mark.size(), end - at - mark.size()));
        }
        return urls.size() >= count;
      },
      milliseconds(60000));
  if (!all) ADD_FAILURE() << "gpufilter did not say where it listens; stderr: " << err();
  return urls;
}

std::string RunningGpufilter::listening() {
  const std::vector<std::string> urls = listening(1);
  return urls.empty() ? std::string() : urls.front();
}

void RunningGpufilter::signal(int sig) const { ::kill(pid_, sig); }

long RunningGpufilter::rss_kb() const { return status_field("VmRSS:"); }

long RunningGpufilter::descriptors() const {
  long n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid_) + "/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++n;
  return n;
}

double RunningGpufilter::cpu_seconds() const {
  std::ifstream in("/proc/" + std::to_string(pid_) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream fields(text.substr(text.rfind(')') + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; fields >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) {
      stime = std::stoull(field);
      break;
    }
  }
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

std::optional<int> RunningGpufilter::wait_exit(milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  for (;;) {
    int status = 0;
    rusage usage{};
    const pid_t r = ::wait4(pid_, &status, WNOHANG, &usage);
    if (r == pid_) {
      exited_ = true;
      max_rss_kb_ = usage.ru_maxrss;
      wait_for([this](const std::string&, const std::string&) { return eof_; }, milliseconds(5000));
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (Clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(milliseconds(5));
  }
}

long RunningGpufilter::status_field(const std::string& key) const {
  std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
  std::string word;
  while (in >> word) {
    if (word == key) {
      long kb = 0;
      in >> kb;
      return kb;
    }
  }
  return -1;
}

void RunningGpufilter::collect(int out, int err) {
  bool out_open = true;
  bool err_open = true;
  char buffer[65536];
  while (out_open || err_open) {
    pollfd fds[2];
    int n = 0;
    if (out_open) fds[n++] = {out, POLLIN, 0};
    if (err_open) fds[n++] = {err, POLLIN, 0};
    if (::poll(fds, static_cast<nfds_t>(n), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < n; ++i) {
      if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const ssize_t got = ::read(fds[i].fd, buffer, sizeof buffer);
      if (got < 0 && errno == EINTR) continue;
      std::lock_guard lock(mutex_);
      if (got <= 0) {
        (fds[i].fd == out ? out_open : err_open) = false;
      } else {
        (fds[i].fd == out ? out_ : err_).append(buffer, static_cast<std::size_t>(got));
      }
      changed_.notify_all();
    }
  }
  ::close(out);
  ::close(err);
  std::lock_guard lock(mutex_);
  eof_ = true;
  changed_.notify_all();
}

std::uint16_t port_of(const std::string& url) {
  return static_cast<std::uint16_t>(std::stoi(url.substr(url.rfind(':') + 1)));
}

sockaddr_in loopback(const std::string& url) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port_of(url));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return address;
}

int tcp_listen_loopback(int backlog, std::uint16_t& port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 || ::listen(fd, backlog) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ADD_FAILURE() << "listen on 127.0.0.1: " << std::strerror(errno);
    if (fd >= 0) ::close(fd);
    return -1;
  }
  port = ntohs(address.sin_port);
  return fd;
}

int tcp_connect(const std::string& url) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const sockaddr_in address = loopback(url);
  if (fd < 0 || ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    ADD_FAILURE() << "connect to " << url << ": " << std::strerror(errno);
  }
  return fd;
}

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

std::string local_name(const char* scheme, int fd) {
  sockaddr_in address{};
  socklen_t length = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  return std::string(scheme) + "://127.0.0.1:" + std::to_string(ntohs(address.sin_port));
}

}  // namespace gpufilter::test
