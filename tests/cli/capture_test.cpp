// gpufilter on captures, against tshark (Debian's, the independent oracle): for every
// sample in ../shared/corpus/pcap/, the frames `--match-frame` selects for a string, and
// for a list of fifty at once, are exactly the frames `tshark -Y 'frame contains ...'`
// selects; --pcap-out files re-read by tshark list the same frames; --stream finds strings
// split across TCP segments (the SMTP message, Telnet's one character per packet, and
// captures built here with 1-byte, out-of-order and retransmitted segments); truncated
// and corrupt captures keep what came before and exit 2; a live capture on loopback.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <pcap/pcap.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "differential.hpp"
#include "json_records.hpp"
#include "testutil/testutil.hpp"

namespace gpufilter::test {
namespace {

using json = nlohmann::json;

const std::vector<std::string>& samples() {
  static const std::vector<std::string> names = {"http.cap",       "dns.cap",          "smtp.pcap",
                                                 "telnet-raw.pcap", "v6-http.cap",      "syslog_udp.pcap",
                                                 "syslog-single-udp.trace", "chrome-34-google.trace",
                                                 "http_redirects.pcapng"};
  return names;
}

// The client's segments of a flow, from tshark's `-z follow,tcp,raw` output (one hex line
// per segment; the server's lines are indented with a tab).
std::vector<std::string> client_segments(const std::string& raw) {
  std::vector<std::string> segments;
  std::istringstream lines(raw);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '\t' || line.find_first_not_of("0123456789abcdef") != std::string::npos) continue;
    std::string bytes;
    for (std::size_t i = 0; i + 1 < line.size(); i += 2) bytes.push_back(static_cast<char>(std::stoi(line.substr(i, 2), nullptr, 16)));
    segments.push_back(bytes);
  }
  return segments;
}

// tshark's display-filter string literal for `s` (printable ASCII only).
std::string tshark_literal(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::set<long> tshark_frames(const std::string& file, const std::string& filter) {
  const std::string command = "tshark -n -r '" + file + "' -Y '" + filter + "' -T fields -e frame.number";
  std::set<long> frames;
  std::istringstream in(command_output(command));
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) frames.insert(std::stol(line));
  return frames;
}

std::set<long> json_frames(const std::string& out) {
  std::set<long> frames;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) frames.insert(json::parse(line).at("data").at("frame").get<long>());
  return frames;
}

// Printable substrings of the capture's bytes: strings some frames contain.
std::vector<std::string> strings_of(const std::string& bytes, std::mt19937& rng, std::size_t count) {
  std::vector<std::string> runs;
  std::string run;
  for (const char c : bytes) {
    if (c >= 0x20 && c < 0x7f && c != '\'') {
      run += c;
    } else {
      if (run.size() >= 4) runs.push_back(run);
      run.clear();
    }
  }
  std::vector<std::string> picked;
  for (std::size_t i = 0; i < count && !runs.empty(); ++i) {
    const std::string& r = runs[rng() % runs.size()];
    const std::size_t length = std::min<std::size_t>(r.size(), 3 + rng() % 8);
    picked.push_back(r.substr(rng() % (r.size() - length + 1), length));
  }
  picked.push_back("zq_never_in_any_capture");
  return picked;
}

class Capture : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_tshark()) GTEST_SKIP() << "tshark is not installed (apt install tshark)";
  }
};

// Single strings and fifty at once, on every sample, against tshark's frame contains.
TEST_F(Capture, MatchFrameEqualsTsharkFrameContains) {
  std::mt19937 rng(61);
  TempDir dir;
  std::size_t compared = 0, selected = 0;
  SweepShare share;
  for (const std::string& name : samples()) {
    const std::string path = corpus_path("pcap/" + name);
    const std::string bytes = read_file(path);
    const std::vector<std::string> strings = strings_of(bytes, rng, 6);
    for (const std::string& s : strings) {
      if (!share.take()) continue;
      const GrepRun ours = run_gpufilter({"-F", "--pcap", path, "--match-frame", "--json", "-e", s});
      const std::set<long> want = tshark_frames(path, "frame contains " + tshark_literal(s));
      ASSERT_EQ(ours.status, want.empty() ? 1 : 0) << name << " '" << s << "': " << ours.err;
      EXPECT_EQ(json_frames(ours.out), want) << name << " '" << s << "'";
      const GrepRun count = run_gpufilter({"-F", "--pcap", path, "--match-frame", "-c", "-e", s});
      EXPECT_EQ(count.out, std::to_string(want.size()) + "\n") << name << " '" << s << "'";
      compared += 1;
      selected += want.size();
    }
    // Fifty strings in one run: a frame is selected when it contains any of them.
    const std::vector<std::string> many = strings_of(bytes, rng, 50);
    std::string filter;
    for (const std::string& s : many) filter += (filter.empty() ? "" : " || ") + std::string("frame contains ") + tshark_literal(s);
    const std::string list = dir.write("many-" + name, pattern_file(many));
    const GrepRun ours = run_gpufilter({"-F", "--pcap", path, "--match-frame", "--json", "-f", list});
    const std::set<long> want = tshark_frames(path, filter);
    EXPECT_EQ(json_frames(ours.out), want) << name << " (50 strings)";
    std::printf("%s: 50 strings: %zu frames selected by both gpufilter and tshark\n", name.c_str(), want.size());
    compared += 1;
  }
  std::printf("tshark comparisons: %zu, frames selected in the single-string runs: %zu\n", compared, selected);
  EXPECT_GT(selected, whole_sweeps() ? 50u : 10u);
}

// Case folding and -v per packet, against tshark's "frame matches (?i)" and "!".
TEST_F(Capture, IgnoreCaseAndInvertPerPacket) {
  const std::string path = corpus_path("pcap/http.cap");
  const GrepRun ours = run_gpufilter({"-F", "--pcap", path, "--match-frame", "--json", "-i", "-e", "content-type"});
  EXPECT_EQ(json_frames(ours.out), tshark_frames(path, "frame matches \"(?i)content-type\""));
  const GrepRun inverted = run_gpufilter({"-F", "--pcap", path, "--match-frame", "--json", "-v", "-e", "HTTP"});
  EXPECT_EQ(json_frames(inverted.out), tshark_frames(path, "!(frame contains \"HTTP\")"));
}

// Binary patterns: -X hex and --escapes select what the same bytes as text select.
TEST_F(Capture, HexAndEscapedPatterns) {
  const std::string path = corpus_path("pcap/http.cap");
  const GrepRun text = run_gpufilter({"-F", "--pcap", path, "--match-frame", "--json", "-e", "GET /"});
  const GrepRun hex = run_gpufilter({"-F", "--pcap", path, "--match-frame", "--json", "-X", "-e", "47:45:54:20:2f"});
  const GrepRun escaped = run_gpufilter({"-F", "--pcap", path, "--match-frame", "--json", "--escapes", "-e", "\\x47ET /"});
  EXPECT_FALSE(json_frames(text.out).empty());
  EXPECT_EQ(json_frames(hex.out), json_frames(text.out));
  EXPECT_EQ(json_frames(escaped.out), json_frames(text.out));
  // CRLF CRLF ends HTTP headers: a pattern with control bytes.
  const GrepRun crlf = run_gpufilter({"-F", "--pcap", path, "--match-frame", "-c", "-X", "0d0a0d0a"});
  const std::set<long> want = tshark_frames(path, "frame contains 0d:0a:0d:0a");
  EXPECT_EQ(crlf.out, std::to_string(want.size()) + "\n");
  EXPECT_EQ(run_gpufilter({"-F", "--pcap", path, "-X", "-e", "4g"}).status, 2);
}

// -w with a pattern holding a newline byte, and -w with the empty pattern, select alike in
// the C locale and in UTF-8 (where -w otherwise goes through the regex path, line by
// line): a newline pattern is not cut into lines (syslog_udp.pcap holds no '\n' at all),
// and the empty pattern follows grep -w '' per line in both.
TEST_F(Capture, WordRulesForNewlineAndEmptyPatternsDoNotDependOnTheLocale) {
  const std::string syslog = corpus_path("pcap/syslog_udp.pcap");
  const std::string http = corpus_path("pcap/http.cap");
  for (const char* locale : {"LC_ALL=C", "LC_ALL=C.UTF-8"}) {
    SCOPED_TRACE(locale);
    const std::vector<std::string> env{locale};
    EXPECT_EQ(run_gpufilter({"--pcap", syslog, "-c", "-w", "-X", "0a"}, {}, {}, env).out, "0\n");
    EXPECT_EQ(run_gpufilter({"--pcap", syslog, "-c", "-w", "-X", "0a48"}, {}, {}, env).out, "0\n");
    EXPECT_EQ(run_gpufilter({"--pcap", http, "-c", "-w", "-X", "0d0a"}, {}, {}, env).out,
              run_gpufilter({"--pcap", http, "-c", "-X", "0d0a"}, {}, {}, env).out);
    EXPECT_EQ(run_gpufilter({"--pcap", http, "-c", "-w", ""}, {}, {}, env).out, "43\n");
    EXPECT_EQ(run_gpufilter({"--pcap", http, "-c", "-x", ""}, {}, {}, env).out, "22\n");
  }
}

// --pcap-out: tshark reads the file back and lists exactly the selected frames' bytes.
TEST_F(Capture, PcapOutIsReadByTshark) {
  TempDir dir;
  for (const std::string& name : {std::string("http.cap"), std::string("http_redirects.pcapng")}) {
    const std::string path = corpus_path("pcap/" + name);
    const std::string out = dir.path() + "/out-" + name + ".pcap";
    const GrepRun r = run_gpufilter({"-F", "--pcap", path, "--match-frame", "--pcap-out", out, "-q", "-e", "HTTP/1."});
    ASSERT_EQ(r.status, 0) << r.err;
    // -q stops at the first: compare without it.
    const GrepRun all = run_gpufilter({"-F", "--pcap", path, "--match-frame", "--pcap-out", out, "-c", "-e", "HTTP/1."});
    const std::set<long> want = tshark_frames(path, "frame contains \"HTTP/1.\"");
    EXPECT_EQ(all.out, std::to_string(want.size()) + "\n");
    // The written capture: as many frames, the same lengths and times as tshark's selection.
    const std::string original =
        command_output("tshark -n -r '" + path + "' -Y 'frame contains \"HTTP/1.\"' -T fields -e frame.len -e frame.time_epoch");
    const std::string written = command_output("tshark -n -r '" + out + "' -T fields -e frame.len -e frame.time_epoch");
    EXPECT_EQ(written, original) << name;
    EXPECT_EQ(json_frames(run_gpufilter({"-F", "--pcap", out, "--json", "--match-frame", "-e", "HTTP/1."}).out).size(),
              want.size());
  }
}

// --pcap-out -: the capture is all there is on standard output, whatever report was
// asked for, so tshark -r - reads it: the same bytes --pcap-out FILE writes, and for
// single packets exactly the frames tshark's own filter selects.
TEST_F(Capture, PcapOutToStandardOutputIsTheOnlyOutput) {
  TempDir dir;
  const std::string path = corpus_path("pcap/http.cap");
  const std::string want =
      command_output("tshark -n -r '" + path + "' -Y 'frame contains \"HTTP/1.\"' -T fields -e frame.len -e frame.time_epoch");
  ASSERT_FALSE(want.empty());
  for (const std::vector<std::string>& extra : std::vector<std::vector<std::string>>{
           {}, {"-c"}, {"--json"}, {"--hexdump"}, {"--stream"}, {"--stream", "-c"}, {"--stream", "--json"},
           {"--stream", "--hexdump"}}) {
    const std::string file = dir.path() + "/file.pcap";
    const bool stream = !extra.empty() && extra[0] == "--stream";
    std::vector<std::string> args = {"-F", "--pcap", path, "-e", "HTTP/1."};
    if (!stream) args.push_back("--match-frame");  // tshark's frame contains
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<std::string> to_file = args;
    to_file.insert(to_file.end(), {"--pcap-out", file});
    std::vector<std::string> to_stdout = args;
    to_stdout.insert(to_stdout.end(), {"--pcap-out", "-"});
    const GrepRun piped = run_gpufilter(to_stdout);
    const std::string label = describe_args(to_stdout);
    ASSERT_EQ(piped.status, 0) << label << ": " << piped.err;
    ASSERT_EQ(run_gpufilter(to_file).status, 0) << label;
    EXPECT_EQ(piped.out, read_file(file)) << label;
    const std::string out = dir.path() + "/stdout.pcap";
    std::ofstream(out, std::ios::binary) << piped.out;
    const std::string read = command_output("tshark -n -r - -T fields -e frame.len -e frame.time_epoch < '" + out + "'");
    if (!stream) EXPECT_EQ(read, want) << label;
    EXPECT_FALSE(read.empty()) << label;
  }
  // /dev/stdout is standard output too.
  const GrepRun dev = run_gpufilter({"-F", "--pcap", path, "--match-frame", "-c", "-e", "HTTP/1.", "--pcap-out", "/dev/stdout"});
  EXPECT_EQ(dev.out.substr(0, 4), std::string("\xd4\xc3\xb2\xa1", 4)) << escape(dev.out, 40);
}

// --stream: the SMTP message spans segments; per packet its strings split, as one stream not.
TEST_F(Capture, StreamFindsStringsSplitAcrossSegments) {
  const std::string smtp = corpus_path("pcap/smtp.pcap");
  // The whole client stream, from tshark: what --stream must see.
  const std::string follow = command_output("tshark -n -q -r '" + smtp + "' -z follow,tcp,ascii,0");
  ASSERT_NE(follow.find("MAIL FROM"), std::string::npos);
  // Strings that straddle two of the client's segments: the last 6 bytes of one segment
  // and the first 6 of the next, from tshark's own reassembly (one hex line per segment).
  const std::string raw = command_output("tshark -n -q -r '" + smtp + "' -z follow,tcp,raw,0");
  const std::vector<std::string> segments = client_segments(raw);
  ASSERT_GT(segments.size(), 5u) << raw.substr(0, 400);
  std::vector<std::string> candidates;
  for (std::size_t i = 0; i + 1 < segments.size() && candidates.size() < 6; ++i) {
    if (segments[i].size() < 6 || segments[i + 1].size() < 6) continue;
    candidates.push_back(segments[i].substr(segments[i].size() - 6) + segments[i + 1].substr(0, 6));
  }
  // As --escapes patterns: segments end in CR LF, which a -e argument cannot hold raw.
  auto escaped = [](const std::string& bytes) {
    std::string e;
    for (const char c : bytes) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", static_cast<unsigned char>(c));
      e += (c >= 0x21 && c < 0x7f && c != '\\') ? std::string(1, c) : std::string(hex);
    }
    return e;
  };
  ASSERT_GE(candidates.size(), 3u);
  std::size_t split = 0;
  for (const std::string& s : candidates) {
    const GrepRun packets = run_gpufilter({"-F", "--pcap", smtp, "-c", "--escapes", "-e", escaped(s)});
    const GrepRun stream = run_gpufilter({"-F", "--pcap", smtp, "--stream", "--json", "--escapes", "-e", escaped(s)});
    ASSERT_EQ(stream.status, 0) << s << ": " << stream.err;
    // The TCP flow's object (a UDP packet, DNS say, could hold the string too).
    std::istringstream in(stream.out);
    json flow;
    for (std::string line; std::getline(in, line);) {
      const json record = json::parse(line);
      if (record.at("type") == "flow") {
        flow = record.at("data");
        break;
      }
    }
    ASSERT_FALSE(flow.is_null()) << s << ": " << stream.out;
    EXPECT_EQ(flow.at("server").get<std::string>().substr(flow.at("server").get<std::string>().rfind(':')), ":25");
    EXPECT_EQ(flow.at("patterns").at(0).at("text"), s);
    EXPECT_EQ(flow.at("first_match").at("direction"), "client");
    if (packets.out == "0\n") ++split;
  }
  EXPECT_GE(split, 3u) << "strings across segment edges that some packet holds whole";
  std::printf("smtp.pcap: %zu strings straddle two client segments; per packet %zu of them are found nowhere, "
              "--stream finds all %zu\n",
              candidates.size(), split, candidates.size());
  // Telnet: the client types one character per packet: "fake" is only in the stream.
  const std::string telnet = corpus_path("pcap/telnet-raw.pcap");
  EXPECT_EQ(run_gpufilter({"-F", "--pcap", telnet, "-c", "-e", "ping www.yahoo"}).out, "0\n");
  EXPECT_EQ(run_gpufilter({"-F", "--pcap", telnet, "--stream", "-c", "-e", "ping www.yahoo"}).out, "1\n");
}

// A TCP flow written by the test with libpcap: "SECRET-TOKEN-12345" in 1-byte segments,
// shuffled, with retransmissions of overlapping ranges. --stream finds it exactly once;
// per packet it is nowhere.
TEST_F(Capture, StreamReassemblesOneByteOutOfOrderRetransmittedSegments) {
  TempDir dir;
  const std::string path = dir.path() + "/built.pcap";
  const std::string message = "hello ... SECRET-TOKEN-12345 ... bye";
  pcap_t* dead = pcap_open_dead(DLT_EN10MB, 65535);
  pcap_dumper_t* dumper = pcap_dump_open(dead, path.c_str());
  ASSERT_NE(dumper, nullptr);
  auto frame = [&](std::uint32_t seq, const std::string& payload, std::uint8_t flags) {
    std::vector<unsigned char> f(14 + 20 + 20 + payload.size(), 0);
    f[12] = 0x08;  // IPv4
    unsigned char* ip = f.data() + 14;
    ip[0] = 0x45;
    const std::uint16_t total = static_cast<std::uint16_t>(40 + payload.size());
    ip[2] = static_cast<unsigned char>(total >> 8);
    ip[3] = static_cast<unsigned char>(total & 0xff);
    ip[8] = 64;
    ip[9] = 6;
    ip[12] = 10, ip[13] = 0, ip[14] = 0, ip[15] = 1;
    ip[16] = 10, ip[17] = 0, ip[18] = 0, ip[19] = 2;
    unsigned char* tcp = ip + 20;
    tcp[0] = 0x9c, tcp[1] = 0x40;  // 40000
    tcp[2] = 0x00, tcp[3] = 0x50;  // 80
    for (int k = 0; k < 4; ++k) tcp[4 + k] = static_cast<unsigned char>(seq >> (24 - 8 * k));
    tcp[12] = 0x50;
    tcp[13] = flags;
    std::copy(payload.begin(), payload.end(), f.begin() + 54);
    return f;
  };
  std::vector<std::vector<unsigned char>> frames;
  const std::uint32_t isn = 0xfffffff0u;  // the sequence wraps inside the message
  frames.push_back(frame(isn, "", 0x02));  // SYN
  std::vector<std::vector<unsigned char>> data;
  for (std::size_t i = 0; i < message.size(); ++i)
    data.push_back(frame(isn + 1 + static_cast<std::uint32_t>(i), message.substr(i, 1), 0x18));
  std::mt19937 rng(3);
  std::shuffle(data.begin(), data.end(), rng);
  for (auto& d : data) frames.push_back(d);
  frames.push_back(frame(isn + 1 + 5, message.substr(5, 12), 0x18));  // overlapping retransmission
  frames.push_back(frame(isn + 1, message.substr(0, 20), 0x18));
  frames.push_back(frame(isn + 1 + static_cast<std::uint32_t>(message.size()), "", 0x11));  // FIN
  pcap_pkthdr h{};
  h.ts.tv_sec = 1700000000;
  for (auto& f : frames) {
    h.caplen = h.len = static_cast<bpf_u_int32>(f.size());
    ++h.ts.tv_usec;
    pcap_dump(reinterpret_cast<unsigned char*>(dumper), &h, f.data());
  }
  pcap_dump_close(dumper);
  pcap_close(dead);
  EXPECT_EQ(run_gpufilter({"-F", "--pcap", path, "-c", "-e", "SECRET-TOKEN"}).out, "0\n");
  const GrepRun stream = run_gpufilter({"-F", "--pcap", path, "--stream", "--json", "-e", "SECRET-TOKEN-12345"});
  ASSERT_EQ(stream.status, 0) << stream.err;
  const json flow = json::parse(stream.out.substr(0, stream.out.find('\n'))).at("data");
  EXPECT_EQ(flow.at("first_match").at("offset"), message.find("SECRET"));
  EXPECT_EQ(flow.at("bytes_client"), message.size());  // retransmitted bytes once
  EXPECT_EQ(std::count(stream.out.begin(), stream.out.end(), '\n'), 1);
  // --pcap-out with --stream: every packet of the flow.
  const std::string out = dir.path() + "/flow.pcap";
  ASSERT_EQ(run_gpufilter({"-F", "--pcap", path, "--stream", "--pcap-out", out, "-q", "-e", "SECRET"}).status, 0);
  EXPECT_EQ(command_output("tshark -n -r '" + out + "' -T fields -e frame.number | wc -l"),
            std::to_string(frames.size()) + "\n");
  // -x: the whole direction, not the segments seen so far (nor the last piece alone).
  for (const char* locale : {"LC_ALL=C", "LC_ALL=C.UTF-8"}) {
    const std::vector<std::string> env{locale};
    EXPECT_EQ(run_gpufilter({"-F", "--pcap", path, "--stream", "-c", "-x", "-e", message}, {}, {}, env).out, "1\n");
    EXPECT_EQ(run_gpufilter({"-F", "--pcap", path, "--stream", "-c", "-x", "-e", "hello"}, {}, {}, env).out, "0\n");
    EXPECT_EQ(run_gpufilter({"-F", "--pcap", path, "--stream", "-c", "-x", "-e", message.substr(0, message.size() - 1)},
                            {}, {}, env).out,
              "0\n");
    EXPECT_EQ(run_gpufilter({"-F", "--pcap", path, "--stream", "-c", "-x", "-e", message.substr(1)}, {}, {}, env).out,
              "0\n");
  }
}

// A record longer than the file's snapshot length: libpcap (and ngrep) cut it to the
// snaplen, tshark reads it whole. gpufilter matches what libpcap gives and says so.
TEST_F(Capture, RecordsOverTheSnaplenAreCutAndSaidToBe) {
  TempDir dir;
  auto u32 = [](std::string& out, std::uint32_t v) {
    for (int k = 0; k < 4; ++k) out += static_cast<char>((v >> (8 * k)) & 0xff);
  };
  std::string file;
  u32(file, 0xa1b2c3d4);
  file += std::string("\x02\x00\x04\x00", 4);
  u32(file, 0);
  u32(file, 0);
  u32(file, 40);  // snaplen
  u32(file, 1);   // Ethernet
  std::string frame(54, '\0');
  frame[12] = 0x08;
  frame[14] = 0x45;
  frame[23] = 6;  // TCP
  frame[46] = 0x50;
  frame += "hello SECRET world\n";
  frame[16] = 0, frame[17] = static_cast<char>(frame.size() - 14);
  u32(file, 1000);
  u32(file, 0);
  u32(file, static_cast<std::uint32_t>(frame.size()));
  u32(file, static_cast<std::uint32_t>(frame.size()));
  file += frame;
  const std::string path = dir.write("oversnap.pcap", file);
  for (const bool piped : {false, true}) {
    const GrepRun r = piped ? run_gpufilter({"--pcap", "-", "-c", "SECRET"}, file)
                            : run_gpufilter({"--pcap", path, "-c", "SECRET"});
    EXPECT_EQ(r.out, "0\n");
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("1 record is longer than the file's snapshot length (40 bytes)"), std::string::npos) << r.err;
  }
}

// Cut and corrupted captures: the packets before the damage are matched, the message
// names the file and the byte, and the exit status is 2.
// -m NUM per capture, as grep's per file: its -A packets still print after the last
// selected one (as context), and the next capture is read.
TEST_F(Capture, MaxCountPerCaptureWithTrailingContext) {
  const std::string path = corpus_path("pcap/http.cap");
  const GrepRun all = run_gpufilter({"--pcap", path, "--json", "-A2", "-e", "GET"});
  const std::vector<json> every = json_records(all.out);
  const GrepRun first = run_gpufilter({"--pcap", path, "--json", "-m1", "-A2", "-e", "GET"});
  std::vector<json> got = json_records(first.out);
  ASSERT_EQ(got.size(), 3u) << first.out;
  for (std::size_t k = 0; k < 3; ++k) EXPECT_EQ(got[k], every[k]) << k;
  EXPECT_EQ(got[1].at("type"), "packet_context");
  const GrepRun text = run_gpufilter({"--pcap", path, "-m2", "-A1", "-e", "GET"});
  EXPECT_EQ(text.status, 0);
  for (const char* frame : {"#4 ", "#5 ", "#18 ", "#19 "}) EXPECT_NE(text.out.find(frame), std::string::npos) << frame;
  EXPECT_EQ(text.out.find("#20 "), std::string::npos) << text.out;
  const GrepRun counts = run_gpufilter({"--pcap", path, "--pcap", path, "-m1", "-c", "GET"});
  EXPECT_EQ(counts.out, path + ":1\n" + path + ":1\n");
}

TEST_F(Capture, TruncatedAndCorruptCapturesKeepWhatCameBefore) {
  TempDir dir;
  const std::string path = corpus_path("pcap/http.cap");
  const std::string bytes = read_file(path);
  const std::set<long> all = tshark_frames(path, "frame contains \"HTTP\"");
  for (const std::size_t cut : {bytes.size() - 7, bytes.size() / 2, std::size_t{24 + 16 + 5}, std::size_t{30}}) {
    const std::string cut_path = dir.write("cut.pcap", bytes.substr(0, cut));
    const GrepRun r = run_gpufilter({"-F", "--pcap", cut_path, "--match-frame", "--json", "-e", "HTTP"});
    EXPECT_EQ(r.status, 2) << "cut at " << cut;
    EXPECT_NE(r.err.find(cut_path), std::string::npos) << r.err;
    const std::set<long> got = json_frames(r.out);
    // Every frame tshark reads from the cut file whole is there.
    const std::set<long> whole = tshark_frames(cut_path, "frame contains \"HTTP\"");
    for (const long f : whole) EXPECT_TRUE(got.count(f) || !all.count(f)) << "frame " << f << " lost, cut " << cut;
    if (cut > 24) {
      EXPECT_NE(r.err.find("byte"), std::string::npos) << r.err;
    }
  }
  // A record header claiming 1 GB.
  std::string corrupt = bytes;
  const std::size_t second = 24 + 16 + (static_cast<unsigned char>(bytes[24 + 8]) | static_cast<unsigned char>(bytes[24 + 9]) << 8);
  corrupt[second + 8] = '\xff';
  corrupt[second + 9] = '\xff';
  corrupt[second + 10] = '\xff';
  corrupt[second + 11] = '\x3f';
  const GrepRun r = run_gpufilter({"-F", "--pcap", dir.write("corrupt.pcap", corrupt), "--match-frame", "-c", "-e", "HTTP"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("corrupt.pcap"), std::string::npos) << r.err;
  // Not a capture at all; an unsupported link type named.
  const GrepRun text = run_gpufilter({"-F", "--pcap", corpus_path("loghub/OpenSSH_2k.log"), "x"});
  EXPECT_EQ(text.status, 2);
  EXPECT_NE(text.err.find("OpenSSH_2k.log"), std::string::npos);
  std::string user0 = bytes.substr(0, 24);
  user0[20] = static_cast<char>(147);  // LINKTYPE_USER0
  user0[21] = user0[22] = user0[23] = 0;
  const GrepRun odd = run_gpufilter({"-F", "--pcap", dir.write("user0.pcap", user0), "x"});
  EXPECT_EQ(odd.status, 2);
  EXPECT_NE(odd.err.find("link type"), std::string::npos) << odd.err;
  // --stream --pcap-out reads a file twice; the cut is reported once.
  const std::string cut_path = dir.write("cut2.pcap", bytes.substr(0, bytes.size() / 2));
  const GrepRun twice =
      run_gpufilter({"--pcap", cut_path, "--stream", "--pcap-out", dir.file("o.pcap"), "-c", "GET"});
  EXPECT_EQ(twice.status, 2);
  EXPECT_EQ(twice.err.find(cut_path), twice.err.rfind(cut_path)) << twice.err;
}

// Standard input, BPF, -m, text output.
TEST_F(Capture, StandardInputBpfMaxCountAndText) {
  const std::string path = corpus_path("pcap/smtp.pcap");
  const std::string bytes = read_file(path);
  const GrepRun piped = run_gpufilter({"-F", "--pcap", "-", "-c", "--match-frame", "-e", "Exim"}, bytes);
  const GrepRun direct = run_gpufilter({"-F", "--pcap", path, "-c", "--match-frame", "-e", "Exim"});
  EXPECT_EQ(piped.out, direct.out);
  EXPECT_NE(direct.out, "0\n");
  const GrepRun bpf = run_gpufilter({"-F", "--pcap", path, "--bpf", "src port 25", "--match-frame", "--json", "-e", "250"});
  EXPECT_EQ(json_frames(bpf.out), tshark_frames(path, "tcp.srcport == 25 && frame contains \"250\""));
  EXPECT_EQ(run_gpufilter({"-F", "--pcap", path, "--bpf", "port banana", "x"}).status, 2);
  const GrepRun two = run_gpufilter({"-F", "--pcap", path, "-m", "2", "--json", "--match-frame", "-e", "250"});
  EXPECT_EQ(json_frames(two.out).size(), 2u);
  const GrepRun text = run_gpufilter({"-F", "--pcap", path, "-e", "MAIL FROM"});
  EXPECT_NE(text.out.find("-> 74.53.140.153:25 [AP]"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("matched: MAIL FROM"), std::string::npos) << text.out;
}

// The empty pattern matches every record, as it matches every line: every flow with
// --stream (those without payload too), as -v with a pattern found nowhere selects them;
// under -x or -w only empty records (packets without payload, flows without data), as
// grep -x '' selects only empty lines.
TEST_F(Capture, EmptyPatternSelectsEveryFlowAndUnderXOnlyEmptyOnes) {
  for (const std::string& name : {"http_redirects.pcapng", "http.cap", "telnet-raw.pcap", "smtp.pcap"}) {
    const std::string path = corpus_path("pcap/" + name);
    const GrepRun every = run_gpufilter({"-F", "--pcap", path, "--stream", "-c", "-v", "-e", "zq_never_in_any_capture"});
    EXPECT_NE(every.out, "0\n") << name;
    EXPECT_EQ(run_gpufilter({"-F", "--pcap", path, "--stream", "-c", "-e", ""}).out, every.out) << name;
    EXPECT_EQ(run_gpufilter({"-F", "--pcap", path, "--stream", "-c", "-v", "-e", ""}).status, 1) << name;
    // The empty records, from the JSON of everything: flows without data either way,
    // packets (UDP and others with --stream) without payload.
    std::size_t empty_flows = 0;
    std::size_t empty_packets = 0;
    std::istringstream all(run_gpufilter({"-F", "--pcap", path, "--stream", "--json", "-v", "-e", "zq_never_in_any_capture"}).out);
    for (std::string line; std::getline(all, line);) {
      const json r = json::parse(line);
      const json& d = r.at("data");
      if (r.at("type") == "flow" && d.at("bytes_client") == 0 && d.at("bytes_server") == 0) ++empty_flows;
      if (r.at("type") == "packet" && d.at("record_length") == 0) ++empty_packets;
    }
    EXPECT_EQ(run_gpufilter({"-F", "--pcap", path, "--stream", "-c", "-x", "-e", ""}).out,
              std::to_string(empty_flows + empty_packets) + "\n")
        << name;
    // -w '' is grep's rule per line (an empty match between two non-word bytes), the same
    // in the C locale and in UTF-8.
    EXPECT_EQ(run_gpufilter({"-F", "--pcap", path, "--stream", "-c", "-w", "-e", ""}).out,
              run_gpufilter({"-F", "--pcap", path, "--stream", "-c", "-w", "-e", ""}, {}, {}, {"LC_ALL=C.UTF-8"}).out)
        << name;
    // Per packet: -x '' selects the packets whose payload is empty.
    std::size_t empty_payloads = 0;
    std::istringstream packets(run_gpufilter({"-F", "--pcap", path, "--json", "-v", "-e", "zq_never_in_any_capture"}).out);
    for (std::string line; std::getline(packets, line);) empty_payloads += json::parse(line).at("data").at("record_length") == 0;
    if (name == std::string("http.cap")) EXPECT_NE(empty_payloads, 0u);  // its ACKs
    EXPECT_EQ(run_gpufilter({"-F", "--pcap", path, "-c", "-x", "-e", ""}).out, std::to_string(empty_payloads) + "\n") << name;
  }
}

// A live capture on loopback, where the machine lets the test capture.
TEST_F(Capture, LiveCaptureOnLoopback) {
  const SpawnedProcess child = spawn_process({gpufilter_binary(), "--interface", "lo", "--bpf", "udp port 47999",
                                              "--json", "-m", "1", "-e", "live-capture-probe"});
  ::close(child.in);
  // Send the probe a few times while the capture starts.
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(47999);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out, err;
  for (int i = 0; i < 50 && out.empty(); ++i) {
    const std::string probe = "live-capture-probe " + std::to_string(i);
    ::sendto(fd, probe.data(), probe.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to);
    pollfd p[2] = {{child.out, POLLIN, 0}, {child.err, POLLIN, 0}};
    if (::poll(p, 2, 100) > 0) {
      char buffer[4096];
      if (p[0].revents & (POLLIN | POLLHUP)) {
        const ssize_t n = ::read(child.out, buffer, sizeof buffer);
        if (n > 0) out.append(buffer, static_cast<std::size_t>(n));
      }
      if (p[1].revents & (POLLIN | POLLHUP)) {
        const ssize_t n = ::read(child.err, buffer, sizeof buffer);
        if (n > 0) err.append(buffer, static_cast<std::size_t>(n));
        if (n == 0) break;
      }
    }
  }
  ::close(fd);
  ::kill(child.pid, SIGTERM);
  // A stop must end a live capture even when no packet comes: at most 10 s here.
  int status = 0;
  bool exited = false;
  for (int i = 0; i < 1000 && !exited; ++i) {
    exited = ::waitpid(child.pid, &status, WNOHANG) == child.pid;
    if (!exited) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!exited) {
    ::kill(child.pid, SIGKILL);
    ::waitpid(child.pid, &status, 0);
  }
  EXPECT_TRUE(exited) << "gpufilter --interface did not stop within 10 s of SIGTERM";
  ::close(child.out);
  ::close(child.err);
  if (err.find("CAP_NET_RAW") != std::string::npos || err.find("ermission") != std::string::npos)
    GTEST_SKIP() << "no capture permission here: " << err;
  ASSERT_FALSE(out.empty()) << err;
  const json packet = json::parse(out.substr(0, out.find('\n'))).at("data");
  EXPECT_EQ(packet.at("proto"), "UDP");
  EXPECT_EQ(packet.at("dport"), 47999);
  EXPECT_EQ(packet.at("payload").get<std::string>().rfind("live-capture-probe", 0), 0u);
}

// Regexes per packet (-E, -G, -P, -i), against tshark's "frame matches" on every sample.
// tshark reads the frame as one subject and folds case unless told (?-i); gpufilter reads
// it as lines: the two agree on patterns that neither match a newline nor anchor inside the
// frame, which these are.
TEST_F(Capture, RegexMatchFrameEqualsTsharkFrameMatches) {
  struct Case {
    const char* matcher;
    std::string pattern;  // as gpufilter takes it
    std::string pcre;     // as tshark's PCRE2 reads the same
    bool ignore_case = false;
  };
  const std::vector<Case> cases = {
      {"-E", "GET /[a-zA-Z0-9_./-]*", "GET /[a-zA-Z0-9_./-]*"},
      {"-E", "HTTP/1\\.[01] [0-9]{3}", "HTTP/1\\.[01] [0-9]{3}"},
      {"-E", "[Cc]ontent-[Tt]ype: [a-z]+/[a-z]+", "[Cc]ontent-[Tt]ype: [a-z]+/[a-z]+"},
      {"-E", "(MAIL FROM|RCPT TO):", "(MAIL FROM|RCPT TO):"},
      {"-E", "(www|mail|smtp)\\.[a-z0-9]+\\.(com|org|net)", "(www|mail|smtp)\\.[a-z0-9]+\\.(com|org|net)"},
      {"-E", "[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}", "[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}"},
      {"-G", "Host: [a-z.]\\{4,\\}", "Host: [a-z.]{4,}"},
      {"-G", "\\(GET\\|POST\\) ", "(GET|POST) "},
      {"-P", "\\d{3} [A-Z][a-z]+", "\\d{3} [A-Z][a-z]+"},
      {"-P", "(?:ehlo|helo) \\w+", "(?:ehlo|helo) \\w+", true},
      {"-E", "content-length: [0-9]+", "content-length: [0-9]+", true},
  };
  std::size_t compared = 0, selected = 0;
  SweepShare share;
  for (const std::string& name : samples()) {
    const std::string path = corpus_path("pcap/" + name);
    for (const Case& c : cases) {
      if (!share.take()) continue;
      std::vector<std::string> args = {c.matcher, "--pcap", path, "--match-frame", "--json", "-e", c.pattern};
      if (c.ignore_case) args.push_back("-i");
      const GrepRun ours = run_gpufilter(args);
      const std::string filter = std::string("frame matches ") + tshark_literal((c.ignore_case ? "(?i)" : "(?-i)") + c.pcre);
      const std::set<long> want = tshark_frames(path, filter);
      ASSERT_EQ(ours.status, want.empty() ? 1 : 0) << name << " " << c.matcher << " '" << c.pattern << "': " << ours.err;
      EXPECT_EQ(json_frames(ours.out), want) << name << " " << c.matcher << " '" << c.pattern << "' (" << filter << ")";
      ++compared;
      selected += want.size();
    }
  }
  std::printf("regex tshark comparisons: %zu, frames selected: %zu\n", compared, selected);
  EXPECT_GT(selected, whole_sweeps() ? 50u : 10u);
}

// A payload is bytes in every locale, as tshark and ngrep read it: in a UTF-8 locale too,
// '.', a negated bracket, a class and \xHH match single bytes that are not UTF-8.
TEST_F(Capture, RegexReadsPayloadBytesInEveryLocale) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"-P", "\\xff[^\\n]"}, {"-P", "[^a-z\\n\\r]{4}[a-z]"}, {"-E", "[^[:cntrl:]]{6}"}, {"-P", "\\W{3}\\w"}};
  std::size_t selected = 0;
  for (const char* name : {"http.cap", "telnet-raw.pcap", "chrome-34-google.trace", "dns.cap"}) {
    const std::string path = corpus_path(std::string("pcap/") + name);
    for (const auto& [matcher, pattern] : cases) {
      const std::set<long> want = tshark_frames(path, "frame matches " + tshark_literal("(?-i)" + pattern));
      selected += want.size();
      for (const char* locale : {"LC_ALL=C", "LC_ALL=C.UTF-8"}) {
        const GrepRun ours = run_gpufilter({matcher, "--pcap", path, "--match-frame", "--json", "-e", pattern}, {}, {},
                                           {locale});
        EXPECT_EQ(json_frames(ours.out), want) << name << " " << matcher << " '" << pattern << "' " << locale << ours.err;
      }
    }
  }
  EXPECT_GT(selected, 100u);
}

// --stream with a regex: a line that two client segments of the SMTP session share is
// matched by a regex from its two ends, which no packet holds both of.
TEST_F(Capture, StreamRegexMatchesALineAcrossSegments) {
  const std::string smtp = corpus_path("pcap/smtp.pcap");
  const std::string raw = command_output("tshark -n -q -r '" + smtp + "' -z follow,tcp,raw,0");
  const std::vector<std::string> segments = client_segments(raw);
  auto ere_quote = [](const std::string& text) {
    std::string out;
    for (const char c : text) {
      if (std::string(".[]\\()*+?{}|^$").find(c) != std::string::npos) out += '\\';
      out += c;
    }
    return out;
  };
  auto printable = [](const std::string& t) {
    return std::all_of(t.begin(), t.end(), [](char c) { return c >= 0x20 && c < 0x7f && c != '\''; });
  };
  std::size_t tried = 0, split = 0;
  for (std::size_t i = 0; i + 1 < segments.size(); ++i) {
    const std::string& a = segments[i];
    const std::string& b = segments[i + 1];
    if (a.empty() || a.back() == '\n') continue;
    const std::size_t nl = a.rfind('\n');
    const std::string tail = a.substr(nl == std::string::npos ? 0 : nl + 1);
    const std::string head = b.substr(0, b.find('\n'));
    if (tail.size() < 6 || head.size() < 6) continue;
    const std::string left = tail.substr(tail.size() - 6), right = head.substr(0, std::min(head.find('\r'), std::size_t{6}));
    if (right.size() < 4 || !printable(left) || !printable(right)) continue;
    const std::string regex = ere_quote(left) + ".*" + ere_quote(right);
    const GrepRun stream = run_gpufilter({"-E", "--pcap", smtp, "--stream", "-c", "-e", regex});
    EXPECT_EQ(stream.status, 0) << "'" << regex << "': " << stream.out << stream.err;
    const GrepRun packets = run_gpufilter({"-E", "--pcap", smtp, "-c", "-e", regex});
    if (packets.out == "0\n") ++split;
    ++tried;
  }
  EXPECT_GE(split, 2u) << "of " << tried;
  EXPECT_GE(tried, 2u);
  std::printf("smtp.pcap: %zu regexes over lines split between two client segments, all found by --stream, %zu "
              "of them in no single packet\n", tried, split);
  // Telnet, one typed character per packet: the typed line is only in the stream.
  const std::string telnet = corpus_path("pcap/telnet-raw.pcap");
  EXPECT_EQ(run_gpufilter({"-E", "--pcap", telnet, "-c", "-e", "ping w+\\.yahoo"}).out, "0\n");
  EXPECT_EQ(run_gpufilter({"-E", "--pcap", telnet, "--stream", "-c", "-e", "ping w+\\.yahoo"}).out, "1\n");
}

// --stream on several threads (cli/flow_farm.hpp), the threads' hand-offs under
// ThreadSanitizer (this binary is a `concurrency` test): the samples' flows in rounds of
// one packet and of the default size print what one thread prints.
// CaptureOutput.ManyThreadsPrintWhatOneThreadPrintsPerFlow checks many more cases.
TEST_F(Capture, StreamOnManyThreadsPrintsWhatOneThreadPrints) {
  for (const char* sample : {"pcap/smtp.pcap", "pcap/http.cap", "pcap/v6-http.cap"}) {
    for (const Args& run : {Args{"-F", "-e", "HTTP", "-e", "MAIL"}, Args{"--json", "-E", "-e", "[A-Z]{4} "}}) {
      const Args args = Args{"--engine=host", "--stream", "--pcap", corpus_path(sample)} + run;
      const GrepRun one = run_gpufilter(args + Args{"-j", "1"});
      EXPECT_EQ(one.status, 0) << describe_args(args) << one.err;
      for (const char* round : {"GPUFILTER_FLOW_ROUND_BYTES=1", "GPUFILTER_FLOW_ROUND_BYTES=4194304"}) {
        const GrepRun many =
            run_gpufilter(args + Args{"-j", "3"}, {}, {}, {round, "GPUFILTER_READ_THREADS=3", "GPUFILTER_READ_PART_BYTES=3000"});
        EXPECT_EQ(many.status, one.status) << describe_args(args) << round << many.err;
        EXPECT_TRUE(many.out == one.out) << describe_args(args) << round << ": " << first_difference(one.out, many.out);
      }
    }
  }
}

}  // namespace
}  // namespace gpufilter::test
