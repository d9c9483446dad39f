// PcapPieces: a classic pcap file mapped into memory and cut into pieces of whole records,
// so that many threads decode and match its packets at once (cli/packet_farm.hpp). The cut
// is one pass over the record headers (16 bytes a record; the payloads are not touched).
//
// Only files libpcap would read record by record the same way are taken: classic pcap,
// microsecond or nanosecond, either byte order, every record within the file's snaplen
// and within the file. A pcapng file, standard input, or any truncated or corrupt record
// gives no pieces: PcapReader then reads the file and reports the damage as libpcap does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpufilter/core/packet.hpp"
#include "gpufilter/core/source.hpp"

namespace gpufilter {

class PcapPieces {
 public:
  struct Piece {
    std::size_t begin = 0;  // file offset of its first record header
    std::size_t end = 0;    // just past its last record
    std::uint64_t first_index = 0;  // frame number of its first record (1-based)
    std::size_t packets = 0;
  };

  // Null when the file is not such a capture or cannot be mapped. `link_type`, `snaplen`
  // and `nanosecond` are what libpcap said of the file (PcapReader); `piece_bytes`: how
  // many bytes of records a piece holds, about.
  static std::unique_ptr<PcapPieces> map(int fd, int snaplen, bool nanosecond, std::size_t piece_bytes);

  const std::vector<Piece>& pieces() const noexcept { return pieces_; }
  std::uint64_t packets() const noexcept { return packets_; }

  // The records of `piece`, in order, each as a RawPacket (data valid as long as this).
  template <class F>
  void for_each(const Piece& piece, F&& f) const {
    RawPacket raw;
    raw.index = piece.first_index;
    for (std::size_t at = piece.begin; at < piece.end; ++raw.index) {
      at = read_record(at, raw);
      f(raw);
    }
  }

 private:
  PcapPieces() = default;
  std::uint32_t load(std::size_t at) const noexcept;
  std::size_t read_record(std::size_t at, RawPacket& raw) const noexcept;  // the next record's offset

  std::unique_ptr<MappedBytes> file_;
  const unsigned char* bytes_ = nullptr;
  bool swapped_ = false;
  bool nanosecond_ = false;
  std::vector<Piece> pieces_;
  std::uint64_t packets_ = 0;
};

}  // namespace gpufilter
