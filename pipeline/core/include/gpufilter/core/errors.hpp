// Typed errors for setup and I/O. Library code throws these and never prints or exits;
// main() turns them into grep-style messages and exit status 2.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace gpufilter {

// Base of every error gpufilter throws on purpose.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// No OpenCL platform, or no device that matches the requested spec.
class NoDeviceError : public Error {
 public:
  using Error::Error;
};

// An OpenCL call failed: carries the call's name and the error code's name.
class DeviceError : public Error {
 public:
  DeviceError(std::string call, int code, const std::string& context);
  const std::string& call() const noexcept { return call_; }
  int code() const noexcept { return code_; }

 private:
  std::string call_;
  int code_;
};

// The kernel program failed to build: one (device name, build log) pair per device.
class KernelBuildError : public Error {
 public:
  using Log = std::pair<std::string, std::string>;
  KernelBuildError(const std::string& program, std::vector<Log> logs);
  const std::vector<Log>& logs() const noexcept { return logs_; }

 private:
  std::vector<Log> logs_;
};

// A pattern cannot be used (for example a device table would exceed its limits).
class PatternError : public Error {
 public:
  PatternError(std::size_t index, const std::string& message);
  std::size_t index() const noexcept { return index_; }

 private:
  std::size_t index_;
};

// Reading an input failed. name() is the input's name as grep prints it.
class SourceError : public Error {
 public:
  SourceError(std::string name, int error_number);
  // With a library's own words (libpcap's) as the whole message instead of strerror's.
  SourceError(std::string name, int error_number, const std::string& message);
  const std::string& name() const noexcept { return name_; }
  int error_number() const noexcept { return errno_; }

 private:
  std::string name_;
  int errno_;
};

// A setting cannot be used: a bad --listen address, a malformed state file. what() names
// the setting or file and says what is wrong with it.
class ConfigError : public Error {
 public:
  using Error::Error;
};

// The matcher could not decide a line (PCRE2 ran past a limit, or failed): grep dies
// there with "FILE: what()" after printing every line before it, and so does the caller.
class MatchError : public Error {
 public:
  using Error::Error;
};

// The symbolic name of an OpenCL error code ("CL_OUT_OF_RESOURCES").
const char* cl_error_name(int code) noexcept;

}  // namespace gpufilter
