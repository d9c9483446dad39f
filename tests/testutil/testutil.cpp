#include "testutil/testutil.hpp"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#if defined(GPUFILTER_SANITIZED)
#include <sanitizer/allocator_interface.h>
#endif

#include "reference_matcher.hpp"

extern char** environ;

namespace gpufilter::test {

namespace {
// Build-time locations, overridable from the environment so that built tests can run on
// another machine (the GPU machine) from wherever they were copied to.
std::string setting(const char* variable, const char* built_in) {
  const char* value = std::getenv(variable);
  return value != nullptr && *value != '\0' ? value : built_in;
}
}  // namespace

bool have_tshark() {
  static const bool found = std::system("tshark -v > /dev/null 2>&1") == 0;
  return found;
}

std::string command_output(const std::string& command) {
  FILE* pipe = ::popen(("LC_ALL=C " + command + " 2>/dev/null").c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("popen failed: " + command);
  std::string out;
  char buffer[65536];
  std::size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) out.append(buffer, n);
  ::pclose(pipe);
  return out;
}

std::string shell_quote(const std::string& text) {
  std::string out = "'";
  for (const char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

bool whole_sweeps() {
#if defined(GPUFILTER_SANITIZED)
  static const bool whole = [] {
    const char* value = std::getenv("GPUFILTER_WHOLE_SWEEPS");
    return value != nullptr && std::string_view(value) == "1";
  }();
  return whole;
#else
  return true;
#endif
}

SweepShare::SweepShare(std::uint64_t share) : share_(whole_sweeps() || share == 0 ? 1 : share) {}

bool SweepShare::take() {
  // splitmix64's finaliser of the call number.
  std::uint64_t z = calls_++ + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return (z ^ (z >> 31)) % share_ == 0;
}

long memory_in_use_kib() {
#if defined(GPUFILTER_SANITIZED)
  return static_cast<long>(__sanitizer_get_current_allocated_bytes() / 1024);
#else
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmRSS:") {
      long kib = 0;
      status >> kib;
      return kib;
    }
    status.ignore(1 << 20, '\n');
  }
  return -1;
#endif
}

rlim_t raise_descriptor_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 1024;
  limit.rlim_cur = limit.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &limit);
  ::getrlimit(RLIMIT_NOFILE, &limit);
  return limit.rlim_cur;
}

std::string corpus_path(std::string_view relative) {
  return setting("GPUFILTER_CORPUS_DIR", GPUFILTER_CORPUS_DIR) + "/" + std::string(relative);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string random_string(std::mt19937& rng, const std::string& alphabet, std::size_t length) {
  std::uniform_int_distribution<std::size_t> pick(0, alphabet.size() - 1);
  std::string s(length, ' ');
  for (char& c : s) c = alphabet[pick(rng)];
  return s;
}

std::vector<Pair> as_pairs(std::span<const Occurrence> occurrences) {
  std::vector<Pair> r;
  r.reserve(occurrences.size());
  for (const Occurrence& o : occurrences) r.emplace_back(o.position, o.pattern);
  return r;
}

std::vector<Pair> reference(const PatternSet& patterns, const PatternTable& table, const std::string& text,
                            std::size_t overlap) {
  return as_pairs(reference_occurrences(patterns, table, text, overlap));
}

std::string diff(const std::vector<Pair>& expected, const std::vector<Pair>& actual) {
  if (expected == actual) return {};
  std::size_t i = 0;
  while (i < expected.size() && i < actual.size() && expected[i] == actual[i]) ++i;
  auto show = [](const std::vector<Pair>& v, std::size_t k) {
    if (k >= v.size()) return std::string("(none)");
    return "(" + std::to_string(v[k].first) + "," + std::to_string(v[k].second) + ")";
  };
  return "expected " + std::to_string(expected.size()) + " occurrences, got " + std::to_string(actual.size()) +
         "; first difference at index " + std::to_string(i) + ": expected " + show(expected, i) + ", got " +
         show(actual, i);
}

PatternSet random_patterns(std::mt19937& rng, const std::string& alphabet, std::size_t count, std::size_t max_len,
                           const std::string& text, bool keep_newlines) {
  PatternSet p;
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<std::string> made;
  for (std::size_t i = 0; i < count; ++i) {
    const double x = u(rng);
    std::string s;
    if (!made.empty() && x < 0.08) {
      s = made[std::uniform_int_distribution<std::size_t>(0, made.size() - 1)(rng)];
      for (char& c : s)
        if (c >= 'a' && c <= 'z' && u(rng) < 0.3) c = static_cast<char>(c - 32);
    } else if (!text.empty() && x < 0.45) {
      const std::size_t len = std::uniform_int_distribution<std::size_t>(1, std::min(max_len, text.size()))(rng);
      const std::size_t at = std::uniform_int_distribution<std::size_t>(0, text.size() - len)(rng);
      s = text.substr(at, len);
    } else {
      const std::size_t cap = u(rng) < 0.8 ? std::min<std::size_t>(5, max_len) : max_len;
      s = random_string(rng, alphabet, std::uniform_int_distribution<std::size_t>(1, cap)(rng));
    }
    if (!keep_newlines) s.erase(std::remove(s.begin(), s.end(), '\n'), s.end());
    if (s.empty()) s.assign(1, 'a');
    made.push_back(s);
    p.add(s);
  }
  return p;
}

std::string gpufilter_binary() { return setting("GPUFILTER_BIN", GPUFILTER_BINARY); }
std::string grep_binary() { return setting("GPUFILTER_GREP", "/bin/grep"); }

#ifndef GPUPERMUTE_BINARY  // defined where the examples are built (tests/permutations)
#define GPUPERMUTE_BINARY ""
#endif
#ifndef KAFKA_BROKER_BINARY  // defined by tests/kafka
#define KAFKA_BROKER_BINARY ""
#endif
std::string gpufilterd_binary() { return setting("GPUFILTERD_BIN", GPUFILTERD_BINARY); }
std::string gpupermute_binary() { return setting("GPUPERMUTE_BIN", GPUPERMUTE_BINARY); }
std::string kafka_broker_binary() { return KAFKA_BROKER_BINARY; }
std::string source_dir() { return setting("GPUFILTER_SOURCE_DIR", GPUFILTER_SOURCE_DIR); }

StringSource::StringSource(std::string data, std::size_t max_read, std::string name, bool regular_file)
    : data_(std::move(data)), max_read_(max_read), name_(std::move(name)), regular_(regular_file) {}

std::size_t StringSource::read(std::span<char> dst) {
  std::size_t n = std::min(dst.size(), data_.size() - pos_);
  if (!read_sizes_.empty()) {
    n = std::min(n, std::max<std::size_t>(1, read_sizes_[next_size_++ % read_sizes_.size()]));
  } else if (max_read_ != 0) {
    n = std::min(n, max_read_);
  }
  std::memcpy(dst.data(), data_.data() + pos_, n);
  pos_ += n;
  return n;
}

void RecordingSink::begin(const InputInfo& input) { events_.push_back("begin " + input.name); }

std::string RecordingSink::describe(const LineMatch& line) const {
  std::string s = std::to_string(line.offset) + " " + std::to_string(line.number) + " " + std::string(line.line);
  for (const auto& span : line.spans) s += " [" + std::to_string(span.begin) + "," + std::to_string(span.end) + ")";
  return s;
}

Flow RecordingSink::matched(const LineMatch& line) {
  events_.push_back("match " + describe(line));
  return Flow::kContinue;
}

void RecordingSink::context(const LineMatch& line) { events_.push_back("context " + describe(line)); }

void RecordingSink::context_break() { events_.push_back("break"); }

void RecordingSink::finish(const InputSummary& summary) {
  events_.push_back("finish " + std::to_string(summary.selected_lines) + (summary.binary_matched ? " binary" : ""));
}

std::string RecordingSink::joined() const {
  std::string s;
  for (const auto& e : events_) s += e + "\n";
  return s;
}

namespace {

// Under AddressSanitizer with leak detection (scripts/sanitize.sh), LeakSanitizer's check
// as a child exits (stopping its threads, scanning its memory) took 40 % of the suite's
// spawn-heavy differential tests. Every child still runs under ASan and UBSan, whose
// reports end it with status 86; the leak check runs in the first child a test process
// starts and in every kLeakCheckEvery-th after it, so each test still meets it.
constexpr unsigned kLeakCheckEvery = 4;

std::string child_asan_options() {
  static std::atomic<unsigned> spawned{0};
  const char* options = std::getenv("ASAN_OPTIONS");
  if (options == nullptr || std::strstr(options, "detect_leaks=1") == nullptr) return {};
  if (spawned.fetch_add(1, std::memory_order_relaxed) % kLeakCheckEvery == 0) return {};
  return std::string("ASAN_OPTIONS=") + options + ":detect_leaks=0";
}

}  // namespace

SpawnedProcess spawn_process(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env) {
  int in_pipe[2], out_pipe[2], err_pipe[2];
  if (::pipe2(in_pipe, O_CLOEXEC) != 0 || ::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0)
    throw std::runtime_error("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_pipe[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);

  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "LC_", 3) == 0 || std::strncmp(*e, "LANG=", 5) == 0 || std::strncmp(*e, "GREP_", 5) == 0)
      continue;
    env_strings.emplace_back(*e);
  }
  env_strings.emplace_back("LC_ALL=C");
  std::vector<std::string> extras = extra_env;
  if (std::string options = child_asan_options(); !options.empty()) extras.insert(extras.begin(), std::move(options));
  // An extra entry replaces an earlier one of the same name (getenv takes the first).
  for (const auto& e : extras) {
    const std::string name = e.substr(0, e.find('=') + 1);
    if (name.size() > 1)
      env_strings.erase(std::remove_if(env_strings.begin(), env_strings.end(),
                                       [&name](const std::string& s) { return s.compare(0, name.size(), name) == 0; }),
                        env_strings.end());
    env_strings.push_back(e);
  }
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> argp;
  for (auto& a : args) argp.push_back(a.data());
  argp.push_back(nullptr);

  // The child gets default SIGPIPE handling even though this process ignores it (so that
  // writing to a child that exited early is an error here, not a signal).
  ::signal(SIGPIPE, SIG_IGN);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigdefault(&attributes, &defaults);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGDEF);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, argp[0], &actions, &attributes, argp.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  ::close(in_pipe[0]);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (rc != 0) {
    ::close(in_pipe[1]);
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(rc));
  }
  return SpawnedProcess{pid, in_pipe[1], out_pipe[0], err_pipe[0]};
}

ProcessResult run_process(const std::vector<std::string>& argv, const std::string& input,
                          const std::vector<std::string>& extra_env) {
  const SpawnedProcess child = spawn_process(argv, extra_env);
  ProcessResult result;
  std::size_t written = 0;
  int in_fd = child.in;
  if (input.empty()) {
    ::close(in_fd);
    in_fd = -1;
  } else {
    ::fcntl(in_fd, F_SETFL, O_NONBLOCK);
  }
  bool out_open = true, err_open = true;
  char buffer[65536];
  while (out_open || err_open) {
    pollfd fds[3];
    int n = 0;
    if (out_open) fds[n++] = {child.out, POLLIN, 0};
    if (err_open) fds[n++] = {child.err, POLLIN, 0};
    if (in_fd >= 0) fds[n++] = {in_fd, POLLOUT, 0};
    if (::poll(fds, static_cast<nfds_t>(n), -1) < 0 && errno != EINTR) break;
    for (int i = 0; i < n; ++i) {
      if (fds[i].revents == 0) continue;
      if (fds[i].fd == in_fd) {
        const ssize_t w = ::write(in_fd, input.data() + written, input.size() - written);
        if (w > 0) written += static_cast<std::size_t>(w);
        if (w < 0 && errno != EAGAIN) written = input.size();
        if (written == input.size()) {
          ::close(in_fd);
          in_fd = -1;
        }
        continue;
      }
      const ssize_t r = ::read(fds[i].fd, buffer, sizeof buffer);
      if (r <= 0) {
        if (fds[i].fd == child.out) out_open = false;
        else err_open = false;
        continue;
      }
      (fds[i].fd == child.out ? result.out : result.err).append(buffer, static_cast<std::size_t>(r));
    }
  }
  if (in_fd >= 0) ::close(in_fd);
  ::close(child.out);
  ::close(child.err);
  int status = 0;
  struct rusage usage {};
  ::wait4(child.pid, &status, 0, &usage);
  result.max_rss_kb = usage.ru_maxrss;
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

ProcessResult run_process_measured(const std::vector<std::string>& argv, const std::string& input,
                                   const std::vector<std::string>& extra_env) {
  const std::string helper = setting("GPUFILTER_PEAK_RSS", GPUFILTER_PEAK_RSS);
  if (::access(helper.c_str(), X_OK) != 0) return run_process(argv, input, extra_env);
  if (argv.empty() || ::access(argv[0].c_str(), X_OK) != 0)
    throw std::runtime_error("cannot start " + (argv.empty() ? std::string("nothing") : argv[0]));
  const TempDir dir;
  const std::string peak_file = dir.file("peak");
  std::vector<std::string> wrapped = {helper, peak_file};
  wrapped.insert(wrapped.end(), argv.begin(), argv.end());
  ProcessResult result = run_process(wrapped, input, extra_env);
  std::ifstream peak(peak_file);
  if (!(peak >> result.max_rss_kb)) throw std::runtime_error("gpufilter-test-peak-rss wrote no peak for " + argv[0]);
  return result;
}

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string templ = std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/gpufilter-test-XXXXXX";
  if (::mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + templ);
  path_ = templ;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string TempDir::write(const std::string& name, std::string_view contents) const {
  const std::string full = path_ + "/" + name;
  std::ofstream out(full, std::ios::binary | std::ios::trunc);
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  if (!out) throw std::runtime_error("cannot write " + full);
  return full;
}

std::string TempDir::make_dir(const std::string& name) const {
  const std::string full = path_ + "/" + name;
  std::filesystem::create_directories(full);
  return full;
}

}  // namespace gpufilter::test
