// Packets of a capture: the raw frame as libpcap gives it, and what the decoder finds in
// it: IPv4/IPv6 addresses, TCP/UDP ports, TCP sequence and flags, and where the transport
// payload lies in the frame. Link types: Ethernet (with 802.1Q/802.1ad VLAN tags), Linux
// cooked v1 (SLL) and v2 (SLL2), raw IP (DLT_RAW, LINKTYPE_IPV4/IPV6), BSD loopback
// (DLT_NULL, DLT_LOOP).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace gpufilter {

struct RawPacket {
  std::uint64_t index = 0;   // 1-based position in the capture (as tshark's frame.number)
  std::int64_t seconds = 0;  // timestamp
  std::uint32_t nanoseconds = 0;
  std::uint32_t caplen = 0;  // bytes captured (data.size())
  std::uint32_t len = 0;     // bytes on the wire
  std::span<const std::uint8_t> data;  // valid until the reader's next call
};

struct PacketInfo {
  enum class Transport : std::uint8_t { kNone, kTcp, kUdp, kOther };
  int ip_version = 0;  // 4, 6, or 0 (not IP)
  std::array<std::uint8_t, 16> src{};  // IPv4 in the first 4 bytes
  std::array<std::uint8_t, 16> dst{};
  Transport transport = Transport::kNone;
  std::uint8_t ip_protocol = 0;  // next header after IPv6 extension headers
  std::uint16_t sport = 0, dport = 0;
  std::uint32_t tcp_seq = 0;
  std::uint8_t tcp_flags = 0;  // FIN 0x01, SYN 0x02, RST 0x04, PSH 0x08, ACK 0x10, URG 0x20
  // The transport payload (TCP/UDP after their headers) within the frame; for anything
  // else the whole frame. Clipped to the captured bytes (a snaplen-cut packet's payload
  // is what was captured).
  std::size_t payload_offset = 0;
  std::size_t payload_length = 0;
  bool truncated = false;  // headers cut short by the snaplen: payload is the whole frame
};

// Whether the decoder knows this libpcap link type (DLT_*), and its name for messages
// ("EN10MB", "LINUX_SLL2", ... or "link type 147").
bool link_type_supported(int link_type) noexcept;
std::string link_type_name(int link_type);

// Decodes `frame` of `link_type`. Never throws: what cannot be decoded is a frame whose
// payload is the whole frame (transport kNone).
PacketInfo decode_packet(int link_type, std::span<const std::uint8_t> frame) noexcept;

// "192.0.2.1" or "2001:db8::1" (RFC 5952), the packet's src or dst.
std::string address_text(const PacketInfo& info, bool source);

}  // namespace gpufilter
