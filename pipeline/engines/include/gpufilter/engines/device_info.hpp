// What an OpenCL device is (opencl/device.hpp finds them): for --list-devices, --stats and
// the engine policy, without OpenCL's headers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gpufilter {

struct DeviceInfo {
  std::size_t platform_index = 0;
  std::size_t device_index = 0;
  std::string platform_name;
  std::string name;
  std::string type;     // "GPU", "CPU", "ACCELERATOR", ...
  std::string version;  // CL_DEVICE_VERSION
  std::string driver;   // CL_DRIVER_VERSION
  std::uint64_t global_memory = 0;
  std::uint64_t max_allocation = 0;
  bool is_gpu = false;
};



}  // namespace gpufilter
