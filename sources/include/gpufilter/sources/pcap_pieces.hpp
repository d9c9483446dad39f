// PcapPieces: a classic pcap file mapped into memory, read record by record without a
// copy or a system call per packet: one after another (Cursor), or cut into pieces of
// whole records that many threads decode and match at once (cli/packet_farm.hpp).
//
// Only what libpcap reads the same way is read here: classic pcap, microsecond or
// nanosecond, either byte order, records within the file's snaplen and within the file.
// At the first record that is not (cut short, or longer than the snaplen, which libpcap
// truncates or refuses), reading stops and PcapReader::resume_at() lets libpcap go on
// from that record, so damage is worded as libpcap words it. A pcapng file or standard
// input is not mapped at all. Pages behind the reader are given back (release_before()),
// so memory stays bounded whatever the file's size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gpufilter/core/packet.hpp"
#include "gpufilter/core/source.hpp"

namespace gpufilter {

class PcapPieces {
 public:
  static constexpr std::size_t kFileHeader = 24;

  // Null when the file is not a classic pcap or cannot be mapped. `snaplen` and
  // `nanosecond` are what libpcap said of the file (PcapReader).
  static std::unique_ptr<PcapPieces> map(int fd, int snaplen, bool nanosecond);

  // The record at file offset `at` (< size()): the offset just past it, or 0 when it is
  // cut short or longer than the snaplen (libpcap reads on from `at`).
  std::size_t record(std::size_t at, RawPacket& raw) const noexcept;
  std::size_t size() const noexcept { return size_; }

  // Whole records, one after another.
  struct Piece {
    std::size_t begin = 0;
    std::size_t end = 0;
    std::size_t packets = 0;
  };
  // The records that start in [from, until), cut into pieces of about `piece_bytes`.
  // `end`: just past the last one; `left`: reading stopped at a record not read here
  // (at `end`), which libpcap reads on from.
  struct Walk {
    std::vector<Piece> pieces;
    std::size_t end = 0;
    bool left = false;
  };
  Walk walk(std::size_t from, std::size_t until, std::size_t piece_bytes) const;
  // Where in [lo, hi) the first record seems to start: the first offset from which eight
  // records chain with plausible headers (or run to the file's end). A guess, to walk
  // parts of the file at once: kNoStart when none, and a walk from the part before tells
  // whether the guess was right (its end is the next part's true start).
  std::size_t find_start(std::size_t lo, std::size_t hi) const noexcept;
  static constexpr std::size_t kNoStart = ~std::size_t{0};

  // The bytes before file offset `offset` are never read again: their pages leave the
  // process. Offsets only grow; any thread, while no other reads below `offset`.
  void release_before(std::size_t offset) const noexcept { file_->drop_before(offset); }
  // Whether `byte` lies in the mapping (a record's data read here, not libpcap's copy).
  bool holds(const std::uint8_t* byte) const noexcept { return byte >= bytes_ && byte < bytes_ + size_; }
  // The file offset of a byte of a record's data.
  std::size_t offset_of(const std::uint8_t* byte) const noexcept { return static_cast<std::size_t>(byte - bytes_); }

  // The records one after another, from the first, numbered as PcapReader numbers them.
  class Cursor {
   public:
    explicit Cursor(const PcapPieces& pieces) noexcept : pieces_(pieces) {}
    enum class Read { kPacket, kEnd, kLeft };  // kLeft: libpcap reads on from offset()
    Read next(RawPacket& raw) noexcept;
    std::size_t offset() const noexcept { return at_; }     // of the next record
    std::uint64_t index() const noexcept { return index_; }  // of the last record read
    const PcapPieces& pieces() const noexcept { return pieces_; }

   private:
    const PcapPieces& pieces_;
    std::size_t at_ = kFileHeader;
    std::uint64_t index_ = 0;
  };

 private:
  PcapPieces() = default;
  std::uint32_t load(std::size_t at) const noexcept;

  bool plausible(std::size_t at) const noexcept;
  std::pair<std::uint32_t, std::uint32_t> lengths(std::size_t at) const noexcept;  // caplen, len
  enum class Lengths { kInOrder, kSwapped, kMaybeSwapped };
  Lengths lengths_ = Lengths::kInOrder;

  std::unique_ptr<MappedBytes> file_;
  const unsigned char* bytes_ = nullptr;
  std::uint32_t first_seconds_ = 0;  // the first record's, for find_start()
  std::size_t size_ = 0;
  std::uint32_t snaplen_ = 0;
  bool swapped_ = false;
  bool nanosecond_ = false;
};

}  // namespace gpufilter
