#include "gpufilter/opencl/device_scanner.hpp"

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "gpufilter/core/errors.hpp"

namespace gpufilter {
namespace {

constexpr std::size_t kMinOutput = 4096;  // located occurrences a slot holds at first
// Occurrences read back with the count, in the same chain: a chunk with no more than
// this many (rare matches) needs no second read. A later read has to go through a queue
// of its own, since the compute queue holds the later chunks' scans.
constexpr std::size_t kEarlyRead = 4096;

[[noreturn]] void rethrow_cl(const cl::Error& e, const std::string& what) {
  throw DeviceError(e.what(), e.err(), what);
}

}  // namespace

class DeviceScanner::Slot final : public ScanSlot {
 public:
  explicit Slot(cl::CommandQueue& upload_queue) : upload_queue_(upload_queue) {}
  ~Slot() override {
    if (mapped_ == nullptr) return;
    try {
      upload_queue_.enqueueUnmapMemObject(staging_buffer_, mapped_);
      upload_queue_.finish();
    } catch (const cl::Error&) {
      // Nothing useful to do while tearing down; the context release frees the memory.
    }
  }

  cl::CommandQueue& upload_queue_;
  cl::Buffer staging_buffer_;
  char* mapped_ = nullptr;  // staging_buffer_ mapped: the staging, unless host_staging_ took over
  // Plain host staging: for a slot made after a fault, or one the device may still read.
  std::unique_ptr<char[]> host_staging_;
  cl::Buffer input_;
  cl::Buffer output_;
  std::size_t output_capacity_ = 0;
  cl::Buffer total_buffer_;
  cl_uint total_device_ = 0;
  cl::Kernel kernel_;
  cl::Event done_;
  cl::Event kernel_done_;         // the counting kernel of the chunk (with count_patterns)
  bool kernel_enqueued_ = false;  // that kernel was enqueued
  bool on_host_ = false;  // this chunk was scanned by scan_on_host(): nothing to wait for

  friend class DeviceScanner;
};

DeviceScanner::DeviceScanner(DeviceContext& device, const ScanProgram& matcher, ScanConfig config)
    : Scanner(matcher.table(), config), device_(device), matcher_(matcher) {
  try {
    readback_ = cl::CommandQueue(device_.context(), device_.device());
    const std::size_t patterns = config_.count_patterns ? std::max<std::size_t>(1, table_.unique_count()) : 1;
    pattern_counts_ = cl::Buffer(device_.context(), CL_MEM_READ_WRITE, patterns * sizeof(cl_uint));
    device_.compute_queue().enqueueFillBuffer(pattern_counts_, cl_uint{0}, 0, patterns * sizeof(cl_uint));
  } catch (const cl::Error& e) {
    rethrow_cl(e, "allocating pattern counters on " + device_.info().name);
  }
  try {
    add_slot(make_device_slot());
  } catch (const cl::Error& e) {
    rethrow_cl(e, "allocating a scan slot of " + std::to_string(config_.chunk_bytes) + " bytes on " +
                      device_.info().name);
  }
}

std::unique_ptr<DeviceScanner::Slot> DeviceScanner::make_device_slot() {
  const auto& context = device_.context();
  auto slot = std::make_unique<Slot>(device_.upload_queue());
  slot->staging_buffer_ = cl::Buffer(context, CL_MEM_READ_ONLY | CL_MEM_ALLOC_HOST_PTR, config_.chunk_bytes);
  slot->mapped_ = static_cast<char*>(device_.upload_queue().enqueueMapBuffer(
      slot->staging_buffer_, CL_TRUE, CL_MAP_WRITE, 0, config_.chunk_bytes));
  slot->staging_ = slot->mapped_;
  slot->input_ = cl::Buffer(context, CL_MEM_READ_ONLY, config_.chunk_bytes);
  slot->output_capacity_ = config_.locate ? std::max(kMinOutput, config_.chunk_bytes / 16) : 1;
  slot->output_ = cl::Buffer(context, CL_MEM_WRITE_ONLY, slot->output_capacity_ * sizeof(cl_uint2));
  slot->total_buffer_ = cl::Buffer(context, CL_MEM_READ_WRITE, sizeof(cl_uint));
  slot->kernel_ = matcher_.new_scan_kernel();
  return slot;
}

std::unique_ptr<ScanSlot> DeviceScanner::make_slot() {
  if (!fallen_back_) {
    try {
      ++allocations_;
      if (allocations_ == config_.device_faults.alloc)
        throw cl::Error(CL_MEM_OBJECT_ALLOCATION_FAILURE, "clCreateBuffer");
      return make_device_slot();
    } catch (const cl::Error& e) {
      fall_back(e, "allocating a scan slot of " + std::to_string(config_.chunk_bytes) + " bytes", Chunk{});
    }
  }
  auto slot = std::make_unique<Slot>(device_.upload_queue());
  slot->host_staging_ = std::make_unique_for_overwrite<char[]>(config_.chunk_bytes);
  slot->staging_ = slot->host_staging_.get();
  return slot;
}

DeviceScanner::~DeviceScanner() {
  try {
    readback_.finish();
    device_.upload_queue().finish();
    device_.compute_queue().finish();
  } catch (const cl::Error&) {
    // Teardown: the slots' destructors release what remains.
  }
}

void DeviceScanner::enqueue_scan(Slot& slot, bool count_patterns, cl::Event* done) {
  auto& queue = device_.compute_queue();
  cl::Kernel& k = slot.kernel_;
  ScanProgram::bind_chunk(k, ScanProgram::ChunkArgs{slot.input_, static_cast<cl_uint>(slot.chunk_.size),
                                                  static_cast<cl_uint>(slot.chunk_.overlap), slot.output_,
                                                  static_cast<cl_uint>(slot.output_capacity_), slot.total_buffer_,
                                                  config_.locate, pattern_counts_, count_patterns});
  queue.enqueueFillBuffer(slot.total_buffer_, cl_uint{0}, 0, sizeof(cl_uint));
  queue.enqueueNDRangeKernel(k, cl::NullRange, matcher_.global_size(slot.chunk_.size), matcher_.group_size(), nullptr,
                             done);
}

// The kernel's walk, position by position, on the host: the same trie, the same
// ownership rule, the same totals and per-pattern counts (when `count_patterns`).
void DeviceScanner::scan_on_host(Slot& slot, bool count_patterns) {
  slot.on_host_ = true;
  ++host_chunks_;
  slot.occurrences_.clear();
  if (count_patterns && host_counts_.empty()) host_counts_.assign(table_.unique_count(), 0);
  const std::string_view text(slot.staging_, slot.chunk_.size);
  std::uint64_t total = 0;
  table_.for_each_occurrence(text, slot.chunk_.overlap, [&](std::size_t p, std::uint32_t id) {
    ++total;
    if (config_.locate) slot.occurrences_.push_back(Occurrence{static_cast<std::uint32_t>(p), id});
    if (count_patterns) ++host_counts_[id];
  });
  slot.total_ = total;
}

void DeviceScanner::drain_queues() {
  readback_.finish();
  device_.upload_queue().finish();
  device_.compute_queue().finish();
  if (lost_) throw cl::Error(CL_OUT_OF_RESOURCES, "clFinish");
}

void DeviceScanner::fall_back(const cl::Error& error, const std::string& what, const Chunk& chunk) {
  ++device_faults_;
  fallen_back_ = true;
  fault_.emplace(error.what(), error.err(), what);
  // Nothing of ours may still run on the device while the host redoes its chunks: with
  // the queues drained, every kernel has finished or failed, and the counters hold all
  // that the device will ever count.
  try {
    drain_queues();
    drained_ = true;
  } catch (const cl::Error&) {
    drained_ = false;
  }
  if (config_.count_patterns) {
    if (drained_) {
      try {
        std::vector<cl_uint> counts(table_.unique_count());
        if (!counts.empty())
          device_.compute_queue().enqueueReadBuffer(pattern_counts_, CL_TRUE, 0, counts.size() * sizeof(cl_uint),
                                                    counts.data());
        device_counts_.emplace(counts.begin(), counts.end());
      } catch (const cl::Error&) {
        device_counts_.reset();
      }
    }
    if (!device_counts_) counts_exact_ = false;
  }
  if (on_fault_) on_fault_(*fault_, chunk);
}

DeviceScanner::Counted DeviceScanner::device_counted(Slot& slot) {
  if (!slot.kernel_enqueued_) return Counted::kNo;
  try {
    // After the drain the status is final: CL_COMPLETE, or an error code.
    return slot.kernel_done_.getInfo<CL_EVENT_COMMAND_EXECUTION_STATUS>() == CL_COMPLETE ? Counted::kYes
                                                                                         : Counted::kUnknown;
  } catch (const cl::Error&) {
    return Counted::kUnknown;
  }
}

void DeviceScanner::rescue(Slot& slot) {
  ++fallback_chunks_;
  bool count = config_.count_patterns;
  if (count && device_counts_) {
    switch (device_counted(slot)) {
      case Counted::kYes: count = false; break;  // in device_counts_ already
      case Counted::kNo: break;
      case Counted::kUnknown: counts_exact_ = false; break;  // counted here, perhaps twice
    }
  }
  if (!drained_) {
    // The device may still write this chunk's first occurrences into the slot's buffer:
    // keep that buffer, unread, until the scanner is gone.
    retired_.push_back(std::move(slot.occurrences_));
    slot.occurrences_ = std::vector<Occurrence>();
  }
  scan_on_host(slot, count);
  if (!drained_ && !slot.host_staging_) {
    // ... and may still read the pinned staging: the slot's next chunks go to host memory,
    // while this chunk's bytes stay where the caller reads them.
    slot.host_staging_ = std::make_unique_for_overwrite<char[]>(config_.chunk_bytes);
    slot.staging_ = slot.host_staging_.get();
  }
}

void DeviceScanner::start(ScanSlot& base) {
  auto& slot = static_cast<Slot&>(base);
  if (fallen_back_ || slot.chunk_.size < config_.host_scan_below) {
    scan_on_host(slot, config_.count_patterns);
    return;
  }
  slot.on_host_ = false;
  slot.kernel_enqueued_ = false;
  ++submits_;
  try {
    slot.total_device_ = 0;
    cl::Event uploaded;
    device_.upload_queue().enqueueWriteBuffer(slot.input_, CL_FALSE, 0, slot.chunk_.size, slot.staging_, nullptr,
                                              &uploaded);
    device_.upload_queue().flush();
    std::vector<cl::Event> wait{uploaded};
    auto& queue = device_.compute_queue();
    queue.enqueueBarrierWithWaitList(&wait);
    if (submits_ == config_.device_faults.submit) throw cl::Error(CL_OUT_OF_RESOURCES, "clEnqueueNDRangeKernel");
    enqueue_scan(slot, config_.count_patterns, config_.count_patterns ? &slot.kernel_done_ : nullptr);
    slot.kernel_enqueued_ = true;
    if (config_.locate) {
      queue.enqueueReadBuffer(slot.total_buffer_, CL_FALSE, 0, sizeof(cl_uint), &slot.total_device_);
      slot.occurrences_.resize(std::min(kEarlyRead, slot.output_capacity_));
      queue.enqueueReadBuffer(slot.output_, CL_FALSE, 0, slot.occurrences_.size() * sizeof(Occurrence),
                              slot.occurrences_.data(), nullptr, &slot.done_);
    } else {
      queue.enqueueReadBuffer(slot.total_buffer_, CL_FALSE, 0, sizeof(cl_uint), &slot.total_device_, nullptr,
                              &slot.done_);
    }
    if (submits_ == config_.device_faults.lost) lost_ = true;
    if (lost_) throw cl::Error(CL_OUT_OF_RESOURCES, "clFlush");
    queue.flush();
  } catch (const cl::Error& e) {
    fall_back(e, "submitting chunk " + std::to_string(slot.chunk_.seq), slot.chunk_);
    rescue(slot);
  }
}

void DeviceScanner::finish_on_device(Slot& slot, bool collect) {
  if (config_.poll_completion)
    while (slot.done_.getInfo<CL_EVENT_COMMAND_EXECUTION_STATUS>() > CL_COMPLETE)
      std::this_thread::sleep_for(std::chrono::microseconds(20));
  slot.done_.wait();
  ++finishes_;
  if (finishes_ == config_.device_faults.finish)
    throw cl::Error(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST, "clWaitForEvents");
  const std::size_t total = slot.total_device_;
  slot.total_ = total;
  if (!collect || !config_.locate) return;
  const std::size_t early = slot.occurrences_.size();  // read back with the count
  slot.occurrences_.resize(total);
  if (total > slot.output_capacity_) {
    // More occurrences than the buffer holds: grow it to fit them all and rescan the
    // chunk, which is still on the device. Counted once: the rescan does not count.
    ++growths_;
    if (growths_ == config_.device_faults.oom) throw cl::Error(CL_MEM_OBJECT_ALLOCATION_FAILURE, "clCreateBuffer");
    slot.output_ = cl::Buffer(device_.context(), CL_MEM_WRITE_ONLY, total * sizeof(cl_uint2));
    slot.output_capacity_ = total;
    enqueue_scan(slot, false);
    device_.compute_queue().enqueueReadBuffer(slot.output_, CL_TRUE, 0, total * sizeof(Occurrence),
                                              slot.occurrences_.data());
  } else if (total > early) {
    // The rest, through the read-back queue: the scan is done (done_ waited for it).
    readback_.enqueueReadBuffer(slot.output_, CL_TRUE, early * sizeof(Occurrence),
                                (total - early) * sizeof(Occurrence), slot.occurrences_.data() + early);
  }
}

void DeviceScanner::finish(ScanSlot& base, bool collect) {
  auto& slot = static_cast<Slot&>(base);
  if (!slot.on_host_) {
    if (fallen_back_) {
      rescue(slot);  // in flight at the fault: the device's results are not used
    } else {
      try {
        finish_on_device(slot, collect);
      } catch (const cl::Error& e) {
        fall_back(e, "scanning chunk " + std::to_string(slot.chunk_.seq), slot.chunk_);
        rescue(slot);
      }
    }
  }
  if (!collect || !config_.locate) {
    slot.occurrences_.clear();
    return;
  }
  sort_occurrences(slot.occurrences_, sort_buffer_, table_);
}

double DeviceScanner::rescan_resident(ScanSlot& base, unsigned times) {
  auto& slot = static_cast<Slot&>(base);
  try {
    auto& queue = device_.compute_queue();
    queue.finish();
    const auto begin = std::chrono::steady_clock::now();
    for (unsigned i = 0; i < times; ++i) enqueue_scan(slot, false);
    queue.finish();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  } catch (const cl::Error& e) {
    rethrow_cl(e, "rescanning chunk " + std::to_string(slot.chunk_.seq));
  }
}

double DeviceScanner::time_uploads(ScanSlot& base, unsigned times, bool buffer_copy) {
  auto& slot = static_cast<Slot&>(base);
  try {
    auto& queue = device_.upload_queue();
    queue.finish();
    const auto begin = std::chrono::steady_clock::now();
    for (unsigned i = 0; i < times; ++i) {
      if (buffer_copy) queue.enqueueCopyBuffer(slot.staging_buffer_, slot.input_, 0, 0, slot.chunk_.size);
      else queue.enqueueWriteBuffer(slot.input_, CL_FALSE, 0, slot.chunk_.size, slot.staging_);
    }
    queue.finish();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  } catch (const cl::Error& e) {
    rethrow_cl(e, "uploading chunk " + std::to_string(slot.chunk_.seq));
  }
}

std::vector<std::uint64_t> DeviceScanner::pattern_counts() {
  std::vector<std::uint64_t> result(table_.unique_count(), 0);
  if (!config_.count_patterns || result.empty()) return result;
  if (!fallen_back_) {
    try {
      std::vector<cl_uint> counts(result.size());
      device_.compute_queue().enqueueReadBuffer(pattern_counts_, CL_TRUE, 0, counts.size() * sizeof(cl_uint),
                                                counts.data());
      std::copy(counts.begin(), counts.end(), result.begin());
    } catch (const cl::Error& e) {
      fall_back(e, "reading pattern counts", Chunk{});
    }
  }
  if (fallen_back_ && device_counts_) std::copy(device_counts_->begin(), device_counts_->end(), result.begin());
  for (std::size_t i = 0; i < host_counts_.size(); ++i) result[i] += host_counts_[i];
  return result;
}

}  // namespace gpufilter
