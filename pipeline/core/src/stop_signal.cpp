#include "gpufilter/core/stop_signal.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "gpufilter/core/errors.hpp"

namespace gpufilter {

static_assert(std::atomic<bool>::is_always_lock_free, "request() runs in a signal handler");

StopSignal::StopSignal() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) throw SourceError("stop signal pipe", errno);
  read_end_ = fds[0];
  write_end_ = fds[1];
}

StopSignal::~StopSignal() {
  ::close(read_end_);
  ::close(write_end_);
}

void StopSignal::request() noexcept {
  const int saved = errno;
  requested_.store(true, std::memory_order_relaxed);
  const char byte = 1;
  [[maybe_unused]] const ssize_t n = ::write(write_end_, &byte, 1);  // full pipe: already readable
  errno = saved;
}

}  // namespace gpufilter
