// DeviceScanner: the OpenCL engine. Each slot has pinned host staging
// (CL_MEM_ALLOC_HOST_PTR, mapped once), device input and output buffers, and the event
// that ends its upload -> scan -> count read-back chain. Uploads and scans run on two
// queues, so the upload of chunk N+1 overlaps the scan of chunk N.
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

 private:
  class Slot;
  std::unique_ptr<ScanSlot> make_slot() override;
  void start(ScanSlot& slot) override;
  void finish(ScanSlot& slot, bool collect) override;
  void enqueue_scan(Slot& slot, bool count_patterns);

  DeviceContext& device_;
  const Matcher& matcher_;
  cl::Buffer pattern_counts_;
  std::vector<Occurrence> sort_buffer_;
};

}  // namespace gpufilter
