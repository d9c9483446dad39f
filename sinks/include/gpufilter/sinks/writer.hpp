// Writer: where an Output's bytes end up. FdWriter writes to a file descriptor (standard
// output, a file); StringWriter keeps them in memory, so that every printer can be tested
// without a descriptor or a child process.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

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

class Writer {
 public:
  virtual ~Writer() = default;
  // Writes all of `bytes`, or throws OutputError (some of them may have been written).
  virtual void write(std::string_view bytes) = 0;
};

class SpaceAhead;

// write(2) until every byte is out; EINTR is retried, any other failure (EPIPE for a
// closed reader included) is an OutputError. The descriptor is not owned.
//
// `space_ahead`: once an output passes 16 MiB, a file on tmpfs has its pages allocated
// ahead of the writes by a thread of their own (sinks/src/space_ahead.hpp), never past
// what is written by more than 64 MiB, and those left over given back when the writer
// goes. Elsewhere (a pipe, a terminal, a disk, O_APPEND) nothing changes.
class FdWriter final : public Writer {
 public:
  explicit FdWriter(int fd, bool space_ahead = false) noexcept;
  ~FdWriter() override;
  FdWriter(const FdWriter&) = delete;
  FdWriter& operator=(const FdWriter&) = delete;
  void write(std::string_view bytes) override;

 private:
  void wrote(std::size_t bytes) noexcept;

  int fd_;
  bool space_ahead_;  // SpaceAhead not tried yet
  std::uint64_t written_ = 0;
  std::unique_ptr<SpaceAhead> ahead_;
};

class StringWriter final : public Writer {
 public:
  void write(std::string_view bytes) override { text_.append(bytes); }
  const std::string& text() const noexcept { return text_; }
  void clear() noexcept { text_.clear(); }
  std::string take() noexcept { return std::exchange(text_, {}); }

 private:
  std::string text_;
};

}  // namespace gpufilter
