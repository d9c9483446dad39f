// Daemon (daemon.hpp): gpufilterd's run as build steps, each from its configuration block,
// then start, scan, and the stop: drain the outputs, end the readers, save the state.
#include "daemon.hpp"
#include "fail2ban_jails.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <cstdio>
#include <functional>
#include <string>

#include "gpufilter/core/errors.hpp"
#include "gpufilter/sources/follow_state.hpp"
#include "gpufilter/core/notices.hpp"

namespace gpufilter::daemon {

// An alert state file larger than this is not read (10,000 groups per rule, lines cut at
// 4 KiB: tens of MiB at the very most).
constexpr std::size_t kAlertStateLimit = 256u << 20;

namespace {

using Clock = std::chrono::steady_clock;

// Reader notices become warn log lines.
class LogNotices final : public Notices {
 public:
  explicit LogNotices(Log& log) : log_(log) {}
  void notice(std::string_view message) override { log_.warn(message); }

 private:
  Log& log_;
};

FollowConfig follow_config(const SourceConfig& s, std::size_t max_line_bytes) {
  FollowConfig f;
  f.paths = s.paths;
  f.from_start = s.from_start;
  f.state_path = s.state;
  if (s.poll_interval) {
    f.use_inotify = false;
    f.poll_interval = *s.poll_interval;
  }
  f.max_line_bytes = max_line_bytes;
  return f;
}

// A capture's open flows count like connections: at most max_connections, so that the
// flows' partial lines (up to max_line_bytes each way) stay bounded as the listener's do.
CaptureConfig capture_config(const SourceConfig& s, const DaemonConfig& config) {
  CaptureConfig c;
  (s.kind == SourceConfig::Kind::kPcap ? c.file : c.interface) = s.capture;
  c.bpf = s.bpf;
  c.stream = s.stream;
  c.max_line_bytes = config.max_line_bytes;
  c.reassembly.max_flows = config.max_connections;
  return c;
}

KafkaConfig kafka_config(const SourceConfig& s, const DaemonConfig& config, std::shared_ptr<const DeliveryGate> gate,
                         std::uint32_t origin) {
  KafkaConfig k;
  k.brokers = s.kafka.brokers;
  k.topics = s.kafka.topics;
  k.group_id = s.kafka.group_id;
  k.settings.assign(s.kafka.settings.begin(), s.kafka.settings.end());
  k.secrets = kafka_secrets(s.kafka);
  k.max_line_bytes = config.max_line_bytes;
  k.gate = std::move(gate);
  k.record_fields = reads_kafka_fields(config.rules);
  k.origin = origin;
  return k;
}

}  // namespace

Daemon::Daemon(std::string config_path, SignalPipe signals)
    : config_path_(std::move(config_path)), signals_(signals) {}

Daemon::~Daemon() {
  // Only when a step threw after the control thread started: end it rather than abort.
  if (control_.joinable()) {
    const unsigned char end = 0;
    [[maybe_unused]] const ssize_t w = ::write(signals_.write, &end, 1);
    control_.join();
  }
}

bool Daemon::skip_teardown() const { return stopped_ && engines_ && engines_->device_opened(); }

int Daemon::run() {
  if (!load()) return 2;
  // The OpenCL device is opened only when an engine needs it (engines/engine.hpp).
  engines_ = std::make_unique<Engines>(config_.device);
  describe_metrics(metrics_);
  build_ops();
  if (!build_scan()) return 2;
  build_alerting();
  build_sources();
  start();
  return stop(scan());
}

bool Daemon::load() {
  try {
    config_ = load_config(config_path_);
  } catch (const Error& e) {
    log_.error("config rejected", {{"error", e.what()}});
    return false;
  }
  log_.set_format(config_.log_format);
  return true;
}

// The operations endpoint binds first: its address is the alerts' generatorURL. Its
// handlers touch only what exists before it serves (start()).
// POST /-/reload is the endpoint's one state-changing route: it exists only when the
// configuration enables it (read-only unless explicitly enabled); SIGHUP always works.
void Daemon::build_ops() {
  std::function<std::pair<bool, std::string>()> http_reload;
  if (config_.reload_endpoint) {
    http_reload = [this]() -> std::pair<bool, std::string> {
      if (!reload_ready_) return {false, "still starting"};
      return reload();
    };
  }
  OpsHandlers handlers{[this] { return ready_.load(); }, http_reload};
  ops_ = std::make_unique<OpsServer>(config_.server, metrics_, std::move(handlers));
  if (config_.generator_url.empty()) config_.generator_url = "http://" + ops_->bound() + "/";
}

bool Daemon::build_scan() {
  // Said once per engine: the scan goes on, on the host, and loses nothing. It must not throw.
  on_device_fault_ = [this](const DeviceError& e, const Chunk&) noexcept {
    try {
      metrics_.add("gpufilterd_device_faults_total", {}, 1);
      log_.warn("OpenCL device failed; scanning on the host from now on",
                {{"call", e.call()}, {"code", std::to_string(e.code())}, {"error", cl_error_name(e.code())}});
    } catch (...) {
      // Out of memory for a log line: the scan itself goes on regardless.
    }
  };
  try {
    engine_ = build_engine(config_, *engines_, on_device_fault_);
  } catch (const NoDeviceError& e) {
    log_.error("no OpenCL device", {{"error", e.what()}});
    return false;
  }
  return true;
}

// The outputs, and the rule engine that publishes each alert to every one of them.
void Daemon::build_alerting() {
  outputs_ = build_outputs(config_);
  metrics_.set("gpufilterd_device_info",
               {{"engine", std::string(engine_->engine->name())},
                {"device", engine_->engine->device_name()},
                {"reason", engine_->engine->reason()}},
               1);
  metrics_.set("gpufilterd_rules", {}, static_cast<double>(config_.rules.size()));
  metrics_.set("gpufilterd_patterns", {}, static_cast<double>(engine_->rules->patterns().size()));
  metrics_.set("gpufilterd_config_last_reload_successful", {}, 1);
  metrics_.add("gpufilterd_device_faults_total", {}, 0);
  rules_ = std::make_unique<RuleEngine>(
      engine_->rules,
      [this](const Alert& alert) {
        const char* state = alert.state == Alert::State::kFiring ? "firing" : "resolved";
        metrics_.add("gpufilterd_alerts_total", {{"rule", alert.rule}, {"state", state}}, 1);
        for (auto& out : outputs_.outputs) out->publish(alert);
      },
      &metrics_);
  select_records();
  // What each source asks of its records, by its index (BatchEntry::origin - 1).
  std::vector<RecordShape> shapes;
  for (const SourceConfig& s : config_.sources)
    shapes.push_back(RecordShape{s.multiline ? std::make_shared<const Multiline>(*s.multiline) : nullptr, s.json,
                                 s.json_max_bytes});
  consumer_ = std::make_unique<RuleConsumer>(*rules_, &metrics_, std::move(shapes));
  restore_alert_state();
}

// Outputs that take records (kafka `send: records`) get every record a rule matched, in
// the scan's order, before the scan acknowledges it (so a kafka source's offsets wait for
// them as for alerts). Named groups are read only when a record_key asks for a {{NAME}}.
void Daemon::select_records() {
  bool any = false;
  bool captures = false;
  for (const OutputConfig& o : config_.outputs) {
    any = any || o.send_records;
    captures = captures || (o.send_records && o.record_key.find("{{") != std::string::npos);
  }
  if (!any) return;
  rules_->on_selected(
      [this](const SelectedRecord& record) {
        for (auto& out : outputs_.outputs)
          if (out->takes_records()) out->publish_record(record);
      },
      captures);
}

// alert_state: the rules' windows, cooldowns and firing alerts from before the restart,
// for rules whose definition is unchanged (the outputs adopt the firing alerts: nothing
// is sent for them again); then saved by the scan thread every second while it changes
// (save_follow_state: whole or not at all), and at the stop once the outputs drained.
// A file that cannot be read or trusted is logged and the rules start afresh.
void Daemon::restore_alert_state() {
  if (config_.alert_state.empty()) return;
  const std::string& path = config_.alert_state;
  try {
    std::string text;
    // Trusted as a configuration file is: nobody else may write it.
    if (std::filesystem::exists(path)) text = read_checked_file(path, FileTrust::kConfig, kAlertStateLimit);
    if (!text.empty()) {
      const std::vector<Alert> firing = rules_->restore_state(text, RuleEngine::Clock::now(), SystemClock::now());
      for (const Alert& alert : firing)
        for (auto& out : outputs_.outputs) out->adopt(alert);
      log_.info("alert state restored", {{"file", path}, {"firing", std::to_string(firing.size())}});
    }
  } catch (const std::exception& e) {
    log_.warn("alert state not restored; the rules start afresh", {{"file", path}, {"error", e.what()}});
  }
  rules_->persist([this](const std::string& text) { save_alert_state(text); }, std::chrono::seconds(1));
}

void Daemon::save_alert_state(const std::string& text) {
  try {
    save_follow_state(config_.alert_state, text);
    if (alert_state_failing_) log_.info("alert state saved again", {{"file", config_.alert_state}});
    alert_state_failing_ = false;
  } catch (const std::exception& e) {
    if (!alert_state_failing_) log_.error("alert state not saved", {{"file", config_.alert_state}, {"error", e.what()}});
    alert_state_failing_ = true;
  }
}

// The sources as one StreamSession: a Follower per `follow` block, one Listener for every
// `listen` URL, standard input, a CaptureSource per `pcap` or `interface` block (opened
// here: a capture that cannot be opened stops the start), a KafkaSource per `kafka` block
// (its offsets wait for the outputs: OutputsGate); then the scan loop that takes
// their lines.
void Daemon::build_sources() {
  StreamSessionConfig session;
  session.channel = RecordChannel::Config{engine_->engine->scanner().chunk_bytes(), 3};
  // A daemon outlives one bad handler: log it and run the readers on.
  session.on_io_failure = StreamSessionConfig::IoFailure::kRestart;
  session.report_io_failure = [this](const std::exception& e) { log_.error("reader failure", {{"error", e.what()}}); };
  session_ = std::make_unique<StreamSession>(std::move(session));
  notices_ = std::make_unique<LogNotices>(log_);
  ListenConfig listening;
  listening.max_line_bytes = config_.max_line_bytes;
  listening.max_connections = config_.max_connections;
  std::uint32_t stdin_origin = 0;  // standard input is read once, however many stdin sources
  for (std::size_t i = 0; i < config_.sources.size(); ++i) {
    const SourceConfig& s = config_.sources[i];
    const auto origin = static_cast<std::uint32_t>(i + 1);  // BatchEntry::origin: RuleConsumer's multiline
    switch (s.kind) {
      case SourceConfig::Kind::kFollow: {
        FollowConfig f = follow_config(s, config_.max_line_bytes);
        f.origin = origin;
        session_->add_follower(std::move(f), *notices_);
        break;
      }
      case SourceConfig::Kind::kListen: listening.urls.push_back(parse_listen_url(s.url)); break;
      case SourceConfig::Kind::kStdin:
        if (stdin_origin == 0 || s.multiline) stdin_origin = origin;
        break;
      case SourceConfig::Kind::kPcap:
      case SourceConfig::Kind::kInterface:
        session_->add_capture(capture_config(s, config_), *notices_);
        break;
      case SourceConfig::Kind::kKafka:
        if (!gate_) gate_ = std::make_shared<OutputsGate>(outputs_.outputs);
        session_->add_kafka(std::make_unique<KafkaSource>(session_->channel(), kafka_config(s, config_, gate_, origin), *notices_));
        break;
      case SourceConfig::Kind::kJournal:
        session_->add_journal(journal_reader_config(s.journal, config_.max_line_bytes, origin), *notices_);
        break;
    }
  }
  if (!listening.urls.empty()) session_->add_listener(std::move(listening), *notices_);
  if (stdin_origin != 0) session_->add_stdin(config_.max_line_bytes, STDIN_FILENO, stdin_origin);
  session_->start([this](const std::string& url) { log_.info("listening", {{"url", url}}); });
  loop_ = std::make_unique<StreamScan>(engine_->engine->scanner(), *consumer_, session_->channel());
}

void Daemon::start() {
  counters_ = std::make_unique<CounterCopier>(*session_, outputs_.outputs, *loop_, metrics_, log_);
  counters_->start();
  reload_ready_ = true;
  ops_->start();
  const Engine& engine = *engine_->engine;
  log_.info("gpufilterd started",
            {{"config", config_path_},
             {"rules", std::to_string(config_.rules.size())},
             {"patterns", std::to_string(engine_->rules->patterns().size())},
             {"engine", std::string(engine.name())},
             {"device", engine.kind() == EngineKind::kDevice ? engine.device_name() : std::string("host")},
             {"engine_reason", engine.reason()},
             {"server", ops_->bound()},
             {"reload_endpoint", config_.reload_endpoint ? "enabled" : "disabled"}});
  control_ = std::thread([this] { control(); });
  session_->run_io();
  ready_ = true;
}

// The control thread: SIGHUP reloads; SIGTERM or SIGINT stops the readers.
void Daemon::control() {
  for (;;) {
    unsigned char number = 0;
    const ssize_t n = ::read(signals_.read, &number, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || number == 0) return;  // 0: stop() asks the thread to end
    if (number == SIGHUP) {
      log_.info("SIGHUP: reloading", {{"config", config_path_}});
      reload();
    } else {
      log_.info("stopping", {{"signal", number == SIGTERM ? "SIGTERM" : "SIGINT"}});
      session_->request_stop();
    }
  }
}

// Until the readers stopped and the channel finished.
int Daemon::scan() {
  try {
    loop_->run();
  } catch (const std::exception& e) {
    log_.error("scan failure", {{"error", e.what()}});
    return 2;
  }
  return 0;
}

// Delivers what is pending, within the drain timeout for all outputs together. Returns
// how many alerts are lost: those still queued when it passed end with the process, so
// they are counted (gpufilterd_output_dropped_total{reason="shutdown"}) and logged with
// their number, never dropped silently.
std::uint64_t Daemon::drain_outputs() {
  const auto drain_deadline = Clock::now() + config_.drain_timeout;
  std::uint64_t lost = 0;
  for (auto& out : outputs_.outputs) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(drain_deadline - Clock::now());
    if (out->drain(std::max(left, std::chrono::milliseconds(0)))) continue;
    const std::uint64_t queued = out->stats().queued;  // the thread has ended: final
    lost += queued;
    metrics_.set("gpufilterd_output_dropped_total", {{"output", out->name()}, {"reason", "shutdown"}},
                 static_cast<double>(queued));
    log_.error("alerts lost: drain_timeout passed with alerts queued",
               {{"output", out->name()},
                {"dropped", std::to_string(queued)},
                {"drain_timeout_ms", std::to_string(config_.drain_timeout.count())}});
  }
  return lost;
}

int Daemon::stop(int status) {
  ready_ = false;
  // Resolve nothing on the way out: Alertmanager resolves what is not re-sent.
  rules_->tick(RuleEngine::Clock::now());
  // A drain that lost alerts is a failed shutdown for whoever supervises the process.
  if (drain_outputs() > 0 && status == 0) status = 3;
  if (!config_.alert_state.empty()) {
    save_alert_state(rules_->save_state(RuleEngine::Clock::now(), SystemClock::now()));
    if (alert_state_failing_ && status == 0) status = 2;
  }
  session_->join();
  session_->save_state([&](const Error& e) {
    log_.error("state not saved", {{"error", e.what()}});
    status = 2;
  });
  ops_->stop();
  const unsigned char end = 0;
  [[maybe_unused]] const ssize_t w = ::write(signals_.write, &end, 1);
  control_.join();
  char busy[32];
  std::snprintf(busy, sizeof busy, "%.6f", loop_->busy_seconds());
  log_.info("gpufilterd stopped", {{"bytes_scanned", std::to_string(loop_->bytes_scanned())},
                                   {"batches", std::to_string(loop_->batches())},
                                   {"scan_busy_seconds", busy}});
  stopped_ = true;
  return status;
}

}  // namespace gpufilter::daemon
