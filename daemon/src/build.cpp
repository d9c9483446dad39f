// gpufilterd's build steps: the scan engine from `rules` and `engine`, the outputs from
// `outputs`, and the description of every metric (daemon.hpp).
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

#include "daemon.hpp"
#include "gpufilter/core/errors.hpp"

namespace gpufilter::daemon {

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

namespace {

// gpufilterd creates no directory: only the files the configuration names. A state or
// alert file whose directory is missing is refused at start, with the path named, rather
// than created (a mistyped path once made a directory at the filesystem root, owned by
// the daemon's user). systemd's StateDirectory= or a volume provides the directories.
void require_parent_directories(const DaemonConfig& config) {
  auto require = [&](const std::string& key, const std::string& file) {
    const std::filesystem::path parent = std::filesystem::path(file).parent_path();
    if (parent.empty()) return;  // the working directory, which exists
    std::error_code ec;
    if (std::filesystem::is_directory(parent, ec)) return;
    throw ConfigError(config.path + ": " + key + ": " + file + ": refused: the directory " + parent.string() +
                      " does not exist (gpufilterd creates no directories); fix: create it");
  };
  for (std::size_t i = 0; i < config.sources.size(); ++i)
    if (!config.sources[i].state.empty()) require("sources[" + std::to_string(i) + "].state", config.sources[i].state);
  for (std::size_t i = 0; i < config.outputs.size(); ++i) {
    const OutputConfig& o = config.outputs[i];
    if (o.kind == OutputConfig::Kind::kJsonl && o.path != "-") require("outputs[" + std::to_string(i) + "].path", o.path);
  }
}

}  // namespace

Outputs build_outputs(const DaemonConfig& config) {
  require_parent_directories(config);
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
        am.tls = o.tls;
        outputs.push_back(make_alertmanager_output(o.name, am));
        break;
      }
      case OutputConfig::Kind::kWebhook: {
        WebhookConfig wh;
        wh.url = o.url;
        wh.timeout = o.timeout;
        wh.queue = queue;
        wh.tls = o.tls;
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
      case OutputConfig::Kind::kKafka: outputs.push_back(make_kafka_output(o.name, kafka_output_config(o))); break;
      case OutputConfig::Kind::kExec: {
        ExecOutputConfig ex;
        ex.fire = o.fire;
        ex.resolve = o.resolve;
        ex.timeout = o.timeout;
        ex.concurrency = o.concurrency;
        ex.queue = queue;
        outputs.push_back(make_exec_output(o.name, ex));
        break;
      }
    }
  }
  return built;
}

DeliveryGate::Mark OutputsGate::mark() const {
  Mark mark;
  for (const auto& out : outputs_) mark.push_back(out->stats().published);
  return mark;
}

bool OutputsGate::settled(const Mark& mark) const {
  for (std::size_t i = 0; i < outputs_.size() && i < mark.size(); ++i) {
    const OutputStats s = outputs_[i]->stats();
    if (s.settled < mark[i]) return false;
  }
  return true;
}

bool OutputsGate::congested() const {
  for (const auto& out : outputs_) {
    const OutputStats s = out->stats();
    if (s.capacity > 0 && 2 * s.queued >= s.capacity) return true;
  }
  return false;
}

void describe_metrics(Metrics& m) {
  using T = Metrics::Type;
  m.describe("gpufilterd_lines_scanned_total", T::kCounter,
             "Lines scanned, by source (a file, tcp/udp/unix, stdin, or a capture).");
  m.describe("gpufilterd_bytes_scanned_total", T::kCounter, "Bytes scanned, by source.");
  m.describe("gpufilterd_rule_matches_total", T::kCounter, "Lines that matched a rule, by rule.");
  m.describe("gpufilterd_alerts_total", T::kCounter, "Alerts emitted, by rule and state (firing, resolved).");
  m.describe("gpufilterd_alerts_suppressed_total", T::kCounter, "Matches not alerted during a cooldown, by rule.");
  m.describe("gpufilterd_rule_groups_overflowed_total", T::kCounter,
             "Matches counted in the group (other) because the rule tracked 10,000 groups already.");
  m.describe("gpufilterd_output_published_total", T::kCounter, "Alerts (and, for a kafka output sending records, records) given to an output.");
  m.describe("gpufilterd_output_delivered_total", T::kCounter, "Deliveries an output completed.");
  m.describe("gpufilterd_output_failures_total", T::kCounter, "Delivery attempts that failed (retries count).");
  m.describe("gpufilterd_output_dropped_total", T::kCounter,
             "Alerts dropped, by output and reason: queue_full, rejected (a 4xx answer), or shutdown "
             "(still queued when drain_timeout passed).");
  m.describe("gpufilterd_output_queue_depth", T::kGauge, "Alerts waiting in an output's queue.");
  m.describe("gpufilterd_source_lines_too_long_total", T::kCounter, "Lines over max_line_bytes, dropped.");
  m.describe("gpufilterd_source_datagrams_dropped_total", T::kCounter,
             "UDP datagrams dropped (no room, or the socket buffer overflowed).");
  m.describe("gpufilterd_source_connections_total", T::kCounter, "Connections accepted.");
  m.describe("gpufilterd_source_connections_refused_total", T::kCounter, "Connections refused over max_connections.");
  m.describe("gpufilterd_source_connections_lost_total", T::kCounter,
             "Connections accepted but closed before anything was read.");
  m.describe("gpufilterd_source_rotations_total", T::kCounter, "Followed files replaced by rotation.");
  m.describe("gpufilterd_source_packets_total", T::kCounter,
             "Packets read from the captures (after their BPF filters).");
  m.describe("gpufilterd_source_tcp_flows_total", T::kCounter, "TCP flows seen by the captures with stream: true.");
  m.describe("gpufilterd_source_tcp_gaps_total", T::kCounter,
             "Gaps (bytes never captured) skipped in TCP flows of the captures with stream: true.");
  m.describe("gpufilterd_source_json_invalid_total", T::kCounter,
             "Records of format: json sources that were not a JSON object (or too long): matched as text.");
  m.describe("gpufilterd_journal_entries_total", T::kCounter, "Entries read from the journal sources (journalctl).");
  m.describe("gpufilterd_journal_entries_invalid_total", T::kCounter,
             "Journal entries not read: not a JSON object, or their line longer than max_line_bytes.");
  m.describe("gpufilterd_kafka_records_total", T::kCounter, "Records read from the kafka sources.");
  m.describe("gpufilterd_kafka_bytes_total", T::kCounter, "Bytes of the records' values read from the kafka sources.");
  m.describe("gpufilterd_kafka_rebalances_total", T::kCounter, "Partition assignments and revocations.");
  m.describe("gpufilterd_kafka_commits_total", T::kCounter, "Offset commits that succeeded.");
  m.describe("gpufilterd_kafka_commit_failures_total", T::kCounter, "Offset commits that failed.");
  m.describe("gpufilterd_kafka_consumer_lag", T::kGauge,
             "Records behind the end of the assigned partitions (librdkafka's statistics, each second).");
  m.describe("gpufilterd_kafka_partitions", T::kGauge, "Partitions assigned to this instance now.");
  m.describe("gpufilterd_batch_latency_seconds", T::kHistogram, "From a batch's submit to its delivery.",
             {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1});
  m.describe("gpufilterd_scan_busy_seconds_total", T::kCounter, "Seconds with a batch in flight on the scan engine.");
  m.describe("gpufilterd_device_utilization_ratio", T::kGauge,
             "Share of the last interval with a batch in flight on the engine (0 to 1).");
  m.describe("gpufilterd_device_info", T::kGauge, "The scan engine and device (value 1).");
  m.describe("gpufilterd_device_faults_total", T::kCounter,
             "OpenCL device failures; after one the engine scans on the host, losing nothing.");
  m.describe("gpufilterd_fail2ban_regex_limits_total", T::kCounter,
             "fail2ban regex searches PCRE2 stopped at its raised limits (their lines count as not "
             "matched; Python's re would have gone on).");
  m.describe("gpufilterd_rules", T::kGauge, "Rules loaded.");
  m.describe("gpufilterd_patterns", T::kGauge, "Patterns compiled into the one scan.");
  m.describe("gpufilterd_config_reloads_total", T::kCounter, "Reloads, by result (success, failure).");
  m.describe("gpufilterd_config_last_reload_successful", T::kGauge, "1 if the last reload succeeded, else 0.");
}

}  // namespace gpufilter::daemon
