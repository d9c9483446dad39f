// The CPU time of the calling thread, and a wall-clock stopwatch: how the capture
// pipeline's threads report where their time went (--stats).
#pragma once

#include <chrono>
#include <ctime>

namespace gpufilter {

// Seconds of CPU the calling thread has used.
inline double thread_cpu_seconds() noexcept {
  timespec ts{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Adds the wall time of its life to `total` (seconds).
class WaitTimer {
 public:
  explicit WaitTimer(double& total) noexcept : total_(total), begin_(std::chrono::steady_clock::now()) {}
  ~WaitTimer() { total_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - begin_).count(); }
  WaitTimer(const WaitTimer&) = delete;
  WaitTimer& operator=(const WaitTimer&) = delete;

 private:
  double& total_;
  std::chrono::steady_clock::time_point begin_;
};

}  // namespace gpufilter
