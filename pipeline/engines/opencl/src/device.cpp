#include "gpufilter/opencl/device.hpp"

#include <algorithm>
#include <charconv>

#include "gpufilter/core/errors.hpp"

namespace gpufilter {
namespace {

std::string type_name(cl_device_type type) {
  if (type & CL_DEVICE_TYPE_GPU) return "GPU";
  if (type & CL_DEVICE_TYPE_CPU) return "CPU";
  if (type & CL_DEVICE_TYPE_ACCELERATOR) return "ACCELERATOR";
  return "OTHER";
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\0' || s.back() == ' ')) s.pop_back();
  return s;
}

std::vector<cl::Platform> platforms() {
  std::vector<cl::Platform> result;
  try {
    cl::Platform::get(&result);
  } catch (const cl::Error& e) {
    if (e.err() == CL_PLATFORM_NOT_FOUND_KHR) throw NoDeviceError(std::string(kInstallHint));
    throw DeviceError(e.what(), e.err(), "listing OpenCL platforms");
  }
  if (result.empty()) throw NoDeviceError(std::string(kInstallHint));
  return result;
}

struct Found {
  DeviceInfo info;
  cl::Device device;
};

std::vector<Found> all_devices() {
  std::vector<Found> found;
  const auto list = platforms();
  for (std::size_t p = 0; p < list.size(); ++p) {
    std::vector<cl::Device> devices;
    try {
      list[p].getDevices(CL_DEVICE_TYPE_ALL, &devices);
    } catch (const cl::Error& e) {
      if (e.err() == CL_DEVICE_NOT_FOUND) continue;
      throw DeviceError(e.what(), e.err(), "listing the devices of OpenCL platform " + std::to_string(p));
    }
    for (std::size_t d = 0; d < devices.size(); ++d) {
      DeviceInfo info;
      info.platform_index = p;
      info.device_index = d;
      info.platform_name = trimmed(list[p].getInfo<CL_PLATFORM_NAME>());
      info.name = trimmed(devices[d].getInfo<CL_DEVICE_NAME>());
      const auto type = devices[d].getInfo<CL_DEVICE_TYPE>();
      info.type = type_name(type);
      info.is_gpu = (type & CL_DEVICE_TYPE_GPU) != 0;
      info.version = trimmed(devices[d].getInfo<CL_DEVICE_VERSION>());
      info.driver = trimmed(devices[d].getInfo<CL_DRIVER_VERSION>());
      info.global_memory = devices[d].getInfo<CL_DEVICE_GLOBAL_MEM_SIZE>();
      info.max_allocation = devices[d].getInfo<CL_DEVICE_MAX_MEM_ALLOC_SIZE>();
      found.push_back({std::move(info), devices[d]});
    }
  }
  return found;
}

bool parse_index(std::string_view text, std::size_t& value) {
  const auto* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  return ec == std::errc() && ptr == end && !text.empty();
}

}  // namespace

std::vector<DeviceInfo> list_devices() {
  std::vector<DeviceInfo> result;
  for (auto& f : all_devices()) result.push_back(std::move(f.info));
  return result;
}

namespace {

// The device `spec` names among `devices` (see DeviceContext); throws NoDeviceError.
const Found& choose(const std::vector<Found>& devices, std::string_view spec) {
  if (devices.empty()) throw NoDeviceError("no OpenCL device found on any platform");
  auto first_of = [&](bool gpu, bool cpu) -> const Found* {
    for (const auto& f : devices)
      if ((gpu && f.info.type == "GPU") || (cpu && f.info.type == "CPU")) return &f;
    return nullptr;
  };
  const Found* chosen = nullptr;
  if (spec.empty()) {
    chosen = first_of(true, false);
    if (chosen == nullptr) chosen = first_of(false, true);
    if (chosen == nullptr) chosen = &devices.front();
  } else if (spec == "gpu" || spec == "cpu") {
    chosen = first_of(spec == "gpu", spec == "cpu");
    if (chosen == nullptr) throw NoDeviceError("no OpenCL " + std::string(spec) + " device found (see --list-devices)");
  } else {
    const auto colon = spec.find(':');
    std::size_t p = 0, d = 0;
    if (colon == std::string_view::npos || !parse_index(spec.substr(0, colon), p) ||
        !parse_index(spec.substr(colon + 1), d))
      throw NoDeviceError("invalid device '" + std::string(spec) + "': use gpu, cpu or PLATFORM:DEVICE");
    for (const auto& f : devices)
      if (f.info.platform_index == p && f.info.device_index == d) chosen = &f;
    if (chosen == nullptr)
      throw NoDeviceError("no OpenCL device " + std::string(spec) + " (see --list-devices)");
  }
  return *chosen;
}

}  // namespace

std::vector<DeviceInfo> find_devices(std::string_view spec) {
  const auto devices = all_devices();
  std::vector<DeviceInfo> found;
  auto add = [&](const DeviceInfo& info) {
    for (const auto& f : found)
      if (f.platform_index == info.platform_index && f.device_index == info.device_index) return;
    found.push_back(info);
  };
  std::size_t at = 0;
  do {
    const std::size_t comma = std::min(spec.find(',', at), spec.size());
    const std::string_view one = spec.substr(at, comma - at);
    if (one == "all") {
      if (devices.empty()) throw NoDeviceError("no OpenCL device found on any platform");
      const bool any_gpu = std::any_of(devices.begin(), devices.end(), [](const Found& f) { return f.info.is_gpu; });
      for (const auto& f : devices)
        if (f.info.is_gpu || !any_gpu) add(f.info);
    } else if (one.empty() && spec.size() > 0) {
      throw NoDeviceError("invalid device list '" + std::string(spec) + "': an empty entry");
    } else {
      add(choose(devices, one).info);
    }
    at = comma + 1;
  } while (at <= spec.size());
  return found;
}

std::string spec_of(const DeviceInfo& device) {
  return std::to_string(device.platform_index) + ":" + std::to_string(device.device_index);
}

DeviceContext::DeviceContext(std::string_view spec) {
  const auto devices = all_devices();
  const Found* chosen = &choose(devices, spec);
  info_ = chosen->info;
  device_ = chosen->device;
  try {
    context_ = cl::Context(device_);
    upload_queue_ = cl::CommandQueue(context_, device_);
    compute_queue_ = cl::CommandQueue(context_, device_);
  } catch (const cl::Error& e) {
    throw DeviceError(e.what(), e.err(), "opening OpenCL device " + info_.name);
  }
}

cl::Program DeviceContext::build_program(const std::string& name, const std::string& source,
                                         const std::string& options) const {
  cl::Program program;
  try {
    program = cl::Program(context_, source);
    program.build(std::vector<cl::Device>{device_}, options.c_str());
  } catch (const cl::BuildError& e) {
    std::vector<KernelBuildError::Log> logs;
    for (const auto& [device, log] : e.getBuildLog()) logs.emplace_back(trimmed(device.getInfo<CL_DEVICE_NAME>()), log);
    throw KernelBuildError(name, std::move(logs));
  } catch (const cl::Error& e) {
    if (e.err() == CL_BUILD_PROGRAM_FAILURE) {
      std::vector<KernelBuildError::Log> logs;
      logs.emplace_back(info_.name, program.getBuildInfo<CL_PROGRAM_BUILD_LOG>(device_));
      throw KernelBuildError(name, std::move(logs));
    }
    throw DeviceError(e.what(), e.err(), "building OpenCL program " + name);
  }
  return program;
}

}  // namespace gpufilter
