#include "gpufilter/opencl/scan_program.hpp"

#include <algorithm>
#include <bit>

#include "gpufilter/core/errors.hpp"
#include "gpufilter/kernels/kernel_sources.hpp"

namespace gpufilter {
namespace {

template <typename T>
cl::Buffer upload(const cl::Context& context, std::span<const T> data) {
  return cl::Buffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, data.size_bytes(),
                    const_cast<T*>(data.data()));
}

// The compacted kernel's work-groups: this many work-items, or the device's most (a
// power of two, so that it divides the launch multiple below). On the H200, kernel-only,
// 128 was 1-6 % faster than 256, 512 or 1,024 from 1 to 1,000,000 literals; from about
// 500,000 patterns (long walks at a fifth of the positions) 64 was faster still (1,000,000
// literals: 100 GB/s against 93; 100,000: 185 against 215).
constexpr std::size_t kGroupItems = 128;
constexpr std::size_t kLargeSetGroupItems = 64;
constexpr std::size_t kLargeSet = 500000;
// The second gate from this many patterns: on the H100, kernel-only, 1,000,000 literals
// 88 -> 133 GB/s with it, while 1 to 100,000 literals were 8-20 % slower (the longer code,
// not the load: at 100,000 it cut the walks from 3.3 % of positions to almost none and
// still lost, 209 -> 191).
constexpr std::size_t kTwoGatesSet = 500000;
// A global size rounded up to a fixed multiple (the kernel ignores positions past the
// chunk) keeps runtimes that specialise per launch size, like PoCL, from rebuilding.
constexpr std::size_t kLaunchMultiple = 4096;

unsigned positions_for(const DeviceContext& device, const ScanLayout& layout) {
  return layout.positions != 0 ? layout.positions : device.info().is_gpu ? 4 : 1;
}

bool two_gates_for(const ScanLayout& layout, std::size_t unique_patterns) {
  return layout.gates == ScanLayout::Gates::kTwo ||
         (layout.gates == ScanLayout::Gates::kAuto && unique_patterns >= kTwoGatesSet);
}

}  // namespace

ScanProgram::Kernel ScanProgram::build_kernel(const DeviceContext& device, std::size_t unique_patterns,
                                              ScanLayout layout) {
  Kernel kernel{{}, positions_for(device, layout), two_gates_for(layout, unique_patterns)};
  kernel.program = device.build_program("scan.cl", kernels::kernel_source("scan.cl"),
                                        "-cl-std=CL1.2 -DPOSITIONS=" + std::to_string(kernel.positions) + "u" +
                                            (kernel.two_gates ? " -DDEEP_GATE=1" : ""));
  return kernel;
}

ScanProgram::ScanProgram(const DeviceContext& device, const PatternSet& patterns, MatchOptions options)
    : ScanProgram(device, PatternTable(patterns, options)) {}

ScanProgram::ScanProgram(const DeviceContext& device, PatternTable table, ScanLayout layout,
                         std::optional<Kernel> kernel)
    : table_(std::move(table)),
      positions_per_item_(positions_for(device, layout)),
      two_gates_(two_gates_for(layout, table_.unique_count())) {
  if (!kernel || kernel->positions != positions_per_item_ || kernel->two_gates != two_gates_)
    kernel = build_kernel(device, table_.unique_count(), layout);
  program_ = std::move(kernel->program);
  try {
    // Gathered on a GPU, whose warps wait for their longest walk (kernel-only on the H200:
    // as fast at 1 literal, 1.1-1.5x from 10 to 1,000,000); in place on a CPU device,
    // where PoCL runs a work-group's work-items in a loop and the barriers only cost.
    compacted_ = layout.walks == ScanLayout::Walks::kCompacted ||
                 (layout.walks == ScanLayout::Walks::kAuto && device.info().is_gpu);
    if (compacted_) {
      const cl::Device& d = device.device();
      const cl::Kernel probe(program_, "scan_compact");
      const std::size_t wanted = layout.group_items != 0                 ? layout.group_items
                                 : table_.unique_count() >= kLargeSet ? kLargeSetGroupItems
                                                                      : kGroupItems;
      group_ = std::bit_floor(std::min({wanted, kLaunchMultiple, d.getInfo<CL_DEVICE_MAX_WORK_GROUP_SIZE>(),
                                        probe.getWorkGroupInfo<CL_KERNEL_WORK_GROUP_SIZE>(d)}));
    }
    root_next_ = upload(device.context(), table_.root_next());
    root_pairs_ = upload(device.context(), table_.root_pairs());
    prefix_words_ = upload(device.context(), table_.prefix_words());
    // Without the second gate the kernel never reads its words (up to 4 MiB): one stands in.
    static constexpr std::uint32_t kNoDeepWords[1] = {0};
    deep_words_ = upload(device.context(), two_gates_ ? table_.deep_words() : std::span<const std::uint32_t>(kNoDeepWords));
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
  kRootPairs, kPrefixWords, kPrefixShift, kNodeInfo, kDeepWords, kDeepShift, // the patterns
  kWalks,                                                                  // scan_compact's
};

}  // namespace

cl::Kernel ScanProgram::new_scan_kernel() const {
  cl::Kernel kernel(program_, compacted_ ? "scan_compact" : "scan");
  if (compacted_) kernel.setArg(kWalks, cl::Local(group_ * positions_per_item_ * sizeof(cl_uint2)));
  kernel.setArg(kRootNext, root_next_);
  kernel.setArg(kEdges, edges_);
  kernel.setArg(kEdgeMask, static_cast<cl_uint>(table_.edge_mask()));
  kernel.setArg(kNodePattern, node_pattern_);
  kernel.setArg(kIgnoreCase, static_cast<cl_uint>(table_.options().ignore_case ? 1 : 0));
  kernel.setArg(kRootPairs, root_pairs_);
  kernel.setArg(kPrefixWords, prefix_words_);
  kernel.setArg(kPrefixShift, static_cast<cl_uint>(table_.prefix_shift()));
  kernel.setArg(kNodeInfo, node_info_);
  kernel.setArg(kDeepWords, deep_words_);
  kernel.setArg(kDeepShift, static_cast<cl_uint>(table_.deep_shift()));
  return kernel;
}

cl::NDRange ScanProgram::global_size(std::size_t chunk_size) const {
  const std::size_t items = (chunk_size + positions_per_item_ - 1) / positions_per_item_;
  return cl::NDRange(std::max<std::size_t>(1, (items + kLaunchMultiple - 1) / kLaunchMultiple) * kLaunchMultiple);
}

cl::NDRange ScanProgram::group_size() const { return compacted_ ? cl::NDRange(group_) : cl::NullRange; }

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
