// Notices: how a source reports what a user should hear about while it keeps going (a
// file truncated or rotated, an over-long line, a refused connection). Library code
// never prints; main() implements this by writing "gpufilter: MESSAGE" to standard error.
// Called from the I/O thread; implementations must be thread-safe.
#pragma once

#include <string_view>

namespace gpufilter {

class Notices {
 public:
  virtual ~Notices() = default;
  virtual void notice(std::string_view message) = 0;
};

}  // namespace gpufilter
