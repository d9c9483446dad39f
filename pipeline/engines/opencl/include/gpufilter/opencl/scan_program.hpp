// ScanProgram: a PatternSet compiled once for one device, like hs_compile's database. It is
// immutable after construction and shared by every scan slot; per-scan state (buffers,
// events, kernel arguments) lives in the slots.
#pragma once

#include <CL/opencl.hpp>

#include "gpufilter/opencl/device.hpp"
#include "gpufilter/patterns/pattern_table.hpp"

namespace gpufilter {

class ScanProgram {
 public:
  // Builds the trie, uploads it and builds the scan kernel. Throws PatternError,
  // KernelBuildError or DeviceError.
  ScanProgram(const DeviceContext& device, const PatternSet& patterns, MatchOptions options);
  // Uploads a table built beforehand and builds the scan kernel, whose work-items take
  // `positions_per_item` start positions each (0: 4 on a GPU, 1 on a CPU device, where
  // PoCL vectorises a simple body across work-items best).
  ScanProgram(const DeviceContext& device, PatternTable table, unsigned positions_per_item = 0);

  unsigned positions_per_item() const noexcept { return positions_per_item_; }

  const PatternTable& table() const noexcept { return table_; }

  // A scan kernel with the pattern tables bound; each slot owns one, since kernel
  // arguments are per-object state.
  cl::Kernel new_scan_kernel() const;

  // What one launch scans and where its results go: the rest of the kernel's arguments.
  struct ChunkArgs {
    const cl::Buffer& text;
    cl_uint size;
    cl_uint overlap;
    const cl::Buffer& out;  // (position, pattern) pairs
    cl_uint capacity;       // of `out`, in pairs
    const cl::Buffer& total;
    bool locate;
    const cl::Buffer& pattern_counts;
    bool count_patterns;
  };
  // Binds `args` to a kernel from new_scan_kernel(). The argument indices of
  // kernels/scan.cl live in this class alone.
  static void bind_chunk(cl::Kernel& kernel, const ChunkArgs& args);

 private:
  PatternTable table_;
  unsigned positions_per_item_;
  cl::Program program_;
  cl::Buffer root_next_;
  cl::Buffer root_pairs_;
  cl::Buffer prefix_words_;
  cl::Buffer node_info_;
  cl::Buffer edges_;
  cl::Buffer node_pattern_;
};

}  // namespace gpufilter
