// The packet decoder: link layer, IPv4/IPv6 (with extension headers) and TCP/UDP, down to
// where the transport payload lies in the frame. Captures are hostile input: every read
// is bounds-checked against the captured bytes, and a length field never takes the
// payload past what was captured (a snaplen-cut packet keeps the bytes it has).
#include "gpufilter/sources/packet.hpp"

#include <arpa/inet.h>

#include <algorithm>

#include "gpufilter/core/libpcap.hpp"

namespace gpufilter {

namespace {

// Link types by number rather than by DLT_* macro: several macros change value between
// systems (DLT_RAW is 14 on OpenBSD, DLT_LOOP is 12 there), while files carry these.
constexpr int kNull = 0;
constexpr int kEthernet = 1;
constexpr int kRaw = 12;
constexpr int kRawOpenBsd = 14;
constexpr int kLinktypeRaw = 101;  // LINKTYPE_RAW: libpcap maps it to DLT_RAW, but keep it
constexpr int kLoop = 108;
constexpr int kLinuxSll = 113;
constexpr int kIpv4 = 228;
constexpr int kIpv6 = 229;
constexpr int kLinuxSll2 = 276;

constexpr std::uint16_t kEtherIpv4 = 0x0800;
constexpr std::uint16_t kEtherIpv6 = 0x86dd;

constexpr std::uint8_t kProtoTcp = 6;
constexpr std::uint8_t kProtoUdp = 17;

// Big-endian reads; the caller has checked that the bytes are there.
class Bytes {
 public:
  explicit Bytes(std::span<const std::uint8_t> frame) : frame_(frame) {}
  std::size_t size() const { return frame_.size(); }
  // Whether [offset, offset + n) lies within the captured bytes.
  bool has(std::size_t offset, std::size_t n) const { return offset <= frame_.size() && n <= frame_.size() - offset; }
  std::uint8_t u8(std::size_t at) const { return frame_[at]; }
  std::uint16_t u16(std::size_t at) const { return static_cast<std::uint16_t>(frame_[at] << 8 | frame_[at + 1]); }
  std::uint32_t u32(std::size_t at) const {
    return static_cast<std::uint32_t>(frame_[at]) << 24 | static_cast<std::uint32_t>(frame_[at + 1]) << 16 |
           static_cast<std::uint32_t>(frame_[at + 2]) << 8 | frame_[at + 3];
  }
  void copy(std::size_t at, std::size_t n, std::uint8_t* to) const { std::copy_n(frame_.data() + at, n, to); }

 private:
  std::span<const std::uint8_t> frame_;
};

// A header did not fit: cut by the snaplen when the IP packet claims more bytes than were
// captured, else malformed. Either way nothing past it can be trusted, so the payload goes
// back to the whole frame and the transport to kNone (addresses found so far stay).
void give_up(PacketInfo& info, const Bytes& bytes, bool cut_by_snaplen) {
  info.transport = PacketInfo::Transport::kNone;
  info.sport = info.dport = 0;
  info.tcp_seq = 0;
  info.tcp_flags = 0;
  info.payload_offset = 0;
  info.payload_length = bytes.size();
  info.truncated = cut_by_snaplen;
}

void set_payload(PacketInfo& info, std::size_t begin, std::size_t end) {
  info.payload_offset = begin;
  info.payload_length = end > begin ? end - begin : 0;
}

// The transport header at `at`, within the IP payload that ends at `end` (already clipped
// to the captured bytes); `cut` says whether the clipping shortened it.
void decode_transport(PacketInfo& info, const Bytes& bytes, std::size_t at, std::size_t end, bool cut) {
  if (info.ip_protocol == kProtoTcp) {
    if (at + 20 > end) return give_up(info, bytes, cut);
    const std::size_t header = static_cast<std::size_t>(bytes.u8(at + 12) >> 4) * 4;
    if (header < 20) return give_up(info, bytes, false);
    if (at + header > end) return give_up(info, bytes, cut);
    info.transport = PacketInfo::Transport::kTcp;
    info.sport = bytes.u16(at);
    info.dport = bytes.u16(at + 2);
    info.tcp_seq = bytes.u32(at + 4);
    info.tcp_flags = bytes.u8(at + 13);
    set_payload(info, at + header, end);
    return;
  }
  if (info.ip_protocol == kProtoUdp) {
    if (at + 8 > end) return give_up(info, bytes, cut);
    const std::size_t length = bytes.u16(at + 4);
    // 0 is a jumbogram's (RFC 2675) or an offloaded checksum's: the IP length rules then.
    if (length != 0 && length < 8) return give_up(info, bytes, false);
    info.transport = PacketInfo::Transport::kUdp;
    info.sport = bytes.u16(at);
    info.dport = bytes.u16(at + 2);
    set_payload(info, at + 8, length == 0 ? end : std::min(end, at + length));
    return;
  }
  // ICMP, SCTP, GRE...: searched as the whole frame.
  info.transport = PacketInfo::Transport::kOther;
}

void decode_ipv4(PacketInfo& info, const Bytes& bytes, std::size_t at) {
  if (!bytes.has(at, 20)) return give_up(info, bytes, true);
  if (bytes.u8(at) >> 4 != 4) return;
  const std::size_t header = static_cast<std::size_t>(bytes.u8(at) & 0x0f) * 4;
  if (header < 20) return;
  if (!bytes.has(at, header)) return give_up(info, bytes, true);
  info.ip_version = 4;
  info.ip_protocol = bytes.u8(at + 9);
  bytes.copy(at + 12, 4, info.src.data());
  bytes.copy(at + 16, 4, info.dst.data());
  const std::size_t total = bytes.u16(at + 2);
  // The total length bounds the packet (Ethernet pads short frames to 60 bytes); 0 is
  // what a capture of an outgoing TSO packet shows, where the frame is the bound.
  std::size_t end = bytes.size();
  bool cut = false;
  if (total != 0) {
    if (total < header) return give_up(info, bytes, false);
    cut = at + total > bytes.size();
    end = std::min(end, at + total);
  }
  const std::size_t fragment_offset = bytes.u16(at + 6) & 0x1fff;
  if (fragment_offset != 0) {
    // A later fragment has no transport header: its bytes are the search material.
    info.transport = PacketInfo::Transport::kOther;
    set_payload(info, at + header, end);
    return;
  }
  decode_transport(info, bytes, at + header, end, cut);
}

void decode_ipv6(PacketInfo& info, const Bytes& bytes, std::size_t at) {
  if (!bytes.has(at, 40)) return give_up(info, bytes, true);
  if (bytes.u8(at) >> 4 != 6) return;
  info.ip_version = 6;
  bytes.copy(at + 8, 16, info.src.data());
  bytes.copy(at + 24, 16, info.dst.data());
  const std::size_t declared = bytes.u16(at + 4);
  std::size_t end = bytes.size();
  bool cut = false;
  if (declared != 0) {  // 0: a jumbogram (hop-by-hop option) or TSO; the frame bounds it
    cut = at + 40 + declared > bytes.size();
    end = std::min(end, at + 40 + declared);
  }
  std::uint8_t next = bytes.u8(at + 6);
  std::size_t p = at + 40;
  info.ip_protocol = next;
  // Each extension header moves p forward by at least 8 bytes, so this ends; the bound
  // on the count only caps the work on a frame made of nothing else.
  for (int count = 0; count < 64; ++count) {
    switch (next) {
      case 0:      // hop-by-hop options
      case 43:     // routing
      case 60:     // destination options
      case 135:    // mobility
      case 139:    // HIP
      case 140: {  // shim6
        if (p + 8 > end) return give_up(info, bytes, cut);
        const std::size_t length = (static_cast<std::size_t>(bytes.u8(p + 1)) + 1) * 8;
        if (p + length > end) return give_up(info, bytes, cut);
        next = bytes.u8(p);
        p += length;
        break;
      }
      case 51: {  // AH: length in 4-byte units, minus 2
        if (p + 8 > end) return give_up(info, bytes, cut);
        const std::size_t length = (static_cast<std::size_t>(bytes.u8(p + 1)) + 2) * 4;
        if (p + length > end) return give_up(info, bytes, cut);
        next = bytes.u8(p);
        p += length;
        break;
      }
      case 44: {  // fragment
        if (p + 8 > end) return give_up(info, bytes, cut);
        const std::uint8_t inner = bytes.u8(p);
        const std::size_t fragment_offset = bytes.u16(p + 2) & 0xfff8;
        p += 8;
        if (fragment_offset != 0) {
          info.ip_protocol = inner;
          info.transport = PacketInfo::Transport::kOther;
          set_payload(info, p, end);
          return;
        }
        next = inner;
        break;
      }
      default:
        info.ip_protocol = next;
        decode_transport(info, bytes, p, end, cut);
        return;
    }
    info.ip_protocol = next;
  }
  info.transport = PacketInfo::Transport::kOther;
}

// IPv4 or IPv6 by the version nibble (raw IP link types).
void decode_ip(PacketInfo& info, const Bytes& bytes, std::size_t at) {
  if (!bytes.has(at, 1)) return give_up(info, bytes, true);
  const int version = bytes.u8(at) >> 4;
  if (version == 4) decode_ipv4(info, bytes, at);
  if (version == 6) decode_ipv6(info, bytes, at);
}

// An EtherType at `type_at`, the header after it at `at`: VLAN tags (802.1Q, 802.1ad and
// the older QinQ values), any number of them, are skipped.
void decode_ethertype(PacketInfo& info, const Bytes& bytes, std::size_t type_at, std::size_t at) {
  std::uint16_t type = bytes.u16(type_at);
  while (type == 0x8100 || type == 0x88a8 || type == 0x9100 || type == 0x9200) {
    if (!bytes.has(at, 4)) return give_up(info, bytes, true);
    type = bytes.u16(at + 2);
    at += 4;
  }
  if (type == kEtherIpv4) decode_ipv4(info, bytes, at);
  if (type == kEtherIpv6) decode_ipv6(info, bytes, at);
}

// DLT_NULL and DLT_LOOP: a 4-byte address family, in the capturing host's byte order for
// DLT_NULL and in network order for DLT_LOOP (both accepted for both: files travel).
// AF_INET6 differs between BSDs (24 NetBSD/OpenBSD, 28 FreeBSD, 30 macOS).
void decode_loopback(PacketInfo& info, const Bytes& bytes) {
  if (!bytes.has(0, 4)) return give_up(info, bytes, true);
  const std::uint32_t big = bytes.u32(0);
  const std::uint32_t little = static_cast<std::uint32_t>(bytes.u8(0)) | static_cast<std::uint32_t>(bytes.u8(1)) << 8 |
                               static_cast<std::uint32_t>(bytes.u8(2)) << 16 |
                               static_cast<std::uint32_t>(bytes.u8(3)) << 24;
  for (const std::uint32_t family : {big, little}) {
    if (family == 2) return decode_ipv4(info, bytes, 4);
    if (family == 24 || family == 28 || family == 30) return decode_ipv6(info, bytes, 4);
  }
}

}  // namespace

bool link_type_supported(int link_type) noexcept {
  switch (link_type) {
    case kNull:
    case kEthernet:
    case kRaw:
    case kRawOpenBsd:
    case kLinktypeRaw:
    case kLoop:
    case kLinuxSll:
    case kIpv4:
    case kIpv6:
    case kLinuxSll2:
      return true;
    default:
      return false;
  }
}

std::string link_type_name(int link_type) {
  const Libpcap* pcap = try_libpcap();
  if (const char* name = pcap != nullptr ? pcap->pcap_datalink_val_to_name(link_type) : nullptr) return name;
  return std::to_string(link_type);  // after "link type" in every message
}

PacketInfo decode_packet(int link_type, std::span<const std::uint8_t> frame) noexcept {
  PacketInfo info;
  info.payload_offset = 0;
  info.payload_length = frame.size();
  const Bytes bytes(frame);
  switch (link_type) {
    case kEthernet:
      if (!bytes.has(0, 14)) {
        give_up(info, bytes, true);
        break;
      }
      decode_ethertype(info, bytes, 12, 14);
      break;
    case kLinuxSll:  // packet type, ARPHRD type, address length, 8 address bytes, protocol
      if (!bytes.has(0, 16)) {
        give_up(info, bytes, true);
        break;
      }
      decode_ethertype(info, bytes, 14, 16);
      break;
    case kLinuxSll2:  // protocol, reserved, interface index, ARPHRD, packet type, address
      if (!bytes.has(0, 20)) {
        give_up(info, bytes, true);
        break;
      }
      decode_ethertype(info, bytes, 0, 20);
      break;
    case kRaw:
    case kRawOpenBsd:
    case kLinktypeRaw:
      decode_ip(info, bytes, 0);
      break;
    case kIpv4:
      decode_ipv4(info, bytes, 0);
      break;
    case kIpv6:
      decode_ipv6(info, bytes, 0);
      break;
    case kNull:
    case kLoop:
      decode_loopback(info, bytes);
      break;
    default:
      break;
  }
  // Whatever was not decoded down to a payload is searched whole.
  if (info.transport == PacketInfo::Transport::kNone) {
    info.payload_offset = 0;
    info.payload_length = frame.size();
  }
  return info;
}

}  // namespace gpufilter
