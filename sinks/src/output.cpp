// Output's buffer, and the Writers it writes through.
#include "gpufilter/sinks/output.hpp"

#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

namespace gpufilter {

OutputError::OutputError(int error_number)
    : Error(std::string("write error: ") + std::strerror(error_number)), errno_(error_number) {}

bool OutputError::closed() const noexcept { return errno_ == EPIPE; }

void FdWriter::write(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      throw OutputError(errno);
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
}

Output::Output(int fd, bool line_buffered, std::size_t capacity)
    : owned_(std::make_unique<FdWriter>(fd)),
      writer_(owned_.get()),
      line_buffered_(line_buffered),
      buffer_(capacity, '\0') {}

Output::Output(Writer& writer, bool line_buffered, std::size_t capacity)
    : writer_(&writer), line_buffered_(line_buffered), buffer_(capacity, '\0') {}

Output::~Output() {
  try {
    flush();
  } catch (const OutputError&) {
    // Errors surface through explicit flush() calls; a destructor cannot report them.
  }
}

void Output::drain() {
  // Emptied first: after a failed write the buffered bytes are dropped, not written again.
  const std::size_t size = size_;
  size_ = 0;
  if (size > 0) writer_->write(std::string_view(buffer_.data(), size));
}

void Output::write(std::string_view bytes) {
  if (bytes.size() >= buffer_.size()) {
    drain();
    writer_->write(bytes);
    return;
  }
  if (buffer_.size() - size_ < bytes.size()) drain();
  std::memcpy(buffer_.data() + size_, bytes.data(), bytes.size());
  size_ += bytes.size();
}

void Output::end_line() {
  put('\n');
  if (line_buffered_) drain();
}

void Output::write_number(std::uint64_t value) {
  char digits[24];
  const auto result = std::to_chars(digits, digits + sizeof digits, value);
  write(std::string_view(digits, static_cast<std::size_t>(result.ptr - digits)));
}

void Output::flush() {
  if (size_ > 0) drain();
}

}  // namespace gpufilter
