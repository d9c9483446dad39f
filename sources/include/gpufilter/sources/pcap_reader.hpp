// PcapReader: captures through libpcap. Classic pcap and pcapng files
// (a path, or "-" for standard input) and live interfaces, with an optional BPF filter
// compiled by libpcap. A truncated or corrupt file is reported with its name and the
// byte offset where reading failed; every packet before it has been handed out.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "gpufilter/core/errors.hpp"
#include "gpufilter/sources/packet.hpp"

namespace gpufilter {

// A capture could not be read past some point: "FILE: truncated capture at byte N: why"
// ("bad capture at byte N" when a record is corrupt rather than cut short); N is where
// the unreadable record or pcapng block starts.
class PcapError : public Error {
 public:
  PcapError(std::string name, std::uint64_t offset, const std::string& why);
  const std::string& name() const noexcept { return name_; }
  std::uint64_t offset() const noexcept { return offset_; }

 private:
  std::string name_;
  std::uint64_t offset_;
};

// libpcap's BPF program for a capture's link type and snaplen, run on each packet (a
// capture file's: a live capture's filter runs in the kernel). pcap_offline_filter only
// reads the program, so many threads may run one at once (cli/packet_farm.hpp).
class BpfFilter {
 public:
  // Throws ConfigError ("--bpf EXPR: why") when libpcap rejects `expression`.
  BpfFilter(int link_type, int snaplen, const std::string& expression);
  ~BpfFilter();
  BpfFilter(const BpfFilter&) = delete;
  BpfFilter& operator=(const BpfFilter&) = delete;
  bool passes(const RawPacket& raw) const noexcept;

 private:
  struct Program;
  std::unique_ptr<Program> program_;
};

class PcapReader {
 public:
  // Throws SourceError (cannot open: no such file, not a capture: with libpcap's reason),
  // ConfigError (a BPF expression libpcap rejects, with its message), or PcapError.
  // "-" is standard input, named `stdin_name` in messages (grep's --label).
  static std::unique_ptr<PcapReader> open_file(const std::string& path, const std::string& bpf = {},
                                               const std::string& stdin_name = "(standard input)");
  // Live capture (promiscuous off, immediate mode, buffer of `buffer_bytes`). Without the
  // privilege: SourceError whose message says so ("... you need CAP_NET_RAW, or root").
  static std::unique_ptr<PcapReader> open_live(const std::string& interface, const std::string& bpf = {},
                                               int snaplen = 262144);
  ~PcapReader();
  PcapReader(const PcapReader&) = delete;
  PcapReader& operator=(const PcapReader&) = delete;

  const std::string& name() const noexcept { return name_; }  // the path, "(standard input)" or the interface
  int link_type() const noexcept;   // DLT_*
  int snaplen() const noexcept;
  bool nanosecond() const noexcept;  // timestamps with nanosecond precision
  bool live() const noexcept { return live_; }

  // The next packet (data valid until the next call): true, or false at the end of a file.
  // A live capture waits for packets; returns false once break_loop() was called.
  // Throws PcapError for a truncated or corrupt capture (after the last good packet).
  bool next(RawPacket& packet);
  // As next(), but a live capture with nothing for a while (its 100 ms read timeout)
  // returns kIdle, so that the caller can deliver what waits and check for a stop.
  enum class Read { kPacket, kIdle, kEnd };
  Read read(RawPacket& packet);
  // A classic pcap file read elsewhere up to file offset `offset` (PcapPieces): the next
  // read() reads the record there, numbered `index`. False when the file cannot seek.
  bool resume_at(std::uint64_t offset, std::uint64_t index);
  // Any thread (also a signal handler's pipe reader): makes a live next() return false.
  void break_loop() noexcept;

  // A file's BPF filter, which read() runs and whoever reads the file otherwise (its
  // mapping) runs too; null without one, and for a live capture (the kernel runs it).
  const BpfFilter* filter() const noexcept;

  // Classic pcap records longer than the file's snapshot length, which libpcap cuts to it
  // (tshark reads them whole): how many so far, for a notice.
  std::uint64_t records_cut_to_snaplen() const noexcept { return cut_to_snaplen_; }

  // libpcap's handle.
  void* handle() noexcept { return pcap_; }

 private:
  PcapReader();
  struct State;  // the BPF program, the file's timestamp precision and format
  std::unique_ptr<State> state_;
  void* pcap_ = nullptr;  // pcap_t*
  std::string name_;
  bool live_ = false;
  std::uint64_t index_ = 0;
  std::uint64_t cut_to_snaplen_ = 0;
  off_t record_end_ = -1;  // where the classic record read last ends in the file (-1: none)
  // The next record starts (or the file ends) at `next`: past record_end_, that record was cut.
  void note_record_end(off_t next) noexcept;
};

}  // namespace gpufilter
