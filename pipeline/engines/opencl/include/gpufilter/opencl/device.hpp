// DeviceContext: one chosen OpenCL device with its context and queues. The pipeline takes
// it explicitly; there is no global default device, context or queue.
#pragma once

#include <CL/opencl.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gpufilter/engines/device_info.hpp"

namespace gpufilter {

// Every device of every platform. Throws NoDeviceError when there is no platform at all.
std::vector<DeviceInfo> list_devices();

// The devices a --device spec names, without opening them: one spec as DeviceContext
// takes it; "all", every GPU of every platform (every device where there is no GPU); or
// several of these separated by commas. Each device once, in the order named. Throws
// NoDeviceError.
std::vector<DeviceInfo> find_devices(std::string_view spec);

// The spec that names exactly `device`: "PLATFORM:DEVICE".
std::string spec_of(const DeviceInfo& device);

// How to install an OpenCL runtime; part of the NoDeviceError message.
inline constexpr std::string_view kInstallHint =
    "no OpenCL platform found; install one, for example PoCL for the CPU "
    "(Debian/Ubuntu: apt-get install pocl-opencl-icd)";

class DeviceContext {
 public:
  // spec: "" (first GPU, else first CPU, else first device), "gpu", "cpu", or
  // "PLATFORM:DEVICE" indices as --list-devices prints them. Throws NoDeviceError.
  explicit DeviceContext(std::string_view spec = {});

  DeviceContext(DeviceContext&&) noexcept = default;
  DeviceContext& operator=(DeviceContext&&) noexcept = default;
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;

  const DeviceInfo& info() const noexcept { return info_; }
  const cl::Context& context() const noexcept { return context_; }
  const cl::Device& device() const noexcept { return device_; }
  // Uploads go on one in-order queue and kernels with read-backs on another, so the
  // upload of chunk N+1 overlaps the scan of chunk N.
  cl::CommandQueue& upload_queue() noexcept { return upload_queue_; }
  cl::CommandQueue& compute_queue() noexcept { return compute_queue_; }

  // Builds `source` for this device; throws KernelBuildError with the build log.
  cl::Program build_program(const std::string& name, const std::string& source, const std::string& options) const;

 private:
  DeviceInfo info_;
  cl::Context context_;
  cl::Device device_;
  cl::CommandQueue upload_queue_;
  cl::CommandQueue compute_queue_;
};

}  // namespace gpufilter
