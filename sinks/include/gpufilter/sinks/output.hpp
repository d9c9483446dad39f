// Output: buffered writes to a file descriptor, flushed when full, at every line when
// line-buffered, and whenever the pipeline says the input went quiet. Memory is bounded
// by the buffer, whatever the size of the output.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "gpufilter/core/errors.hpp"

namespace gpufilter {

// Writing failed. closed() is true for EPIPE: the reader went away.
class OutputError : public Error {
 public:
  explicit OutputError(int error_number);
  int error_number() const noexcept { return errno_; }
  bool closed() const noexcept;

 private:
  int errno_;
};

class Output {
 public:
  explicit Output(int fd, bool line_buffered = false, std::size_t capacity = 64 * 1024);
  ~Output();
  Output(const Output&) = delete;
  Output& operator=(const Output&) = delete;

  void write(std::string_view bytes);
  void put(char c) {
    if (size_ == buffer_.size()) drain();
    buffer_[size_++] = c;
  }
  // Writes '\n' and, when line-buffered, flushes.
  void end_line();
  void write_number(std::uint64_t value);
  // Throws OutputError.
  void flush();
  bool line_buffered() const noexcept { return line_buffered_; }

 private:
  void drain();

  int fd_;
  bool line_buffered_;
  std::string buffer_;
  std::size_t size_ = 0;
};

}  // namespace gpufilter
