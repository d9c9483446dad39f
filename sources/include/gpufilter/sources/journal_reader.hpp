// JournalReader: the systemd journal as one more line stream on the I/O thread, read as
// fail2ban's systemd backend reads it. `journalctl --output=json` runs as a child process
// (an argument vector, never a shell); each entry it prints becomes the line fail2ban makes
// of it (journal_line(): "HOST IDENT[PID]: MESSAGE", newlines as "\n") and goes to the
// RecordChannel with its time as the record's field "journal.time" (seconds since the
// epoch, microseconds after the point), which fail2ban filters take as the line's date
// instead of looking for one in the text, as fail2ban does. Backpressure as StdinReader's:
// a channel that cannot take an entry parks the reader, and journalctl's output waits in
// its pipe.
//
// Not following, the stream ends when journalctl exits; following (`--follow`), it ends at
// stop(), which ends journalctl (SIGTERM). journalctl's exit other than by our stop, with a
// failure status, goes to Notices with what it wrote to standard error (its last line).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include "gpufilter/core/notices.hpp"
#include "gpufilter/core/record_channel.hpp"
#include "gpufilter/core/record_fields.hpp"
#include "gpufilter/sources/line_framer.hpp"
#include "gpufilter/sources/stdin_reader.hpp"

namespace gpufilter {

struct JournalConfig {
  std::string journalctl = "journalctl";  // the program: a path, or a name looked up in PATH
  std::string directory;                  // --directory (fail2ban's journalpath)
  std::vector<std::string> files;         // --file, each (fail2ban's journalfiles, globs expanded)
  bool system_only = false;               // --system (fail2ban's default: flags SYSTEM_ONLY)
  std::string ns;                         // --namespace
  // journalctl's matches, "+" between alternatives (fail2ban's journalmatch, split on
  // spaces): FIELD=VALUE ...
  std::vector<std::string> matches;
  std::optional<double> since;  // seconds since the epoch: entries from then on (--since)
  bool from_start = false;      // without `since`: every entry the journal holds, else only new ones
  bool follow = true;
  std::string name = "journal";  // the stream's name
  std::uint32_t origin = 0;      // BatchEntry::origin of its stream
  std::size_t max_line_bytes = 1u << 20;
};

// What fail2ban's FilterSystemd.formatJournalEntry() makes of an entry of `journalctl
// --output=json` (one JSON object): the line and its time (seconds since the epoch). Throws
// std::invalid_argument when `json` is not a JSON object.
struct JournalLine {
  std::string text;
  double time = 0;
};
JournalLine journal_line(std::string_view json);

// journalctl's argument vector for `config` (argv[0] is config.journalctl).
std::vector<std::string> journalctl_argv(const JournalConfig& config);

// journalctl running for `config`, its standard output and error read by the caller (the
// error, non-blocking, at its end). SourceError when it cannot be started.
struct JournalProcess {
  pid_t pid = -1;
  int out = -1, err = -1;
};
JournalProcess spawn_journalctl(const JournalConfig& config);
// Waits for journalctl's end (`terminate`: ends it first) and closes its error pipe; what
// went wrong, in words with its last line of standard error, or "" (ended by us, or 0).
std::string end_journalctl(JournalProcess& process, const JournalConfig& config, bool terminate);

// A StdinReader of journalctl's output (stdin_reader.hpp): the start, the reads, the
// backpressure and the stop are standard input's; each framed line is an entry.
class JournalReader : public StdinReader {
 public:
  JournalReader(boost::asio::io_context& io, RecordChannel& channel, JournalConfig config, Notices& notices);
  ~JournalReader() override;

  // Starts journalctl (SourceError when it cannot be started) and opens the stream. Before
  // io.run() or on the I/O thread.
  void start();
  bool follows() const noexcept { return config_.follow; }
  std::uint64_t entries() const noexcept { return entries_; }
  // Not JSON, or longer than max_line_bytes (as journalctl printed it, or as a line).
  std::uint64_t entries_invalid() const noexcept { return invalid_ + framer_.lines_too_long(); }

 private:
  bool hand_on() override;  // each entry as its line, with its time
  void closed() override;   // journalctl ended (by us at a stop); a failure goes to notices_

  JournalConfig config_;
  Notices& notices_;
  JournalProcess process_;
  std::uint64_t offset_ = 0;  // bytes handed on
  std::string pending_;       // a formatted entry the channel did not take yet, with its '\n'
  std::shared_ptr<const RecordFields> pending_fields_;
  std::uint64_t entries_ = 0, invalid_ = 0;
};

}  // namespace gpufilter
