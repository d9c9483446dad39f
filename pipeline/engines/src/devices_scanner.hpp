// DevicesScanner: several OpenCL devices scan one input, each chunk on one of them.
//
// Each device has a DeviceScanner of its own (its pinned slots, queues and fault
// handling); each of this scanner's slots is one of theirs, made in turn on each device,
// so that the pipeline fills a device's pinned staging directly, as with one device. A
// slot keeps its device for life: the devices take the chunks in turn, an equal share
// each, and the results come back in submission order. With devices of one kind (the GPUs
// of one machine) that is the share work-stealing would give; CoScanner's lanes share a
// queue instead, at the cost of a copy per chunk.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "device_share.hpp"
#include "gpufilter/opencl/device_scanner.hpp"

namespace gpufilter {

class DevicesScanner final : public Scanner {
 public:
  // One scanner per device, with `programs[i]` built on `devices[i]` (both outlive this).
  // `config.slots` counts the slots of every device together (at least one each). Throws
  // DeviceError when the first slots cannot be allocated.
  DevicesScanner(std::span<DeviceContext* const> devices, std::span<const ScanProgram* const> programs,
                 ScanConfig config);
  ~DevicesScanner() override;

  std::string_view engine() const noexcept override { return "gpu"; }
  std::vector<std::uint64_t> pattern_counts() override;
  bool counts_exact() const noexcept;
  void on_fault(const DeviceScanner::FaultHandler& handler);
  // The chunks and bytes each device took, in the devices' order.
  std::vector<DeviceShare> shares() const;

 private:
  class Slot;
  struct Member {
    std::unique_ptr<DeviceScanner> scanner;
    std::string name;
    std::uint64_t chunks = 0;
    std::uint64_t bytes = 0;
  };
  std::unique_ptr<ScanSlot> make_slot() override;
  void start(ScanSlot& slot) override;
  void finish(ScanSlot& slot, bool collect) override;

  std::vector<Member> members_;
  std::size_t slots_made_ = 0;
};

}  // namespace gpufilter
