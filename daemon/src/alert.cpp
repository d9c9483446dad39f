// Alert to text: RFC 3339 timestamps, JSON string literals and the alert_json() object that
// the JSON-lines and webhook outputs send (docs/ALERTS.md documents the schema).
#include "gpufilter/daemon/alert.hpp"

#include "gpufilter/sinks/json.hpp"

#include <charconv>
#include <chrono>
#include <cstdio>

namespace gpufilter::daemon {
namespace {

void append_number(std::string& out, std::uint64_t value) {
  char digits[24];
  const auto r = std::to_chars(digits, digits + sizeof digits, value);
  out.append(digits, static_cast<std::size_t>(r.ptr - digits));
}

void append_quoted(std::string& out, const std::string& text) { json::append_quoted(out, text); }

void append_object(std::string& out, const std::map<std::string, std::string>& map) {
  out += '{';
  bool first = true;
  for (const auto& [key, value] : map) {
    if (!first) out += ',';
    first = false;
    append_quoted(out, key);
    out += ':';
    append_quoted(out, value);
  }
  out += '}';
}

}  // namespace

std::string rfc3339(SystemClock::time_point t) {
  using namespace std::chrono;
  // floor, not duration_cast: a time before 1970 still lands on the right day and second.
  const auto ms = floor<milliseconds>(t);
  const auto day = floor<days>(ms);
  const year_month_day date{day};
  const hh_mm_ss clock{ms - day};
  char text[48];
  std::snprintf(text, sizeof text, "%04d-%02u-%02uT%02d:%02d:%02d.%03dZ", static_cast<int>(date.year()),
                static_cast<unsigned>(date.month()), static_cast<unsigned>(date.day()),
                static_cast<int>(clock.hours().count()), static_cast<int>(clock.minutes().count()),
                static_cast<int>(clock.seconds().count()), static_cast<int>(clock.subseconds().count()));
  return text;
}

std::string json_quote(const std::string& text) {
  std::string out;
  out.reserve(text.size() + 2);
  append_quoted(out, text);
  return out;
}

std::string alert_json(const Alert& alert) {
  const bool resolved = alert.state == Alert::State::kResolved;
  std::string out;
  out.reserve(256 + alert.line.size());
  out += "{\"state\":";
  out += resolved ? "\"resolved\"" : "\"firing\"";
  out += ",\"rule\":";
  append_quoted(out, alert.rule);
  out += ",\"severity\":";
  append_quoted(out, alert.severity);
  out += ",\"group\":";
  append_quoted(out, alert.group);
  out += ",\"labels\":";
  append_object(out, alert.labels);
  out += ",\"annotations\":";
  append_object(out, alert.annotations);
  out += ",\"source\":";
  append_quoted(out, alert.source);
  out += ",\"line\":";
  append_quoted(out, alert.line);
  out += ",\"matches\":";
  append_number(out, alert.matches);
  out += ",\"suppressed\":";
  append_number(out, alert.suppressed);
  out += ",\"starts_at\":\"";
  out += rfc3339(alert.starts_at);
  out += '"';
  if (resolved) {
    out += ",\"ends_at\":\"";
    out += rfc3339(alert.ends_at);
    out += '"';
  }
  out += ",\"fingerprint\":";
  append_quoted(out, alert.fingerprint);
  out += '}';
  return out;
}

}  // namespace gpufilter::daemon
