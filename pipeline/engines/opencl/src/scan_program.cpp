#include "gpufilter/opencl/scan_program.hpp"

#include "gpufilter/kernels/kernel_sources.hpp"
#include "gpufilter/core/errors.hpp"

namespace gpufilter {
namespace {

template <typename T>
cl::Buffer upload(const cl::Context& context, std::span<const T> data) {
  return cl::Buffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, data.size_bytes(),
                    const_cast<T*>(data.data()));
}

}  // namespace

ScanProgram::ScanProgram(const DeviceContext& device, const PatternSet& patterns, MatchOptions options)
    : ScanProgram(device, PatternTable(patterns, options)) {}

ScanProgram::ScanProgram(const DeviceContext& device, PatternTable table, unsigned positions_per_item)
    : table_(std::move(table)),
      positions_per_item_(positions_per_item != 0 ? positions_per_item : device.info().is_gpu ? 4 : 1) {
  program_ = device.build_program("scan.cl", kernels::kernel_source("scan.cl"),
                                  "-cl-std=CL1.2 -DPOSITIONS=" + std::to_string(positions_per_item_) + "u");
  try {
    root_next_ = upload(device.context(), table_.root_next());
    root_pairs_ = upload(device.context(), table_.root_pairs());
    edge_keys_ = upload(device.context(), table_.edge_keys());
    edge_values_ = upload(device.context(), table_.edge_values());
    node_pattern_ = upload(device.context(), table_.node_pattern());
  } catch (const cl::Error& e) {
    throw DeviceError(e.what(), e.err(), "uploading the pattern tables to " + device.info().name);
  }
}

cl::Kernel ScanProgram::new_scan_kernel() const {
  cl::Kernel kernel(program_, "scan");
  kernel.setArg(3, root_next_);
  kernel.setArg(4, edge_keys_);
  kernel.setArg(5, edge_values_);
  kernel.setArg(6, static_cast<cl_uint>(table_.edge_mask()));
  kernel.setArg(7, node_pattern_);
  kernel.setArg(8, static_cast<cl_uint>(table_.options().ignore_case ? 1 : 0));
  kernel.setArg(15, root_pairs_);
  return kernel;
}

}  // namespace gpufilter
