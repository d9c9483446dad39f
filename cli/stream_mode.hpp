// Stream mode: --follow and --listen. Builds a StreamSession (sources/stream_session.hpp)
// from the options: a Follower for the files and a Listener for the URLs, on the session's
// I/O thread, feeding the StreamGrep on this thread through the session's RecordChannel.
// The session stops the readers on a signal (StopSignal) or when the search is decided;
// they hand on what they hold and close, the pipeline scans what is left and flushes, and
// the --state file is saved last. A reader's failure ends the run (IoFailure::kEnd).
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
