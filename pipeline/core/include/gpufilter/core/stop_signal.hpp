// StopSignal: "stop reading" from a signal handler to every reader. request() is
// async-signal-safe (an atomic store and a write to a pipe); readers that block poll the
// pipe's read end beside their own descriptor (FileSource, the I/O thread of --follow and
// --listen), so a stop is seen at once, never after the next line arrives.
#pragma once

#include <atomic>

namespace gpufilter {

class StopSignal {
 public:
  StopSignal();  // throws SourceError when the pipe cannot be made
  ~StopSignal();
  StopSignal(const StopSignal&) = delete;
  StopSignal& operator=(const StopSignal&) = delete;

  void request() noexcept;
  bool requested() const noexcept { return requested_.load(std::memory_order_relaxed); }
  // Readable once request() was called.
  int fd() const noexcept { return read_end_; }

 private:
  std::atomic<bool> requested_{false};
  int read_end_ = -1;
  int write_end_ = -1;
};

}  // namespace gpufilter
