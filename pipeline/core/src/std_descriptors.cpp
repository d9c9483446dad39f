#include "gpufilter/core/std_descriptors.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace gpufilter {
namespace {

// Whether `fd` was closed; then it is reopened on /dev/null with `flags`.
bool reopen_if_closed(int fd, int flags) noexcept {
  if (::fcntl(fd, F_GETFD) >= 0 || errno != EBADF) return false;
  // The lower descriptors are open by now, so the lowest free one is `fd` itself.
  const int opened = ::open("/dev/null", flags | O_NOCTTY);
  if (opened >= 0 && opened != fd) {
    ::dup2(opened, fd);
    ::close(opened);
  }
  return true;
}

}  // namespace

StandardDescriptors reopen_closed_standard_descriptors() noexcept {
  StandardDescriptors closed;
  // The opposite mode: reading a closed standard input, or writing a closed standard
  // output or error, fails with EBADF as it would have had they stayed closed.
  closed.stdin_closed = reopen_if_closed(STDIN_FILENO, O_WRONLY);
  closed.stdout_closed = reopen_if_closed(STDOUT_FILENO, O_RDONLY);
  closed.stderr_closed = reopen_if_closed(STDERR_FILENO, O_RDONLY);
  return closed;
}

}  // namespace gpufilter
