// ProgressLine: "12.4 GB of 50.0 GB, 9.8 GB/s, 4 s left" on a terminal while a long scan
// runs, redrawn in place on standard error. It appears only after the first second (short
// runs show nothing) and is erased before anything else reaches that terminal: every
// write to the terminal goes through erase_then() (ErasingWriter wraps the outputs), so a
// line, a count or a message never lands in the middle of it.
//
// The scan's progress is read from `bytes` (a relaxed atomic load on the pipeline's
// counter) on a thread of the line's own; nothing here waits on the scan.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "gpufilter/sinks/writer.hpp"

namespace gpufilter::cli {

// The text of one progress line: bytes so far, of `total` when known, the rate over the
// run so far and the time left (with a total and a rate). "1.2 GB of 4.0 GB, 3.1 GB/s, 1 s left"
std::string progress_text(std::uint64_t bytes, std::optional<std::uint64_t> total, double seconds);

// Whether standard error is a terminal a progress line may be drawn on (not TERM=dumb).
bool terminal_can_show_progress();

class ProgressLine {
 public:
  struct Timing {
    std::chrono::milliseconds delay{1000};   // nothing is drawn before this
    std::chrono::milliseconds period{250};   // then redrawn this often
  };
  // Draws to `terminal` (standard error), which must outlive this object.
  ProgressLine(Writer& terminal, std::function<std::uint64_t()> bytes, std::optional<std::uint64_t> total,
               Timing timing);
  ProgressLine(Writer& terminal, std::function<std::uint64_t()> bytes, std::optional<std::uint64_t> total)
      : ProgressLine(terminal, std::move(bytes), total, Timing{}) {}
  ~ProgressLine();  // stop()
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  // Erases the line if it is drawn and runs `write` while no redraw can happen: for
  // whatever else goes to the terminal.
  void erase_then(const std::function<void()>& write);
  // Stops the thread and erases the line. Idempotent.
  void stop() noexcept;

 private:
  void run();
  void erase_locked();

  Writer& terminal_;
  std::function<std::uint64_t()> bytes_;
  std::optional<std::uint64_t> total_;
  Timing timing_;
  std::chrono::steady_clock::time_point start_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool shown_ = false;
  std::thread thread_;
};

// A Writer that erases the progress line before each write to the terminal.
class ErasingWriter final : public Writer {
 public:
  ErasingWriter(Writer& inner, ProgressLine& progress) noexcept : inner_(inner), progress_(progress) {}
  void write(std::string_view bytes) override {
    progress_.erase_then([&] { inner_.write(bytes); });
  }

 private:
  Writer& inner_;
  ProgressLine& progress_;
};

}  // namespace gpufilter::cli
