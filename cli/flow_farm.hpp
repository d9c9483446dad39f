// FlowFarm: --stream over a capture file on several threads. The calling thread reads the
// packets and reassembles TCP (one TcpReassembler, so flow ids, the order flows end in and
// the reassembly limits are one thread's, as without the farm); each flow's events (its
// segments, its bytes in order, its end) go to the thread that owns the flow (by its id),
// and packets of other protocols are dealt out in turn. Each thread scans, selects and
// prints what it was given (a FlowShard: the capture run's own code, with a scanner and
// regexes of its own) into output of its own. The calling thread writes the outputs in
// the order it gave the events that print (a flow's end, another packet), so the output
// is byte for byte one thread's.
//
// The events are handed over in rounds of about kRoundBytes of packets; at most
// 2 × threads rounds are given and not yet written (the calling thread waits, writing,
// beyond that), so memory stays bounded and the mapping below the oldest of them is never
// read again (oldest_offset()). Bytes and frames outside the mapping (held out-of-order
// data, records libpcap read) are copied into the round.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gpufilter/core/packet.hpp"
#include "gpufilter/sinks/output.hpp"
#include "gpufilter/sources/pcap_pieces.hpp"

namespace gpufilter {

// A packet a shard needs whole: another protocol's (matched on its own), or a flow's first
// segment (the flow's client and start).
struct FlowPacket {
  RawPacket raw;  // its data: the frame (a first segment's: none, its bytes come as kBytes)
  PacketInfo info;
};

// One thing the calling thread hands to a shard: small, a packet's whole only where needed.
struct FlowEvent {
  enum class Kind : std::uint8_t { kSegment, kBytes, kClosing, kPacket };
  static constexpr std::uint32_t kNoPacket = ~std::uint32_t{0};
  Kind kind = Kind::kSegment;
  std::uint8_t direction = 0;   // kBytes
  std::uint32_t nanoseconds = 0;  // kSegment: the segment's time
  std::int64_t seconds = 0;
  std::uint64_t flow = 0;       // kSegment, kBytes, kClosing
  std::uint64_t offset = 0;     // kBytes: the stream offset of bytes[0]
  std::span<const std::uint8_t> bytes;  // kBytes
  std::uint32_t packet = kNoPacket;  // kPacket, a flow's first kSegment: its FlowPacket in the round
};

// What a shard tells the farm, on the shard's thread.
class FlowShardReport {
 public:
  virtual ~FlowShardReport() = default;
  // An event that prints (a flow's end, a packet) is decided: what it printed is all in
  // the shard's output.
  virtual void printed() = 0;
  // The round's marker came back: every event of the round is decided.
  virtual void round_done(std::uint64_t round) = 0;
};

// A farm thread's matching (the capture run in shard mode, cli/packet_mode.cpp).
class FlowShard {
 public:
  virtual ~FlowShard() = default;
  // The event's spans and `packet` (its FlowPacket, or null) stay valid until the round's
  // round_done().
  virtual void take(const FlowEvent& event, const FlowPacket* packet) = 0;
  virtual void end_round(std::uint64_t round) = 0;
  // Everything taken is scanned and delivered (the thread has nothing else to do).
  virtual void flush() = 0;
  virtual std::uint64_t selected() const = 0;
  virtual std::uint64_t bytes_scanned() const = 0;
};

class FlowFarm {
 public:
  // `make`: a shard printing into `out` and telling `report` (called on the calling thread).
  using MakeShard = std::function<std::unique_ptr<FlowShard>(Output& out, FlowShardReport& report)>;
  static constexpr std::size_t kRoundBytes = std::size_t{4} << 20;

  // The threads start at once; `first_offset`: the file offset of the first packet read;
  // `round_bytes`: kRoundBytes, or less in tests (many rounds from a small capture).
  // Throws Error when no thread can be started.
  FlowFarm(std::size_t threads, const MakeShard& make, const PcapPieces& mapping, Output& out,
           std::size_t first_offset, std::size_t round_bytes = kRoundBytes);
  ~FlowFarm();
  FlowFarm(const FlowFarm&) = delete;
  FlowFarm& operator=(const FlowFarm&) = delete;

  void segment(std::uint64_t flow, const RawPacket& raw, const PacketInfo& info);
  void bytes(std::uint64_t flow, int direction, std::uint64_t offset, std::span<const std::uint8_t> bytes);
  void closing(std::uint64_t flow);
  void packet(const RawPacket& raw, const PacketInfo& info);

  // A packet was read and its events given; `next` is the file offset of the next one. A
  // round ends every round_bytes of packets; finished rounds are written. Throws Error
  // when a thread failed (its message), OutputError when writing failed.
  void read_to(std::size_t next);
  // A thread failed: the farm takes nothing more.
  bool failed() const;
  // Everything given is matched and written (before a notice, and at the end).
  void drain();
  struct Totals {
    std::uint64_t selected = 0;
    std::uint64_t bytes = 0;
    // Where the time went (--stats): the threads' CPU seconds, the busiest one's and all
    // of them together, and the seconds the calling thread waited for them.
    double threads_cpu_max = 0, threads_cpu_sum = 0, waited = 0;
  };
  Totals totals() const;
  std::size_t threads() const noexcept { return lanes_.size(); }
  // The mapping below this offset is not read again.
  std::size_t oldest_offset() const;

 private:
  struct Lane;
  std::uint32_t lane_index(std::uint64_t flow) const noexcept;
  Lane& lane_of_flow(std::uint64_t flow);
  std::span<const std::uint8_t> kept(Lane& lane, std::span<const std::uint8_t> bytes);
  void end_round(std::size_t next);
  bool write_oldest(bool wait);
  void stop_threads() noexcept;

  const PcapPieces& mapping_;
  Output& out_;
  std::unique_ptr<struct FarmShared> shared_;
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::size_t window_ = 2;       // rounds given and not written, at most
  std::uint64_t next_lane_ = 0;  // for the next packet of another protocol
  std::uint64_t newest_flow_ = 0;  // the highest flow id given (ids grow: a higher one is new)
  std::size_t round_limit_ = kRoundBytes;
  std::size_t round_bytes_ = 0;  // of the packets given in the round being filled
  std::vector<std::uint64_t> selected_, bytes_;  // each thread's, as of the last round written
  double waited_ = 0;
};

}  // namespace gpufilter
