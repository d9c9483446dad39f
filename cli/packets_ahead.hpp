// PacketsAhead: a mapped classic pcap file read and decoded on threads of their own, ahead
// of the thread that takes its packets in order, a part at a time (--stream on many
// threads: cli/flow_farm.hpp). The file is cut into parts of about kPartBytes; a reading
// thread takes the next part, walks its records from where the first one starts (the part
// before's end when that part is walked already, else where PcapPieces::find_start guesses
// it), runs the BPF filter and decodes each packet. The taking thread takes the parts in
// order and checks each guess: a part that does not start where the one before ended is
// walked again there, on the taking thread. Packets are numbered as PcapReader numbers
// them. At most a few parts wait, so memory stays bounded; the packets' data stay in the
// mapping, whose pages behind the taking thread a reading thread gives back.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "gpufilter/core/packet.hpp"
#include "gpufilter/sources/pcap_pieces.hpp"
#include "gpufilter/sources/pcap_reader.hpp"
#include "gpufilter/sources/tcp_reassembler.hpp"

namespace gpufilter {

// A packet as a reading thread decoded it.
struct DecodedPacket {
  // `decode()`'s PacketInfo is made in place (a copy of one just written field by field
  // would wait for those stores).
  template <class Decode>
  DecodedPacket(const RawPacket& r, Decode&& decode) : raw(r), info(decode()) {}
  RawPacket raw;  // raw.index: counted from the batch's index_base
  PacketInfo info;
  FlowKey key;  // a TCP segment's (TcpReassembler::key_of)
};

// Packets in capture order: a part of the mapped file, or records libpcap read (their
// frames copied into `frames`); and where in `packets` each of `lanes` flow threads finds
// what it takes (cli/flow_farm.hpp), listed as they are decoded, so that a flow thread
// visits its own packets, not every one.
struct PacketBatch {
  std::vector<DecodedPacket> packets;
  std::uint64_t index_base = 0;  // a packet's number: index_base + raw.index
  std::size_t end = 0;           // the file offset after its last record
  std::size_t bytes = 0;         // its records' bytes
  std::deque<std::vector<std::uint8_t>> frames;
  std::size_t lanes = 1;                              // set with for_lanes()
  std::vector<std::vector<std::uint32_t>> segments;  // by lane: the TCP segments of its flows
  std::vector<std::uint32_t> others;  // packets of other protocols (dealt out in turn)
  // TCP segments whose second differs from the TCP segment's before (or the batch's first):
  // the only ones after which one reassembler could end idle flows.
  std::vector<std::uint32_t> ticks;

  // The lane of a flow by its key's hash (a multiply, not a division).
  static std::size_t lane_of(std::uint64_t hash, std::size_t lanes) noexcept { return ((hash >> 32) * lanes) >> 32; }
  // Lists for `n` flow threads (the batch cleared first).
  void for_lanes(std::size_t n) {
    lanes = n;
    segments.resize(n);
  }
  // packets.back() joins the lists.
  void list_last() {
    const auto i = static_cast<std::uint32_t>(packets.size() - 1);
    const DecodedPacket& d = packets.back();
    if (d.info.transport != PacketInfo::Transport::kTcp) {
      others.push_back(i);
      return;
    }
    segments[lane_of(d.key.hash, lanes)].push_back(i);
    if (ticks.empty() || d.raw.seconds != last_tcp_seconds_) ticks.push_back(i);
    last_tcp_seconds_ = d.raw.seconds;
  }
  void clear() {
    packets.clear();
    frames.clear();
    for (auto& s : segments) s.clear();
    others.clear();
    ticks.clear();
    index_base = 0;
    end = bytes = 0;
  }

 private:
  std::int64_t last_tcp_seconds_ = 0;  // the latest TCP segment's (once `ticks` has one)
};

class PacketsAhead {
 public:
  static constexpr std::size_t kPartBytes = std::size_t{2} << 20;

  // Reads on from where `cursor` is, on `threads` threads (at least one), in parts of
  // `part_bytes` (kPartBytes, or less in tests). `filter`: the reader's (null: none).
  // Throws Error when no thread can be started.
  // `lanes`: the flow threads the batches are listed for (PacketBatch).
  PacketsAhead(const PcapPieces::Cursor& cursor, const BpfFilter* filter, int link_type, std::size_t lanes,
               std::size_t threads = 1, std::size_t part_bytes = kPartBytes);
  ~PacketsAhead();
  PacketsAhead(const PacketsAhead&) = delete;
  PacketsAhead& operator=(const PacketsAhead&) = delete;

  // The next part's packets that passed the filter, into `batch` (cleared; its vector is
  // kept for a later part): kPacket; kEnd at the file's end; kLeft at a record the
  // mapping does not read (libpcap reads on from left_offset()).
  PcapPieces::Cursor::Read take(PacketBatch& batch);
  // Where the part taken last starts in the file: the mapping below it is not read again
  // by this reader.
  std::size_t batch_begin() const noexcept { return current_.start; }
  // The mapping below `offset` is read by no one any more: a reading thread gives its
  // pages back.
  void release_before(std::size_t offset);
  // After kLeft: the record's file offset and its number.
  std::size_t left_offset() const noexcept { return current_.end; }
  std::uint64_t left_index() const noexcept { return index_base_ + current_.records + 1; }
  // Where the time went (--stats): the reading threads' CPU seconds so far, and the
  // seconds next() waited for them.
  double reader_cpu_seconds() const noexcept;
  double waited_seconds() const noexcept { return waited_; }

 private:
  struct Part {
    std::size_t start = PcapPieces::kNoStart;  // where its walk began (kNoStart: no record seemed to)
    std::size_t end = 0;                       // just past the last record walked
    std::uint64_t records = 0;                 // walked, passed or not
    bool left = false;                         // the walk stopped at a record not read here (at `end`)
    bool done = false;
    PacketBatch batch;  // raw.index: the record's number within the part, from 1
  };

  void run(std::size_t thread) noexcept;
  void walk(Part& part, std::size_t from, std::size_t until) const;
  std::size_t part_begin(std::size_t index) const noexcept { return first_ + index * part_bytes_; }
  bool take_part(PacketBatch& emptied);

  const PcapPieces& pieces_;
  const BpfFilter* filter_;
  int link_type_;
  std::size_t lanes_;
  std::size_t first_;       // where the first part starts: a record, known
  std::size_t part_bytes_;
  std::size_t parts_;       // in the file from first_
  std::size_t window_;      // parts walked or being walked and not taken, at most

  std::mutex mutex_;
  std::condition_variable changed_;
  // Under the mutex.
  std::deque<Part> walked_;         // parts taken_ .. taken_ + walked_.size() - 1
  std::size_t next_part_ = 0;       // the next part a thread walks
  std::vector<PacketBatch> spare_;  // emptied batches (their vectors kept)
  bool stop_ = false;
  std::size_t release_ = 0;         // the threads give the pages below this back
  std::mutex releasing_;
  std::size_t released_ = 0;        // under releasing_

  // The taking thread's.
  std::size_t taken_ = 0;           // parts taken
  std::size_t expected_ = 0;        // where the next part must start: the last one's end
  Part current_;                    // the part taken last (its packets moved out)
  std::uint64_t index_base_ = 0;    // records before current_
  double waited_ = 0;

  std::vector<std::atomic<double>> cpu_;  // each thread's CPU seconds, as of its last part
  std::vector<std::thread> threads_;
};

}  // namespace gpufilter
