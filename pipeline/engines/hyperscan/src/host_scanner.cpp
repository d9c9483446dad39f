#include "gpufilter/hyperscan/host_scanner.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <utility>

#include "gpufilter/core/errors.hpp"
#include "gpufilter/core/slot_memory.hpp"
#include "gpufilter/core/thread_clock.hpp"

namespace gpufilter {

class HostScanner::Slot final : public ScanSlot {
 public:
  Slot(std::size_t bytes, bool huge_pages) : memory_(slot_memory(bytes, huge_pages)) { staging_ = memory_.get(); }

  SlotMemory memory_;
  std::vector<std::uint64_t> counts_;  // this chunk's per-pattern counts
  std::string error_;                  // what went wrong on the worker, if anything
  std::atomic<bool> done_{true};

  friend class HostScanner;
};

namespace {

ScanConfig twin_config(ScanConfig config) {
  config.slots = 4;
  return config;
}

}  // namespace

std::size_t HostScanner::default_threads() {
  return std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, 64);
}

HostScanner::HostScanner(const PatternTable& table, ScanConfig config, std::size_t threads)
    : Scanner(table, config),
      matcher_(std::make_shared<const HsDatabase>(table)),
      inline_scratch_(matcher_->new_scratch()) {
  if (config_.count_patterns) pattern_counts_.assign(table.unique_count(), 0);
  add_slot(make_slot());
  worker_count_ = std::min(threads == 0 ? default_threads() : threads, config_.slots);
}

// Four slots: a chunk scanned on the caller's thread is done when submitted, so more in
// flight only hold more memory (a decoding input fills every slot it is given). H200, 8
// gzip files of 446 MB on a farm: the engine's 66 slots 1.17-1.78 s and 226-319 MB, 4
// slots 1.14-1.22 s and 83-91 MB, 2 slots 1.11-1.88 s and 48-66 MB.
HostScanner::HostScanner(const HostScanner& original, OnCallerThread)
    : Scanner(original.table_, twin_config(original.config_)),
      matcher_(original.matcher_),
      inline_scratch_(matcher_->new_scratch()),
      all_inline_(true) {
  if (config_.count_patterns) pattern_counts_.assign(table_.unique_count(), 0);
  add_slot(make_slot());
}

std::unique_ptr<HostScanner> HostScanner::twin_on_caller_thread() const {
  return std::unique_ptr<HostScanner>(new HostScanner(*this, OnCallerThread{}));
}

HostScanner::~HostScanner() {
  for (std::size_t i = 0; i < workers_.size(); ++i) jobs_.enqueue(nullptr);
  for (std::thread& t : workers_) t.join();
}

// A worker: scans one slot's chunk at a time with its own scratch. Nothing is thrown
// across the thread: a failure is kept in the slot and raised by finish().
void HostScanner::work() {
  HsDatabase::Scratch scratch;
  std::string setup_error;
  try {
    scratch = matcher_->new_scratch();
  } catch (const std::exception& e) {
    setup_error = e.what();
  }
  double cpu_before = thread_cpu_seconds();
  for (;;) {
    Slot* slot = nullptr;
    jobs_.wait_dequeue(slot);
    if (slot == nullptr) return;
    if (!setup_error.empty()) slot->error_ = setup_error;
    else scan_slot(*slot, scratch);
    const double cpu = thread_cpu_seconds();
    cpu_ns_.fetch_add(static_cast<std::uint64_t>((cpu - cpu_before) * 1e9), std::memory_order_relaxed);
    cpu_before = cpu;
    slot->done_.store(true, std::memory_order_release);
    slot->done_.notify_one();
  }
}

bool HostScanner::set_after_scan(AfterScan after) {
  after_scan_ = std::move(after);
  return true;
}

void HostScanner::scan_slot(Slot& slot, HsDatabase::Scratch& scratch) noexcept {
  const auto start = std::chrono::steady_clock::now();
  const auto since = [](std::chrono::steady_clock::time_point t) {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t).count());
  };
  try {
    scan(slot, scratch);
  } catch (const std::bad_alloc&) {
    slot.error_ = "memory exhausted";
    return;
  } catch (const std::exception& e) {
    slot.error_ = e.what();
    return;
  }
  scan_ns_.fetch_add(since(start), std::memory_order_relaxed);
  if (after_scan_) {
    const auto after = std::chrono::steady_clock::now();
    after_scan_(slot);
    after_ns_.fetch_add(since(after), std::memory_order_relaxed);
  }
}

HostScanner::WorkerTimes HostScanner::worker_times() const noexcept {
  return {static_cast<double>(cpu_ns_.load(std::memory_order_relaxed)) * 1e-9,
          static_cast<double>(scan_ns_.load(std::memory_order_relaxed)) * 1e-9,
          static_cast<double>(after_ns_.load(std::memory_order_relaxed)) * 1e-9};
}

// A chunk that asks for its NUL search (a mapped one: Chunk::nul_search) has it done
// piece by piece just after Hyperscan read each piece (HsDatabase::scan's first_nul), from
// the cache; the bytes past the chunk that a read would have brought are searched after.
void HostScanner::scan(Slot& slot, HsDatabase::Scratch& scratch) {
  const Chunk& chunk = slot.chunk_;
  std::vector<Occurrence>* out = config_.locate ? &slot.occurrences_ : nullptr;
  std::uint64_t* counts = config_.count_patterns ? slot.counts_.data() : nullptr;
  const int one_per_line = config_.one_per_line;  // HsDatabase leaves it aside with counts
  slot.first_nul_ = ScanSlot::kNoNul;
  if (chunk.nul_search == 0) {
    slot.total_ = matcher_->scan(chunk.data, chunk.size, chunk.overlap, scratch, out, counts, nullptr, one_per_line);
    return;
  }
  static_assert(HsDatabase::kNoNul == ScanSlot::kNoNul);
  slot.total_ =
      matcher_->scan(chunk.data, chunk.size, chunk.overlap, scratch, out, counts, &slot.first_nul_, one_per_line);
  if (slot.first_nul_ != ScanSlot::kNoNul || chunk.nul_search <= chunk.size) return;
  if (const void* past = std::memchr(chunk.data + chunk.size, '\0', chunk.nul_search - chunk.size))
    slot.first_nul_ = static_cast<std::size_t>(static_cast<const char*>(past) - chunk.data);
}

std::unique_ptr<ScanSlot> HostScanner::make_slot() {
  // A twin's slots take a small file each (the file farm's): small pages.
  auto slot = std::make_unique<Slot>(config_.chunk_bytes, !all_inline_);
  if (config_.count_patterns) slot->counts_.assign(table_.unique_count(), 0);
  return slot;
}

void HostScanner::start(ScanSlot& base) {
  auto& slot = static_cast<Slot&>(base);
  slot.error_.clear();
  if (all_inline_ || slot.chunk_.size < kInlineBytes || (slot.chunk_.flush_after && slot.chunk_.size <= kFirstInlineBytes)) {
    scan_slot(slot, inline_scratch_);  // finish() raises what failed, as from a worker
    slot.done_.store(true, std::memory_order_relaxed);
    return;
  }
  slot.done_.store(false, std::memory_order_relaxed);
  std::call_once(workers_started_, [this] {
    for (std::size_t i = 0; i < worker_count_; ++i) workers_.emplace_back([this] { work(); });
  });
  jobs_.enqueue(&slot);
}

void HostScanner::finish(ScanSlot& base, bool collect) {
  auto& slot = static_cast<Slot&>(base);
  slot.done_.wait(false, std::memory_order_acquire);
  if (!slot.error_.empty()) throw Error("scanning chunk " + std::to_string(slot.chunk_.seq) + ": " + slot.error_);
  if (config_.count_patterns) {
    // Counted when the chunk is handed on, collected or not, as the device counts at scan.
    for (std::size_t i = 0; i < slot.counts_.size(); ++i) pattern_counts_[i] += std::exchange(slot.counts_[i], 0);
  }
  if (!collect) slot.occurrences_.clear();
}

std::vector<std::uint64_t> HostScanner::pattern_counts() { return pattern_counts_; }

}  // namespace gpufilter
