// The seam between inputs and the pipeline: a Source is a byte reader with a name.
// It knows nothing of lines, patterns or devices (implementations live in sources/).
#pragma once

#include <chrono>
#include <cstddef>
#include <span>
#include <string>

namespace gpufilter {

class Source {
 public:
  virtual ~Source() = default;

  // Reads up to dst.size() bytes; returns 0 only at the end of the input.
  // Blocks until some data is there. Throws SourceError on failure.
  virtual std::size_t read(std::span<char> dst) = 0;

  // Waits at most `timeout` for data; true when read() would not block.
  // Sources whose reads never wait (regular files) return true at once.
  virtual bool wait_readable(std::chrono::milliseconds timeout) {
    (void)timeout;
    return true;
  }

  // True for inputs whose reads never wait and whose data is all there (regular files).
  virtual bool is_regular_file() const { return false; }

  // The name grep would print for this input ("(standard input)" or a path).
  virtual const std::string& name() const = 0;
};

}  // namespace gpufilter
