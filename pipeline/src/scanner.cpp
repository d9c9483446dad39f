#include "gpufilter/pipeline/scanner.hpp"

#include <algorithm>

#include "gpufilter/pipeline/errors.hpp"

namespace gpufilter {
namespace {

constexpr std::size_t kMinOutput = 4096;  // located occurrences a slot holds at first
constexpr std::size_t kLaunchMultiple = 4096;

[[noreturn]] void rethrow_cl(const cl::Error& e, const std::string& what) {
  throw DeviceError(e.what(), e.err(), what);
}

}  // namespace

ScanSlot::~ScanSlot() {
  if (staging_host_ != nullptr && upload_queue_ != nullptr) {
    try {
      upload_queue_->enqueueUnmapMemObject(staging_, staging_host_);
      upload_queue_->finish();
    } catch (const cl::Error&) {
      // Nothing useful to do while tearing down; the context release frees the memory.
    }
  }
}

Scanner::Scanner(DeviceContext& device, const Matcher& matcher, ScanConfig config)
    : device_(device), matcher_(matcher), config_(config) {
  config_.slots = std::max<std::size_t>(config_.slots, 1);
  // A split line's next piece repeats (longest pattern - 1) bytes; a chunk of at least twice
  // the longest pattern keeps each piece advancing by more than that.
  config_.chunk_bytes = std::max(config_.chunk_bytes, std::max<std::size_t>(1, 2 * matcher_.table().max_length()));
  if (config_.chunk_bytes >= (std::size_t{1} << 32) - 64) throw Error("chunk size must be below 4 GiB");
  const auto& context = device_.context();
  try {
    for (std::size_t i = 0; i < config_.slots; ++i) {
      auto slot = std::unique_ptr<ScanSlot>(new ScanSlot());
      slot->upload_queue_ = &device_.upload_queue();
      slot->staging_ = cl::Buffer(context, CL_MEM_READ_ONLY | CL_MEM_ALLOC_HOST_PTR, config_.chunk_bytes);
      slot->staging_host_ = static_cast<char*>(device_.upload_queue().enqueueMapBuffer(
          slot->staging_, CL_TRUE, CL_MAP_WRITE, 0, config_.chunk_bytes));
      slot->input_ = cl::Buffer(context, CL_MEM_READ_ONLY, config_.chunk_bytes);
      slot->output_capacity_ = config_.locate ? std::max(kMinOutput, config_.chunk_bytes / 16) : 1;
      slot->output_ = cl::Buffer(context, CL_MEM_WRITE_ONLY, slot->output_capacity_ * sizeof(cl_uint2));
      slot->total_ = cl::Buffer(context, CL_MEM_READ_WRITE, sizeof(cl_uint));
      slot->kernel_ = matcher_.new_scan_kernel();
      free_.push_back(slot.get());
      slots_.push_back(std::move(slot));
    }
    const std::size_t patterns = std::max<std::size_t>(1, matcher_.table().unique_count());
    pattern_counts_ = cl::Buffer(context, CL_MEM_READ_WRITE, (config_.count_patterns ? patterns : 1) * sizeof(cl_uint));
    device_.compute_queue().enqueueFillBuffer(pattern_counts_, cl_uint{0}, 0,
                                              (config_.count_patterns ? patterns : 1) * sizeof(cl_uint));
    device_.compute_queue().finish();
  } catch (const cl::Error& e) {
    rethrow_cl(e, "allocating " + std::to_string(config_.slots) + " scan slots of " +
                      std::to_string(config_.chunk_bytes) + " bytes on " + device_.info().name);
  }
}

Scanner::~Scanner() {
  try {
    device_.upload_queue().finish();
    device_.compute_queue().finish();
  } catch (const cl::Error&) {
    // Teardown: the slots' destructors release what remains.
  }
}

ScanSlot* Scanner::acquire() {
  if (free_.empty()) return nullptr;
  ScanSlot* slot = free_.back();
  free_.pop_back();
  return slot;
}

void Scanner::enqueue_scan(ScanSlot& slot) {
  auto& queue = device_.compute_queue();
  cl::Kernel& k = slot.kernel_;
  k.setArg(0, slot.input_);
  k.setArg(1, static_cast<cl_uint>(slot.chunk_.size));
  k.setArg(2, static_cast<cl_uint>(slot.chunk_.overlap));
  k.setArg(9, slot.output_);
  k.setArg(10, static_cast<cl_uint>(slot.output_capacity_));
  k.setArg(11, slot.total_);
  k.setArg(12, static_cast<cl_uint>(config_.locate ? 1 : 0));
  k.setArg(13, pattern_counts_);
  queue.enqueueFillBuffer(slot.total_, cl_uint{0}, 0, sizeof(cl_uint));
  // A global size rounded up to a fixed multiple (the kernel ignores positions past the
  // chunk) keeps runtimes that specialise per launch size, like PoCL, from rebuilding.
  const std::size_t global = (slot.chunk_.size + kLaunchMultiple - 1) / kLaunchMultiple * kLaunchMultiple;
  queue.enqueueNDRangeKernel(k, cl::NullRange, cl::NDRange(global), cl::NullRange);
}

void Scanner::submit(ScanSlot& slot) {
  try {
    slot.occurrences_.clear();
    slot.total_host_ = 0;
    if (slot.chunk_.size == 0) {
      slot.done_ = cl::Event();
      in_flight_.push_back(&slot);
      return;
    }
    cl::Event uploaded;
    device_.upload_queue().enqueueWriteBuffer(slot.input_, CL_FALSE, 0, slot.chunk_.size, slot.staging_host_,
                                              nullptr, &uploaded);
    device_.upload_queue().flush();
    std::vector<cl::Event> wait{uploaded};
    auto& queue = device_.compute_queue();
    queue.enqueueBarrierWithWaitList(&wait);
    slot.kernel_.setArg(14, static_cast<cl_uint>(config_.count_patterns ? 1 : 0));
    enqueue_scan(slot);
    queue.enqueueReadBuffer(slot.total_, CL_FALSE, 0, sizeof(cl_uint), &slot.total_host_, nullptr, &slot.done_);
    queue.flush();
    in_flight_.push_back(&slot);
  } catch (const cl::Error& e) {
    rethrow_cl(e, "submitting chunk " + std::to_string(slot.chunk_.seq));
  }
}

ScanSlot& Scanner::complete_oldest() {
  ScanSlot& slot = *in_flight_.front();
  in_flight_.pop_front();
  try {
    if (slot.chunk_.size == 0) return slot;
    slot.done_.wait();
    const std::size_t total = slot.total_host_;
    if (!config_.locate || total == 0) return slot;
    auto& queue = device_.compute_queue();
    if (total > slot.output_capacity_) {
      // More occurrences than the buffer holds: grow it to fit them all and rescan the
      // chunk, which is still on the device. Counted once: the rescan does not count.
      slot.output_capacity_ = total;
      slot.output_ = cl::Buffer(device_.context(), CL_MEM_WRITE_ONLY, total * sizeof(cl_uint2));
      slot.kernel_.setArg(14, cl_uint{0});
      enqueue_scan(slot);
    }
    slot.occurrences_.resize(total);
    queue.enqueueReadBuffer(slot.output_, CL_TRUE, 0, total * sizeof(Occurrence), slot.occurrences_.data());
  } catch (const cl::Error& e) {
    rethrow_cl(e, "scanning chunk " + std::to_string(slot.chunk_.seq));
  }
  const PatternTable& table = matcher_.table();
  std::sort(slot.occurrences_.begin(), slot.occurrences_.end(),
            [&](const Occurrence& a, const Occurrence& b) { return table.before(a, b); });
  return slot;
}

void Scanner::release(ScanSlot& slot) { free_.push_back(&slot); }

void Scanner::discard_in_flight() {
  while (!in_flight_.empty()) {
    ScanSlot* slot = in_flight_.front();
    in_flight_.pop_front();
    try {
      if (slot->chunk_.size != 0) slot->done_.wait();
    } catch (const cl::Error& e) {
      rethrow_cl(e, "finishing chunk " + std::to_string(slot->chunk_.seq));
    }
    free_.push_back(slot);
  }
}

std::vector<std::uint64_t> Scanner::pattern_counts() {
  std::vector<std::uint64_t> result(matcher_.table().unique_count(), 0);
  if (!config_.count_patterns || result.empty()) return result;
  std::vector<cl_uint> counts(result.size());
  try {
    device_.compute_queue().enqueueReadBuffer(pattern_counts_, CL_TRUE, 0, counts.size() * sizeof(cl_uint),
                                              counts.data());
  } catch (const cl::Error& e) {
    rethrow_cl(e, "reading pattern counts");
  }
  std::copy(counts.begin(), counts.end(), result.begin());
  return result;
}

}  // namespace gpufilter
