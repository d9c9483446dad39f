// gpufilterd's configuration: a YAML file (yaml-cpp), validated strictly. An unknown key,
// a wrong type or a bad value is a ConfigError naming the file, the line and the key:
//   rules.yaml:14: rules[2].threshold.window: "5x" is not a duration (like 30s, 5m, 250ms)
// docs/DAEMON.md documents every key; examples/daemon/ has a complete file.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gpufilter/daemon/log.hpp"

namespace gpufilter::daemon {

using Millis = std::chrono::milliseconds;

struct SourceConfig {
  enum class Kind { kFollow, kListen, kStdin };
  Kind kind = Kind::kFollow;
  std::vector<std::string> paths;  // follow: the files
  std::string url;                 // listen: tcp://, udp://, unix:
  std::string state;               // follow: the --state file ("" none)
  bool from_start = false;         // follow
  std::optional<Millis> poll_interval;  // follow: poll instead of inotify
  bool operator==(const SourceConfig&) const = default;
};

struct ThresholdConfig {
  std::uint64_t count = 1;  // matches ...
  Millis window{0};         // ... within this sliding window (0: every match counts at once)
  enum class GroupBy { kNone, kSource, kField };
  GroupBy group_by = GroupBy::kNone;
  std::string field_after;  // kField: the group is the token after this prefix in the line
  bool operator==(const ThresholdConfig&) const = default;
};

struct RuleConfig {
  std::string name;
  std::vector<std::string> patterns;  // inline ones, then the patterns file's lines
  bool ignore_case = false;
  bool word = false;
  bool invert = false;  // the rule matches lines holding none of its patterns
  ThresholdConfig threshold;
  std::string severity = "warning";
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  Millis cooldown{60000};         // after an alert, at most one per group per this interval
  Millis resolve_after{300000};   // a group with no match for this long is resolved
  std::string where;              // "FILE:LINE" of the rule, for messages
  // Same definition (where aside): a reload keeps such a rule's threshold state.
  bool same_as(const RuleConfig& other) const;
};

struct OutputConfig {
  enum class Kind { kJsonl, kAlertmanager, kWebhook };
  Kind kind = Kind::kJsonl;
  std::string name;  // defaults to the kind
  std::string path = "-";  // jsonl: "-" is standard output
  std::string url;         // alertmanager, webhook
  Millis resend_interval{60000};  // alertmanager
  Millis timeout{5000};
  std::string bearer_token_env;  // webhook: the variable holding the token
  std::size_t queue = 10000;
  bool operator==(const OutputConfig&) const = default;
};

struct DaemonConfig {
  std::string path;  // the file it came from
  std::vector<SourceConfig> sources;
  std::vector<RuleConfig> rules;
  std::vector<OutputConfig> outputs;
  std::string server = "127.0.0.1:9464";  // /metrics, /healthz, /readyz, /-/reload
  std::string generator_url;              // "": http://ADDRESS/ of the bound server
  Log::Format log_format = Log::Format::kLogfmt;
  std::string engine = "auto";            // auto (a GPU if there is one), gpu, cpu
  std::string device;                     // as gpufilter --device
  std::size_t max_line_bytes = 1u << 20;
  std::size_t max_connections = 1024;
  Millis drain_timeout{10000};            // SIGTERM: how long pending alerts may take
};

// Reads and validates `path`. Throws ConfigError ("FILE:LINE: key: why").
DaemonConfig load_config(const std::string& path);
// "30s", "5m", "250ms", "1h", "2d", or a number of seconds; nullopt when not a duration.
std::optional<Millis> parse_duration(const std::string& text);

}  // namespace gpufilter::daemon
