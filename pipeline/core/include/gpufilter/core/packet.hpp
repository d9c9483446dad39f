// A captured packet and what its decoder found: the seam between the capture readers
// (sources/pcap_reader.hpp, sources/packet.hpp decodes) and what writes selected packets
// out (sinks/packet_printer.hpp, sinks/pcap_writer.hpp), as sink.hpp is for lines.
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

  // The time from a record's seconds and fraction (micro- or nanoseconds): a fraction of
  // a whole second or more (a writer's bug) is carried into the seconds, so that the
  // absolute time is well formed and the same instant as relative times count it.
  void set_time(std::int64_t whole, std::uint64_t fraction, bool nano) noexcept {
    const std::uint64_t ns = nano ? fraction : fraction * 1000;
    seconds = whole + static_cast<std::int64_t>(ns / 1000000000u);
    nanoseconds = static_cast<std::uint32_t>(ns % 1000000000u);
  }
};

struct PacketInfo {
  enum class Transport : std::uint8_t { kNone, kTcp, kUdp, kOther };
  // The addresses first, at 16-byte boundaries: a copy of the struct moves them whole,
  // so that reading their halves just after (TcpReassembler's flow key) is forwarded from
  // the copy's stores instead of waiting for them (a third of the reassembling thread's
  // time when ip_version came first).
  std::array<std::uint8_t, 16> src{};  // IPv4 in the first 4 bytes
  std::array<std::uint8_t, 16> dst{};
  int ip_version = 0;  // 4, 6, or 0 (not IP)
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

// "192.0.2.1" or "2001:db8::1" (RFC 5952), the packet's src or dst; "" when not IP.
std::string address_text(const PacketInfo& info, bool source);

}  // namespace gpufilter
