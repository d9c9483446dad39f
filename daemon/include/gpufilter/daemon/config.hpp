// gpufilterd's configuration: a YAML file (yaml-cpp), validated strictly. An unknown key,
// a wrong type or a bad value is a ConfigError naming the file, the line and the key:
//   rules.yaml:14: rules[2].threshold.window: "5x" is not a duration (like 30s, 5m, 250ms)
// The files it reads (the configuration, patterns files, token files) are checked before
// their bytes are used, as ssh's StrictModes does: a file that someone other than its
// owner could have changed is refused. docs/DAEMON.md documents every key and the checks;
// examples/daemon/ has a complete file.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gpufilter/regex/syntax.hpp"

#include "gpufilter/daemon/log.hpp"
#include "gpufilter/daemon/multiline.hpp"
#include "gpufilter/daemon/outputs.hpp"

namespace gpufilter::daemon {

using Millis = std::chrono::milliseconds;

// A `kafka:` source (sources/kafka_source.hpp) or output: librdkafka's properties beyond ours come
// from `settings` (anything that is no secret) and `secrets_file` (a file only gpufilterd
// can read, with `key=value` lines: sasl.password, ssl.key.password ...).
struct KafkaClientConfig {
  std::string brokers;
  std::vector<std::string> topics;
  std::string group_id;
  std::map<std::string, std::string> settings;
  std::string secrets_file;  // "" none
  bool operator==(const KafkaClientConfig&) const = default;
};

// `journal:` the systemd journal through journalctl (JournalReader), as fail2ban's systemd
// backend reads it.
struct JournalSourceConfig {
  std::string journalctl = "journalctl";
  std::string directory;
  std::vector<std::string> files;
  std::vector<std::string> matches;  // journalctl's: FIELD=VALUE, "+" between alternatives
  bool system_only = false;
  std::string ns;
  std::optional<Millis> since;  // entries from this long before the start on
  bool from_start = false;
  bool follow = true;
  std::string name = "journal";  // the stream's (a jail's: "journal:JAIL", its rule's only source)
  bool operator==(const JournalSourceConfig&) const = default;
};

struct SourceConfig {
  enum class Kind { kFollow, kListen, kStdin, kPcap, kInterface, kKafka, kJournal };
  Kind kind = Kind::kFollow;
  std::vector<std::string> paths;  // follow: the files
  std::string url;                 // listen: tcp://, udp://, unix:
  std::string state;               // follow: the --state file ("" none)
  bool from_start = false;         // follow
  std::optional<Millis> poll_interval;  // follow: poll instead of inotify
  std::string capture;             // pcap: the capture file; interface: the interface's name
  std::string bpf;                 // pcap, interface: a BPF filter ("" none)
  bool stream = false;             // pcap, interface: per TCP flow direction, not per packet
  KafkaClientConfig kafka;         // kafka
  JournalSourceConfig journal;     // journal
  // follow, stdin, kafka: lines joined into records (multiline.hpp); none when unset.
  std::optional<MultilineConfig> multiline;
  // follow, stdin, kafka: `format: json`: each record is parsed as a JSON object (at most
  // json_max_bytes); its fields reach the rules (json.NAME, rules' field:). A record that
  // is not one is counted and matched as text.
  bool json = false;
  std::size_t json_max_bytes = 1u << 20;
  bool operator==(const SourceConfig&) const = default;
};

struct ThresholdConfig {
  std::uint64_t count = 1;  // matches ...
  Millis window{0};         // ... within this sliding window (0: every match counts at once)
  enum class GroupBy { kNone, kSource, kField, kCapture };
  GroupBy group_by = GroupBy::kNone;
  std::string field_after;  // kField: the group is the token after this prefix in the line
  std::string capture;      // kCapture: the group is what this named group of the rule's regex took
  // A fail2ban jail's counting (failmanager.py, banmanager.py) instead of the sliding window
  // and the cooldown: count = maxretry, window = findtime, the rule's cooldown = bantime.
  bool fail2ban = false;
  bool operator==(const ThresholdConfig&) const = default;
};

// A rule's event time: what the named group `capture` took, read with strptime `format`
// (UTC unless the format reads a zone with %z; the current year when it reads none).
struct EventTimeConfig {
  std::string capture;
  std::string format;
  bool operator==(const EventTimeConfig&) const = default;
};

struct RuleConfig {
  std::string name;
  std::vector<std::string> patterns;  // inline ones, then the patterns file's lines
  // Or regular expressions (regex:, then regex_file:'s lines), in `syntax` (perl: PCRE2 with
  // named groups and fail2ban's <HOST>; extended and basic: grep -E and grep -G).
  std::vector<std::string> regexes;
  regex::Syntax syntax = regex::Syntax::kPerl;
  std::optional<EventTimeConfig> event_time;  // thresholds and startsAt follow the log's clock
  bool ignore_case = false;
  bool word = false;
  bool invert = false;  // the rule matches lines holding none of its patterns
  // A field of a `format: json` source's records (dotted for nested objects: "http.path"):
  // the rule matches that field's decoded value, not the line ("": the line).
  std::string field;
  // Or a fail2ban filter (docs/DAEMON.md): its name in fail2ban_dir/filter.d/ or a path,
  // with the jail's options (mode: aggressive). Each failure it finds in a line is a match,
  // grouped by the failure's address ({{host}}), at the time the line says.
  std::string fail2ban_filter;
  std::map<std::string, std::string> fail2ban_options;
  std::string fail2ban_dir = "/etc/fail2ban";
  // A jail's ignoreip (fail2ban::parse_ignore: addresses, CIDR, names as text): failures
  // of these hosts are not counted. Only for fail2ban_filter rules.
  std::vector<std::string> ignore_hosts;
  // The sources whose lines the rule reads (their names: a followed file's path); empty:
  // every source. A jail reads only its logpath files.
  std::vector<std::string> only_sources;
  ThresholdConfig threshold;
  std::string severity = "warning";
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  Millis cooldown{60000};         // after an alert, at most one per group per this interval
  Millis resolve_after{300000};   // a group with no match for this long is resolved
  std::string where;              // "FILE:LINE" of the rule, for messages
  // Same definition (where aside): a reload keeps such a rule's threshold state.
  bool same_as(const RuleConfig& other) const;
  // Its windows and cooldowns follow the log's clock: a `time:` capture, a fail2ban
  // filter's dates (the threshold's pruning and the alert state read this).
  bool log_clock() const { return event_time.has_value() || !fail2ban_filter.empty(); }
};

struct OutputConfig {
  enum class Kind { kJsonl, kAlertmanager, kWebhook, kKafka, kExec };
  Kind kind = Kind::kJsonl;
  std::string name;  // defaults to the kind
  std::string path = "-";  // jsonl: "-" is standard output
  std::string url;         // alertmanager, webhook
  Millis resend_interval{60000};  // alertmanager
  Millis timeout{5000};
  // webhook: where the bearer token is (never in the configuration itself): the name of
  // an environment variable, or a file (read with read_bearer_token()); at most one.
  std::string bearer_token_env;
  std::string bearer_token_file;
  std::size_t queue = 10000;
  Millis retry_backoff{200};        // the first retry's delay, doubled per failure ...
  Millis retry_max_backoff{30000};  // ... up to this
  TlsConfig tls;  // https:// alertmanager and webhook URLs: CA, client certificate, name check
  KafkaClientConfig kafka;  // kafka: brokers, topics[0] (the topic), settings, secrets_file
  std::string key_label;    // kafka: the label whose value keys the record ("": the group)
  bool send_alerts = true;   // kafka `send`: alerts, records, or both
  bool send_records = false;
  std::string record_key;    // kafka: the template whose value keys a selected record
  // exec: the argument vectors run per firing and per resolved alert (fire[0] and
  // resolve[0] are absolute paths once validated: find_exec_command), at most
  // `concurrency` at once; `timeout` is per command (10s).
  std::vector<std::string> fire;
  std::vector<std::string> resolve;
  std::size_t concurrency = 4;
  bool operator==(const OutputConfig&) const = default;
};

struct DaemonConfig {
  std::string path;  // the file it came from
  std::vector<SourceConfig> sources;
  std::vector<RuleConfig> rules;
  std::vector<OutputConfig> outputs;
  std::string server = "127.0.0.1:9464";  // /metrics, /healthz, /readyz, /-/reload
  bool reload_endpoint = false;           // POST /-/reload reloads (else 403: read-only)
  std::string generator_url;              // "": http://ADDRESS/ of the bound server
  Log::Format log_format = Log::Format::kLogfmt;
  std::string engine = "auto";            // auto (a GPU if there is one), gpu, cpu
  std::string device;                     // as gpufilter --device
  std::size_t max_line_bytes = 1u << 20;
  std::size_t max_connections = 1024;
  Millis drain_timeout{10000};            // SIGTERM: how long pending alerts may take
  // Where the rules' state (threshold windows, cooldowns, firing alerts) is kept across
  // restarts ("": not kept); saved every second while it changes and at the stop.
  std::string alert_state;
};

// Reads `path` (read_checked_file, kConfig) and validates it. Throws ConfigError
// ("FILE:LINE: key: why", or "FILE: why" for the file itself). The one validation:
// --check, the start and a reload all call it, so it refuses everything the build steps
// would refuse from the file (duplicate keys, output URLs, files that cannot be created,
// the server address), with the same message.
DaemonConfig load_config(const std::string& path);
// Validates `yaml` as if it were the content of the file `path` (messages name `path`,
// relative paths are relative to its directory); patterns and token files are still read
// from disk, and checked. For tests and fuzzing; load_config() is this after the read.
DaemonConfig parse_config(const std::string& yaml, const std::string& path);

// How much a file must be protected before gpufilterd uses it.
enum class FileTrust {
  kConfig,  // the configuration, a patterns file: owner root or us; nobody else may write
  kSecret,  // a token file: as kConfig, and nobody else may read it either
};
// The content of `path`, read through one descriptor that was checked (fstat) first: its
// owner must be root or the effective user of this process, and neither group nor others
// may write it (kSecret: nor read it). Throws ConfigError naming the file and the fix
// ("chmod go-w FILE"), or saying it cannot be read, or is larger than `limit` bytes.
std::string read_checked_file(const std::string& path, FileTrust trust, std::size_t limit);

// The bearer token of a webhook output: the value of bearer_token_env, or the content of
// bearer_token_file (read_checked_file, kSecret) without its trailing newline; "" when
// neither is set. Throws ConfigError naming the variable or the file (never the token)
// when the variable is unset or empty, the file is refused, or the token is empty or
// holds a space or a control character (it goes into an HTTP header).
std::string read_bearer_token(const OutputConfig& output);
// A kafka source's secret librdkafka properties: the `key=value` lines of `secrets_file`
// (read_checked_file, kSecret; blank lines and '#' comments skipped; none without one).
// Throws ConfigError naming the file and line (never a value).
std::vector<std::pair<std::string, std::string>> kafka_secrets(const KafkaClientConfig& kafka);
// Whether a rule reads a Kafka record's fields ({{kafka.key}} in a label, group_by
// {capture: kafka.partition} ...): the kafka sources then hand them on with each record.
bool reads_kafka_fields(const std::vector<RuleConfig>& rules);
// A kafka output's producer settings, its secrets read (kafka_secrets).
KafkaOutputConfig kafka_output_config(const OutputConfig& output);
// "30s", "5m", "250ms", "1h", "2d", or a number of seconds; nullopt when not a duration
// (also inf, nan, and anything over 100 years).
std::optional<Millis> parse_duration(const std::string& text);
// A duration's text that names more than parse_duration() takes (100 years).
bool duration_too_long(const std::string& text);

}  // namespace gpufilter::daemon
