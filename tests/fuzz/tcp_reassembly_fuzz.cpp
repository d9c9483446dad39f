// tcp_reassembly_fuzz: TcpReassembler (--stream) driven by segments derived from the
// input: sequence numbers near two input-chosen initial ones (so wraparound of the
// sequence space comes up), any order, overlaps and retransmissions, SYN/FIN/RST/ACK,
// several flows over IPv4 and IPv6, capture time stepping forward and back, expire()
// calls, payload lengths that lie, and a small buffer and flow limit from the input.
//
// Input: [0] bits 0-2 max_pending_bytes (0, 1, 16, 64, 100, 1000, 4096, 1M), bits 3-5
// max_flows (1, 2, 3, 4, 8, 16, 64, 65536), bits 6-7 the idle timeout (0, 1, 10, 120 s);
// [1-4] and [5-8] the initial sequence numbers of the client and server sides; then
// segments of 6 bytes each:
//   [0] bits 0-1 which of 4 client ports, 2 server -> client, 3 SYN, 4 FIN, 5 RST, 6 ACK,
//       7 garbage payload (the next LEN input bytes instead of the stream's own bytes)
//   [1-2] signed distance of the sequence number from its side's initial one
//   [3] LEN, the payload length
//   [4] signed step of the capture time, in seconds
//   [5] bit 0 expire() after the segment, 1 IPv6, 2 payload_length claims 1000 bytes
//       more than the frame has, 3 payload_offset past the frame
// A stream's byte at sequence number S is a hash of its ports, IP version and S, so
// every byte handed on can be checked against where the reassembler says it lies.
// Checked: per flow and direction, bytes are handed on in order and never twice (each
// delivery starts at or past the end of the previous one), the skipped stretches add up
// to Counters::gap_bytes, every byte is the stream's byte at its offset (unless that side
// sent garbage), no more bytes come out than went in, nothing comes out of a flow after
// Closed, and every flow is closed exactly once by finish().
#include <array>
#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "gpufilter/sources/packet.hpp"
#include "gpufilter/sources/tcp_reassembler.hpp"

namespace {

using gpufilter::PacketInfo;

constexpr std::size_t kPending[] = {0, 1, 16, 64, 100, 1000, 4096, 1u << 20};
constexpr std::size_t kFlows[] = {1, 2, 3, 4, 8, 16, 64, 65536};
constexpr std::int64_t kIdle[] = {0, 1, 10, 120};

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "tcp_reassembly_fuzz: %s\n", what.c_str());
  __builtin_trap();
}

std::uint8_t stream_byte(std::uint16_t sport, std::uint16_t dport, int version, std::uint32_t seq) {
  std::uint64_t h = (std::uint64_t{sport} << 48) ^ (std::uint64_t{dport} << 32) ^ seq ^ (std::uint64_t(version) << 60);
  h *= 0x9E3779B97F4A7C15ull;
  h ^= h >> 29;
  return static_cast<std::uint8_t>(h >> 24);
}

struct Side {
  std::array<std::uint8_t, 16> address{};
  std::uint16_t port = 0;
  bool operator==(const Side&) const = default;
};

struct FlowState {
  Side client;
  int version = 0;
  bool closed = false;
  struct Dir {
    bool started = false;
    std::uint32_t base = 0;  // the sequence number at stream offset 0
    std::uint16_t sport = 0, dport = 0;
    bool garbage = false;    // sent bytes that are not the stream's own
    std::uint64_t end = 0;   // end of the last delivery
    std::uint64_t offered = 0, delivered = 0;
  };
  std::array<Dir, 2> dirs;
};

struct Delivery {
  std::uint64_t flow;
  int direction;
  std::uint64_t offset;
  std::vector<std::uint8_t> bytes;
};

// Checks what the last call handed on and closed, once `flows` knows every flow.
void settle(std::vector<Delivery>& deliveries, std::vector<std::uint64_t>& closings,
            std::map<std::uint64_t, FlowState>& flows, std::uint64_t& gap_total) {
  for (const Delivery& d : deliveries) {
    auto it = flows.find(d.flow);
    if (it == flows.end()) fail("bytes of an unknown flow " + std::to_string(d.flow));
    FlowState& f = it->second;
    if (f.closed) fail("bytes of flow " + std::to_string(d.flow) + " after it was closed");
    FlowState::Dir& dir = f.dirs[d.direction];
    if (!dir.started) fail("bytes of a direction that sent nothing");
    if (d.offset < dir.end)
      fail("flow " + std::to_string(d.flow) + " direction " + std::to_string(d.direction) + ": bytes at " +
           std::to_string(d.offset) + " handed on again (already up to " + std::to_string(dir.end) + ")");
    gap_total += d.offset - dir.end;
    dir.end = d.offset + d.bytes.size();
    dir.delivered += d.bytes.size();
    if (!dir.garbage) {
      for (std::size_t k = 0; k < d.bytes.size(); ++k) {
        const auto seq = static_cast<std::uint32_t>(dir.base + d.offset + k);
        if (d.bytes[k] != stream_byte(dir.sport, dir.dport, f.version, seq))
          fail("flow " + std::to_string(d.flow) + " direction " + std::to_string(d.direction) + ": the byte at " +
               std::to_string(d.offset + k) + " is not the stream's byte there");
      }
    }
  }
  deliveries.clear();
  for (const std::uint64_t id : closings) {
    auto it = flows.find(id);
    if (it == flows.end()) fail("an unknown flow closed");
    if (it->second.closed) fail("flow " + std::to_string(id) + " closed twice");
    it->second.closed = true;
  }
  closings.clear();
}

// The counters and the flows once finish() returned: every flow closed, no more bytes out
// than in, the gaps as the deliveries skipped them.
void check_end(const gpufilter::TcpReassembler::Counters& counters, const std::map<std::uint64_t, FlowState>& flows,
               std::uint64_t gap_total) {
  if (counters.flows != flows.size())
    fail(std::to_string(counters.flows) + " flows counted, " + std::to_string(flows.size()) + " seen");
  if (counters.gap_bytes != gap_total)
    fail("gap_bytes " + std::to_string(counters.gap_bytes) + ", but the deliveries skip " + std::to_string(gap_total));
  for (const auto& [id, f] : flows) {
    if (!f.closed) fail("flow " + std::to_string(id) + " was never closed");
    for (const FlowState::Dir& dir : f.dirs)
      if (dir.delivered > dir.offered) fail("flow " + std::to_string(id) + " handed on more bytes than it got");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 9) return 0;
  const gpufilter::ReassemblyConfig config{.max_pending_bytes = kPending[data[0] & 7],
                                           .max_flows = kFlows[(data[0] >> 3) & 7],
                                           .idle_timeout_seconds = kIdle[data[0] >> 6]};
  const auto load32 = [&](std::size_t at) {
    return static_cast<std::uint32_t>(data[at]) << 24 | static_cast<std::uint32_t>(data[at + 1]) << 16 |
           static_cast<std::uint32_t>(data[at + 2]) << 8 | data[at + 3];
  };
  const std::uint32_t isn[2] = {load32(1), load32(5)};

  std::vector<Delivery> deliveries;
  std::vector<std::uint64_t> closings;
  gpufilter::TcpReassembler reassembler(
      config,
      [&](std::uint64_t flow, int direction, std::uint64_t offset, std::span<const std::uint8_t> bytes) {
        if (bytes.empty()) fail("an empty delivery");
        deliveries.push_back({flow, direction, offset, {bytes.begin(), bytes.end()}});
      },
      [&](std::uint64_t flow) { closings.push_back(flow); });

  std::map<std::uint64_t, FlowState> flows;
  std::uint64_t gap_total = 0;

  std::int64_t now = 1'000'000;
  std::size_t at = 9;
  std::vector<std::uint8_t> frame;
  while (at + 6 <= size) {
    const std::uint8_t* s = data + at;
    at += 6;
    const unsigned c = s[0];
    const int version = (s[5] & 2) != 0 ? 6 : 4;
    const bool reply = (c & 4) != 0;
    Side client, server;
    client.port = static_cast<std::uint16_t>(40000 + (c & 3));
    server.port = 80;
    client.address[0] = 10;
    client.address[3] = 1;
    server.address[0] = 10;
    server.address[3] = 2;
    if (version == 6) {
      client.address[15] = 1;
      server.address[15] = 2;
    }
    const Side& src = reply ? server : client;
    const Side& dst = reply ? client : server;
    std::uint8_t flags = 0;
    if (c & 8) flags |= 0x02;
    if (c & 16) flags |= 0x01;
    if (c & 32) flags |= 0x04;
    if (c & 64) flags |= 0x10;
    const bool garbage = (c & 128) != 0;
    const auto distance = static_cast<std::int16_t>(static_cast<std::uint16_t>(s[1] << 8 | s[2]));
    const std::uint32_t seq = isn[reply ? 1 : 0] + static_cast<std::uint32_t>(static_cast<std::int32_t>(distance));
    const std::uint32_t data_seq = seq + ((flags & 0x02) != 0 ? 1u : 0u);
    const std::size_t length = s[3];
    now += static_cast<std::int8_t>(s[4]);

    frame.clear();
    if (garbage) {
      const std::size_t n = std::min(length, size - at);
      frame.assign(data + at, data + at + n);
      at += n;
    } else {
      for (std::size_t k = 0; k < length; ++k)
        frame.push_back(stream_byte(src.port, dst.port, version, data_seq + static_cast<std::uint32_t>(k)));
    }
    PacketInfo info;
    info.ip_version = version;
    info.src = src.address;
    info.dst = dst.address;
    info.transport = PacketInfo::Transport::kTcp;
    info.ip_protocol = 6;
    info.sport = src.port;
    info.dport = dst.port;
    info.tcp_seq = seq;
    info.tcp_flags = flags;
    info.payload_offset = (s[5] & 8) != 0 ? frame.size() + 5 : 0;
    info.payload_length = frame.size() + ((s[5] & 4) != 0 ? 1000 : 0);

    const std::uint64_t id = reassembler.segment(info, frame, now);
    if (id == 0) fail("a TCP segment got flow id 0");
    auto [it, created] = flows.try_emplace(id);
    FlowState& f = it->second;
    if (created) {
      f.client = src;
      f.version = version;
    }
    if (!f.closed || created) {
      const int d = src == f.client ? 0 : 1;
      FlowState::Dir& dir = f.dirs[d];
      if (!dir.started) {
        dir.started = true;
        dir.base = data_seq;
        dir.sport = src.port;
        dir.dport = dst.port;
      }
      dir.garbage = dir.garbage || garbage;
      if (info.payload_offset == 0) dir.offered += frame.size();
    }
    settle(deliveries, closings, flows, gap_total);
    if (s[5] & 1) {
      reassembler.expire(now);
      settle(deliveries, closings, flows, gap_total);
    }
  }
  reassembler.finish();
  settle(deliveries, closings, flows, gap_total);

  check_end(reassembler.counters(), flows, gap_total);
  return 0;
}
