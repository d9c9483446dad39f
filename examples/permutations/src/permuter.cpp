#include "gpufilter/permute/permuter.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <exception>
#include <limits>
#include <thread>

#include "gpufilter/kernels/kernel_sources.hpp"

// permute.cl, embedded by this folder's CMakeLists.txt (cmake/EmbedKernels.cmake).
namespace gpufilter::permute::detail {
extern const ::gpufilter::kernels::EmbeddedKernel k_embedded[];
extern const std::size_t k_embedded_count;
}  // namespace gpufilter::permute::detail

namespace gpufilter::permute {
namespace {

__extension__ typedef unsigned __int128 u128;
constexpr std::uint64_t kU64Max = std::numeric_limits<std::uint64_t>::max();

// Multiplicities as a working copy: count[v] for symbol index v.
using Counts = std::array<std::uint8_t, kMaxElements>;

Counts copy_counts(const Multiset& set) {
  Counts c{};
  std::copy(set.counts().begin(), set.counts().end(), c.begin());
  return c;
}

// The symbol index of byte `b` in set.symbols(), or -1.
int symbol_index(const Multiset& set, std::uint8_t b) {
  const auto symbols = set.symbols();
  const auto it = std::lower_bound(symbols.begin(), symbols.end(), b);
  return (it != symbols.end() && *it == b) ? static_cast<int>(it - symbols.begin()) : -1;
}

// An element for a message: its value for 0..n-1, else the character if printable.
std::string describe(const Multiset& set, std::uint8_t b) {
  if (set.is_range() || b < 0x21 || b > 0x7e) return std::to_string(b);
  return std::string("'") + static_cast<char>(b) + "'";
}

DeviceError device_error(const cl::Error& e, const std::string& what) {
  return DeviceError(e.what(), e.err(), what);
}

}  // namespace

std::uint64_t factorial(unsigned n) {
  if (n > kMaxRange)
    throw ArgumentError(std::to_string(n) + "! does not fit in 64 bits (at most " + std::to_string(kMaxRange) +
                        " elements)");
  std::uint64_t f = 1;
  for (unsigned i = 2; i <= n; ++i) f *= i;
  return f;
}

std::optional<std::uint64_t> multinomial(std::span<const std::uint8_t> counts) {
  // The product over symbols of C(s_i, c_i), s_i the running total; every partial
  // binomial x = C(s - c + j, j) is exact and at most the final result.
  u128 result = 1;
  unsigned total = 0;
  for (const std::uint8_t c : counts) {
    u128 binomial = 1;
    for (unsigned j = 1; j <= c; ++j) {
      binomial = binomial * (total + j) / j;
      if (binomial > kU64Max) return std::nullopt;
    }
    total += c;
    result *= binomial;
    if (result > kU64Max) return std::nullopt;
  }
  return static_cast<std::uint64_t>(result);
}

Multiset Multiset::range(unsigned n) {
  if (n == 0) throw ArgumentError("the number of elements must be at least 1");
  if (n > kMaxRange)
    throw ArgumentError("N = " + std::to_string(n) + " is too large: N! must fit in 64 bits, so N is at most " +
                        std::to_string(kMaxRange));
  Multiset set;
  set.size_ = n;
  set.range_ = true;
  for (unsigned v = 0; v < n; ++v) {
    set.symbols_.push_back(static_cast<std::uint8_t>(v));
    set.counts_.push_back(1);
  }
  set.permutations_ = factorial(n);
  return set;
}

Multiset Multiset::of(std::span<const std::uint8_t> elements) {
  if (elements.empty()) throw ArgumentError("the elements are empty: give at least one");
  if (elements.size() > kMaxElements)
    throw ArgumentError(std::to_string(elements.size()) + " elements are too many: at most " +
                        std::to_string(kMaxElements));
  std::array<unsigned, 256> histogram{};
  for (const std::uint8_t b : elements) ++histogram[b];
  Multiset set;
  set.size_ = static_cast<unsigned>(elements.size());
  for (unsigned b = 0; b < 256; ++b) {
    if (histogram[b] == 0) continue;
    set.symbols_.push_back(static_cast<std::uint8_t>(b));
    set.counts_.push_back(static_cast<std::uint8_t>(histogram[b]));
  }
  const auto count = multinomial(set.counts_);
  if (!count)
    throw ArgumentError("the elements have 2^64 or more distinct permutations: indices must fit in 64 bits");
  set.permutations_ = *count;
  set.range_ = set.distinct() && set.symbols_.front() == 0 && set.symbols_.back() == set.size_ - 1;
  return set;
}

Multiset Multiset::of(std::string_view elements) {
  return of(std::span(reinterpret_cast<const std::uint8_t*>(elements.data()), elements.size()));
}

std::vector<std::uint8_t> Multiset::sorted() const {
  std::vector<std::uint8_t> out;
  for (std::size_t v = 0; v < symbols_.size(); ++v) out.insert(out.end(), counts_[v], symbols_[v]);
  return out;
}

void nth(const Multiset& set, std::uint64_t k, std::span<std::uint8_t> out) {
  if (out.size() != set.size())
    throw ArgumentError("the output holds " + std::to_string(out.size()) + " bytes, not " +
                        std::to_string(set.size()));
  if (k >= set.permutations())
    throw ArgumentError("index " + std::to_string(k) + " is beyond the last permutation (" +
                        std::to_string(set.permutations() - 1) + ")");
  // At each position the permutations that start with symbol v number m * c[v] / r
  // (m: those of the r remaining elements); the digit of k picks the symbol.
  Counts c = copy_counts(set);
  const auto symbols = set.symbols();
  std::uint64_t m = set.permutations();
  unsigned r = set.size();
  for (unsigned i = 0; i < set.size(); ++i, --r) {
    for (std::size_t v = 0; v < symbols.size(); ++v) {
      if (c[v] == 0) continue;
      const auto mv = static_cast<std::uint64_t>(static_cast<u128>(m) * c[v] / r);
      if (k < mv) {
        out[i] = symbols[v];
        --c[v];
        m = mv;
        break;
      }
      k -= mv;
    }
  }
}

std::vector<std::uint8_t> nth(const Multiset& set, std::uint64_t k) {
  std::vector<std::uint8_t> out(set.size());
  nth(set, k, out);
  return out;
}

std::uint64_t rank(const Multiset& set, std::span<const std::uint8_t> perm) {
  if (perm.size() != set.size())
    throw ArgumentError("the permutation has " + std::to_string(perm.size()) + " elements, not " +
                        std::to_string(set.size()));
  Counts seen{};
  for (const std::uint8_t b : perm) {
    const int v = symbol_index(set, b);
    if (v < 0 || ++seen[v] > set.counts()[v])
      throw ArgumentError("not a permutation of the elements: " +
                          std::string(v < 0 ? "no element " : "too many of element ") + describe(set, b));
  }
  Counts c = copy_counts(set);
  std::uint64_t m = set.permutations();
  std::uint64_t k = 0;
  unsigned r = set.size();
  for (unsigned i = 0; i < set.size(); ++i, --r) {
    const int here = symbol_index(set, perm[i]);
    for (int v = 0; v < here; ++v)
      if (c[v] != 0) k += static_cast<std::uint64_t>(static_cast<u128>(m) * c[v] / r);
    m = static_cast<std::uint64_t>(static_cast<u128>(m) * c[here] / r);
    --c[here];
  }
  return k;
}

Slice make_slice(const Multiset& set, std::uint64_t offset, std::optional<std::uint64_t> count) {
  const std::uint64_t total = set.permutations();
  const std::string what = set.is_range() ? std::to_string(set.size()) + "! = " + std::to_string(total)
                                          : "the " + std::to_string(total) + " permutations of the elements";
  if (offset >= total)
    throw ArgumentError("offset " + std::to_string(offset) + " is beyond the last permutation: there are " + what +
                        ", numbered from 0");
  if (!count) return Slice{offset, total - offset};
  if (*count > kU64Max - offset)
    throw ArgumentError("count " + std::to_string(*count) + " from offset " + std::to_string(offset) +
                        " overflows 64 bits");
  if (offset + *count > total)
    throw ArgumentError("count " + std::to_string(*count) + " from offset " + std::to_string(offset) +
                        " runs past the end: only " + std::to_string(total - offset) + " permutations remain of " +
                        what);
  return Slice{offset, *count};
}

void generate_host(const Multiset& set, std::uint64_t offset, std::uint64_t count, std::span<std::uint8_t> out,
                   unsigned threads) {
  if (count == 0) return;
  make_slice(set, offset, count);
  const unsigned n = set.size();
  if (out.size() / n < count)
    throw ArgumentError("the output holds " + std::to_string(out.size()) + " bytes, less than " +
                        std::to_string(count) + " permutations");
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  const std::uint64_t parts = std::min<std::uint64_t>(threads, count);
  auto part = [&](std::uint64_t p) {
    const std::uint64_t begin = count * p / parts, end = count * (p + 1) / parts;
    std::array<std::uint8_t, kMaxElements> cur{};
    nth(set, offset + begin, std::span(cur.data(), n));
    std::uint8_t* dst = out.data() + begin * n;
    for (std::uint64_t i = begin;;) {
      std::memcpy(dst, cur.data(), n);
      dst += n;
      if (++i == end) break;
      std::next_permutation(cur.begin(), cur.begin() + n);
    }
  };
  if (parts == 1) return part(0);
  std::vector<std::thread> pool;
  for (std::uint64_t p = 1; p < parts; ++p) pool.emplace_back(part, p);
  part(0);
  for (auto& t : pool) t.join();
}

// --- GpuPermuter ------------------------------------------------------------------------

struct GpuPermuter::Slot {
  cl::Buffer device;     // the kernel's output
  cl::Buffer pinned;     // CL_MEM_ALLOC_HOST_PTR, mapped once at `host`
  std::uint8_t* host = nullptr;
  std::size_t bytes = 0;
  cl::Event read;        // the read-back of the batch in flight
  std::uint64_t first = 0, count = 0;
};

GpuPermuter::GpuPermuter(const DeviceContext& device, Multiset set, GpuOptions options)
    : set_(std::move(set)), options_(options), device_name_(device.info().name) {
  if (options_.steps > kMaxSteps)
    throw ArgumentError("steps " + std::to_string(options_.steps) + " is too many: at most " +
                        std::to_string(kMaxSteps));
  context_ = device.context();
  device_ = device.device();
  program_ = device.build_program("permute.cl", kernels::kernel_source("permute.cl", std::span<const kernels::EmbeddedKernel>(detail::k_embedded, detail::k_embedded_count)),
                                  "-cl-std=CL1.2 -DMAX_ELEMENTS=" + std::to_string(kMaxElements));
  const unsigned n = set_.size();
  const std::uint64_t per_item = std::uint64_t{options_.steps} + 1;
  const std::uint64_t item_bytes = per_item * n;
  try {
    const cl_command_queue_properties props = options_.profiling ? CL_QUEUE_PROFILING_ENABLE : 0;
    kernel_queue_ = cl::CommandQueue(context_, device_, props);
    copy_queue_ = cl::CommandQueue(context_, device_, props);
    kernel_ = cl::Kernel(program_, "permute");

    const std::uint64_t local_mem = device_.getInfo<CL_DEVICE_LOCAL_MEM_SIZE>();
    const std::uint64_t kernel_local = kernel_.getWorkGroupInfo<CL_KERNEL_LOCAL_MEM_SIZE>(device_);
    const std::uint64_t stage_limit = local_mem > kernel_local ? local_mem - kernel_local : 0;
    const std::size_t kernel_max = kernel_.getWorkGroupInfo<CL_KERNEL_WORK_GROUP_SIZE>(device_);
    if (options_.work_group != 0) {
      work_group_ = options_.work_group;
      if (work_group_ > kernel_max || work_group_ * item_bytes > stage_limit)
        throw ArgumentError("work-group size " + std::to_string(work_group_) + " does not fit " + device_name_ +
                            " with " + std::to_string(per_item) + " permutations per work-item");
    } else {
      work_group_ = 256;
      while (work_group_ > 1 && (work_group_ > kernel_max || work_group_ * item_bytes > stage_limit)) work_group_ /= 2;
      if (work_group_ * item_bytes > stage_limit)
        throw ArgumentError("steps " + std::to_string(options_.steps) + " need " + std::to_string(item_bytes) +
                            " bytes of local memory per work-item; " + device_name_ + " has " +
                            std::to_string(stage_limit));
    }
    words_ = item_bytes % 4 == 0 && device_.getInfo<CL_DEVICE_ENDIAN_LITTLE>() == CL_TRUE;

    // The symbols and counts of a multiset (unused for the values 0..n-1).
    std::array<std::uint8_t, kMaxElements> symbols{}, counts{};
    std::copy(set_.symbols().begin(), set_.symbols().end(), symbols.begin());
    std::copy(set_.counts().begin(), set_.counts().end(), counts.begin());
    symbols_ = cl::Buffer(context_, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, kMaxElements, symbols.data());
    counts_ = cl::Buffer(context_, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, kMaxElements, counts.data());

    // One launch: fewer than 2^31 work-items. One batch: batch_bytes, within what the device
    // allocates, a whole number of work-groups when it is that large.
    max_launch_ = ((std::uint64_t{1} << 31) / work_group_) * work_group_ * per_item;
    const std::uint64_t max_alloc = device_.getInfo<CL_DEVICE_MAX_MEM_ALLOC_SIZE>();
    const std::uint64_t global_mem = device_.getInfo<CL_DEVICE_GLOBAL_MEM_SIZE>();
    std::uint64_t batch_bytes = options_.batch_bytes != 0 ? options_.batch_bytes : std::uint64_t{256} << 20;
    batch_bytes = std::min({batch_bytes, max_alloc, global_mem / 8});
    batch_permutations_ = std::clamp<std::uint64_t>(batch_bytes / n, 1, max_launch_);
    const std::uint64_t group_perms = work_group_ * per_item;
    if (batch_permutations_ >= 4 * group_perms) batch_permutations_ -= batch_permutations_ % group_perms;
  } catch (const cl::Error& e) {
    throw device_error(e, "setting up permutations on " + device_name_);
  }
}

cl::Event GpuPermuter::enqueue(const cl::Buffer& out, std::uint64_t first, std::uint64_t count,
                               const std::vector<cl::Event>* wait) {
  if (count > max_launch_)
    throw ArgumentError("one launch takes at most " + std::to_string(max_launch_) + " permutations");
  if (count != 0) make_slice(set_, first, count);
  cl::Event event;
  try {
    if (out.getInfo<CL_MEM_SIZE>() / set_.size() < count)
      throw ArgumentError("the output buffer holds " + std::to_string(out.getInfo<CL_MEM_SIZE>()) +
                          " bytes, less than " + std::to_string(count) + " permutations");
    if (count == 0) {
      kernel_queue_.enqueueMarkerWithWaitList(wait, &event);
      return event;
    }
    const std::uint64_t per_item = std::uint64_t{options_.steps} + 1;
    const std::uint64_t items = (count + per_item - 1) / per_item;
    const std::uint64_t global = (items + work_group_ - 1) / work_group_ * work_group_;
    const unsigned n = set_.size();
    kernel_.setArg(0, out);
    kernel_.setArg(1, static_cast<cl_ulong>(first));
    kernel_.setArg(2, static_cast<cl_ulong>(count));
    kernel_.setArg(3, static_cast<cl_uint>(n));
    kernel_.setArg(4, static_cast<cl_uint>(options_.steps));
    kernel_.setArg(5, static_cast<cl_uint>(set_.is_range() ? 0 : 1));
    kernel_.setArg(6, symbols_);
    kernel_.setArg(7, counts_);
    kernel_.setArg(8, static_cast<cl_uint>(set_.symbols().size()));
    kernel_.setArg(9, static_cast<cl_ulong>(set_.permutations()));
    kernel_.setArg(10, static_cast<cl_uint>(words_ ? 1 : 0));
    kernel_.setArg(11, cl::Local(work_group_ * per_item * n));
    kernel_queue_.enqueueNDRangeKernel(kernel_, cl::NullRange, cl::NDRange(global), cl::NDRange(work_group_), wait,
                                       &event);
  } catch (const cl::Error& e) {
    throw device_error(e, "running the permutation kernel on " + device_name_);
  }
  return event;
}

GpuPermuter::~GpuPermuter() { release_slots(); }

void GpuPermuter::release_slots() noexcept {
  try {
    kernel_queue_.finish();
    copy_queue_.finish();
    for (auto& slot : slots_)
      if (slot.host != nullptr) copy_queue_.enqueueUnmapMemObject(slot.pinned, slot.host);
    copy_queue_.finish();
  } catch (...) {
    // Nothing to do: the buffers are released with the context.
  }
  slots_.clear();
}

void GpuPermuter::ensure_slots(std::size_t bytes) {
  if (slots_.size() == 2 && slots_[0].bytes >= bytes) return;
  release_slots();
  try {
    slots_.resize(2);
    for (auto& slot : slots_) {
      slot.device = cl::Buffer(context_, CL_MEM_READ_WRITE, bytes);
      slot.pinned = cl::Buffer(context_, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, bytes);
      slot.host = static_cast<std::uint8_t*>(
          copy_queue_.enqueueMapBuffer(slot.pinned, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, bytes));
      slot.bytes = bytes;
    }
  } catch (const cl::Error& e) {
    release_slots();
    throw device_error(e, "allocating two batches of " + std::to_string(bytes) + " bytes on " + device_name_);
  }
}

void GpuPermuter::generate(std::uint64_t offset, std::uint64_t count, const BatchSink& sink) {
  if (count == 0) return;
  make_slice(set_, offset, count);
  const unsigned n = set_.size();
  const std::uint64_t batch = std::min(count, batch_permutations_);
  ensure_slots(static_cast<std::size_t>(batch * n));
  const std::uint64_t end = offset + count;
  std::uint64_t next = offset;  // first permutation not yet submitted
  auto submit = [&](Slot& slot) {
    slot.first = next;
    slot.count = std::min(batch, end - next);
    next += slot.count;
    const std::vector<cl::Event> generated{enqueue(slot.device, slot.first, slot.count)};
    kernel_queue_.flush();
    copy_queue_.enqueueReadBuffer(slot.device, CL_FALSE, 0, slot.count * n, slot.host, &generated, &slot.read);
    copy_queue_.flush();
  };
  try {
    try {
      for (std::size_t s = 0; s < 2 && next < end; ++s) submit(slots_[s]);
      for (std::size_t b = 0;; ++b) {
        Slot& slot = slots_[b % 2];
        if (slot.count == 0) break;
        slot.read.wait();
        sink(slot.first, std::span<const std::uint8_t>(slot.host, slot.count * n));
        slot.count = 0;
        if (next < end) submit(slot);
      }
    } catch (const cl::Error& e) {
      throw device_error(e, "generating permutations on " + device_name_);
    }
  } catch (...) {
    const auto error = std::current_exception();
    try {
      kernel_queue_.finish();
      copy_queue_.finish();
    } catch (...) {
    }
    for (auto& slot : slots_) slot.count = 0;
    std::rethrow_exception(error);
  }
}

void GpuPermuter::generate(std::uint64_t offset, std::uint64_t count, std::span<std::uint8_t> out) {
  const unsigned n = set_.size();
  if (out.size() / n < count)
    throw ArgumentError("the output holds " + std::to_string(out.size()) + " bytes, less than " +
                        std::to_string(count) + " permutations");
  generate(offset, count, [&](std::uint64_t first, std::span<const std::uint8_t> bytes) {
    std::memcpy(out.data() + (first - offset) * n, bytes.data(), bytes.size());
  });
}

}  // namespace gpufilter::permute
