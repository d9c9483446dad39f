// StreamSession: the I/O side shared by gpufilter --follow/--listen and gpufilterd. Real
// readers (a pipe as standard input, a followed file) on the session's own I/O thread feed
// its RecordChannel; a consumer on the test's thread collects the lines per input. Checked:
// the stop hands on everything whole that was read and then finishes the channel; standard
// input as the only reader ends the run at its end; backpressure loses nothing; the two
// I/O failure policies (kEnd rethrows from join(), kRestart reports and reads on).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/post.hpp>

#include "gpufilter/core/notices.hpp"
#include "gpufilter/core/record_channel.hpp"
#include "gpufilter/core/stop_signal.hpp"
#include "gpufilter/sources/stream_session.hpp"

namespace gpufilter {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr auto kPatience = 30s;  // how long a test waits for its lines before failing

class QuietNotices final : public Notices {
 public:
  void notice(std::string_view) override {}
};

// A pipe whose read end plays standard input.
class Pipe {
 public:
  Pipe() {
    if (::pipe(fds_) != 0) throw std::runtime_error("pipe");
  }
  ~Pipe() {
    close_write();
    ::close(fds_[0]);
  }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  int read_end() const { return fds_[0]; }
  void write(std::string_view text) {
    while (!text.empty()) {
      const ssize_t n = ::write(fds_[1], text.data(), text.size());
      if (n <= 0) throw std::runtime_error("write to pipe");
      text.remove_prefix(static_cast<std::size_t>(n));
    }
  }
  void close_write() {
    if (fds_[1] >= 0) ::close(fds_[1]);
    fds_[1] = -1;
  }

 private:
  int fds_[2] = {-1, -1};
};

// What the consumer saw, per input name.
struct Seen {
  std::map<std::string, std::string> text;
  std::set<std::string> closed;
  bool finished = false;
};

// Takes batches until the channel finishes (or kPatience passes); `after_batch` runs after
// each batch, on this thread.
Seen consume(RecordChannel& channel, const std::function<void(const Seen&)>& after_batch = {}) {
  Seen seen;
  std::map<StreamId, std::string> names;
  const auto deadline = Clock::now() + kPatience;
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
        case BatchEntry::Kind::kOpen: names[e.stream] = e.name; break;
        case BatchEntry::Kind::kLines:
          seen.text[names[e.stream]].append(batch->bytes.data() + e.begin, e.end - e.begin);
          break;
        case BatchEntry::Kind::kClose: seen.closed.insert(names[e.stream]); break;
      }
    }
    channel.recycle(batch);
    if (after_batch) after_batch(seen);
  }
  return seen;
}

std::string temp_file(const std::string& text) {
  const char* base = std::getenv("TMPDIR");
  std::string path = std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/gpufilter-session-XXXXXX";
  const int fd = ::mkstemp(path.data());
  if (fd < 0) throw std::runtime_error("mkstemp");
  ::close(fd);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

StreamSessionConfig small_channel() {
  StreamSessionConfig config;
  config.channel = RecordChannel::Config{4096, 2};
  return config;
}

TEST(StreamSession, StopHandsOnWhatStdinAndAFollowerRead) {
  const std::string file = temp_file("f1\nf2\npartial");
  Pipe in;
  in.write("s1\ns2\n");
  QuietNotices notices;
  StreamSession session(small_channel());
  FollowConfig follow;
  follow.paths = {file};
  follow.from_start = true;
  follow.use_inotify = false;
  follow.poll_interval = 20ms;
  session.add_follower(follow, notices);
  session.add_stdin(1024, in.read_end());
  session.start();
  session.run_io();
  bool asked = false;
  const Seen seen = consume(session.channel(), [&](const Seen& s) {
    if (asked) return;
    auto has = [&](const std::string& name, const std::string& text) {
      auto it = s.text.find(name);
      return it != s.text.end() && it->second == text;
    };
    if (has(file, "f1\nf2\n") && has("stdin", "s1\ns2\n")) {
      asked = true;
      session.request_stop();
    }
  });
  session.join();
  std::filesystem::remove(file);
  ASSERT_TRUE(seen.finished);
  EXPECT_EQ(seen.text.at(file), "f1\nf2\n");  // the unterminated line is not handed on at a stop
  EXPECT_EQ(seen.text.at("stdin"), "s1\ns2\n");
  EXPECT_EQ(seen.closed, (std::set<std::string>{file, "stdin"}));
  EXPECT_EQ(session.counters().stdin_lines_too_long, 0u);
}

TEST(StreamSession, StdinAloneEndsTheRunAtItsEnd) {
  Pipe in;
  StreamSession session(small_channel());
  session.add_stdin(8, in.read_end());
  session.start();
  session.run_io();
  in.write("one\nmuch too long\ntwo\nlast");
  in.close_write();
  const Seen seen = consume(session.channel());
  session.join();
  ASSERT_TRUE(seen.finished);
  EXPECT_EQ(seen.text.at("stdin"), "one\ntwo\nlast\n");  // the last line is a line at the end
  EXPECT_EQ(seen.closed, std::set<std::string>{"stdin"});
  EXPECT_EQ(session.counters().stdin_lines_too_long, 1u);
}

TEST(StreamSession, BackpressureLosesNothing) {
  Pipe in;
  StreamSessionConfig config;
  config.channel = RecordChannel::Config{256, 2};  // a few lines per batch: reads park often
  StreamSession session(config);
  session.add_stdin(128, in.read_end());
  session.start();
  session.run_io();
  std::string expected;
  for (int i = 0; i < 20000; ++i) expected += "line " + std::to_string(i) + "\n";
  std::thread writer([&] {
    in.write(expected);
    in.close_write();
  });
  const Seen seen = consume(session.channel(), [](const Seen&) { std::this_thread::sleep_for(10us); });
  writer.join();
  session.join();
  ASSERT_TRUE(seen.finished);
  EXPECT_TRUE(seen.text.at("stdin") == expected);
}

TEST(StreamSession, StopSignalStopsTheReaders) {
  Pipe in;
  StopSignal stop;
  StreamSessionConfig config = small_channel();
  config.stop = &stop;
  StreamSession session(config);
  QuietNotices notices;
  ListenConfig listen;
  listen.urls.push_back(parse_listen_url("tcp://127.0.0.1:0"));
  session.add_listener(listen, notices);
  session.add_stdin(64, in.read_end());
  std::vector<std::string> bound;
  session.start([&](const std::string& url) { bound.push_back(url); });
  ASSERT_EQ(bound.size(), 1u);
  EXPECT_EQ(bound[0].rfind("tcp://127.0.0.1:", 0), 0u) << bound[0];
  session.run_io();
  in.write("before the stop\n");
  const Seen seen = consume(session.channel(), [&](const Seen& s) {
    if (s.text.count("stdin") != 0 && !stop.requested()) stop.request();
  });
  session.join();
  ASSERT_TRUE(seen.finished);
  EXPECT_EQ(seen.text.at("stdin"), "before the stop\n");
  EXPECT_TRUE(session.listening());
  EXPECT_FALSE(session.following());
}

TEST(StreamSession, IoFailureEndsTheRunAndJoinRethrows) {
  Pipe in;
  StreamSession session(small_channel());  // IoFailure::kEnd
  session.add_stdin(64, in.read_end());
  session.start();
  session.run_io();
  boost::asio::post(session.io(), [] { throw std::runtime_error("a handler failed"); });
  const Seen seen = consume(session.channel());
  EXPECT_TRUE(seen.finished);  // the consumer drains and returns
  EXPECT_THROW(session.join(), std::runtime_error);
}

TEST(StreamSession, IoFailureRestartsAndTheReadersGoOn) {
  Pipe in;
  StreamSessionConfig config = small_channel();
  config.on_io_failure = StreamSessionConfig::IoFailure::kRestart;
  std::atomic<int> reported{0};
  config.report_io_failure = [&](const std::exception& e) {
    EXPECT_STREQ(e.what(), "a handler failed");
    ++reported;
  };
  StreamSession session(config);
  session.add_stdin(64, in.read_end());
  session.start();
  session.run_io();
  boost::asio::post(session.io(), [] { throw std::runtime_error("a handler failed"); });
  in.write("after the failure\n");
  in.close_write();
  const Seen seen = consume(session.channel());
  EXPECT_NO_THROW(session.join());
  ASSERT_TRUE(seen.finished);
  EXPECT_EQ(seen.text.at("stdin"), "after the failure\n");
  EXPECT_EQ(reported.load(), 1);
}

}  // namespace
}  // namespace gpufilter
