// CaptureSource in a StreamSession: real captures of the corpus, read on the capture's own
// thread into a RecordChannel that a consumer on the test's thread drains. Checked: per
// packet, the lines are each payload's lines (an unterminated last piece ended, over-long
// ones dropped and counted), computed here from PcapReader and the decoder; per flow, the
// streams and their text do not depend on the channel's size (a two-batch channel of 64
// bytes, drained slowly, makes the thread wait for room over and over); capture files with
// standard input end the run when the last of them ends; the destructor does not wait for
// a consumer that is gone; a stop ends a live capture at once (skipped without CAP_NET_RAW).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>

#include "gpufilter/core/notices.hpp"
#include "gpufilter/core/record_channel.hpp"
#include "gpufilter/sources/capture_source.hpp"
#include "gpufilter/sources/packet.hpp"
#include "gpufilter/sources/pcap_reader.hpp"
#include "gpufilter/sources/stream_session.hpp"
#include "testutil/testutil.hpp"

namespace gpufilter {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using test::corpus_path;

constexpr auto kPatience = 30s;

class QuietNotices final : public Notices {
 public:
  void notice(std::string_view) override {}
};

struct Seen {
  std::map<std::string, std::string> text;  // per stream name
  std::set<std::string> opened;
  std::set<std::string> closed;
  std::size_t batches = 0;
  bool finished = false;
};

// Takes batches until the channel finishes or `patience` passes, `pause` after each.
Seen consume(RecordChannel& channel, std::chrono::milliseconds pause = 0ms,
             std::chrono::milliseconds patience = kPatience) {
  Seen seen;
  std::map<StreamId, std::string> names;
  const auto deadline = Clock::now() + patience;
  while (Clock::now() < deadline) {
    RecordBatch* batch = channel.take(20ms);
    if (batch == nullptr) {
      if (channel.finished()) {
        seen.finished = true;
        break;
      }
      continue;
    }
    for (const BatchEntry& e : batch->entries) {
      switch (e.kind) {
        case BatchEntry::Kind::kOpen:
          names[e.stream] = e.name;
          EXPECT_TRUE(seen.opened.insert(e.name).second) << "opened twice: " << e.name;
          break;
        case BatchEntry::Kind::kLines:
          seen.text[names[e.stream]].append(batch->bytes.data() + e.begin, e.end - e.begin);
          break;
        case BatchEntry::Kind::kClose: seen.closed.insert(names[e.stream]); break;
      }
    }
    ++seen.batches;
    channel.recycle(batch);
    if (pause.count() > 0) std::this_thread::sleep_for(pause);
  }
  return seen;
}

struct CaptureRun {
  Seen seen;
  CaptureSource::Counters counters;
};

// One capture file as the only source, through a channel of `batches` x `batch_bytes`.
CaptureRun run_capture(const std::string& file, bool stream, std::size_t max_line, std::size_t batch_bytes,
                std::chrono::milliseconds pause = 0ms) {
  QuietNotices notices;
  StreamSessionConfig config;
  config.channel = RecordChannel::Config{batch_bytes, 2};
  StreamSession session(config);
  CaptureConfig capture;
  capture.file = file;
  capture.stream = stream;
  capture.max_line_bytes = max_line;
  session.add_capture(capture, notices);
  session.start();
  session.run_io();
  CaptureRun run;
  run.seen = consume(session.channel(), pause);
  session.join();
  run.counters = session.counters().capture;
  return run;
}

// The reference: each payload of the capture cut into lines here, those over `max_line`
// dropped. Returns the text and the number dropped.
std::pair<std::string, std::uint64_t> payload_lines(const std::string& file, std::size_t max_line) {
  const auto reader = PcapReader::open_file(file);
  std::string text;
  std::uint64_t dropped = 0;
  RawPacket raw;
  while (reader->next(raw)) {
    const PacketInfo info = decode_packet(reader->link_type(), raw.data);
    const auto* begin = reinterpret_cast<const char*>(raw.data.data()) + info.payload_offset;
    std::string_view payload(begin, info.payload_length);
    while (!payload.empty()) {
      const std::size_t nl = payload.find('\n');
      const std::string_view line = payload.substr(0, nl);
      if (line.size() > max_line) ++dropped;
      else text.append(line).push_back('\n');
      payload.remove_prefix(nl == std::string_view::npos ? payload.size() : nl + 1);
    }
  }
  return {text, dropped};
}

TEST(CaptureSource, PerPacketLinesAreThePayloadsLinesThroughATinyChannel) {
  for (const char* name : {"pcap/smtp.pcap", "pcap/http.cap", "pcap/v6-http.cap", "pcap/telnet-raw.pcap"}) {
    SCOPED_TRACE(name);
    const std::string file = corpus_path(name);
    const auto [expected, dropped] = payload_lines(file, 63);
    const CaptureRun tiny = run_capture(file, false, 63, 64, 1ms);
    ASSERT_TRUE(tiny.seen.finished);
    const std::string stream = "pcap:" + file;
    ASSERT_EQ(tiny.seen.text.size(), 1u);
    EXPECT_EQ(tiny.seen.text.at(stream), expected);
    EXPECT_EQ(tiny.seen.closed, std::set<std::string>{stream});
    EXPECT_EQ(tiny.counters.lines_too_long, dropped);
    EXPECT_GT(tiny.counters.packets, 0u);
    EXPECT_GT(tiny.seen.batches, expected.size() / 64);
    if (std::string(name) == "pcap/smtp.pcap") {
      EXPECT_GT(dropped, 0u);
    }
  }
}

TEST(CaptureSource, PerFlowStreamsDoNotDependOnTheChannel) {
  for (const char* name : {"pcap/smtp.pcap", "pcap/http.cap", "pcap/telnet-raw.pcap", "pcap/http_redirects.pcapng"}) {
    SCOPED_TRACE(name);
    const std::string file = corpus_path(name);
    const CaptureRun big = run_capture(file, true, 1u << 20, 4u << 20);
    const CaptureRun tiny = run_capture(file, true, 63, 64, 1ms);
    ASSERT_TRUE(big.seen.finished && tiny.seen.finished);
    EXPECT_EQ(big.seen.opened, big.seen.closed);
    EXPECT_EQ(tiny.seen.opened, tiny.seen.closed);
    EXPECT_GT(big.counters.flows, 0u);
    // The tiny run drops the lines over 63 bytes: the big run's, filtered, are its text.
    std::uint64_t dropped = 0;
    for (const auto& [stream, text] : big.seen.text) {
      std::string kept;
      for (std::size_t at = 0; at < text.size();) {
        const std::size_t end = text.find('\n', at);
        ASSERT_NE(end, std::string::npos) << "a line without its newline in " << stream;
        if (end - at <= 63) kept.append(text, at, end + 1 - at);
        else ++dropped;
        at = end + 1;
      }
      EXPECT_EQ(tiny.seen.text.count(stream) ? tiny.seen.text.at(stream) : "", kept) << stream;
    }
    EXPECT_EQ(tiny.counters.lines_too_long, dropped);
  }
  // telnet: the client's typed login, one character per packet, is one stream's text.
  const std::string telnet = corpus_path("pcap/telnet-raw.pcap");
  const CaptureRun run = run_capture(telnet, true, 1u << 20, 1u << 20);
  const std::string client = "pcap:" + telnet + " 192.168.0.2:1254 -> 192.168.0.1:23";
  ASSERT_TRUE(run.seen.text.count(client));
  EXPECT_NE(run.seen.text.at(client).find("fake"), std::string::npos);
}

// Standard input (a pipe) and a capture file are the only readers: the capture's end alone
// does not end the run; the pipe's end then does.
TEST(CaptureSource, CaptureFilesAndStandardInputEndTheRunTogether) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  QuietNotices notices;
  StreamSession session(StreamSessionConfig{});
  CaptureConfig capture;
  capture.file = corpus_path("pcap/smtp.pcap");
  session.add_capture(capture, notices);
  session.add_stdin(1024, fds[0]);
  session.start();
  session.run_io();
  const Seen before = consume(session.channel(), 0ms, 500ms);
  EXPECT_FALSE(before.finished);
  EXPECT_TRUE(before.closed.count("pcap:" + capture.file)) << "the capture was read";
  ASSERT_EQ(::write(fds[1], "last\n", 5), 5);
  ::close(fds[1]);
  const Seen after = consume(session.channel());
  EXPECT_TRUE(after.finished);
  ASSERT_EQ(after.text.size(), 1u);  // standard input's stream, opened before
  EXPECT_EQ(after.text.begin()->second, "last\n");
  session.join();
  ::close(fds[0]);
}

// Nobody drains the channel: the capture thread waits for room that never comes, and the
// session's destructor ends it without waiting.
TEST(CaptureSource, TheDestructorDoesNotWaitForAConsumer) {
  QuietNotices notices;
  const auto started = Clock::now();
  {
    StreamSessionConfig config;
    config.channel = RecordChannel::Config{64, 2};
    StreamSession session(config);
    CaptureConfig capture;
    capture.file = corpus_path("pcap/http_redirects.pcapng");
    capture.stream = true;
    capture.max_line_bytes = 63;
    session.add_capture(capture, notices);
    session.start();
    session.run_io();
    std::this_thread::sleep_for(100ms);
    EXPECT_FALSE(session.channel().finished());
  }
  EXPECT_LT(Clock::now() - started, 5s);
}

// A live capture waits in libpcap; a stop breaks its loop, and the run ends at once.
TEST(CaptureSource, AStopEndsALiveCaptureAtOnce) {
  try {
    (void)PcapReader::open_live("lo");
  } catch (const Error& e) {
    GTEST_SKIP() << "cannot capture on lo: " << e.what();
  }
  QuietNotices notices;
  StreamSession session(StreamSessionConfig{});
  CaptureConfig capture;
  capture.interface = "lo";
  capture.bpf = "tcp port 1";
  capture.stream = true;
  session.add_capture(capture, notices);
  session.start();
  session.run_io();
  EXPECT_FALSE(consume(session.channel(), 0ms, 300ms).finished) << "a live capture runs until stopped";
  const auto stopping = Clock::now();
  session.request_stop();
  EXPECT_TRUE(consume(session.channel(), 0ms, 5s).finished);
  EXPECT_LT(Clock::now() - stopping, 2s);
  session.join();
}

TEST(CaptureSource, OpeningFailuresAreTyped) {
  QuietNotices notices;
  StreamSession session(StreamSessionConfig{});
  CaptureConfig missing;
  missing.file = "/nonexistent/x.pcap";
  EXPECT_THROW(session.add_capture(missing, notices), SourceError);
  CaptureConfig bad_filter;
  bad_filter.file = corpus_path("pcap/smtp.pcap");
  bad_filter.bpf = "tcp prot 25";
  try {
    session.add_capture(bad_filter, notices);
    FAIL() << "a bad filter was accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("pcap:" + bad_filter.file + ": bpf: tcp prot 25: ", 0), 0u) << e.what();
  }
  EXPECT_THROW(check_bpf("port 99999"), ConfigError);
  EXPECT_NO_THROW(check_bpf("tcp port 80 or udp"));
  EXPECT_THROW(check_capture_file("/nonexistent/x.pcap", ""), SourceError);
  EXPECT_NO_THROW(check_capture_file(bad_filter.file, "tcp port 25"));
}

}  // namespace
}  // namespace gpufilter
