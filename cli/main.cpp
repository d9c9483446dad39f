// gpufilter: grep whose literal matching runs on the GPU. main() is the one place that maps
// errors to messages and grep's exit statuses (0 selected, 1 none, 2 trouble).
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <iostream>
#include <chrono>
#include <clocale>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>

#include "file_search.hpp"
#include "file_walk.hpp"
#include "gpufilter/cli/options.hpp"
#include "gpufilter/cli/progress.hpp"
#include "gpufilter/core/errors.hpp"
#include "gpufilter/engines/engine.hpp"
#include "gpufilter/grep/searcher.hpp"
#include "gpufilter/scan/file_scan.hpp"
#include "gpufilter/sinks/grep_printer.hpp"
#include "gpufilter/sinks/json.hpp"
#include "gpufilter/sinks/json_printer.hpp"
#include "gpufilter/sources/decompressing_source.hpp"
#include "gpufilter/sources/file_source.hpp"
#include "gpufilter/core/notices.hpp"
#include "gpufilter/core/stack_overflow.hpp"
#include "gpufilter/core/std_descriptors.hpp"
#include "gpufilter/core/stop_signal.hpp"
#include "packet_mode.hpp"
#include "patterns_mode.hpp"
#include "stop_signals.hpp"
#include "stream_mode.hpp"

namespace {

using namespace gpufilter;

using cli::kProgram;
constexpr int kTrouble = 2;

using Clock = std::chrono::steady_clock;
Clock::time_point g_started;  // main() entry, for --stats

StopSignal* g_stop = nullptr;  // SIGINT's and SIGTERM's (stop_signals.hpp)
StandardDescriptors g_standard;  // which of 0, 1, 2 the process was started without

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

// The progress line of a long scan while it is drawn: message() erases it first.
cli::ProgressLine* g_progress = nullptr;

void message(const std::string& text) {
  std::fflush(stdout);
  auto print = [&text] { std::fprintf(stderr, "%s: %s\n", kProgram, text.c_str()); };
  if (g_progress != nullptr) g_progress->erase_then(print);
  else print();
}

// The sum of the operands' sizes when all are regular files (none with -r): the progress
// line's "of N GB" and time left.
std::optional<std::uint64_t> total_size(const cli::Options& o) {
  // Decompressed inputs are bigger than their files: no total then.
  if (o.directories == cli::Directories::kRecurse || o.decompress) return std::nullopt;
  std::uint64_t total = 0;
  for (const std::string& file : o.files) {
    struct stat st {};
    if ((file == "-" ? ::fstat(STDIN_FILENO, &st) : ::stat(file.c_str(), &st)) != 0 || !S_ISREG(st.st_mode))
      return std::nullopt;
    total += static_cast<std::uint64_t>(st.st_size);
  }
  return total;
}

// A progress line (cli/progress.hpp) for a scan of files whose standard error is a
// terminal, when the output is not that terminal or holds no lines (-c, -l, -L, -q); and
// the writers of standard output and error, which erase it before they write.
class Progress {
 public:
  Progress(const cli::Options& o, InputKind input, const std::atomic<std::uint64_t>& scanned) {
    const bool no_lines = o.count || o.list != cli::ListMode::kNone || o.quiet;
    // Lines typed at the terminal are no long scan to report on.
    const bool typed = ::isatty(STDIN_FILENO) && std::find(o.files.begin(), o.files.end(), "-") != o.files.end();
    if (input != InputKind::kFiles || o.no_progress || typed || !cli::terminal_can_show_progress() ||
        (::isatty(STDOUT_FILENO) && !no_lines))
      return;
    line_.emplace(stderr_fd_, [&scanned] { return scanned.load(std::memory_order_relaxed); }, total_size(o));
    out_.emplace(stdout_fd_, *line_);
    err_.emplace(stderr_fd_, *line_);
    g_progress = &*line_;
  }
  ~Progress() { stop(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  Writer& out() { return out_ ? static_cast<Writer&>(*out_) : stdout_fd_; }
  Writer& err() { return err_ ? static_cast<Writer&>(*err_) : stderr_fd_; }
  // Erases the line for good (before --stats and the exit).
  void stop() noexcept {
    g_progress = nullptr;
    if (line_) line_->stop();
  }

 private:
  FdWriter stdout_fd_{STDOUT_FILENO, /*space_ahead=*/true};
  FdWriter stderr_fd_{STDERR_FILENO};
  std::optional<cli::ProgressLine> line_;
  std::optional<cli::ErasingWriter> out_;
  std::optional<cli::ErasingWriter> err_;
};

int print_devices() {
  for (const DeviceInfo& d : gpufilter::opencl_devices()) {
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

// Capture files are matched per packet on every core (-j) where the host engine scans:
// each thread with a twin of its scanner and a copy of `prototype`.
CaptureThreads capture_threads(const cli::Options& o, const Engine& engine, const RegexLines* prototype) {
  CaptureThreads threads;
  const std::uint64_t wanted = o.threads != 0 ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  threads.threads = static_cast<std::size_t>(std::min<std::uint64_t>(wanted, 256));
  threads.scanner = [&engine] { return engine.make_thread_scanner(); };
  threads.regexes = prototype;
  return threads;
}

// The patterns as the engines take them. No pattern at all (an empty -f file) matches
// nothing, so -v selects every line, -w and -x included: grep swaps it for the empty
// pattern with -v flipped. Returns the number of patterns given.
std::size_t prepare_patterns(cli::Options& o) {
  // --pattern-counts counts fixed strings: that is what its patterns are unless a matcher
  // is named (then regex_lines() refuses it).
  if (o.pattern_counts && !o.syntax_given) o.syntax = regex::Syntax::kFixed;
  // A capture's patterns are extended regexes unless a matcher is named, as ngrep reads
  // its match expression (`gpufilter --pcap http.cap 'GET|POST'` is ngrep's 'GET|POST').
  if (o.captures() && !o.syntax_given && !o.hex_patterns && !o.escapes) o.syntax = regex::Syntax::kExtended;
  if (o.hex_patterns || o.escapes) {
    if (o.syntax_given && o.syntax != regex::Syntax::kFixed)
      throw cli::UsageError("-X/--hex and --escapes give fixed strings: they cannot be combined with -E, -G or -P",
                            false);
    o.syntax = regex::Syntax::kFixed;
  }
  if (o.hex_patterns || o.escapes) o.patterns = cli::decode_patterns(o.patterns, o.hex_patterns, o.escapes);
  const std::size_t given = o.patterns.size();
  if (o.patterns.empty()) {
    o.syntax = regex::Syntax::kFixed;
    o.patterns.add("");
    o.invert = !o.invert;
    o.word = o.whole_line = false;
  }
  return given;
}

// grep reads nothing when no line can be selected: -m 0, or -v with only the empty
// pattern (which matches every line); -L still lists every file then, unless -q, which
// grep lets override -L before it makes this check (so no file is opened, none missing).
// --json reads on after -v with the empty pattern, as rg does, for its records (the
// summary; -c's begin and end); with -m 0 rg prints nothing either.
bool nothing_can_be_selected(const cli::Options& o) {
  const bool only_empty = std::all_of(o.patterns.patterns().begin(), o.patterns.patterns().end(),
                                      [](const std::string& p) { return p.empty(); });
  return ((o.max_count && *o.max_count == 0) || (only_empty && o.invert && !o.whole_line && !o.word && !o.json)) &&
         (o.list != cli::ListMode::kFilesWithoutMatch || o.quiet);
}

PrinterOptions printer_options(const cli::Options& o) {
  PrinterOptions printing;
  if (o.quiet) printing.mode = PrinterOptions::Mode::kQuiet;
  else if (o.list == cli::ListMode::kFilesWithMatches) printing.mode = PrinterOptions::Mode::kFilesWithMatches;
  else if (o.list == cli::ListMode::kFilesWithoutMatch) printing.mode = PrinterOptions::Mode::kFilesWithoutMatch;
  else if (o.count) printing.mode = PrinterOptions::Mode::kCount;
  printing.with_filename = o.with_filename.value_or(cli::FileWalk::names_files(o));
  printing.line_numbers = o.line_numbers;
  printing.byte_offset = o.byte_offset;
  printing.only_matching = o.only_matching;
  printing.invert = o.invert;
  printing.initial_tab = o.initial_tab;
  printing.null_after_name = o.null_after_name;
  printing.eol = o.eol();
  printing.group_separator = o.group_separator;
  if (color_enabled(o.color)) {
    const char* legacy = std::getenv("GREP_COLOR");
    printing.colors = Colors::from_environment(legacy, std::getenv("GREP_COLORS"));
    if (printing.colors->legacy_color_in_effect)
      message(std::string("warning: GREP_COLOR='") + legacy + "' is deprecated; use GREP_COLORS='mt=" + legacy + "'");
  }
  return printing;
}

// grep's rules for this run. What the printer needs (lines, spans, pattern ids, line
// numbers, binary lines) it says itself: the Searcher asks it (Sink::needs()).
SearchOptions search_options(const cli::Options& o, const PrinterOptions& printing, bool streams) {
  SearchOptions searching;
  searching.invert = o.invert;
  searching.word = o.word;
  searching.whole_line = o.whole_line;
  // grep.c: one distinct pattern (its duplicates are dropped) of -G or -E stays with the
  // regex matcher, and so does -F -w in a single-byte locale; in a UTF-8 one -F keeps its
  // fixed-string matcher. Distinct as given, before -i folds them.
  const bool one_distinct = cli::one_distinct_pattern(o);
  searching.regex_word = o.word && one_distinct && !(o.syntax == regex::Syntax::kFixed && cli::utf8_locale());
  // That matcher, asked for a line's -o/--color parts, does not apply -x (EGexecute with a
  // start pointer): with -v a context line that is not whole shows them.
  // So does it for any list whose case variants are scanned (-i in UTF-8, patterns_mode.cpp).
  searching.parts_without_whole_line =
      o.whole_line && !o.word && ((one_distinct && o.fixed_from_regex) || !o.variant_of.empty());
  if (o.max_count) searching.max_count = *o.max_count;
  // A negative -m with -v selects no line in grep (its count of lines left is below 0
  // from the start) but prints their context, except that -q exits 0 at the first line
  // that would be selected: grep checks done_on_match before the count.
  if (o.negative_max_count && o.invert && !o.quiet) searching.hide_selected = true;
  searching.before = o.before.value_or(o.context.value_or(0));
  searching.after = o.after.value_or(o.context.value_or(0));
  searching.group_separators = o.before || o.after || o.context;
  searching.quiet = o.quiet;  // the exit status alone, whichever printer (--json -q prints nothing either)
  searching.counting = printing.mode == PrinterOptions::Mode::kCount;
  searching.stop_on_first = printing.mode == PrinterOptions::Mode::kQuiet ||
                            printing.mode == PrinterOptions::Mode::kFilesWithMatches ||
                            printing.mode == PrinterOptions::Mode::kFilesWithoutMatch;
  searching.binary_files = o.binary_files;
  searching.utf8 = cli::utf8_locale();
  searching.only_matching = o.only_matching;
  searching.eol = o.eol();
  if (streams) searching.binary_files = BinaryFiles::kText;  // a stream has no end to report it at
  return searching;
}

// What the engine layer needs to know of this run.
EngineRequest engine_request(const cli::Options& o, const PatternSet& scanned, InputKind input) {
  EngineRequest request;
  request.choice = o.engine == cli::Engine::kHost     ? EngineChoice::kHost
                   : o.engine == cli::Engine::kOpenCL ? EngineChoice::kDevice
                   : o.engine == cli::Engine::kBoth   ? EngineChoice::kBoth
                                                      : EngineChoice::kAuto;
  request.patterns = PatternStats::of(scanned);
  request.compiled = &scanned;
  request.match_options = MatchOptions{o.ignore_case};
  request.input = input;
  // Streams and live captures have no size to weigh: only the pattern count decides.
  if (input == InputKind::kPackets && o.interface.empty()) request.input_bytes = regular_input_bytes(o.pcaps);
  else if (input == InputKind::kFiles && !o.files.empty()) request.input_bytes = regular_input_bytes(o.files);
  // (-r with no operand walks the working directory: a size unknown, as for a folder.)
  request.chunk_bytes = o.chunk_bytes;
  // Benchmarks: GPUFILTER_CO_LANES=LANES,SLOTS tunes co-scanning (engine.hpp's defaults).
  if (const char* lanes = std::getenv("GPUFILTER_CO_LANES"); lanes != nullptr)
    std::sscanf(lanes, "%zu,%zu", &request.lanes, &request.slots_per_lane);
  request.slots = o.slots;
  request.host_scan_below = o.host_scan_below;
  if (input == InputKind::kStreams) request.min_chunk_bytes = o.max_line_bytes + 1;
  request.device_faults = device_faults_from(std::getenv("GPUFILTER_INJECT_DEVICE_FAULT"));
  return request;
}

// --json names each unique pattern by the first given pattern that has its id (or whose
// case variant has it). Streams interleave and never end: no begin and end records
// (json_printer.hpp).
std::unique_ptr<JsonPrinter> json_printer(const cli::Options& o, std::size_t given_patterns,
                                          const PatternTable& patterns, bool regexes, bool streams, Output& out) {
  JsonPrinter::Options options;
  options.per_input = !streams;
  options.only_matching = o.only_matching;
  options.count = o.count && !o.quiet;
  options.eol = o.eol();
  if (regexes) {  // the ids are the regexes' own indices
    std::vector<JsonPrinter::Pattern> each;
    for (std::size_t i = 0; i < given_patterns; ++i) each.push_back({static_cast<std::uint32_t>(i), o.patterns[i]});
    return std::make_unique<JsonPrinter>(out, std::move(each), options);
  }
  std::vector<JsonPrinter::Pattern> given(patterns.unique_count());
  std::vector<bool> seen(patterns.unique_count(), false);
  // A case variant (-i in UTF-8, patterns_mode.cpp) is named by the pattern it stands for.
  for (std::size_t i = 0; i < given_patterns + o.variant_of.size(); ++i) {
    const std::uint32_t id = patterns.unique_of(i);
    if (id == PatternTable::kNoPattern || seen[id]) continue;
    seen[id] = true;
    const std::size_t named = i < given_patterns ? i : o.variant_of[i - given_patterns];
    given[id] = JsonPrinter::Pattern{static_cast<std::uint32_t>(named), o.patterns[named]};
  }
  return std::make_unique<JsonPrinter>(out, std::move(given), options);
}


struct Outcome {
  bool selected = false;
  bool trouble = false;
  std::uint64_t bytes = 0;
  std::string stats;  // more ,"name":value for --stats
};


// --pattern-counts: one line per given pattern. False when the counts are not to be used.
bool print_pattern_counts(const cli::Options& o, std::size_t given_patterns, Engine& engine,
                          std::uint64_t lines_seen, Output& out) {
  const PatternTable& patterns = engine.table();
  const std::vector<std::uint64_t> counts = engine.scanner().pattern_counts();
  // A pattern's case variants (-i in UTF-8) are found where it is not: their counts add.
  std::vector<std::uint64_t> of_variants(counts.size(), 0);
  for (std::size_t k = 0; k < o.variant_of.size(); ++k)
    of_variants[patterns.unique_of(o.variant_of[k])] += counts[patterns.unique_of(given_patterns + k)];
  for (std::size_t i = 0; i < given_patterns; ++i) {
    const std::uint32_t id = patterns.unique_of(i);
    out.write_number(id == PatternTable::kNoPattern ? lines_seen : counts[id] + of_variants[id]);
    out.put('\t');
    out.write(o.patterns[i]);
    out.end_line();
  }
  if (engine.counts_exact()) return true;
  // The lines are complete, but the device failed in a way that lost or may have doubled
  // some counts (DeviceScanner::counts_exact): the counts are not to be used.
  out.flush();
  message("--pattern-counts: the counts are inexact: the OpenCL device failed mid-run (see above)");
  return false;
}

// --stats: one JSON line on standard error. Start-up ends when the first chunk goes to
// the engine; the steady state is the rest.
void print_stats(Engine& engine, const FileScan& files, Clock::time_point build_start, Clock::time_point build_end,
                 const Outcome& outcome) {
  const Engine::Timings& t = engine.timings();
  const Scanner& scanner = engine.scanner();
  const PatternTable& patterns = engine.table();
  const Clock::time_point end = Clock::now();
  const Clock::time_point first = files.first_submit() == Clock::time_point{} ? end : files.first_submit();
  const double scan_s = ms_between(first, end) / 1000;
  std::fprintf(stderr,
               "gpufilter-stats: {\"engine\":\"%s\",\"engine_reason\":%s,\"device\":%s,\"patterns\":%zu,"
               "\"unique_patterns\":%zu,\"device_ms\":%.3f,\"build_ms\":%.3f,\"table_ms\":%.3f,\"kernel_ms\":%.3f,\"matcher_ms\":%.3f,"
               "\"engine_ms\":%.3f,\"startup_ms\":%.3f,\"bytes\":%llu,\"scan_s\":%.6f,\"steady_gbps\":%.3f,"
               "\"total_s\":%.6f,\"chunk_bytes\":%zu,\"slots\":%zu,\"fill_s\":%.6f,\"wait_s\":%.6f,"
               "\"deliver_s\":%.6f,\"inputs_mapped\":%llu%s}\n",
               std::string(scanner.engine()).c_str(), json_string(engine.reason()).c_str(),
               json_string(engine.device_name()).c_str(), patterns.pattern_count(), patterns.unique_count(),
               t.device_ms, ms_between(build_start, build_end), t.table_ms, t.kernel_ms, t.program_ms, t.scanner_ms,
               ms_between(g_started, first), static_cast<unsigned long long>(outcome.bytes), scan_s,
               scan_s > 0 ? static_cast<double>(outcome.bytes) / scan_s / 1e9 : 0.0,
               ms_between(g_started, end) / 1000, scanner.chunk_bytes(), scanner.slot_count(), files.times().fill_s,
               files.times().wait_s, files.times().deliver_s, static_cast<unsigned long long>(files.inputs_mapped()),
               (engine.stats_json() + outcome.stats).c_str());
}

// A device that fails mid-run: the scanner redoes the chunks it had on the host and goes
// on there, so the output stays complete and the exit status grep's; say so once.
void warn_of_device_faults(Engine& engine, const std::string& scanning_now, bool per_file) {
  engine.on_device_fault([&scanning_now, per_file](const DeviceError& e, const Chunk& chunk) {
    std::string where = scanning_now;
    if (per_file && chunk.size > 0) where += " at byte " + std::to_string(chunk.offset);
    message("warning: OpenCL device failed (" + e.call() + ": CL error " + std::to_string(e.code()) + ", " +
            cl_error_name(e.code()) + ") while scanning " + where + "; continuing on the CPU");
  });
}

// Fixed strings (nullptr) or regexes for this run (patterns_mode.hpp decides).
std::unique_ptr<RegexLines> regex_lines(cli::Options& o, std::size_t given_patterns) {
  if (given_patterns == 0) return nullptr;
  auto regexes = cli::regex_lines_for(o, cli::utf8_locale(), [](const std::string& w) { message(w); });
  if (!regexes) {
    // A fixed string holding a NUL would be found across the end of a -z record.
    const auto& fixed = o.patterns.patterns();
    if (o.null_data && std::any_of(fixed.begin(), fixed.end(), [](const std::string& p) {
          return p.find('\0') != std::string::npos;
        }))
      throw cli::UsageError("with -z (--null-data), a pattern holding a NUL byte is not supported", false);
    return nullptr;
  }
  if (o.pattern_counts && o.syntax == regex::Syntax::kFixed)
    throw cli::UsageError("--pattern-counts cannot count these fixed strings in a UTF-8 locale, where grep matches "
                          "them by its regex matcher (-w with the empty pattern or one not valid UTF-8; -i folding a "
                          "letter beyond ASCII with -w or -z); with LC_ALL=C it counts their bytes",
                          false);
  if (o.pattern_counts)
    throw cli::UsageError("--pattern-counts counts fixed strings: give -F, not regular expressions", false);
  regexes->count_full_scans(o.stats);  // a pass over every piece decided at once, for --stats alone
  return regexes;
}

// `farm`: the counts of the farm's threads, each with regexes of its own.
std::string regex_stats(const RegexLines& r, const RegexCounts& farm) {
  const RegexCounts c = r.counts();
  return ",\"regex_candidates\":" + std::to_string(c.candidates + farm.candidates) +
         ",\"regex_confirmed\":" + std::to_string(c.confirmed + farm.confirmed) +
         ",\"regex_full_scan_lines\":" + std::to_string(c.full_scan + farm.full_scan) +
         ",\"regex_without_factor\":" + std::to_string(r.unfiltered_count());
}


// How files and standard input are read and cut into chunks.
FileScanConfig file_scan_config(const cli::Options& o, const PatternTable& patterns, WorkerPool& workers,
                                std::atomic<std::uint64_t>& bytes_done) {
  FileScanConfig piping;
  piping.batch_timeout = std::chrono::milliseconds(o.batch_timeout_ms);
  // With -z a NUL ends a record: it is no sign of a binary file (grep's buf_has_nulls).
  piping.detect_binary = o.binary_files != BinaryFiles::kText && !o.null_data;
  piping.eol = o.eol();
  piping.scan_to_end = o.pattern_counts;
  piping.count_lines = o.pattern_counts && patterns.has_empty_pattern();
  piping.workers = &workers;
  piping.progress = &bytes_done;
  // Tests and benchmarks: GPUFILTER_MAP_FILES=1 or 0 maps regular files always or never
  // (unset: as mapping_beats_reading() measures each file).
  if (const char* map = std::getenv("GPUFILTER_MAP_FILES"); map != nullptr && (*map == '0' || *map == '1'))
    piping.mapping = *map == '1' ? FileMapping::kAlways : FileMapping::kNever;
  return piping;
}

int search(cli::Options& o) {
  // The stop handlers are installed in main(), before anything slow: a signal during
  // start-up is a stop too.
  const std::size_t given_patterns = prepare_patterns(o);
  if (nothing_can_be_selected(o)) return 1;
  const bool streams = o.follow || !o.listen.empty() || !o.kafka.empty();
  const bool captures = o.captures();
  // With -r and no operand, the working directory (FileWalk); else standard input.
  if (o.files.empty() && !streams && !captures && o.directories != cli::Directories::kRecurse)
    o.files.emplace_back("-");
  const InputKind input = streams ? InputKind::kStreams : captures ? InputKind::kPackets : InputKind::kFiles;

  std::string spec = o.device;
  if (const char* env = std::getenv("GPUFILTER_DEVICE"); spec.empty() && env != nullptr) spec = env;
  Engines engines(spec);
  const Clock::time_point build_start = Clock::now();
  const std::size_t at_once = cli::files_at_once(o);
  std::unique_ptr<RegexLines> regexes = regex_lines(o, given_patterns);
  const PatternSet& scanned = regexes ? regexes->factors() : o.patterns;
  const EnginePlan plan = engines.plan(engine_request(o, scanned, input));
  std::unique_ptr<Engine> engine = engines.compile(plan, scanned, MatchOptions{o.ignore_case});
  const PatternTable& patterns = engine->table();
  if (regexes) regexes->bind(patterns);

  const PrinterOptions printing = printer_options(o);
  SearchOptions searching = search_options(o, printing, streams);
  searching.regex = regexes.get();
  // Large reads of regular files, the NUL search and regex confirmation are split over
  // these threads.
  WorkerPool workers(WorkerPool::default_threads());
  if (!streams) searching.workers = &workers;
  // Write-behind: the kernel's copy of the output overlaps the search (dense output).
  std::atomic<std::uint64_t> bytes_done{0};
  Progress progress(o, input, bytes_done);
  Output out(progress.out(), o.line_buffered, 1 << 20, /*write_behind=*/true);
  Output err(progress.err(), true);
  GrepPrinter grep_printer(out, err, printing);
  std::unique_ptr<JsonPrinter> json;
  const std::size_t json_patterns = regexes ? o.patterns.size() : given_patterns;
  if (o.json) json = json_printer(o, json_patterns, patterns, regexes != nullptr, streams, out);
  Sink& printer = json ? static_cast<Sink&>(*json) : grep_printer;
  Searcher searcher(patterns, searching, printer);
  // Streams and captures cut lines of their own from pieces of many inputs.
  if (searcher.one_occurrence_per_line() && !o.pattern_counts && !streams && !captures)
    engine->locate_one_per_line(o.eol());
  Scanner& scanner =
      engine->make_scanner(searcher.needs_locations() || o.pattern_counts || streams || captures, o.pattern_counts);
  std::string scanning_now;  // the input being searched, for the warning of a device fault
  warn_of_device_faults(*engine, scanning_now, !streams && !captures);
  // Tests and benchmarks: a co-scanning device joins before the first chunk, not beside.
  if (const char* wait = std::getenv("GPUFILTER_WAIT_FOR_DEVICE"); wait != nullptr && *wait == '1')
    engine->wait_for_device();
  const Clock::time_point build_end = Clock::now();

  const FileScanConfig piping = file_scan_config(o, patterns, workers, bytes_done);
  FileScan files(scanner, searcher, piping);
  StopSignal& stop = *g_stop;
  cli::stop_gracefully_from_now();
  StderrNotices notices(o.no_messages);
  Outcome outcome;
  RegexCounts farm_counts;
  if (streams) {
    scanning_now = "the input streams";
    const StreamResult result = run_streams(o, scanner, searching, printer, stop, notices);
    outcome = Outcome{result.selected, false, result.bytes, result.stats};
  } else if (captures) {
    scanning_now = "the captured packets";
    std::unique_ptr<RegexLines> prototype = regexes ? regexes->copy() : nullptr;  // before any search
    const CaptureThreads threads = capture_threads(o, *engine, prototype.get());
    const CaptureResult result = run_captures(o, scanner, o.patterns, regexes.get(), out, printing.colors,
                                              engine->kind() == EngineKind::kHost ? &threads : nullptr, stop, notices);
    outcome = Outcome{result.selected > 0, result.trouble, result.bytes,
                      ",\"packets\":" + std::to_string(result.packets) +
                          (result.stream_stats.empty() ? "" : ",\"stream_threads\":{" + result.stream_stats + "}")};
  } else {
    // Many files at once where the host engine scans: its scanner has twins for the
    // farm's threads.
    std::unique_ptr<cli::FarmParts> parts;
    std::unique_ptr<RegexLines> prototype;  // copied by the farm's threads, made before any search
    if (at_once > 1 && engine->kind() == EngineKind::kHost) {
      if (regexes) prototype = regexes->copy();
      FileScanConfig lane_piping = piping;
      lane_piping.workers = nullptr;  // the other cores search other files
      auto lane_printer = [&](Output& lane_out, Output& lane_err) -> std::unique_ptr<Sink> {
        if (!json) return std::make_unique<GrepPrinter>(lane_out, lane_err, printing);
        return json_printer(o, json_patterns, patterns, regexes != nullptr, false, lane_out);
      };
      parts.reset(new cli::FarmParts{*engine, prototype.get(), searching, lane_piping, lane_printer});
    }
    cli::FileSearch fs{files, searcher, printer, workers, out, err, g_standard.stdin_closed, message};
    const cli::FilesOutcome found = cli::search_files(o, fs, parts.get(), at_once, stop, scanning_now);
    outcome = Outcome{found.selected, found.trouble, found.bytes, {}};
    if (parts) {
      farm_counts = parts->regex_counts;
      if (json) json->add_totals(parts->json_totals);
    }
  }
  if (regexes) outcome.stats += regex_stats(*regexes, farm_counts);
  // rg's last record (captures have their own records; -q prints nothing).
  if (json && !captures && !o.quiet) json->summary(Clock::now() - g_started);
  if (o.pattern_counts && !o.quiet && !print_pattern_counts(o, given_patterns, *engine, files.lines_seen(), out))
    outcome.trouble = true;
  out.flush();
  progress.stop();
  if (o.stats) print_stats(*engine, files, build_start, build_end, outcome);
  // A stop asked for by SIGINT or SIGTERM is a clean end: everything read was searched.
  const int status =
      outcome.trouble && !(o.quiet && outcome.selected) ? kTrouble : (outcome.selected || stop.requested()) ? 0 : 1;
  // Everything is written. Releasing the OpenCL context and its pinned memory one object
  // at a time takes NVIDIA's driver about 0.1 s; the process is ending, so leave it to the
  // operating system, as it would after a crash.
  if (engines.device_opened()) std::_Exit(status);
  return status;
}


// The kernel grows a process's descriptor table when a descriptor past its end is opened,
// and in a process with threads it first waits for an RCU grace period: 10-30 ms each
// on the 16-core machine, where the growths at 64 and 128 open files (the walk of -r
// holds up to 192) made 500 small files take 0.05-0.09 s against grep's 0.01. Grown once
// here, before any thread, it costs nothing.
void reserve_descriptors() {
  constexpr rlim_t kReserve = 512;
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur < 2) return;
  const int highest = static_cast<int>(std::min(kReserve, limit.rlim_cur) - 1);
  const int fd = ::fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, highest);
  if (fd >= 0) ::close(fd);
}

}  // namespace

int main(int argc, char** argv) {
  g_started = Clock::now();
  // grep's locale: a UTF-8 character set makes -i, -w, '.' and brackets work on
  // characters. Numbers (--stats) stay in the C form.
  std::setlocale(LC_ALL, "");
  std::setlocale(LC_NUMERIC, "C");
  // Before any descriptor is created: a closed standard input must not become the stop
  // signal's pipe (read forever), nor a closed standard output another pipe. Reading or
  // writing a closed one then fails with EBADF, reported as grep reports it.
  g_standard = reopen_closed_standard_descriptors();
  reserve_descriptors();
  ::signal(SIGPIPE, SIG_DFL);  // a closed pipe ends us at once and quietly, as it ends grep
  report_stack_overflow(kProgram);  // a back-reference glibc recurses on without end, as grep
  // A file size limit (ulimit -f) is a write error like a full disk, with a message and
  // exit 2, not a death by SIGXFSZ that leaves --state or --pcap-out unexplained.
  ::signal(SIGXFSZ, SIG_IGN);
  // Never destroyed: the signals' thread may still request a stop while the process exits.
  try {
    g_stop = new StopSignal;
  } catch (const Error& e) {
    message(e.what());
    return kTrouble;
  }
  cli::take_stop_signals_in_one_thread(*g_stop);
  cli::Options options;
  try {
    options = cli::parse(argc, argv);
    if (options.unix_byte_offsets) message("warning: --unix-byte-offsets (-u) is obsolete");
    // Packets are bytes, as tshark and ngrep read them: '.', brackets, -i and -w match
    // bytes whatever the locale, so that "\xff." or "[^a]" matches any payload byte.
    if (options.captures()) std::setlocale(LC_CTYPE, "C");
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
    if (options.version) {  // grep: -V before --help
      std::fputs(cli::version_text(), stdout);
      return 0;
    }
    if (options.help) {
      std::fputs(cli::help_text(), stdout);
      return 0;
    }
    if (options.list_devices) return print_devices();
    return search(options);
  } catch (const OutputError& e) {
    if (!e.closed()) message(e.what());
    return kTrouble;
  } catch (const regex::RegexError& e) {
    for (const std::string& m : e.messages()) message(m);
    return kTrouble;
  } catch (const KernelBuildError& e) {
    message(e.what());
    return kTrouble;
  } catch (const Error& e) {
    message(e.what());
    return kTrouble;
  } catch (const std::bad_alloc&) {
    message("memory exhausted");
    return kTrouble;
  } catch (const std::exception& e) {
    message(e.what());
    return kTrouble;
  }
}
