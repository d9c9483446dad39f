// TcpReassembler: TCP flows put back in order, one byte stream per direction, for
// --stream. A flow is its 5-tuple (both directions are one flow: direction 0 is the
// client's, the side that sent the first segment seen). Bytes are handed on in sequence
// order as soon as they are contiguous; retransmitted bytes are handed on once.
// Out-of-order segments wait, at most max_pending_bytes per direction: past that the gap
// is skipped (counted; the stream goes on after it). All flows together hold at most
// max_total_pending_bytes (bytes plus a cost per held piece): past that the direction
// that has held data longest skips its first gap, and so on, so that the memory a peer
// can pin with gaps is bounded by that, not by max_flows times the per-direction limit.
// A flow ends at FIN (both sides) or
// RST, after idle_timeout of capture time without a segment, or when more than max_flows
// are open (the least recently seen ends first).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include "gpufilter/sources/packet.hpp"

namespace gpufilter {

// A TCP segment's flow as the reassembler finds it: both endpoints in a fixed order (the
// two directions alike) as five words, and their hash. TcpReassembler::key_of makes it
// where the packet is decoded, ahead of the thread that reassembles (cli/packets_ahead.hpp).
struct FlowKey {
  std::array<std::uint64_t, 5> words{};
  std::uint64_t hash = 0;
  bool operator==(const FlowKey& other) const noexcept {
    const auto& a = words;
    const auto& b = other.words;
    return ((a[0] ^ b[0]) | (a[1] ^ b[1]) | (a[2] ^ b[2]) | (a[3] ^ b[3]) | (a[4] ^ b[4])) == 0;
  }
};

struct ReassemblyConfig {
  std::size_t max_pending_bytes = 1u << 20;  // out-of-order bytes held per direction
  std::size_t max_total_pending_bytes = 64u << 20;  // held by all flows together, accounted
  std::size_t max_flows = 65536;
  std::int64_t idle_timeout_seconds = 120;   // capture time
};

class TcpReassembler {
 public:
  // Bytes of one direction, in order: stream offset (0 = the byte after the SYN, or the
  // first byte seen when the SYN was not captured) and the bytes.
  using Deliver = std::function<void(std::uint64_t flow, int direction, std::uint64_t offset,
                                     std::span<const std::uint8_t> bytes)>;
  using Closed = std::function<void(std::uint64_t flow)>;

  TcpReassembler(ReassemblyConfig config, Deliver deliver, Closed closed);
  // How many held pieces one direction may have before it skips its first gap, beside
  // max_pending_bytes (an adversarial order makes a piece of every byte).
  static std::size_t max_pieces(const ReassemblyConfig& config) noexcept;
  ~TcpReassembler();

  // A TCP segment (info.transport == kTcp) of `frame` at capture time `seconds`. Returns
  // the flow id (never 0 for a TCP segment; 0 when info is not TCP), the same for every
  // packet of the flow. A flow ended by FIN or RST absorbs its last segments until it
  // idles out; a new SYN on the same ports starts a new flow.
  std::uint64_t segment(const PacketInfo& info, std::span<const std::uint8_t> frame, std::int64_t seconds);
  // The same, with the segment's key_of(info) made already.
  std::uint64_t segment(const PacketInfo& info, std::span<const std::uint8_t> frame, std::int64_t seconds,
                        const FlowKey& key);
  // The key of a TCP segment's flow (info.transport == kTcp).
  static FlowKey key_of(const PacketInfo& info) noexcept;
  // A segment of the flow of `key` that segment() will be given a few packets on: its
  // flow's place in the table and the flow itself are fetched into the cache ahead of it
  // (a hint; nothing changes).
  void prefetch(const FlowKey& key) const noexcept;
  // Ends flows idle since before now - idle_timeout.
  void expire(std::int64_t now_seconds);
  // Ends every flow (the end of the capture): pending out-of-order bytes are handed on
  // after their gaps.
  void finish();

  struct Counters {
    std::uint64_t flows = 0;          // flows seen
    std::uint64_t gaps = 0;           // gaps skipped (bytes never captured)
    std::uint64_t gap_bytes = 0;
    std::uint64_t retransmitted_bytes = 0;  // bytes seen again and not handed on twice
    std::uint64_t budget_gaps = 0;   // of `gaps`, skipped for max_total_pending_bytes
    std::uint64_t budget_gap_bytes = 0;
    std::uint64_t limit_gaps = 0;    // of `gaps`, skipped for one direction's limits (max_pieces too)
    std::uint64_t limit_gap_bytes = 0;
    std::uint64_t held = 0;       // out-of-order memory accounted now: bytes + pieces * cost
    std::uint64_t held_peak = 0;  // its most after any segment
  };
  Counters counters() const noexcept;
  // Whether the last segment() went to a flow already ended by FIN or RST (its tombstone
  // absorbed it: no bytes, no new flow).
  bool absorbed() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpufilter
