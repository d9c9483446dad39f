// Alert to text: RFC 3339 timestamps, JSON string literals and the alert_json() object that
// the JSON-lines and webhook outputs send (docs/ALERTS.md documents the schema).
#include "gpufilter/daemon/alert.hpp"

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

// Length of the valid UTF-8 sequence at s[i], or 0 (RFC 3629: no overlong forms, no
// surrogates, nothing past U+10FFFF). The same rule as sinks/json_printer.cpp, which the
// daemon does not link.
std::size_t utf8_length(const std::string& s, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  const std::size_t left = s.size() - i;
  const auto cont = [&](std::size_t k) { return (byte(i + k) & 0xC0) == 0x80; };
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return left >= 2 && cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (left < 3 || !cont(1) || !cont(2)) return 0;
    const unsigned char c1 = byte(i + 1);
    if (c == 0xE0 && c1 < 0xA0) return 0;  // overlong
    if (c == 0xED && c1 > 0x9F) return 0;  // surrogates
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (left < 4 || !cont(1) || !cont(2) || !cont(3)) return 0;
    const unsigned char c1 = byte(i + 1);
    if (c == 0xF0 && c1 < 0x90) return 0;  // overlong
    if (c == 0xF4 && c1 > 0x8F) return 0;  // past U+10FFFF
    return 4;
  }
  return 0;
}

void append_quoted(std::string& out, const std::string& text) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (std::size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      const std::size_t n = utf8_length(text, i);
      if (n == 0) {
        out += "\xEF\xBF\xBD";  // U+FFFD, one per byte that is not part of valid UTF-8
        ++i;
      } else {
        out.append(text, i, n);
        i += n;
      }
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += static_cast<char>(c);
        }
    }
    ++i;
  }
  out += '"';
}

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
