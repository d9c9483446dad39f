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

  // A scan kernel with the pattern tables bound (arguments 3-8 and 15); each slot owns one,
  // since kernel arguments are per-object state.
  cl::Kernel new_scan_kernel() const;

 private:
  PatternTable table_;
  unsigned positions_per_item_;
  cl::Program program_;
  cl::Buffer root_next_;
  cl::Buffer root_pairs_;
  cl::Buffer edge_keys_;
  cl::Buffer edge_values_;
  cl::Buffer node_pattern_;
};

}  // namespace gpufilter
