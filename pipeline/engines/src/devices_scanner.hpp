// DevicesScanner: several OpenCL devices scan one input, each chunk on one of them.
//
// Each device has a DeviceScanner of its own (its pinned slots, queues and fault
// handling) and a thread that submits its chunks and completes them, so that one
// device's driver calls never wait behind another's (NVIDIA's OpenCL switches contexts
// on a thread that talks to several). Each of this scanner's slots is one of a device
// scanner's, made in turn on each device, so that the pipeline fills that device's pinned
// staging directly, as with one device. A slot keeps its device for life: the devices
// take the chunks in turn, an equal share each, and the results come back in submission
// order. With devices of one kind (the GPUs of one machine) that is the share
// work-stealing would give; CoScanner's lanes share a queue instead, at the cost of a
// copy per chunk.
//
// A device's fault is its own (DeviceScanner falls back to the host for the rest of its
// share); it is reported once per device, naming it, on the pipeline thread.
#pragma once

#include <concurrentqueue/blockingconcurrentqueue.h>

#include <memory>
#include <mutex>
#include <span>
#include <thread>
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
  // After the chunks in flight are completed (the device threads are then idle).
  std::vector<std::uint64_t> pattern_counts() override;
  bool counts_exact() const noexcept;
  void on_fault(DeviceScanner::FaultHandler handler) { on_fault_ = std::move(handler); }
  // The chunks and bytes each device took, in the devices' order.
  std::vector<DeviceShare> shares() const;

 private:
  class Slot;
  struct Member {
    // The pipeline thread makes slots (acquire) while the device's thread submits and
    // completes: each call into the device scanner holds this.
    mutable std::mutex mutex;
    std::unique_ptr<DeviceScanner> scanner;
    std::string name;
    std::uint64_t chunks = 0;  // counted on the pipeline thread
    std::uint64_t bytes = 0;
    moodycamel::BlockingConcurrentQueue<Slot*> jobs;  // nullptr: stop
    std::thread thread;
  };
  std::unique_ptr<ScanSlot> make_slot() override;
  void start(ScanSlot& slot) override;
  void finish(ScanSlot& slot, bool collect) override;
  void device_work(Member& member);
  void report_faults();

  std::vector<std::unique_ptr<Member>> members_;
  std::size_t slots_made_ = 0;
  DeviceScanner::FaultHandler on_fault_;
  std::mutex fault_mutex_;
  std::vector<std::pair<DeviceError, Chunk>> faults_;  // told on the pipeline thread, then dropped
};

}  // namespace gpufilter
