// decode_packet against tshark: every packet of every capture in ../shared/corpus/pcap is
// decoded and compared field by field (IP version and addresses, ports, TCP sequence and
// flags, the TCP/UDP payload's length and bytes) with what tshark dissects. Frames built
// here cover the link types and headers the corpus lacks (Linux cooked v1/v2, raw IP,
// BSD loopback in both byte orders, VLAN stacks, IPv6 extension headers, Ethernet
// padding); they are written to capture files and checked against tshark as well. Then
// what tshark cannot judge: IPv4/IPv6 fragments, every truncation of a frame, and random
// and mutated bytes for every link type (no read past the frame, payload within it).
#include "gpufilter/sources/packet.hpp"

#include <gtest/gtest.h>
#include <pcap/pcap.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "testutil/testutil.hpp"

namespace gpufilter {
namespace {

using test::TempDir;

using gpufilter::test::command_output;
using gpufilter::test::shell_quote;

using Bytes = std::vector<std::uint8_t>;

const std::vector<std::string> kCaptures = {"chrome-34-google.trace", "dns.cap",         "http.cap",
                                            "http_redirects.pcapng",  "smtp.pcap",       "syslog-single-udp.trace",
                                            "syslog_udp.pcap",        "telnet-raw.pcap", "v6-http.cap"};

// ---------------------------------------------------------------------------------------
// tshark, the oracle


const std::vector<std::string> kFields = {"frame.number", "ip.src",      "ipv6.src",    "tcp.srcport", "udp.srcport",
                                          "tcp.len",      "udp.length",  "tcp.seq_raw", "tcp.flags",   "ip.dst",
                                          "ipv6.dst",     "tcp.dstport", "udp.dstport", "ip.proto",    "ipv6.nxt",
                                          "tcp.payload",  "udp.payload"};

// One row of tshark fields per frame, by field name. Reassembly is off so that every
// segment and datagram carries its own payload field.
std::vector<std::map<std::string, std::string>> tshark_rows(const std::string& path) {
  std::string command = "tshark -r " + shell_quote(path) +
                        " -o tcp.desegment_tcp_streams:FALSE -o ip.defragment:FALSE -o ipv6.defragment:FALSE"
                        " -o udp.try_heuristic_first:FALSE -T fields -E occurrence=a -E separator=/t";
  for (const std::string& field : kFields) command += " -e " + field;
  std::istringstream lines(command_output(command));
  std::vector<std::map<std::string, std::string>> rows;
  std::string line;
  while (std::getline(lines, line)) {
    std::map<std::string, std::string> row;
    std::size_t start = 0;
    for (const std::string& field : kFields) {
      const std::size_t tab = line.find('\t', start);
      row[field] = line.substr(start, tab == std::string::npos ? std::string::npos : tab - start);
      start = tab == std::string::npos ? line.size() : tab + 1;
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

// The first of a field's comma-separated occurrences (an ICMP error shows two IP headers).
std::string first(const std::string& value) { return value.substr(0, value.find(',')); }

std::string hex(std::span<const std::uint8_t> bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (std::uint8_t b : bytes) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

struct Frame {
  int link_type;
  Bytes bytes;
  std::uint32_t wire_length;
};

// Every frame of a capture, through libpcap directly (PcapReader has its own tests).
std::vector<Frame> read_frames(const std::string& path) {
  char errbuf[PCAP_ERRBUF_SIZE];
  pcap_t* p = pcap_open_offline(path.c_str(), errbuf);
  if (p == nullptr) throw std::runtime_error(path + ": " + errbuf);
  std::vector<Frame> frames;
  pcap_pkthdr* header;
  const u_char* data;
  while (pcap_next_ex(p, &header, &data) == 1) {
    frames.push_back({pcap_datalink(p), Bytes(data, data + header->caplen), header->len});
  }
  pcap_close(p);
  return frames;
}

struct Tally {
  std::size_t frames = 0, tcp = 0, udp = 0, other = 0, payload_bytes = 0;
};

// Decodes every frame of `path` and compares it with tshark's dissection.
Tally compare_with_tshark(const std::string& path) {
  const std::vector<Frame> frames = read_frames(path);
  const auto rows = tshark_rows(path);
  Tally tally;
  EXPECT_EQ(frames.size(), rows.size()) << path;
  for (std::size_t i = 0; i < frames.size() && i < rows.size(); ++i) {
    const Frame& frame = frames[i];
    auto row = rows[i];
    SCOPED_TRACE(path + " frame " + row["frame.number"]);
    EXPECT_EQ(row["frame.number"], std::to_string(i + 1));
    const PacketInfo info = decode_packet(frame.link_type, frame.bytes);
    EXPECT_LE(info.payload_offset + info.payload_length, frame.bytes.size());
    if (info.payload_offset + info.payload_length > frame.bytes.size()) continue;
    EXPECT_FALSE(info.truncated);
    const std::span<const std::uint8_t> payload(frame.bytes.data() + info.payload_offset, info.payload_length);
    bool wrapped = false;  // an ICMP error quoting a packet: tshark's port fields are the quoted ones
    if (!row["ip.src"].empty()) {
      EXPECT_EQ(info.ip_version, 4);
      EXPECT_EQ(address_text(info, true), first(row["ip.src"]));
      EXPECT_EQ(address_text(info, false), first(row["ip.dst"]));
      EXPECT_EQ(std::to_string(info.ip_protocol), first(row["ip.proto"]));
      wrapped = row["ip.src"].find(',') != std::string::npos;
    } else if (!row["ipv6.src"].empty()) {
      EXPECT_EQ(info.ip_version, 6);
      EXPECT_EQ(address_text(info, true), first(row["ipv6.src"]));
      EXPECT_EQ(address_text(info, false), first(row["ipv6.dst"]));
      wrapped = row["ipv6.src"].find(',') != std::string::npos;
    } else {
      EXPECT_EQ(info.ip_version, 0);
    }
    if (wrapped) {
      EXPECT_EQ(info.transport, PacketInfo::Transport::kOther);
      EXPECT_EQ(info.payload_length, frame.bytes.size());
      ++tally.other;
    } else if (!row["tcp.srcport"].empty()) {
      EXPECT_EQ(info.transport, PacketInfo::Transport::kTcp);
      EXPECT_EQ(std::to_string(info.sport), row["tcp.srcport"]);
      EXPECT_EQ(std::to_string(info.dport), row["tcp.dstport"]);
      EXPECT_EQ(std::to_string(info.tcp_seq), row["tcp.seq_raw"]);
      EXPECT_EQ(info.tcp_flags, std::stoul(row["tcp.flags"], nullptr, 16) & 0xff);
      EXPECT_EQ(std::to_string(info.payload_length), row["tcp.len"]);
      EXPECT_EQ(hex(payload), row["tcp.payload"]);
      ++tally.tcp;
      tally.payload_bytes += info.payload_length;
    } else if (!row["udp.srcport"].empty()) {
      EXPECT_EQ(info.transport, PacketInfo::Transport::kUdp);
      EXPECT_EQ(std::to_string(info.sport), row["udp.srcport"]);
      EXPECT_EQ(std::to_string(info.dport), row["udp.dstport"]);
      EXPECT_EQ(info.payload_length + 8, std::stoul(row["udp.length"]));
      EXPECT_EQ(hex(payload), row["udp.payload"]);
      ++tally.udp;
      tally.payload_bytes += info.payload_length;
    } else {
      EXPECT_NE(info.transport, PacketInfo::Transport::kTcp);
      EXPECT_NE(info.transport, PacketInfo::Transport::kUdp);
      EXPECT_EQ(info.payload_offset, 0u);
      EXPECT_EQ(info.payload_length, frame.bytes.size());
      ++tally.other;
    }
    ++tally.frames;
  }
  return tally;
}

TEST(PacketCorpus, EveryPacketAgreesWithTshark) {
  GPUFILTER_REQUIRE_TSHARK();
  std::size_t total = 0;
  for (const std::string& name : kCaptures) {
    const std::string path = test::corpus_path("pcap/" + name);
    const Tally tally = compare_with_tshark(path);
    std::printf("%-24s %4zu frames agree with tshark: %3zu TCP, %3zu UDP, %3zu other; %6zu payload bytes\n",
                name.c_str(), tally.frames, tally.tcp, tally.udp, tally.other, tally.payload_bytes);
    EXPECT_GT(tally.frames, 0u) << name;
    total += tally.frames;
  }
  EXPECT_EQ(total, 42u + 38 + 43 + 271 + 60 + 1 + 4 + 272 + 55);  // the corpus README's counts
}

// ---------------------------------------------------------------------------------------
// Frames built by hand

void put16(Bytes& out, std::uint32_t v) {
  out.push_back(static_cast<std::uint8_t>(v >> 8));
  out.push_back(static_cast<std::uint8_t>(v));
}
void put32(Bytes& out, std::uint32_t v) {
  put16(out, v >> 16);
  put16(out, v & 0xffff);
}
void put_le32(Bytes& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
Bytes operator+(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
Bytes text(const std::string& s) { return Bytes(s.begin(), s.end()); }

Bytes tcp(std::uint16_t sport, std::uint16_t dport, std::uint32_t seq, std::uint8_t flags, const Bytes& payload,
          std::size_t option_bytes = 0) {
  Bytes out;
  put16(out, sport);
  put16(out, dport);
  put32(out, seq);
  put32(out, 0x01020304);  // ack
  out.push_back(static_cast<std::uint8_t>((5 + option_bytes / 4) << 4));
  out.push_back(flags);
  put16(out, 65535);
  put16(out, 0);  // checksum (tshark does not check it by default)
  put16(out, 0);
  for (std::size_t i = 0; i < option_bytes; ++i) out.push_back(1);  // NOP options
  return out + payload;
}

Bytes udp(std::uint16_t sport, std::uint16_t dport, const Bytes& payload) {
  Bytes out;
  put16(out, sport);
  put16(out, dport);
  put16(out, static_cast<std::uint32_t>(8 + payload.size()));
  put16(out, 0);
  return out + payload;
}

const std::array<std::uint8_t, 4> kV4a = {192, 0, 2, 1}, kV4b = {198, 51, 100, 7};
const std::array<std::uint8_t, 16> kV6a = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
const std::array<std::uint8_t, 16> kV6b = {0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0xab, 0xcd, 2};

Bytes ipv4(std::uint8_t protocol, const Bytes& payload, std::uint16_t fragment = 0, std::size_t option_bytes = 0) {
  Bytes out;
  const std::size_t header = 20 + option_bytes;
  out.push_back(static_cast<std::uint8_t>(0x40 | header / 4));
  out.push_back(0);
  put16(out, static_cast<std::uint32_t>(header + payload.size()));
  put16(out, 0x1234);
  put16(out, fragment);
  out.push_back(64);
  out.push_back(protocol);
  put16(out, 0);
  out.insert(out.end(), kV4a.begin(), kV4a.end());
  out.insert(out.end(), kV4b.begin(), kV4b.end());
  for (std::size_t i = 0; i < option_bytes; ++i) out.push_back(1);  // NOP options
  std::uint32_t sum = 0;
  for (std::size_t i = 0; i < header; i += 2) sum += static_cast<std::uint32_t>(out[i] << 8 | out[i + 1]);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  out[10] = static_cast<std::uint8_t>(~sum >> 8);
  out[11] = static_cast<std::uint8_t>(~sum);
  return out + payload;
}

// `chain` is the extension headers and the transport header, `next` the first's number.
Bytes ipv6(std::uint8_t next, const Bytes& chain) {
  Bytes out = {0x60, 0, 0, 0};
  put16(out, static_cast<std::uint32_t>(chain.size()));
  out.push_back(next);
  out.push_back(64);
  out.insert(out.end(), kV6a.begin(), kV6a.end());
  out.insert(out.end(), kV6b.begin(), kV6b.end());
  return out + chain;
}

// An options header (hop-by-hop 0, destination 60) of `units` * 8 bytes, PadN-filled.
Bytes options_header(std::uint8_t next, std::size_t units) {
  Bytes out(units * 8, 0);
  out[0] = next;
  out[1] = static_cast<std::uint8_t>(units - 1);
  out[2] = 1;  // PadN over the rest
  out[3] = static_cast<std::uint8_t>(units * 8 - 4);
  return out;
}
Bytes routing_header(std::uint8_t next) { return {next, 0, 0, 0, 0, 0, 0, 0}; }  // type 0, no segments left
Bytes fragment_header(std::uint8_t next, std::uint16_t offset_units, bool more) {
  Bytes out = {next, 0};
  put16(out, static_cast<std::uint32_t>(offset_units << 3 | (more ? 1 : 0)));
  put32(out, 0xcafe);
  return out;
}
Bytes ah_header(std::uint8_t next) {  // 12-byte ICV: 24 bytes, length field 4
  Bytes out = {next, 4, 0, 0};
  put32(out, 0x100);
  put32(out, 1);
  for (int i = 0; i < 12; ++i) out.push_back(0xaa);
  return out;
}

Bytes ethernet(std::uint16_t type, const Bytes& payload, const std::vector<std::uint16_t>& tags = {}) {
  Bytes out = {0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb};
  for (std::size_t i = 0; i < tags.size(); ++i) {
    put16(out, tags[i]);
    put16(out, 100 + static_cast<std::uint32_t>(i));  // the TCI
  }
  put16(out, type);
  return out + payload;
}

Bytes sll(std::uint16_t protocol, const Bytes& payload) {
  Bytes out;
  put16(out, 0);  // to us
  put16(out, 1);  // ARPHRD_ETHER
  put16(out, 6);
  for (int b : {0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0, 0}) out.push_back(static_cast<std::uint8_t>(b));
  put16(out, protocol);
  return out + payload;
}

Bytes sll2(std::uint16_t protocol, const Bytes& payload) {
  Bytes out;
  put16(out, protocol);
  put16(out, 0);
  put32(out, 2);     // interface index
  put16(out, 1);     // ARPHRD_ETHER
  out.push_back(4);  // outgoing
  out.push_back(6);
  for (int b : {0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0, 0}) out.push_back(static_cast<std::uint8_t>(b));
  return out + payload;
}

Bytes loopback(std::uint32_t family, bool big_endian, const Bytes& payload) {
  Bytes out;
  if (big_endian) {
    put32(out, family);
  } else {
    put_le32(out, family);
  }
  return out + payload;
}

// A classic pcap file (microseconds, little-endian) of `frames` with LINKTYPE `link_type`.
void write_capture(const std::string& path, std::uint32_t link_type, const std::vector<Bytes>& frames) {
  Bytes out;
  put_le32(out, 0xa1b2c3d4);
  out.push_back(2);
  out.push_back(0);
  out.push_back(4);
  out.push_back(0);
  put_le32(out, 0);
  put_le32(out, 0);
  put_le32(out, 65535);
  put_le32(out, link_type);
  std::uint32_t second = 1700000000;
  for (const Bytes& frame : frames) {
    put_le32(out, second++);
    put_le32(out, 0);
    put_le32(out, static_cast<std::uint32_t>(frame.size()));
    put_le32(out, static_cast<std::uint32_t>(frame.size()));
    out = out + frame;
  }
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(out.data()), out.size());
}

// A directory of its own for the capture files a test writes, removed with it.

// The IP packets every link type wraps: TCP and UDP over IPv4 and IPv6, with options.
struct Sample {
  Bytes packet;
  bool v6;
  Bytes payload;  // the expected transport payload
};

std::vector<Sample> samples() {
  const Bytes hello = text("GET /index.html HTTP/1.1\r\n\r\n");
  const Bytes log = text("<34>Oct 11 22:14:15 host su: 'su root' failed");
  return {
      {ipv4(6, tcp(40000, 80, 0xfffffff0u, 0x18, hello)), false, hello},
      {ipv4(6, tcp(40000, 80, 7, 0x18, hello, 12), 0, 8), false, hello},  // IP and TCP options
      {ipv4(17, udp(514, 514, log)), false, log},
      {ipv4(6, tcp(443, 51000, 99, 0x11, {})), false, {}},
      {ipv6(6, tcp(40001, 8080, 123456, 0x18, hello)), true, hello},
      {ipv6(17, udp(5353, 5353, log)), true, log},
      // Extension headers: hop-by-hop, routing, destination options, an atomic fragment
      // (offset 0, no more fragments), AH, then the transport.
      {ipv6(0, options_header(43, 1) + routing_header(60) + options_header(44, 2) + fragment_header(51, 0, false) +
                   ah_header(6) + tcp(40002, 25, 42, 0x18, hello)),
       true, hello},
      {ipv6(60, options_header(17, 1) + udp(53, 53, log)), true, log},
  };
}

void expect_sample(const PacketInfo& info, const Bytes& frame, const Sample& sample) {
  EXPECT_EQ(info.ip_version, sample.v6 ? 6 : 4);
  EXPECT_EQ(address_text(info, true), sample.v6 ? "2001:db8::1" : "192.0.2.1");
  EXPECT_EQ(address_text(info, false), sample.v6 ? "2001:db8:1::ab:cd02" : "198.51.100.7");
  EXPECT_TRUE(info.transport == PacketInfo::Transport::kTcp || info.transport == PacketInfo::Transport::kUdp);
  ASSERT_LE(info.payload_offset + info.payload_length, frame.size());
  EXPECT_EQ(Bytes(frame.begin() + static_cast<std::ptrdiff_t>(info.payload_offset),
                  frame.begin() + static_cast<std::ptrdiff_t>(info.payload_offset + info.payload_length)),
            sample.payload);
  EXPECT_FALSE(info.truncated);
}

struct LinkCase {
  const char* name;
  int dlt;       // what decode_packet is given (-1: 228 or 229 by the IP version)
  int linktype;  // the capture file's LINKTYPE for the tshark check (-1: not written again)
  std::function<Bytes(const Sample&)> wrap;
};

std::vector<LinkCase> link_cases() {
  const auto ether_type = [](const Sample& s) -> std::uint16_t { return s.v6 ? 0x86dd : 0x0800; };
  return {
      {"ethernet", 1, 1, [=](const Sample& s) { return ethernet(ether_type(s), s.packet); }},
      {"802.1Q", 1, 1, [=](const Sample& s) { return ethernet(ether_type(s), s.packet, {0x8100}); }},
      {"802.1ad+802.1Q", 1, 1,
       [=](const Sample& s) {
         return ethernet(ether_type(s), s.packet, {0x88a8, 0x8100});
       }},
      {"three tags", 1, 1,
       [=](const Sample& s) {
         return ethernet(ether_type(s), s.packet, {0x88a8, 0x8100, 0x8100});
       }},
      {"linux sll", 113, 113, [=](const Sample& s) { return sll(ether_type(s), s.packet); }},
      {"linux sll2", 276, 276, [=](const Sample& s) { return sll2(ether_type(s), s.packet); }},
      {"raw (12)", 12, 101, [](const Sample& s) { return s.packet; }},
      {"raw (14)", 14, -1, [](const Sample& s) { return s.packet; }},
      {"LINKTYPE_RAW (101)", 101, -1, [](const Sample& s) { return s.packet; }},
      {"ipv4/ipv6 (228/229)", -1, -1, [](const Sample& s) { return s.packet; }},
      {"null, host order", 0, 0, [](const Sample& s) { return loopback(s.v6 ? 24 : 2, false, s.packet); }},
      {"null, network order", 0, 0, [](const Sample& s) { return loopback(s.v6 ? 28 : 2, true, s.packet); }},
      {"null, macOS AF_INET6", 0, 0, [](const Sample& s) { return loopback(s.v6 ? 30 : 2, false, s.packet); }},
      {"loop", 108, 108, [](const Sample& s) { return loopback(s.v6 ? 24 : 2, true, s.packet); }},
  };
}

TEST(PacketLinkTypes, HandBuiltFramesDecode) {
  for (const LinkCase& link : link_cases()) {
    for (const Sample& sample : samples()) {
      SCOPED_TRACE(std::string(link.name) + (sample.v6 ? " IPv6" : " IPv4"));
      const Bytes frame = link.wrap(sample);
      const int dlt = link.dlt >= 0 ? link.dlt : (sample.v6 ? 229 : 228);
      EXPECT_TRUE(link_type_supported(dlt));
      expect_sample(decode_packet(dlt, frame), frame, sample);
    }
  }
}

// The same frames in capture files, checked against tshark: the construction itself is
// right, not only consistent with the decoder. tshark's null dissector reads both orders.
TEST(PacketLinkTypes, HandBuiltFramesAgreeWithTshark) {
  GPUFILTER_REQUIRE_TSHARK();
  TempDir dir;
  std::map<std::uint32_t, std::vector<Bytes>> files;
  for (const LinkCase& link : link_cases()) {
    if (link.linktype < 0) continue;
    for (const Sample& sample : samples())
      files[static_cast<std::uint32_t>(link.linktype)].push_back(link.wrap(sample));
  }
  for (const Sample& sample : samples()) files[sample.v6 ? 229 : 228].push_back(sample.packet);
  std::size_t frames = 0;
  for (const auto& [linktype, list] : files) {
    const std::string path = dir.file("link" + std::to_string(linktype) + ".pcap");
    write_capture(path, linktype, list);
    const Tally tally = compare_with_tshark(path);
    EXPECT_EQ(tally.frames, list.size()) << "link type " << linktype;
    EXPECT_EQ(tally.tcp + tally.udp, list.size()) << "link type " << linktype;
    frames += tally.frames;
  }
  std::printf("hand-built frames agreeing with tshark: %zu in %zu link types\n", frames, files.size());
}

TEST(PacketLinkTypes, EthernetPaddingIsNotPayload) {
  GPUFILTER_REQUIRE_TSHARK();
  // A 10-byte UDP datagram in a frame padded to Ethernet's 60-byte minimum.
  Bytes frame = ethernet(0x0800, ipv4(17, udp(1000, 2000, text("0123456789"))));
  ASSERT_LT(frame.size(), 60u);
  frame.resize(60, 0xee);
  const PacketInfo info = decode_packet(1, frame);
  EXPECT_EQ(info.transport, PacketInfo::Transport::kUdp);
  EXPECT_EQ(info.payload_length, 10u);
  EXPECT_EQ(frame[info.payload_offset], '0');
  // A TCP segment too: the IP total length bounds it.
  Bytes segment = ethernet(0x0800, ipv4(6, tcp(1, 2, 3, 0x18, text("ab"))));
  segment.resize(60, 0xee);
  EXPECT_EQ(decode_packet(1, segment).payload_length, 2u);
  // And tshark agrees.
  TempDir dir;
  const std::string path = dir.file("padding.pcap");
  write_capture(path, 1, {frame, segment});
  EXPECT_EQ(compare_with_tshark(path).frames, 2u);
}

TEST(PacketLinkTypes, UdpLengthBoundsThePayload) {
  // The UDP length says 8 + 4 although the IP packet carries 10 bytes after the header.
  Bytes datagram = udp(7, 9, text("abcdefghij"));
  datagram[5] = 12;
  const Bytes frame = ethernet(0x0800, ipv4(17, datagram));
  const PacketInfo info = decode_packet(1, frame);
  EXPECT_EQ(info.transport, PacketInfo::Transport::kUdp);
  EXPECT_EQ(info.payload_length, 4u);
}

TEST(PacketLinkTypes, NonIpAndUnknownLinkTypesAreWholeFrames) {
  const Bytes arp = ethernet(0x0806, Bytes(28, 1));
  PacketInfo info = decode_packet(1, arp);
  EXPECT_EQ(info.ip_version, 0);
  EXPECT_EQ(info.transport, PacketInfo::Transport::kNone);
  EXPECT_EQ(info.payload_offset, 0u);
  EXPECT_EQ(info.payload_length, arp.size());
  const Bytes frame = ethernet(0x0800, ipv4(6, tcp(1, 2, 3, 0x18, text("x"))));
  info = decode_packet(147, frame);  // DLT_USER0: not decoded
  EXPECT_EQ(info.transport, PacketInfo::Transport::kNone);
  EXPECT_EQ(info.payload_length, frame.size());
  EXPECT_FALSE(link_type_supported(147));
  EXPECT_FALSE(link_type_supported(9999));
  // ICMP is IP but not TCP/UDP: searched whole.
  const Bytes ping = ethernet(0x0800, ipv4(1, Bytes{8, 0, 0, 0, 0, 1, 0, 1, 'p', 'i', 'n', 'g'}));
  info = decode_packet(1, ping);
  EXPECT_EQ(info.ip_version, 4);
  EXPECT_EQ(info.ip_protocol, 1);
  EXPECT_EQ(info.transport, PacketInfo::Transport::kOther);
  EXPECT_EQ(info.payload_length, ping.size());
  // A null header with an unknown family.
  info = decode_packet(0, loopback(7, false, frame));
  EXPECT_EQ(info.ip_version, 0);
  EXPECT_EQ(info.payload_length, frame.size() + 4);
}

TEST(PacketLinkTypes, Names) {
  EXPECT_EQ(link_type_name(1), "EN10MB");
  EXPECT_EQ(link_type_name(113), "LINUX_SLL");
  EXPECT_EQ(link_type_name(276), "LINUX_SLL2");
  EXPECT_EQ(link_type_name(0), "NULL");
  EXPECT_EQ(link_type_name(12), "RAW");
  EXPECT_EQ(link_type_name(9999), "9999");  // written after "link type"
  for (int dlt : {0, 1, 12, 14, 101, 108, 113, 228, 229, 276}) EXPECT_TRUE(link_type_supported(dlt)) << dlt;
}

TEST(PacketAddresses, TextFormsFollowRfc5952) {
  PacketInfo info;
  info.ip_version = 6;
  info.src = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  info.dst = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x11, 0x25, 0xff, 0xfe, 0x82, 0x95, 0xb5};
  EXPECT_EQ(address_text(info, true), "2001:db8::1");
  EXPECT_EQ(address_text(info, false), "fe80::211:25ff:fe82:95b5");
  info.dst = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1};
  EXPECT_EQ(address_text(info, false), "::ffff:192.0.2.1");
  info.ip_version = 4;
  info.src = {10, 0, 0, 255};
  EXPECT_EQ(address_text(info, true), "10.0.0.255");
  info.ip_version = 0;
  EXPECT_EQ(address_text(info, true), "");
}

// ---------------------------------------------------------------------------------------
// Fragments

TEST(PacketFragments, Ipv4LaterFragmentHasNoTransportHeader) {
  const Bytes data = text("...continuation of a fragmented datagram...");
  // Offset 185 * 8 bytes, more fragments: the bytes are data, not a UDP header.
  const Bytes later = ethernet(0x0800, ipv4(17, data, 185));
  PacketInfo info = decode_packet(1, later);
  EXPECT_EQ(info.ip_version, 4);
  EXPECT_EQ(info.ip_protocol, 17);
  EXPECT_EQ(info.transport, PacketInfo::Transport::kOther);
  EXPECT_EQ(info.sport, 0);
  EXPECT_EQ(info.payload_offset, 14u + 20);
  EXPECT_EQ(info.payload_length, data.size());
  // The first fragment (offset 0, more fragments) carries the transport header.
  const Bytes first_part = ethernet(0x0800, ipv4(17, udp(53, 53, text("head")), 0x2000));
  info = decode_packet(1, first_part);
  EXPECT_EQ(info.transport, PacketInfo::Transport::kUdp);
  EXPECT_EQ(info.sport, 53);
  // The last fragment (offset set, no more fragments) is a later fragment too.
  info = decode_packet(12, ipv4(6, data, 0x0003));
  EXPECT_EQ(info.transport, PacketInfo::Transport::kOther);
  EXPECT_EQ(info.payload_offset, 20u);
  EXPECT_EQ(info.payload_length, data.size());
}

TEST(PacketFragments, Ipv6LaterFragmentHasNoTransportHeader) {
  const Bytes data = text("middle of a fragmented IPv6 datagram");
  const Bytes later = ipv6(0, options_header(44, 1) + fragment_header(6, 100, true) + data);
  PacketInfo info = decode_packet(229, later);
  EXPECT_EQ(info.ip_version, 6);
  EXPECT_EQ(info.ip_protocol, 6);
  EXPECT_EQ(info.transport, PacketInfo::Transport::kOther);
  EXPECT_EQ(info.payload_offset, 40u + 8 + 8);
  EXPECT_EQ(info.payload_length, data.size());
  const Bytes head = ipv6(44, fragment_header(6, 0, true) + tcp(5, 6, 7, 0x10, text("segment")));
  info = decode_packet(229, head);
  EXPECT_EQ(info.transport, PacketInfo::Transport::kTcp);
  EXPECT_EQ(info.payload_length, 7u);
  // ESP cannot be looked into; no next header (59) has nothing.
  info = decode_packet(229, ipv6(50, Bytes(40, 0x55)));
  EXPECT_EQ(info.transport, PacketInfo::Transport::kOther);
  EXPECT_EQ(info.ip_protocol, 50);
  info = decode_packet(229, ipv6(0, options_header(59, 1)));
  EXPECT_EQ(info.transport, PacketInfo::Transport::kOther);
  EXPECT_EQ(info.ip_protocol, 59);
}

// ---------------------------------------------------------------------------------------
// Truncation and garbage

// Every prefix of a frame, as a snaplen would cut it: inside the headers the payload is
// the whole frame and `truncated` is set; inside the payload, the payload is what is left.
TEST(PacketTruncation, EveryCutOfEveryFrame) {
  std::size_t cuts = 0;
  for (const LinkCase& link : link_cases()) {
    for (const Sample& sample : samples()) {
      const Bytes frame = link.wrap(sample);
      const int dlt = link.dlt >= 0 ? link.dlt : (sample.v6 ? 229 : 228);
      const PacketInfo full = decode_packet(dlt, frame);
      const std::size_t payload_start = full.payload_offset;
      for (std::size_t cut = 0; cut < frame.size(); ++cut) {
        SCOPED_TRACE(std::string(link.name) + " cut at " + std::to_string(cut));
        const Bytes prefix(frame.begin(), frame.begin() + static_cast<std::ptrdiff_t>(cut));
        const PacketInfo info = decode_packet(dlt, prefix);
        ASSERT_LE(info.payload_offset + info.payload_length, prefix.size());
        if (cut >= payload_start) {
          EXPECT_EQ(info.transport, full.transport);
          EXPECT_FALSE(info.truncated);
          EXPECT_EQ(info.payload_offset, payload_start);
          EXPECT_EQ(info.payload_length, cut - payload_start);
          EXPECT_EQ(info.sport, full.sport);
        } else {
          EXPECT_TRUE(info.truncated);
          EXPECT_EQ(info.transport, PacketInfo::Transport::kNone);
          EXPECT_EQ(info.payload_offset, 0u);
          EXPECT_EQ(info.payload_length, prefix.size());
        }
        ++cuts;
      }
    }
  }
  EXPECT_GT(cuts, 5000u);
}

TEST(PacketTruncation, CorpusFramesCutBySnaplen) {
  // Real frames cut to 54, 60 and 100 bytes: where the TCP header is whole the payload is
  // the captured rest of it; decoded fields stay those of the whole frame.
  std::size_t checked = 0;
  for (const Frame& frame : read_frames(test::corpus_path("pcap/http.cap"))) {
    const PacketInfo full = decode_packet(frame.link_type, frame.bytes);
    for (std::size_t snaplen : {54u, 60u, 100u}) {
      if (snaplen >= frame.bytes.size()) continue;
      const Bytes cut(frame.bytes.begin(), frame.bytes.begin() + static_cast<std::ptrdiff_t>(snaplen));
      const PacketInfo info = decode_packet(frame.link_type, cut);
      ASSERT_LE(info.payload_offset + info.payload_length, cut.size());
      if (full.transport == PacketInfo::Transport::kTcp && full.payload_offset <= snaplen) {
        EXPECT_EQ(info.transport, PacketInfo::Transport::kTcp);
        EXPECT_EQ(info.tcp_seq, full.tcp_seq);
        EXPECT_EQ(info.payload_offset, full.payload_offset);
        EXPECT_EQ(info.payload_length, snaplen - full.payload_offset);
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 20u);
}

TEST(PacketGarbage, RandomBytesNeverReadPastTheFrame) {
  std::mt19937 rng(20240607);
  const std::vector<int> dlts = {0, 1, 12, 14, 101, 108, 113, 228, 229, 276, 147, -1};
  std::size_t decoded_ip = 0;
  for (int round = 0; round < 20000; ++round) {
    const std::size_t size = rng() % 128;
    // Heap copies of exactly the frame's size, so an overread would land outside it
    // (and be caught by a sanitizer build).
    std::vector<std::uint8_t> frame(size);
    for (auto& b : frame) b = static_cast<std::uint8_t>(rng());
    // Bias towards plausible headers so the deeper decoders run too.
    if (size > 20 && rng() % 2 == 0) frame[rng() % 2 == 0 ? 0 : 14] = rng() % 2 == 0 ? 0x45 : 0x60;
    if (size > 14 && rng() % 2 == 0) {
      frame[12] = 0x08;
      frame[13] = 0x00;
    }
    const int dlt = dlts[rng() % dlts.size()];
    const PacketInfo info = decode_packet(dlt, frame);
    ASSERT_LE(info.payload_offset + info.payload_length, frame.size());
    if (info.transport == PacketInfo::Transport::kNone) {
      EXPECT_EQ(info.payload_offset, 0u);
      EXPECT_EQ(info.payload_length, frame.size());
    }
    if (info.ip_version != 0) ++decoded_ip;
  }
  EXPECT_GT(decoded_ip, 100u);
}

TEST(PacketGarbage, MutatedRealFramesStayInBounds) {
  std::mt19937 rng(7);
  std::vector<Frame> frames = read_frames(test::corpus_path("pcap/v6-http.cap"));
  for (const Frame& f : read_frames(test::corpus_path("pcap/smtp.pcap"))) frames.push_back(f);
  for (int round = 0; round < 20000; ++round) {
    const Frame& base = frames[rng() % frames.size()];
    Bytes frame = base.bytes;
    for (int flips = 1 + static_cast<int>(rng() % 4); flips > 0; --flips) {
      frame[rng() % std::min<std::size_t>(frame.size(), 80)] = static_cast<std::uint8_t>(rng());
    }
    frame.resize(rng() % (frame.size() + 1));
    const PacketInfo info = decode_packet(base.link_type, frame);
    ASSERT_LE(info.payload_offset + info.payload_length, frame.size());
  }
}

}  // namespace
}  // namespace gpufilter
