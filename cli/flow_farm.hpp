// FlowFarm: --stream over a capture file on several threads. The calling thread hands
// the packets, in batches as the reading threads decoded them (cli/packets_ahead.hpp), to
// every thread; each thread takes its own from them: the TCP segments of the flows it owns
// (by the hash of their addresses and ports) and every n-th packet of other protocols.
// Each thread reassembles its flows (a TcpReassembler of its own, with its share of the
// limits: FlowShardReport::reassembly()), scans, selects and prints them (a FlowShard: the
// capture run's own code, with a scanner and regexes of its own) into output of its own.
// What one reassembler would do between its flows, every thread does for its own: it ends
// the flows idle at the segments after which one reassembler would (every thread sees every
// packet's time), and every flow at the capture's end (finish()). The calling thread does
// nothing per packet.
//
// The outputs are written in the order one thread prints: each printing event (a flow's
// end, another packet) carries an EventKey (the packet it happened at, then its place
// among that packet's events, or, for flows ended idle or at the end, the order one
// reassembler ends them in: least recently seen first), and a round's events are written
// by key. A flow's number is one thread's too (flows numbered in the order they began):
// a shard leaves its place empty (FlowShardReport::number_here) and the farm writes it, from
// the packets the flows began at, which every thread reports (created()).
//
// The packets are handed over in rounds of about kRoundBytes; at most kWindow rounds are
// given and not yet written (the calling thread waits, writing, beyond that), so memory
// stays bounded and the mapping below the oldest of them is never read again
// (oldest_offset()). Records libpcap read (where the mapping does not) are copied into a
// batch of their own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "gpufilter/core/packet.hpp"
#include "gpufilter/sinks/output.hpp"
#include "gpufilter/sources/tcp_reassembler.hpp"
#include "packets_ahead.hpp"

namespace gpufilter {

// Where a printing event falls in one thread's output: at packet `index`, phase 0 for the
// packet's own events (`order`: their order), phase 1 for flows ended idle after it (or at
// the end: index ~0), least recently seen first (`seen`: the flow's latest time, `order`:
// the number of the packet that touched it last).
struct EventKey {
  std::uint64_t index = 0;
  std::uint8_t phase = 0;
  std::int64_t seen = 0;
  std::uint64_t order = 0;
  friend bool operator<(const EventKey& a, const EventKey& b) noexcept {
    if (a.index != b.index) return a.index < b.index;
    if (a.phase != b.phase) return a.phase < b.phase;
    if (a.seen != b.seen) return a.seen < b.seen;
    return a.order < b.order;
  }
};

// What a shard tells the farm, on the shard's thread.
class FlowShardReport {
 public:
  virtual ~FlowShardReport() = default;
  // The limits of the shard's reassembler: its share of one thread's.
  virtual ReassemblyConfig reassembly() const = 0;
  // A printing event happened (in the order they are printed): its place.
  virtual void key(const EventKey& key) = 0;
  // A flow began at packet `index` (in the order they begin).
  virtual void created(std::uint64_t index) = 0;
  // The number of the flow that began at packet `index` belongs here in the output.
  virtual void number_here(std::uint64_t index) = 0;
  // The flow that began at packet `index` is printed or dropped: its number is not asked again.
  virtual void gone(std::uint64_t index) = 0;
  // The oldest event given a key and not yet printed is decided: what it printed is all in
  // the shard's output.
  virtual void printed() = 0;
  // The capture ended (FlowShard::finish()): what the shard's reassembler counted.
  virtual void reassembled(const TcpReassembler::Counters& counters) = 0;
  // The round's marker came back: every event of the round is decided.
  virtual void round_done(std::uint64_t round) = 0;
};

// A farm thread's matching (the capture run in shard mode, cli/packet_mode.cpp). The
// frames stay valid until the round's round_done().
class FlowShard {
 public:
  virtual ~FlowShard() = default;
  // A TCP segment of one of its flows (raw.index: its number in the capture).
  virtual void segment(const RawPacket& raw, const PacketInfo& info, const FlowKey& key) = 0;
  // A segment of one of its flows comes soon: its flow is fetched into the cache (a hint).
  virtual void prefetch(const FlowKey& key) = 0;
  // A packet of another protocol.
  virtual void packet(const RawPacket& raw, const PacketInfo& info) = 0;
  // One reassembler would end the flows idle at `seconds`, after packet `index`.
  virtual void expire(std::int64_t seconds, std::uint64_t index) = 0;
  // The capture ends: every flow ends.
  virtual void finish() = 0;
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
  // Every thread takes every round, so a few are slack enough; each one's decoded packets
  // are memory the reading threads filled (2 × threads rounds, the window when each thread
  // took only its share, faulted in 40,000 pages on 16 cores).
  static constexpr std::size_t kWindow = 3;

  // The threads start at once; `first_offset`: the file offset of the first packet read;
  // `round_bytes`: kRoundBytes, or less in tests (many rounds from a small capture).
  // Throws Error when no thread can be started.
  FlowFarm(std::size_t threads, const MakeShard& make, Output& out, std::size_t first_offset,
           std::size_t round_bytes = kRoundBytes);
  ~FlowFarm();
  FlowFarm(const FlowFarm&) = delete;
  FlowFarm& operator=(const FlowFarm&) = delete;

  // The next packets in capture order, for every thread.
  void add(PacketBatch&& batch);
  // A packet read here (by libpcap, where the mapping does not read): copied into a batch.
  void add(const RawPacket& raw, const PacketInfo& info);
  // An emptied batch to fill (its vector kept from an earlier one).
  PacketBatch spare_batch();
  // The capture ends: every thread ends its flows (before drain()).
  void finish();

  // Packets were given up to file offset `next`. A round ends every round_bytes of
  // packets; finished rounds are written. Throws Error when a thread failed (its
  // message), OutputError when writing failed.
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
    TcpReassembler::Counters reassembly;  // all threads' together, after finish()
  };
  Totals totals() const;
  std::size_t threads() const noexcept { return lanes_.size(); }
  // Each thread's reassembly limits (its share of one thread's).
  ReassemblyConfig reassembly_limits() const;
  // The mapping below this offset is not read again.
  std::size_t oldest_offset() const;

 private:
  struct Lane;
  struct RoundWrite;
  void end_round(std::size_t next);
  bool write_oldest(bool wait);
  void number_flows(const RoundWrite& round);
  void write_events(const RoundWrite& round);
  void write_number(std::uint64_t created);
  void stop_threads() noexcept;

  Output& out_;
  std::unique_ptr<struct FarmShared> shared_;
  std::vector<std::unique_ptr<Lane>> lanes_;
  PacketBatch loose_;            // packets read here, not yet in a round
  std::vector<PacketBatch> spare_;  // batches written, emptied
  std::uint64_t next_number_ = 1;  // the next flow's number
  std::unordered_map<std::uint64_t, std::uint64_t> numbers_;  // flows' numbers by where they began
  std::size_t round_limit_ = kRoundBytes;
  std::size_t round_bytes_ = 0;  // of the packets given in the round being filled
  std::vector<std::uint64_t> selected_, bytes_;  // each thread's, as of the last round written
  TcpReassembler::Counters reassembly_;
  double waited_ = 0;
};

}  // namespace gpufilter
