#include "gpufilter/scan/record_scan.hpp"

#include <algorithm>
#include <cstring>

namespace gpufilter {

RecordScan::RecordScan(Scanner& scanner, Deliver deliver)
    : scanner_(scanner), deliver_(std::move(deliver)), in_flight_(scanner) {}

// Room for `size` more bytes (and one more record) in the chunk being filled: a full chunk
// is submitted first, and a slot is waited for when every one is in flight.
char* RecordScan::reserve(std::size_t size) {
  if (current_ != nullptr && (fill_ + size > scanner_.chunk_bytes() || entries_.size() >= kMaxRecords)) submit();
  if (current_ == nullptr) {
    current_ = scanner_.acquire();
    while (current_ == nullptr) {
      deliver_oldest();
      current_ = scanner_.acquire();
    }
    fill_ = 0;
  }
  return current_->staging() + fill_;
}

void RecordScan::add(std::uint64_t tag, std::span<const std::uint8_t> bytes, std::size_t overlap) {
  const std::size_t capacity = scanner_.chunk_bytes();
  const std::size_t carry = scanner_.table().max_length() > 0 ? scanner_.table().max_length() - 1 : 0;
  if (bytes.size() > capacity) {
    // Longer than a chunk (a huge stream piece): overlapping pieces, one tag.
    std::size_t at = 0;
    std::size_t piece_overlap = overlap;
    while (at < bytes.size()) {
      const std::size_t begin = at == 0 ? 0 : at - std::min(at, carry);
      const std::size_t end = std::min(bytes.size(), begin + capacity);
      add(tag, bytes.subspan(begin, end - begin), at == 0 ? piece_overlap : at - begin);
      at = end;
    }
    return;
  }
  char* at = reserve(bytes.size());
  if (!bytes.empty()) std::memcpy(at, bytes.data(), bytes.size());
  entries_.push_back(Entry{tag, fill_, fill_ + bytes.size(), std::min(overlap, bytes.size())});
  fill_ += bytes.size();
}

void RecordScan::add(std::uint64_t tag, std::span<const std::uint8_t> carried,
                        std::span<const std::uint8_t> bytes) {
  const std::size_t size = carried.size() + bytes.size();
  if (size > scanner_.chunk_bytes()) {
    joined_.assign(carried.begin(), carried.end());
    joined_.insert(joined_.end(), bytes.begin(), bytes.end());
    add(tag, joined_, carried.size());
    return;
  }
  char* at = reserve(size);
  if (!carried.empty()) std::memcpy(at, carried.data(), carried.size());
  if (!bytes.empty()) std::memcpy(at + carried.size(), bytes.data(), bytes.size());
  entries_.push_back(Entry{tag, fill_, fill_ + size, carried.size()});
  fill_ += size;
}

void RecordScan::submit() {
  if (current_ == nullptr) return;
  if (fill_ == 0) {
    // Only empty records: nothing to scan, but they are delivered in order.
    while (!in_flight_.empty()) deliver_oldest();
    for (const Entry& e : entries_) deliver_(e.tag, {}, e.overlap, {});
    entries_.clear();
    scanner_.release(*current_);
    current_ = nullptr;
    return;
  }
  Chunk& chunk = current_->chunk();
  chunk = Chunk{};
  chunk.seq = seq_++;
  chunk.data = current_->staging();
  chunk.size = fill_;
  in_flight_.submit(*current_, std::move(entries_));
  entries_.clear();
  bytes_ += fill_;
  ++chunks_;
  current_ = nullptr;
  fill_ = 0;
}

void RecordScan::deliver_oldest() {
  auto [slot, entries] = in_flight_.complete_oldest();
  const std::span<const Occurrence> occurrences = slot.occurrences();
  const PatternTable& table = scanner_.table();
  const char* data = slot.chunk().data;
  try {
    std::size_t index = 0;
    for (const Entry& e : entries) {
      while (index < occurrences.size() && occurrences[index].position < e.begin) ++index;
      scratch_.clear();
      for (std::size_t i = index; i < occurrences.size() && occurrences[i].position < e.end; ++i) {
        const std::size_t at = occurrences[i].position;
        const std::size_t end = at + table.unique_length(occurrences[i].pattern);
        // Inside this record, and ending past its overlap (the previous piece has those).
        if (end <= e.end && end > e.begin + e.overlap)
          scratch_.push_back(Occurrence{static_cast<std::uint32_t>(at - e.begin), occurrences[i].pattern});
      }
      deliver_(e.tag, std::string_view(data + e.begin, e.end - e.begin), e.overlap, scratch_);
    }
  } catch (...) {
    in_flight_.release(slot);
    throw;
  }
  in_flight_.release(slot);
}

void RecordScan::flush() {
  submit();
  while (!in_flight_.empty()) deliver_oldest();
}

void RecordScan::finish() { flush(); }

}  // namespace gpufilter
