// The exec output (outputs.hpp): a program run for each alert, fail2ban's ban and unban
// actions. Not on QueuedOutput (outputs.cpp): that delivers one attempt at a time from the
// head of one queue, so a ban that keeps failing would hold back every other group's, and
// commands could not run side by side. Here one dispatcher thread per output keeps the
// queue in publish order and starts, from it, up to `concurrency` commands at once, the
// first waiting alert of each (rule, group) that has none running and whose retry is due;
// a failed one goes back to its place with its own backoff. The thread waits in poll() on
// the children's pidfds and output pipes and on an eventfd that publish() and drain()
// write, so that it sees an exit, a timeout, new alerts and the drain deadline at once.
// It reaps only its own children, each by its pid (never wait(-1)).
#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <list>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

#include "gpufilter/core/errors.hpp"
#include "gpufilter/daemon/outputs.hpp"
#include "gpufilter/sources/file_trust.hpp"

namespace gpufilter::daemon {
namespace {

using Steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr std::size_t kKeptOutput = 4096;       // of each of stdout and stderr, for the message
constexpr std::size_t kErrorLineBytes = 256;    // the command's line in last_error
constexpr milliseconds kKillGrace{1000};        // SIGTERM, then this, then SIGKILL
constexpr milliseconds kPollWithoutPidfd{20};   // exits are polled where pidfd_open is missing
constexpr const char* kDefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// t + d, saturating at time_point::max() (as outputs.cpp's).
Steady::time_point later(Steady::time_point t, milliseconds d) {
  if (d <= milliseconds(0)) return t;
  if (std::chrono::duration_cast<milliseconds>(Steady::time_point::max() - t) <= d) return Steady::time_point::max();
  return t + d;
}

std::string duration_text(milliseconds d) {
  return d.count() % 1000 == 0 ? std::to_string(d.count() / 1000) + "s" : std::to_string(d.count()) + "ms";
}

// What came from a log line or a command, fit for a message: control bytes as '?', cut.
std::string printable(std::string_view text, std::size_t limit) {
  std::string out;
  for (const char c : text.substr(0, limit)) {
    const auto u = static_cast<unsigned char>(c);
    out += u < 0x20 || u == 0x7f ? '?' : c;
  }
  if (text.size() > limit) out += "...";
  return out;
}

bool has_tag(const std::string& text) {
  return text.find("{{") != std::string::npos || text.find('<') != std::string::npos;
}

// ---------------------------------------------------------------------------------------
// Tags

// <ip> and <family>: the label `ip`, else the group, when it is an address.
struct Address {
  std::string text;    // what <ip> would be
  std::string family;  // "inet4", "inet6"; "" when `text` is no address
};

Address address_of(const Alert& alert) {
  Address a;
  const auto label = alert.labels.find("ip");
  a.text = label != alert.labels.end() && !label->second.empty() ? label->second : alert.group;
  unsigned char buffer[sizeof(in6_addr)];
  if (a.text.find('\0') != std::string::npos) return a;
  if (::inet_pton(AF_INET, a.text.c_str(), buffer) == 1) a.family = "inet4";
  else if (::inet_pton(AF_INET6, a.text.c_str(), buffer) == 1) a.family = "inet6";
  return a;
}

std::string label_or_empty(const Alert& alert, const std::string& name) {
  const auto it = alert.labels.find(name);
  return it == alert.labels.end() ? std::string() : it->second;
}

// The value of the tag <name>; nullopt when it is no tag (the text stays as written).
std::optional<std::string> tag_value(const std::string& name, const Alert& alert, const Address& address) {
  if (name == "ip") return address.text;
  if (name == "family") return address.family;
  if (name == "name") return alert.rule;
  if (name == "failures") return std::to_string(alert.matches);
  if (name == "time")
    return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(alert.starts_at.time_since_epoch()).count());
  if (name == "group") return alert.group;
  if (name == "state") return std::string(alert.state == Alert::State::kFiring ? "firing" : "resolved");
  if (name == "user") return label_or_empty(alert, "user");
  if (name.size() > 2 && name.starts_with("F-")) {
    std::string label = name.substr(2);
    for (char& c : label) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return label_or_empty(alert, label);
  }
  return std::nullopt;
}

// One argument with its tags and {{LABEL}}s filled, in one pass over the template (so a
// value is never read again as a tag); nullopt when it names <ip> or <family> and the
// alert has no address.
std::optional<std::string> fill_argument(const std::string& arg, const Alert& alert, const Address& address) {
  std::string out;
  std::size_t i = 0;
  while (i < arg.size()) {
    if (arg.compare(i, 2, "{{") == 0) {
      const std::size_t close = arg.find("}}", i + 2);
      if (close != std::string::npos) {
        out += filled(arg.substr(i, close + 2 - i), alert.labels);
        i = close + 2;
        continue;
      }
    }
    if (arg[i] == '<') {
      const std::size_t close = arg.find('>', i + 1);
      if (close != std::string::npos) {
        const std::string name = arg.substr(i + 1, close - i - 1);
        const std::optional<std::string> value = tag_value(name, alert, address);
        if (value) {
          if ((name == "ip" || name == "family") && address.family.empty()) return std::nullopt;
          out += *value;
          i = close + 1;
          continue;
        }
      }
    }
    out += arg[i++];
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Children

void close_fd(int& fd) noexcept {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// A pipe whose ends close on exec and are above 2: a daemon started with a standard
// descriptor closed must not hand a pipe end out as the child's 0, 1 or 2 by accident.
// The read end (ours) does not block.
bool make_pipe(int fds[2]) {
  if (::pipe2(fds, O_CLOEXEC) != 0) return false;
  for (int k = 0; k < 2; ++k) {
    if (fds[k] >= 3) continue;
    const int moved = ::fcntl(fds[k], F_DUPFD_CLOEXEC, 3);
    ::close(fds[k]);
    fds[k] = moved;
  }
  if (fds[0] < 0 || fds[1] < 0 || ::fcntl(fds[0], F_SETFL, O_NONBLOCK) != 0) {
    close_fd(fds[0]);
    close_fd(fds[1]);
    return false;
  }
  return true;
}

struct Spawned {
  pid_t pid = -1;
  int pidfd = -1;  // -1 where the kernel has no pidfd_open: exits are then polled
  int out = -1;    // the read ends of its stdout and stderr
  int err = -1;
};

// posix_spawn in a new process group (the timeout ends the whole group), with stdin from
// /dev/null, stdout and stderr into pipes, no other descriptor, "/" as its directory, no
// signal blocked or ignored (gpufilterd blocks SIGTERM and SIGHUP for sigwait() and
// ignores SIGPIPE, and a child inherits both), and PATH alone as its environment.
// Returns 0 or an errno value.
int spawn(const std::vector<std::string>& argv, Spawned& s) {
  int out[2];
  int err[2];
  if (!make_pipe(out)) return errno != 0 ? errno : EMFILE;
  if (!make_pipe(err)) {
    const int e = errno != 0 ? errno : EMFILE;
    close_fd(out[0]);
    close_fd(out[1]);
    return e;
  }
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err[1], STDERR_FILENO);
#if defined(__GLIBC_PREREQ)
#if __GLIBC_PREREQ(2, 34)
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);  // besides O_CLOEXEC: a library's descriptors
#endif
#if __GLIBC_PREREQ(2, 29)
  posix_spawn_file_actions_addchdir_np(&actions, "/");
#endif
#endif
  sigset_t none;
  sigset_t all;
  sigemptyset(&none);
  sigfillset(&all);
  sigdelset(&all, SIGKILL);
  sigdelset(&all, SIGSTOP);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::string path = std::string("PATH=") + kDefaultPath;
  char* env[] = {path.data(), nullptr};
  const int rc = ::posix_spawn(&s.pid, argv[0].c_str(), &actions, &attr, args.data(), env);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close_fd(out[1]);
  close_fd(err[1]);
  if (rc != 0) {
    close_fd(out[0]);
    close_fd(err[0]);
    return rc;
  }
  s.out = out[0];
  s.err = err[0];
#ifdef SYS_pidfd_open
  // The child is ours and not reaped, so its pid cannot name another process yet.
  s.pidfd = static_cast<int>(::syscall(SYS_pidfd_open, s.pid, 0));
  if (s.pidfd >= 0) ::fcntl(s.pidfd, F_SETFD, FD_CLOEXEC);
#endif
  return 0;
}

// Reads what the pipe holds now, keeping the first kKeptOutput bytes; closes it at its
// end. Bounded per call so that a child that never stops writing cannot hold the thread.
void read_pipe(int& fd, std::string& kept) {
  char buffer[65536];
  for (int round = 0; fd >= 0 && round < 16; ++round) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {
      close_fd(fd);
      return;
    }
    const std::size_t room = kKeptOutput - std::min(kKeptOutput, kept.size());
    kept.append(buffer, std::min(room, static_cast<std::size_t>(n)));
  }
}

// The first line of what the command wrote, standard error first, for the message.
std::string first_line(const std::string& err, const std::string& out) {
  for (const std::string* text : {&err, &out}) {
    std::size_t begin = 0;
    while (begin < text->size()) {
      std::size_t end = text->find('\n', begin);
      if (end == std::string::npos) end = text->size();
      std::string_view line(text->data() + begin, end - begin);
      while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.remove_suffix(1);
      while (!line.empty() && std::isspace(static_cast<unsigned char>(line.front()))) line.remove_prefix(1);
      if (!line.empty()) return printable(line, kErrorLineBytes);
      begin = end + 1;
    }
  }
  return {};
}

// ---------------------------------------------------------------------------------------
// The output

enum class Outcome { kDelivered, kRetry, kRejected, kAborted };

class ExecOutput final : public AlertOutput {
 public:
  ExecOutput(std::string name, ExecOutputConfig config) : name_(std::move(name)), config_(std::move(config)) {
    check_exec_output(config_);
    QueueConfig& q = config_.queue;
    q.capacity = std::max<std::size_t>(q.capacity, 1);
    q.initial_backoff = std::max(q.initial_backoff, milliseconds(1));
    q.max_backoff = std::max(q.max_backoff, q.initial_backoff);
    children_.reserve(config_.concurrency);  // so that adding a started child cannot throw
    wake_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wake_ < 0) throw Error("exec output " + name_ + ": eventfd: " + std::strerror(errno));
    thread_ = std::thread([this] { run(); });
  }
  ~ExecOutput() override {
    stop();
    close_fd(wake_);
  }
  ExecOutput(const ExecOutput&) = delete;
  ExecOutput& operator=(const ExecOutput&) = delete;

  const std::string& name() const override { return name_; }

  void publish(const Alert& alert) noexcept override {
    try {
      const bool runs = alert.state == Alert::State::kFiring || !config_.resolve.empty();
      // Allocated outside the lock (the scan thread holds it briefly); spliced in.
      std::list<Job> node;
      if (runs) node.push_back(Job{0, alert, alert.rule + '\x1f' + alert.group, config_.queue.initial_backoff, {}});
      {
        std::lock_guard lock(mutex_);
        const std::uint64_t seq = stats_.published++;
        if (!runs) {
          ++stats_.delivered;  // nothing to run for it: done
          return;
        }
        node.front().seq = seq;
        while (queue_.size() >= config_.queue.capacity) {
          queue_.pop_front();
          ++stats_.dropped;
        }
        queue_.splice(queue_.end(), node);
      }
      wake();
    } catch (...) {
      std::lock_guard lock(mutex_);
      ++stats_.published;
      ++stats_.dropped;  // no memory for the copy: the alert is lost, and counted
    }
  }

  bool drain(milliseconds timeout) noexcept override {
    std::lock_guard join(join_mutex_);
    if (thread_.joinable()) {
      {
        std::lock_guard lock(mutex_);
        draining_ = true;
        lower_abort(later(Steady::now(), timeout));
      }
      wake();
      thread_.join();
    }
    std::lock_guard lock(mutex_);
    return queue_.empty() && running_seqs_.empty();
  }

  OutputStats stats() const noexcept override {
    std::lock_guard lock(mutex_);
    OutputStats s = stats_;
    s.queued = queue_.size() + running_seqs_.size();
    s.capacity = config_.queue.capacity;
    // The oldest alert not yet gone for good: waiting, retrying or running.
    s.settled = s.published;
    if (!queue_.empty()) s.settled = std::min(s.settled, queue_.front().seq);
    if (!running_seqs_.empty()) s.settled = std::min(s.settled, *running_seqs_.begin());
    return s;
  }

 private:
  struct Job {
    std::uint64_t seq = 0;  // its place among the alerts published
    Alert alert;
    std::string key;  // rule '\x1f' group: one command at a time per key, in order
    milliseconds backoff{};
    Steady::time_point retry_at{};
  };
  struct Child {
    Job job;
    Spawned process;
    std::string command;  // "/usr/sbin/nft (fire)", for the message
    std::string out, err;
    Steady::time_point deadline{};
    Steady::time_point kill_at = Steady::time_point::max();
    bool terminated = false;  // SIGTERM sent: timed out
    bool killed = false;      // SIGKILL sent
  };

  void wake() noexcept {
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(wake_, &one, sizeof one);
  }
  Steady::time_point abort_at() const noexcept { return Steady::time_point(Steady::duration(abort_at_.load())); }
  void lower_abort(Steady::time_point t) { abort_at_.store(std::min(abort_at(), t).time_since_epoch().count()); }

  void stop() noexcept {
    std::lock_guard join(join_mutex_);
    if (!thread_.joinable()) return;
    {
      std::lock_guard lock(mutex_);
      lower_abort(Steady::now());
    }
    wake();
    thread_.join();
  }

  void run() noexcept {
    for (;;) {
      try {
        loop();
        return;
      } catch (...) {
        // No memory for a message or an argument vector: the jobs are where they were
        // (queued, or running as children_), so wait a little and go on.
        std::this_thread::sleep_for(config_.queue.initial_backoff);
      }
    }
  }

  void loop() {
    for (;;) {
      std::vector<Job> starting;
      Steady::time_point due = Steady::time_point::max();
      {
        std::lock_guard lock(mutex_);
        const Steady::time_point now = Steady::now();
        if (now >= abort_at()) break;
        if (draining_ && queue_.empty() && children_.empty()) return;
        due = take_ready(now, starting);
      }
      bool settled_at_once = false;
      for (Job& job : starting) {
        try {
          settled_at_once = !start(job) || settled_at_once;
        } catch (...) {
          // No memory for its arguments (before any child): it waits for its retry.
          settled_at_once = true;
          finish(job, Outcome::kRetry, "out of memory");
        }
      }
      if (settled_at_once) continue;  // a slot is free again: look at the queue once more
      wait(due);
      service_children();
    }
    abort_children();
  }

  // Under the lock: moves to `out` the jobs to start now, in publish order: the first
  // waiting job of each key that has none running and whose retry is due, while slots
  // are free. Returns when the earliest retry that was not due is.
  Steady::time_point take_ready(Steady::time_point now, std::vector<Job>& out) {
    Steady::time_point next = Steady::time_point::max();
    std::unordered_set<std::string> seen;  // keys whose first waiting job was looked at
    for (auto it = queue_.begin(); it != queue_.end() && children_.size() + out.size() < config_.concurrency;) {
      if (!seen.insert(it->key).second || running_.count(it->key) > 0) {
        ++it;
        continue;
      }
      if (it->retry_at > now) {
        next = std::min(next, it->retry_at);
        ++it;
        continue;
      }
      running_.insert(it->key);
      running_seqs_.insert(it->seq);
      out.push_back(std::move(*it));
      it = queue_.erase(it);
    }
    return next;
  }

  // Starts the job's command (the job moves into children_); false when it ended without
  // a child (nothing to run for it, or the spawn failed), already counted.
  bool start(Job& job) {
    const bool firing = job.alert.state == Alert::State::kFiring;
    const std::vector<std::string>& command = firing ? config_.fire : config_.resolve;
    const std::string what = command[0] + (firing ? " (fire)" : " (resolve)");
    const Address address = address_of(job.alert);
    std::vector<std::string> argv;
    for (const std::string& arg : command) {
      std::optional<std::string> value = fill_argument(arg, job.alert, address);
      if (!value) {
        std::string why = what + ": not run: <ip> \"" + printable(address.text, 64) + "\" is not an IP address";
        finish(job, Outcome::kRejected, std::move(why));
        return false;
      }
      argv.push_back(std::move(*value));
    }
    Child child;
    child.command = what;
    const int rc = spawn(argv, child.process);
    if (rc != 0) {
      std::string why = what + ": cannot run: " + std::strerror(rc);
      finish(job, Outcome::kRetry, std::move(why));
      return false;
    }
    // From here nothing throws: the child must be in children_ to be reaped.
    child.job = std::move(job);
    child.deadline = later(Steady::now(), config_.timeout);
    children_.push_back(std::move(child));  // capacity reserved
    return true;
  }

  // Sleeps in poll() until a child exits or writes, a timeout or a retry is due, the
  // abort deadline passes, or wake() is called.
  void wait(Steady::time_point due) {
    std::vector<pollfd> fds{{wake_, POLLIN, 0}};
    Steady::time_point until = std::min(due, abort_at());
    for (const Child& c : children_) {
      until = std::min(until, c.terminated ? c.kill_at : c.deadline);
      if (c.process.pidfd < 0) until = std::min(until, later(Steady::now(), kPollWithoutPidfd));
      for (const int fd : {c.process.pidfd, c.process.out, c.process.err})
        if (fd >= 0) fds.push_back({fd, POLLIN, 0});
    }
    int timeout = -1;
    if (until != Steady::time_point::max()) {
      const auto left = std::chrono::ceil<milliseconds>(until - Steady::now()).count();
      timeout = static_cast<int>(std::clamp<long long>(left, 0, 60'000));
    }
    if (::poll(fds.data(), fds.size(), timeout) > 0 && (fds[0].revents & POLLIN) != 0) {
      std::uint64_t count = 0;
      [[maybe_unused]] const ssize_t n = ::read(wake_, &count, sizeof count);
    }
  }

  // Reads the children's output, ends those past their timeout, and reaps those that
  // exited, each by its own pid.
  void service_children() {
    const Steady::time_point now = Steady::now();
    for (auto it = children_.begin(); it != children_.end();) {
      Child& c = *it;
      read_pipe(c.process.out, c.out);
      read_pipe(c.process.err, c.err);
      siginfo_t info{};
      // WNOWAIT: seen, not reaped, so that the group can still be signalled by its id.
      const int w = ::waitid(P_PID, static_cast<id_t>(c.process.pid), &info, WEXITED | WNOHANG | WNOWAIT);
      const bool exited = (w == 0 && info.si_pid == c.process.pid) || (w != 0 && errno == ECHILD);
      if (!exited) {
        if (!c.terminated && now >= c.deadline) {
          signal_group(c.process.pid, SIGTERM);
          c.terminated = true;
          c.kill_at = later(now, kKillGrace);
        } else if (c.terminated && !c.killed && now >= c.kill_at) {
          signal_group(c.process.pid, SIGKILL);
          c.killed = true;
        }
        ++it;
        continue;
      }
      read_pipe(c.process.out, c.out);  // what it wrote between the read above and its exit
      read_pipe(c.process.err, c.err);
      // A timed-out command's group goes with it, whatever it left behind.
      if (c.terminated) signal_group(c.process.pid, SIGKILL);
      const std::optional<int> status = reap(c);
      const auto [outcome, why] = judge(c, status);
      finish(c.job, outcome, why);
      it = children_.erase(it);
    }
  }

  static void signal_group(pid_t pid, int number) noexcept {
    if (::kill(-pid, number) != 0) ::kill(pid, number);
  }

  // Reaps the child (it has exited, or was sent SIGKILL) and closes its descriptors;
  // nullopt when its status is lost (someone else reaped it).
  static std::optional<int> reap(Child& c) noexcept {
    int status = 0;
    pid_t got = -1;
    do {
      got = ::waitpid(c.process.pid, &status, 0);
    } while (got < 0 && errno == EINTR);
    close_fd(c.process.pidfd);
    close_fd(c.process.out);
    close_fd(c.process.err);
    if (got != c.process.pid) return std::nullopt;
    return status;
  }

  std::pair<Outcome, std::string> judge(const Child& c, std::optional<int> status) const {
    if (c.terminated) return {Outcome::kRetry, c.command + ": timed out after " + duration_text(config_.timeout)};
    if (!status) return {Outcome::kRetry, c.command + ": its exit status was lost"};
    if (WIFEXITED(*status) && WEXITSTATUS(*status) == 0) return {Outcome::kDelivered, {}};
    if (WIFSIGNALED(*status))
      return {Outcome::kRetry, c.command + ": killed by signal " + std::to_string(WTERMSIG(*status))};
    const std::string line = first_line(c.err, c.out);
    return {Outcome::kRetry,
            c.command + ": exit status " + std::to_string(WEXITSTATUS(*status)) + (line.empty() ? "" : ": " + line)};
  }

  // The drain deadline (or the destructor) came with commands running: they are killed
  // with their groups and reaped, and their alerts are queued again (so counted as lost).
  void abort_children() noexcept {
    for (Child& c : children_) {
      signal_group(c.process.pid, SIGKILL);
      (void)reap(c);
      try {
        finish(c.job, Outcome::kAborted, c.command + ": killed: the drain deadline passed");
      } catch (...) {
      }
    }
    children_.clear();
  }

  // A job's attempt ended: counted, and a job to retry goes back to its place in the queue
  // (moved from `job`; left as it was if that throws).
  void finish(Job& job, Outcome outcome, std::string why) {
    std::list<Job> node;
    if (outcome == Outcome::kRetry || outcome == Outcome::kAborted) node.push_back(std::move(job));
    std::lock_guard lock(mutex_);
    const std::string& key = node.empty() ? job.key : node.front().key;
    const std::uint64_t seq = node.empty() ? job.seq : node.front().seq;
    running_.erase(key);
    running_seqs_.erase(seq);
    if (outcome == Outcome::kDelivered) {
      ++stats_.delivered;
      return;
    }
    ++stats_.failures;
    stats_.last_error = std::move(why);
    if (outcome == Outcome::kRejected) {
      ++stats_.rejected;
      return;
    }
    Job& again = node.front();
    if (outcome == Outcome::kRetry) {
      again.retry_at = later(Steady::now(), again.backoff);
      again.backoff = again.backoff > config_.queue.max_backoff / 2 ? config_.queue.max_backoff : again.backoff * 2;
    }
    auto at = std::find_if(queue_.begin(), queue_.end(), [&](const Job& j) { return j.seq > again.seq; });
    queue_.splice(at, node);
    // Running jobs are not in the queue: one coming back may make it one too many.
    while (queue_.size() > config_.queue.capacity) {
      queue_.pop_front();
      ++stats_.dropped;
    }
  }

  const std::string name_;
  ExecOutputConfig config_;
  int wake_ = -1;  // eventfd: publish(), drain() and stop() wake the thread's poll()
  mutable std::mutex mutex_;  // what follows, but children_ (the thread's own)
  std::list<Job> queue_;      // waiting (or waiting to retry), in publish order
  std::set<std::string> running_;          // keys with a command running
  std::set<std::uint64_t> running_seqs_;   // and their alerts' places
  OutputStats stats_;
  bool draining_ = false;
  std::atomic<Steady::rep> abort_at_{Steady::time_point::max().time_since_epoch().count()};
  std::vector<Child> children_;
  std::mutex join_mutex_;  // drain() and stop() may race (signal thread vs destructor)
  std::thread thread_;
};

}  // namespace

std::string find_exec_command(const std::string& command, const std::string& base_dir) {
  if (command.empty()) throw ConfigError("names no command");
  std::string path;
  if (command.front() == '/') {
    path = command;
  } else if (command.find('/') != std::string::npos) {
    path = base_dir.empty() ? command : (std::filesystem::path(base_dir) / command).lexically_normal().string();
  } else {
    const char* env = std::getenv("PATH");
    const std::string search = env != nullptr && *env != '\0' ? env : kDefaultPath;
    std::size_t begin = 0;
    while (path.empty() && begin <= search.size()) {
      std::size_t end = search.find(':', begin);
      if (end == std::string::npos) end = search.size();
      const std::string dir = search.substr(begin, end - begin);
      const std::string candidate = (dir.empty() ? "." : dir) + "/" + command;
      struct stat st {};
      if (dir.starts_with("/") && ::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
          ::access(candidate.c_str(), X_OK) == 0)
        path = candidate;
      begin = end + 1;
    }
    if (path.empty()) throw ConfigError("command \"" + command + "\" is not found in PATH (" + search + ")");
  }
  char* real = ::realpath(path.c_str(), nullptr);
  if (real == nullptr) throw ConfigError("command " + path + ": " + std::strerror(errno));
  const std::string resolved = real;
  std::free(real);
  struct stat st {};
  if (::stat(resolved.c_str(), &st) != 0) throw ConfigError("command " + path + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw ConfigError("command " + path + ": not a regular file");
  if (::access(resolved.c_str(), X_OK) != 0)
    throw ConfigError("command " + path + ": not executable: " + std::strerror(errno));
  // As for the configuration (read_checked_file): whoever may change the program runs
  // code as gpufilterd, which a firewall action needs to be root.
  const uid_t me = ::geteuid();
  if (st.st_uid != 0 && st.st_uid != me)
    throw ConfigError("command " + path + ": refused: it is owned by uid " + std::to_string(st.st_uid) +
                      ", neither root nor the user gpufilterd runs as (uid " + std::to_string(me) + ")");
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    throw ConfigError("command " + path + ": refused: group or others may write it; fix: chmod go-w " + resolved);
  check_directories_trust(path, me);  // the link's directories, and its target's ("PATH: refused: ...")
  return path.front() == '/' ? path : resolved;
}

void check_exec_output(const ExecOutputConfig& config) {
  if (config.fire.empty()) throw ConfigError("fire: names no command (a list: the program, then its arguments)");
  for (const auto* command : {&config.fire, &config.resolve}) {
    if (command->empty()) continue;
    const char* key = command == &config.fire ? "fire" : "resolve";
    if ((*command)[0].empty()) throw ConfigError(std::string(key) + ": names no command");
    if (has_tag((*command)[0])) throw ConfigError(std::string(key) + ": the program itself cannot hold a tag");
    if ((*command)[0].front() != '/') throw ConfigError(std::string(key) + ": " + (*command)[0] + " is not an absolute path");
    (void)find_exec_command((*command)[0], "");
  }
  if (config.timeout <= milliseconds(0)) throw ConfigError("timeout: must be more than 0");
  if (config.concurrency == 0) throw ConfigError("concurrency: must be at least 1");
}

std::unique_ptr<AlertOutput> make_exec_output(std::string name, ExecOutputConfig config) {
  return std::make_unique<ExecOutput>(name.empty() ? std::string("exec") : std::move(name), std::move(config));
}

}  // namespace gpufilter::daemon
