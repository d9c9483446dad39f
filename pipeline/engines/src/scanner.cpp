#include "gpufilter/engines/scanner.hpp"

#include <algorithm>
#include <charconv>
#include <string>
#include <utility>

#include "gpufilter/core/errors.hpp"

namespace gpufilter {

DeviceFaults DeviceFaults::parse(std::string_view spec) {
  DeviceFaults faults;
  const auto bad = [&](const std::string& why) {
    return ConfigError("device fault plan '" + std::string(spec) + "': " + why +
                       " (expected KIND:N[,KIND:N]..., KIND one of submit, finish, oom, alloc, lost, N >= 1)");
  };
  if (spec.empty()) throw bad("empty");
  std::size_t at = 0;
  while (at <= spec.size()) {
    const std::size_t comma = std::min(spec.find(',', at), spec.size());
    const std::string_view item = spec.substr(at, comma - at);
    const std::size_t colon = item.find(':');
    if (colon == std::string_view::npos) throw bad("'" + std::string(item) + "' has no ':N'");
    const std::string_view kind = item.substr(0, colon);
    const std::string_view number = item.substr(colon + 1);
    std::uint64_t n = 0;
    const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), n);
    if (number.empty() || ec != std::errc() || end != number.data() + number.size() || n == 0)
      throw bad("'" + std::string(number) + "' is not a count of 1 or more");
    if (kind == "submit") faults.submit = n;
    else if (kind == "finish") faults.finish = n;
    else if (kind == "oom") faults.oom = n;
    else if (kind == "alloc") faults.alloc = n;
    else if (kind == "lost") faults.lost = n;
    else throw bad("unknown kind '" + std::string(kind) + "'");
    at = comma + 1;
  }
  return faults;
}

Scanner::Scanner(const PatternTable& table, ScanConfig config) : table_(table), config_(config) {
  config_.slots = std::max<std::size_t>(config_.slots, 1);
  // A split line's next piece repeats (longest pattern - 1) bytes; a chunk of at least twice
  // the longest pattern keeps each piece advancing by more than that.
  config_.chunk_bytes = std::max(config_.chunk_bytes, std::max<std::size_t>(1, 2 * table.max_length()));
  if (config_.chunk_bytes >= (std::size_t{1} << 32) - 64) throw Error("chunk size must be below 4 GiB");
}

void Scanner::add_slot(std::unique_ptr<ScanSlot> slot) {
  free_.push_back(slot.get());
  slots_.push_back(std::move(slot));
}

void Scanner::move_results(ScanSlot& from, ScanSlot& to) noexcept {
  to.occurrences_.swap(from.occurrences_);
  from.occurrences_.clear();
  to.total_ = std::exchange(from.total_, 0);
  to.first_nul_ = std::exchange(from.first_nul_, ScanSlot::kNoNul);
}

ScanSlot* Scanner::acquire() {
  if (free_.empty() && slots_.size() < config_.slots) add_slot(make_slot());
  if (free_.empty()) return nullptr;
  ScanSlot* slot = free_.back();
  free_.pop_back();
  return slot;
}

void Scanner::submit(ScanSlot& slot) {
  slot.occurrences_.clear();
  slot.total_ = 0;
  if (slot.chunk_.size != 0) start(slot);
  in_flight_.push_back(&slot);
}

ScanSlot& Scanner::complete_oldest() {
  ScanSlot& slot = *in_flight_.front();
  in_flight_.pop_front();
  if (slot.chunk_.size != 0) finish(slot, true);
  return slot;
}

void Scanner::release(ScanSlot& slot) { free_.push_back(&slot); }

void Scanner::discard_in_flight() {
  while (!in_flight_.empty()) {
    ScanSlot* slot = in_flight_.front();
    in_flight_.pop_front();
    free_.push_back(slot);
    if (slot->chunk_.size != 0) finish(*slot, false);
  }
}

}  // namespace gpufilter
