// The one error type of gpufilter::fail2ban: a filter that cannot be loaded or used as
// fail2ban 1.0.2 would. what() is "FILE:LINE: reason" where a file and line are known,
// "FILE: reason" where the line is not (0).
#pragma once

#include <string>

#include "gpufilter/core/errors.hpp"

namespace gpufilter::fail2ban {

class Fail2banError : public gpufilter::ConfigError {
 public:
  using gpufilter::ConfigError::ConfigError;
  Fail2banError(const std::string& file, int line, const std::string& reason)
      : gpufilter::ConfigError(file + (line > 0 ? ":" + std::to_string(line) : std::string()) + ": " + reason) {}
};

}  // namespace gpufilter::fail2ban
