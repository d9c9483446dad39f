// Writer: where an Output's bytes end up. FdWriter writes to a file descriptor (standard
// output, a file); StringWriter keeps them in memory, so that every printer can be tested
// without a descriptor or a child process.
#pragma once

#include <string>
#include <utility>
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

class Writer {
 public:
  virtual ~Writer() = default;
  // Writes all of `bytes`, or throws OutputError (some of them may have been written).
  virtual void write(std::string_view bytes) = 0;
};

// write(2) until every byte is out; EINTR is retried, any other failure (EPIPE for a
// closed reader included) is an OutputError. The descriptor is not owned.
class FdWriter final : public Writer {
 public:
  explicit FdWriter(int fd) noexcept : fd_(fd) {}
  void write(std::string_view bytes) override;

 private:
  int fd_;
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
