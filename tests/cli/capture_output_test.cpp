// What captures show of their matches (issue 19), against tshark: every packet's payload
// as --json gives it is tshark's tcp.payload / udp.payload, byte for byte; the offsets of
// -o, -b and the JSON "matches" are where the string lies in tshark's payload; -A/-B
// print the neighbouring frames; a BPF expression after the patterns selects what --bpf
// does; --max-packets reads tshark -c's frames. Flows built here, split into two segments
// at every byte boundary (and into one-byte segments), give each match's offset, bytes and
// context region exactly. And options that mean nothing for packets are refused.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <cstdint>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "differential.hpp"
#include "testutil/testutil.hpp"

namespace gpufilter::test {
namespace {

using json = nlohmann::json;

std::string from_hex(const std::string& hex) {
  std::string bytes;
  std::string digits;
  for (const char c : hex)
    if (c != ':') digits += c;
  for (std::size_t i = 0; i + 1 < digits.size(); i += 2)
    bytes.push_back(static_cast<char>(std::stoi(digits.substr(i, 2), nullptr, 16)));
  return bytes;
}

std::string from_base64(const std::string& text) {
  static const std::string kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::uint32_t bits = 0;
  int count = 0;
  for (const char c : text) {
    const std::size_t v = kAlphabet.find(c);
    if (v == std::string::npos) continue;  // '=' padding
    bits = (bits << 6) | static_cast<std::uint32_t>(v);
    count += 6;
    if (count >= 8) {
      count -= 8;
      out.push_back(static_cast<char>((bits >> count) & 0xff));
    }
  }
  return out;
}

// tshark's transport payload of each frame that has one (TCP or UDP).
std::map<long, std::string> tshark_payloads(const std::string& path) {
  std::map<long, std::string> payloads;
  std::istringstream in(
      command_output("tshark -n -r '" + path + "' -T fields -e frame.number -e tcp.payload -e udp.payload 2>/dev/null"));
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string frame, tcp, udp;
    std::getline(fields, frame, '\t');
    std::getline(fields, tcp, '\t');
    std::getline(fields, udp, '\t');
    if (frame.empty()) continue;
    const std::string& hex = !tcp.empty() ? tcp : udp;
    if (!hex.empty() && hex.find(',') == std::string::npos) payloads[std::stol(frame)] = from_hex(hex);
  }
  return payloads;
}

// gpufilter's JSON lines, per frame: the packet object's data.
std::map<long, json> packets_of(const std::string& out, const std::string& type = "packet") {
  std::map<long, json> packets;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    const json j = json::parse(line);
    if (j.at("type") == type) packets[j.at("data").at("frame").get<long>()] = j.at("data");
  }
  return packets;
}

// Where grep -o would print `s` in `payload`: leftmost, not overlapping.
std::vector<std::size_t> offsets_of(const std::string& payload, const std::string& s) {
  std::vector<std::size_t> at;
  for (std::size_t p = payload.find(s); p != std::string::npos; p = payload.find(s, p + s.size())) at.push_back(p);
  return at;
}

class CaptureOutput : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_tshark()) GTEST_SKIP() << "tshark is not installed (apt install tshark)";
  }
};

// Every packet's record is tshark's payload, and every string's offsets are where it lies
// in it, in JSON and in -o -b's text.
TEST_F(CaptureOutput, PayloadsAndMatchOffsetsAreTsharks) {
  std::mt19937 rng(19);
  std::size_t frames_compared = 0, matches_compared = 0;
  for (const std::string name : {"http.cap", "dns.cap", "smtp.pcap", "v6-http.cap", "syslog_udp.pcap",
                                 "http_redirects.pcapng", "telnet-raw.pcap"}) {
    const std::string path = corpus_path("pcap/" + name);
    const std::map<long, std::string> want = tshark_payloads(path);
    const GrepRun every = run_gpufilter({"--pcap", path, "--json", "-e", ""});
    ASSERT_EQ(every.status, 0) << every.err;
    const std::map<long, json> ours = packets_of(every.out);
    std::set<long> comparable;
    for (const auto& [frame, payload] : want) {
      ASSERT_TRUE(ours.count(frame)) << name << " frame " << frame;
      const std::string bytes = from_base64(ours.at(frame).at("payload_base64").get<std::string>());
      if (bytes.size() != payload.size()) continue;  // IP fragments: tshark reassembles them
      EXPECT_EQ(bytes, payload) << name << " frame " << frame;
      comparable.insert(frame);
    }
    EXPECT_GE(comparable.size() * 10, want.size() * 9) << name;
    frames_compared += comparable.size();
    // Strings taken from the payloads, found where tshark's bytes hold them.
    std::vector<std::string> strings;
    for (const auto& [frame, payload] : want) {
      if (payload.size() < 8 || rng() % 3 != 0) continue;
      const std::size_t length = 2 + rng() % 5;
      strings.push_back(payload.substr(rng() % (payload.size() - length), length));
      if (strings.size() == 6) break;
    }
    for (const std::string& s : strings) {
      const std::string hex = [&] {
        std::string h;
        for (const unsigned char c : s) h += "0123456789abcdef"[c >> 4], h += "0123456789abcdef"[c & 15];
        return h;
      }();
      const GrepRun run = run_gpufilter({"--pcap", path, "--json", "-X", "-e", hex});
      const std::map<long, json> selected = packets_of(run.out);
      for (const long frame : comparable) {
        const std::vector<std::size_t> at = offsets_of(want.at(frame), s);
        ASSERT_EQ(selected.count(frame) != 0, !at.empty()) << name << " frame " << frame << " '" << escape(s) << "'";
        if (at.empty()) continue;
        std::vector<std::size_t> got;
        for (const json& m : selected.at(frame).at("matches")) {
          got.push_back(m.at("offset").get<std::size_t>());
          EXPECT_EQ(m.at("length"), s.size());
        }
        EXPECT_EQ(got, at) << name << " frame " << frame << " '" << escape(s) << "'";
        matches_compared += at.size();
      }
      // -o -b: "  OFFSET:MATCH" lines, the same offsets in the same order.
      const GrepRun text = run_gpufilter({"--pcap", path, "-o", "-b", "-X", "-e", hex});
      std::vector<std::size_t> text_offsets, json_offsets;
      std::istringstream lines(text.out);
      for (std::string line; std::getline(lines, line);)
        if (line.rfind("  ", 0) == 0) text_offsets.push_back(std::stoul(line.substr(2)));
      for (const auto& [frame, data] : selected)
        for (const json& m : data.at("matches")) json_offsets.push_back(m.at("offset").get<std::size_t>());
      EXPECT_EQ(text_offsets, json_offsets) << name << " '" << escape(s) << "'";
    }
  }
  std::printf("frames whose payload equals tshark's: %zu; match offsets compared: %zu\n", frames_compared,
              matches_compared);
  EXPECT_GT(matches_compared, 30u);
}

// -A and -B print the frames around each selected one (not selected ones twice), marked
// as context; --json types them "packet_context".
TEST_F(CaptureOutput, ContextPacketsAreTheNeighbouringFrames) {
  const std::string path = corpus_path("pcap/http.cap");
  const long total = std::stol(command_output("tshark -n -r '" + path + "' -T fields -e frame.number 2>/dev/null | wc -l"));
  for (const auto& [before, after] : {std::pair<long, long>{1, 1}, {2, 0}, {0, 3}}) {
    const GrepRun run = run_gpufilter(
        {"--pcap", path, "--json", "-B", std::to_string(before), "-A", std::to_string(after), "-e", "GET"});
    ASSERT_EQ(run.status, 0) << run.err;
    const std::map<long, json> selected = packets_of(run.out);
    std::set<long> want;
    for (const auto& [frame, data] : selected)
      for (long f = frame - before; f <= frame + after; ++f)
        if (f >= 1 && f <= total && !selected.count(f)) want.insert(f);
    std::set<long> got;
    for (const auto& [frame, data] : packets_of(run.out, "packet_context")) got.insert(frame);
    EXPECT_EQ(got, want) << "-B" << before << " -A" << after;
    EXPECT_FALSE(selected.empty());
    // Text: the same frames, in capture order, groups parted by "--".
    const GrepRun text = run_gpufilter(
        {"--pcap", path, "-B", std::to_string(before), "-A", std::to_string(after), "-e", "GET"});
    std::size_t headers = 0;
    std::istringstream lines(text.out);
    for (std::string line; std::getline(lines, line);) headers += line.rfind("T ", 0) == 0 || line.rfind("U ", 0) == 0 ? 1 : 0;
    EXPECT_EQ(headers, got.size() + selected.size());
    EXPECT_NE(text.out.find("(context)"), std::string::npos);
  }
}

// ngrep's habits: a BPF expression after the patterns, 0x hex, --max-packets.
TEST_F(CaptureOutput, TrailingBpfHexPrefixAndPacketLimit) {
  const std::string path = corpus_path("pcap/smtp.pcap");
  const GrepRun option = run_gpufilter({"--pcap", path, "--json", "--bpf", "src port 25", "-e", "250"});
  const GrepRun trailing = run_gpufilter({"--pcap", path, "--json", "250", "src", "port", "25"});
  const GrepRun both = run_gpufilter({"--pcap", path, "--json", "--bpf", "tcp", "250", "src port 25"});
  ASSERT_EQ(option.status, 0) << option.err;
  EXPECT_EQ(trailing.out, option.out) << trailing.err;
  EXPECT_EQ(both.out, option.out) << both.err;
  const GrepRun bad = run_gpufilter({"--pcap", path, "250", "port", "banana"});
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("banana"), std::string::npos) << bad.err;

  EXPECT_EQ(run_gpufilter({"--pcap", path, "-c", "-X", "0x4d41494c"}).out,
            run_gpufilter({"--pcap", path, "-c", "-e", "MAIL"}).out);

  const GrepRun ten = run_gpufilter({"--pcap", path, "--json", "--max-packets", "10", "-e", ""});
  std::set<long> want;
  std::istringstream in(command_output("tshark -n -r '" + path + "' -c 10 -T fields -e frame.number 2>/dev/null"));
  for (std::string line; std::getline(in, line);) want.insert(std::stol(line));
  std::set<long> got;
  for (const auto& [frame, data] : packets_of(ten.out)) got.insert(frame);
  EXPECT_EQ(got, want);
  EXPECT_EQ(run_gpufilter({"--pcap", path, "--max-packets", "0", "x"}).status, 2);
}

// -l and -L name captures; --label names standard input; -c with -Z.
TEST_F(CaptureOutput, ListsAndLabels) {
  const std::string http = corpus_path("pcap/http.cap");
  const std::string dns = corpus_path("pcap/dns.cap");
  EXPECT_EQ(run_gpufilter({"--pcap", http, "--pcap", dns, "-l", "-e", "Host:"}).out, http + "\n");
  EXPECT_EQ(run_gpufilter({"--pcap", http, "--pcap", dns, "-L", "-e", "Host:"}).out, dns + "\n");
  const GrepRun listed = run_gpufilter({"--pcap", http, "--pcap", dns, "-lZ", "-e", "Host:"});
  EXPECT_EQ(listed.out, http + std::string(1, '\0'));
  EXPECT_EQ(listed.status, 0);
  const GrepRun labelled = run_gpufilter({"--pcap", "-", "--label", "web", "-H", "-c", "-e", "Host:"}, read_file(http));
  EXPECT_EQ(labelled.out.rfind("web:", 0), 0u) << labelled.out;
  // Its messages too, from the first bytes on.
  const GrepRun cut = run_gpufilter({"--pcap", "-", "--label", "web", "-c", "-e", "Host:"}, read_file(http).substr(0, 100));
  EXPECT_EQ(cut.status, 2);
  EXPECT_EQ(cut.err.rfind("gpufilter: web: truncated capture", 0), 0u) << cut.err;
  const GrepRun junk = run_gpufilter({"--pcap", "-", "--label", "web", "-e", "Host:"}, "junk");
  EXPECT_EQ(junk.err.rfind("gpufilter: web: ", 0), 0u) << junk.err;
}

// Options that mean nothing for packets are refused by name, exit 2.
TEST_F(CaptureOutput, OptionsThatDoNotApplyAreRefused) {
  const std::string path = corpus_path("pcap/http.cap");
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{"-n"}, {"-T"}, {"-r"}, {"-a"}, {"-I"}, {"--include=*.pcap"}, {"--pattern-counts"},
        {"--hexdump", "--byline"}, {"--time=yesterday"}}) {
    std::vector<std::string> args = {"--pcap", path};
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back("GET");
    const GrepRun run = run_gpufilter(args);
    EXPECT_EQ(run.status, 2) << extra[0];
    EXPECT_TRUE(run.out.empty()) << extra[0];
    EXPECT_FALSE(run.err.empty()) << extra[0];
  }
  EXPECT_NE(run_gpufilter({"--pcap", path, "-n", "GET"}).err.find("--max-packets"), std::string::npos);
  EXPECT_EQ(run_gpufilter({"--byline", "GET"}, "GET\n").status, 2);  // capture options without a capture
  // Refused whatever their value: the streams' limits, and --exclude-from of no pattern.
  for (const std::vector<std::string>& extra : {std::vector<std::string>{"--max-line-bytes=10"},
                                                {"--max-connections=3"}, {"--exclude-from=/dev/null"}}) {
    std::vector<std::string> args = {"--pcap", path, "-c"};
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back("GET");
    const GrepRun run = run_gpufilter(args);
    EXPECT_EQ(run.status, 2) << extra[0];
    EXPECT_NE(run.err.find(extra[0].substr(0, extra[0].find('='))), std::string::npos) << run.err;
  }
}

// A BPF expression that no packet can pass is valid (tcpdump, ngrep and tshark take it):
// nothing is selected, exit 1.
TEST_F(CaptureOutput, BpfThatRejectsEveryPacketSelectsNothing) {
  const std::string path = corpus_path("pcap/http.cap");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--pcap", path, "-c", "e", "tcp and udp"},
        {"--pcap", path, "--bpf", "tcp", "-c", "e", "udp"}, {"--pcap", path, "--stream", "-c", "e", "tcp and udp"}}) {
    const GrepRun run = run_gpufilter(args);
    EXPECT_EQ(run.status, 1) << run.err;
    EXPECT_EQ(run.out, "0\n");
    EXPECT_EQ(run.err, "");
  }
}

// A classic pcap of TCP segments 10.0.0.1:PORT -> 10.0.0.2:80, each (port, seq, payload).
struct Segment {
  std::uint16_t port;
  std::uint32_t seq;
  std::string payload;
  std::uint8_t flags = 0x18;
};

// The file's byte order: little-endian, or big-endian with `big`.
void put32(std::string& out, std::uint32_t v, bool big = false) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(v >> (big ? 24 - 8 * i : 8 * i)));
}

// `big`: a big-endian file; `nano`: nanosecond timestamps; `old`: pcap 2.2, whose record
// headers hold the original length before the captured one.
std::string build_capture(const std::vector<Segment>& segments, bool big = false, bool nano = false,
                          bool old = false) {
  std::string file;
  put32(file, nano ? 0xa1b23c4d : 0xa1b2c3d4, big);
  const char minor = old ? 2 : 4;
  file += big ? std::string("\x00\x02\x00", 3) + minor : std::string("\x02\x00", 2) + minor + '\0';
  put32(file, 0, big);
  put32(file, 0, big);
  put32(file, 65535, big);
  put32(file, 1, big);  // Ethernet
  std::uint32_t usec = 0;
  for (const Segment& s : segments) {
    std::string f(14 + 20 + 20, '\0');
    f[12] = 0x08;
    const std::size_t total = 40 + s.payload.size();
    f[14] = 0x45, f[16] = static_cast<char>(total >> 8), f[17] = static_cast<char>(total & 0xff);
    f[22] = 64, f[23] = 6;
    f[26] = 10, f[29] = 1, f[30] = 10, f[33] = 2;
    f[34] = static_cast<char>(s.port >> 8), f[35] = static_cast<char>(s.port & 0xff), f[37] = 80;
    for (int k = 0; k < 4; ++k) f[38 + k] = static_cast<char>(s.seq >> (24 - 8 * k));
    f[46] = 0x50, f[47] = static_cast<char>(s.flags);
    f += s.payload;
    put32(file, 1700000000, big);
    put32(file, ++usec * (nano ? 7 : 1), big);
    put32(file, static_cast<std::uint32_t>(f.size()) + (old ? 7 : 0), big);  // 2.2: the original length first
    put32(file, static_cast<std::uint32_t>(f.size()) + (old ? 0 : 7), big);
    file += f;
  }
  return file;
}

// One flow per split point k of `message`: SYN, message[0, k), message[k, end), FIN.
std::vector<Segment> split_flows(const std::string& message) {
  std::vector<Segment> segments;
  for (std::size_t k = 1; k < message.size(); ++k) {
    const auto port = static_cast<std::uint16_t>(20000 + k);
    segments.push_back({port, 1000, "", 0x02});
    segments.push_back({port, 1001, message.substr(0, k)});
    segments.push_back({port, static_cast<std::uint32_t>(1001 + k), message.substr(k)});
    segments.push_back({port, static_cast<std::uint32_t>(1001 + message.size()), "", 0x11});
  }
  return segments;
}

// Each flow's matches and region, wherever the stream was split: the match's offset and
// bytes, and the region's bytes are the message's own.
TEST_F(CaptureOutput, FlowMatchesAndRegionsAtEverySplit) {
  TempDir dir;
  const std::string message = std::string(90, 'a') + "\nuser=alice SECRET-TOKEN-42 sent\n" + std::string(100, 'b');
  const std::string path = dir.write("split.pcap", build_capture(split_flows(message)));
  const std::size_t at = message.find("SECRET");
  const std::size_t flows = message.size() - 1;
  struct Case {
    std::vector<std::string> args;
    std::size_t length;         // of the match
    std::size_t region_start;   // in the message
    std::size_t region_end;
  };
  const std::size_t line = message.find("user=");
  const std::vector<Case> cases = {
      {{"-F", "-e", "SECRET-TOKEN"}, 12, at - 64, at + 12 + 64},
      {{"-F", "-B", "5", "-A", "7", "-e", "SECRET-TOKEN"}, 12, at - 5, at + 12 + 7},
      {{"-F", "-C", "0", "-e", "TOKEN-42", "-e", "SECRET-TOKEN-42"}, 15, at, at + 15},
      // Regexes: the region starts no earlier than the match's line.
      {{"-E", "-e", "SECRET-[A-Z]+-[0-9]+"}, 15, line, at + 15 + 64},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"--pcap", path, "--stream", "--json"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const GrepRun run = run_gpufilter(args);
    ASSERT_EQ(run.status, 0) << run.err;
    std::size_t seen = 0;
    std::istringstream in(run.out);
    for (std::string text; std::getline(in, text);) {
      const json data = json::parse(text).at("data");
      ++seen;
      ASSERT_EQ(data.at("matches").size(), 1u) << text;
      const json& m = data.at("matches")[0];
      EXPECT_EQ(m.at("offset"), at) << text;
      EXPECT_EQ(m.at("length"), c.length) << text;
      EXPECT_EQ(m.at("match").at("text"), message.substr(at, c.length)) << text;
      ASSERT_EQ(data.at("regions").size(), 1u) << text;
      const json& r = data.at("regions")[0];
      EXPECT_EQ(r.at("offset"), c.region_start) << text;
      EXPECT_EQ(r.at("payload"), message.substr(c.region_start, c.region_end - c.region_start)) << text;
    }
    EXPECT_EQ(seen, flows) << describe_args(args);
  }
}

// Many matches in one flow of one-byte segments: every one listed up to the limit, each
// at its offset; -o prints them; the rest are counted.
TEST_F(CaptureOutput, ManyMatchesInOneByteSegments) {
  TempDir dir;
  std::string message;
  for (int i = 0; i < 300; ++i) message += "k=" + std::to_string(i % 10) + ";";
  std::vector<Segment> segments = {{30000, 1, "", 0x02}};
  for (std::size_t i = 0; i < message.size(); ++i)
    segments.push_back({30000, static_cast<std::uint32_t>(2 + i), message.substr(i, 1)});
  segments.push_back({30000, static_cast<std::uint32_t>(2 + message.size()), "", 0x11});
  const std::string path = dir.write("bytes.pcap", build_capture(segments));
  const GrepRun run = run_gpufilter({"--pcap", path, "--stream", "--json", "-F", "-e", "k=7"});
  ASSERT_EQ(run.status, 0) << run.err;
  const json data = json::parse(run.out).at("data");
  EXPECT_EQ(data.at("matches").size(), 30u);
  for (std::size_t i = 0; i < data.at("matches").size(); ++i)
    EXPECT_EQ(data.at("matches")[i].at("offset"), 4 * (10 * i + 7));
  const GrepRun all = run_gpufilter({"--pcap", path, "--stream", "--json", "-F", "-e", "k="});
  const json every = json::parse(all.out).at("data");
  EXPECT_EQ(every.at("matches").size(), 256u);
  EXPECT_EQ(every.at("matches_left_out"), 300 - 256);
  const GrepRun only = run_gpufilter({"--pcap", path, "--stream", "-o", "-b", "-F", "-e", "k=7"});
  EXPECT_NE(only.out.find("  client 28:k=7\n"), std::string::npos) << only.out;
}

// A flow's first data segment sent after more than 1 MiB of the segments behind it: the
// reassembler skipped its gap before it came, so its bytes are not scanned (tshark puts
// them back). That is said on standard error, not silently lost; -s hides it.
TEST_F(CaptureOutput, GapsSkippedEarlyAreSaid) {
  const std::string first = "BIGPATT" + std::string(1393, 'a');
  std::vector<Segment> segments = {{21000, 1000, "", 0x02}};
  std::uint32_t seq = 1001 + static_cast<std::uint32_t>(first.size());
  for (int i = 0; i < 1000; ++i, seq += 1400) segments.push_back({21000, seq, std::string(1400, 'b')});
  segments.push_back({21000, 1001, first});
  segments.push_back({21000, seq, "", 0x11});
  TempDir dir;
  const std::string path = dir.write("late.pcap", build_capture(segments));
  const GrepRun run = run_gpufilter({"--pcap", path, "--stream", "-c", "-e", "bbbb"});
  EXPECT_EQ(run.out, "1\n");
  EXPECT_NE(run.err.find("--stream skipped 1 gaps (1400 bytes missing then) early: a flow's direction held more "
                         "than 1 MiB (or 16384 pieces) of out-of-order data"),
            std::string::npos)
      << run.err;
  EXPECT_EQ(run_gpufilter({"--pcap", path, "--stream", "-s", "-c", "-e", "bbbb"}).err, "");
  // Segments in order skip nothing and say nothing.
  std::vector<Segment> ordered = {segments.front(), segments[segments.size() - 2]};
  ordered.insert(ordered.end(), segments.begin() + 1, segments.end() - 2);
  ordered.push_back(segments.back());
  const GrepRun in_order =
      run_gpufilter({"--pcap", dir.write("ordered.pcap", build_capture(ordered)), "--stream", "-c", "-e", "BIGPATT"});
  EXPECT_EQ(in_order.out, "1\n");
  EXPECT_EQ(in_order.err, "");
}

// A record whose microseconds field holds two seconds (a writer's bug) is the instant 2 s
// later, in absolute and relative times alike.
TEST_F(CaptureOutput, MicrosecondsOfASecondOrMoreCarryIntoTheSeconds) {
  std::string file = build_capture({{22000, 1000, "hello one"}, {22000, 1010, "hello two"}});
  for (int i = 0; i < 4; ++i) file[28 + i] = static_cast<char>((2000000u >> (8 * i)) & 0xff);  // the first record's
  TempDir dir;
  const std::string path = dir.write("usec.pcap", file);
  const GrepRun json_run = run_gpufilter({"--pcap", path, "--json", "-e", "hello one"});
  EXPECT_NE(json_run.out.find("2023-11-14T22:13:22.000000"), std::string::npos) << json_run.out;
  EXPECT_EQ(json_run.out.find(".2000000"), std::string::npos) << json_run.out;
  const GrepRun delta = run_gpufilter({"--pcap", path, "--time=delta", "-e", "hello"});
  EXPECT_NE(delta.out.find("-1.999998"), std::string::npos) << delta.out;
}

}  // namespace
}  // namespace gpufilter::test

namespace gpufilter::test {
namespace {

// tshark's frame times of a capture, sorted: which packets it holds, whatever their order.
std::vector<std::string> frame_times(const std::string& path) {
  std::vector<std::string> times;
  std::istringstream in(command_output("tshark -n -r '" + path + "' -T fields -e frame.time_epoch -e tcp.srcport 2>/dev/null"));
  for (std::string line; std::getline(in, line);) times.push_back(line);
  std::sort(times.begin(), times.end());
  return times;
}

// --stream --pcap-out from standard input: a selected flow's packets from before its
// match are written too (held while the flow is undecided), as the two-pass file run
// writes them; past the hold limit the early packets are missing and a notice says so.
TEST_F(CaptureOutput, StreamPcapOutFromStandardInputHasTheEarlyPackets) {
  TempDir dir;
  std::vector<Segment> segments;
  std::uint32_t seq[3] = {1001, 5001, 9001};
  const std::uint16_t ports[3] = {40001, 40002, 40003};
  for (const std::uint16_t port : ports) segments.push_back({port, seq[port - 40001] - 1, "", 0x02});
  for (int i = 0; i < 12; ++i) {
    for (const std::uint16_t port : ports) {
      std::string payload = "line " + std::to_string(i) + " of flow " + std::to_string(port) + "\n";
      if (i == 9 && port != 40002) payload = "the MATCH-ME here\n";
      segments.push_back({port, seq[port - 40001], payload});
      seq[port - 40001] += static_cast<std::uint32_t>(payload.size());
    }
  }
  for (const std::uint16_t port : ports) segments.push_back({port, seq[port - 40001], "", 0x11});
  const std::string capture = build_capture(segments);
  const std::string path = dir.write("flows.pcap", capture);
  const std::string from_file = dir.file("file.pcap");
  const std::string from_stdin = dir.file("stdin.pcap");
  ASSERT_EQ(run_gpufilter({"--pcap", path, "--stream", "--pcap-out", from_file, "-c", "MATCH-ME"}).out, "2\n");
  const GrepRun piped = run_gpufilter({"--pcap", "-", "--stream", "--pcap-out", from_stdin, "-c", "MATCH-ME"}, capture);
  ASSERT_EQ(piped.status, 0) << piped.err;
  EXPECT_EQ(piped.out, "2\n");
  EXPECT_EQ(frame_times(from_stdin).size(), 2u * 14);
  EXPECT_EQ(frame_times(from_stdin), frame_times(from_file));
  EXPECT_TRUE(piped.err.empty()) << piped.err;
  // The same frames on a real capture whose flow ends with FINs both ways and then ACKs,
  // which belong to no open flow (nor its count), from a file or not.
  const std::string smtp = corpus_path("pcap/smtp.pcap");
  ASSERT_EQ(run_gpufilter({"--pcap", smtp, "--stream", "--pcap-out", from_file, "-q", "RCPT"}).status, 0);
  ASSERT_EQ(run_gpufilter({"--pcap", "-", "--stream", "--pcap-out", from_stdin, "-q", "RCPT"}, read_file(smtp)).status, 0);
  EXPECT_EQ(frame_times(from_stdin), frame_times(from_file));
  EXPECT_EQ(frame_times(from_file).size(), 51u);  // the flow's count: "packets 51"

  // 1.2 MB before the match: beyond the 1 MiB a flow may hold.
  std::vector<Segment> big = {{40010, 0, "", 0x02}};
  std::uint32_t s = 1;
  for (int i = 0; i < 20; ++i) {
    big.push_back({40010, s, std::string(60000, 'x')});
    s += 60000;
  }
  big.push_back({40010, s, "MATCH-ME"});
  big.push_back({40010, s + 8, "", 0x11});
  const GrepRun cut = run_gpufilter({"--pcap", "-", "--stream", "--pcap-out", dir.file("cut.pcap"), "-c", "MATCH-ME"},
                                    build_capture(big));
  EXPECT_EQ(cut.status, 0) << cut.err;
  EXPECT_NE(cut.err.find("1 selected flows lack packets"), std::string::npos) << cut.err;
  const std::size_t written = frame_times(dir.file("cut.pcap")).size();
  EXPECT_GT(written, 2u);
  EXPECT_LT(written, big.size());
}

}  // namespace
}  // namespace gpufilter::test

namespace gpufilter::test {
namespace {

// A capture file matched per packet on several threads (cli/packet_farm.hpp) prints byte
// for byte what one thread prints: on every sample (pcapng and damaged files are read
// by one thread anyway), big-endian and nanosecond captures, and a capture of many
// pieces built here, with text, JSON, -o -b, -v, -c, regexes and a BPF filter.
TEST_F(CaptureOutput, ManyThreadsPrintWhatOneThreadPrints) {
  TempDir dir;
  // Many pieces: the SMTP flow's packets again and again (the farm cuts 512 KiB pieces).
  std::vector<Segment> segments;
  for (std::uint32_t copy = 0; copy < 4000; ++copy) {
    const auto port = static_cast<std::uint16_t>(1024 + copy % 60000);
    segments.push_back({port, 1, "", 0x02});
    segments.push_back({port, 2, "EHLO host" + std::to_string(copy) + "\r\nMAIL FROM: <a@b>\r\n"});
    segments.push_back({port, 100, std::string(300, static_cast<char>('a' + copy % 26)) + "\r\nRCPT TO: <c@d>\r\n"});
  }
  const std::string built = build_capture(segments);
  // A record longer than the file's snaplen halfway: libpcap reads on from it (cutting it
  // to the snaplen), after the mapping and the farm stopped there.
  std::vector<Segment> oversized = segments;
  oversized.insert(oversized.begin() + 5000, Segment{2000, 1, std::string(70000, 'z') + "MAIL FROM"});
  // Payloads that hold chains of fake pcap records across the 4 MiB points where the
  // farm's threads guess where a record starts: the guesses are wrong there, and the
  // calling thread walks those parts again from where the part before ended.
  std::string fakes;
  for (int i = 0; i < 1800; ++i) {
    put32(fakes, 1700000000);
    put32(fakes, 5);
    put32(fakes, 16);
    put32(fakes, 16);
    fakes += "fake-record-data";
  }
  std::vector<Segment> decoys;
  for (std::uint32_t copy = 0; copy < 300; ++copy) decoys.push_back({static_cast<std::uint16_t>(3000 + copy), 7, fakes});
  const std::vector<std::string> captures = {
      dir.write("decoys.pcap", build_capture(decoys)),
      dir.write("many.pcap", built), dir.write("big-nano.pcap", build_capture(segments, true, true)),
      dir.write("version-2.2.pcap", build_capture(segments, false, false, true)),
      dir.write("cut.pcap", built.substr(0, built.size() * 2 / 3)),
      dir.write("oversized.pcap", build_capture(oversized)), corpus_path("pcap/http.cap"),
      corpus_path("pcap/smtp.pcap"), corpus_path("pcap/http_redirects.pcapng")};
  const std::vector<std::vector<std::string>> runs = {
      {"-F", "-e", "MAIL FROM", "-e", "Host:"},
      {"--json", "-F", "-e", "RCPT"},
      {"-o", "-b", "-E", "-e", "host[0-9]+", "-e", "GET [^ ]+"},
      {"-c", "-v", "-F", "-e", "aaaa"},
      {"-c", "--bpf", "tcp port 1030 or udp", "-e", ""},
      {"--hexdump", "-i", "-F", "-e", "ehlo"},
      {"-c", "-F", "-e", "fake-record"},
  };
  SweepShare share;
  for (const std::string& capture : captures) {
    for (const std::vector<std::string>& run : runs) {
      if (!share.take()) continue;
      std::vector<std::string> args = {"--engine=host", "--pcap", capture};
      args.insert(args.end(), run.begin(), run.end());
      const GrepRun one = run_gpufilter(args + Args{"-j", "1"});
      const GrepRun many = run_gpufilter(args + Args{"-j", "4"});
      EXPECT_EQ(many.status, one.status) << describe_args(args) << one.err;
      EXPECT_EQ(many.err, one.err) << describe_args(args);
      EXPECT_TRUE(many.out == one.out) << describe_args(args) << ": " << first_difference(one.out, many.out);
      // Standard input is read by libpcap alone, record by record.
      Args piped = args;
      piped[2] = "-";
      const GrepRun libpcap = run_gpufilter(piped + Args{"--label", capture, "-j", "1"}, read_file(capture));
      EXPECT_EQ(libpcap.status, one.status) << describe_args(args) << one.err;
      EXPECT_TRUE(libpcap.out == one.out) << describe_args(args) << ": " << first_difference(libpcap.out, one.out);
      std::string err = libpcap.err;
      if (const std::size_t at = err.find("(standard input)"); at != std::string::npos) err.replace(at, 16, capture);
      EXPECT_EQ(err, one.err) << describe_args(args);
    }
  }
}

// A capture of many TCP flows at once, both directions, with segments out of order and
// sent again, flows ended by FIN, by RST, by idling out (gaps of capture time past the
// reassembler's two minutes) and by the capture's end, and UDP packets between them; words
// to find split across segments. `seed` picks it; `oversized`: a record longer than the
// file's snaplen halfway (libpcap reads on from it, cutting it).
std::string mixed_capture(unsigned seed, bool oversized = false) {
  std::mt19937 rng(seed);
  const std::vector<std::string> words = {"needle ", "Host: x\r\n", "GET /index ", "MAIL FROM ", "filler ", "data "};
  std::string file;
  put32(file, 0xa1b2c3d4);
  file += std::string("\x02\x00\x04\x00", 4);
  put32(file, 0);
  put32(file, 0);
  put32(file, 65535);
  put32(file, 1);  // Ethernet
  std::uint32_t seconds = 1700000000;
  std::uint32_t usec = 0;
  const auto frame = [&](bool tcp, bool reply, std::uint16_t port, std::uint32_t seq, std::uint8_t flags,
                         const std::string& payload) {
    const std::size_t header = tcp ? 20 : 8;
    std::string f(14 + 20 + header, '\0');
    f[12] = 0x08;
    const std::size_t total = 20 + header + payload.size();
    f[14] = 0x45, f[16] = static_cast<char>(total >> 8), f[17] = static_cast<char>(total & 0xff);
    f[22] = 64, f[23] = tcp ? 6 : 17;
    f[26] = 10, f[29] = static_cast<char>(reply ? 2 : 1), f[30] = 10, f[33] = static_cast<char>(reply ? 1 : 2);
    const std::uint16_t sport = reply ? 80 : port, dport = reply ? port : 80;
    f[34] = static_cast<char>(sport >> 8), f[35] = static_cast<char>(sport & 0xff);
    f[36] = static_cast<char>(dport >> 8), f[37] = static_cast<char>(dport & 0xff);
    if (tcp) {
      for (int k = 0; k < 4; ++k) f[38 + k] = static_cast<char>(seq >> (24 - 8 * k));
      f[46] = 0x50, f[47] = static_cast<char>(flags);
    } else {
      const std::size_t length = 8 + payload.size();
      f[38] = static_cast<char>(length >> 8), f[39] = static_cast<char>(length & 0xff);
    }
    f += payload;
    usec = static_cast<std::uint32_t>((usec + 1 + rng() % 50000) % 1000000);
    if (usec < 50000) seconds += rng() % 40 == 0 ? 200 : 1;  // now and then, past the idle timeout
    put32(file, seconds);
    put32(file, usec);
    put32(file, static_cast<std::uint32_t>(f.size()));
    put32(file, static_cast<std::uint32_t>(f.size()));
    file += f;
  };
  struct Open {
    std::uint16_t port;
    std::uint32_t seq[2];
    std::string pending;  // a segment held back, sent after the next one (out of order)
    int direction = 0;
  };
  std::vector<Open> open;
  std::uint16_t next_port = 1024;
  for (int step = 0; step < 3000; ++step) {
    if (oversized && step == 1500) frame(false, false, 5000, 0, 0, std::string(70000, 'z') + "needle");
    const auto what = static_cast<unsigned>(rng() % 100);
    if (open.size() < 40 && (open.empty() || what < 8)) {
      Open o{next_port++, {static_cast<std::uint32_t>(rng()), static_cast<std::uint32_t>(rng())}, "", 0};
      frame(true, false, o.port, o.seq[0]++, 0x02, "");
      frame(true, true, o.port, o.seq[1]++, 0x12, "");
      open.push_back(o);
      continue;
    }
    if (what < 14) {
      std::string payload;
      for (int w = 0; w < 3; ++w) payload += words[rng() % words.size()];
      frame(false, rng() % 2 == 1, static_cast<std::uint16_t>(5000 + rng() % 100), 0, 0, payload);
      continue;
    }
    const std::size_t i = rng() % open.size();
    Open& o = open[i];
    if (what < 20) {  // the flow ends: FIN from both sides, or RST
      const bool reset = rng() % 3 == 0;
      frame(true, false, o.port, o.seq[0], reset ? 0x14 : 0x11, "");
      if (!reset) frame(true, true, o.port, o.seq[1], 0x11, "");
      open.erase(open.begin() + static_cast<long>(i));
      continue;
    }
    const int d = static_cast<int>(rng() % 2);
    std::string payload;
    for (int w = 0, n = 1 + static_cast<int>(rng() % 4); w < n; ++w) payload += words[rng() % words.size()];
    payload = payload.substr(rng() % 3);  // words split across segments
    const std::uint32_t seq = o.seq[d];
    o.seq[d] += static_cast<std::uint32_t>(payload.size());
    if (what < 26) {  // sent after the next segment of the same direction
      const std::uint32_t later = o.seq[d];
      std::string next = words[rng() % words.size()];
      o.seq[d] += static_cast<std::uint32_t>(next.size());
      frame(true, d == 1, o.port, later, 0x18, next);
      frame(true, d == 1, o.port, seq, 0x18, payload);
    } else {
      frame(true, d == 1, o.port, seq, 0x18, payload);
      if (what < 30) frame(true, d == 1, o.port, seq, 0x18, payload);  // sent again
    }
  }
  return file;
}

// --stream over a capture file on several threads (cli/flow_farm.hpp: each reassembles
// its own flows) prints byte for byte what one thread prints, flows numbered and ended
// in the same order: the samples and captures of many flows built here, with text,
// JSON, -o -b, -v, -c, -w, regexes, the empty pattern and a BPF filter, in rounds of every
// size from one packet up (GPUFILTER_FLOW_ROUND_BYTES), so that flows, their ends and the
// writing cross many rounds' edges, read by three threads in parts as small as a record or two
// (GPUFILTER_READ_PART_BYTES: most parts' first records are guessed, some wrongly, and
// a cut or oversized record is met in a part of its own).
TEST_F(CaptureOutput, ManyThreadsPrintWhatOneThreadPrintsPerFlow) {
  TempDir dir;
  const std::string mixed = mixed_capture(1);
  const std::vector<std::string> captures = {
      dir.write("mixed-1.pcap", mixed), dir.write("mixed-2.pcap", mixed_capture(2)),
      dir.write("cut.pcap", mixed.substr(0, mixed.size() * 2 / 3)), dir.write("oversized.pcap", mixed_capture(3, true)),
      corpus_path("pcap/http.cap"), corpus_path("pcap/smtp.pcap"), corpus_path("pcap/v6-http.cap"),
      corpus_path("pcap/telnet-raw.pcap"), corpus_path("pcap/dns.cap")};
  const std::vector<std::vector<std::string>> runs = {
      {"-F", "-e", "needle", "-e", "Host:"},
      {"--json", "-F", "-e", "GET /"},
      {"-o", "-b", "-E", "-e", "nee+dle", "-e", "Ho[a-z]t:"},
      {"-c", "-v", "-F", "-e", "MAIL FROM"},
      {"-e", ""},
      {"--hexdump", "-i", "-F", "-e", "NEEDLE"},
      {"-w", "-F", "-e", "data"},
      {"-P", "-e", "GET /\\w+"},
      {"--bpf", "tcp port 80 or udp", "-F", "-e", "filler"},
  };
  // Rounds, and the parts the reading threads take (cli/packets_ahead.hpp), of many sizes.
  // Five flow threads in one of them: flows ended idle and at the end come from many
  // threads at once, and are written in one thread's order.
  constexpr std::array<std::pair<const char*, const char*>, 4> shapes = {
      {{"1", "300"}, {"900", "700"}, {"20000", "5000"}, {"", ""}}};
  // Under a sanitizer (114 s for every shape, the longest test of CI's slowest stage)
  // each capture and run meets one shape, in turn: every shape still meets 20 of them.
  const std::size_t shapes_per_run = whole_sweeps() ? shapes.size() : 1;
  std::size_t next_shape = 0;
  for (const std::string& capture : captures) {
    for (const std::vector<std::string>& run : runs) {
      std::vector<std::string> args = {"--engine=host", "--stream", "--pcap", capture};
      args.insert(args.end(), run.begin(), run.end());
      const GrepRun one = run_gpufilter(args + Args{"-j", "1"});
      for (std::size_t k = 0; k < shapes_per_run; ++k) {
        const auto& [round, part] = shapes[next_shape++ % shapes.size()];
        std::vector<std::string> env;
        if (*round != '\0') env.push_back(std::string("GPUFILTER_FLOW_ROUND_BYTES=") + round);
        if (*part != '\0') env.insert(env.end(), {std::string("GPUFILTER_READ_PART_BYTES=") + part, "GPUFILTER_READ_THREADS=3"});
        if (std::string(round) == "900") env.push_back("GPUFILTER_FLOW_THREADS=5");
        const GrepRun many = run_gpufilter(args + Args{"-j", "3"}, {}, {}, env);
        EXPECT_EQ(many.status, one.status) << describe_args(args) << round << one.err;
        EXPECT_EQ(many.err, one.err) << describe_args(args) << round;
        EXPECT_TRUE(many.out == one.out) << describe_args(args) << " rounds of " << round << ": "
                                         << first_difference(one.out, many.out);
      }
    }
  }
}

}  // namespace
}  // namespace gpufilter::test

namespace gpufilter::test {
namespace {

// The frames ngrep prints ("T src -> dst [flags] #N" with -q; "?" for a protocol it does
// not name), for a pattern.
std::set<long> ngrep_frames(const std::string& path, const std::vector<std::string>& args) {
  std::string command = "ngrep -q -I '" + path + "'";
  for (const std::string& a : args) command += " " + shell_quote(a);
  std::set<long> frames;
  std::istringstream in(command_output(command));
  for (std::string line; std::getline(in, line);) {
    if (line.size() < 2 || std::string_view("TUI?").find(line[0]) == std::string_view::npos || line[1] != ' ') continue;
    const std::size_t hash = line.rfind(" #");
    if (hash != std::string::npos) frames.insert(std::stol(line.substr(hash + 2)));
  }
  return frames;
}

// ngrep, where it is installed (Debian's ngrep), selects the same packets: strings taken
// from the payloads, -i, -v (ngrep's with -e, which shows empty packets), a 0x hex
// pattern and a BPF expression after the pattern, on the samples whose every frame is IP
// (ngrep numbers only the packets its filter passes: with one, the counts are compared).
TEST_F(CaptureOutput, NgrepSelectsTheSamePackets) {
  if (std::system("ngrep -V > /dev/null 2>&1") != 0) GTEST_SKIP() << "ngrep is not installed (apt install ngrep)";
  std::mt19937 rng(23);
  std::size_t compared = 0;
  for (const std::string name : {"http.cap", "smtp.pcap", "dns.cap", "v6-http.cap", "telnet-raw.pcap"}) {
    const std::string path = corpus_path("pcap/" + name);
    std::vector<std::string> strings = {"HTTP", "e", "250 "};
    for (const auto& [frame, payload] : tshark_payloads(path)) {
      if (payload.size() < 6 || rng() % 4 != 0) continue;
      std::string s = payload.substr(rng() % (payload.size() - 4), 4);
      if (std::all_of(s.begin(), s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)); }))
        strings.push_back(s);
      if (strings.size() == 8) break;
    }
    for (const std::string& s : strings) {
      const auto ours = [&](std::vector<std::string> extra) {
        std::vector<std::string> args = {"--pcap", path, "--json", "-F"};
        args.insert(args.end(), extra.begin(), extra.end());
        std::set<long> frames;
        for (const auto& [frame, data] : packets_of(run_gpufilter(args).out)) frames.insert(frame);
        return frames;
      };
      EXPECT_EQ(ours({"-e", s}), ngrep_frames(path, {s})) << name << " '" << s << "'";
      EXPECT_EQ(ours({"-i", "-e", s}), ngrep_frames(path, {"-i", s})) << name << " -i '" << s << "'";
      // ngrep shows packets without payload only with -e; grep's -v selects empty records.
      EXPECT_EQ(ours({"-v", "-e", s}), ngrep_frames(path, {"-e", "-v", s})) << name << " -v '" << s << "'";
      // ngrep numbers the packets its BPF filter passes; gpufilter keeps the frame numbers.
      EXPECT_EQ(ours({"-e", s, "tcp"}).size(), ngrep_frames(path, {s, "tcp"}).size()) << name << " '" << s << "' tcp";
      compared += 4;
    }
    // With no matcher named the patterns are extended regexes, as ngrep's match expression.
    for (const std::string re : {"GET|POST", "HTTP/1\\.[01] [0-9]{3}", "(MAIL|RCPT) (FROM|TO)", "[a-z]+\\.(com|org|net)"}) {
      std::set<long> frames;
      for (const auto& [frame, data] : packets_of(run_gpufilter({"--pcap", path, "--json", "-e", re}).out)) frames.insert(frame);
      EXPECT_EQ(frames, ngrep_frames(path, {re})) << name << " '" << re << "'";
      ++compared;
    }
    EXPECT_EQ(run_gpufilter({"--pcap", path, "-c", "-X", "0x48545450"}).out,
              std::to_string(ngrep_frames(path, {"-X", "0x48545450"}).size()) + "\n")
        << name;
  }
  std::printf("ngrep comparisons: %zu\n", compared);
}

}  // namespace
}  // namespace gpufilter::test
