// Stream mode: --follow and --listen. Wires the readers (sources/follower, listener) on
// one I/O thread to the StreamGrep on this thread through a RecordChannel, and
// handles the stop: a signal (StopSignal) or a decided search stops the readers, which
// hand on what they hold and close; the pipeline then scans what is left, flushes, and
// the --state file is saved last.
#pragma once

#include <cstdint>
#include <string>

#include "gpufilter/cli/options.hpp"
#include "gpufilter/engines/scanner.hpp"
#include "gpufilter/grep/searcher.hpp"
#include "gpufilter/core/sink.hpp"
#include "gpufilter/core/notices.hpp"
#include "gpufilter/core/stop_signal.hpp"

namespace gpufilter {

struct StreamResult {
  bool selected = false;
  std::uint64_t bytes = 0;
  std::string stats;  // ,"name":value... for --stats
};

// Throws ConfigError/SourceError for a bad URL, a port in use, a bad state file.
StreamResult run_streams(const cli::Options& o, Scanner& scanner, const SearchOptions& searching, Sink& sink,
                         StopSignal& stop, Notices& notices);

}  // namespace gpufilter
