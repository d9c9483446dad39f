// DeviceScanner: the OpenCL engine. Each slot has pinned host staging
// (CL_MEM_ALLOC_HOST_PTR, mapped once), device input and output buffers, and the event
// that ends its upload -> scan -> read-back chain (the count and the first occurrences).
// Uploads and scans run on two queues, so the upload of chunk N+1 overlaps the scan of
// chunk N; a chunk with many occurrences reads the rest through a third queue, so that
// it never waits behind the scans of the chunks submitted after it.
#pragma once

#include <CL/opencl.hpp>

#include "gpufilter/pipeline/device.hpp"
#include "gpufilter/pipeline/matcher.hpp"
#include "gpufilter/pipeline/scanner.hpp"

namespace gpufilter {

class DeviceScanner final : public Scanner {
 public:
  // Throws DeviceError when the slots cannot be allocated.
  DeviceScanner(DeviceContext& device, const Matcher& matcher, ScanConfig config);
  ~DeviceScanner() override;

  std::string_view engine() const noexcept override { return "gpu"; }
  std::vector<std::uint64_t> pattern_counts() override;

  // Benchmarking: scans the chunk last submitted in `slot` again, `times` times, from the
  // copy already on the device (no upload, no read-back), and waits. Returns seconds.
  double rescan_resident(ScanSlot& slot, unsigned times);
  // Benchmarking: uploads the slot's chunk from its pinned staging `times` times and waits.
  // `buffer_copy`: as a buffer-to-buffer copy instead of a write from the mapped pointer.
  // Returns seconds.
  double time_uploads(ScanSlot& slot, unsigned times, bool buffer_copy);
  // Chunks scanned on the host so far (ScanConfig::host_scan_below).
  std::uint64_t host_chunks() const noexcept { return host_chunks_; }

 private:
  class Slot;
  std::unique_ptr<ScanSlot> make_slot() override;
  void start(ScanSlot& slot) override;
  void finish(ScanSlot& slot, bool collect) override;
  void enqueue_scan(Slot& slot, bool count_patterns);
  void scan_on_host(Slot& slot);

  DeviceContext& device_;
  const Matcher& matcher_;
  cl::Buffer pattern_counts_;
  cl::CommandQueue readback_;  // large occurrence read-backs, behind no later chunk's scan
  std::vector<Occurrence> sort_buffer_;
  std::vector<std::uint64_t> host_counts_;  // per-pattern counts of the chunks scanned on the host
  std::uint64_t host_chunks_ = 0;
};

}  // namespace gpufilter
