// Packets of a capture: the raw frame as libpcap gives it, and what the decoder finds in
// it: IPv4/IPv6 addresses, TCP/UDP ports, TCP sequence and flags, and where the transport
// payload lies in the frame. Link types: Ethernet (with 802.1Q/802.1ad VLAN tags), Linux
// cooked v1 (SLL) and v2 (SLL2), raw IP (DLT_RAW, LINKTYPE_IPV4/IPV6), BSD loopback
// (DLT_NULL, DLT_LOOP).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "gpufilter/core/packet.hpp"  // RawPacket, PacketInfo, address_text()

namespace gpufilter {

// Whether the decoder knows this libpcap link type (DLT_*), and its name for messages
// ("EN10MB", "LINUX_SLL2", ... or "147"), written after "link type".
bool link_type_supported(int link_type) noexcept;
std::string link_type_name(int link_type);

// Decodes `frame` of `link_type`. Never throws: what cannot be decoded is a frame whose
// payload is the whole frame (transport kNone).
PacketInfo decode_packet(int link_type, std::span<const std::uint8_t> frame) noexcept;

}  // namespace gpufilter
