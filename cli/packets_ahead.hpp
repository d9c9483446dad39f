// PacketsAhead: a mapped classic pcap file read and decoded on a thread of its own, ahead
// of the thread that takes its packets in order (--stream on many threads, where the one
// thread that reassembles TCP bounds the run: cli/flow_farm.hpp). That thread walks the
// record headers (PcapPieces::Cursor), runs the BPF filter, decodes each packet and hands
// them on in batches; its page faults on the mapping are its own, and it gives back the
// pages no one reads any more. At most a few batches
// wait, so memory stays bounded; the packets' data stay in the mapping.
#pragma once

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

namespace gpufilter {

class PacketsAhead {
 public:
  // Reads on from where `cursor` is. `filter`: the reader's (null: none).
  PacketsAhead(const PcapPieces::Cursor& cursor, const BpfFilter* filter, int link_type);
  ~PacketsAhead();
  PacketsAhead(const PacketsAhead&) = delete;
  PacketsAhead& operator=(const PacketsAhead&) = delete;

  // The next packet that passed the filter, decoded: kPacket; kEnd at the file's end;
  // kLeft at a record the mapping does not read (libpcap reads on from left_at()).
  PcapPieces::Cursor::Read next(RawPacket& raw, PacketInfo& info);
  // Where the batch of the packet next() gave last starts in the file: the mapping below
  // it is not read again by this reader.
  std::size_t batch_begin() const noexcept { return current_.begin; }
  // The mapping below `offset` is read by no one any more: the thread gives its pages back.
  void release_before(std::size_t offset);
  // After kLeft: the record's file offset and its number.
  std::size_t left_offset() const noexcept { return current_.left_offset; }
  std::uint64_t left_index() const noexcept { return current_.left_index; }

 private:
  struct Decoded {
    RawPacket raw;
    PacketInfo info;
  };
  struct Batch {
    std::size_t begin = 0;  // the file offset of its first record
    std::vector<Decoded> packets;
    PcapPieces::Cursor::Read end = PcapPieces::Cursor::Read::kPacket;  // kEnd, kLeft: the last batch
    std::size_t left_offset = 0;
    std::uint64_t left_index = 0;
  };
  static constexpr std::size_t kBatchPackets = 4096;
  static constexpr std::size_t kBatches = 4;  // waiting, at most

  void run() noexcept;
  bool take_batch();

  PcapPieces::Cursor cursor_;
  const BpfFilter* filter_;
  int link_type_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Batch> ready_;
  std::vector<std::vector<Decoded>> spare_;  // emptied batches' vectors, for the thread
  bool stop_ = false;
  std::size_t release_ = 0;   // the thread gives the pages below this back
  std::size_t released_ = 0;  // the thread's
  Batch current_;          // the consumer's
  std::size_t taken_ = 0;  // of current_.packets
  std::thread thread_;
};

}  // namespace gpufilter
