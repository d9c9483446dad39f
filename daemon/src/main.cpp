// gpufilterd: the sidecar alert daemon. One line's way through it:
//
//   source (Follower / Listener / stdin, I/O thread) -> RecordChannel -> StreamScan
//   (one scan of every rule's patterns, this thread) -> RuleConsumer -> RuleEngine
//   (thresholds, cooldown) -> Alert -> each AlertOutput's queue (its own thread)
//
// Around it: the OpsServer (/metrics, /healthz, /readyz, /-/reload) on its own thread, a
// control thread for SIGHUP (reload) and SIGTERM/SIGINT (drain and exit), and a timer on
// the I/O thread that copies reader and output counters into the metrics.
// docs/DAEMON.md has the configuration and the operations.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "gpufilter/daemon/alert_output.hpp"
#include "gpufilter/daemon/config.hpp"
#include "gpufilter/daemon/log.hpp"
#include "gpufilter/daemon/metrics.hpp"
#include "gpufilter/daemon/ops_server.hpp"
#include "gpufilter/daemon/outputs.hpp"
#include "gpufilter/daemon/rules.hpp"
#include "gpufilter/core/errors.hpp"
#include "gpufilter/engines/engine.hpp"
#include "gpufilter/core/record_channel.hpp"
#include "gpufilter/scan/stream_scan.hpp"
#include "gpufilter/sources/follower.hpp"
#include "gpufilter/sources/line_framer.hpp"
#include "gpufilter/sources/listener.hpp"
#include "gpufilter/core/notices.hpp"

namespace {

using namespace gpufilter;
using namespace gpufilter::daemon;
namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kBatchBytes = 4u << 20;  // at least max_line_bytes + 1
constexpr std::size_t kHostScanBelow = 16u << 10;

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

// Reader notices become warn log lines.
class LogNotices final : public Notices {
 public:
  explicit LogNotices(Log& log) : log_(log) {}
  void notice(std::string_view message) override { log_.warn(message); }

 private:
  Log& log_;
};

// The scan of one rule set: its rules and the engine that scans their patterns. A reload
// builds a new one beside the running one and swaps it in.
struct ScanEngine {
  std::shared_ptr<RuleSet> rules;
  std::unique_ptr<Engine> engine;
};

// The engine layer chooses and builds the engine (engines/engine.hpp), as it does for
// gpufilter: lines arrive as streams, so `engine: auto` takes the host engine for up to
// kHostEngineMaxPatterns literals and an OpenCL device past them. A device engine that
// fails mid-run rescans on the host and goes on there; `on_device_fault` hears of it once
// per engine, from the scan thread.
std::shared_ptr<ScanEngine> build_engine(const DaemonConfig& config, Engines& engines,
                                         const DeviceFaultHandler& on_device_fault) {
  auto e = std::make_shared<ScanEngine>();
  e->rules = std::make_shared<RuleSet>(config.rules);
  EngineRequest request;
  request.choice = config.engine == "cpu" ? EngineChoice::kHost
                   : config.engine == "gpu" ? EngineChoice::kDevice
                                            : EngineChoice::kAuto;
  request.patterns = PatternStats::of(e->rules->patterns());
  request.input = InputKind::kStreams;
  request.min_chunk_bytes = config.max_line_bytes + 1;
  request.device_faults = device_faults_from(std::getenv("GPUFILTER_INJECT_DEVICE_FAULT"));
  e->engine = engines.compile(engines.plan(request), e->rules->patterns(), e->rules->match_options());
  e->engine->make_scanner(RuleConsumer::needs_locations(), false);
  e->engine->on_device_fault(on_device_fault);
  e->rules->bind(e->engine->table());
  return e;
}

// The directories of state files and alert files are made when missing (as systemd's
// StateDirectory= would); a failure shows when the file itself is opened.
void make_parent_directories(const DaemonConfig& config) {
  auto make = [](const std::string& file) {
    std::error_code ignored;
    const std::filesystem::path parent = std::filesystem::path(file).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ignored);
  };
  for (const SourceConfig& s : config.sources)
    if (!s.state.empty()) make(s.state);
  for (const OutputConfig& o : config.outputs)
    if (o.kind == OutputConfig::Kind::kJsonl && o.path != "-") make(o.path);
}

struct Outputs {
  std::vector<std::unique_ptr<AlertOutput>> outputs;
  // Per configured output: the token a reload refreshes (a webhook with bearer_token_file),
  // else null.
  std::vector<std::shared_ptr<BearerToken>> tokens;
};

Outputs build_outputs(const DaemonConfig& config) {
  make_parent_directories(config);
  Outputs built;
  std::vector<std::unique_ptr<AlertOutput>>& outputs = built.outputs;
  built.tokens.resize(config.outputs.size());
  for (std::size_t i = 0; i < config.outputs.size(); ++i) {
    const OutputConfig& o = config.outputs[i];
    QueueConfig queue;
    queue.capacity = o.queue;
    queue.initial_backoff = o.retry_backoff;
    queue.max_backoff = o.retry_max_backoff;
    switch (o.kind) {
      case OutputConfig::Kind::kJsonl: outputs.push_back(make_jsonl_output(o.name, o.path, queue)); break;
      case OutputConfig::Kind::kAlertmanager: {
        AlertmanagerConfig am;
        am.url = o.url;
        am.resend_interval = o.resend_interval;
        am.timeout = o.timeout;
        am.generator_url = config.generator_url;
        am.queue = queue;
        outputs.push_back(make_alertmanager_output(o.name, am));
        break;
      }
      case OutputConfig::Kind::kWebhook: {
        WebhookConfig wh;
        wh.url = o.url;
        wh.timeout = o.timeout;
        wh.queue = queue;
        // From the environment or a checked file, never from the configuration; errors
        // name the variable or the file, never the token.
        try {
          auto token = std::make_shared<BearerToken>(read_bearer_token(o));
          wh.token = token;
          if (!o.bearer_token_file.empty()) built.tokens[i] = std::move(token);
        } catch (const ConfigError& e) {
          throw ConfigError(config.path + ": " + e.what());
        }
        outputs.push_back(make_webhook_output(o.name, wh));
        break;
      }
    }
  }
  return built;
}

void describe_metrics(Metrics& m) {
  using T = Metrics::Type;
  m.describe("gpufilterd_lines_scanned_total", T::kCounter, "Lines scanned, by source (a file, or tcp/udp/unix).");
  m.describe("gpufilterd_bytes_scanned_total", T::kCounter, "Bytes scanned, by source.");
  m.describe("gpufilterd_rule_matches_total", T::kCounter, "Lines that matched a rule, by rule.");
  m.describe("gpufilterd_alerts_total", T::kCounter, "Alerts emitted, by rule and state (firing, resolved).");
  m.describe("gpufilterd_alerts_suppressed_total", T::kCounter, "Matches not alerted during a cooldown, by rule.");
  m.describe("gpufilterd_output_published_total", T::kCounter, "Alerts given to an output.");
  m.describe("gpufilterd_output_delivered_total", T::kCounter, "Deliveries an output completed.");
  m.describe("gpufilterd_output_failures_total", T::kCounter, "Delivery attempts that failed (retries count).");
  m.describe("gpufilterd_output_dropped_total", T::kCounter, "Alerts dropped because an output's queue was full.");
  m.describe("gpufilterd_output_queue_depth", T::kGauge, "Alerts waiting in an output's queue.");
  m.describe("gpufilterd_source_lines_too_long_total", T::kCounter, "Lines over max_line_bytes, dropped.");
  m.describe("gpufilterd_source_datagrams_dropped_total", T::kCounter,
             "UDP datagrams dropped (no room, or the socket buffer overflowed).");
  m.describe("gpufilterd_source_connections_total", T::kCounter, "Connections accepted.");
  m.describe("gpufilterd_source_connections_refused_total", T::kCounter, "Connections refused over max_connections.");
  m.describe("gpufilterd_source_rotations_total", T::kCounter, "Followed files replaced by rotation.");
  m.describe("gpufilterd_batch_latency_seconds", T::kHistogram, "From a batch's submit to its delivery.",
             {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1});
  m.describe("gpufilterd_scan_busy_seconds_total", T::kCounter, "Seconds with a batch in flight on the scan engine.");
  m.describe("gpufilterd_device_utilization_ratio", T::kGauge,
             "Share of the last interval with a batch in flight on the engine (0 to 1).");
  m.describe("gpufilterd_device_info", T::kGauge, "The scan engine and device (value 1).");
  m.describe("gpufilterd_device_faults_total", T::kCounter,
             "OpenCL device failures; after one the engine scans on the host, losing nothing.");
  m.describe("gpufilterd_rules", T::kGauge, "Rules loaded.");
  m.describe("gpufilterd_patterns", T::kGauge, "Patterns compiled into the one scan.");
  m.describe("gpufilterd_config_reloads_total", T::kCounter, "Reloads, by result (success, failure).");
  m.describe("gpufilterd_config_last_reload_successful", T::kGauge, "1 if the last reload succeeded, else 0.");
}

int usage(int status) {
  std::fputs(
      "Usage: gpufilterd --config FILE [--check]\n"
      "Watch log streams and emit alerts, per the rules in FILE (docs/DAEMON.md).\n"
      "  --config FILE   the YAML configuration\n"
      "  --check         validate FILE and exit (0: valid, 2: not)\n"
      "Signals: SIGHUP reloads the configuration; SIGTERM or SIGINT drains and exits 0.\n",
      status == 0 ? stdout : stderr);
  return status;
}

int run(const std::string& config_path) {
  Log log;
  DaemonConfig config;
  try {
    config = load_config(config_path);
  } catch (const Error& e) {
    log.error("config rejected", {{"error", e.what()}});
    return 2;
  }
  log.set_format(config.log_format);

  // The OpenCL device is opened only when an engine needs it (engines/engine.hpp).
  Engines engines(config.device);
  Metrics metrics;
  describe_metrics(metrics);
  // The operations endpoint binds first: its address is the alerts' generatorURL. Its
  // handlers are set once everything they touch exists.
  // POST /-/reload is the endpoint's one state-changing route: it exists only when the
  // configuration enables it (read-only unless explicitly enabled); SIGHUP always works.
  std::atomic<bool> ready{false};
  std::function<std::pair<bool, std::string>()> reload;
  std::function<std::pair<bool, std::string>()> http_reload;
  if (config.reload_endpoint) {
    http_reload = [&]() -> std::pair<bool, std::string> {
      if (!reload) return {false, "still starting"};
      return reload();
    };
  }
  OpsServer ops(config.server, metrics, OpsHandlers{[&] { return ready.load(); }, http_reload});
  if (config.generator_url.empty()) config.generator_url = "http://" + ops.bound() + "/";
  // Said once per engine: the scan goes on, on the host, and loses nothing. It must not throw.
  const DeviceFaultHandler on_device_fault = [&log, &metrics](const DeviceError& e, const Chunk&) noexcept {
    try {
      metrics.add("gpufilterd_device_faults_total", {}, 1);
      log.warn("OpenCL device failed; scanning on the host from now on",
               {{"call", e.call()}, {"code", std::to_string(e.code())}, {"error", cl_error_name(e.code())}});
    } catch (...) {
      // Out of memory for a log line: the scan itself goes on regardless.
    }
  };
  std::shared_ptr<ScanEngine> engine;
  try {
    engine = build_engine(config, engines, on_device_fault);
  } catch (const NoDeviceError& e) {
    log.error("no OpenCL device", {{"error", e.what()}});
    return 2;
  }
  Outputs built = build_outputs(config);
  std::vector<std::unique_ptr<AlertOutput>>& outputs = built.outputs;
  metrics.set("gpufilterd_device_info",
              {{"engine", std::string(engine->engine->name())},
               {"device", engine->engine->device_name()},
               {"reason", engine->engine->reason()}},
              1);
  metrics.set("gpufilterd_rules", {}, static_cast<double>(config.rules.size()));
  metrics.set("gpufilterd_patterns", {}, static_cast<double>(engine->rules->patterns().size()));
  metrics.set("gpufilterd_config_last_reload_successful", {}, 1);
  metrics.add("gpufilterd_device_faults_total", {}, 0);

  RuleEngine rules(engine->rules,
                   [&](const Alert& alert) {
                     metrics.add("gpufilterd_alerts_total",
                                 {{"rule", alert.rule},
                                  {"state", alert.state == Alert::State::kFiring ? "firing" : "resolved"}},
                                 1);
                     for (auto& out : outputs) out->publish(alert);
                   },
                   &metrics);
  RuleConsumer consumer(rules, &metrics);

  // Readers on the I/O thread.
  asio::io_context io;
  RecordChannel channel(RecordChannel::Config{engine->engine->scanner().chunk_bytes(), 3});
  LogNotices notices(log);
  std::vector<std::unique_ptr<Follower>> followers;
  std::unique_ptr<Listener> listener;
  ListenConfig listening;
  listening.max_line_bytes = config.max_line_bytes;
  listening.max_connections = config.max_connections;
  bool use_stdin = false;
  for (const SourceConfig& s : config.sources) {
    switch (s.kind) {
      case SourceConfig::Kind::kFollow: {
        FollowConfig f;
        f.paths = s.paths;
        f.from_start = s.from_start;
        f.state_path = s.state;
        if (s.poll_interval) {
          f.use_inotify = false;
          f.poll_interval = *s.poll_interval;
        }
        f.max_line_bytes = config.max_line_bytes;
        followers.push_back(std::make_unique<Follower>(io, channel, f, notices));
        break;
      }
      case SourceConfig::Kind::kListen: listening.urls.push_back(parse_listen_url(s.url)); break;
      case SourceConfig::Kind::kStdin: use_stdin = true; break;
    }
  }
  if (!listening.urls.empty()) {
    listener = std::make_unique<Listener>(io, channel, listening, notices);
    listener->start();
    for (const std::string& url : listener->bound()) log.info("listening", {{"url", url}});
  }
  for (auto& f : followers) f->start();

  // Standard input as one more stream: whole lines through a LineFramer, like a socket.
  asio::posix::stream_descriptor stdin_stream(io);
  LineFramer stdin_framer(config.max_line_bytes);
  const StreamId stdin_id = channel.new_stream_id();
  bool stdin_open = false, stdin_parked = false;
  std::function<void()> stdin_read;
  std::function<void()> stdin_ended;  // standard input was the only source: stop
  auto stdin_hand_on = [&]() -> bool {  // false: the channel is full
    for (;;) {
      const LineFramer::Ready r = stdin_framer.ready();
      if (r.lines.empty()) return true;
      const std::size_t taken = channel.append(stdin_id, r.offset, r.lines, r.skipped);
      stdin_framer.consumed(taken);
      if (taken < r.lines.size()) return false;
    }
  };
  auto stdin_close = [&] {
    if (!stdin_open) return;
    stdin_open = false;
    channel.close(stdin_id);
    boost::system::error_code ignored;
    stdin_stream.close(ignored);
  };
  if (use_stdin) {
    stdin_stream.assign(::dup(STDIN_FILENO));
    channel.open(stdin_id, "stdin");
    stdin_open = true;
    stdin_read = [&] {
      const auto room = stdin_framer.prepare(64u << 10);
      stdin_stream.async_read_some(asio::buffer(room.data(), room.size()),
                                   [&](const boost::system::error_code& ec, std::size_t n) {
                                     if (!stdin_open) return;
                                     stdin_framer.commit(n);
                                     if (ec) stdin_framer.end_of_stream();
                                     if (!stdin_hand_on()) {
                                       stdin_parked = true;  // resumed by on_space
                                       return;
                                     }
                                     if (!ec) {
                                       stdin_read();
                                       return;
                                     }
                                     stdin_close();
                                     if (stdin_ended) stdin_ended();
                                   });
    };
    stdin_read();
  }

  // Stopping: readers hand on what they hold and close, then the channel finishes.
  bool stopping = false;
  asio::steady_timer stop_check(io);
  auto readers_stopped = [&] {
    for (auto& f : followers)
      if (!f->stopped()) return false;
    return (!listener || listener->stopped()) && !stdin_open;
  };
  std::function<void()> check_stopped = [&] {
    if (readers_stopped()) {
      channel.finish();
      return;
    }
    stop_check.expires_after(std::chrono::milliseconds(20));
    stop_check.async_wait([&](const boost::system::error_code& ec) {
      if (!ec) check_stopped();
    });
  };
  auto stop_readers = [&] {
    if (stopping) return;
    stopping = true;
    for (auto& f : followers) f->stop();
    if (listener) listener->stop();
    if (stdin_open && !stdin_parked) stdin_close();
    check_stopped();
  };
  if (followers.empty() && !listener) stdin_ended = [&] { stop_readers(); };
  channel.set_space_callback([&] {
    asio::post(io, [&] {
      for (auto& f : followers) f->on_space();
      if (listener) listener->on_space();
      if (stdin_parked && stdin_hand_on()) {
        stdin_parked = false;
        if (stopping || !stdin_stream.is_open()) {
          stdin_close();
          if (stdin_ended) stdin_ended();
        } else {
          stdin_read();
        }
      }
    });
  });

  StreamScan loop(engine->engine->scanner(), consumer, channel);

  // Counters of readers and outputs into the metrics, every second.
  std::vector<OutputStats> reported(outputs.size());
  std::vector<Clock::time_point> reported_at(outputs.size());
  asio::steady_timer counters_timer(io);
  double last_busy = 0;
  Clock::time_point last_counters = Clock::now();
  std::function<void()> copy_counters = [&] {
    std::uint64_t too_long = 0, rotations = 0;
    for (auto& f : followers) {
      const Follower::Counters c = f->counters();
      too_long += c.lines_too_long;
      rotations += c.rotations;
    }
    if (listener) {
      const Listener::Counters c = listener->counters();
      too_long += c.lines_too_long;
      metrics.set("gpufilterd_source_datagrams_dropped_total", {{"reason", "no_room"}},
                  static_cast<double>(c.datagrams_dropped));
      metrics.set("gpufilterd_source_datagrams_dropped_total", {{"reason", "socket_buffer"}},
                  static_cast<double>(c.datagrams_dropped_kernel));
      metrics.set("gpufilterd_source_connections_total", {}, static_cast<double>(c.connections));
      metrics.set("gpufilterd_source_connections_refused_total", {}, static_cast<double>(c.connections_refused));
    }
    metrics.set("gpufilterd_source_lines_too_long_total", {}, static_cast<double>(too_long + stdin_framer.lines_too_long()));
    metrics.set("gpufilterd_source_rotations_total", {}, static_cast<double>(rotations));
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      auto& out = outputs[i];
      const OutputStats s = out->stats();
      const Labels l{{"output", out->name()}};
      // A failing or dropping output is worth a log line, at most one per output per 10 s.
      if ((s.failures > reported[i].failures || s.dropped > reported[i].dropped) &&
          Clock::now() - reported_at[i] >= std::chrono::seconds(10)) {
        log.warn("output is failing; alerts are retried", {{"output", out->name()},
                                                           {"failures", std::to_string(s.failures)},
                                                           {"dropped", std::to_string(s.dropped)},
                                                           {"queued", std::to_string(s.queued)}});
        reported[i] = s;
        reported_at[i] = Clock::now();
      }
      metrics.set("gpufilterd_output_published_total", l, static_cast<double>(s.published));
      metrics.set("gpufilterd_output_delivered_total", l, static_cast<double>(s.delivered));
      metrics.set("gpufilterd_output_failures_total", l, static_cast<double>(s.failures));
      metrics.set("gpufilterd_output_dropped_total", l, static_cast<double>(s.dropped));
      metrics.set("gpufilterd_output_queue_depth", l, static_cast<double>(s.queued));
    }
    const Clock::time_point now = Clock::now();
    const double busy = loop.busy_seconds();
    const double interval = std::chrono::duration<double>(now - last_counters).count();
    metrics.set("gpufilterd_scan_busy_seconds_total", {}, busy);
    if (interval > 0) metrics.set("gpufilterd_device_utilization_ratio", {}, std::min(1.0, (busy - last_busy) / interval));
    last_busy = busy;
    last_counters = now;
    counters_timer.expires_after(std::chrono::seconds(1));
    counters_timer.async_wait([&](const boost::system::error_code& ec) {
      if (!ec) copy_counters();
    });
  };
  copy_counters();

  // A reload: a new engine is built beside the running one (here, off the scan thread),
  // then swapped in between batches; rules whose definition did not change keep state.
  std::mutex reload_mutex;
  reload = [&]() -> std::pair<bool, std::string> {
    std::lock_guard lock(reload_mutex);
    std::shared_ptr<ScanEngine> next;
    DaemonConfig next_config;
    // Outputs apply at the next restart, but their token files are read again now, so
    // that a rotated token is used at once; a token file that became unreadable or
    // exposed fails the reload like an invalid configuration.
    std::vector<std::pair<BearerToken*, std::string>> tokens;
    try {
      next_config = load_config(config_path);
      for (std::size_t i = 0; i < config.outputs.size(); ++i) {
        if (built.tokens[i]) tokens.emplace_back(built.tokens[i].get(), read_bearer_token(config.outputs[i]));
      }
      next = build_engine(next_config, engines, on_device_fault);
    } catch (const std::exception& e) {
      metrics.add("gpufilterd_config_reloads_total", {{"result", "failure"}}, 1);
      metrics.set("gpufilterd_config_last_reload_successful", {}, 0);
      log.error("reload rejected; the running configuration stays", {{"error", e.what()}});
      return {false, e.what()};
    }
    for (auto& [holder, token] : tokens) holder->set(std::move(token));
    if (next_config.sources != config.sources || next_config.outputs != config.outputs ||
        next_config.server != config.server || next_config.reload_endpoint != config.reload_endpoint)
      log.warn("sources, outputs, server and reload_endpoint apply at the next restart; rules are reloaded now");
    auto swapped = std::make_shared<std::promise<void>>();
    std::future<void> done = swapped->get_future();
    loop.run_between_batches([&, next, swapped] {
      rules.replace(next->rules, RuleEngine::Clock::now());
      loop.replace_scanner(next->engine->scanner());
      swapped->set_value();
    });
    if (done.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
      log.error("reload did not take effect within 30 s");
      return {false, "the scan loop did not take the new rules within 30 s"};
    }
    engine = next;  // the old engine goes: nothing of it is in flight any more
    metrics.add("gpufilterd_config_reloads_total", {{"result", "success"}}, 1);
    metrics.set("gpufilterd_config_last_reload_successful", {}, 1);
    metrics.set("gpufilterd_rules", {}, static_cast<double>(next_config.rules.size()));
    metrics.set("gpufilterd_patterns", {}, static_cast<double>(next->rules->patterns().size()));
    log.info("config reloaded",
             {{"rules", std::to_string(next_config.rules.size())},
              {"patterns", std::to_string(next->rules->patterns().size())}});
    return {true, "reloaded " + std::to_string(next_config.rules.size()) + " rules"};
  };

  ops.start();
  log.info("gpufilterd started", {{"config", config_path},
                                  {"rules", std::to_string(config.rules.size())},
                                  {"patterns", std::to_string(engine->rules->patterns().size())},
                                  {"engine", std::string(engine->engine->name())},
                                  {"device", engine->engine->kind() == EngineKind::kDevice ? engine->engine->device_name()
                                                                                            : std::string("host")},
                                  {"engine_reason", engine->engine->reason()},
                                  {"server", ops.bound()},
                                  {"reload_endpoint", config.reload_endpoint ? "enabled" : "disabled"}});

  // The control thread: SIGHUP reloads; SIGTERM or SIGINT stops the readers.
  std::thread control([&] {
    for (;;) {
      unsigned char number = 0;
      const ssize_t n = ::read(g_signal_pipe[0], &number, 1);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0 || number == 0) return;  // 0: main asks the thread to end
      if (number == SIGHUP) {
        log.info("SIGHUP: reloading", {{"config", config_path}});
        reload();
      } else {
        log.info("stopping", {{"signal", number == SIGTERM ? "SIGTERM" : "SIGINT"}});
        asio::post(io, stop_readers);
      }
    }
  });

  auto work = asio::make_work_guard(io);
  std::thread io_thread([&] {
    for (;;) {
      try {
        io.run();
        return;
      } catch (const std::exception& e) {
        log.error("reader failure", {{"error", e.what()}});
      }
    }
  });
  ready = true;
  int status = 0;
  try {
    loop.run();
  } catch (const std::exception& e) {
    log.error("scan failure", {{"error", e.what()}});
    status = 2;
  }
  ready = false;
  // Resolve nothing on the way out: Alertmanager resolves what is not re-sent. Deliver
  // what is pending, within the drain timeout.
  rules.tick(RuleEngine::Clock::now());
  const auto drain_deadline = Clock::now() + config.drain_timeout;
  for (auto& out : outputs) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(drain_deadline - Clock::now());
    if (!out->drain(std::max(left, std::chrono::milliseconds(0))))
      log.warn("output not drained in time", {{"output", out->name()}, {"queued", std::to_string(out->stats().queued)}});
  }
  work.reset();
  io.stop();
  io_thread.join();
  for (auto& f : followers) {
    try {
      f->save_state();
    } catch (const Error& e) {
      log.error("state not saved", {{"error", e.what()}});
      status = 2;
    }
  }
  ops.stop();
  const unsigned char end = 0;
  [[maybe_unused]] const ssize_t w = ::write(g_signal_pipe[1], &end, 1);
  control.join();
  char busy[32];
  std::snprintf(busy, sizeof busy, "%.6f", loop.busy_seconds());
  log.info("gpufilterd stopped", {{"bytes_scanned", std::to_string(loop.bytes_scanned())},
                                  {"batches", std::to_string(loop.batches())},
                                  {"scan_busy_seconds", busy}});
  if (engines.device_opened()) std::_Exit(status);  // as gpufilter: the driver's teardown adds nothing
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  std::string config_path;
  bool check = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--config" && i + 1 < argc) config_path = argv[++i];
    else if (a.rfind("--config=", 0) == 0) config_path = a.substr(9);
    else if (a == "--check") check = true;
    else if (a == "--help") return usage(0);
    else if (a == "--version") {
      std::puts("gpufilterd " GPUFILTER_VERSION);
      return 0;
    } else {
      std::fprintf(stderr, "gpufilterd: unknown argument '%s'\n", a.c_str());
      return usage(2);
    }
  }
  if (config_path.empty()) return usage(2);
  if (check) {
    try {
      const DaemonConfig c = load_config(config_path);
      std::printf("%s: %zu sources, %zu rules, %zu outputs\n", config_path.c_str(), c.sources.size(), c.rules.size(),
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
    return run(config_path);
  } catch (const std::exception& e) {
    Log log;
    log.error("cannot start", {{"error", e.what()}});
    return 2;
  }
}
