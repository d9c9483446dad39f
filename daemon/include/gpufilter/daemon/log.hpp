// Log: gpufilterd's structured log lines on standard error, logfmt (default) or JSON:
//   time=2026-11-21T09:58:04.123Z level=info msg="config loaded" rules=12 patterns=3400
//   {"time":"2026-11-21T09:58:04.123Z","level":"info","msg":"config loaded","rules":"12"}
// Thread-safe; one write() per line.
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpufilter::daemon {

class Log {
 public:
  enum class Format { kLogfmt, kJson };
  using Fields = std::vector<std::pair<std::string, std::string>>;
  explicit Log(int fd = 2, Format format = Format::kLogfmt) : fd_(fd), format_(format) {}
  void set_format(Format format) { format_ = format; }
  void info(std::string_view message, const Fields& fields = {}) { write("info", message, fields); }
  void warn(std::string_view message, const Fields& fields = {}) { write("warn", message, fields); }
  void error(std::string_view message, const Fields& fields = {}) { write("error", message, fields); }
  void write(std::string_view level, std::string_view message, const Fields& fields);

 private:
  int fd_;
  std::atomic<Format> format_;
  std::mutex mutex_;
};

}  // namespace gpufilter::daemon
