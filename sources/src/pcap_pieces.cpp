// A classic pcap file cut into pieces of whole records (pcap_pieces.hpp).
#include "gpufilter/sources/pcap_pieces.hpp"

#include <sys/stat.h>

#include <bit>
#include <cstring>

#include "mapped_file.hpp"

namespace gpufilter {

namespace {

constexpr std::size_t kFileHeader = 24;
constexpr std::size_t kRecordHeader = 16;

std::uint32_t byte_swap(std::uint32_t v) noexcept {
  return (v >> 24) | ((v >> 8) & 0xff00) | ((v << 8) & 0xff0000) | (v << 24);
}

}  // namespace

std::uint32_t PcapPieces::load(std::size_t at) const noexcept {
  std::uint32_t v;
  std::memcpy(&v, bytes_ + at, sizeof v);
  return swapped_ ? byte_swap(v) : v;
}

std::size_t PcapPieces::read_record(std::size_t at, RawPacket& raw) const noexcept {
  raw.seconds = static_cast<std::int64_t>(load(at));
  const std::uint32_t fraction = load(at + 4);
  raw.nanoseconds = nanosecond_ ? fraction : fraction * 1000;
  raw.caplen = load(at + 8);
  raw.len = load(at + 12);
  raw.data = std::span<const std::uint8_t>(bytes_ + at + kRecordHeader, raw.caplen);
  return at + kRecordHeader + raw.caplen;
}

std::unique_ptr<PcapPieces> PcapPieces::map(int fd, int snaplen, bool nanosecond, std::size_t piece_bytes) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || static_cast<std::size_t>(st.st_size) < kFileHeader)
    return nullptr;
  const auto size = static_cast<std::size_t>(st.st_size);
  std::unique_ptr<PcapPieces> p(new PcapPieces);
  p->file_ = MappedFile::map(fd, 0, size);
  if (!p->file_) return nullptr;
  p->bytes_ = reinterpret_cast<const unsigned char*>(p->file_->data());
  std::uint32_t magic;
  std::memcpy(&magic, p->bytes_, sizeof magic);
  const bool micro = magic == 0xa1b2c3d4 || magic == byte_swap(0xa1b2c3d4);
  const bool nano = magic == 0xa1b23c4d || magic == byte_swap(0xa1b23c4d);
  if ((!micro && !nano) || nano != nanosecond) return nullptr;  // pcapng, or not what libpcap read
  p->swapped_ = magic == byte_swap(0xa1b2c3d4) || magic == byte_swap(0xa1b23c4d);
  p->nanosecond_ = nano;
  const auto limit = static_cast<std::uint32_t>(snaplen);
  Piece piece{kFileHeader, kFileHeader, 1, 0};
  std::uint64_t index = 1;
  for (std::size_t at = kFileHeader; at < size; ++index) {
    if (size - at < kRecordHeader) return nullptr;  // a cut header: PcapReader says so
    const std::uint32_t caplen = p->load(at + 8);
    if (caplen > limit || caplen > size - at - kRecordHeader) return nullptr;
    at += kRecordHeader + caplen;
    piece.end = at;
    ++piece.packets;
    if (piece.end - piece.begin >= piece_bytes) {
      p->pieces_.push_back(piece);
      piece = Piece{at, at, index + 1, 0};
    }
  }
  if (piece.packets > 0) p->pieces_.push_back(piece);
  p->packets_ = index - 1;
  return p;
}

}  // namespace gpufilter
