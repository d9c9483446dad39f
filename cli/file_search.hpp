// Searching FILE operands and -r trees: each input made ready in its turn (opened, and
// decoded with --decompress) and searched through the main pipeline (FileScan -> Searcher
// -> printer); or, for small and compressed files, several at once on a FileFarm beside
// it (file_farm.hpp), their output written in the walk's order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "file_farm.hpp"
#include "gpufilter/cli/options.hpp"
#include "gpufilter/core/stop_signal.hpp"
#include "gpufilter/core/workers.hpp"
#include "gpufilter/engines/engine.hpp"
#include "gpufilter/grep/regex_lines.hpp"
#include "gpufilter/grep/searcher.hpp"
#include "gpufilter/scan/file_scan.hpp"
#include "gpufilter/sinks/json_printer.hpp"
#include "gpufilter/sinks/output.hpp"

namespace gpufilter::cli {

// Standard input's name: --label, else grep's "(standard input)", or rg's "<stdin>" in
// rg's format (--json), for the tools that read rg's output.
std::string standard_input_name(const Options& o);

// How many files are searched at once (FileFarm), as far as the options say; 0 or 1: one
// after another. It pays with several inputs, and stays exact where the lines are grep's:
// not with --pattern-counts (one scanner counts), nor --line-buffered (each line out as it
// is found). Nor on one core, unless -j says so.
std::size_t files_at_once(const Options& o);

// What every farm thread builds its pipeline from.
struct FarmParts {
  const gpufilter::Engine& engine;
  // The regexes, when the patterns are: a copy no thread searches with, which each
  // thread copies for itself.
  const RegexLines* regexes;
  SearchOptions searching;
  FileScanConfig piping;
  // The run's printer (grep's or rg's JSON) for a farm thread, into its Outputs.
  std::function<std::unique_ptr<Sink>(Output& out, Output& err)> printer;
  // What the threads counted, added as they end.
  std::mutex mutex{};
  RegexCounts regex_counts{};
  JsonPrinter::Stats json_totals{};
};

// What the files are searched with: the main pipeline, and for many files at once the
// farm (null: one file after another).
struct FileSearch {
  FileScan& files;
  Searcher& searcher;
  Sink& printer;
  WorkerPool& workers;
  Output& out;
  Output& err;
  bool stdin_closed = false;                         // the process was started without one
  std::function<void(const std::string&)> message;  // grep's message on standard error
  FileFarm* farm = nullptr;                          // set by search_files while its farm runs
};

struct FilesOutcome {
  bool selected = false;
  bool trouble = false;
  std::uint64_t bytes = 0;
};

// Every FILE operand (or standard input) in turn through one FileScan; with a farm, the
// small ones several at once, their output written in turn. `parts`: with `at_once`
// threads, what the farm's threads search with; null: no farm. `scanning_now`: the input
// the main pipeline searches (for a device fault's warning).
FilesOutcome search_files(const Options& o, FileSearch& fs, FarmParts* parts, std::size_t at_once, StopSignal& stop,
                          std::string& scanning_now);

}  // namespace gpufilter::cli
