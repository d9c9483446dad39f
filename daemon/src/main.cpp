// gpufilterd: the sidecar alert daemon. One line's way through it:
//
//   source (StreamSession: Follower / Listener / StdinReader on the I/O thread)
//   -> RecordChannel -> StreamScan (one scan of every rule's patterns, this thread)
//   -> RuleConsumer -> RuleEngine (thresholds, cooldown) -> Alert -> each AlertOutput's
//   queue (its own thread)
//
// This file is the front end only: the arguments (--config, --check), the signals (taken
// by one thread and handed on through a pipe), and one Daemon (daemon.hpp), which loads
// and validates the configuration, builds each source, rule set and output from its
// block, runs them, and drains on SIGTERM/SIGINT. Around the scan: the OpsServer
// (/metrics, /healthz, /readyz, /-/reload), a control thread for SIGHUP (reload.cpp) and
// the stop signals, and the CounterCopier (counters.cpp) on the I/O thread.
// docs/DAEMON.md has the configuration and the operations.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "daemon.hpp"
#include "test_filter.hpp"
#include "gpufilter/daemon/config.hpp"
#include "gpufilter/daemon/log.hpp"
#include "gpufilter/core/stack_overflow.hpp"
#include "gpufilter/core/std_descriptors.hpp"

namespace {

using namespace gpufilter::daemon;

// Signals reach the control thread through a pipe. No handler runs: SIGHUP, SIGTERM and
// SIGINT are blocked in every thread and one thread takes them with sigwait(). A handler
// would not stay ours: PoCL compiles kernels with LLVM, which installs its own handlers for
// these signals at each compile (a reload compiles) and runs them before re-raising, with
// errno spoiled (ThreadSanitizer saw it).
int g_signal_pipe[2] = {-1, -1};

// Call before any other thread starts, so that every thread inherits the mask.
void take_signals_in_one_thread() {
  sigset_t signals;
  sigemptyset(&signals);
  for (const int s : {SIGHUP, SIGTERM, SIGINT}) sigaddset(&signals, s);
  ::pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::thread([signals] {
    for (;;) {
      int number = 0;
      if (::sigwait(&signals, &number) != 0) continue;
      const unsigned char byte = static_cast<unsigned char>(number);
      [[maybe_unused]] const ssize_t n = ::write(g_signal_pipe[1], &byte, 1);
    }
  }).detach();
}

int usage(int status) {
  std::fputs(
      "Usage: gpufilterd --config FILE [--check]\n"
      "       gpufilterd --test-filter FILTER LOG [IGNOREREGEX] [--fail2ban-dir DIR] [-o|--out ip|id|user|msg|json|KEY]\n"
      "Watch log streams and emit alerts, per the rules in FILE (docs/DAEMON.md).\n"
      "  --config FILE   the YAML configuration\n"
      "  --check         validate FILE and exit (0: valid, 2: not)\n"
      "  --test-filter   a fail2ban filter (sshd, sshd[mode=aggressive], a path) or a failregex\n"
      "                  over LOG (- for standard input, or systemd-journal[journalfiles=...])\n"
      "                  as fail2ban-regex shows it (its order, LOG FILTER, taken too); -o/--out\n"
      "                  prints each failure; -c DIR, -d PATTERN, -L N, -m MATCH, -r,\n"
      "                  --print-all-missed and the like as fail2ban-regex's\n"
      "Signals: SIGHUP reloads the configuration; SIGTERM or SIGINT drains and exits 0\n"
      "(3 when alerts were still queued at the end of drain_timeout; 2 on trouble).\n",
      status == 0 ? stdout : stderr);
  return status;
}

int run(const std::string& config_path) {
  Daemon daemon(config_path, SignalPipe{g_signal_pipe[0], g_signal_pipe[1]});
  const int status = daemon.run();
  if (daemon.skip_teardown()) std::_Exit(status);  // as gpufilter: the driver's teardown adds nothing
  return status;
}

// An option's complaint, then the usage: exit status 2.
int refuse(const std::string& why) {
  std::fprintf(stderr, "gpufilterd: %s\n", why.c_str());
  return usage(2);
}

}  // namespace

int main(int argc, char** argv) {
  // Before any descriptor is created: with descriptor 0 closed the signal pipe would
  // become standard input, and a "stdin: true" source would read the SIGTERM meant for
  // the control thread. A closed one now fails its reads with EBADF instead.
  gpufilter::reopen_closed_standard_descriptors();
  gpufilter::report_stack_overflow("gpufilterd");  // a regex rule's back-reference, as grep reports it
  std::optional<std::string> config_path;
  bool check = false;
  if (argc > 1 && std::string_view(argv[1]) == "--test-filter") return gpufilter::daemon::test_filter(argc, argv, 2);
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--config" || a.rfind("--config=", 0) == 0) {
      // A second --config would silently replace the first, as a duplicate YAML key would;
      // "--config" last, "--config=" and "--config ''" name no file at all.
      if (config_path) return refuse("option '--config' given twice");
      if (a == "--config" && i + 1 >= argc) return refuse("option '--config' requires an argument (FILE)");
      config_path = a == "--config" ? argv[++i] : a.substr(9);
      if (config_path->empty()) return refuse("option '--config' requires an argument (FILE), not an empty one");
    } else if (a == "--check") {
      check = true;
    } else if (a == "--help") {
      return usage(0);
    } else if (a == "--version") {
      std::puts("gpufilterd " GPUFILTER_VERSION);
      return 0;
    } else {
      return refuse("unknown argument '" + a + "'");
    }
  }
  if (!config_path) return refuse("option '--config' is required");
  if (check) {
    try {
      const DaemonConfig c = load_config(*config_path);
      std::printf("%s: %zu sources, %zu rules, %zu outputs\n", config_path->c_str(), c.sources.size(), c.rules.size(),
                  c.outputs.size());
      return 0;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "gpufilterd: %s\n", e.what());
      return 2;
    }
  }
  ::signal(SIGPIPE, SIG_IGN);  // a closed stdout or socket is an error to handle, not a death
  ::signal(SIGXFSZ, SIG_IGN);  // a file size limit is a write error like a full disk
  if (::pipe2(g_signal_pipe, O_CLOEXEC) != 0) {
    std::perror("gpufilterd: pipe");
    return 2;
  }
  take_signals_in_one_thread();
  try {
    return run(*config_path);
  } catch (const std::exception& e) {
    Log log;
    log.error("cannot start", {{"error", e.what()}});
    return 2;
  }
}
