// Output: buffered writes to a Writer (a file descriptor, or memory in tests), flushed
// when full, at every line when line-buffered, and whenever the pipeline says the input
// went quiet. Memory is bounded by the buffer (two with write-behind), whatever the size
// of the output.
//
// Write-behind (not line-buffered): a full buffer is handed to a thread of the Output's
// own, started at the first full buffer, which writes it while the caller fills the other
// one, so that the kernel's copy into a file or pipe overlaps the search. A write error on
// that thread is rethrown (as the same OutputError) by the caller's next write that needs
// a buffer, or by flush(); flush() returns once every byte is written.
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
  explicit Output(int fd, bool line_buffered = false, std::size_t capacity = 64 * 1024, bool write_behind = false);
  // Writes to `writer`, which must outlive the Output (the destructor flushes).
  explicit Output(Writer& writer, bool line_buffered = false, std::size_t capacity = 64 * 1024,
                  bool write_behind = false);
  ~Output();
  Output(const Output&) = delete;
  Output& operator=(const Output&) = delete;

  void write(std::string_view bytes);
  void put(char c) {
    if (size_ == capacity_) drain();
    buffer_[size_++] = c;
  }
  // Writes `terminator` ('\n', or '\0' after a record of grep -z) and, when
  // line-buffered, flushes.
  void end_line(char terminator = '\n');
  void write_number(std::uint64_t value);
  // Writes everything buffered and waits for it. Throws OutputError.
  void flush();
  bool line_buffered() const noexcept { return line_buffered_; }

 private:
  void drain();
  // With write-behind: waits until its thread has written what it was given, and
  // rethrows its error.
  void wait_behind();

  struct Behind;
  std::unique_ptr<Writer> owned_;  // the FdWriter of Output(int fd, ...)
  Writer* writer_;
  bool line_buffered_;
  bool write_behind_;
  std::unique_ptr<Behind> behind_;  // made at the first full buffer
  // Not zeroed: a run that prints one line touches one page of it, not `capacity_`
  // bytes (a megabyte zeroed was a fifth of a short run's start-up).
  std::size_t capacity_;
  std::unique_ptr<char[]> buffer_;
  std::size_t size_ = 0;
};

}  // namespace gpufilter
