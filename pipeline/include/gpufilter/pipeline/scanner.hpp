// Scanner: a fixed pool of scan slots. Each slot is one in-flight chunk with pinned host
// staging (CL_MEM_ALLOC_HOST_PTR, mapped once), device input and output buffers, and the
// event that ends its upload -> scan -> count read-back chain. The pool size bounds memory
// and is the pipeline's backpressure.
#pragma once

#include <CL/opencl.hpp>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <vector>

#include "gpufilter/pipeline/chunk.hpp"
#include "gpufilter/pipeline/device.hpp"
#include "gpufilter/pipeline/matcher.hpp"

namespace gpufilter {

struct ScanConfig {
  std::size_t chunk_bytes = 8u << 20;
  std::size_t slots = 2;         // at least 2, so uploads overlap scans
  bool locate = true;            // read back positions and ids, not only counts
  bool count_patterns = false;   // accumulate per-pattern occurrence counts on the device
};

class ScanSlot {
 public:
  ScanSlot(const ScanSlot&) = delete;
  ScanSlot& operator=(const ScanSlot&) = delete;
  ~ScanSlot();

  char* staging() noexcept { return staging_host_; }
  Chunk& chunk() noexcept { return chunk_; }
  const Chunk& chunk() const noexcept { return chunk_; }
  // After completion: occurrences sorted by position (longest pattern first at a position).
  std::span<const Occurrence> occurrences() const noexcept { return occurrences_; }
  // After completion: how many occurrences the chunk holds (also when not located).
  std::uint64_t total() const noexcept { return total_host_; }

 private:
  friend class Scanner;
  ScanSlot() = default;

  cl::CommandQueue* upload_queue_ = nullptr;
  cl::Buffer staging_;
  char* staging_host_ = nullptr;
  cl::Buffer input_;
  cl::Buffer output_;
  std::size_t output_capacity_ = 0;
  cl::Buffer total_;
  cl_uint total_host_ = 0;
  cl::Kernel kernel_;
  cl::Event done_;
  Chunk chunk_;
  std::vector<Occurrence> occurrences_;
};

class Scanner {
 public:
  Scanner(DeviceContext& device, const Matcher& matcher, ScanConfig config);
  ~Scanner();
  Scanner(const Scanner&) = delete;
  Scanner& operator=(const Scanner&) = delete;

  std::size_t chunk_bytes() const noexcept { return config_.chunk_bytes; }
  const PatternTable& table() const noexcept { return matcher_.table(); }
  bool locates() const noexcept { return config_.locate; }

  // A free slot, or nullptr when every slot is in flight (complete one first).
  ScanSlot* acquire();
  // Enqueues the slot's chunk: upload, scan, count read-back. Does not wait.
  void submit(ScanSlot& slot);
  std::size_t in_flight() const noexcept { return in_flight_.size(); }
  // Waits for the oldest submitted slot and reads back its occurrences; slots complete
  // in submission order. The slot stays owned by the caller until release().
  ScanSlot& complete_oldest();
  void release(ScanSlot& slot);
  // Waits for everything in flight and drops it unread (after an early stop).
  void discard_in_flight();

  // Occurrences per unique pattern so far (with ScanConfig::count_patterns).
  std::vector<std::uint64_t> pattern_counts();

 private:
  void enqueue_scan(ScanSlot& slot);

  DeviceContext& device_;
  const Matcher& matcher_;
  ScanConfig config_;
  std::vector<std::unique_ptr<ScanSlot>> slots_;
  std::vector<ScanSlot*> free_;
  std::deque<ScanSlot*> in_flight_;
  cl::Buffer pattern_counts_;
};

}  // namespace gpufilter
