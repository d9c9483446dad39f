#include "co_scanner.hpp"
#include "handed_job.hpp"

#include <algorithm>
#include <cstring>
#include <deque>
#include <new>
#include <string>
#include <utility>

#include "gpufilter/core/errors.hpp"
#include "gpufilter/core/slot_memory.hpp"

namespace gpufilter {
namespace {

// Copies `chunk` into `slot`'s staging, which then holds it, in pieces of 1 MiB, each
// searched for NUL (up to chunk.nul_search) while it is in cache, as HostScanner::scan
// does. Returns the first NUL's index in the chunk, or ScanSlot::kNoNul.
std::size_t stage(const Chunk& chunk, ScanSlot& slot) {
  constexpr std::size_t kPiece = 1u << 20;
  char* to = slot.staging();
  std::size_t first_nul = ScanSlot::kNoNul;
  auto search = [&](const char* from, std::size_t begin, std::size_t end) {
    if (first_nul != ScanSlot::kNoNul || begin >= end) return;
    if (const void* nul = std::memchr(from + begin, '\0', end - begin))
      first_nul = static_cast<std::size_t>(static_cast<const char*>(nul) - from);
  };
  for (std::size_t at = 0; at < chunk.size; at += kPiece) {
    const std::size_t n = std::min(kPiece, chunk.size - at);
    std::memcpy(to + at, chunk.data + at, n);
    search(to, at, std::min(at + n, chunk.nul_search));
  }
  search(chunk.data, chunk.size, chunk.nul_search);  // past the chunk: what a read would have brought
  Chunk& staged = slot.chunk();
  staged = chunk;
  staged.data = to;
  staged.nul_search = 0;
  return first_nul;
}

}  // namespace

class CoScanner::Slot final : public ScanSlot {
 public:
  explicit Slot(std::size_t bytes) : memory_(slot_memory(bytes, true)) { staging_ = memory_.get(); }

  SlotMemory memory_;
  ScanSlot* host_ = nullptr;  // the host engine's slot scanning this chunk; nullptr: a lane's
  std::string error_;         // what went wrong in a lane, if anything
  std::atomic<bool> done_{true};

  friend class CoScanner;
};

CoScanner::CoScanner(const PatternTable& table, ScanConfig config) : Scanner(table, config), host_(table, config_) {
  add_slot(make_slot());
}

CoScanner::~CoScanner() {
  try {
    discard_in_flight();
  } catch (...) {
    // Teardown after an error: the first error is the one reported.
  }
  std::lock_guard lock(lanes_mutex_);
  for (std::size_t i = 0; i < lanes_.size(); ++i) lane_jobs_.enqueue(nullptr);
  for (Lane& lane : lanes_) lane.thread.join();
}

std::unique_ptr<ScanSlot> CoScanner::make_slot() { return std::make_unique<Slot>(config_.chunk_bytes); }

void CoScanner::add_device(DeviceContext& device, const ScanProgram& program, std::size_t lanes,
                           std::size_t slots_per_lane) {
  ScanConfig lane_config = config_;
  lane_config.slots = std::max<std::size_t>(slots_per_lane, 1);
  lane_config.host_scan_below = 0;  // the choice between host and device is made here
  lane_config.poll_completion = true;
  std::vector<std::unique_ptr<DeviceScanner>> made;
  for (std::size_t i = 0; i < lanes; ++i) {
    made.push_back(std::make_unique<DeviceScanner>(device, program, lane_config));
    made.back()->on_fault([this](const DeviceError& error, const Chunk& chunk) {
      std::lock_guard fault_lock(fault_mutex_);
      if (!fault_) fault_.emplace(error, chunk);
    });
  }
  std::lock_guard lock(lanes_mutex_);
  const std::size_t index = device_names_.size();
  device_names_.push_back(device.info().name);
  for (auto& scanner : made) {
    DeviceScanner& lane = *scanner;
    auto count = std::make_unique<LaneCount>();
    LaneCount& counted = *count;
    lanes_.push_back(Lane{std::move(scanner), index, std::move(count),
                          std::thread([this, &lane, &counted] { lane_work(lane, counted); })});
  }
  lane_room_.fetch_add(lanes * lane_config.slots, std::memory_order_release);
}

// A lane: takes chunks from the shared queue while its device has room, completes its
// oldest when it has none or the queue is empty. Nothing is thrown across the thread: a
// failure is kept in the chunk's slot and raised by finish().
void CoScanner::lane_work(DeviceScanner& device, LaneCount& count) {
  std::deque<Slot*> mine;  // submitted to the device, oldest first
  auto complete_oldest = [&] {
    Slot& job = *mine.front();
    mine.pop_front();
    settle(job, [&] {
      const std::size_t first_nul = job.first_nul_;  // found while staging
      ScanSlot& done = device.complete_oldest();
      move_results(done, job);
      job.first_nul_ = first_nul;
      device.release(done);
    });
    lane_pending_.fetch_sub(1, std::memory_order_relaxed);
    finished(job);
  };
  for (;;) {
    Slot* job = nullptr;
    if (mine.empty()) {
      lane_jobs_.wait_dequeue(job);
    } else if (mine.size() >= device.slot_count() || !lane_jobs_.try_dequeue(job)) {
      complete_oldest();
      continue;
    }
    if (job == nullptr) {
      while (!mine.empty()) complete_oldest();
      return;
    }
    // Fewer than slot_count() are in flight, so one is free, unless a failed completion
    // kept its slot (the job then fails rather than the lane).
    ScanSlot* slot = device.acquire();
    bool submitted = false;
    settle(*job, [&] {
      if (slot == nullptr) throw Error("no free device slot after an earlier failure");
      job->first_nul_ = stage(job->chunk_, *slot);
      device.submit(*slot);
      submitted = true;
    });
    if (submitted) {
      mine.push_back(job);
      count.chunks.fetch_add(1, std::memory_order_relaxed);
      count.bytes.fetch_add(job->chunk_.size, std::memory_order_relaxed);
    } else {
      if (slot != nullptr) device.release(*slot);
      lane_pending_.fetch_sub(1, std::memory_order_relaxed);
      finished(*job);
    }
  }
}

void CoScanner::start(ScanSlot& base) {
  auto& slot = static_cast<Slot&>(base);
  slot.error_.clear();
  slot.host_ = nullptr;
  // Small chunks (a small file, a quiet stream's batch) go to the host: a device round
  // trip would cost more than the scan.
  if (slot.chunk_.size >= config_.host_scan_below &&
      lane_pending_.load(std::memory_order_relaxed) < lane_room_.load(std::memory_order_acquire)) {
    lane_pending_.fetch_add(1, std::memory_order_relaxed);
    ++device_chunks_;
    slot.done_.store(false, std::memory_order_relaxed);
    lane_jobs_.enqueue(&slot);
    return;
  }
  ScanSlot* inner = host_.acquire();  // never null: the host engine has as many slots as this
  inner->chunk() = slot.chunk_;
  host_.submit(*inner);
  slot.host_ = inner;
  ++host_chunks_;
}

void CoScanner::finish(ScanSlot& base, bool collect) {
  auto& slot = static_cast<Slot&>(base);
  if (slot.host_ != nullptr) {
    // The host engine completes in its own submission order, which is a part of ours.
    ScanSlot& inner = *std::exchange(slot.host_, nullptr);
    try {
      host_.complete_oldest();
    } catch (...) {
      host_.release(inner);
      throw;
    }
    move_results(inner, slot);
    host_.release(inner);
  } else {
    slot.done_.wait(false, std::memory_order_acquire);
    report_fault();
    if (!slot.error_.empty()) throw Error("scanning chunk " + std::to_string(slot.chunk_.seq) + ": " + slot.error_);
  }
  if (!collect) slot.occurrences_.clear();
}

void CoScanner::report_fault() {
  std::optional<std::pair<DeviceError, Chunk>> fault;
  {
    std::lock_guard lock(fault_mutex_);
    if (fault_reported_ || !fault_) return;
    fault_reported_ = true;
    fault = fault_;
  }
  if (on_fault_) on_fault_(fault->first, fault->second);
}

std::vector<std::uint64_t> CoScanner::pattern_counts() {
  std::vector<std::uint64_t> counts = host_.pattern_counts();
  std::lock_guard lock(lanes_mutex_);
  for (Lane& lane : lanes_) {
    const std::vector<std::uint64_t> theirs = lane.scanner->pattern_counts();
    counts.resize(std::max(counts.size(), theirs.size()), 0);
    for (std::size_t i = 0; i < theirs.size(); ++i) counts[i] += theirs[i];
  }
  report_fault();
  return counts;
}

std::vector<DeviceShare> CoScanner::device_shares() {
  std::lock_guard lock(lanes_mutex_);
  std::vector<DeviceShare> shares;
  for (const std::string& name : device_names_) shares.push_back({name, 0, 0});
  for (const Lane& lane : lanes_) {
    shares[lane.device].chunks += lane.count->chunks.load(std::memory_order_relaxed);
    shares[lane.device].bytes += lane.count->bytes.load(std::memory_order_relaxed);
  }
  return shares;
}

bool CoScanner::counts_exact() noexcept {
  std::lock_guard lock(lanes_mutex_);
  return std::all_of(lanes_.begin(), lanes_.end(), [](const Lane& lane) { return lane.scanner->counts_exact(); });
}

}  // namespace gpufilter
