#include "gpufilter/pipeline/scanner.hpp"

#include <algorithm>

#include "gpufilter/pipeline/errors.hpp"

namespace gpufilter {

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
