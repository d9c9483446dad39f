// Alert: what gpufilterd's rules emit and its outputs deliver. docs/ALERTS.md documents
// the JSON schema (alert_json) that the JSON-lines and webhook outputs send.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace gpufilter::daemon {

using SystemClock = std::chrono::system_clock;

struct Alert {
  enum class State { kFiring, kResolved };
  State state = State::kFiring;
  std::string rule;      // the rule's name (label alertname)
  std::string severity;  // the rule's severity (label severity)
  // Group: the value the rule groups by (the source name, or the token after a prefix);
  // empty when the rule is not grouped. One alert per (rule, group) at a time.
  std::string group;
  std::map<std::string, std::string> labels;       // rule labels + alertname, severity, group
  std::map<std::string, std::string> annotations;  // rule annotations
  std::string source;  // the input of the line that fired it ("auth.log", "tcp://...")
  std::string line;    // that line (firing); the last matching line (resolved)
  std::uint64_t matches = 0;     // matches in the window when it fired
  std::uint64_t suppressed = 0;  // matches of this group not alerted (cooldown) since the last alert
  SystemClock::time_point starts_at{};  // when the group started firing
  SystemClock::time_point ends_at{};    // resolved: when it was resolved; firing: unset (epoch)
  std::string fingerprint;  // stable per (rule, group): hex of a hash of both
};

// A record (a line, or a multiline source's joined lines) that one or more rules
// matched, before thresholds and cooldowns: what an output that takes records (a kafka
// output's `send: records`) forwards. Valid only during the call it is given to.
struct SelectedRecord {
  std::string_view source;              // its input ("kafka:logs/3", "auth.log")
  std::string_view text;                // the record, without its final '\n'
  std::vector<std::string_view> rules;  // the names of the rules that matched it, in order
  // Its fields (kafka.key, json.NAME ...) and what the named groups of the first regex
  // rule that matched it took: what {{NAME}} in a record key reads.
  std::map<std::string, std::string> captures;
};

// A template with each {{NAME}} replaced by `values`' NAME (cut to 256 bytes: the log's
// writer chooses it); an unknown NAME is replaced by nothing. `values`: a map of strings
// to strings, or anything found by name as one (fail2ban::Fields).
template <typename Values>
std::string filled(const std::string& text, const Values& values) {
  std::string out;
  std::size_t at = 0;
  for (std::size_t open = text.find("{{"); open != std::string::npos; open = text.find("{{", at)) {
    const std::size_t close = text.find("}}", open + 2);
    if (close == std::string::npos) break;
    out.append(text, at, open - at);
    const auto it = values.find(text.substr(open + 2, close - open - 2));
    if (it != values.end()) out.append(it->second, 0, 256);
    at = close + 2;
  }
  out.append(text, at);
  return out;
}

// RFC 3339 UTC with milliseconds: "2026-11-21T09:58:04.123Z".
std::string rfc3339(SystemClock::time_point t);
// The documented JSON object of an alert (one line, no newline).
std::string alert_json(const Alert& alert);
// A JSON string literal for `text` (quotes included); invalid UTF-8 becomes U+FFFD.
std::string json_quote(const std::string& text);

}  // namespace gpufilter::daemon
