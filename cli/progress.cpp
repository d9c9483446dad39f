#include "gpufilter/cli/progress.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace gpufilter::cli {
namespace {

// Decimal units, as disks and rates are quoted: "950 MB", "12.4 GB".
std::string amount(double bytes) {
  static const char* const kUnits[] = {"B", "kB", "MB", "GB", "TB", "PB"};
  std::size_t unit = 0;
  while (bytes >= 1000 && unit + 1 < sizeof kUnits / sizeof *kUnits) {
    bytes /= 1000;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 || bytes >= 100 ? "%.0f %s" : "%.1f %s", bytes, kUnits[unit]);
  return text;
}

std::string duration(double seconds) {
  const auto s = static_cast<std::uint64_t>(seconds + 0.5);
  char text[32];
  if (s < 60) std::snprintf(text, sizeof text, "%llu s", static_cast<unsigned long long>(s));
  else if (s < 3600) std::snprintf(text, sizeof text, "%llu min %02llu s", static_cast<unsigned long long>(s / 60),
                                   static_cast<unsigned long long>(s % 60));
  else std::snprintf(text, sizeof text, "%llu h %02llu min", static_cast<unsigned long long>(s / 3600),
                     static_cast<unsigned long long>(s / 60 % 60));
  return text;
}

constexpr char kErase[] = "\r\033[K";  // to the line's start, then clear to its end

}  // namespace

std::string progress_text(std::uint64_t bytes, std::optional<std::uint64_t> total, double seconds) {
  std::string text = amount(static_cast<double>(bytes));
  if (total) text += " of " + amount(static_cast<double>(*total));
  if (seconds <= 0) return text;
  const double rate = static_cast<double>(bytes) / seconds;
  text += ", " + amount(rate) + "/s";
  if (total && rate > 0 && *total > bytes) text += ", " + duration(static_cast<double>(*total - bytes) / rate) + " left";
  return text;
}

bool terminal_can_show_progress() {
  const char* term = std::getenv("TERM");
  return ::isatty(STDERR_FILENO) && !(term != nullptr && std::strcmp(term, "dumb") == 0);
}

ProgressLine::ProgressLine(Writer& terminal, std::function<std::uint64_t()> bytes, std::optional<std::uint64_t> total,
                           Timing timing)
    : terminal_(terminal),
      bytes_(std::move(bytes)),
      total_(total),
      timing_(timing),
      start_(std::chrono::steady_clock::now()),
      thread_([this] { run(); }) {}

ProgressLine::~ProgressLine() { stop(); }

void ProgressLine::run() {
  std::unique_lock lock(mutex_);
  auto next = start_ + timing_.delay;
  while (!wake_.wait_until(lock, next, [this] { return stopping_; })) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const std::string text = kErase + progress_text(bytes_(), total_, seconds);
    try {
      terminal_.write(text);
      shown_ = true;
    } catch (const OutputError&) {
      return;  // the terminal went away: nothing more to draw on
    }
    next = std::chrono::steady_clock::now() + timing_.period;
  }
}

void ProgressLine::erase_locked() {
  if (!shown_) return;
  shown_ = false;
  try {
    terminal_.write(kErase);
  } catch (const OutputError&) {
  }
}

void ProgressLine::erase_then(const std::function<void()>& write) {
  std::lock_guard lock(mutex_);
  erase_locked();
  write();
}

void ProgressLine::stop() noexcept {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mutex_);
  erase_locked();
}

}  // namespace gpufilter::cli
