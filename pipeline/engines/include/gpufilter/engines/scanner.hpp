// Scanner: a fixed pool of scan slots, each one chunk in flight. The pool size bounds
// memory and is the pipeline's backpressure. Two engines fill the slots:
//   DeviceScanner (device_scanner.hpp): pinned upload -> OpenCL scan kernel -> read-back;
//   HostScanner (host_scanner.hpp): Hyperscan on host worker threads.
// Both hand on the same occurrences for the same chunk, byte for byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "gpufilter/core/chunk.hpp"
#include "gpufilter/patterns/pattern_table.hpp"

namespace gpufilter {

// A test seam: device faults for DeviceScanner to inject, each a real cl::Error thrown
// where the OpenCL call it stands for would throw it, so that the recovery under test is
// the production path. Each field is a 1-based count of that event in the scanner's life;
// 0 never fails. The library never reads the environment: gpufilter and gpufilterd parse
// GPUFILTER_INJECT_DEVICE_FAULT with parse().
struct DeviceFaults {
  // The Nth chunk sent to the device: its kernel launch fails (clEnqueueNDRangeKernel,
  // CL_OUT_OF_RESOURCES) after its upload was enqueued.
  std::uint64_t submit = 0;
  // The Nth chunk completed on the device: the wait for it fails (clWaitForEvents,
  // CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST) after its kernel ran.
  std::uint64_t finish = 0;
  // The Nth growth of a slot's occurrence buffer (a chunk with more occurrences than it
  // holds) fails (clCreateBuffer, CL_MEM_OBJECT_ALLOCATION_FAILURE).
  std::uint64_t oom = 0;
  // The Nth scan slot made after the first (slots are made when first needed) cannot be
  // allocated (clCreateBuffer, CL_MEM_OBJECT_ALLOCATION_FAILURE).
  std::uint64_t alloc = 0;
  // The device is lost at the Nth chunk sent: its submission fails (clFlush,
  // CL_OUT_OF_RESOURCES), and so does the drain of the queues that follows (clFinish,
  // after really draining them, so that no command is left running): the path of a
  // device whose queues cannot be drained nor its counters read.
  std::uint64_t lost = 0;

  bool any() const noexcept { return submit != 0 || finish != 0 || oom != 0 || alloc != 0 || lost != 0; }
  // "KIND:N[,KIND:N]...", KIND one of submit, finish, oom, alloc, lost, N >= 1 ("submit:3",
  // "finish:1,oom:2"). Throws ConfigError naming `spec` when it is malformed.
  static DeviceFaults parse(std::string_view spec);
};

struct ScanConfig {
  std::size_t chunk_bytes = 8u << 20;
  std::size_t slots = 2;         // at least 2, so reading overlaps scanning
  bool locate = true;            // hand on positions and ids, not only counts
  bool count_patterns = false;   // accumulate per-pattern occurrence counts
  // With locate and not count_patterns: the byte that ends a line ('\n', '\0' for grep
  // -z) when the consumer needs one occurrence per line and no more (Searcher::
  // one_occurrence_per_line), -1 for all. The host engine then leaves out most of a line's
  // later occurrences; other engines hand on all of them.
  int one_per_line = -1;
  // DeviceScanner: chunks smaller than this are scanned on the host by a walk of the same
  // trie (PatternTable::for_each_at), with identical results, where a device round trip
  // would cost more than the scan. 0: always on the device.
  std::size_t host_scan_below = 0;
  DeviceFaults device_faults{};  // DeviceScanner: faults to inject (tests only)
  // DeviceScanner: wait for a chunk by polling its event with short sleeps rather than in
  // clWaitForEvents, which NVIDIA's driver spins in: a co-scan's lanes share the cores
  // with the host engine's workers.
  bool poll_completion = false;
};

// What a scanner's after-scan work (Scanner::set_after_scan) keeps with a slot for the
// one who set it; the engine never reads it.
class SlotNote {
 public:
  virtual ~SlotNote() = default;
};

class ScanSlot {
 public:
  ScanSlot(const ScanSlot&) = delete;
  ScanSlot& operator=(const ScanSlot&) = delete;
  virtual ~ScanSlot() = default;

  // chunk_bytes() of memory the chunker fills (pinned for a device).
  char* staging() noexcept { return staging_; }
  Chunk& chunk() noexcept { return chunk_; }
  const Chunk& chunk() const noexcept { return chunk_; }
  // After completion: occurrences sorted by PatternTable::before (position, longest first).
  std::span<const Occurrence> occurrences() const noexcept { return occurrences_; }
  // After completion: how many occurrences the chunk holds (also when not located).
  std::uint64_t total() const noexcept { return total_; }
  // After completion, for a chunk with nul_search: where in data the first NUL byte of
  // data[0, nul_search) is; kNoNul: none (or no search asked).
  static constexpr std::size_t kNoNul = static_cast<std::size_t>(-1);
  std::size_t first_nul() const noexcept { return first_nul_; }
  // The after-scan work's note on this slot's chunk (null until that work makes one).
  std::unique_ptr<SlotNote>& note() noexcept { return note_; }

 protected:
  ScanSlot() = default;

  char* staging_ = nullptr;
  Chunk chunk_;
  std::vector<Occurrence> occurrences_;
  std::uint64_t total_ = 0;
  std::size_t first_nul_ = kNoNul;
  std::unique_ptr<SlotNote> note_;

  friend class Scanner;
};

class Scanner {
 public:
  virtual ~Scanner() = default;
  Scanner(const Scanner&) = delete;
  Scanner& operator=(const Scanner&) = delete;

  std::size_t chunk_bytes() const noexcept { return config_.chunk_bytes; }
  std::size_t slot_count() const noexcept { return config_.slots; }
  const PatternTable& table() const noexcept { return table_; }
  bool locates() const noexcept { return config_.locate; }
  // "gpu" for the OpenCL device, "cpu" for the host engine.
  virtual std::string_view engine() const noexcept = 0;
  // Whether a chunk's data may lie anywhere (a mapped file: ChunkerConfig::mapping)
  // rather than in the slot's staging (a device uploads from pinned staging). Such an
  // engine also does a chunk's NUL search (Chunk::nul_search).
  virtual bool scans_in_place() const noexcept { return false; }
  // How many chunks in flight keep the engine busy where each is copied into its slot's
  // staging (a file read, not mapped): fewer than slot_count() where the slots are sized
  // for mapped chunks, which cost no staging.
  virtual std::size_t copied_slots() const noexcept { return slot_count(); }

  // Work on each chunk's results that the engine runs where it scanned the chunk, as soon
  // as it is scanned (the host engine: on its workers, several chunks at once, while the
  // pipeline thread delivers earlier ones); not after a failed scan. It must not throw.
  // Returns whether the engine runs it; a device does not, and the caller then does that
  // work when it delivers the slot. Set, or cleared with an empty function, while no slot
  // is in flight.
  using AfterScan = std::function<void(ScanSlot&)>;
  virtual bool set_after_scan(AfterScan) { return false; }

  // A free slot, or nullptr when every slot is in flight (complete one first). Slots are
  // made when first needed, so start-up pays for one only.
  ScanSlot* acquire();
  // Starts scanning the slot's chunk. Does not wait.
  void submit(ScanSlot& slot);
  std::size_t in_flight() const noexcept { return in_flight_.size(); }
  // Waits for the oldest submitted slot and collects its results; slots complete in
  // submission order. The slot stays owned by the caller until release().
  ScanSlot& complete_oldest();
  void release(ScanSlot& slot);
  // Waits for everything in flight and drops it unread (after an early stop).
  void discard_in_flight();

  // Occurrences per unique pattern so far (with ScanConfig::count_patterns).
  virtual std::vector<std::uint64_t> pattern_counts() = 0;

 protected:
  Scanner(const PatternTable& table, ScanConfig config);
  // A new slot with chunk_bytes() of staging; derived constructors make the first one.
  virtual std::unique_ptr<ScanSlot> make_slot() = 0;
  void add_slot(std::unique_ptr<ScanSlot> slot);
  // For a scanner made of others (CoScanner): hands `from`'s results (occurrences, total,
  // first NUL) to `to`, leaving `from` empty.
  static void move_results(ScanSlot& from, ScanSlot& to) noexcept;
  // Begins scanning slot.chunk() (never empty).
  virtual void start(ScanSlot& slot) = 0;
  // Waits for the slot's scan; with `collect`, fills its occurrences and total.
  virtual void finish(ScanSlot& slot, bool collect) = 0;

  const PatternTable& table_;
  ScanConfig config_;

 private:
  std::vector<std::unique_ptr<ScanSlot>> slots_;
  std::vector<ScanSlot*> free_;
  std::deque<ScanSlot*> in_flight_;
};

}  // namespace gpufilter
