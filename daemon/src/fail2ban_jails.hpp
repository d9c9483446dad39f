// The `fail2ban:` block of gpufilterd's configuration: fail2ban's enabled jails
// (fail2ban/jails.hpp) become followed sources and fail2ban_filter rules (docs/DAEMON.md,
// "fail2ban jails", has the mapping and what is refused).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gpufilter/daemon/config.hpp"
#include "gpufilter/sources/journal_reader.hpp"

namespace gpufilter::daemon {

struct JailsConfig {
  std::string dir = "/etc/fail2ban";  // holds jail.conf, jail.local, jail.d/, filter.d/
  std::vector<std::string> only;      // these jails, enabled or not (empty: the enabled ones)
  bool from_start = false;            // read the logpath files from their start (a replay)
  std::string state;                  // the follow sources' --state file ("" none)
};

// Adds a rule per jail and follows its files (a file already followed by a source of
// `config`, or by another jail, is read once); a `backend = systemd` jail reads the
// journal instead (a journal source of its own, with its filter's journalmatch). Throws
// ConfigError naming the jail, the file and the reason: a missing filter, a filter
// fail2ban cannot load (a missing include, an invalid regex), a logpath matching no file,
// options refused.
void add_fail2ban_jails(const JailsConfig& jails, DaemonConfig& config);

// The journal a systemd backend names, as fail2ban's FilterSystemd opens it:
// `systemd[journalpath=DIR, journalfiles="GLOB ...", journalflags=N, namespace=NAME]` (a
// jail's backend, or fail2ban-regex's LOG `systemd-journal[...]`); without a path or
// files, the system journal. ConfigError, starting with `who`, for an option it cannot
// take.
JournalSourceConfig systemd_backend(const std::string& backend, const std::string& who);

// What a JournalReader runs for a `journal` source: `since` from now, the stream's origin
// (BatchEntry::origin) and line limit. The one conversion, for the daemon's sources and
// --test-filter's systemd-journal LOG.
JournalConfig journal_reader_config(const JournalSourceConfig& j, std::size_t max_line_bytes = 1u << 20,
                                    std::uint32_t origin = 0);

// A journalmatch value as journalctl's matches: each line split as Python's shlex.split
// splits it (quotes, backslashes), the lines' groups joined by "+" (fail2ban adds each
// line as a match of its own, ORed with the others). `last_line_only`: fail2ban-regex's
// reading, where each line replaces the one before.
std::vector<std::string> journal_matches(const std::string& value, bool last_line_only = false);

}  // namespace gpufilter::daemon
