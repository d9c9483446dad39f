#include "file_search.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <deque>
#include <optional>
#include <system_error>
#include <thread>
#include <utility>

#include "file_walk.hpp"
#include "gpufilter/core/errors.hpp"
#include "gpufilter/sources/decompressing_source.hpp"
#include "gpufilter/sources/file_source.hpp"

namespace gpufilter::cli {

// Standard input's name: --label, else grep's "(standard input)", or rg's "<stdin>" in
// rg's format (--json), for the tools that read rg's output.
std::string standard_input_name(const Options& o) {
  return o.label.value_or(o.json ? "<stdin>" : "(standard input)");
}

// How many files are searched at once (FileFarm), as far as the options say; 0 or 1: one
// after another. It pays with several inputs, and stays exact where the lines are grep's:
// not with --pattern-counts (one scanner counts), nor --line-buffered (each line out as it
// is found). Nor on one core, unless -j says so.
std::size_t files_at_once(const Options& o) {
  const bool several = o.directories == Directories::kRecurse || o.files.size() > 1;
  if (!several || o.pattern_counts || o.line_buffered || o.follow || !o.listen.empty() || o.captures()) return 0;
  const std::uint64_t threads = o.threads != 0 ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  return static_cast<std::size_t>(std::min<std::uint64_t>(threads, 256));
}

namespace {

// One input made ready for its turn: the Source to search (with --decompress, perhaps a
// DecompressingSource over the file), or the error that opening it met, reported in turn.
struct OpenedInput {
  std::unique_ptr<Source> source;
  FileSource* file = nullptr;  // the descriptor underneath, owned by `source`
  bool standard_input = false;
  std::string error;
  bool interrupted = false;  // the open (of a FIFO waiting for a writer) met a stop signal
};

// A walk entry waiting for its turn; with --decompress, a regular file is opened (and
// starts decoding) as soon as the walk finds it; with a farm, a file searched on a farm
// thread, whose output waits in `held`.
struct PendingEntry {
  WalkEntry entry;
  std::optional<OpenedInput> opened;
  std::shared_ptr<HeldOutput> held;
  std::shared_ptr<WalkEntry> farmed;  // `entry`, shared with the farm
};

// Whether an entry is standard input: "-" given as an operand. A file named "-" met in a
// directory (-r with no operand names it so, without its "./") is a file.
bool reads_standard_input(const WalkEntry& e) { return e.name == "-" && e.command_line; }

// Standard output when it is a regular file (asked once a run, not once a file), or none.
const struct stat* regular_standard_output() {
  static const std::optional<struct stat> out = [] {
    struct stat st {};
    return ::fstat(STDOUT_FILENO, &st) == 0 && S_ISREG(st.st_mode) ? std::optional(st) : std::nullopt;
  }();
  return out ? &*out : nullptr;
}

// open(2) of a path longer than the kernel takes at once (ENAMETOOLONG past PATH_MAX): its
// folders reached a few thousand bytes at a time, each open relative to the one before, as
// grep's fts reaches the files of a deep tree under -r. (grep opens a command-line operand
// by its path, which fails there as it does here.)
UniqueFd open_in_steps(const std::string& path, int flags) {
  constexpr std::size_t kStep = 3072;  // bytes of the path resolved by one open
  UniqueFd dir;                        // none: the working directory
  std::size_t at = 0;
  if (path.front() == '/') {
    dir = UniqueFd(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!dir) return dir;
  }
  auto base = [&dir] { return dir ? dir.get() : AT_FDCWD; };
  while (path.size() - at > kStep) {
    const std::size_t cut = path.rfind('/', at + kStep);
    if (cut == std::string::npos || cut <= at) break;  // one name too long: the open below says so
    UniqueFd next(::openat(base(), path.substr(at, cut - at).c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!next) return next;
    dir = std::move(next);
    at = cut + 1;
  }
  return UniqueFd(::openat(base(), path.c_str() + at, flags));
}

// `file`: the file, already opened by the walk (FileWalk::open_files), or none.
// `workers`: what splits its large reads, if anything.
OpenedInput open_input(const Options& o, const WalkEntry& entry, bool writes_lines, bool stdin_closed,
                       StopSignal& stop, WorkerPool* workers, UniqueFd file_fd = {},
                       const struct stat* file_stat = nullptr) {
  OpenedInput in;
  const std::string& name = entry.name;
  const bool standard_input = reads_standard_input(entry);
  try {
    // grep cannot even fstat a closed standard input: it reports it and prints no count.
    if (standard_input && stdin_closed) throw SourceError(standard_input_name(o), EBADF);
    if (file_fd.get() < 0 && !standard_input && !entry.command_line && name.size() >= PATH_MAX) {
      file_fd = open_in_steps(name, O_RDONLY | O_CLOEXEC | O_NOCTTY);  // found deep in a walk
      if (file_fd.get() < 0) throw SourceError(name, errno);
    }
    std::unique_ptr<FileSource> file = file_fd.get() >= 0 ? FileSource::adopt(file_fd.release(), name, file_stat)
                                       : standard_input   ? FileSource::standard_input(standard_input_name(o))
                                                          : FileSource::open(name);
    if (const struct stat* out = regular_standard_output(); writes_lines && out && file->is_same_file_as(*out)) {
      // `gpufilter x log >> log` would read its own output and grow the file forever.
      throw SourceError(file->name(), 0, file->name() + ": input file is also the output");
    }
    file->set_stop(&stop);
    file->set_workers(workers);
    in.file = file.get();
    in.standard_input = standard_input;
    // The files waiting their turn (one per core, search_files) decode this far ahead: whole
    // when they are small, so that many rotated logs decode in parallel; 128 MiB in all.
    static const std::size_t decode_ahead =
        std::clamp<std::size_t>((std::size_t{128} << 20) / std::max(1u, std::thread::hardware_concurrency()),
                                DecompressingSource::kDefaultAhead, std::size_t{16} << 20);
    in.source = o.decompress ? open_decompressing(std::move(file), &stop, decode_ahead) : std::move(file);
  } catch (const SourceError& e) {
    in.source.reset();
    in.file = nullptr;
    // Only SIGINT and SIGTERM are caught: a stop, not the file's fault, so nothing to report.
    if (e.error_number() == EINTR) in.interrupted = true;
    else in.error = e.what();
  }
  return in;
}

// Passes everything to a farm thread's printer except the separator before an input's
// first group: whether that one is printed depends on the files before it, which are
// searched elsewhere, so its place is marked for the farm (FileFarm::Context::separator).
class FirstSeparatorHeld final : public Sink {
 public:
  explicit FirstSeparatorHeld(Sink& printer) : printer_(printer) {}
  void hold_first_separator(std::function<void()> mark) { mark_ = std::move(mark); }

  SinkNeeds needs() const override { return printer_.needs(); }
  void begin(const InputInfo& input) override {
    first_ = true;
    printer_.begin(input);
  }
  Flow matched(const LineMatch& line) override {
    first_ = false;
    return printer_.matched(line);
  }
  bool verbatim() const override { return printer_.verbatim(); }
  Flow matched_lines(std::string_view lines, std::uint64_t count) override {
    first_ = false;
    return printer_.matched_lines(lines, count);
  }
  void context(const LineMatch& line) override {
    first_ = false;
    printer_.context(line);
  }
  void context_break() override {
    if (std::exchange(first_, false)) mark_();
    else printer_.context_break();
  }
  void finish(const InputSummary& summary) override { printer_.finish(summary); }
  void flush() override { printer_.flush(); }

 private:
  Sink& printer_;
  std::function<void()> mark_;
  bool first_ = true;
};


// One farm thread's pipeline: a scanner of the engine's for this thread, its own copy of
// the regexes, a printer into the thread's held output, a searcher and a FileScan.
struct FarmLane final : FileFarm::Lane {
  FarmLane(FarmParts& p, Output& out, Output& err)
      : parts(p),
        scanner(thread_scanner(p.engine)),
        regexes(lane_regexes(p)),
        printer(p.printer(out, err)),
        sink(*printer),
        searcher(p.engine.table(), lane_options(p.searching, regexes.get()), sink),
        files(*scanner, searcher, p.piping) {}
  ~FarmLane() override {
    std::lock_guard lock(parts.mutex);
    if (const auto* json = dynamic_cast<const JsonPrinter*>(printer.get())) parts.json_totals += json->totals();
    if (!regexes) return;
    const RegexCounts c = regexes->counts();
    parts.regex_counts.candidates += c.candidates;
    parts.regex_counts.confirmed += c.confirmed;
    parts.regex_counts.full_scan += c.full_scan;
  }

  static std::unique_ptr<Scanner> thread_scanner(const gpufilter::Engine& engine) {
    std::unique_ptr<Scanner> scanner = engine.make_thread_scanner();
    if (!scanner) throw Error("the engine has no scanner for another thread");
    return scanner;
  }
  static std::unique_ptr<RegexLines> lane_regexes(const FarmParts& p) {
    return p.regexes != nullptr ? p.regexes->copy() : nullptr;
  }
  static SearchOptions lane_options(SearchOptions searching, RegexLines* regexes) {
    searching.regex = regexes;
    searching.workers = nullptr;  // the other cores search other files
    return searching;
  }

  FarmParts& parts;
  std::unique_ptr<Scanner> scanner;
  std::unique_ptr<RegexLines> regexes;
  std::unique_ptr<Sink> printer;
  FirstSeparatorHeld sink;
  Searcher searcher;
  FileScan files;
};


// Regular files up to this size are searched on a farm thread, one core each; larger ones
// in their turn on the main pipeline, which splits them over every core.
constexpr std::uint64_t kFarmFileBytes = 8u << 20;

// Whether a walk entry goes to the farm: a regular file. Its farm thread opens it and
// gives it back (FarmOutcome::deferred) when it is larger than the farm takes; so the
// walk and this thread pay nothing per file but the hand-over. An operand is stat()ed
// here, by name: opening a FIFO would wait for a writer.
bool goes_to_farm(const WalkEntry& e) {
  if (e.kind != WalkEntry::Kind::kSearch || reads_standard_input(e)) return false;
  if (e.regular) return true;
  struct stat st {};
  return (e.file.get() >= 0 ? ::fstat(e.file.get(), &st) : ::stat(e.name.c_str(), &st)) == 0 && S_ISREG(st.st_mode);
}

// A regular file the farm leaves to the main pipeline: larger than kFarmFileBytes, unless
// it is compressed (it decodes at one core's speed wherever it is searched). `st`: what
// fstat(2) said of `fd`.
bool too_large_for_farm(const Options& o, int fd, const struct stat& st) {
  if (static_cast<std::uint64_t>(st.st_size) <= kFarmFileBytes) return false;
  if (!o.decompress) return true;
  char head[8];
  const ssize_t n = ::pread(fd, head, sizeof head, 0);
  return n <= 0 || compression_of(std::string_view(head, static_cast<std::size_t>(n))) == Compression::kNone;
}

// A file's search on a farm thread, as search_files' search_one does it on the main one.
FileFarm::Task farm_task(const Options& o, std::shared_ptr<WalkEntry> entry, bool writes_lines,
                              StopSignal& stop) {
  return [&o, entry = std::move(entry), writes_lines, &stop](FileFarm::Context& c) {
    auto& lane = static_cast<FarmLane&>(c.lane);
    FarmOutcome outcome;
    auto report = [&](const std::string& what) {
      outcome.trouble = true;
      if (o.no_messages) return;
      c.out.flush();
      c.err.write(std::string(kProgram) + ": " + what + "\n");
      c.err.flush();
    };
    if (entry->file.get() < 0) {
      // The name in its directory, where the walk kept that open: one lookup, not the path's.
      constexpr int kFlags = O_RDONLY | O_CLOEXEC | O_NOCTTY;
      const int fd = entry->directory ? ::openat(entry->directory->get(), entry->base.c_str(), kFlags)
                                      : ::open(entry->name.c_str(), kFlags);
      entry->directory.reset();
      if (fd >= 0) entry->file = UniqueFd(fd);  // else open_input reports why
    }
    struct stat st {};
    const bool stated = entry->file.get() >= 0 && ::fstat(entry->file.get(), &st) == 0;
    if (stated && too_large_for_farm(o, entry->file.get(), st)) {
      outcome.deferred = true;  // the entry keeps the descriptor for its turn
      return outcome;
    }
    OpenedInput in =
        open_input(o, *entry, writes_lines, false, stop, nullptr, std::move(entry->file), stated ? &st : nullptr);
    if (in.interrupted) return outcome;
    if (!in.error.empty()) {
      report(in.error);
      return outcome;
    }
    try {
      // Whether a separator goes before this file's first group is the farm's to say.
      lane.sink.hold_first_separator(c.separator);
      lane.searcher.set_output_before(true);
      const std::uint64_t before = lane.files.bytes_scanned();
      const InputSummary summary = lane.files.run(*in.source);
      outcome.bytes = lane.files.bytes_scanned() - before;
      outcome.output = lane.searcher.output_in_input();
      outcome.selected = summary.selected_lines > 0;
      if (!summary.read_error.empty()) report(summary.read_error);
    } catch (const SourceError& e) {
      report(e.what());
    } catch (const MatchError& e) {
      outcome.fatal = outcome.trouble = true;
      c.out.flush();
      c.err.write(std::string(kProgram) + ": " + in.source->name() + ": " + e.what() + "\n");
      c.err.flush();
    }
    return outcome;
  };
}

// Hands the operands and, under -r, what the walk finds (the directories read on a thread
// of their own, ahead of the search) to `on_entry` in grep's order, until it says stop.
// `open_files`: the walk opens the files it finds (else their search does).
void walk_files(const Options& o, bool open_files, const std::function<bool(WalkEntry&&)>& on_entry) {
  if (o.directories != Directories::kRecurse) return FileWalk(o).walk(o.files, on_entry);
  WalkAhead walker(o, o.files, open_files);
  WalkEntry entry;
  while (walker.next(entry) && on_entry(std::move(entry))) {
  }
}

// grep's rule: only a search that may write lines (not -q, -l, -L, -c, nor -m 1, which
// stops at the first) refuses an input that is its regular-file standard output.
bool writes_lines(const Options& o) {
  return !o.quiet && o.list == ListMode::kNone && !o.count && !(o.max_count && *o.max_count <= 1);
}

// Without a farm, --decompress opens this many regular files ahead (one per core), each
// decoding on its own thread into a few bounded buffers.
std::size_t decode_ahead_files() { return std::max(1u, std::thread::hardware_concurrency()); }

// Files waiting: with a farm, four per thread and at least sixteen, searched ahead (the
// writer wakes once for about half of them: file_farm.hpp; each holds up to kHeldBytes);
// without, --decompress's next regular files, one per core, decoding ahead; else none
// (opened in turn, as grep).
std::size_t files_ahead(const Options& o, const FileFarm* farm) {
  if (farm != nullptr) return std::max<std::size_t>(4 * farm->threads(), 16);
  return o.decompress ? decode_ahead_files() : 0;
}

// A file the farm searched: its held output, written in its turn, with grep's "--" before
// its first group when some file before it output a line; that file's lines count for
// the files after it.
FarmOutcome write_farm_file(FileSearch& fs, HeldOutput& held) {
  const FarmOutcome r = fs.farm->write_out(held, fs.out, fs.err, [&] {
    if (fs.searcher.output_before()) fs.printer.context_break();
  });
  if (r.output) fs.searcher.set_output_before(true);
  return r;
}

// The farm in `farm` when there are `parts` to search with and threads to be had; else
// null (one file after another).
FileFarm* start_farm(std::optional<FileFarm>& farm, FarmParts* parts, std::size_t at_once, StopSignal& stop) {
  if (parts == nullptr) return nullptr;
  try {
    return &farm.emplace(
        at_once, [parts](Output& out, Output& err) { return std::make_unique<FarmLane>(*parts, out, err); }, &stop);
  } catch (const std::system_error&) {
    return nullptr;
  }
}

}  // namespace

// Every FILE operand (or standard input) in turn through one FileScan; with a farm, the
// small ones several at once, their output written in turn. `parts`: with `at_once`
// threads, what the farm's threads search with; null: no farm.
FilesOutcome search_files(const Options& o, FileSearch& fs, FarmParts* parts, std::size_t at_once, StopSignal& stop,
                          std::string& scanning_now) {
  // Gone, its threads joined (their counts added to `parts`), when this returns.
  std::optional<FileFarm> farm;
  fs.farm = start_farm(farm, parts, at_once, stop);
  FilesOutcome outcome;
  std::uint64_t farm_bytes = 0;
  const bool writes = writes_lines(o);
  // A file that could not be read: grep's message (unless -s), and exit status 2.
  auto report = [&](const std::string& what) {
    outcome.trouble = true;
    if (!o.no_messages) {
      fs.out.flush();
      fs.message(what);
    }
  };
  auto search_one = [&](OpenedInput in) {
    try {
      if (in.interrupted) return true;  // the stop ends the walk
      if (!in.error.empty()) {
        report(in.error);
        return true;
      }
      Source& source = *in.source;
      scanning_now = source.name();
      const InputSummary summary = fs.files.run(source);
      // What follows in the shell reads standard input on from where grep would leave it
      // ((grep -m1 x; cat) < file), not from where the read-ahead stopped. A decoded
      // input's offsets are not the file's: it is left where the decoder stopped.
      if (in.standard_input && static_cast<Source*>(in.file) == in.source.get()) {
        if (const int error = in.file->leave_at(summary.after_last_selected); error != 0)
          throw SourceError(source.name(), error);
      }
      if (!summary.read_error.empty()) report(summary.read_error);
      if (summary.selected_lines > 0) {
        outcome.selected = true;
        if (o.quiet) return false;  // grep -q exits at the first selected line
      }
    } catch (const SourceError& e) {
      report(e.what());
    } catch (const MatchError& e) {
      // grep dies here, even under -s, after the lines before this one.
      outcome.trouble = true;
      fs.out.flush();
      fs.message(in.source->name() + ": " + e.what());
      return false;
    }
    return true;
  };
  // A file searched on the farm: its output, in its turn; or one it gave back.
  auto write_held = [&](PendingEntry& p) {
    const FarmOutcome r = write_farm_file(fs, *p.held);
    if (r.deferred)
      return search_one(open_input(o, *p.farmed, writes, fs.stdin_closed, stop, &fs.workers, std::move(p.farmed->file)));
    farm_bytes += r.bytes;
    if (r.trouble) outcome.trouble = true;
    if (r.fatal) return false;
    if (r.selected) {
      outcome.selected = true;
      if (o.quiet) return false;
    }
    return true;
  };
  auto visit = [&](PendingEntry& p) {
    if (p.held) return write_held(p);
    switch (p.entry.kind) {
      case WalkEntry::Kind::kSearch:
        if (!p.opened) p.opened =
            open_input(o, p.entry, writes, fs.stdin_closed, stop, &fs.workers, std::move(p.entry.file));
        return search_one(std::move(*p.opened));
      case WalkEntry::Kind::kError: report(SourceError(p.entry.name, p.entry.error).what()); return true;
      case WalkEntry::Kind::kLoop:
        if (!o.no_messages) {
          fs.out.flush();
          fs.message(p.entry.name + ": warning: recursive directory loop");
        }
        return true;
    }
    return true;
  };
  const std::size_t ahead = files_ahead(o, fs.farm);
  std::deque<PendingEntry> queue;
  bool go_on = true;
  auto on_entry = [&](WalkEntry&& entry) {
    if (stop.requested()) return go_on = false;
    PendingEntry p{std::move(entry), std::nullopt, nullptr, nullptr};
    if (fs.farm && goes_to_farm(p.entry)) {
      p.farmed = std::make_shared<WalkEntry>(std::move(p.entry));
      p.held = fs.farm->submit(farm_task(o, p.farmed, writes, fs.farm->stop()));
    } else if (ahead == 0) {
      return go_on = visit(p);
    } else if (!fs.farm && p.entry.kind == WalkEntry::Kind::kSearch) {
      struct stat st {};
      if (p.entry.file.get() >= 0 ||
          (!reads_standard_input(p.entry) && ::stat(p.entry.name.c_str(), &st) == 0 && S_ISREG(st.st_mode)))
        p.opened =
            open_input(o, p.entry, writes, fs.stdin_closed, stop, &fs.workers, std::move(p.entry.file));
    }
    queue.push_back(std::move(p));
    while (go_on && queue.size() > ahead) {
      PendingEntry next = std::move(queue.front());
      queue.pop_front();
      go_on = visit(next);
    }
    return go_on;
  };
  // A farm opens the files on its threads, each looking its path up, side by side.
  walk_files(o, !fs.farm, on_entry);
  // After a stop, the files already searched on the farm (their reads stop too) are
  // written up to the first that is not.
  while (go_on && !queue.empty() && !(stop.requested() && !queue.front().held)) {
    PendingEntry next = std::move(queue.front());
    queue.pop_front();
    go_on = visit(next);
  }
  outcome.bytes = fs.files.bytes_scanned() + farm_bytes;
  return outcome;
}

}  // namespace gpufilter::cli
