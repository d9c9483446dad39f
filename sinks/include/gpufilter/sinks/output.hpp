// Output: buffered writes to a Writer (a file descriptor, or memory in tests), flushed
// when full, at every line when line-buffered, and whenever the pipeline says the input
// went quiet. Memory is bounded by the buffer, whatever the size of the output.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "gpufilter/sinks/writer.hpp"

namespace gpufilter {

class Output {
 public:
  // Writes to `fd` through a FdWriter of its own.
  explicit Output(int fd, bool line_buffered = false, std::size_t capacity = 64 * 1024);
  // Writes to `writer`, which must outlive the Output (the destructor flushes).
  explicit Output(Writer& writer, bool line_buffered = false, std::size_t capacity = 64 * 1024);
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

  std::unique_ptr<Writer> owned_;  // the FdWriter of Output(int fd, ...)
  Writer* writer_;
  bool line_buffered_;
  std::string buffer_;
  std::size_t size_ = 0;
};

}  // namespace gpufilter
