// pcap_fuzz: captures as gpufilter --pcap reads them. The input is a capture file
// (classic pcap or pcapng, any byte order); it is read by PcapReader from a memfd (through
// its /proc/self/fd path, as a file named on the command line is), every packet goes
// through the packet decoder, the TCP ones through a TcpReassembler as with --stream, and
// the packets read are written back with PcapWriter (--pcap-out) and read again.
//
// PcapError (a truncated or corrupt capture), SourceError (not a capture, a link type
// libpcap cannot write) are the expected failures. Checked besides crashes, sanitizer
// reports, leaks and hangs: packet indexes count up from 1; caplen is the data's size; the
// decoded payload lies within the frame; the reassembler hands on no more bytes than the
// segments carried; the capture written back holds the same packets (each one's bytes,
// or the first snaplen of them). And the mapped reading of gpufilter's parallel path
// (PcapPieces) gives libpcap's packets, each numbered as libpcap numbers it, up to where it
// hands the file to libpcap, which then reads on with the rest (PcapReader::resume_at); its
// walks of a part give the same records.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gpufilter/core/errors.hpp"
#include "gpufilter/sources/packet.hpp"
#include "gpufilter/sinks/pcap_writer.hpp"
#include "gpufilter/sources/pcap_pieces.hpp"
#include "gpufilter/sources/pcap_reader.hpp"
#include "gpufilter/sources/tcp_reassembler.hpp"

namespace {

struct Memfd {
  int fd = -1;
  std::string path;
};
Memfd g_in, g_out;

Memfd make_memfd(const char* name) {
  Memfd m;
  m.fd = ::memfd_create(name, MFD_CLOEXEC);
  if (m.fd < 0) std::abort();
  m.path = "/proc/self/fd/" + std::to_string(m.fd);
  return m;
}

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "pcap_fuzz: %s\n", what.c_str());
  __builtin_trap();
}

struct Packet {
  std::vector<std::uint8_t> data;
  std::uint32_t len;
};

// Reads every packet of `path` (until the end or a PcapError), decoding each one.
std::vector<Packet> read_all(const std::string& path, int& link_type, int& snaplen, bool& nanosecond, bool& clean) {
  std::vector<Packet> packets;
  clean = false;
  std::unique_ptr<gpufilter::PcapReader> reader = gpufilter::PcapReader::open_file(path);
  link_type = reader->link_type();
  snaplen = reader->snaplen();
  nanosecond = reader->nanosecond();
  std::uint64_t offered = 0, delivered = 0;
  gpufilter::TcpReassembler reassembler(
      gpufilter::ReassemblyConfig{.max_pending_bytes = 4096, .max_flows = 8, .idle_timeout_seconds = 60},
      [&](std::uint64_t, int, std::uint64_t, std::span<const std::uint8_t> bytes) { delivered += bytes.size(); },
      [](std::uint64_t) {});
  gpufilter::RawPacket raw;
  try {
    while (reader->next(raw)) {
      if (raw.index != packets.size() + 1) fail("packet index " + std::to_string(raw.index) + " out of order");
      if (raw.caplen != raw.data.size()) fail("caplen is not the size of the data");
      const gpufilter::PacketInfo info = gpufilter::decode_packet(link_type, raw.data);
      if (info.payload_offset > raw.data.size() || info.payload_length > raw.data.size() - info.payload_offset)
        fail("the decoded payload lies outside the frame");
      (void)gpufilter::address_text(info, true);
      (void)gpufilter::address_text(info, false);
      if (info.transport == gpufilter::PacketInfo::Transport::kTcp) {
        offered += info.payload_length;
        if (reassembler.segment(info, raw.data, raw.seconds) == 0) fail("a TCP segment got flow id 0");
      }
      packets.push_back({std::vector<std::uint8_t>(raw.data.begin(), raw.data.end()), raw.len});
      if (packets.size() >= 100000) break;
    }
    clean = true;
  } catch (const gpufilter::PcapError&) {
  }
  reassembler.finish();
  if (delivered > offered) fail("the reassembler handed on more bytes than the segments carried");
  return packets;
}

// The mapped reading against libpcap's `packets` (all of them when `clean`).
void check_mapped(const std::vector<Packet>& packets, int snaplen, bool nanosecond, bool clean) {
  const std::unique_ptr<gpufilter::PcapPieces> pieces = gpufilter::PcapPieces::map(g_in.fd, snaplen, nanosecond);
  if (!pieces) return;  // pcapng, or not mappable: libpcap reads it
  gpufilter::PcapPieces::Cursor cursor(*pieces);
  gpufilter::RawPacket raw;
  std::vector<std::size_t> starts;  // each record's offset
  std::size_t n = 0;
  gpufilter::PcapPieces::Cursor::Read got;
  for (std::size_t at = cursor.offset(); (got = cursor.next(raw)) == gpufilter::PcapPieces::Cursor::Read::kPacket;
       at = cursor.offset(), ++n) {
    if (n >= packets.size()) {
      if (n >= 100000) return;  // read_all stops there
      fail("the mapping reads packet " + std::to_string(n + 1) + ", libpcap read " + std::to_string(packets.size()) + (clean ? " to the end" : " and failed"));
    }
    if (raw.index != n + 1 || raw.len != packets[n].len ||
        !std::equal(raw.data.begin(), raw.data.end(), packets[n].data.begin(), packets[n].data.end()))
      fail("mapped packet " + std::to_string(n + 1) + " differs from libpcap's");
    starts.push_back(at);
  }
  if (got == gpufilter::PcapPieces::Cursor::Read::kEnd && clean && n != packets.size())
    fail("the mapping ends before libpcap does");
  if (got == gpufilter::PcapPieces::Cursor::Read::kLeft) {
    // libpcap reads on from the record the mapping left: the same packets as from the start.
    std::unique_ptr<gpufilter::PcapReader> reader = gpufilter::PcapReader::open_file(g_in.path);
    if (!reader->resume_at(cursor.offset(), cursor.index() + 1)) fail("resume_at failed on a file");
    try {
      for (std::size_t k = n; k < packets.size() && reader->next(raw); ++k)
        if (raw.index != k + 1 || !std::equal(raw.data.begin(), raw.data.end(), packets[k].data.begin(), packets[k].data.end()))
          fail("libpcap resumed at packet " + std::to_string(k + 1) + " reads another one");
    } catch (const gpufilter::PcapError&) {
    }
  }
  // A walk from a record start gives the records from there, whatever the part.
  if (starts.empty()) return;
  const std::size_t first = starts[starts.size() / 2];
  const gpufilter::PcapPieces::Walk walk = pieces->walk(first, pieces->size(), 4096);
  std::size_t walked = 0;
  for (const gpufilter::PcapPieces::Piece& piece : walk.pieces) walked += piece.packets;
  if (walked != starts.size() - starts.size() / 2 && got != gpufilter::PcapPieces::Cursor::Read::kLeft)
    fail("a walk from a record start reads " + std::to_string(walked) + " records");
  (void)pieces->find_start(first > 0 ? first - 1 : 0, pieces->size());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_in = make_memfd("pcap_fuzz_in");
  g_out = make_memfd("pcap_fuzz_out");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (::ftruncate(g_in.fd, 0) != 0 || ::pwrite(g_in.fd, data, size, 0) != static_cast<ssize_t>(size)) std::abort();
  int link_type = 0, snaplen = 0;
  bool nanosecond = false, clean = false;
  std::vector<Packet> packets;
  try {
    packets = read_all(g_in.path, link_type, snaplen, nanosecond, clean);
  } catch (const gpufilter::SourceError&) {
    return 0;  // not a capture at all
  } catch (const gpufilter::PcapError&) {
    return 0;  // a header cut short
  }
  check_mapped(packets, snaplen, nanosecond, clean);

  // --pcap-out: written back, then read again.
  try {
    {
      gpufilter::PcapWriter writer(g_out.path, link_type, snaplen, nanosecond);
      for (const Packet& p : packets) {
        gpufilter::RawPacket raw;
        raw.index = 1;
        raw.caplen = static_cast<std::uint32_t>(p.data.size());
        raw.len = p.len;
        raw.data = p.data;
        writer.write(raw);
      }
      writer.flush();
    }
  } catch (const gpufilter::SourceError&) {
    return 0;  // a link type libpcap does not write
  }
  int link_again = 0, snap_again = 0;
  bool nano_again = false, clean_again = false;
  std::vector<Packet> again;
  try {
    again = read_all(g_out.path, link_again, snap_again, nano_again, clean_again);
  } catch (const gpufilter::Error& e) {
    fail(std::string("the capture written back cannot be opened: ") + e.what());
  }
  if (link_again != link_type) fail("the link type changed on the way back");
  if (again.size() > packets.size() || (clean_again && again.size() != packets.size()))
    fail("written " + std::to_string(packets.size()) + " packets, read back " + std::to_string(again.size()));
  for (std::size_t i = 0; i < again.size(); ++i) {
    const std::vector<std::uint8_t>& a = packets[i].data;
    const std::vector<std::uint8_t>& b = again[i].data;
    if (b.size() > a.size() || !std::equal(b.begin(), b.end(), a.begin()))
      fail("packet " + std::to_string(i + 1) + " changed on the way back");
  }
  return 0;
}
