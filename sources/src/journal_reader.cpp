// JournalReader: journalctl --output=json -> fail2ban's journal lines -> RecordChannel, on
// the I/O thread (journal_reader.hpp). One read at a time; a short append parks the reader
// until on_space, as StdinReader's does.
#include "gpufilter/sources/journal_reader.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <utility>

#include <boost/asio/buffer.hpp>
#include <nlohmann/json.hpp>

#include "gpufilter/core/errors.hpp"
#include "gpufilter/core/record_fields.hpp"

extern char** environ;

namespace gpufilter {

namespace asio = boost::asio;
using json = nlohmann::json;

namespace {

constexpr std::size_t kReadBytes = 64u << 10;

// A field's value as python-systemd gives it to fail2ban: a string, or bytes (journalctl
// prints a value that is not UTF-8 as an array of numbers); a field given several times
// is a list there, of which this takes the first (fail2ban joins only MESSAGE's).
std::optional<std::string> one_value(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_array()) {
    if (!v.empty() && v.front().is_number_unsigned()) {
      std::string bytes;
      for (const json& b : v) bytes.push_back(static_cast<char>(b.get<unsigned>() & 0xff));
      return bytes;
    }
    if (!v.empty()) return one_value(v.front());
  }
  if (v.is_number()) return v.dump();
  return std::nullopt;
}

std::optional<std::string> field(const json& entry, const char* name) {
  const auto it = entry.find(name);
  if (it == entry.end()) return std::nullopt;
  return one_value(*it);
}

// MESSAGE: several values are joined by spaces, as fail2ban joins them.
std::string message(const json& entry) {
  const auto it = entry.find("MESSAGE");
  if (it == entry.end()) return {};
  if (it->is_array() && !it->empty() && !it->front().is_number()) {
    std::string out;
    for (const json& v : *it) {
      if (!out.empty()) out += ' ';
      out += one_value(v).value_or("");
    }
    return out;
  }
  return one_value(*it).value_or("");
}

// A decimal integer as Python's int() reads a journal field (spaces around, a sign).
std::optional<long long> python_int(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  long long v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<long long> micros(const json& entry, const char* name) {
  const std::optional<std::string> v = field(entry, name);
  return v ? python_int(*v) : std::nullopt;
}

}  // namespace

JournalLine journal_line(std::string_view text) {
  const json entry = json::parse(text, nullptr, false);
  if (entry.is_discarded() || !entry.is_object()) throw std::invalid_argument("not a JSON object");
  std::vector<std::string> elements;
  if (auto host = field(entry, "_HOSTNAME"); host && !host->empty()) elements.push_back(*host);
  std::optional<std::string> ident = field(entry, "SYSLOG_IDENTIFIER");
  if (!ident || ident->empty()) ident = field(entry, "_COMM");
  if (ident && !ident->empty()) {
    std::string e = *ident;
    std::optional<std::string> pid = field(entry, "SYSLOG_PID");
    if (!pid || pid->empty()) pid = field(entry, "_PID");
    if (pid && !pid->empty()) {
      // "[%i]" of python-systemd's int; one that is not a number stays bytes: "[b'...']".
      const std::optional<long long> n = python_int(*pid);
      if (!n) e += "[b'" + *pid + "']";
      else if (*n != 0) e += "[" + std::to_string(*n) + "]";
    }
    e += ':';
    elements.push_back(e);
    if (e == "kernel:") {
      std::optional<long long> mono = micros(entry, "_SOURCE_MONOTONIC_TIMESTAMP");
      if (!mono) mono = micros(entry, "__MONOTONIC_TIMESTAMP");
      char buf[64];
      std::snprintf(buf, sizeof buf, "[%12.6f]", static_cast<double>(mono.value_or(0)) / 1e6);
      elements.emplace_back(buf);
    }
  }
  elements.push_back(message(entry));
  JournalLine out;
  for (std::size_t i = 0; i < elements.size(); ++i) {
    if (i > 0) out.text += ' ';
    for (const char c : elements[i]) {
      if (c == '\n') out.text += "\\n";
      else out.text += c;
    }
  }
  std::optional<long long> us = micros(entry, "_SOURCE_REALTIME_TIMESTAMP");
  if (!us) us = micros(entry, "__REALTIME_TIMESTAMP");
  if (us) out.time = static_cast<double>(*us / 1000000) + static_cast<double>(*us % 1000000) / 1e6;
  return out;
}

std::vector<std::string> journalctl_argv(const JournalConfig& c) {
  std::vector<std::string> argv = {c.journalctl, "--output=json", "--all", "--no-pager", "--quiet"};
  // Following, journalctl prints the last ten entries first unless told: all of them from
  // `since` (or from the start), else none.
  if (c.follow) argv.insert(argv.end(), {"--follow", c.since || c.from_start ? "--no-tail" : "--lines=0"});
  if (!c.directory.empty()) argv.push_back("--directory=" + c.directory);
  for (const std::string& f : c.files) argv.push_back("--file=" + f);
  if (c.system_only) argv.push_back("--system");
  if (!c.ns.empty()) argv.push_back("--namespace=" + c.ns);
  if (c.since) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "--since=@%.6f", *c.since);
    argv.emplace_back(buf);
  }
  if (!c.matches.empty()) {
    argv.emplace_back("--");
    argv.insert(argv.end(), c.matches.begin(), c.matches.end());
  }
  return argv;
}

JournalReader::JournalReader(asio::io_context& io, RecordChannel& channel, JournalConfig config, Notices& notices)
    : StdinReader(io, channel, config.max_line_bytes * 4 + (64u << 10), -1, config.name, config.origin),
      config_(std::move(config)),
      notices_(notices) {}

JournalReader::~JournalReader() {
  if (process_.pid > 0) {
    ::kill(process_.pid, SIGKILL);
    ::waitpid(process_.pid, nullptr, 0);
  }
  if (process_.err >= 0) ::close(process_.err);
}

JournalProcess spawn_journalctl(const JournalConfig& config) {
  const std::vector<std::string> args = journalctl_argv(config);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) throw SourceError(config.name, errno);
  if (::pipe2(err, O_CLOEXEC | O_NONBLOCK) != 0) {
    const int e = errno;
    ::close(out[0]);
    ::close(out[1]);
    throw SourceError(config.name, e);
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err[1], 2);
  // The daemon's threads block its stop signals and it ignores SIGPIPE: journalctl gets
  // neither, so that a SIGTERM ends it. In a process group of its own: a terminal's ^C
  // stops gpufilterd, which then ends journalctl after taking what it printed.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  JournalProcess p;
  const int rc = ::posix_spawnp(&p.pid, argv[0], &fa, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  ::close(out[1]);
  ::close(err[1]);
  if (rc != 0) {
    ::close(out[0]);
    ::close(err[0]);
    throw SourceError(config.name, rc, config.name + ": cannot run " + config.journalctl + ": " + std::strerror(rc));
  }
  p.out = out[0];
  p.err = err[0];
  return p;
}

std::string end_journalctl(JournalProcess& p, const JournalConfig& config, bool terminate) {
  if (p.pid <= 0) return {};
  if (terminate) ::kill(p.pid, SIGTERM);
  int status = 0;
  // journalctl ends at once on SIGTERM or after its output's end; one that does not
  // within two seconds is killed.
  for (int i = 0;; ++i) {
    const pid_t r = ::waitpid(p.pid, &status, WNOHANG);
    if (r == p.pid || (r < 0 && errno != EINTR)) break;
    if (i == 200) ::kill(p.pid, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  p.pid = -1;
  std::string err;
  char buf[4096];
  for (ssize_t n; p.err >= 0 && (n = ::read(p.err, buf, sizeof buf)) > 0;) {
    err.append(buf, static_cast<std::size_t>(n));
    if (err.size() > (64u << 10)) err.erase(0, err.size() - (64u << 10));
  }
  if (p.err >= 0) ::close(p.err);
  p.err = -1;
  if (terminate) return {};
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return {};
  while (!err.empty() && (err.back() == '\n' || err.back() == '\r')) err.pop_back();
  const std::size_t nl = err.rfind('\n');
  const std::string last = nl == std::string::npos ? err : err.substr(nl + 1);
  const std::string what = WIFEXITED(status) ? "exited with status " + std::to_string(WEXITSTATUS(status))
                                             : "ended by signal " + std::to_string(WTERMSIG(status));
  return config.name + ": " + config.journalctl + " " + what + (last.empty() ? "" : ": " + last);
}

void JournalReader::start() {
  process_ = spawn_journalctl(config_);
  fd_ = process_.out;
  StdinReader::start();  // reads a duplicate
  ::close(process_.out);
  process_.out = fd_ = -1;
}

bool JournalReader::hand_on() {
  for (;;) {
    if (!pending_.empty()) {
      const std::size_t taken = channel_.append(id_, offset_, pending_, 0, pending_fields_);
      if (taken == 0) return false;
      offset_ += taken;
      pending_.clear();
      pending_fields_.reset();
    }
    const LineFramer::Ready r = framer_.ready();
    if (r.lines.empty()) return true;
    const std::size_t end = r.lines.find('\n');
    const std::string_view one = r.lines.substr(0, end);
    framer_.consumed(end + 1);
    if (one.empty()) continue;
    try {
      JournalLine line = journal_line(one);
      if (line.text.size() >= config_.max_line_bytes) {
        ++invalid_;
        continue;
      }
      pending_ = std::move(line.text);
      pending_ += '\n';
      auto fields = std::make_shared<RecordFields>();
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.6f", line.time);
      fields->values.emplace_back(std::string(kJournalTimeField), buf);
      pending_fields_ = std::move(fields);
      ++entries_;
    } catch (const std::invalid_argument&) {
      ++invalid_;
    }
  }
}

void JournalReader::closed() {
  const std::string failure = end_journalctl(process_, config_, stopping_ && !at_end_);
  if (!failure.empty()) notices_.notice(failure);
}

}  // namespace gpufilter
