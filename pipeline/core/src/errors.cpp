#include "gpufilter/core/errors.hpp"

#include <cstring>

namespace gpufilter {

DeviceError::DeviceError(std::string call, int code, const std::string& context)
    : Error(context + ": " + call + " failed: " + cl_error_name(code) + " (" +
            std::to_string(code) + ")"),
      call_(std::move(call)),
      code_(code) {}

namespace {
std::string build_message(const std::string& program, const std::vector<KernelBuildError::Log>& logs) {
  std::string message = "building OpenCL program " + program + " failed";
  for (const auto& [device, log] : logs) message += "\n--- build log for " + device + " ---\n" + log;
  return message;
}
}  // namespace

KernelBuildError::KernelBuildError(const std::string& program, std::vector<Log> logs)
    : Error(build_message(program, logs)), logs_(std::move(logs)) {}

PatternError::PatternError(std::size_t index, const std::string& message)
    : Error("pattern " + std::to_string(index + 1) + ": " + message), index_(index) {}

SourceError::SourceError(std::string name, int error_number)
    : Error(name + ": " + std::strerror(error_number)), name_(std::move(name)), errno_(error_number) {}

SourceError::SourceError(std::string name, int error_number, const std::string& message)
    : Error(message), name_(std::move(name)), errno_(error_number) {}

const char* cl_error_name(int code) noexcept {
  switch (code) {
#define GPUFILTER_CL_ERROR(value, name) \
  case value:                           \
    return name;
    GPUFILTER_CL_ERROR(0, "CL_SUCCESS")
    GPUFILTER_CL_ERROR(-1, "CL_DEVICE_NOT_FOUND")
    GPUFILTER_CL_ERROR(-2, "CL_DEVICE_NOT_AVAILABLE")
    GPUFILTER_CL_ERROR(-3, "CL_COMPILER_NOT_AVAILABLE")
    GPUFILTER_CL_ERROR(-4, "CL_MEM_OBJECT_ALLOCATION_FAILURE")
    GPUFILTER_CL_ERROR(-5, "CL_OUT_OF_RESOURCES")
    GPUFILTER_CL_ERROR(-6, "CL_OUT_OF_HOST_MEMORY")
    GPUFILTER_CL_ERROR(-7, "CL_PROFILING_INFO_NOT_AVAILABLE")
    GPUFILTER_CL_ERROR(-8, "CL_MEM_COPY_OVERLAP")
    GPUFILTER_CL_ERROR(-11, "CL_BUILD_PROGRAM_FAILURE")
    GPUFILTER_CL_ERROR(-12, "CL_MAP_FAILURE")
    GPUFILTER_CL_ERROR(-14, "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST")
    GPUFILTER_CL_ERROR(-30, "CL_INVALID_VALUE")
    GPUFILTER_CL_ERROR(-32, "CL_INVALID_PLATFORM")
    GPUFILTER_CL_ERROR(-33, "CL_INVALID_DEVICE")
    GPUFILTER_CL_ERROR(-34, "CL_INVALID_CONTEXT")
    GPUFILTER_CL_ERROR(-36, "CL_INVALID_COMMAND_QUEUE")
    GPUFILTER_CL_ERROR(-38, "CL_INVALID_MEM_OBJECT")
    GPUFILTER_CL_ERROR(-44, "CL_INVALID_PROGRAM")
    GPUFILTER_CL_ERROR(-45, "CL_INVALID_PROGRAM_EXECUTABLE")
    GPUFILTER_CL_ERROR(-46, "CL_INVALID_KERNEL_NAME")
    GPUFILTER_CL_ERROR(-48, "CL_INVALID_KERNEL")
    GPUFILTER_CL_ERROR(-49, "CL_INVALID_ARG_INDEX")
    GPUFILTER_CL_ERROR(-50, "CL_INVALID_ARG_VALUE")
    GPUFILTER_CL_ERROR(-51, "CL_INVALID_ARG_SIZE")
    GPUFILTER_CL_ERROR(-52, "CL_INVALID_KERNEL_ARGS")
    GPUFILTER_CL_ERROR(-54, "CL_INVALID_WORK_GROUP_SIZE")
    GPUFILTER_CL_ERROR(-58, "CL_INVALID_EVENT")
    GPUFILTER_CL_ERROR(-61, "CL_INVALID_BUFFER_SIZE")
    GPUFILTER_CL_ERROR(-1001, "CL_PLATFORM_NOT_FOUND_KHR")
#undef GPUFILTER_CL_ERROR
    default:
      return "unknown OpenCL error";
  }
}

}  // namespace gpufilter
