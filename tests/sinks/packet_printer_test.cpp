// The packet printers in memory, on hand-made packets: ngrep's text (header, dotted
// payload, --hexdump rows, flows, file name prefixes), the JSON objects (exact bytes,
// parsed back with nlohmann-json) and -c's counts. The expected bytes are what
// `gpufilter --pcap` prints for such packets (tests/cli/capture_test.cpp compares the
// whole output with tshark).
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gpufilter/sinks/packet_printer.hpp"

namespace gpufilter {
namespace {

const std::vector<PacketPattern> kPatterns = {{0, "GET /"}, {1, "Host:"}, {3, "a\x01\xff"}};

// http.cap's frame 4, shortened: 145.254.160.237:3372 -> 65.208.228.223:80, PSH ACK.
PacketInfo tcp_info() {
  PacketInfo info;
  info.ip_version = 4;
  info.src = {145, 254, 160, 237};
  info.dst = {65, 208, 228, 223};
  info.transport = PacketInfo::Transport::kTcp;
  info.sport = 3372;
  info.dport = 80;
  info.tcp_flags = 0x18;
  return info;
}

RawPacket raw_packet() {
  RawPacket raw;
  raw.index = 4;
  raw.seconds = 1084443428;
  raw.nanoseconds = 222534000;
  raw.caplen = 81;
  raw.len = 81;
  return raw;
}

const std::string kPayload = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
const std::vector<std::uint32_t> kBoth = {0, 1};

std::string text_of(PacketTextOptions options, const std::string& name = "http.cap") {
  StringWriter w;
  {
    Output out(w);
    PacketTextPrinter printer(out, kPatterns, options);
    printer.begin(CaptureInput{name, false});
    const RawPacket raw = raw_packet();
    const PacketInfo info = tcp_info();
    printer.packet(PacketRecord{raw, info, kPayload, kBoth, {}});
  }
  return w.text();
}

TEST(PacketTextPrinter, HeaderThenDottedPayload) {
  EXPECT_EQ(text_of({}),
            "T 2004-05-13T10:17:08.222534Z 145.254.160.237:3372 -> 65.208.228.223:80 [AP] #4 matched: GET /, Host:\n"
            "  GET / HTTP/1.1..Host: x....\n\n");
}

TEST(PacketTextPrinter, HexdumpRowsOfSixteen) {
  PacketTextOptions hex;
  hex.with_filename = true;
  hex.hexdump = true;
  EXPECT_EQ(text_of(hex, "a.pcap"),
            "a.pcap:T 2004-05-13T10:17:08.222534Z 145.254.160.237:3372 -> 65.208.228.223:80 [AP] #4 matched: GET /, "
            "Host:\n"
            "  0000  47 45 54 20 2f 20 48 54 54 50 2f 31 2e 31 0d 0a  GET / HTTP/1.1..\n"
            "  0010  48 6f 73 74 3a 20 78 0d 0a 0d 0a                 Host: x....\n\n");
}

TEST(PacketTextPrinter, OtherKindsOfPackets) {
  StringWriter w;
  {
    Output out(w);
    PacketTextPrinter printer(out, kPatterns, {});
    printer.begin(CaptureInput{"x", true});
    RawPacket raw = raw_packet();
    PacketInfo udp6;
    udp6.ip_version = 6;
    udp6.src = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    udp6.dst = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
    udp6.transport = PacketInfo::Transport::kUdp;
    udp6.sport = 53;
    udp6.dport = 5353;
    const std::vector<std::uint32_t> odd = {2};
    printer.packet(PacketRecord{raw, udp6, "q", odd, {}});
    raw.index = 5;
    printer.packet(PacketRecord{raw, PacketInfo{}, "", {}, {}});  // not IP, selected by -v
  }
  EXPECT_EQ(w.text(),
            "U 2004-05-13T10:17:08.222534000Z [2001:db8::1]:53 -> [2001:db8::2]:5353 #4 matched: a..\n  q\n\n"
            "- 2004-05-13T10:17:08.222534000Z - -> - #5\n  \n\n");
}

FlowRecord flow_record(const PacketInfo& first, std::span<const std::uint32_t> ids) {
  FlowRecord record{1, first, 1084443427, 311224000, 34, 479, 18364, ids, !ids.empty(), false, 0, {}, {}, 0};
  record.last_seconds = 1084443430;
  record.last_nanoseconds = 5000;
  return record;
}

TEST(PacketTextPrinter, FlowSummaryLine) {
  StringWriter w;
  {
    Output out(w);
    PacketTextPrinter printer(out, kPatterns, {});
    printer.begin(CaptureInput{"http.cap", false});
    const PacketInfo info = tcp_info();
    printer.flow(flow_record(info, kBoth));
    FlowRecord unmatched = flow_record(info, {});
    unmatched.flow = 2;
    printer.flow(unmatched);
    FlowRecord server = flow_record(info, kBoth);
    server.match_from_server = true;
    server.match_offset = 17;
    printer.flow(server);
  }
  EXPECT_EQ(w.text(),
            "T 2004-05-13T10:17:07.311224Z 145.254.160.237:3372 <-> 65.208.228.223:80 flow #1 packets 34 bytes "
            "479/18364 matched: GET /, Host: (client, offset 0)\n\n"
            "T 2004-05-13T10:17:07.311224Z 145.254.160.237:3372 <-> 65.208.228.223:80 flow #2 packets 34 bytes "
            "479/18364\n\n"
            "T 2004-05-13T10:17:07.311224Z 145.254.160.237:3372 <-> 65.208.228.223:80 flow #1 packets 34 bytes "
            "479/18364 matched: GET /, Host: (server, offset 17)\n\n");
}

TEST(PacketJsonPrinter, PacketObject) {
  StringWriter w;
  {
    Output out(w);
    PacketJsonPrinter printer(out, kPatterns);
    printer.begin(CaptureInput{"http.cap", false});
    const RawPacket raw = raw_packet();
    const PacketInfo info = tcp_info();
    const std::vector<std::uint32_t> ids = {0, 2};
    printer.packet(PacketRecord{raw, info, kPayload, ids, {}});
  }
  EXPECT_EQ(w.text(),
            "{\"type\":\"packet\",\"data\":{\"source\":\"http.cap\",\"frame\":4,\"time\":\"2004-05-13T10:17:08.222534Z\","
            "\"proto\":\"TCP\",\"src\":\"145.254.160.237\",\"dst\":\"65.208.228.223\",\"sport\":3372,\"dport\":80,"
            "\"tcp_flags\":\"AP\",\"length\":81,\"captured\":81,\"record_length\":27,\"patterns\":[{\"id\":0,"
            "\"text\":\"GET /\"},{\"id\":3,\"text\":\"a\\u0001\xef\xbf\xbd\",\"text_base64\":\"YQH/\"}],"
            "\"matches\":[],\"payload\":\"GET / HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n\","
            "\"payload_base64\":\"R0VUIC8gSFRUUC8xLjENCkhvc3Q6IHgNCg0K\"}}\n");
  const nlohmann::json j = nlohmann::json::parse(w.text()).at("data");
  EXPECT_EQ(j["frame"], 4);
  EXPECT_EQ(j["payload"], kPayload);
  EXPECT_EQ(j["patterns"][1]["id"], 3);
}

TEST(PacketJsonPrinter, FlowObjectAndAFrameWithoutIp) {
  StringWriter w;
  {
    Output out(w);
    PacketJsonPrinter printer(out, kPatterns);
    printer.begin(CaptureInput{"c\"d", true});
    const PacketInfo info = tcp_info();
    printer.flow(flow_record(info, kBoth));
    const RawPacket raw = raw_packet();
    printer.packet(PacketRecord{raw, PacketInfo{}, "", {}, {}});
  }
  EXPECT_EQ(w.text(),
            "{\"type\":\"flow\",\"data\":{\"source\":\"c\\\"d\",\"flow\":1,\"proto\":\"TCP\",\"start\":"
            "\"2004-05-13T10:17:07.311224000Z\",\"end\":\"2004-05-13T10:17:10.000005000Z\",\"client\":\"145.254.160.237:3372\",\"server\":\"65.208.228.223:80\","
            "\"packets\":34,\"bytes_client\":479,\"bytes_server\":18364,\"patterns\":[{\"id\":0,\"text\":\"GET /\"},"
            "{\"id\":1,\"text\":\"Host:\"}],\"first_match\":{\"direction\":\"client\",\"offset\":0},"
            "\"matches\":[],\"regions\":[],\"matches_left_out\":0}}\n"
            "{\"type\":\"packet\",\"data\":{\"source\":\"c\\\"d\",\"frame\":4,\"time\":\"2004-05-13T10:17:08.222534000Z\","
            "\"proto\":\"FRAME\",\"length\":81,\"captured\":81,\"record_length\":0,\"patterns\":[],\"matches\":[],"
            "\"payload\":\"\","
            "\"payload_base64\":\"\"}}\n");
  const std::string flow = w.text().substr(0, w.text().find('\n'));
  EXPECT_EQ(nlohmann::json::parse(flow)["data"]["first_match"]["direction"], "client");
}

TEST(PacketCountPrinter, CountPerCapture) {
  StringWriter w;
  {
    Output out(w);
    PacketCountPrinter named(out, true, false);
    named.finish(CaptureSummary{"a.pcap", 3});
    PacketCountPrinter plain(out, false, false);
    plain.finish(CaptureSummary{"b.pcap", 0});
  }
  EXPECT_EQ(w.text(), "a.pcap:3\n0\n");
}

}  // namespace
}  // namespace gpufilter

namespace gpufilter {
namespace {

// kPayload's matches: "GET /" at 0 and "Host:" at 16.
const std::vector<PacketMatch> kMatches = {{0, 5, 0}, {16, 5, 1}};

std::string shown(PacketTextOptions options, bool context = false) {
  StringWriter w;
  {
    Output out(w);
    PacketTextPrinter printer(out, kPatterns, std::move(options));
    printer.begin(CaptureInput{"http.cap", false});
    const RawPacket raw = raw_packet();
    const PacketInfo info = tcp_info();
    PacketRecord record{raw, info, kPayload, kBoth, kMatches};
    record.context = context;
    printer.packet(record);
  }
  const std::string text = w.text();
  return text.substr(text.find('\n') + 1);  // the body, after the header
}

TEST(PacketTextPrinter, ColorOnlyMatchingOffsetsAndByline) {
  PacketTextOptions color;
  color.colors = Colors{};
  EXPECT_EQ(shown(color), "  \33[01;31m\33[KGET /\33[m\33[K HTTP/1.1..\33[01;31m\33[KHost:\33[m\33[K x....\n\n");
  PacketTextOptions only;
  only.only_matching = true;
  only.byte_offset = true;
  EXPECT_EQ(shown(only), "  0:GET /\n  16:Host:\n\n");
  PacketTextOptions byline;
  byline.byline = true;
  byline.byte_offset = true;
  EXPECT_EQ(shown(byline), "  0:GET / HTTP/1.1.\n  16:Host: x.\n  25:.\n\n");
}

TEST(PacketTextPrinter, ContextPacketsAndTimes) {
  StringWriter w;
  {
    Output out(w);
    PacketTextOptions delta;
    delta.time = PacketTime::kDelta;
    PacketTextPrinter printer(out, kPatterns, delta);
    printer.begin(CaptureInput{"http.cap", false});
    RawPacket raw = raw_packet();
    const PacketInfo info = tcp_info();
    PacketRecord first{raw, info, "x", {}, {}};
    first.context = true;
    printer.packet(first);
    raw.index = 9;
    raw.seconds += 2;
    raw.nanoseconds = 1000;
    PacketRecord later{raw, info, "y", {}, {}};
    later.after_gap = true;
    printer.packet(later);
  }
  EXPECT_EQ(w.text(),
            "T +0.000000 145.254.160.237:3372 -> 65.208.228.223:80 [AP] #4 (context)\n  x\n\n--\n"
            "T +1.777467 145.254.160.237:3372 -> 65.208.228.223:80 [AP] #9\n  y\n\n");
}

TEST(PacketTextPrinter, FlowRegionsAndMatches) {
  const std::vector<FlowMatch> matches = {{false, 100, "GET /", 5, 0}, {true, 7, "Host:", 5, 1}};
  const std::vector<FlowRegion> regions = {{false, 98, "..GET / H"}, {true, 7, "Host: x"}};
  const PacketInfo info = tcp_info();
  FlowRecord flow = flow_record(info, kBoth);
  flow.matches = matches;
  flow.regions = regions;
  flow.matches_left_out = 3;
  StringWriter w;
  {
    Output out(w);
    PacketTextOptions options;
    options.byte_offset = true;
    PacketTextPrinter printer(out, kPatterns, options);
    printer.begin(CaptureInput{"http.cap", false});
    printer.flow(flow);
    PacketTextOptions only;
    only.only_matching = true;
    PacketTextPrinter matches_only(out, kPatterns, only);
    matches_only.begin(CaptureInput{"http.cap", false});
    matches_only.flow(flow);
  }
  const std::string head =
      "T 2004-05-13T10:17:07.311224Z 145.254.160.237:3372 <-> 65.208.228.223:80 flow #1 packets 34 bytes "
      "479/18364 matched: GET /, Host: (client, offset 0)\n";
  EXPECT_EQ(w.text(), head + "  client 98:..GET / H\n  server 7:Host: x\n  (3 more matches not shown)\n\n" + head +
                          "  client GET /\n  server Host:\n  (3 more matches not shown)\n\n");

  StringWriter j;
  {
    Output out(j);
    PacketJsonPrinter printer(out, kPatterns);
    printer.begin(CaptureInput{"http.cap", false});
    printer.flow(flow);
  }
  const nlohmann::json data = nlohmann::json::parse(j.text()).at("data");
  EXPECT_EQ(data["matches"][1]["direction"], "server");
  EXPECT_EQ(data["matches"][1]["offset"], 7);
  EXPECT_EQ(data["matches"][1]["pattern"]["text"], "Host:");
  EXPECT_EQ(data["matches"][0]["match"]["text"], "GET /");
  EXPECT_EQ(data["regions"][0]["offset"], 98);
  EXPECT_EQ(data["regions"][0]["payload"], "..GET / H");
  EXPECT_EQ(data["matches_left_out"], 3);
}

TEST(PacketListPrinter, NamesCapturesWithOrWithoutASelection) {
  StringWriter w;
  {
    Output out(w);
    PacketListPrinter with(out, true, false);
    with.finish(CaptureSummary{"a.pcap", 2});
    with.finish(CaptureSummary{"b.pcap", 0});
    PacketListPrinter without(out, false, true);
    without.finish(CaptureSummary{"a.pcap", 2});
    without.finish(CaptureSummary{"b.pcap", 0});
  }
  EXPECT_EQ(w.text(), std::string("a.pcap\nb.pcap\0", 14));
}

}  // namespace
}  // namespace gpufilter
