// CaptureSource: a packet capture as line streams, beside Follower, Listener and
// StdinReader (gpufilterd's `pcap:` and `interface:` sources). libpcap reads a capture file
// (pcap or pcapng, once to its end) or a live interface, with an optional BPF filter; each
// packet is decoded (packet.hpp) and its transport payload becomes lines:
//
//   capture thread: PcapReader::read -> decode_packet
//     per packet:  payload cut at '\n' (an unterminated last piece gets one)  -> channel,
//                  one stream for the capture ("pcap:FILE", "interface:IFACE")
//     stream mode: TCP -> TcpReassembler -> per direction a LineFramer        -> channel,
//                  one stream per flow direction ("pcap:FILE 10.0.0.1:40000 -> 10.0.0.2:80"),
//                  opened at its first bytes, closed when the flow ends; other packets
//                  per packet, as above
//   I/O thread:    start(), stop(), on_space() (wakes the capture thread), stopped()
//
// libpcap blocks (a live read waits in its own poll), so the capture runs on a thread of
// its own, never on the I/O thread. A packet never continues another's line; a line longer
// than max_line_bytes is dropped and counted, as the other readers do. When the channel is
// full the thread waits (a condition variable) until on_space(): nothing more is read
// meanwhile, so a file is read as fast as the scan takes it and a live capture's backlog
// stays in the kernel's buffer.
//
// No exception leaves the thread: a failure (a truncated or corrupt file: after every packet
// before it was handed on; a live capture's read error) goes to Notices, naming the capture,
// and the source ends, closing its streams. stop() ends a live capture at once (break_loop),
// a file at the next packet; the flows' held bytes and last unterminated lines are still
// handed on, then every stream is closed. Memory: the reassembler's limits
// (ReassemblyConfig: held bytes, open flows), plus at most max_line_bytes (and one
// delivery) per open flow direction, plus one packet's lines.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>

#include <boost/asio/io_context.hpp>

#include "gpufilter/core/notices.hpp"
#include "gpufilter/core/record_channel.hpp"
#include "gpufilter/sources/pcap_reader.hpp"
#include "gpufilter/sources/tcp_reassembler.hpp"

namespace gpufilter {

class LineFramer;

struct CaptureConfig {
  std::string file;       // a capture file, read once to its end; or
  std::string interface;  // a live interface (needs CAP_NET_RAW or root)
  std::string bpf;        // a BPF filter libpcap compiles ("" none)
  bool stream = false;    // TCP per flow direction, reassembled, instead of per packet
  std::size_t max_line_bytes = 1u << 20;
  ReassemblyConfig reassembly;  // stream
};

// For validating a configuration, without capturing. check_capture_file opens the file,
// reads its header and compiles `bpf` for its link type; check_bpf compiles `bpf` for
// Ethernet (an interface's own link type is known only once it is opened). Both throw
// ConfigError for the filter ("EXPR: libpcap's reason"); check_capture_file throws
// SourceError (cannot open, not a capture, a link type the decoder does not know) or
// PcapError (a header cut short) for the file.
void check_capture_file(const std::string& path, const std::string& bpf);
void check_bpf(const std::string& bpf);

class CaptureSource {
 public:
  // Opens the capture. Throws SourceError (cannot open; no privilege for an interface; a
  // link type the decoder does not know), ConfigError (a BPF filter libpcap rejects:
  // "NAME: bpf: EXPR: why"), PcapError (a file whose header is cut short).
  CaptureSource(boost::asio::io_context& io, RecordChannel& channel, CaptureConfig config, Notices& notices);
  // Ends the thread at once: what it had not handed on is dropped, its streams are closed.
  ~CaptureSource();
  CaptureSource(const CaptureSource&) = delete;
  CaptureSource& operator=(const CaptureSource&) = delete;

  // "pcap:FILE" or "interface:IFACE": the capture's stream, and the start of its flows' names.
  const std::string& name() const noexcept { return name_; }
  bool live() const noexcept { return !config_.interface.empty(); }

  // Starts the capture thread. Call once, after the channel's space callback is set.
  void start();
  // Called on the I/O thread once the capture ended by itself (a file read to its end, or
  // a failure) and every stream is closed; not after stop(). Set before start().
  void on_end(std::function<void()> callback) { on_end_ = std::move(callback); }
  // Any thread: stop reading; what is held is handed on, then the streams close.
  void stop() noexcept;
  // True once every stream is closed and the thread is done (or before start()).
  bool stopped() const noexcept { return done_.load(std::memory_order_acquire); }
  // Any thread (the I/O thread): the channel has room again.
  void on_space();

  struct Counters {
    std::uint64_t packets = 0;         // packets read (after the BPF filter)
    std::uint64_t lines_too_long = 0;  // lines over max_line_bytes, dropped
    std::uint64_t flows = 0;           // stream: TCP flows seen
    std::uint64_t gaps = 0;            // stream: gaps skipped (bytes never captured)
  };
  // Any thread.
  Counters counters() const noexcept;

 private:
  struct Work;  // the capture thread's state: the reassembler, the flows, one packet's lines
  enum class Ending { kEnd, kStopped };
  struct Abandoned {};  // thrown on the capture thread when the destructor gives up waiting

  void run() noexcept;  // the capture thread
  Ending read_packets();
  void packet_lines(std::span<const std::uint8_t> payload);
  void segment(const RawPacket& raw, const PacketInfo& info);
  void deliver(std::uint64_t flow, int direction, std::uint64_t offset, std::span<const std::uint8_t> bytes);
  void flow_closed(std::uint64_t flow);
  void expire(std::int64_t seconds);
  void end_lines(StreamId stream, LineFramer& framer, std::uint64_t& counted);
  void finish_streams();
  void close_streams() noexcept;
  // Hand whole lines to the channel, waiting for room as long as it takes; throw Abandoned
  // when the destructor gives up. append() is one try: the bytes taken.
  void hand_on(StreamId stream, std::uint64_t offset, std::string_view lines, std::uint64_t skipped);
  void hand_on(StreamId stream, LineFramer& framer, std::uint64_t& counted);
  std::size_t append(StreamId stream, std::uint64_t offset, std::string_view lines, std::uint64_t skipped);
  void wait_for_space();
  void report(const std::string& message) noexcept;

  boost::asio::io_context& io_;
  RecordChannel& channel_;
  const CaptureConfig config_;
  Notices& notices_;
  std::string name_;
  std::unique_ptr<PcapReader> reader_;
  int link_type_ = 0;
  std::unique_ptr<Work> work_;
  std::function<void()> on_end_;
  std::mutex mutex_;
  std::condition_variable space_cv_;
  bool space_ = false;                 // on_space() came since the last short append
  std::atomic<bool> stopping_{false};
  std::atomic<bool> abandon_{false};   // the destructor: hand nothing more on
  std::atomic<bool> done_{true};
  std::atomic<std::uint64_t> packets_{0};
  std::atomic<std::uint64_t> lines_too_long_{0};
  std::atomic<std::uint64_t> flows_{0};
  std::atomic<std::uint64_t> gaps_{0};
  std::thread thread_;
};

}  // namespace gpufilter
