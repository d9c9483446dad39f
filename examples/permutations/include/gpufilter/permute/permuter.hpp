// Lexicographic permutations on the host and on an OpenCL device (permute.cl, embedded by this folder).
//
// A Multiset is what gets permuted: the values 0..n-1 (Multiset::range, n <= 20) or any
// bytes with repeats (Multiset::of("aabbc"), distinct permutations only). Permutations
// are numbered from 0 in lexicographic order; nth() and rank() convert between an index
// and a permutation (factorial / multinomial decomposition), and GpuPermuter writes any
// slice [offset, offset + count) of them, n bytes per permutation, in batches.
//
// Library code: errors are thrown (ArgumentError for bad input, gpufilter::DeviceError,
// NoDeviceError and KernelBuildError from the OpenCL layer); nothing is printed.
#pragma once

#include <CL/opencl.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpufilter/opencl/device.hpp"
#include "gpufilter/core/errors.hpp"

namespace gpufilter::permute {

// The most elements of Multiset::range: 20! < 2^64 <= 21!.
inline constexpr unsigned kMaxRange = 20;
// The most elements of a multiset (its number of permutations must also be below 2^64).
inline constexpr unsigned kMaxElements = 64;
// The most next_permutation steps per work-item.
inline constexpr unsigned kMaxSteps = 1024;

// Input that cannot be used: a set too large, an offset beyond the last permutation, a
// count that runs past it, a sequence that is not a permutation of the set. what() says
// what is wrong in words fit for the user.
class ArgumentError : public Error {
 public:
  using Error::Error;
};

// n! for n <= 20. Throws ArgumentError above.
std::uint64_t factorial(unsigned n);

// The number of distinct permutations of a multiset with these multiplicities
// (n! / (c0! c1! ...)), or nothing when it is 2^64 or more.
std::optional<std::uint64_t> multinomial(std::span<const std::uint8_t> counts);

class Multiset {
 public:
  // The values 0..n-1, each once. Throws ArgumentError unless 1 <= n <= 20.
  static Multiset range(unsigned n);
  // The bytes of `elements` in any order, repeats allowed. Throws ArgumentError when it is
  // empty, longer than kMaxElements, or has 2^64 or more distinct permutations.
  static Multiset of(std::span<const std::uint8_t> elements);
  static Multiset of(std::string_view elements);

  unsigned size() const noexcept { return size_; }
  // Every element occurs once (then the factorial decomposition applies).
  bool distinct() const noexcept { return symbols_.size() == size_; }
  // Whether this is Multiset::range(size()).
  bool is_range() const noexcept { return range_; }
  // The distinct values, ascending, and how often each occurs.
  std::span<const std::uint8_t> symbols() const noexcept { return symbols_; }
  std::span<const std::uint8_t> counts() const noexcept { return counts_; }
  // The number of distinct permutations (at least 1).
  std::uint64_t permutations() const noexcept { return permutations_; }
  // Permutation 0: the elements in ascending order.
  std::vector<std::uint8_t> sorted() const;

 private:
  Multiset() = default;
  unsigned size_ = 0;
  bool range_ = false;
  std::vector<std::uint8_t> symbols_;
  std::vector<std::uint8_t> counts_;
  std::uint64_t permutations_ = 1;
};

// Permutation k (from 0) in lexicographic order, into `out` (size() bytes). Throws
// ArgumentError when k >= set.permutations() or out has the wrong size.
void nth(const Multiset& set, std::uint64_t k, std::span<std::uint8_t> out);
std::vector<std::uint8_t> nth(const Multiset& set, std::uint64_t k);

// The inverse of nth(): the index of `perm`. Throws ArgumentError when perm is not a
// permutation of `set`.
std::uint64_t rank(const Multiset& set, std::span<const std::uint8_t> perm);

// A checked slice [offset, offset + count).
struct Slice {
  std::uint64_t offset = 0;
  std::uint64_t count = 0;
};
// Validates a slice of set's permutations; no count means all from offset to the end.
// Throws ArgumentError when offset >= permutations() or offset + count runs past the end
// (or past 2^64). The messages name the numbers.
Slice make_slice(const Multiset& set, std::uint64_t offset, std::optional<std::uint64_t> count);

// Host generation with std::next_permutation: permutations [offset, offset + count) into
// `out` (count * size() bytes). `threads` > 1 splits the range into equal parts, each
// started by nth() and stepped with std::next_permutation on its own thread; 0 means all
// hardware threads. Throws ArgumentError for a bad slice or size.
void generate_host(const Multiset& set, std::uint64_t offset, std::uint64_t count, std::span<std::uint8_t> out,
                   unsigned threads = 1);

struct GpuOptions {
  // next_permutation steps per work-item after the decomposed permutation, so each
  // work-item writes steps + 1 permutations; 0: decomposition only. Default: 15.
  unsigned steps = 15;
  // Bytes of output per batch of generate() (device buffer and pinned host buffer, two of
  // each). 0: 256 MiB, less where the device allows less.
  std::size_t batch_bytes = 0;
  // Work-group size; 0: the largest power of two up to 256 whose stage fits local memory.
  std::size_t work_group = 0;
  // Queue for enqueue() and generate() kernels with CL_QUEUE_PROFILING_ENABLE.
  bool profiling = false;
};

class GpuPermuter {
 public:
  // Builds permute.cl for `device`. Throws ArgumentError for bad options, KernelBuildError,
  // DeviceError.
  GpuPermuter(const DeviceContext& device, Multiset set, GpuOptions options = {});
  ~GpuPermuter();
  GpuPermuter(const GpuPermuter&) = delete;
  GpuPermuter& operator=(const GpuPermuter&) = delete;

  const Multiset& set() const noexcept { return set_; }
  unsigned steps() const noexcept { return options_.steps; }
  std::size_t work_group() const noexcept { return work_group_; }
  // Permutations per batch of generate(), and the most one enqueue() takes.
  std::uint64_t batch_permutations() const noexcept { return batch_permutations_; }
  std::uint64_t max_launch() const noexcept { return max_launch_; }
  const cl::Context& context() const noexcept { return context_; }
  // The in-order queue that runs the kernels (profiling-enabled if asked).
  cl::CommandQueue& kernel_queue() noexcept { return kernel_queue_; }

  // Enqueues the kernel for permutations [first, first + count) into `out` from its start
  // (count * size() bytes) on kernel_queue(), after `wait`; returns the kernel's event.
  // count <= max_launch(). For callers that keep the output on the device.
  cl::Event enqueue(const cl::Buffer& out, std::uint64_t first, std::uint64_t count,
                    const std::vector<cl::Event>* wait = nullptr);

  // Called once per batch, in order: the index of its first permutation and its bytes
  // (valid only during the call).
  using BatchSink = std::function<void(std::uint64_t first, std::span<const std::uint8_t> bytes)>;

  // Generates [offset, offset + count) in batches of batch_permutations(). Each batch is
  // generated into a device buffer and read back into pinned host memory; two batches are
  // in flight, so while `sink` handles one the device generates and copies the next.
  // Throws ArgumentError for a bad slice; rethrows what `sink` throws (after the device
  // has gone idle).
  void generate(std::uint64_t offset, std::uint64_t count, const BatchSink& sink);
  // The same into a host buffer of count * size() bytes.
  void generate(std::uint64_t offset, std::uint64_t count, std::span<std::uint8_t> out);

 private:
  struct Slot;
  void ensure_slots(std::size_t bytes);
  void release_slots() noexcept;

  Multiset set_;
  GpuOptions options_;
  std::string device_name_;
  cl::Context context_;
  cl::Device device_;
  cl::CommandQueue kernel_queue_;
  cl::CommandQueue copy_queue_;
  cl::Program program_;
  cl::Kernel kernel_;
  cl::Buffer symbols_;  // a multiset's distinct elements, ascending (kMaxElements bytes)
  cl::Buffer counts_;   // and how often each occurs
  std::size_t work_group_ = 0;
  std::uint64_t batch_permutations_ = 0;
  std::uint64_t max_launch_ = 0;
  bool words_ = false;
  std::vector<Slot> slots_;
};

}  // namespace gpufilter::permute
