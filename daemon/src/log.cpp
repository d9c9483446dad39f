// Log: one structured line per call (log.hpp), logfmt or JSON, written with one write(2)
// under a mutex so that lines from several threads never interleave, and a reader on a
// pipe (journald, a container runtime) sees whole lines.
//
// Values come from the outside world (file names, peers, matched log lines), so both
// formats escape everything that could break a line in two or fake a field: logfmt quotes
// and escapes, JSON escapes control characters and replaces invalid UTF-8, which JSON
// parsers reject, with U+FFFD.
#include "gpufilter/daemon/log.hpp"

#include "gpufilter/sinks/json.hpp"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <ctime>

namespace gpufilter::daemon {

namespace {

// 2026-11-21T09:58:04.123Z: RFC 3339 in UTC with milliseconds, what log shippers parse.
std::string timestamp() {
  const auto now = std::chrono::system_clock::now();
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  const std::time_t seconds = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  ::gmtime_r(&seconds, &tm);
  char text[96];  // room for any int GCC can imagine, not just the 24 bytes used
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms % 1000));
  return text;
}

void append_hex_escape(std::string& out, unsigned char c) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += "\\u00";
  out += kHex[c >> 4];
  out += kHex[c & 0xf];
}

// ---------------------------------------------------------------------------------------
// logfmt

// A key is a bare word: anything that would end it early or start a value becomes '_'.
void append_logfmt_key(std::string& out, std::string_view key) {
  if (key.empty()) {
    out += '_';
    return;
  }
  for (const char c : key) {
    const auto u = static_cast<unsigned char>(c);
    out += (u <= ' ' || c == '=' || c == '"' || u == 0x7f) ? '_' : c;
  }
}

// Bare when it is one plain word, else quoted with \" \\ \n \r \t and \u00XX escapes.
void append_logfmt_value(std::string& out, std::string_view value) {
  bool quote = value.empty();
  for (const char c : value) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= ' ' || c == '=' || c == '"' || c == '\\' || u == 0x7f) {
      quote = true;
      break;
    }
  }
  if (!quote) {
    out += value;
    return;
  }
  out += '"';
  for (const char c : value) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (u < ' ' || u == 0x7f) append_hex_escape(out, u);
        else out += c;
    }
  }
  out += '"';
}

// The whole line in one write(2): a blocking pipe or terminal takes it at once; the loop
// only covers signals and short writes. A log that cannot be written is dropped, as
// there is nowhere left to report it.
void write_all(int fd, const std::string& line) {
  std::size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(fd, line.data() + done, line.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace

void Log::write(std::string_view level, std::string_view message, const Fields& fields) {
  const std::string time = timestamp();
  std::lock_guard lock(mutex_);
  std::string line;
  line.reserve(64 + message.size() + fields.size() * 24);
  if (format_ == Format::kJson) {
    line += "{\"time\":";
    json::append_quoted(line, time);
    line += ",\"level\":";
    json::append_quoted(line, level);
    line += ",\"msg\":";
    json::append_quoted(line, message);
    for (const auto& [key, value] : fields) {
      line += ',';
      json::append_quoted(line, key);
      line += ':';
      json::append_quoted(line, value);
    }
    line += '}';
  } else {
    line += "time=";
    line += time;
    line += " level=";
    append_logfmt_value(line, level);
    line += " msg=";
    append_logfmt_value(line, message);
    for (const auto& [key, value] : fields) {
      line += ' ';
      append_logfmt_key(line, key);
      line += '=';
      append_logfmt_value(line, value);
    }
  }
  line += '\n';
  write_all(fd_, line);
}

}  // namespace gpufilter::daemon
