// Daemon: one run of gpufilterd, in the shape config -> validate -> build -> run. run()
// loads and validates the configuration, builds each part from its block (the scan engine
// from `rules` and `engine`, the outputs from `outputs`, the rule engine, the sources from
// `sources` as one StreamSession), starts them, scans until a signal stops the readers,
// then drains the outputs and saves the state. gpufilterd's main() parses the arguments,
// takes the signals and runs one Daemon.
//
// Threads: the scan runs on run()'s thread; the readers and the CounterCopier on the
// session's I/O thread (each capture reads on a thread of its own); the OpsServer on its
// own; the control thread reads the signal pipe (SIGHUP: reload(); SIGTERM, SIGINT: stop
// the readers).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio/steady_timer.hpp>

#include "gpufilter/daemon/alert_output.hpp"
#include "gpufilter/daemon/config.hpp"
#include "gpufilter/daemon/log.hpp"
#include "gpufilter/daemon/metrics.hpp"
#include "gpufilter/daemon/ops_server.hpp"
#include "gpufilter/daemon/outputs.hpp"
#include "gpufilter/daemon/rules.hpp"
#include "gpufilter/engines/engine.hpp"
#include "gpufilter/scan/stream_scan.hpp"
#include "gpufilter/sources/stream_session.hpp"

namespace gpufilter::daemon {

// ---- Build steps (build.cpp): each part from its configuration block.

// The scan of one rule set: its rules and the engine that scans their patterns. A reload
// builds a new one beside the running one and swaps it in.
struct ScanEngine {
  std::shared_ptr<RuleSet> rules;
  std::unique_ptr<Engine> engine;
};
std::shared_ptr<ScanEngine> build_engine(const DaemonConfig& config, Engines& engines,
                                         const DeviceFaultHandler& on_device_fault);

struct Outputs {
  std::vector<std::unique_ptr<AlertOutput>> outputs;
  // Per configured output: the token a reload refreshes (a webhook with bearer_token_file),
  // else null.
  std::vector<std::shared_ptr<BearerToken>> tokens;
};
Outputs build_outputs(const DaemonConfig& config);

// The kafka sources' at-least-once gate over the outputs: a mark is what each output had
// been given (published); it is settled once each has settled (OutputStats::settled)
// that many.
class OutputsGate final : public DeliveryGate {
 public:
  explicit OutputsGate(const std::vector<std::unique_ptr<AlertOutput>>& outputs) : outputs_(outputs) {}
  Mark mark() const override;
  bool settled(const Mark& mark) const override;
  bool congested() const override;  // an output's queue is half full

 private:
  const std::vector<std::unique_ptr<AlertOutput>>& outputs_;
};

void describe_metrics(Metrics& m);

// ---- CounterCopier (counters.cpp): reader and output counters into the metrics, every
// second, on the I/O thread; a failing output is logged at most once per 10 s.
class CounterCopier {
 public:
  CounterCopier(StreamSession& session, const std::vector<std::unique_ptr<AlertOutput>>& outputs,
                const StreamScan& scan, Metrics& metrics, Log& log);
  // Copies once now, then every second on the session's I/O thread.
  void start() { copy(); }

 private:
  using Clock = std::chrono::steady_clock;
  void copy();
  void copy_kafka(const KafkaSource::Counters& k);
  void copy_outputs();

  StreamSession& session_;
  const std::vector<std::unique_ptr<AlertOutput>>& outputs_;
  const StreamScan& scan_;
  Metrics& metrics_;
  Log& log_;
  boost::asio::steady_timer timer_;
  std::vector<OutputStats> reported_;
  std::vector<Clock::time_point> reported_at_;
  double last_busy_ = 0;
  Clock::time_point last_copy_ = Clock::now();
};

// ---- The daemon.

// The signal pipe's ends: the control thread reads signal numbers from `read`; a 0 byte
// written to `write` ends it.
struct SignalPipe {
  int read = -1;
  int write = -1;
};

class Daemon {
 public:
  Daemon(std::string config_path, SignalPipe signals);
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // The exit status: 0 after a drain on SIGTERM or SIGINT (or the end of standard input and
  // capture files, when they are the only sources);
  // 3 when that drain's timeout passed with alerts still queued (they are lost: counted
  // and logged); 2 when the configuration or the device is rejected, or the scan or a
  // state file failed. Throws what a build step
  // throws (a port in use, an unreadable state file or token): gpufilterd cannot start.
  int run();
  // True when run() went to its end with an OpenCL device open: the driver's teardown
  // adds nothing then, and main() skips it (std::_Exit), as gpufilter does.
  bool skip_teardown() const;

  // SIGHUP and POST /-/reload (reload.cpp): a new engine is built beside the running one,
  // then swapped in between batches. (succeeded, message).
  std::pair<bool, std::string> reload();

 private:
  bool load();           // false: rejected (logged)
  void build_ops();
  bool build_scan();     // false: no OpenCL device (logged)
  void build_alerting();
  void select_records();
  void restore_alert_state();
  void save_alert_state(const std::string& text);
  void build_sources();
  void start();
  int scan();
  std::uint64_t drain_outputs();
  int stop(int status);
  void control();

  const std::string config_path_;
  const SignalPipe signals_;
  Log log_;
  DaemonConfig config_;
  std::unique_ptr<Engines> engines_;
  Metrics metrics_;
  std::atomic<bool> ready_{false};
  std::atomic<bool> reload_ready_{false};  // reload() may run: everything it touches exists
  std::unique_ptr<OpsServer> ops_;
  DeviceFaultHandler on_device_fault_;
  std::shared_ptr<ScanEngine> engine_;
  // The engine of the last reload the scan loop took (set on the scan thread): kept alive
  // while the loop scans with it, even when reload() stopped waiting for the swap.
  std::shared_ptr<ScanEngine> scanning_;
  Outputs outputs_;
  std::unique_ptr<RuleEngine> rules_;
  bool alert_state_failing_ = false;  // a save failed and was logged; logged again once it works
  std::unique_ptr<RuleConsumer> consumer_;
  std::unique_ptr<Notices> notices_;
  std::shared_ptr<OutputsGate> gate_;  // the kafka sources': offsets wait for the outputs
  std::unique_ptr<StreamSession> session_;
  std::unique_ptr<StreamScan> loop_;
  std::unique_ptr<CounterCopier> counters_;
  std::mutex reload_mutex_;
  std::thread control_;
  bool stopped_ = false;  // stop() went to its end
};

}  // namespace gpufilter::daemon
