// gpufilter: grep -F whose matching runs on the GPU. main() is the one place that maps
// errors to messages and grep's exit statuses (0 selected, 1 none, 2 trouble).
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>

#include "gpufilter/cli/options.hpp"
#include "gpufilter/pipeline/device.hpp"
#include "gpufilter/pipeline/device_scanner.hpp"
#include "gpufilter/pipeline/errors.hpp"
#include "gpufilter/pipeline/host_scanner.hpp"
#include "gpufilter/pipeline/matcher.hpp"
#include "gpufilter/pipeline/pipeline.hpp"
#include "gpufilter/sinks/grep_printer.hpp"
#include "gpufilter/sinks/json.hpp"
#include "gpufilter/sinks/json_printer.hpp"
#include "gpufilter/sources/file_source.hpp"
#include "gpufilter/sources/notices.hpp"
#include "gpufilter/sources/stop_signal.hpp"
#include "packet_mode.hpp"
#include "stream_mode.hpp"

namespace {

using namespace gpufilter;

constexpr const char* kProgram = "gpufilter";
constexpr int kTrouble = 2;

using Clock = std::chrono::steady_clock;
Clock::time_point g_started;  // main() entry, for --stats

// SIGINT and SIGTERM: stop reading, finish what was read, flush, exit 0.
StopSignal* g_stop = nullptr;
extern "C" void on_stop_signal(int) {
  if (g_stop != nullptr) g_stop->request();
}
void install_stop_handlers(StopSignal& stop) {
  g_stop = &stop;
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;  // no SA_RESTART: a blocked read returns EINTR and sees the stop
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
}

// What readers report while they keep going, as "gpufilter: MESSAGE" on stderr. Called
// from the I/O thread; -s silences it.
class StderrNotices final : public Notices {
 public:
  explicit StderrNotices(bool silent) : silent_(silent) {}
  void notice(std::string_view text) override {
    if (silent_) return;
    std::lock_guard lock(mutex_);
    std::fprintf(stderr, "gpufilter: %.*s\n", static_cast<int>(text.size()), text.data());
  }

 private:
  bool silent_;
  std::mutex mutex_;
};

// --engine=auto. The host engine (Hyperscan on every core) is faster than a CPU OpenCL
// device such as PoCL for sets up to kHostEngineMaxPatterns literals. On a GPU the OpenCL path
// has a fixed cost of about 0.4 s (NVIDIA's driver start-up and exit) that its higher
// steady state repays only over large inputs: on the H200 with 16 cores, 17 GB with 100
// literals took 0.80 s on the host engine and 0.84 s on the GPU. So up to
// kHostEngineMaxPatterns literals a GPU is used only for regular files of at least kGpuMinBytes
// in all, and never for a single literal (0.51 s against 0.73 s for those 17 GB), nor for
// streams, where the host engine's 3 ms start-up also keeps the latency low. Larger sets
// always go to the device: Hyperscan's compile and scan slow down sharply past them. So do
// sets with a literal longer than Hyperscan takes (kHostEngineMaxPatternBytes).
// docs/PERFORMANCE.md has the measurements.
constexpr std::size_t kHostOnGpu = 1;
constexpr std::uint64_t kGpuMinBytes = std::uint64_t{4} << 30;
// With a device engine, chunks smaller than this are scanned on the host (the same trie,
// walked by the CPU): the latency of a small batch on a stream is then not a device round
// trip. bench/latency measures both sides of it.
constexpr std::size_t kDefaultHostScanBelow = 16u << 10;

// The total size of the inputs when every one is a regular file; nothing for a stream.
std::optional<std::uint64_t> regular_input_bytes(const std::vector<std::string>& files) {
  std::uint64_t total = 0;
  for (const std::string& file : files) {
    struct stat st {};
    const int rc = file == "-" ? ::fstat(STDIN_FILENO, &st) : ::stat(file.c_str(), &st);
    if (rc != 0) continue;  // reported when it is opened
    if (!S_ISREG(st.st_mode)) return std::nullopt;
    total += static_cast<std::uint64_t>(st.st_size);
  }
  return total;
}

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

std::string json_string(std::string_view s) {
  std::string out;
  json::append_quoted(out, s);
  return out;
}

// True when this run takes the host engine: asked for, or expected to be fastest for this
// device, pattern count and input, or the only one there is (no OpenCL platform at all).
bool use_host_engine(cli::Engine engine, std::size_t patterns, std::size_t longest, const std::string& spec,
                     std::optional<std::uint64_t> input_bytes) {
  if (engine != cli::Engine::kAuto) return engine == cli::Engine::kHost;
  const bool host_can = patterns <= kHostEngineMaxPatterns && longest <= kHostEngineMaxPatternBytes;
  const bool host_even_on_a_gpu = host_can &&
                                  (patterns <= kHostOnGpu || !input_bytes || *input_bytes < kGpuMinBytes);
  // Then the device does not matter, and asking OpenCL would cost its start-up (about
  // 100 ms for NVIDIA's driver, more for PoCL's first run).
  if (host_even_on_a_gpu && spec.empty()) return true;
  try {
    const DeviceInfo info = find_device(spec);
    if (!host_can) return false;
    return !info.is_gpu || host_even_on_a_gpu;
  } catch (const NoDeviceError&) {
    if (!spec.empty()) throw;  // a device was asked for by name
    return true;               // no OpenCL at all: the host engine still searches
  }
}

void message(const std::string& text) {
  std::fflush(stdout);
  std::fprintf(stderr, "%s: %s\n", kProgram, text.c_str());
}

int print_devices() {
  for (const DeviceInfo& d : gpufilter::list_devices()) {
    std::printf("%zu:%zu  %-11s %s  [%s; %s; driver %s; %.1f GiB]\n", d.platform_index, d.device_index,
                d.type.c_str(), d.name.c_str(), d.platform_name.c_str(), d.version.c_str(), d.driver.c_str(),
                static_cast<double>(d.global_memory) / (1u << 30));
  }
  return 0;
}

bool color_enabled(cli::ColorWhen when) {
  if (when == cli::ColorWhen::kAlways) return true;
  if (when == cli::ColorWhen::kNever) return false;
  const char* term = std::getenv("TERM");
  return ::isatty(STDOUT_FILENO) && term != nullptr && std::strcmp(term, "dumb") != 0;
}

int search(cli::Options& o) {
  // Installed in main(), before anything slow: a signal during start-up is a stop too.
  // No pattern at all (an empty -f file) matches nothing, so -v selects every line, -w
  // and -x included: grep swaps it for the empty pattern with -v flipped.
  o.patterns = cli::decode_patterns(o.patterns, o.hex_patterns, o.escapes);
  const std::size_t given_patterns = o.patterns.size();
  if (o.patterns.empty()) {
    o.patterns.add("");
    o.invert = !o.invert;
    o.word = o.whole_line = false;
  }
  // grep reads nothing when no line can be selected: -m 0, or -v with only the empty
  // pattern (which matches every line); -L still lists every file then.
  const bool only_empty = std::all_of(o.patterns.patterns().begin(), o.patterns.patterns().end(),
                                      [](const std::string& p) { return p.empty(); });
  if (((o.max_count && *o.max_count == 0) || (only_empty && o.invert && !o.whole_line && !o.word)) &&
      o.list != cli::ListMode::kFilesWithoutMatch)
    return 1;

  std::string spec = o.device;
  if (spec.empty()) {
    if (const char* env = std::getenv("GPUFILTER_DEVICE")) spec = env;
  }
  const bool streams = o.follow || !o.listen.empty();
  const bool captures = !o.pcaps.empty() || !o.interface.empty();
  if (o.files.empty() && !streams && !captures) o.files.emplace_back("-");
  // Streams and live captures have no size to weigh: only the pattern count decides.
  std::optional<std::uint64_t> input_bytes;
  if (captures && o.interface.empty()) input_bytes = regular_input_bytes(o.pcaps);
  else if (!streams && !captures) input_bytes = regular_input_bytes(o.files);
  const bool host_engine = use_host_engine(o.engine, o.patterns.size(), o.patterns.max_length(), spec, input_bytes);
  const Clock::time_point device_start = Clock::now();
  std::optional<DeviceContext> device;
  if (!host_engine) device.emplace(spec);
  const Clock::time_point build_start = Clock::now();
  PatternTable table(o.patterns, MatchOptions{o.ignore_case});
  const Clock::time_point table_built = Clock::now();
  std::optional<Matcher> matcher;
  if (device) matcher.emplace(*device, std::move(table));
  const Clock::time_point matcher_built = Clock::now();
  const PatternTable& patterns = matcher ? matcher->table() : table;

  const bool several = o.files.size() > 1;

  PrinterOptions printing;
  if (o.quiet) printing.mode = PrinterOptions::Mode::kQuiet;
  else if (o.list == cli::ListMode::kFilesWithMatches) printing.mode = PrinterOptions::Mode::kFilesWithMatches;
  else if (o.list == cli::ListMode::kFilesWithoutMatch) printing.mode = PrinterOptions::Mode::kFilesWithoutMatch;
  else if (o.count) printing.mode = PrinterOptions::Mode::kCount;
  printing.with_filename = o.with_filename.value_or(several);
  printing.line_numbers = o.line_numbers;
  printing.byte_offset = o.byte_offset;
  printing.only_matching = o.only_matching;
  printing.invert = o.invert;
  printing.group_separator = o.group_separator;
  if (color_enabled(o.color)) {
    const char* legacy = std::getenv("GREP_COLOR");
    printing.colors = Colors::from_environment(legacy, std::getenv("GREP_COLORS"));
    if (printing.colors->legacy_color_in_effect)
      message(std::string("warning: GREP_COLOR='") + legacy + "' is deprecated; use GREP_COLORS='mt=" + legacy + "'");
  }
  const bool lines_out = printing.mode == PrinterOptions::Mode::kLines;

  SearchOptions searching;
  searching.invert = o.invert;
  searching.word = o.word;
  searching.whole_line = o.whole_line;
  if (o.max_count) searching.max_count = *o.max_count;
  if (o.negative_max_count && o.invert) searching.max_count = 0;
  searching.before = o.before.value_or(o.context.value_or(0));
  searching.after = o.after.value_or(o.context.value_or(0));
  searching.group_separators = o.before || o.after || o.context;
  searching.line_numbers = o.line_numbers;
  searching.spans = lines_out && (o.only_matching || printing.colors.has_value());
  searching.quiet = !lines_out;
  searching.counting = printing.mode == PrinterOptions::Mode::kCount;
  searching.stop_on_first = printing.mode == PrinterOptions::Mode::kQuiet ||
                            printing.mode == PrinterOptions::Mode::kFilesWithMatches ||
                            printing.mode == PrinterOptions::Mode::kFilesWithoutMatch;
  searching.binary_files = o.binary_files;
  if (o.json) {
    // JSON escapes every byte, so there is no binary file to hide; records carry their
    // line number and the patterns that matched.
    searching.binary_files = BinaryFiles::kText;
    searching.line_numbers = true;
    searching.pattern_ids = true;
    searching.spans = false;
  }
  if (streams) searching.binary_files = BinaryFiles::kText;  // a stream has no end to report it at


  Output out(STDOUT_FILENO, o.line_buffered);
  Output err(STDERR_FILENO, true);
  GrepPrinter grep_printer(out, err, printing);
  std::optional<JsonPrinter> json_printer;
  if (o.json) {
    std::vector<JsonPrinter::Pattern> given(patterns.unique_count());
    std::vector<bool> seen(patterns.unique_count(), false);
    for (std::size_t i = 0; i < given_patterns; ++i) {
      const std::uint32_t id = patterns.unique_of(i);
      if (id == PatternTable::kNoPattern || seen[id]) continue;
      seen[id] = true;
      given[id] = JsonPrinter::Pattern{static_cast<std::uint32_t>(i), o.patterns[i]};
    }
    json_printer.emplace(out, std::move(given));
  }
  Sink& printer = json_printer ? static_cast<Sink&>(*json_printer) : grep_printer;
  Searcher searcher(patterns, searching, printer);
  ScanConfig scanning;
  scanning.locate = searcher.needs_locations() || o.pattern_counts || streams || captures;
  scanning.count_patterns = o.pattern_counts;
  // Tests make the device fail mid-run (DeviceFaults::parse has the syntax: submit:3, finish:1,
  // oom:1, alloc:1, lost:2); the scanner's recovery is the one a real fault takes.
  if (const char* plan = std::getenv("GPUFILTER_INJECT_DEVICE_FAULT"); plan != nullptr && *plan != '\0') {
    try {
      scanning.device_faults = DeviceFaults::parse(plan);
    } catch (const ConfigError& e) {
      throw ConfigError(std::string("GPUFILTER_INJECT_DEVICE_FAULT: ") + e.what());
    }
  }
  std::unique_ptr<Scanner> engine;
  DeviceScanner* device_engine = nullptr;
  std::string scanning_now;  // the input being searched, for the warning of a device fault
  if (host_engine) {
    // Chunks large enough that reading one is split across cores (FileSource), one per
    // worker plus two: one being read, one being delivered.
    const std::size_t threads = HostScanner::default_threads();
    scanning.chunk_bytes = o.chunk_bytes != 0 ? o.chunk_bytes : (threads >= 8 && !streams ? 16u << 20 : 4u << 20);
    scanning.slots = o.slots != 0 ? o.slots : threads + 2;
    if (streams) scanning.chunk_bytes = std::max<std::size_t>(scanning.chunk_bytes, o.max_line_bytes + 1);
    engine = std::make_unique<HostScanner>(patterns, scanning);
  } else {
    // On a GPU, 64 MiB chunks and 4 slots keep the link busy (docs/PERFORMANCE.md).
    scanning.chunk_bytes =
        o.chunk_bytes != 0 ? o.chunk_bytes : (device->info().is_gpu && !streams ? 64u << 20 : 4u << 20);
    scanning.slots = o.slots != 0 ? o.slots : (device->info().is_gpu ? 4 : 3);
    // Below this a device round trip costs more than the host's walk of the same trie.
    scanning.host_scan_below = o.host_scan_below.value_or(kDefaultHostScanBelow);
    if (streams) scanning.chunk_bytes = std::max<std::size_t>(scanning.chunk_bytes, o.max_line_bytes + 1);
    auto on_device = std::make_unique<DeviceScanner>(*device, *matcher, scanning);
    // A device that fails mid-run: the scanner redoes the chunks it had on the host and
    // goes on there, so the output stays complete and the exit status grep's; say so once.
    const bool per_file = !streams && !captures;
    on_device->on_fault([&scanning_now, per_file](const DeviceError& e, const Chunk& chunk) {
      std::string where = scanning_now;
      if (per_file && chunk.size > 0) where += " at byte " + std::to_string(chunk.offset);
      message("warning: OpenCL device failed (" + e.call() + ": CL error " + std::to_string(e.code()) + ", " +
              cl_error_name(e.code()) + ") while scanning " + where + "; continuing on the CPU");
    });
    device_engine = on_device.get();
    engine = std::move(on_device);
  }
  Scanner& scanner = *engine;
  const Clock::time_point build_end = Clock::now();

  PipelineConfig piping;
  piping.batch_timeout = std::chrono::milliseconds(o.batch_timeout_ms);
  piping.detect_binary = o.binary_files != BinaryFiles::kText;
  piping.scan_to_end = o.pattern_counts;
  piping.count_lines = o.pattern_counts && patterns.has_empty_pattern();
  Pipeline pipeline(scanner, searcher, printer, piping);
  std::uint64_t bytes_read = 0;

  bool selected = false;
  bool trouble = false;
  StopSignal& stop = *g_stop;
  StderrNotices notices(o.no_messages);
  std::string stream_stats;
  if (streams) {
    scanning_now = "the input streams";
    const StreamResult result = run_streams(o, scanner, searching, printer, stop, notices);
    selected = result.selected;
    bytes_read = result.bytes;
    stream_stats = result.stats;
  }
  if (captures) {
    scanning_now = "the captured packets";
    const CaptureResult result = run_captures(o, scanner, o.patterns, out, stop, notices);
    selected = result.selected > 0;
    trouble = result.trouble;
    bytes_read = result.bytes;
    stream_stats = ",\"packets\":" + std::to_string(result.packets);
  }
  for (const std::string& file : streams || captures ? std::vector<std::string>{} : o.files) {
    if (stop.requested()) break;
    try {
      std::unique_ptr<FileSource> source =
          file == "-" ? FileSource::standard_input(o.label.value_or("(standard input)")) : FileSource::open(file);
      source->set_stop(&stop);
      scanning_now = source->name();
      const InputSummary summary = pipeline.run(*source);
      bytes_read = pipeline.bytes_scanned();
      if (!summary.read_error.empty()) {
        trouble = true;
        if (!o.no_messages) {
          out.flush();
          message(summary.read_error);
        }
      }
      if (summary.selected_lines > 0) {
        selected = true;
        if (o.quiet) break;  // grep -q exits at the first selected line
      }
    } catch (const SourceError& e) {
      trouble = true;
      if (!o.no_messages) {
        out.flush();
        message(e.what());
      }
    }
  }
  if (o.pattern_counts && !o.quiet) {
    const std::vector<std::uint64_t> counts = scanner.pattern_counts();
    for (std::size_t i = 0; i < given_patterns; ++i) {
      const std::uint32_t id = patterns.unique_of(i);
      out.write_number(id == PatternTable::kNoPattern ? pipeline.lines_seen() : counts[id]);
      out.put('\t');
      out.write(o.patterns[i]);
      out.end_line();
    }
    if (device_engine != nullptr && !device_engine->counts_exact()) {
      // The lines are complete, but the device failed in a way that lost or may have
      // doubled some counts (DeviceScanner::counts_exact): the counts are not to be used.
      trouble = true;
      out.flush();
      message("--pattern-counts: the counts are inexact: the OpenCL device failed mid-run (see above)");
    }
  }
  out.flush();
  if (o.stats) {
    // Start-up ends when the first chunk goes to the engine; the steady state is the rest.
    const Clock::time_point end = Clock::now();
    const Clock::time_point first = pipeline.first_submit() == Clock::time_point{} ? end : pipeline.first_submit();
    const double scan_s = ms_between(first, end) / 1000;
    std::fprintf(stderr,
                 "gpufilter-stats: {\"engine\":\"%s\",\"device\":%s,\"patterns\":%zu,\"unique_patterns\":%zu,"
                 "\"device_ms\":%.3f,\"build_ms\":%.3f,\"table_ms\":%.3f,\"matcher_ms\":%.3f,\"engine_ms\":%.3f,"
                 "\"startup_ms\":%.3f,\"bytes\":%llu,\"scan_s\":%.6f,\"steady_gbps\":%.3f,"
                 "\"total_s\":%.6f,\"chunk_bytes\":%zu,\"slots\":%zu,\"fill_s\":%.6f,\"wait_s\":%.6f,"
                 "\"deliver_s\":%.6f%s}\n",
                 std::string(scanner.engine()).c_str(),
                 json_string(device ? device->info().name : "host (Hyperscan)").c_str(), patterns.pattern_count(),
                 patterns.unique_count(), ms_between(device_start, build_start), ms_between(build_start, build_end),
                 ms_between(build_start, table_built), ms_between(table_built, matcher_built),
                 ms_between(matcher_built, build_end), ms_between(g_started, first),
                 static_cast<unsigned long long>(bytes_read), scan_s,
                 scan_s > 0 ? static_cast<double>(bytes_read) / scan_s / 1e9 : 0.0, ms_between(g_started, end) / 1000,
                 scanner.chunk_bytes(), scanner.slot_count(), pipeline.times().fill_s, pipeline.times().wait_s,
                 pipeline.times().deliver_s, stream_stats.c_str());
  }
  // A stop asked for by SIGINT or SIGTERM is a clean end: everything read was searched.
  const int status = trouble && !(o.quiet && selected) ? kTrouble : (selected || stop.requested()) ? 0 : 1;
  // Everything is written. Releasing the OpenCL context and its pinned memory one object
  // at a time takes NVIDIA's driver about 0.1 s; the process is ending, so leave it to the
  // operating system, as it would after a crash.
  if (device) std::_Exit(status);
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  g_started = Clock::now();
  ::signal(SIGPIPE, SIG_DFL);  // a closed pipe ends us at once and quietly, as it ends grep
  // A file size limit (ulimit -f) is a write error like a full disk, with a message and
  // exit 2, not a death by SIGXFSZ that leaves --state or --pcap-out unexplained.
  ::signal(SIGXFSZ, SIG_IGN);
  static std::optional<StopSignal> stop;
  try {
    stop.emplace();
  } catch (const Error& e) {
    message(e.what());
    return kTrouble;
  }
  install_stop_handlers(*stop);
  cli::Options options;
  try {
    options = cli::parse(argc, argv);
  } catch (const cli::UsageError& e) {
    if (*e.what() != '\0') message(e.what());
    if (e.show_usage() || *e.what() == '\0')
      std::fprintf(stderr, "%s\nTry '%s --help' for more information.\n", cli::kUsageLine, kProgram);
    return kTrouble;
  } catch (const Error& e) {
    message(e.what());
    return kTrouble;
  }
  try {
    if (options.help) {
      std::fputs(cli::help_text(), stdout);
      return 0;
    }
    if (options.version) {
      std::fputs(cli::version_text(), stdout);
      return 0;
    }
    if (options.list_devices) return print_devices();
    return search(options);
  } catch (const OutputError& e) {
    if (!e.closed()) message(e.what());
    return kTrouble;
  } catch (const KernelBuildError& e) {
    message(e.what());
    return kTrouble;
  } catch (const Error& e) {
    message(e.what());
    return kTrouble;
  } catch (const cl::Error& e) {
    message(std::string("OpenCL error in ") + e.what() + ": " + cl_error_name(e.err()));
    return kTrouble;
  } catch (const std::bad_alloc&) {
    message("memory exhausted");
    return kTrouble;
  } catch (const std::exception& e) {
    message(e.what());
    return kTrouble;
  }
}
