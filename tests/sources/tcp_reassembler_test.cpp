// TcpReassembler on real captures and on flows built here. Every TCP stream of every
// corpus capture is reassembled and compared byte for byte, in both directions, with
// tshark's `-z follow,tcp,raw` (smtp.pcap's MIME message among them). Synthetic IPv4 and
// IPv6 flows, assembled as frames and decoded, cover one-byte segments, random
// out-of-order delivery, retransmissions and overlaps cut at other boundaries, sequence
// wraparound near 2^32, a missing segment beyond max_pending_bytes (the gap counted, the
// rest delivered, the held bytes never above the limit), the global budget on what all
// flows hold together, FIN and RST, idle expiry and max_flows eviction.
#include "gpufilter/sources/tcp_reassembler.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gpufilter/sources/packet.hpp"
#include "gpufilter/sources/pcap_reader.hpp"
#include "testutil/testutil.hpp"

namespace gpufilter {
namespace {

using gpufilter::test::command_output;
using gpufilter::test::shell_quote;

using Bytes = std::vector<std::uint8_t>;

// What the callbacks saw, per flow and direction. Deliveries must come at the offset the
// stream has reached, or past it after a gap the reassembler counted.
struct Recorder {
  struct Stream {
    std::string bytes;
    std::uint64_t next_offset = 0;
    std::uint64_t skipped = 0;  // bytes jumped over (gaps)
  };
  std::map<std::uint64_t, std::array<Stream, 2>> streams;
  std::vector<std::uint64_t> closed;
  std::size_t deliveries = 0;

  TcpReassembler::Deliver deliver() {
    return [this](std::uint64_t flow, int direction, std::uint64_t offset, std::span<const std::uint8_t> bytes) {
      EXPECT_NE(flow, 0u);
      EXPECT_TRUE(direction == 0 || direction == 1);
      EXPECT_FALSE(bytes.empty());
      EXPECT_EQ(std::count(closed.begin(), closed.end(), flow), 0) << "delivery after Closed";
      Stream& s = streams[flow][direction];
      EXPECT_GE(offset, s.next_offset);
      s.skipped += offset - s.next_offset;
      s.bytes.append(bytes.begin(), bytes.end());
      s.next_offset = offset + bytes.size();
      ++deliveries;
    };
  }
  TcpReassembler::Closed on_closed() {
    return [this](std::uint64_t flow) {
      EXPECT_EQ(std::count(closed.begin(), closed.end(), flow), 0) << "closed twice";
      closed.push_back(flow);
    };
  }
  const std::string& stream(std::uint64_t flow, int direction) { return streams[flow][direction].bytes; }
  bool is_closed(std::uint64_t flow) const { return std::count(closed.begin(), closed.end(), flow) == 1; }
};

// ---------------------------------------------------------------------------------------
// tshark's follow


std::string unhex(const std::string& hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  }
  return out;
}

struct FollowedStream {
  std::string node[2];  // "addr:port" ("[v6]:port")
  std::string data[2];  // bytes sent by node 0 and by node 1
};

// Every TCP stream of `path` as tshark follows it (one tshark run for all of them).
std::vector<FollowedStream> tshark_follow(const std::string& path) {
  std::set<int> ids;
  std::istringstream list(command_output("tshark -r " + shell_quote(path) + " -T fields -e tcp.stream"));
  std::string line;
  while (std::getline(list, line)) {
    if (!line.empty() && line.find(',') == std::string::npos) ids.insert(std::stoi(line));
  }
  std::vector<FollowedStream> streams(ids.size());
  if (ids.empty()) return streams;
  std::string command = "tshark -r " + shell_quote(path) + " -q";
  for (int id : ids) command += " -z follow,tcp,raw," + std::to_string(id);
  std::istringstream out(command_output(command));
  FollowedStream* current = nullptr;
  while (std::getline(out, line)) {
    if (line.rfind("Filter: tcp.stream eq ", 0) == 0) {
      const auto id = static_cast<std::size_t>(std::stoi(line.substr(22)));
      current = id < streams.size() ? &streams[id] : nullptr;
    } else if (current != nullptr && line.rfind("Node 0: ", 0) == 0) {
      current->node[0] = line.substr(8);
    } else if (current != nullptr && line.rfind("Node 1: ", 0) == 0) {
      current->node[1] = line.substr(8);
    } else if (current != nullptr && !line.empty() && line[0] == '\t') {
      current->data[1] += unhex(line.substr(1));
    } else if (current != nullptr && !line.empty() && line.find_first_not_of("0123456789abcdef") == std::string::npos) {
      current->data[0] += unhex(line);
    }
  }
  return streams;
}

std::string endpoint_text(const PacketInfo& info, bool source) {
  const std::string address = address_text(info, source);
  const std::string port = std::to_string(source ? info.sport : info.dport);
  return info.ip_version == 6 ? "[" + address + "]:" + port : address + ":" + port;
}

struct Reassembled {
  Recorder recorder;
  std::map<std::uint64_t, std::string> client;  // flow -> direction 0's sender
  std::map<std::uint64_t, std::string> server;
  TcpReassembler::Counters counters;
};

void reassemble_capture(const std::string& path, Reassembled& out, ReassemblyConfig config = {}) {
  TcpReassembler reassembler(config, out.recorder.deliver(), out.recorder.on_closed());
  auto reader = PcapReader::open_file(path);
  RawPacket raw;
  while (reader->next(raw)) {
    const PacketInfo info = decode_packet(reader->link_type(), raw.data);
    if (info.transport != PacketInfo::Transport::kTcp) continue;
    const std::uint64_t flow = reassembler.segment(info, raw.data, raw.seconds);
    ASSERT_NE(flow, 0u);
    if (out.client.emplace(flow, endpoint_text(info, true)).second) out.server[flow] = endpoint_text(info, false);
  }
  reassembler.finish();
  out.counters = reassembler.counters();
}

const std::vector<std::string> kCaptures = {"chrome-34-google.trace", "dns.cap",         "http.cap",
                                            "http_redirects.pcapng",  "smtp.pcap",       "syslog-single-udp.trace",
                                            "syslog_udp.pcap",        "telnet-raw.pcap", "v6-http.cap"};

TEST(TcpReassemblerCorpus, EveryStreamEqualsTsharkFollow) {
  GPUFILTER_REQUIRE_TSHARK();
  std::size_t total_streams = 0;
  for (const std::string& name : kCaptures) {
    SCOPED_TRACE(name);
    const std::string path = test::corpus_path("pcap/" + name);
    Reassembled ours;
    reassemble_capture(path, ours);
    const std::vector<FollowedStream> theirs = tshark_follow(path);
    std::size_t bytes = 0;
    EXPECT_EQ(ours.client.size(), theirs.size());
    for (const FollowedStream& followed : theirs) {
      // The flow with the same endpoints; direction 0 is tshark's node 0 when the same
      // side spoke first.
      std::uint64_t flow = 0;
      int node0_direction = 0;
      for (const auto& [id, client] : ours.client) {
        if (client == followed.node[0] && ours.server[id] == followed.node[1]) flow = id;
        if (client == followed.node[1] && ours.server[id] == followed.node[0]) flow = id, node0_direction = 1;
      }
      ASSERT_NE(flow, 0u) << followed.node[0] << " " << followed.node[1];
      EXPECT_EQ(ours.recorder.stream(flow, node0_direction), followed.data[0]) << followed.node[0];
      EXPECT_EQ(ours.recorder.stream(flow, 1 - node0_direction), followed.data[1]) << followed.node[1];
      EXPECT_TRUE(ours.recorder.is_closed(flow));
      bytes += followed.data[0].size() + followed.data[1].size();
    }
    EXPECT_EQ(ours.counters.flows, theirs.size());
    EXPECT_EQ(ours.counters.gaps, 0u);
    std::printf("%-24s %2zu TCP streams, %6zu bytes equal to tshark's follow; %llu retransmitted bytes\n", name.c_str(),
                theirs.size(), bytes, static_cast<unsigned long long>(ours.counters.retransmitted_bytes));
    total_streams += theirs.size();
  }
  EXPECT_EQ(total_streams, 1u + 2 + 48 + 1 + 1 + 1);
}

TEST(TcpReassemblerCorpus, SmtpMessageIsWhole) {
  GPUFILTER_REQUIRE_TSHARK();
  Reassembled ours;
  reassemble_capture(test::corpus_path("pcap/smtp.pcap"), ours);
  ASSERT_EQ(ours.client.size(), 1u);
  const std::uint64_t flow = ours.client.begin()->first;
  EXPECT_EQ(ours.client[flow], "10.10.1.4:1470");
  const std::string& client = ours.recorder.stream(flow, 0);
  const std::string& server = ours.recorder.stream(flow, 1);
  EXPECT_EQ(client.rfind("EHLO GP\r\n", 0), 0u);
  EXPECT_NE(client.find("MAIL FROM: <gurpartap@patriots.in>\r\n"), std::string::npos);
  EXPECT_NE(client.find("Subject: SMTP"), std::string::npos);
  // The MIME boundaries across segments: opening lines and the closing one.
  std::size_t boundaries = 0;
  for (std::size_t at = client.find("------=_NextPart"); at != std::string::npos;
       at = client.find("------=_NextPart", at + 1)) {
    ++boundaries;
  }
  EXPECT_GE(boundaries, 4u);
  EXPECT_NE(client.find("\r\n.\r\nQUIT\r\n"), std::string::npos);
  EXPECT_EQ(server.rfind("220-", 0), 0u);
  EXPECT_NE(server.find("221 "), std::string::npos);
}

// ---------------------------------------------------------------------------------------
// Synthetic flows

void put16(Bytes& out, std::uint32_t v) {
  out.push_back(static_cast<std::uint8_t>(v >> 8));
  out.push_back(static_cast<std::uint8_t>(v));
}
void put32(Bytes& out, std::uint32_t v) {
  put16(out, v >> 16);
  put16(out, v & 0xffff);
}

constexpr std::uint8_t kFin = 0x01, kSyn = 0x02, kRst = 0x04, kPsh = 0x08, kAck = 0x10;

struct Endpoint {
  std::array<std::uint8_t, 16> address{};
  std::uint16_t port = 0;
};

Endpoint v4(std::uint8_t last, std::uint16_t port) { return {{10, 0, 0, last}, port}; }
Endpoint v6(std::uint8_t last, std::uint16_t port) {
  return {{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, last}, port};
}

// An Ethernet frame carrying one TCP segment.
Bytes frame(bool ipv6, const Endpoint& from, const Endpoint& to, std::uint32_t seq, std::uint8_t flags,
            std::string_view payload) {
  Bytes tcp;
  put16(tcp, from.port);
  put16(tcp, to.port);
  put32(tcp, seq);
  put32(tcp, 0);
  tcp.push_back(0x50);
  tcp.push_back(flags);
  put16(tcp, 65535);
  put32(tcp, 0);
  tcp.insert(tcp.end(), payload.begin(), payload.end());
  Bytes out = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  if (ipv6) {
    put16(out, 0x86dd);
    out.insert(out.end(), {0x60, 0, 0, 0});
    put16(out, static_cast<std::uint32_t>(tcp.size()));
    out.push_back(6);
    out.push_back(64);
    out.insert(out.end(), from.address.begin(), from.address.end());
    out.insert(out.end(), to.address.begin(), to.address.end());
  } else {
    put16(out, 0x0800);
    out.push_back(0x45);
    out.push_back(0);
    put16(out, static_cast<std::uint32_t>(20 + tcp.size()));
    put32(out, 0);
    out.push_back(64);
    out.push_back(6);
    put16(out, 0);
    out.insert(out.end(), from.address.begin(), from.address.begin() + 4);
    out.insert(out.end(), to.address.begin(), to.address.begin() + 4);
  }
  out.insert(out.end(), tcp.begin(), tcp.end());
  return out;
}

// One side of a connection: its ISN and the bytes it sends.
struct Side {
  Endpoint self;
  std::uint32_t isn;
  std::string data;
};

struct Segment {
  int side;  // 0: the client, 1: the server
  std::uint32_t seq;
  std::uint8_t flags;
  std::string payload;
};

class Connection {
 public:
  Connection(bool ipv6, Side client, Side server) : ipv6_(ipv6), sides_{std::move(client), std::move(server)} {}

  Segment syn(int side) const {
    return {side, sides_[side].isn, static_cast<std::uint8_t>(side ? kSyn | kAck : kSyn), ""};
  }
  // Bytes [begin, end) of a side's data.
  Segment data(int side, std::size_t begin, std::size_t end, std::uint8_t flags = kAck | kPsh) const {
    return {side, static_cast<std::uint32_t>(sides_[side].isn + 1 + begin), flags,
            sides_[side].data.substr(begin, end - begin)};
  }
  Segment fin(int side) const {
    return {side, static_cast<std::uint32_t>(sides_[side].isn + 1 + sides_[side].data.size()), kFin | kAck, ""};
  }
  Segment rst(int side, std::size_t at) const {
    return {side, static_cast<std::uint32_t>(sides_[side].isn + 1 + at), kRst, ""};
  }
  // A side's data cut into random pieces (1 to max bytes).
  std::vector<Segment> pieces(int side, std::mt19937& rng, std::size_t max) const {
    std::vector<Segment> out;
    for (std::size_t at = 0; at < sides_[side].data.size();) {
      const std::size_t n = std::min<std::size_t>(1 + rng() % max, sides_[side].data.size() - at);
      out.push_back(data(side, at, at + n));
      at += n;
    }
    return out;
  }

  std::uint64_t send(TcpReassembler& reassembler, const Segment& s, std::int64_t seconds = 1000) const {
    const Side& from = sides_[s.side];
    const Side& to = sides_[1 - s.side];
    const Bytes bytes = frame(ipv6_, from.self, to.self, s.seq, s.flags, s.payload);
    const PacketInfo info = decode_packet(1, bytes);
    EXPECT_EQ(info.transport, PacketInfo::Transport::kTcp);
    return reassembler.segment(info, bytes, seconds);
  }
  const std::string& sent(int side) const { return sides_[side].data; }

 private:
  bool ipv6_;
  std::array<Side, 2> sides_;
};

std::string random_text(std::mt19937& rng, std::size_t n) {
  std::string out(n, ' ');
  for (char& c : out) c = static_cast<char>('a' + rng() % 26);
  return out;
}

TEST(TcpReassemblerSynthetic, OneByteSegments) {
  std::mt19937 rng(1);
  const Connection c(false, {v4(1, 1025), 1000, random_text(rng, 700)}, {v4(2, 23), 5000, random_text(rng, 300)});
  Recorder r;
  TcpReassembler reassembler({}, r.deliver(), r.on_closed());
  const std::uint64_t flow = c.send(reassembler, c.syn(0));
  EXPECT_EQ(c.send(reassembler, c.syn(1)), flow);
  // Telnet style: one byte a segment each way, in order.
  for (std::size_t i = 0; i < 700; ++i) {
    EXPECT_EQ(c.send(reassembler, c.data(0, i, i + 1)), flow);
    if (i < 300) c.send(reassembler, c.data(1, i, i + 1));
    EXPECT_EQ(r.stream(flow, 0).size(), i + 1);  // handed on at once
  }
  EXPECT_EQ(r.stream(flow, 0), c.sent(0));
  EXPECT_EQ(r.stream(flow, 1), c.sent(1));
  EXPECT_EQ(r.deliveries, 1000u);
  EXPECT_EQ(reassembler.counters().flows, 1u);
  EXPECT_EQ(reassembler.counters().retransmitted_bytes, 0u);
}

// Random segmentation, every segment possibly sent twice, extra retransmissions cut at
// other boundaries (overlapping several originals), all shuffled after the SYNs.
void random_order_round(std::mt19937& rng, bool ipv6, std::uint32_t client_isn, std::uint32_t server_isn,
                        std::size_t max_segment) {
  const Connection c(ipv6, {ipv6 ? v6(1, 40000) : v4(1, 40000), client_isn, random_text(rng, 3000 + rng() % 3000)},
                     {ipv6 ? v6(2, 80) : v4(2, 80), server_isn, random_text(rng, 1000 + rng() % 5000)});
  std::vector<Segment> segments;
  std::size_t fed = 0;
  for (int side = 0; side < 2; ++side) {
    for (const Segment& s : c.pieces(side, rng, max_segment)) {
      segments.push_back(s);
      if (rng() % 4 == 0) segments.push_back(s);  // retransmitted as it was
    }
    for (int extra = 0; extra < 30; ++extra) {  // overlapping retransmissions
      const std::size_t size = c.sent(side).size();
      const std::size_t begin = rng() % size;
      const std::size_t end = std::min(size, begin + 1 + rng() % (3 * max_segment));
      segments.push_back(c.data(side, begin, end));
    }
  }
  std::shuffle(segments.begin(), segments.end(), rng);
  for (const Segment& s : segments) fed += s.payload.size();
  Recorder r;
  TcpReassembler reassembler({}, r.deliver(), r.on_closed());
  const std::uint64_t flow = c.send(reassembler, c.syn(0));
  c.send(reassembler, c.syn(1));
  for (const Segment& s : segments) ASSERT_EQ(c.send(reassembler, s), flow);
  // Everything arrived: both streams are complete before any FIN.
  EXPECT_EQ(r.stream(flow, 0), c.sent(0));
  EXPECT_EQ(r.stream(flow, 1), c.sent(1));
  EXPECT_FALSE(r.is_closed(flow));
  c.send(reassembler, c.fin(0));
  EXPECT_FALSE(r.is_closed(flow));
  c.send(reassembler, c.fin(1));
  EXPECT_TRUE(r.is_closed(flow));
  const TcpReassembler::Counters counters = reassembler.counters();
  EXPECT_EQ(counters.gaps, 0u);
  // Each byte is handed on once; every other copy of it is counted.
  EXPECT_EQ(counters.retransmitted_bytes, fed - c.sent(0).size() - c.sent(1).size());
  EXPECT_EQ(r.streams[flow][0].skipped + r.streams[flow][1].skipped, 0u);
}

TEST(TcpReassemblerSynthetic, RandomOrderRetransmissionsAndOverlaps) {
  std::mt19937 rng(42);
  for (int round = 0; round < 60; ++round) {
    SCOPED_TRACE(round);
    random_order_round(rng, round % 2 == 1, static_cast<std::uint32_t>(rng()), static_cast<std::uint32_t>(rng()),
                       round % 3 == 0 ? 1 : 1 + rng() % 1400);
  }
}

TEST(TcpReassemblerSynthetic, SequenceWraparound) {
  std::mt19937 rng(3);
  // The data crosses 2^32 in both directions; the SYN itself sits at 2^32 - 1 once.
  for (std::uint32_t isn : {0xffffffffu, 0xfffffc00u, 0xffffff00u}) {
    SCOPED_TRACE(isn);
    random_order_round(rng, false, isn, isn - 77, 300);
    random_order_round(rng, true, isn - 5, isn, 1);
  }
}

TEST(TcpReassemblerSynthetic, WraparoundWithoutSyn) {
  // The capture starts mid-flow, just before the wrap: offset 0 is the first byte seen.
  std::mt19937 rng(4);
  const Connection c(false, {v4(1, 5000), 0xfffffff0u, random_text(rng, 100)}, {v4(2, 25), 7, ""});
  Recorder r;
  TcpReassembler reassembler({}, r.deliver(), r.on_closed());
  const std::uint64_t flow = c.send(reassembler, c.data(0, 0, 10));
  c.send(reassembler, c.data(0, 40, 100));  // past the wrap, out of order
  c.send(reassembler, c.data(0, 10, 40));
  EXPECT_EQ(r.stream(flow, 0), c.sent(0));
  EXPECT_EQ(r.streams[flow][0].next_offset, 100u);
}

TEST(TcpReassemblerSynthetic, ServerSpeakingFirstIsDirectionZero) {
  std::mt19937 rng(5);
  const Connection c(false, {v4(1, 1111), 10, "request"}, {v4(2, 22), 20, "SSH-2.0-banner\r\n"});
  Recorder r;
  TcpReassembler reassembler({}, r.deliver(), r.on_closed());
  const std::uint64_t flow = c.send(reassembler, c.data(1, 0, 16));
  c.send(reassembler, c.data(0, 0, 7));
  EXPECT_EQ(r.stream(flow, 0), "SSH-2.0-banner\r\n");
  EXPECT_EQ(r.stream(flow, 1), "request");
}

TEST(TcpReassemblerSynthetic, MissingSegmentBeyondThePendingLimit) {
  std::mt19937 rng(6);
  const Connection c(false, {v4(1, 2000), 100, random_text(rng, 5000)}, {v4(2, 80), 9, ""});
  ReassemblyConfig config;
  config.max_pending_bytes = 1000;
  Recorder r;
  TcpReassembler reassembler(config, r.deliver(), r.on_closed());
  const std::uint64_t flow = c.send(reassembler, c.syn(0));
  // 100-byte segments; [1000, 1100) never comes.
  for (std::size_t at = 0; at < 5000; at += 100) {
    if (at == 1000) continue;
    c.send(reassembler, c.data(0, at, at + 100));
    const std::size_t delivered = r.stream(flow, 0).size();
    if (at < 1000) {
      EXPECT_EQ(delivered, at + 100);
    } else if (at < 2100) {
      // Held: 1100..at+100, at most 1000 bytes.
      EXPECT_EQ(delivered, 1000u) << at;
      EXPECT_EQ(reassembler.counters().gaps, 0u);
    } else {
      // The 11th held segment would make 1100 bytes: the gap is skipped.
      EXPECT_EQ(delivered, at + 100 - 100) << at;
      EXPECT_EQ(reassembler.counters().gaps, 1u);
    }
  }
  EXPECT_EQ(reassembler.counters().gap_bytes, 100u);
  EXPECT_EQ(r.stream(flow, 0), c.sent(0).substr(0, 1000) + c.sent(0).substr(1100));
  EXPECT_EQ(r.streams[flow][0].skipped, 100u);
  EXPECT_EQ(r.streams[flow][0].next_offset, 5000u);
  // The missing segment arriving late is old news.
  c.send(reassembler, c.data(0, 1000, 1100));
  EXPECT_EQ(reassembler.counters().retransmitted_bytes, 100u);
  EXPECT_EQ(r.stream(flow, 0).size(), 4900u);
}

TEST(TcpReassemblerSynthetic, HeldBytesNeverExceedTheLimit) {
  // Heavy reordering with a small limit, some segments lost. After every segment the
  // bytes seen past the stream's offset (what the reassembler must be holding) are at
  // most max_pending_bytes; a gap only ever skips bytes not seen yet; every byte outside
  // the gaps is handed on once, in order.
  std::mt19937 rng(7);
  std::size_t total_gaps = 0;
  for (int round = 0; round < 20; ++round) {
    SCOPED_TRACE(round);
    const bool ipv6 = round % 2 == 1;
    const Connection c(ipv6,
                       {ipv6 ? v6(1, 3000) : v4(1, 3000), static_cast<std::uint32_t>(rng()), random_text(rng, 20000)},
                       {ipv6 ? v6(2, 443) : v4(2, 443), 1, ""});
    const std::string& sent = c.sent(0);
    ReassemblyConfig config;
    config.max_pending_bytes = 500 + rng() % 3000;
    std::vector<bool> seen(sent.size(), false), delivered(sent.size(), false), skipped(sent.size(), false);
    std::uint64_t offset = 0;
    std::size_t closes = 0;
    TcpReassembler reassembler(
        config,
        [&](std::uint64_t, int direction, std::uint64_t at, std::span<const std::uint8_t> bytes) {
          EXPECT_EQ(direction, 0);
          ASSERT_GE(at, offset);
          for (std::uint64_t i = offset; i < at; ++i) {
            EXPECT_FALSE(seen[i]) << "skipped a byte it had: " << i;
            skipped[i] = true;
          }
          for (std::size_t i = 0; i < bytes.size(); ++i) {
            EXPECT_EQ(static_cast<char>(bytes[i]), sent[at + i]);
            EXPECT_FALSE(delivered[at + i]);
            delivered[at + i] = true;
          }
          offset = at + bytes.size();
        },
        [&](std::uint64_t) { ++closes; });
    c.send(reassembler, c.syn(0));
    std::vector<Segment> segments = c.pieces(0, rng, 300);
    // Local reordering: each segment moves up to 12 places; 2% are lost.
    for (std::size_t i = 0; i + 1 < segments.size(); ++i) {
      std::swap(segments[i], segments[std::min(segments.size() - 1, i + rng() % 12)]);
    }
    for (const Segment& s : segments) {
      if (rng() % 50 == 0) continue;
      const std::size_t begin = s.seq - (c.syn(0).seq + 1);
      for (std::size_t i = begin; i < begin + s.payload.size(); ++i) seen[i] = true;
      c.send(reassembler, s);
      const auto held =
          static_cast<std::size_t>(std::count(seen.begin() + static_cast<std::ptrdiff_t>(offset), seen.end(), true));
      ASSERT_LE(held, config.max_pending_bytes);
    }
    reassembler.finish();
    EXPECT_EQ(closes, 1u);
    // Up to the end every byte was handed on or skipped, never both; past it none was seen.
    std::size_t gap_bytes = 0;
    for (std::size_t i = 0; i < sent.size(); ++i) {
      if (i < offset) {
        EXPECT_NE(delivered[i], skipped[i]) << i;
      } else {
        EXPECT_FALSE(seen[i]) << i;
      }
      gap_bytes += skipped[i];
    }
    EXPECT_EQ(reassembler.counters().gap_bytes, gap_bytes);
    total_gaps += reassembler.counters().gaps;
  }
  EXPECT_GT(total_gaps, 20u);
}

// 300 flows each hold 100,000 bytes behind a missing segment: 30 MB under the
// per-direction limit alone. The global budget keeps the accounted total under it after
// every segment (the longest-holding flows skip their gaps first), and what every stream
// delivers is what it would be without the budget: only the missing bytes are skipped,
// and the flows without gaps, interleaved with them, never hold anything.
TEST(TcpReassemblerSynthetic, GlobalBudgetBoundsHeldBytesAcrossFlows) {
  std::mt19937 rng(11);
  std::vector<Connection> gapped, whole;
  for (int i = 0; i < 300; ++i) {
    gapped.emplace_back(false, Side{v4(static_cast<std::uint8_t>(1 + i % 200), static_cast<std::uint16_t>(10000 + i)),
                                    static_cast<std::uint32_t>(rng()), random_text(rng, 101100)},
                        Side{v4(250, 80), 1, ""});
  }
  for (int i = 0; i < 20; ++i) {
    whole.emplace_back(true, Side{v6(static_cast<std::uint8_t>(i), static_cast<std::uint16_t>(20000 + i)),
                                  static_cast<std::uint32_t>(rng()), random_text(rng, 11 * 2727)},
                       Side{v6(250, 80), 1, ""});
  }
  const auto run = [&](std::size_t budget, Recorder& r, std::vector<std::uint64_t>& ids) {
    ReassemblyConfig config;
    config.max_total_pending_bytes = budget;
    TcpReassembler reassembler(config, r.deliver(), r.on_closed());
    for (const Connection& c : gapped) ids.push_back(c.send(reassembler, c.syn(0)));
    for (const Connection& c : whole) ids.push_back(c.send(reassembler, c.syn(0)));
    for (std::size_t step = 0; step < 11; ++step) {
      for (std::size_t i = 0; i < gapped.size(); ++i) {
        // [0, 1000), then [1100, 101100) in 10 segments: [1000, 1100) never comes.
        const std::size_t begin = step == 0 ? 0 : 1100 + (step - 1) * 10000;
        gapped[i].send(reassembler, gapped[i].data(0, begin, step == 0 ? 1000 : begin + 10000));
        EXPECT_LE(reassembler.counters().held, budget);
        if (i % 15 == 0) {
          const Connection& w = whole[i / 15];
          w.send(reassembler, w.data(0, step * 2727, (step + 1) * 2727));
        }
      }
    }
    reassembler.finish();
    EXPECT_EQ(reassembler.counters().held, 0u);
    return reassembler.counters();
  };
  Recorder bounded, unbounded;
  std::vector<std::uint64_t> bounded_ids, unbounded_ids;
  const std::size_t budget = 4u << 20;
  const TcpReassembler::Counters b = run(budget, bounded, bounded_ids);
  const TcpReassembler::Counters u = run(SIZE_MAX, unbounded, unbounded_ids);
  EXPECT_LE(b.held_peak, budget);
  EXPECT_GT(b.held_peak, budget / 2);
  EXPECT_GT(u.held_peak, 30'000'000u);  // what the per-direction limit alone allowed
  EXPECT_GT(b.budget_gaps, 200u);
  EXPECT_EQ(b.budget_gap_bytes, b.budget_gaps * 100);
  EXPECT_EQ(u.budget_gaps, 0u);
  EXPECT_EQ(b.gaps, 300u);  // one per flow, with the budget or at the end
  EXPECT_EQ(b.gap_bytes, u.gap_bytes);
  ASSERT_EQ(bounded_ids, unbounded_ids);
  for (std::size_t i = 0; i < gapped.size(); ++i) {
    const std::string& sent = gapped[i].sent(0);
    EXPECT_TRUE(bounded.stream(bounded_ids[i], 0) == sent.substr(0, 1000) + sent.substr(1100)) << i;
  }
  for (std::size_t i = 0; i < whole.size(); ++i) {
    const std::uint64_t id = bounded_ids[gapped.size() + i];
    EXPECT_TRUE(bounded.stream(id, 0) == whole[i].sent(0)) << i;
    EXPECT_EQ(bounded.streams[id][0].skipped, 0u);
    EXPECT_TRUE(bounded.stream(id, 0) == unbounded.stream(unbounded_ids[gapped.size() + i], 0)) << i;
  }
}

TEST(TcpReassemblerSynthetic, ManyTinyPiecesAreBoundedToo) {
  // One byte a segment, each sent before the one in front of it: every byte would be a
  // piece of its own. 3000 bytes are under the byte limit, but not 3000 pieces: the
  // reassembler skips ahead instead of growing a map node per byte.
  std::mt19937 rng(8);
  const Connection c(false, {v4(1, 7000), 5, random_text(rng, 3000)}, {v4(2, 80), 1, ""});
  ReassemblyConfig config;
  config.max_pending_bytes = 6400;  // at most 100 pieces
  Recorder r;
  TcpReassembler reassembler(config, r.deliver(), r.on_closed());
  const std::uint64_t flow = c.send(reassembler, c.syn(0));
  for (std::size_t at = 3000; at-- > 1;) c.send(reassembler, c.data(0, at, at + 1));
  EXPECT_GT(reassembler.counters().gaps, 0u);
  EXPECT_GT(r.stream(flow, 0).size(), 0u);  // handed on before the first byte came
  c.send(reassembler, c.data(0, 0, 1));
  reassembler.finish();
  // Nothing twice, nothing lost but what the gaps skipped.
  EXPECT_EQ(r.stream(flow, 0).size() + reassembler.counters().gap_bytes, 3000u);
  EXPECT_EQ(r.streams[flow][0].next_offset, 3000u);
}

TEST(TcpReassemblerSynthetic, FinClosesAfterBothSidesAndTheLastAckIsAbsorbed) {
  const Connection c(false, {v4(1, 5555), 1, "hello"}, {v4(2, 80), 2, "world"});
  Recorder r;
  TcpReassembler reassembler({}, r.deliver(), r.on_closed());
  const std::uint64_t flow = c.send(reassembler, c.syn(0));
  c.send(reassembler, c.syn(1));
  c.send(reassembler, c.data(0, 0, 5));
  // The server's FIN comes before its data: the flow waits for the data.
  c.send(reassembler, c.fin(1));
  c.send(reassembler, c.fin(0));
  EXPECT_FALSE(r.is_closed(flow));
  c.send(reassembler, c.data(1, 0, 5));
  EXPECT_TRUE(r.is_closed(flow));
  EXPECT_EQ(r.stream(flow, 0), "hello");
  EXPECT_EQ(r.stream(flow, 1), "world");
  // The last ACK and a retransmitted FIN belong to the finished flow.
  EXPECT_EQ(c.send(reassembler, {0, c.fin(0).seq + 1, kAck, ""}), flow);
  EXPECT_EQ(c.send(reassembler, c.fin(1)), flow);
  EXPECT_EQ(reassembler.counters().flows, 1u);
  EXPECT_EQ(r.closed.size(), 1u);
  // A new SYN on the same ports is a new connection.
  const std::uint64_t again = c.send(reassembler, c.syn(0));
  EXPECT_NE(again, flow);
  EXPECT_EQ(reassembler.counters().flows, 2u);
  reassembler.finish();
  EXPECT_TRUE(r.is_closed(again));
}

TEST(TcpReassemblerSynthetic, RstClosesAndHandsOnWhatIsHeld) {
  const Connection c(true, {v6(1, 6000), 77, "0123456789abcdefghij"}, {v6(2, 443), 5, ""});
  Recorder r;
  TcpReassembler reassembler({}, r.deliver(), r.on_closed());
  const std::uint64_t flow = c.send(reassembler, c.syn(0));
  c.send(reassembler, c.data(0, 0, 5));
  c.send(reassembler, c.data(0, 10, 20));  // held behind [5, 10)
  EXPECT_EQ(r.stream(flow, 0), "01234");
  c.send(reassembler, c.rst(1, 0));
  EXPECT_TRUE(r.is_closed(flow));
  EXPECT_EQ(r.stream(flow, 0), "01234abcdefghij");
  EXPECT_EQ(r.streams[flow][0].skipped, 5u);
  EXPECT_EQ(reassembler.counters().gaps, 1u);
  EXPECT_EQ(reassembler.counters().gap_bytes, 5u);
  // The late segment does not reopen it.
  EXPECT_EQ(c.send(reassembler, c.data(0, 5, 10)), flow);
  EXPECT_EQ(r.stream(flow, 0), "01234abcdefghij");
}

TEST(TcpReassemblerSynthetic, IdleFlowsExpireByCaptureTime) {
  const Connection a(false, {v4(1, 1000), 1, "aaaa"}, {v4(2, 80), 2, ""});
  const Connection b(false, {v4(3, 1000), 1, "bbbb"}, {v4(2, 80), 2, ""});
  ReassemblyConfig config;
  config.idle_timeout_seconds = 60;
  Recorder r;
  TcpReassembler reassembler(config, r.deliver(), r.on_closed());
  const std::uint64_t fa = a.send(reassembler, a.syn(0), 100);
  const std::uint64_t fb = b.send(reassembler, b.syn(0), 130);
  a.send(reassembler, a.data(0, 2, 4), 110);  // held: [0, 2) is missing
  reassembler.expire(160);                    // a: idle since 110, not before 100
  EXPECT_TRUE(r.closed.empty());
  reassembler.expire(171);
  ASSERT_EQ(r.closed, std::vector<std::uint64_t>{fa});
  EXPECT_EQ(r.stream(fa, 0), "aa");  // handed on after its gap at the end
  EXPECT_EQ(reassembler.counters().gaps, 1u);
  // b idles out without expire(): its next segment, late enough, starts a new flow.
  const std::uint64_t later = b.send(reassembler, b.data(0, 0, 4), 191);
  EXPECT_NE(later, fb);
  EXPECT_TRUE(r.is_closed(fb));
  EXPECT_EQ(r.stream(later, 0), "bbbb");
  // A segment within the timeout keeps the flow.
  EXPECT_EQ(b.send(reassembler, b.data(0, 0, 4), 250), later);
  EXPECT_EQ(reassembler.counters().flows, 3u);
}

TEST(TcpReassemblerSynthetic, MaxFlowsEndsTheLeastRecentlySeen) {
  std::vector<Connection> connections;
  for (std::uint8_t i = 1; i <= 5; ++i) {
    connections.emplace_back(i % 2 == 0,
                             Side{i % 2 == 0 ? v6(i, 1000) : v4(i, 1000), 1000u * i, "data-" + std::to_string(i)},
                             Side{i % 2 == 0 ? v6(200, 80) : v4(200, 80), 1, ""});
  }
  ReassemblyConfig config;
  config.max_flows = 3;
  Recorder r;
  TcpReassembler reassembler(config, r.deliver(), r.on_closed());
  std::vector<std::uint64_t> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(connections[i].send(reassembler, connections[i].syn(0)));
  // Flow 0 is seen again (with data held behind a hole), so flow 1 is the oldest.
  connections[0].send(reassembler, connections[0].data(0, 3, 6));
  ids.push_back(connections[3].send(reassembler, connections[3].syn(0)));
  ASSERT_EQ(r.closed, std::vector<std::uint64_t>{ids[1]});
  ids.push_back(connections[4].send(reassembler, connections[4].syn(0)));
  ASSERT_EQ(r.closed, (std::vector<std::uint64_t>{ids[1], ids[2]}));
  connections[3].send(reassembler, connections[3].data(0, 0, 6));
  ids.push_back(connections[1].send(reassembler, connections[1].data(0, 0, 6)));  // a new flow now
  EXPECT_NE(ids.back(), ids[1]);
  ASSERT_EQ(r.closed, (std::vector<std::uint64_t>{ids[1], ids[2], ids[0]}));
  EXPECT_EQ(r.stream(ids[0], 0), "a-1");  // handed on after its gap at eviction
  EXPECT_EQ(reassembler.counters().flows, 6u);
  reassembler.finish();
  EXPECT_EQ(r.closed.size(), 6u);
  EXPECT_EQ(r.stream(ids[3], 0), "data-4");
}

TEST(TcpReassemblerSynthetic, NotTcpIsNotAFlow) {
  Recorder r;
  TcpReassembler reassembler({}, r.deliver(), r.on_closed());
  PacketInfo info;
  info.transport = PacketInfo::Transport::kUdp;
  const Bytes nothing;
  EXPECT_EQ(reassembler.segment(info, nothing, 1), 0u);
  EXPECT_EQ(reassembler.counters().flows, 0u);
}

}  // namespace
}  // namespace gpufilter
