// A classic pcap file cut into pieces of whole records (pcap_pieces.hpp).
#include "gpufilter/sources/pcap_pieces.hpp"

#include <sys/stat.h>

#include <bit>
#include <cstring>
#include <utility>

#include "mapped_file.hpp"

namespace gpufilter {

namespace {

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

// The captured and the original length, in the order the file's version keeps them: before
// pcap 2.3 they were the other way round, and 2.3 files have both orders (libpcap's
// sf-pcap.c swaps them the same way).
std::pair<std::uint32_t, std::uint32_t> PcapPieces::lengths(std::size_t at) const noexcept {
  std::uint32_t caplen = load(at + 8);
  std::uint32_t len = load(at + 12);
  if (lengths_ == Lengths::kSwapped || (lengths_ == Lengths::kMaybeSwapped && caplen > len)) std::swap(caplen, len);
  return {caplen, len};
}

std::size_t PcapPieces::record(std::size_t at, RawPacket& raw) const noexcept {
  if (size_ - at < kRecordHeader) return 0;
  const auto [caplen, len] = lengths(at);
  if (caplen > snaplen_ || caplen > size_ - at - kRecordHeader) return 0;
  raw.set_time(static_cast<std::int64_t>(load(at)), load(at + 4), nanosecond_);
  raw.caplen = caplen;
  raw.len = len;
  raw.data = std::span<const std::uint8_t>(bytes_ + at + kRecordHeader, caplen);
  return at + kRecordHeader + caplen;
}

PcapPieces::Walk PcapPieces::walk(std::size_t from, std::size_t until, std::size_t piece_bytes) const {
  Walk w;
  Piece piece{from, from, 0};
  RawPacket raw;
  std::size_t at = from;
  while (at < until && at < size_) {
    const std::size_t next = record(at, raw);
    if (next == 0) {
      w.left = true;
      break;
    }
    at = piece.end = next;
    ++piece.packets;
    if (piece.end - piece.begin >= piece_bytes) {
      w.pieces.push_back(piece);
      piece = Piece{at, at, 0};
    }
  }
  if (piece.packets > 0) w.pieces.push_back(piece);
  w.end = at;
  return w;
}

// A record header that libpcap could have written here: within the snaplen and the file,
// a fraction of a second below one second, and a time within ten years of the first.
bool PcapPieces::plausible(std::size_t at) const noexcept {
  if (size_ - at < kRecordHeader) return false;
  const auto [caplen, len] = lengths(at);
  if (caplen > snaplen_ || caplen > size_ - at - kRecordHeader || caplen > len) return false;
  if (load(at + 4) >= (nanosecond_ ? 1000000000u : 1000000u)) return false;
  const std::uint32_t seconds = load(at);
  const std::uint32_t span = 10u * 366 * 86400;
  return seconds - first_seconds_ + span <= 2 * span;  // |seconds - first| <= span, modulo 2^32
}

std::size_t PcapPieces::find_start(std::size_t lo, std::size_t hi) const noexcept {
  for (std::size_t c = lo; c < hi && c < size_; ++c) {
    std::size_t at = c;
    int chained = 0;
    while (chained < 8 && at < size_ && plausible(at)) {
      at += kRecordHeader + lengths(at).first;
      ++chained;
    }
    if (chained == 8 || (chained > 0 && at == size_)) return c;
  }
  return kNoStart;
}

PcapPieces::Cursor::Read PcapPieces::Cursor::next(RawPacket& raw) noexcept {
  if (at_ >= pieces_.size()) return Read::kEnd;
  const std::size_t next = pieces_.record(at_, raw);
  if (next == 0) return Read::kLeft;
  at_ = next;
  raw.index = ++index_;
  return Read::kPacket;
}

std::unique_ptr<PcapPieces> PcapPieces::map(int fd, int snaplen, bool nanosecond) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || static_cast<std::size_t>(st.st_size) < kFileHeader)
    return nullptr;
  std::unique_ptr<PcapPieces> p(new PcapPieces);
  p->size_ = static_cast<std::size_t>(st.st_size);
  p->file_ = MappedFile::map(fd, 0, p->size_);
  if (!p->file_) return nullptr;
  p->bytes_ = reinterpret_cast<const unsigned char*>(p->file_->data());
  std::uint32_t magic;
  std::memcpy(&magic, p->bytes_, sizeof magic);
  const bool micro = magic == 0xa1b2c3d4 || magic == byte_swap(0xa1b2c3d4);
  const bool nano = magic == 0xa1b23c4d || magic == byte_swap(0xa1b23c4d);
  if ((!micro && !nano) || nano != nanosecond || snaplen <= 0) return nullptr;  // pcapng, or not what libpcap read
  p->swapped_ = magic == byte_swap(0xa1b2c3d4) || magic == byte_swap(0xa1b23c4d);
  p->nanosecond_ = nano;
  p->snaplen_ = static_cast<std::uint32_t>(snaplen);
  std::uint16_t version[2];
  std::memcpy(version, p->bytes_ + 4, sizeof version);
  const auto major = static_cast<std::uint16_t>(p->swapped_ ? (version[0] >> 8 | version[0] << 8) : version[0]);
  const auto minor = static_cast<std::uint16_t>(p->swapped_ ? (version[1] >> 8 | version[1] << 8) : version[1]);
  if (major != 2) return nullptr;  // what libpcap reads as another version: it reads the file
  // Link types whose packets libpcap rewrites as it reads them (pcap_post_process: the
  // USB headers swapped to this host's byte order and their lengths fixed, NFLOG's TLVs
  // swapped): libpcap reads those files, so that every packet is its.
  std::uint32_t link;
  std::memcpy(&link, p->bytes_ + 20, sizeof link);
  if (p->swapped_) link = byte_swap(link);
  constexpr std::uint32_t kUsbLinux = 189, kUsbLinuxMmapped = 220, kNflog = 239;
  const std::uint32_t type = link & 0xffff;
  if (type == kUsbLinux || type == kUsbLinuxMmapped || type == kNflog) return nullptr;
  p->lengths_ = minor < 3 ? Lengths::kSwapped : minor == 3 ? Lengths::kMaybeSwapped : Lengths::kInOrder;
  if (p->size_ >= kFileHeader + kRecordHeader) p->first_seconds_ = p->load(kFileHeader);
  return p;
}

}  // namespace gpufilter
