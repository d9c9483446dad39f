#include "devices_scanner.hpp"

#include <algorithm>
#include <cstdio>

#include "gpufilter/core/errors.hpp"

namespace gpufilter {

std::string device_shares_json(const std::vector<DeviceShare>& shares) {
  std::string out = ",\"device_shares\":[";
  for (std::size_t i = 0; i < shares.size(); ++i) {
    std::string name;
    for (const char c : shares[i].device) {
      if (c == '"' || c == '\\') name += '\\';
      if (static_cast<unsigned char>(c) >= 0x20) name += c;
    }
    out += (i == 0 ? "" : ",") + std::string("{\"device\":\"") + name + "\",\"chunks\":" +
           std::to_string(shares[i].chunks) + ",\"bytes\":" + std::to_string(shares[i].bytes) + "}";
  }
  return out + "]";
}

class DevicesScanner::Slot final : public ScanSlot {
 public:
  Slot(std::size_t member, ScanSlot& inner) : member_(member), inner_(inner) { staging_ = inner.staging(); }

  std::size_t member_;
  ScanSlot& inner_;  // the device scanner's slot, held for this slot's life

  friend class DevicesScanner;
};

DevicesScanner::DevicesScanner(std::span<DeviceContext* const> devices, std::span<const ScanProgram* const> programs,
                               ScanConfig config)
    : Scanner(programs.front()->table(), config) {
  if (devices.empty() || devices.size() != programs.size())
    throw Error("a scanner of several devices needs one program per device");
  ScanConfig each = config_;
  each.slots = std::max<std::size_t>((config_.slots + devices.size() - 1) / devices.size(), 1);
  config_.slots = each.slots * devices.size();
  for (std::size_t i = 0; i < devices.size(); ++i) {
    members_.push_back(Member{std::make_unique<DeviceScanner>(*devices[i], *programs[i], each), devices[i]->info().name});
  }
  add_slot(make_slot());
}

DevicesScanner::~DevicesScanner() {
  try {
    discard_in_flight();
  } catch (...) {
    // Teardown after an error: the first error is the one reported.
  }
}

// The slots are made in turn on each device; each holds its device scanner's slot (taken
// from it once, never released) and so its pinned staging.
std::unique_ptr<ScanSlot> DevicesScanner::make_slot() {
  const std::size_t member = slots_made_++ % members_.size();
  ScanSlot* inner = members_[member].scanner->acquire();
  if (inner == nullptr) throw Error("device " + members_[member].name + " has no free scan slot");
  return std::make_unique<Slot>(member, *inner);
}

void DevicesScanner::start(ScanSlot& base) {
  auto& slot = static_cast<Slot&>(base);
  Member& member = members_[slot.member_];
  slot.inner_.chunk() = slot.chunk_;
  member.scanner->submit(slot.inner_);
  ++member.chunks;
  member.bytes += slot.chunk_.size;
}

// Each device completes in its own submission order, which is a part of ours, so its
// oldest is this slot's chunk.
void DevicesScanner::finish(ScanSlot& base, bool collect) {
  auto& slot = static_cast<Slot&>(base);
  ScanSlot& done = members_[slot.member_].scanner->complete_oldest();
  move_results(done, slot);
  // A device lost at this chunk gives the slot host staging for the next (the device may
  // still read its pinned staging): the pipeline fills what the device scanner reads.
  slot.staging_ = slot.inner_.staging();
  if (!collect) slot.occurrences_.clear();
}

std::vector<std::uint64_t> DevicesScanner::pattern_counts() {
  std::vector<std::uint64_t> counts;
  for (Member& member : members_) {
    const std::vector<std::uint64_t> theirs = member.scanner->pattern_counts();
    counts.resize(std::max(counts.size(), theirs.size()), 0);
    for (std::size_t i = 0; i < theirs.size(); ++i) counts[i] += theirs[i];
  }
  return counts;
}

bool DevicesScanner::counts_exact() const noexcept {
  return std::all_of(members_.begin(), members_.end(), [](const Member& m) { return m.scanner->counts_exact(); });
}

// Each device's fault is its own, told once, naming the device in the failed call.
void DevicesScanner::on_fault(const DeviceScanner::FaultHandler& handler) {
  for (Member& member : members_)
    member.scanner->on_fault([handler, name = member.name](const DeviceError& error, const Chunk& chunk) {
      if (handler) handler(DeviceError(error.call() + " on " + name, error.code(), "OpenCL device " + name), chunk);
    });
}

std::vector<DeviceShare> DevicesScanner::shares() const {
  std::vector<DeviceShare> out;
  for (const Member& member : members_) out.push_back({member.name, member.chunks, member.bytes});
  return out;
}

}  // namespace gpufilter
