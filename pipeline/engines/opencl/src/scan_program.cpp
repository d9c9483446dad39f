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
    prefix_words_ = upload(device.context(), table_.prefix_words());
    node_info_ = upload(device.context(), table_.node_info());
    edges_ = upload(device.context(), table_.edge_slots());
    node_pattern_ = upload(device.context(), table_.node_pattern());
  } catch (const cl::Error& e) {
    throw DeviceError(e.what(), e.err(), "uploading the pattern tables to " + device.info().name);
  }
}

namespace {

// The arguments of kernels/scan.cl's scan(), in its order.
enum ScanArg : cl_uint {
  kText, kSize, kOverlap,                                                  // the chunk
  kRootNext, kEdges, kEdgeMask, kNodePattern, kIgnoreCase,                 // the patterns
  kOut, kCapacity, kTotal, kLocate, kPatternCounts, kCountPatterns,         // the results
  kRootPairs, kPrefixWords, kPrefixShift, kNodeInfo,                       // the patterns
};

}  // namespace

cl::Kernel ScanProgram::new_scan_kernel() const {
  cl::Kernel kernel(program_, "scan");
  kernel.setArg(kRootNext, root_next_);
  kernel.setArg(kEdges, edges_);
  kernel.setArg(kEdgeMask, static_cast<cl_uint>(table_.edge_mask()));
  kernel.setArg(kNodePattern, node_pattern_);
  kernel.setArg(kIgnoreCase, static_cast<cl_uint>(table_.options().ignore_case ? 1 : 0));
  kernel.setArg(kRootPairs, root_pairs_);
  kernel.setArg(kPrefixWords, prefix_words_);
  kernel.setArg(kPrefixShift, static_cast<cl_uint>(table_.prefix_shift()));
  kernel.setArg(kNodeInfo, node_info_);
  return kernel;
}

void ScanProgram::bind_chunk(cl::Kernel& kernel, const ChunkArgs& args) {
  kernel.setArg(kText, args.text);
  kernel.setArg(kSize, args.size);
  kernel.setArg(kOverlap, args.overlap);
  kernel.setArg(kOut, args.out);
  kernel.setArg(kCapacity, args.capacity);
  kernel.setArg(kTotal, args.total);
  kernel.setArg(kLocate, static_cast<cl_uint>(args.locate ? 1 : 0));
  kernel.setArg(kPatternCounts, args.pattern_counts);
  kernel.setArg(kCountPatterns, static_cast<cl_uint>(args.count_patterns ? 1 : 0));
}

}  // namespace gpufilter
