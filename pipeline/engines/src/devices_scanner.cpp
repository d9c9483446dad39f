#include "devices_scanner.hpp"
#include "handed_job.hpp"

#include <algorithm>
#include <deque>
#include <new>

#include "gpufilter/core/errors.hpp"

namespace gpufilter {

class DevicesScanner::Slot final : public ScanSlot {
 public:
  Slot(std::size_t member, ScanSlot& inner) : member_(member), inner_(inner) { staging_ = inner.staging(); }

  std::size_t member_;
  ScanSlot& inner_;           // the device scanner's slot, held for this slot's life
  std::string error_;         // what went wrong on the device's thread, if anything
  std::atomic<bool> done_{true};

  friend class DevicesScanner;
};

DevicesScanner::DevicesScanner(std::span<DeviceContext* const> devices, std::span<const ScanProgram* const> programs,
                               ScanConfig config)
    : Scanner(programs.front()->table(), config) {
  if (devices.empty() || devices.size() != programs.size())
    throw Error("a scanner of several devices needs one program per device");
  ScanConfig each = config_;
  each.slots = std::max<std::size_t>((config_.slots + devices.size() - 1) / devices.size(), 1);
  // A device's thread waits for its oldest chunk with short sleeps, not in NVIDIA's
  // spinning clWaitForEvents: the cores read the input.
  each.poll_completion = true;
  config_.slots = each.slots * devices.size();
  for (std::size_t i = 0; i < devices.size(); ++i) {
    auto member = std::make_unique<Member>();
    member->scanner = std::make_unique<DeviceScanner>(*devices[i], *programs[i], each);
    member->name = devices[i]->info().name;
    member->scanner->on_fault([this, name = member->name](const DeviceError& error, const Chunk& chunk) {
      std::lock_guard lock(fault_mutex_);
      faults_.emplace_back(DeviceError(error.call() + " on " + name, error.code(), "OpenCL device " + name), chunk);
    });
    members_.push_back(std::move(member));
  }
  add_slot(make_slot());  // before any thread: a failure here leaves none to stop
  for (auto& member : members_) member->thread = std::thread([this, m = member.get()] { device_work(*m); });
}

DevicesScanner::~DevicesScanner() {
  try {
    discard_in_flight();
  } catch (...) {
    // Teardown after an error: the first error is the one reported.
  }
  for (auto& member : members_) {
    if (!member->thread.joinable()) continue;
    member->jobs.enqueue(nullptr);
    member->thread.join();
  }
}

// The slots are made in turn on each device; each holds its device scanner's slot (taken
// from it once, never released) and so its pinned staging.
std::unique_ptr<ScanSlot> DevicesScanner::make_slot() {
  const std::size_t member = slots_made_++ % members_.size();
  ScanSlot* inner = nullptr;
  {
    std::lock_guard lock(members_[member]->mutex);
    inner = members_[member]->scanner->acquire();
  }
  if (inner == nullptr) throw Error("device " + members_[member]->name + " has no free scan slot");
  return std::make_unique<Slot>(member, *inner);
}

// A device's thread: submits each chunk given to it, and completes its oldest whenever no
// chunk waits. Its device never holds more than its slots: a chunk comes only with one
// of them. Nothing is thrown across the thread: a failure is kept in the chunk's slot and
// raised by finish().
void DevicesScanner::device_work(Member& member) {
  std::deque<Slot*> mine;  // submitted, oldest first
  auto complete_oldest = [&] {
    Slot& job = *mine.front();
    mine.pop_front();
    {
      std::lock_guard lock(member.mutex);
      settle(job, [&] { move_results(member.scanner->complete_oldest(), job); });
      // A device lost at this chunk gives the slot host staging for the next (the device
      // may still read its pinned staging): the pipeline fills what the device scanner reads.
      job.staging_ = job.inner_.staging();
    }
    finished(job);
  };
  for (;;) {
    Slot* job = nullptr;
    if (mine.empty()) {
      member.jobs.wait_dequeue(job);
    } else if (!member.jobs.try_dequeue(job)) {
      complete_oldest();
      continue;
    }
    if (job == nullptr) {
      while (!mine.empty()) complete_oldest();
      return;
    }
    bool submitted = false;
    settle(*job, [&] {
      std::lock_guard lock(member.mutex);
      member.scanner->submit(job->inner_);
      submitted = true;
    });
    if (submitted) mine.push_back(job);
    else finished(*job);
  }
}

void DevicesScanner::start(ScanSlot& base) {
  auto& slot = static_cast<Slot&>(base);
  Member& member = *members_[slot.member_];
  slot.error_.clear();
  slot.inner_.chunk() = slot.chunk_;
  ++member.chunks;
  member.bytes += slot.chunk_.size;
  slot.done_.store(false, std::memory_order_relaxed);
  member.jobs.enqueue(&slot);
}

// Each device completes in its own submission order, which is a part of ours.
void DevicesScanner::finish(ScanSlot& base, bool collect) {
  auto& slot = static_cast<Slot&>(base);
  slot.done_.wait(false, std::memory_order_acquire);
  report_faults();
  if (!slot.error_.empty()) throw Error("scanning chunk " + std::to_string(slot.chunk_.seq) + ": " + slot.error_);
  if (!collect) slot.occurrences_.clear();
}

void DevicesScanner::report_faults() {
  std::vector<std::pair<DeviceError, Chunk>> faults;
  {
    std::lock_guard lock(fault_mutex_);
    faults.swap(faults_);
  }
  for (const auto& [error, chunk] : faults)
    if (on_fault_) on_fault_(error, chunk);
}

std::vector<std::uint64_t> DevicesScanner::pattern_counts() {
  std::vector<std::uint64_t> counts;
  for (auto& member : members_) {
    std::lock_guard lock(member->mutex);
    const std::vector<std::uint64_t> theirs = member->scanner->pattern_counts();
    counts.resize(std::max(counts.size(), theirs.size()), 0);
    for (std::size_t i = 0; i < theirs.size(); ++i) counts[i] += theirs[i];
  }
  report_faults();
  return counts;
}

bool DevicesScanner::counts_exact() const noexcept {
  return std::all_of(members_.begin(), members_.end(), [](const auto& m) {
    std::lock_guard lock(m->mutex);
    return m->scanner->counts_exact();
  });
}

std::vector<DeviceShare> DevicesScanner::shares() const {
  std::vector<DeviceShare> out;
  for (const auto& member : members_) out.push_back({member->name, member->chunks, member->bytes});
  return out;
}

}  // namespace gpufilter
