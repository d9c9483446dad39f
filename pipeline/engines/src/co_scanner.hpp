// CoScanner: the host engine and OpenCL devices scan one input together.
//
// The pipeline thread submits chunks in input order, as to any Scanner. Each chunk goes
// to a device lane when one has room, else to the host engine (HostScanner: Hyperscan on
// every core); results come back in submission order. A device joins when it is ready
// (add_device, from any thread): until then every chunk goes to the host, so start-up
// never waits for a device's driver or program.
//
// A lane is a thread with a DeviceScanner of its own on a shared device and scan program.
// It takes chunks from one queue that every lane of every device shares (the first lane
// free takes the next chunk), copies each from where it lies (a mapped file's page cache,
// or the slot's staging) into its pinned staging, searching it for NUL bytes while it is
// in cache, submits it, and completes the oldest while it copies the next. Several lanes
// per device copy in parallel. The results are the device's, which are the host engine's
// byte for byte (scanner_test.cpp).
//
// A device that fails mid-run falls back inside its lane (DeviceScanner: the same results,
// scanned on the host); the fault is reported once, on the pipeline thread, to on_fault().
#pragma once

#include <concurrentqueue/blockingconcurrentqueue.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "device_share.hpp"
#include "gpufilter/engines/engine.hpp"
#include "gpufilter/hyperscan/host_scanner.hpp"
#include "gpufilter/opencl/device_scanner.hpp"

namespace gpufilter {

class CoScanner final : public Scanner {
 public:
  // `config` sizes the host engine and the chunks; throws as HostScanner does.
  CoScanner(const PatternTable& table, ScanConfig config);
  ~CoScanner() override;

  std::string_view engine() const noexcept override { return "cpu+gpu"; }
  bool scans_in_place() const noexcept override { return true; }
  std::vector<std::uint64_t> pattern_counts() override;
  bool counts_exact() noexcept;

  // Adds `lanes` lanes of `slots_per_lane` slots on `device`, scanning with `program`
  // (built from a table equal to this scanner's). Both must outlive the scanner. Callable
  // from any thread, while chunks are in flight. Throws DeviceError when the lanes' slots
  // cannot be allocated; then no lane of this device was added.
  void add_device(DeviceContext& device, const ScanProgram& program, std::size_t lanes, std::size_t slots_per_lane);

  // Chunks scanned so far by the devices' lanes and by the host engine.
  std::uint64_t device_chunks() const noexcept { return device_chunks_; }
  std::uint64_t host_chunks() const noexcept { return host_chunks_; }
  // The chunks and bytes each device's lanes took, in the order the devices joined.
  std::vector<DeviceShare> device_shares();
  void on_fault(DeviceFaultHandler handler) { on_fault_ = std::move(handler); }

 private:
  class Slot;
  struct LaneCount {
    std::atomic<std::uint64_t> chunks{0};
    std::atomic<std::uint64_t> bytes{0};
  };
  struct Lane {
    std::unique_ptr<DeviceScanner> scanner;
    std::size_t device = 0;  // index in device_names_
    std::unique_ptr<LaneCount> count;
    std::thread thread;
  };
  std::unique_ptr<ScanSlot> make_slot() override;
  void start(ScanSlot& slot) override;
  void finish(ScanSlot& slot, bool collect) override;
  void lane_work(DeviceScanner& device, LaneCount& count);
  void report_fault();

  HostScanner host_;
  moodycamel::BlockingConcurrentQueue<Slot*> lane_jobs_;  // nullptr: a lane's stop
  std::mutex lanes_mutex_;
  std::vector<Lane> lanes_;
  std::vector<std::string> device_names_;  // the devices that joined, in order
  // A chunk goes to the lanes while they hold fewer than they have slots, counting each
  // until its lane completes it (not until it is delivered, which waits for every chunk
  // before it): so each engine's share follows its speed.
  std::atomic<std::size_t> lane_room_{0};     // slots over every lane
  std::atomic<std::size_t> lane_pending_{0};  // chunks given to lanes and not yet completed
  std::uint64_t device_chunks_ = 0;
  std::uint64_t host_chunks_ = 0;
  DeviceFaultHandler on_fault_;
  // A lane's device fault, kept for the pipeline thread.
  std::mutex fault_mutex_;
  std::optional<std::pair<DeviceError, Chunk>> fault_;
  bool fault_reported_ = false;
};

}  // namespace gpufilter
