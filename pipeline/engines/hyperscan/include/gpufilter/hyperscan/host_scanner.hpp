// HostScanner: the host engine. Each submitted chunk is scanned by HsDatabase
// (Hyperscan) on one of a fixed set of worker threads, so several chunks are scanned at
// once while the pipeline thread reads the next. Small pattern sets and machines without
// a GPU are faster here than on an OpenCL device (docs/PERFORMANCE.md); results are the
// same as DeviceScanner's, byte for byte.
#pragma once

#include <algorithm>
#include <concurrentqueue/blockingconcurrentqueue.h>

#include <cstddef>
#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "gpufilter/hyperscan/hs_database.hpp"
#include "gpufilter/engines/scanner.hpp"

namespace gpufilter {

class HostScanner final : public Scanner {
 public:
  // `threads` workers (0: one per core). Throws PatternError/Error from HsDatabase.
  HostScanner(const PatternTable& table, ScanConfig config, std::size_t threads = 0);
  ~HostScanner() override;

  std::string_view engine() const noexcept override { return "cpu"; }
  bool scans_in_place() const noexcept override { return true; }
  // One per worker and two, one filling and one delivered, as for streams.
  std::size_t copied_slots() const noexcept override { return std::min(slot_count(), worker_count_ + 2); }
  std::vector<std::uint64_t> pattern_counts() override;
  bool set_after_scan(AfterScan after) override;

  // Where the workers' time went (--stats): their CPU seconds, and the seconds of it in
  // Hyperscan's scans and in the after-scan work, summed over the workers.
  struct WorkerTimes {
    double cpu_s = 0, scan_s = 0, after_s = 0;
  };
  WorkerTimes worker_times() const noexcept;

  // The slots and threads the host engine wants by default for this machine.
  static std::size_t default_threads();

  // A scanner with this one's patterns and configuration, sharing its compiled database,
  // that scans every chunk on the thread that submits it (no workers): one per thread of
  // a search of many files at once, each thread a file.
  std::unique_ptr<HostScanner> twin_on_caller_thread() const;

 private:
  class Slot;
  struct OnCallerThread {};
  HostScanner(const HostScanner& original, OnCallerThread);
  std::unique_ptr<ScanSlot> make_slot() override;
  void start(ScanSlot& slot) override;
  void finish(ScanSlot& slot, bool collect) override;
  void work();
  void scan(Slot& slot, HsDatabase::Scratch& scratch);
  // scan(), then the after-scan work; a failure is kept in the slot.
  void scan_slot(Slot& slot, HsDatabase::Scratch& scratch) noexcept;

  std::shared_ptr<const HsDatabase> matcher_;
  // Chunks smaller than kInlineBytes (half of FileScan's smallest piece of a file, so that
  // the pieces of one file still go to every worker) are scanned on the thread that
  // submits them: handing one to a worker and waiting cost more than its scan (a search
  // of /usr/include, 22,431 small files, spent 87 % of its system time in futex). A twin
  // (twin_on_caller_thread) scans every chunk so.
  static constexpr std::size_t kInlineBytes = 32u << 10;
  // A file's first, small chunks (Chunk::flush_after) up to 1 MiB too: an early answer
  // (-l, -q, -m) mostly comes from them, and starting the workers for them cost more than
  // their scan.
  static constexpr std::size_t kFirstInlineBytes = 1u << 20;
  HsDatabase::Scratch inline_scratch_;
  bool all_inline_ = false;
  moodycamel::BlockingConcurrentQueue<Slot*> jobs_;  // nullptr: stop
  // Started by the first chunk that goes to them: a run of small inputs starts none.
  std::size_t worker_count_ = 0;
  std::once_flag workers_started_;
  std::vector<std::thread> workers_;
  std::vector<std::uint64_t> pattern_counts_;
  AfterScan after_scan_;  // read by the workers after they take a slot
  // Nanoseconds, summed over the workers as each finishes a chunk.
  std::atomic<std::uint64_t> cpu_ns_{0}, scan_ns_{0}, after_ns_{0};
};

}  // namespace gpufilter
