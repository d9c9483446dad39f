// Shared test utilities: in-memory sources, a recording sink, the corpus location and a
// subprocess runner for differential tests against GNU grep.
#pragma once

#include <sys/resource.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpufilter/opencl/device.hpp"
#include "gpufilter/core/errors.hpp"
#include "gpufilter/patterns/pattern_set.hpp"
#include "gpufilter/patterns/pattern_table.hpp"
#include "gpufilter/core/sink.hpp"
#include "gpufilter/core/source.hpp"

// Opens the default OpenCL device into `dev` (a std::optional<DeviceContext>); skips the
// test only when there is no OpenCL platform at all.
#define GPUFILTER_OPEN_DEVICE(dev)                    \
  std::optional<gpufilter::DeviceContext> dev;        \
  try {                                               \
    dev.emplace();                                    \
  } catch (const gpufilter::NoDeviceError& e) {       \
    GTEST_SKIP() << "no OpenCL device: " << e.what(); \
  }

// Skips a test that needs tshark (the independent oracle for captures) where it is not
// installed: CI installs it (scripts/bootstrap.sh); the GPU machine does not have it.
#define GPUFILTER_REQUIRE_TSHARK()                                                            \
  if (!gpufilter::test::have_tshark()) GTEST_SKIP() << "tshark is not installed (apt install tshark)"

namespace gpufilter::test {

// Whether the tshark command runs here.
bool have_tshark();
// Standard output of a shell command (LC_ALL=C, standard error dropped).
std::string command_output(const std::string& command);
// `text` as one single-quoted shell word.
std::string shell_quote(const std::string& text);

// `length` bytes drawn uniformly from `alphabet`.
std::string random_string(std::mt19937& rng, const std::string& alphabet, std::size_t length);

// Occurrences as (position, unique id) pairs, which GoogleTest compares and prints.
using Pair = std::pair<std::uint32_t, std::uint32_t>;
std::vector<Pair> as_pairs(std::span<const Occurrence> occurrences);
// The reference matcher's occurrences of `patterns` in `text` (reference_matcher.hpp).
std::vector<Pair> reference(const PatternSet& patterns, const PatternTable& table, const std::string& text,
                            std::size_t overlap);
// "" when equal; otherwise the sizes and the first difference.
std::string diff(const std::vector<Pair>& expected, const std::vector<Pair>& actual);

// `count` random literals for differential tests of the matchers: some cut from `text` (so
// long ones occur), most short random strings over `alphabet`, some duplicates or case
// variants of earlier ones. '\n' is dropped unless `keep_newlines` (line-oriented callers
// never see it in a pattern); no pattern is empty.
PatternSet random_patterns(std::mt19937& rng, const std::string& alphabet, std::size_t count, std::size_t max_len,
                           const std::string& text, bool keep_newlines = false);

// One case in `share` of a long sweep, in a sanitizer build: take() answers yes for about
// that share of its calls, picked by a hash of the call's number (so that no value of a
// nested sweep's inner loops is skipped whole), and yes to every call elsewhere. CI has
// time for the sanitized suite alone (scripts/bootstrap.sh test: under 45 minutes on two
// cores); the sanitizers find what a third of a sweep meets, and the release suite
// (GPUFILTER_SANITIZERS=0 scripts/bootstrap.sh test) compares every case with its oracle.
// GPUFILTER_WHOLE_SWEEPS=1 runs every case under a sanitizer too. The grep differential
// tests' compare_runs(), case_count() and the per-flow capture test ask whole_sweeps() too.
bool whole_sweeps();
class SweepShare {
 public:
  explicit SweepShare(std::uint64_t share = 3);
  bool take();

 private:
  std::uint64_t share_;
  std::uint64_t calls_ = 0;
};

// The memory this process holds, in KiB, for tests that bound its growth: the resident set
// (VmRSS), except in sanitizer builds, where the RSS mostly measures the sanitizer's
// quarantine of freed blocks and its shadow memory; there it is the heap in use.
long memory_in_use_kib();
// Raises this process's soft open-file limit to its hard limit (children inherit it) and
// returns the limit now in force, for tests that hold thousands of sockets.
rlim_t raise_descriptor_limit();

// Path of a file in ../shared/corpus (e.g. "loghub/OpenSSH_2k.log").
std::string corpus_path(std::string_view relative);
std::string read_file(const std::string& path);

// A temporary directory (mkdtemp under $TMPDIR, else /tmp), removed with everything inside
// when destroyed. The one every test uses.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const noexcept { return path_; }
  // path()/name, not created.
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  // Writes `contents` to path()/name and returns the full path.
  std::string write(const std::string& name, std::string_view contents) const;
  // Creates the directory path()/name and returns the full path.
  std::string make_dir(const std::string& name) const;

 private:
  std::string path_;
};

// A Source over a string that hands out at most `max_read` bytes per read() (0: all),
// cycling through `read_sizes` when given, so tests control where reads end.
class StringSource final : public Source {
 public:
  explicit StringSource(std::string data, std::size_t max_read = 0, std::string name = "(test)",
                        bool regular_file = true);
  void set_read_sizes(std::vector<std::size_t> sizes) { read_sizes_ = std::move(sizes); }
  std::size_t read(std::span<char> dst) override;
  bool is_regular_file() const override { return regular_; }
  const std::string& name() const override { return name_; }

 private:
  std::string data_;
  std::size_t pos_ = 0;
  std::size_t max_read_;
  std::vector<std::size_t> read_sizes_;
  std::size_t next_size_ = 0;
  std::string name_;
  bool regular_;
};

// Records every Sink callback as text, ripgrep KitchenSink style:
// "begin NAME", "match OFFSET NUMBER TEXT [spans]", "context ...", "break", "finish SELECTED BINARY".
class RecordingSink final : public Sink {
 public:
  void begin(const InputInfo& input) override;
  Flow matched(const LineMatch& line) override;
  void context(const LineMatch& line) override;
  void context_break() override;
  void finish(const InputSummary& summary) override;
  const std::vector<std::string>& events() const noexcept { return events_; }
  std::string joined() const;

 private:
  std::string describe(const LineMatch& line) const;
  std::vector<std::string> events_;
};

struct ProcessResult {
  std::string out;
  std::string err;
  int status = -1;  // exit status, or 128 + signal
  // The child's peak resident set (wait4's ru_maxrss): its own with run_process_measured;
  // with run_process at least this process's peak before it started the child.
  long max_rss_kb = 0;
};

// A started child with pipes on its standard input, output and error (the caller's ends).
struct SpawnedProcess {
  int pid;
  int in;
  int out;
  int err;
};

// Starts argv[0] (a path) under LC_ALL=C (no LANG, LC_* or GREP_* from this process) plus
// extra_env, with default SIGPIPE handling; this process ignores SIGPIPE from then on.
SpawnedProcess spawn_process(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env = {});

// Runs argv[0] (a path) with `input` on standard input, LC_ALL=C, and collects output.
ProcessResult run_process(const std::vector<std::string>& argv, const std::string& input = {},
                          const std::vector<std::string>& extra_env = {});

// run_process through gpufilter-test-peak-rss (testutil/peak_rss.cpp), so that max_rss_kb
// is the command's own peak: Linux carries a forking process's resident high-water mark
// into the child, across execve. Where the helper is missing (a test binary copied to
// another machine without GPUFILTER_PEAK_RSS set), as run_process.
ProcessResult run_process_measured(const std::vector<std::string>& argv, const std::string& input = {},
                                   const std::vector<std::string>& extra_env = {});

// The gpufilter binary and GNU grep (LC_ALL=C grep -F), for differential tests.
std::string gpufilter_binary();
std::string grep_binary();

// The other programs the tests run, as built beside them, and the source tree; GPUFILTERD_BIN,
// GPUPERMUTE_BIN and GPUFILTER_SOURCE_DIR override (tests copied to the GPU machine). Every
// build-tree path is compiled into testutil.cpp alone, so that the test sources compile
// the same in every checkout and ccache reuses them (CMakeLists.txt).
std::string gpufilterd_binary();
std::string gpupermute_binary();
std::string kafka_broker_binary();
std::string source_dir();

}  // namespace gpufilter::test
