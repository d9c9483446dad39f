#include "gpufilter/grep/line_spool.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "gpufilter/core/errors.hpp"

namespace gpufilter {
namespace {

int open_temporary() {
  const char* dir = std::getenv("TMPDIR");
  if (dir == nullptr || *dir == '\0') dir = "/tmp";
  int fd = ::open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0) return fd;
  std::string path = std::string(dir) + "/gpufilter-line-XXXXXX";
  fd = ::mkstemp(path.data());
  if (fd < 0) throw Error(std::string("cannot create a temporary file for a long line in ") + dir + ": " + std::strerror(errno));
  ::unlink(path.c_str());
  return fd;
}

void write_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error(std::string("cannot spool a long line to a temporary file: ") + std::strerror(errno));
    }
    data += n;
    size -= static_cast<std::size_t>(n);
  }
}

}  // namespace

LineSpool::~LineSpool() { clear(); }

void LineSpool::unmap() {
  if (map_ != nullptr) ::munmap(map_, map_size_);
  map_ = nullptr;
  map_size_ = 0;
}

void LineSpool::clear() {
  unmap();
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  file_size_ = 0;
  memory_.clear();
  if (memory_.capacity() > memory_limit_) memory_.shrink_to_fit();
}

void LineSpool::append(const char* data, std::size_t size) {
  if (size == 0) return;
  if (fd_ < 0 && memory_.size() + size <= memory_limit_) {
    memory_.append(data, size);
    return;
  }
  unmap();
  if (fd_ < 0) {
    fd_ = open_temporary();
    write_all(fd_, memory_.data(), memory_.size());
    file_size_ = memory_.size();
    memory_.clear();
    memory_.shrink_to_fit();
  }
  write_all(fd_, data, size);
  file_size_ += size;
}

std::string_view LineSpool::view() {
  if (fd_ < 0) return memory_;
  if (map_ == nullptr || map_size_ != file_size_) {
    unmap();
    void* map = ::mmap(nullptr, file_size_, PROT_READ, MAP_PRIVATE, fd_, 0);
    if (map == MAP_FAILED) throw Error(std::string("cannot map a spooled long line: ") + std::strerror(errno));
    map_ = map;
    map_size_ = file_size_;
  }
  return {static_cast<const char*>(map_), map_size_};
}

}  // namespace gpufilter
