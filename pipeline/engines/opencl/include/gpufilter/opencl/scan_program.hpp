// ScanProgram: a PatternSet compiled once for one device, like hs_compile's database. It is
// immutable after construction and shared by every scan slot; per-scan state (buffers,
// events, kernel arguments) lives in the slots.
#pragma once

#include <CL/opencl.hpp>

#include <optional>

#include "gpufilter/opencl/device.hpp"
#include "gpufilter/patterns/pattern_table.hpp"

namespace gpufilter {

// How the scan kernel is laid out on a device; the defaults are the measured choice.
struct ScanLayout {
  // Start positions per work-item; 0: 4 on a GPU, 1 on a CPU device (where PoCL
  // vectorises a simple body across work-items best).
  unsigned positions = 0;
  // Whether a work-group gathers its walks past the gate before it takes them (see
  // ScanProgram::compacted()): kAuto does on a GPU; tests and gpufilter-kernel-bench
  // force either.
  enum class Walks { kAuto, kInPlace, kCompacted };
  Walks walks = Walks::kAuto;
  // Work-items a group when the walks are gathered (a power of two); 0: the measured default.
  unsigned group_items = 0;
  // Whether positions past the three-byte gate also ask the four-byte one
  // (PatternTable::deep_words()): kAuto does for large sets, where it was measured to pay.
  enum class Gates { kAuto, kOne, kTwo };
  Gates gates = Gates::kAuto;
};

class ScanProgram {
 public:
  // Builds the trie, uploads it and builds the scan kernel. Throws PatternError,
  // KernelBuildError or DeviceError.
  ScanProgram(const DeviceContext& device, const PatternSet& patterns, MatchOptions options);
  // The scan kernel built for a device before its table is (Engines::compile builds it
  // while the table is built), for about `unique_patterns` distinct patterns. Throws
  // KernelBuildError.
  struct Kernel {
    cl::Program program;
    unsigned positions = 0;  // what it was built for
    bool two_gates = false;
  };
  static Kernel build_kernel(const DeviceContext& device, std::size_t unique_patterns, ScanLayout layout = {});
  // Uploads a table built beforehand and builds the scan kernel laid out as `layout` says,
  // or takes `kernel` where it was built for that layout and what the table holds.
  ScanProgram(const DeviceContext& device, PatternTable table, ScanLayout layout = {},
              std::optional<Kernel> kernel = std::nullopt);

  unsigned positions_per_item() const noexcept { return positions_per_item_; }
  // Whether the kernel is scan_compact (a work-group gathers the walks that pass the gate,
  // then takes them side by side) rather than scan (each walk where its position is).
  bool compacted() const noexcept { return compacted_; }
  // Whether the kernel reads the second gate (see ScanLayout::gates).
  bool two_gates() const noexcept { return two_gates_; }
  // The launch that scans `chunk_size` bytes: global and work-group sizes.
  cl::NDRange global_size(std::size_t chunk_size) const;
  cl::NDRange group_size() const;

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
  bool compacted_ = false;
  bool two_gates_ = false;
  std::size_t group_ = 0;  // compacted: work-items a group
  cl::Program program_;
  cl::Buffer root_next_;
  cl::Buffer root_pairs_;
  cl::Buffer prefix_words_;
  cl::Buffer deep_words_;
  cl::Buffer node_info_;
  cl::Buffer edges_;
  cl::Buffer node_pattern_;
};

}  // namespace gpufilter
