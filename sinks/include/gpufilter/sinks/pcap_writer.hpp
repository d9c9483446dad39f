// PcapWriter: the --pcap-out file. Selected packets are written as a classic pcap file
// (pcap_dump) with the reader's link type, snaplen and timestamp precision: what tshark
// and Wireshark read. An output, so it lives with the other outputs; its errors stay
// SourceError (name() the file, error_number() the errno), which the capture run turns
// into "FILE: write error: REASON".
#pragma once

#include <string>

#include "gpufilter/core/errors.hpp"
#include "gpufilter/core/packet.hpp"

namespace gpufilter {

// `path` "-" is standard output. Throws SourceError.
class PcapWriter {
 public:
  PcapWriter(const std::string& path, int link_type, int snaplen, bool nanosecond);
  ~PcapWriter();
  PcapWriter(const PcapWriter&) = delete;
  PcapWriter& operator=(const PcapWriter&) = delete;
  void write(const RawPacket& packet);
  void flush();  // throws SourceError on a write error

 private:
  void* pcap_ = nullptr;    // pcap_t* (dead)
  void* dumper_ = nullptr;  // pcap_dumper_t*
  std::string path_;
};

}  // namespace gpufilter
