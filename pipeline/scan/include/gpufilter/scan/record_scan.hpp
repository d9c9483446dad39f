// RecordScan: many small binary records through one Scanner: packet payloads, or the
// pieces of reassembled TCP streams. Records are packed back to back into a chunk (no
// separator is needed: an occurrence is kept only inside its record), the chunk is
// scanned, and each record gets its own occurrences, in submission order.
//
// A record may start with `overlap` bytes repeated from the previous piece of the same
// stream (the last longest-pattern - 1 bytes): an occurrence then belongs to the record
// only if it ends past them, the rule chunks of a split line follow (chunk.hpp), so a
// pattern split across two pieces is found exactly once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "gpufilter/engines/scanner.hpp"
#include "gpufilter/scan/in_flight.hpp"

namespace gpufilter {

class RecordScan {
 public:
  // A record's bytes (overlap included) and its occurrences: positions relative to the
  // record's first byte, in PatternTable::before order, each ending past the overlap.
  using Deliver = std::function<void(std::uint64_t tag, std::string_view bytes, std::size_t overlap,
                                     std::span<const Occurrence> occurrences)>;

  // The scanner must locate occurrences.
  RecordScan(Scanner& scanner, Deliver deliver);

  // Copies a record into the chunk being filled; a full chunk is submitted, and results
  // are delivered when every slot is in flight. A chunk is full at chunk_bytes or at
  // kMaxRecords records: empty records (packets without payload, the ends of flows) fill
  // no bytes, and the callers keep a packet or a flow for each record until its result. A record longer than a chunk is split
  // into pieces that overlap by the longest pattern - 1 bytes (delivered under one tag).
  void add(std::uint64_t tag, std::span<const std::uint8_t> bytes, std::size_t overlap = 0);
  // A stream's next piece: `carried` (its overlap, the previous piece's tail) then `bytes`,
  // copied into the chunk without joining them first.
  void add(std::uint64_t tag, std::span<const std::uint8_t> carried, std::span<const std::uint8_t> bytes);
  // Submits the partial chunk and delivers every result.
  void finish();
  // Submits the partial chunk and delivers every result (a live capture went quiet).
  void flush();

  static constexpr std::size_t kMaxRecords = std::size_t{1} << 16;

  std::uint64_t bytes_scanned() const noexcept { return bytes_; }
  std::uint64_t chunks() const noexcept { return chunks_; }

 private:
  struct Entry {
    std::uint64_t tag;
    std::size_t begin, end, overlap;
  };
  char* reserve(std::size_t size);
  void submit();
  void deliver_oldest();

  Scanner& scanner_;
  Deliver deliver_;
  ScanSlot* current_ = nullptr;
  std::size_t fill_ = 0;
  std::vector<Entry> entries_;                // of the chunk being filled
  InFlight<std::vector<Entry>> in_flight_;   // the submitted chunks and their records, in order
  std::vector<Occurrence> scratch_;
  std::vector<std::uint8_t> joined_;  // a carried piece longer than a chunk, joined to split it
  std::uint64_t seq_ = 0, bytes_ = 0, chunks_ = 0;
};

}  // namespace gpufilter
