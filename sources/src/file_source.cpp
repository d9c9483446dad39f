#include "gpufilter/sources/file_source.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "gpufilter/pipeline/errors.hpp"

namespace gpufilter {

FileSource::FileSource(int fd, bool owned, std::string name) : fd_(fd), owned_(owned), name_(std::move(name)) {
  struct stat st {};
  regular_ = ::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode);
}

std::unique_ptr<FileSource> FileSource::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) throw SourceError(path, errno);
  return std::unique_ptr<FileSource>(new FileSource(fd, true, path));
}

std::unique_ptr<FileSource> FileSource::standard_input(std::string name) {
  return std::unique_ptr<FileSource>(new FileSource(STDIN_FILENO, false, std::move(name)));
}

FileSource::~FileSource() {
  if (owned_) ::close(fd_);
}

std::size_t FileSource::read(std::span<char> dst) {
  for (;;) {
    const ssize_t n = ::read(fd_, dst.data(), dst.size());
    if (n >= 0) return static_cast<std::size_t>(n);
    if (errno != EINTR) throw SourceError(name_, errno);
  }
}

bool FileSource::wait_readable(std::chrono::milliseconds timeout) {
  if (regular_) return true;
  pollfd p{fd_, POLLIN, 0};
  for (;;) {
    const int n = ::poll(&p, 1, timeout.count() < 0 ? -1 : static_cast<int>(timeout.count()));
    if (n >= 0) return n > 0;  // POLLHUP and POLLERR count as readable: read() reports them
    if (errno != EINTR) return true;
  }
}

}  // namespace gpufilter
