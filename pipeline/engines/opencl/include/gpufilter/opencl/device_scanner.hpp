// DeviceScanner: the OpenCL engine. Each slot has pinned host staging
// (CL_MEM_ALLOC_HOST_PTR, mapped once), device input and output buffers, and the event
// that ends its upload -> scan -> read-back chain (the count and the first occurrences).
// Uploads and scans run on two queues, so the upload of chunk N+1 overlaps the scan of
// chunk N; a chunk with many occurrences reads the rest through a third queue, so that
// it never waits behind the scans of the chunks submitted after it.
//
// A device that fails mid-stream. When an OpenCL call fails while a chunk is submitted
// or completed (a transfer or kernel launch error, a failed wait, no device memory to
// grow an occurrence buffer or to make a slot), the scanner does not throw: it falls
// back to the host for the rest of its life. A device that failed once is not trusted
// again, and a flapping one must not cost a failed round trip per chunk. At the fault it
// drains the device's queues, so that nothing of it is still running, and reads its
// per-pattern counters once. Then every chunk not yet completed, the failing one and
// those in flight in the other slots, is scanned again on the host by the kernel's own
// walk of the trie (scan_on_host), from the bytes still in the slot's pinned staging,
// and so is every later chunk: each chunk is completed once, from the device before the
// fault or from the host after it, with the occurrences and totals the device would
// have given. The fault is counted (device_faults(), fallback_chunks()), kept (fault()),
// and reported once to on_fault(). If the queues cannot be drained (the device is
// lost), the device may still write into the host memory of the chunks it had: their
// occurrence buffers are retired unread until the scanner is destroyed, and their slots
// get plain host staging for later chunks.
//
// Per-pattern counts (ScanConfig::count_patterns) after a fault: the device's counters
// as read at the fault plus the host's counts. A chunk whose kernel never ran is counted
// on the host; one whose kernel completed (its event says so) is counted by the device
// only; so the counts stay exact (counts_exact()) unless a failing chunk's kernel neither
// completed nor is known not to have run, or the counters could not be read (the queues
// did not drain, or the read failed). Then counts_exact() is false, and pattern_counts()
// returns what is known: the counters read at the fault, if any, plus every chunk the
// host scanned (a chunk of unknown state is counted on the host and so perhaps twice);
// without the counters, that is only the chunks the host scanned, a lower bound.
// Teardown never throws.
#pragma once

#include <CL/opencl.hpp>

#include <functional>
#include <optional>

#include "gpufilter/opencl/device.hpp"
#include "gpufilter/core/errors.hpp"
#include "gpufilter/opencl/scan_program.hpp"
#include "gpufilter/engines/scanner.hpp"

namespace gpufilter {

class DeviceScanner final : public Scanner {
 public:
  // Throws DeviceError when the slots cannot be allocated.
  DeviceScanner(DeviceContext& device, const ScanProgram& matcher, ScanConfig config);
  ~DeviceScanner() override;

  std::string_view engine() const noexcept override { return "gpu"; }
  // Never throws DeviceError: failing to read the device's counters is itself a fault,
  // after which the counts are the host's alone (counts_exact() false). After a fault it
  // does not touch the device (see above).
  std::vector<std::uint64_t> pattern_counts() override;
  // Whether pattern_counts() is exact. False only after a fault that left a chunk's
  // device count unknown, or the device's counters unreadable (see above).
  bool counts_exact() const noexcept { return counts_exact_; }

  // Benchmarking: scans the chunk last submitted in `slot` again, `times` times, from the
  // copy already on the device (no upload, no read-back), and waits. Returns seconds.
  double rescan_resident(ScanSlot& slot, unsigned times);
  // Benchmarking: uploads the slot's chunk from its pinned staging `times` times and waits.
  // `buffer_copy`: as a buffer-to-buffer copy instead of a write from the mapped pointer.
  // Returns seconds.
  double time_uploads(ScanSlot& slot, unsigned times, bool buffer_copy);
  // Chunks scanned on the host so far: below ScanConfig::host_scan_below, and every chunk
  // completed after a fault.
  std::uint64_t host_chunks() const noexcept { return host_chunks_; }

  // Device faults the scanner recovered from: 0, or 1 (after the first, the device is not
  // used again).
  std::uint64_t device_faults() const noexcept { return device_faults_; }
  // Chunks whose device scan was abandoned at a fault and redone on the host: the failing
  // chunk and those in flight beside it (at most the slot count).
  std::uint64_t fallback_chunks() const noexcept { return fallback_chunks_; }
  // The fault, once there was one: the OpenCL call, its error code, and what was being
  // done ("submitting chunk 3").
  const std::optional<DeviceError>& fault() const noexcept { return fault_; }
  // Called once, at the fault, on the thread that submits and completes chunks, with the
  // error and the chunk being submitted or completed (chunk.size 0 when the fault came
  // from reading the counters). It must not throw.
  using FaultHandler = std::function<void(const DeviceError& error, const Chunk& chunk)>;
  void on_fault(FaultHandler handler) { on_fault_ = std::move(handler); }

 private:
  class Slot;
  enum class Counted { kNo, kYes, kUnknown };  // whether the device counted a chunk's patterns
  // After the first slot, which the constructor makes: a device slot, or after a fault (a
  // failed allocation is one) a slot with plain host staging.
  std::unique_ptr<ScanSlot> make_slot() override;
  std::unique_ptr<Slot> make_device_slot();  // throws cl::Error
  void start(ScanSlot& slot) override;
  void finish(ScanSlot& slot, bool collect) override;
  void finish_on_device(Slot& slot, bool collect);
  void enqueue_scan(Slot& slot, bool count_patterns, cl::Event* done = nullptr);
  void scan_on_host(Slot& slot, bool count_patterns);
  // The fault: records it, drains the queues, reads the counters, calls on_fault_.
  void fall_back(const cl::Error& error, const std::string& what, const Chunk& chunk);
  // After fall_back(): scans the slot's chunk again on the host.
  void rescue(Slot& slot);
  Counted device_counted(Slot& slot);
  void drain_queues();

  DeviceContext& device_;
  const ScanProgram& matcher_;
  cl::Buffer pattern_counts_;
  cl::CommandQueue readback_;  // large occurrence read-backs, behind no later chunk's scan
  std::vector<Occurrence> sort_buffer_;
  std::vector<std::uint64_t> host_counts_;  // per-pattern counts of the chunks scanned on the host
  std::uint64_t host_chunks_ = 0;

  // After a fault.
  bool fallen_back_ = false;
  bool drained_ = false;  // nothing of ours was left running on the device at the fault
  bool counts_exact_ = true;
  std::optional<std::vector<std::uint64_t>> device_counts_;  // the device's counters, read at the fault
  std::uint64_t device_faults_ = 0;
  std::uint64_t fallback_chunks_ = 0;
  std::optional<DeviceError> fault_;
  FaultHandler on_fault_;
  // Occurrence buffers a lost device may still write into: kept, unread, to the end.
  std::vector<std::vector<Occurrence>> retired_;

  // Fault injection (ScanConfig::device_faults): events seen so far.
  std::uint64_t submits_ = 0;
  std::uint64_t finishes_ = 0;
  std::uint64_t growths_ = 0;
  std::uint64_t allocations_ = 0;  // slots made after the first
  bool lost_ = false;  // an injected lost device: every later call fails
};

}  // namespace gpufilter
