// Follower on real files: a real io_context on its own thread runs the Follower, a real
// RecordChannel carries its lines to a consumer thread that collects them per input
// (following `continues` across rotations) and acknowledges them, and the test writes
// "seq=N ..." lines at full speed (one small O_APPEND write each) while it rotates,
// deletes, truncates the files under the Follower. Every check counts sequence numbers:
// none lost, none repeated, in order. Each case runs with inotify and with polling only.
// The state file's format and parser are tested here too.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "gpufilter/core/errors.hpp"
#include "gpufilter/core/record_channel.hpp"
#include "gpufilter/sources/follow_state.hpp"
#include "gpufilter/sources/follower.hpp"
#include "gpufilter/core/notices.hpp"
#include "testutil/testutil.hpp"

namespace gpufilter {
namespace {

using test::TempDir;

namespace asio = boost::asio;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr auto kPoll = 20ms;     // the poll interval in polling mode
constexpr auto kPatience = 30s;  // how long a test waits for lines before failing

// ---------------------------------------------------------------------------------------
// Test helpers


std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void spit(const std::string& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
}

class RecordedNotices final : public Notices {
 public:
  void notice(std::string_view message) override {
    std::lock_guard lock(mutex_);
    all_.emplace_back(message);
  }
  std::size_t count(std::string_view part) const {
    std::lock_guard lock(mutex_);
    return static_cast<std::size_t>(std::count_if(
        all_.begin(), all_.end(), [&](const std::string& m) { return m.find(part) != std::string::npos; }));
  }
  std::string joined() const {
    std::lock_guard lock(mutex_);
    std::string s;
    for (const std::string& m : all_) s += "  " + m + "\n";
    return s;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> all_;
};

// Writes "seq=N <padding>\n" lines to a file, one write() each, with O_APPEND as a
// logging application would, and rotates the file the ways logrotate does.
class Writer {
 public:
  explicit Writer(std::string path, std::uint64_t first_seq = 0) : path_(std::move(path)), seq_(first_seq) { reopen(); }
  ~Writer() {
    if (fd_ >= 0) ::close(fd_);
  }
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  std::uint64_t next_seq() const { return seq_; }
  // The next seq was written by hand (raw()).
  void skip() { ++seq_; }
  void line() {
    // Lengths vary so that lines straddle reads and batches at every offset.
    const std::string text = "seq=" + std::to_string(seq_) + " " +
                             std::string(10 + seq_ * 7 % 61, static_cast<char>('a' + seq_ % 26)) + "\n";
    raw(text);
    ++seq_;
  }
  void lines(std::uint64_t n) {
    for (std::uint64_t i = 0; i < n; ++i) line();
  }
  void raw(std::string_view text) {
    while (!text.empty()) {
      const ssize_t n = ::write(fd_, text.data(), text.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw std::runtime_error("write " + path_ + ": " + std::strerror(errno));
      text.remove_prefix(static_cast<std::size_t>(n));
    }
  }
  // rename-and-create (logrotate's default): the old file lives on under `to`.
  void rotate_rename(const std::string& to) {
    if (::rename(path_.c_str(), to.c_str()) != 0) throw std::runtime_error("rename " + path_);
    reopen();
  }
  // delete-and-re-create.
  void delete_recreate(std::chrono::milliseconds gap = 0ms) {
    if (::unlink(path_.c_str()) != 0) throw std::runtime_error("unlink " + path_);
    std::this_thread::sleep_for(gap);
    reopen();
  }
  void reopen() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd_ < 0) throw std::runtime_error("open " + path_ + ": " + std::strerror(errno));
  }

 private:
  std::string path_;
  std::uint64_t seq_;
  int fd_ = -1;
};

// What the consumer collected for one input: its streams in order and its lines.
struct Line {
  StreamId stream;
  std::uint64_t offset;  // in its stream (file offset)
  std::string text;      // with its '\n'
};
struct InputLog {
  std::string name;
  std::vector<StreamId> streams;
  std::vector<std::pair<StreamId, bool>> closes;  // (stream, ends_input) in order
  std::vector<Line> lines;
  std::uint64_t skipped = 0;
};

std::optional<std::uint64_t> seq_of(std::string_view line) {
  if (!line.starts_with("seq=")) return std::nullopt;
  std::uint64_t n = 0;
  std::size_t i = 4;
  if (i >= line.size() || line[i] < '0' || line[i] > '9') return std::nullopt;
  for (; i < line.size() && line[i] >= '0' && line[i] <= '9'; ++i)
    n = n * 10 + static_cast<std::uint64_t>(line[i] - '0');
  return n;
}

std::vector<std::uint64_t> seqs_of(const InputLog& log) {
  std::vector<std::uint64_t> seqs;
  for (const Line& l : log.lines) {
    if (const auto s = seq_of(l.text)) seqs.push_back(*s);
  }
  return seqs;
}

// Exactly first, first + 1, ..., last - 1, once each, in order; else what went wrong.
testing::AssertionResult exact_sequence(const std::vector<std::uint64_t>& seqs, std::uint64_t first,
                                        std::uint64_t last) {
  if (seqs.size() == last - first) {
    bool same = true;
    for (std::size_t i = 0; i < seqs.size() && same; ++i) same = seqs[i] == first + i;
    if (same) return testing::AssertionSuccess();
  }
  std::set<std::uint64_t> seen;
  std::uint64_t duplicates = 0, outside = 0, out_of_order = 0;
  for (std::size_t i = 0; i < seqs.size(); ++i) {
    if (!seen.insert(seqs[i]).second) ++duplicates;
    if (seqs[i] < first || seqs[i] >= last) ++outside;
    if (i > 0 && seqs[i] < seqs[i - 1]) ++out_of_order;
  }
  std::uint64_t missing = 0, first_missing = 0;
  for (std::uint64_t s = first; s < last; ++s) {
    if (seen.count(s) == 0 && missing++ == 0) first_missing = s;
  }
  return testing::AssertionFailure() << "expected seq " << first << ".." << last - 1 << " once each in order; got "
                                     << seqs.size() << " lines: " << missing << " missing (first " << first_missing
                                     << "), " << duplicates << " duplicated, " << outside << " outside, "
                                     << out_of_order << " out of order";
}

// The stream protocol of one input: every stream but the last closed with the input going
// on, the last one closed for good.
testing::AssertionResult well_closed(const InputLog& log) {
  if (log.closes.size() != log.streams.size())
    return testing::AssertionFailure() << log.streams.size() << " streams opened, " << log.closes.size() << " closed";
  for (std::size_t i = 0; i < log.closes.size(); ++i) {
    if (log.closes[i].first != log.streams[i])
      return testing::AssertionFailure() << "stream " << i << " closed out of order";
    const bool last = i + 1 == log.closes.size();
    if (log.closes[i].second != last)
      return testing::AssertionFailure() << "stream " << i << " of " << log.closes.size()
                                         << " closed with ends_input=" << log.closes[i].second;
  }
  return testing::AssertionSuccess();
}

// Takes batches, collects the lines per input and acknowledges them, as the scan thread
// does once their output is written.
class Consumer {
 public:
  explicit Consumer(RecordChannel& channel) : channel_(channel) {}
  ~Consumer() { join(); }
  void start() {
    thread_ = std::thread([this] { loop(); });
  }
  void join() {
    if (thread_.joinable()) thread_.join();
  }
  void pause(bool paused) { paused_ = paused; }
  // Ends the thread where it is, taking nothing more (a crash).
  void halt() {
    halted_ = true;
    join();
  }
  // Waits until a line with seq >= `seq` arrived.
  bool wait_seq(std::uint64_t seq, std::chrono::milliseconds limit = kPatience) const {
    const auto deadline = Clock::now() + limit;
    while (last_seq_.load() < static_cast<std::int64_t>(seq)) {
      if (Clock::now() > deadline) return false;
      std::this_thread::sleep_for(1ms);
    }
    return true;
  }
  std::int64_t last_seq() const { return last_seq_.load(); }
  std::vector<InputLog> inputs() const {
    std::lock_guard lock(mutex_);
    return inputs_;
  }
  std::size_t line_count() const {
    std::lock_guard lock(mutex_);
    std::size_t n = 0;
    for (const InputLog& in : inputs_) n += in.lines.size();
    return n;
  }

 private:
  void loop() {
    while (!halted_) {
      if (paused_) {
        std::this_thread::sleep_for(1ms);
        continue;
      }
      RecordBatch* batch = channel_.take(10ms);
      if (batch == nullptr) {
        if (channel_.finished()) return;
        continue;
      }
      collect(*batch);
      channel_.recycle(batch);
    }
  }

  void collect(const RecordBatch& batch) {
    std::lock_guard lock(mutex_);
    for (const BatchEntry& e : batch.entries) {
      switch (e.kind) {
        case BatchEntry::Kind::kOpen: {
          std::size_t index = inputs_.size();
          if (e.continues != kNoStream) {
            const auto it = input_of_.find(e.continues);
            if (it != input_of_.end()) index = it->second;
          }
          if (index == inputs_.size()) inputs_.push_back(InputLog{e.name, {}, {}, {}, 0});
          input_of_[e.stream] = index;
          inputs_[index].streams.push_back(e.stream);
          break;
        }
        case BatchEntry::Kind::kClose:
          inputs_[input_of_.at(e.stream)].closes.emplace_back(e.stream, e.ends_input);
          break;
        case BatchEntry::Kind::kLines: {
          InputLog& in = inputs_[input_of_.at(e.stream)];
          in.skipped += e.skipped;
          std::size_t at = e.begin;
          while (at < e.end) {
            const std::size_t nl = static_cast<std::size_t>(
                static_cast<const char*>(std::memchr(batch.bytes.data() + at, '\n', e.end - at)) - batch.bytes.data());
            Line line{e.stream, e.offset + (at - e.begin), std::string(batch.bytes.data() + at, nl + 1 - at)};
            if (const auto s = seq_of(line.text))
              last_seq_ = std::max<std::int64_t>(last_seq_, static_cast<std::int64_t>(*s));
            in.lines.push_back(std::move(line));
            at = nl + 1;
          }
          // Written and flushed, as far as this consumer goes.
          channel_.acknowledge(e.stream, e.offset + (e.end - e.begin));
          break;
        }
      }
    }
  }

  RecordChannel& channel_;
  std::thread thread_;
  std::atomic<bool> paused_{false};
  std::atomic<bool> halted_{false};
  std::atomic<std::int64_t> last_seq_{-1};
  mutable std::mutex mutex_;
  std::vector<InputLog> inputs_;
  std::map<StreamId, std::size_t> input_of_;
};

// One Follower run: its io_context on an I/O thread, its channel and its consumer.
class FollowRun {
 public:
  explicit FollowRun(FollowConfig config, RecordChannel::Config channel_config = {64u << 10, 3})
      : channel_(channel_config), consumer_(channel_) {
    follower_ = std::make_unique<Follower>(io_, channel_, std::move(config), notices_);
    channel_.set_space_callback([this] {
      asio::post(io_, [this] {
        if (follower_) follower_->on_space();
      });
    });
    follower_->start();
    io_thread_ = std::thread([this] { io_.run(); });
    consumer_.start();
  }
  ~FollowRun() {
    if (io_thread_.joinable()) crash();
  }
  FollowRun(const FollowRun&) = delete;
  FollowRun& operator=(const FollowRun&) = delete;

  // A clean stop, as main does it: stop() on the I/O thread, wait for stopped(), then the
  // consumer takes the rest; the I/O thread ends. True when stopped() came.
  bool stop() {
    asio::post(io_, [this] { follower_->stop(); });
    const bool ok = wait_stopped(kPatience);
    channel_.finish();
    consumer_.join();
    end_io();
    return ok;
  }
  // The process dies here: the I/O thread and the consumer end where they are, and the
  // Follower goes without stop() (its last periodic save is what the state file holds).
  void crash() {
    consumer_.halt();
    end_io();
    follower_.reset();
  }
  // After stop(): the I/O thread has ended, as when main saves at exit.
  void save_state() { follower_->save_state(); }
  // While it runs: on the I/O thread, as its periodic saves are.
  void save_state_now() {
    std::promise<void> done;
    asio::post(io_, [&] {
      follower_->save_state();
      done.set_value();
    });
    done.get_future().wait();
  }
  void post_stop() {
    asio::post(io_, [this] { follower_->stop(); });
  }
  bool wait_stopped(std::chrono::milliseconds limit) {
    const auto deadline = Clock::now() + limit;
    while (!follower_->stopped()) {
      if (Clock::now() > deadline) return false;
      std::this_thread::sleep_for(1ms);
    }
    return true;
  }
  Consumer& consumer() { return consumer_; }
  Follower::Counters counters() const { return follower_->counters(); }
  const RecordedNotices& notices() const { return notices_; }
  // The one input these tests follow, with the checks every test wants of it.
  InputLog only_input() const {
    const std::vector<InputLog> inputs = consumer_.inputs();
    EXPECT_EQ(inputs.size(), 1u) << "one path is one input, across rotations";
    return inputs.empty() ? InputLog{} : inputs.front();
  }

 private:
  void end_io() {
    work_.reset();
    io_.stop();
    if (io_thread_.joinable()) io_thread_.join();
  }

  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_ = asio::make_work_guard(io_);
  RecordChannel channel_;
  RecordedNotices notices_;
  std::unique_ptr<Follower> follower_;
  Consumer consumer_;
  std::thread io_thread_;
};

struct Mode {
  bool inotify;
};

std::string mode_name(const testing::TestParamInfo<Mode>& info) { return info.param.inotify ? "Inotify" : "Polling"; }

class FollowerTest : public testing::TestWithParam<Mode> {
 protected:
  FollowConfig config(std::vector<std::string> paths) const {
    FollowConfig c;
    c.paths = std::move(paths);
    c.use_inotify = GetParam().inotify;
    c.poll_interval = kPoll;
    c.read_bytes = 16u << 10;  // several reads per batch
    c.max_line_bytes = 4096;
    c.state_interval = 20ms;
    return c;
  }
  const char* mode() const { return GetParam().inotify ? "inotify" : "polling"; }
  TempDir dir_;
};


// Bytes this process has read through read()/pread() so far.
long long read_chars() {
  std::ifstream io("/proc/self/io");
  std::string key;
  long long value = 0;
  while (io >> key >> value) {
    if (key == "rchar:") return value;
  }
  return -1;
}

// ---------------------------------------------------------------------------------------
// Rotation

// logrotate's default: rename app.log -> app.log.N, create a new app.log. The writer goes
// on at once in the new file while the Follower may still be reading the old one.
TEST_P(FollowerTest, RenameAndCreateRotationsLoseAndRepeatNothing) {
  const std::string path = dir_.file("app.log");
  spit(path, "");
  FollowRun run(config({path}));
  Writer writer(path);
  constexpr int kRotations = 6;
  constexpr std::uint64_t kLinesPerFile = 15000;
  for (int r = 0;; ++r) {
    const std::uint64_t first_of_file = writer.next_seq();
    writer.lines(kLinesPerFile);
    if (r == kRotations) break;
    // Rotate only once the Follower has the current file open (it delivered a line of
    // it): a file that comes and goes between two looks at the path is lost to any tail -F.
    ASSERT_TRUE(run.consumer().wait_seq(first_of_file)) << "seq " << first_of_file;
    writer.rotate_rename(path + "." + std::to_string(r + 1));
  }
  ASSERT_TRUE(run.consumer().wait_seq(writer.next_seq() - 1));
  ASSERT_TRUE(run.stop());
  const InputLog log = run.only_input();
  EXPECT_TRUE(exact_sequence(seqs_of(log), 0, writer.next_seq()));
  EXPECT_TRUE(well_closed(log));
  EXPECT_EQ(log.streams.size(), static_cast<std::size_t>(kRotations + 1));
  EXPECT_EQ(run.counters().rotations, static_cast<std::uint64_t>(kRotations));
  EXPECT_EQ(run.notices().count("has been replaced; following new file"), static_cast<std::size_t>(kRotations))
      << run.notices().joined();
  std::printf("[ %s ] rename rotation: %llu lines written, %d rotations, %zu lines delivered\n", mode(),
              static_cast<unsigned long long>(writer.next_seq()), kRotations, log.lines.size());
}

// Delete and re-create: the Follower still holds the deleted file open and reads its rest.
// Half of the re-creations wait a few poll intervals, so the Follower also sees the path
// missing for a while before the new file appears.
TEST_P(FollowerTest, DeleteAndRecreateLosesAndRepeatsNothing) {
  const std::string path = dir_.file("app.log");
  spit(path, "");
  FollowRun run(config({path}));
  Writer writer(path);
  constexpr int kRecreations = 6;
  constexpr std::uint64_t kLinesPerFile = 10000;
  for (int r = 0;; ++r) {
    const std::uint64_t first_of_file = writer.next_seq();
    writer.lines(kLinesPerFile);
    if (r == kRecreations) break;
    ASSERT_TRUE(run.consumer().wait_seq(first_of_file));
    writer.delete_recreate(r % 2 == 0 ? 0ms : 3 * kPoll);
  }
  ASSERT_TRUE(run.consumer().wait_seq(writer.next_seq() - 1));
  ASSERT_TRUE(run.stop());
  const InputLog log = run.only_input();
  EXPECT_TRUE(exact_sequence(seqs_of(log), 0, writer.next_seq()));
  EXPECT_TRUE(well_closed(log));
  EXPECT_EQ(run.counters().rotations, static_cast<std::uint64_t>(kRecreations));
  std::printf("[ %s ] delete and re-create: %llu lines written, %d re-creations, %zu lines delivered\n", mode(),
              static_cast<unsigned long long>(writer.next_seq()), kRecreations, log.lines.size());
}

// copytruncate: copy app.log to app.log.N, then truncate app.log to 0 while the writer's
// O_APPEND descriptor goes on at the new end. It is racy by nature: lines written between
// the copy and the truncation are lost, and if the file grows past the old read position
// before the Follower looks, it cannot tell it was truncated. So the writer pauses, the
// test waits until the consumer saw the last line, copies, truncates, and resumes once the
// Follower noticed the truncation.
TEST_P(FollowerTest, CopyTruncateRestartsAtTheStart) {
  const std::string path = dir_.file("app.log");
  spit(path, "");
  FollowRun run(config({path}));
  Writer writer(path);
  constexpr int kTruncations = 3;
  for (int t = 0;; ++t) {
    writer.lines(8000);
    if (t == kTruncations) break;
    ASSERT_TRUE(run.consumer().wait_seq(writer.next_seq() - 1));
    spit(path + "." + std::to_string(t + 1), slurp(path));
    ASSERT_EQ(::truncate(path.c_str(), 0), 0);
    const auto deadline = Clock::now() + kPatience;
    while (run.counters().truncations < static_cast<std::uint64_t>(t + 1) && Clock::now() < deadline) {
      std::this_thread::sleep_for(1ms);
    }
    ASSERT_EQ(run.counters().truncations, static_cast<std::uint64_t>(t + 1));
  }
  ASSERT_TRUE(run.consumer().wait_seq(writer.next_seq() - 1));
  ASSERT_TRUE(run.stop());
  const InputLog log = run.only_input();
  EXPECT_TRUE(exact_sequence(seqs_of(log), 0, writer.next_seq()));
  EXPECT_TRUE(well_closed(log));
  EXPECT_EQ(run.notices().count("app.log: file truncated"), static_cast<std::size_t>(kTruncations));
  EXPECT_EQ(run.counters().rotations, 0u);
  // After a truncation the lines' offsets start again at 0.
  ASSERT_FALSE(log.lines.empty());
  EXPECT_EQ(log.lines.back().offset + log.lines.back().text.size(), slurp(path).size());
}

// ---------------------------------------------------------------------------------------
// Start

TEST_P(FollowerTest, AFileThatAppearsLaterIsReadFromItsStart) {
  const std::string path = dir_.file("later.log");
  FollowRun run(config({path}));
  EXPECT_EQ(run.notices().count("later.log: No such file or directory; waiting for it to appear"), 1u)
      << run.notices().joined();
  std::this_thread::sleep_for(5 * kPoll);
  Writer writer(path);
  writer.lines(5000);
  ASSERT_TRUE(run.consumer().wait_seq(writer.next_seq() - 1));
  ASSERT_TRUE(run.stop());
  const InputLog log = run.only_input();
  EXPECT_TRUE(exact_sequence(seqs_of(log), 0, writer.next_seq()));
  EXPECT_TRUE(well_closed(log));
  EXPECT_EQ(run.notices().count("later.log: has appeared"), 1u) << run.notices().joined();
  EXPECT_EQ(run.counters().rotations, 0u);
}

TEST_P(FollowerTest, FromStartReadsWhatIsThereAndOtherwiseItIsSkipped) {
  const std::string path = dir_.file("app.log");
  {
    Writer before(path);
    before.lines(1000);
  }
  FollowConfig from_start = config({path});
  from_start.from_start = true;
  FollowRun all(from_start);
  FollowRun end(config({path}));
  Writer writer(path, 1000);
  writer.lines(1000);
  ASSERT_TRUE(all.consumer().wait_seq(1999));
  ASSERT_TRUE(end.consumer().wait_seq(1999));
  ASSERT_TRUE(all.stop());
  ASSERT_TRUE(end.stop());
  EXPECT_TRUE(exact_sequence(seqs_of(all.only_input()), 0, 2000)) << "--from-start";
  EXPECT_TRUE(exact_sequence(seqs_of(end.only_input()), 1000, 2000)) << "start at the end";
  const InputLog log = end.only_input();
  ASSERT_FALSE(log.lines.empty());
  EXPECT_EQ(log.lines.front().offset, slurp(path).find("seq=1000 ")) << "offsets are file offsets";
}

// ---------------------------------------------------------------------------------------
// Over-long lines and backpressure

TEST_P(FollowerTest, OverLongLinesAreDroppedAndCountedWithTheirNeighboursIntact) {
  const std::string path = dir_.file("app.log");
  spit(path, "");
  FollowConfig c = config({path});
  c.max_line_bytes = 200;
  FollowRun run(c);
  Writer writer(path);
  std::uint64_t long_lines = 0;
  for (int i = 0; i < 3000; ++i) {
    writer.line();
    if (i % 50 == 7) {
      writer.raw("long " + std::string(201 + i % 300, 'L') + "\n");  // just over, or well over
      ++long_lines;
    }
    if (i == 1500) {
      writer.raw("huge " + std::string(300000, 'H') + "\n");  // longer than a batch and a read
      ++long_lines;
    }
  }
  writer.line();  // the last line is a normal one: the skipped count rides on it
  ASSERT_TRUE(run.consumer().wait_seq(writer.next_seq() - 1));
  ASSERT_TRUE(run.stop());
  const InputLog log = run.only_input();
  EXPECT_TRUE(exact_sequence(seqs_of(log), 0, writer.next_seq()));
  EXPECT_EQ(seqs_of(log).size(), log.lines.size()) << "no part of a long line is handed on";
  EXPECT_EQ(log.skipped, long_lines);
  EXPECT_EQ(run.counters().lines_too_long, long_lines);
  EXPECT_EQ(run.notices().count("app.log: a line longer than --max-line-bytes (200) was dropped"), 1u)
      << run.notices().joined();
}

// A consumer that stops taking: the Follower stops reading, so its memory stays at the
// framer's and the channel's, however much the file grows; then everything arrives. A
// stop() while the channel is full waits for room before it closes.
TEST_P(FollowerTest, BackpressureBoundsMemoryAndLosesNothing) {
  const std::string path = dir_.file("app.log");
  spit(path, "");
  FollowRun run(config({path}));
  Writer writer(path);
  writer.lines(100);
  ASSERT_TRUE(run.consumer().wait_seq(99));

  run.consumer().pause(true);
  std::this_thread::sleep_for(50ms);
  const long memory_before = gpufilter::test::memory_in_use_kib();
  const long long read_before = read_chars();
  constexpr std::uint64_t kLines = 400000;  // about 22 MB; the channel holds 192 KiB
  writer.lines(kLines);
  std::this_thread::sleep_for(10 * kPoll);
  const long memory_growth = gpufilter::test::memory_in_use_kib() - memory_before;
  const long long read = read_chars() - read_before;
  const std::size_t file_size = std::filesystem::file_size(path);
  std::printf("[ %s ] backpressure: file %zu bytes, memory grew %ld KiB, %lld bytes read while paused\n", mode(),
              file_size, memory_growth, read);
  EXPECT_LT(memory_growth, 8 * 1024) << "KiB: the Follower read on while the channel was full";
  if (!GetParam().inotify) {
    // Without inotify every byte this process read is the Follower's (the channel plus a
    // read or two). With inotify the event reads count too, so only the RSS tells.
    EXPECT_LT(read, 1 << 20);
  }
  run.consumer().pause(false);
  ASSERT_TRUE(run.consumer().wait_seq(writer.next_seq() - 1));

  // stop() with the channel full: it must wait for room, not drop what it framed.
  run.consumer().pause(true);
  std::this_thread::sleep_for(50ms);
  const std::uint64_t before_stop = writer.next_seq();
  writer.lines(50000);
  std::this_thread::sleep_for(10 * kPoll);
  run.post_stop();
  EXPECT_FALSE(run.wait_stopped(20 * kPoll)) << "stopped() before the framed lines were handed on";
  run.consumer().pause(false);
  ASSERT_TRUE(run.stop());
  const InputLog log = run.only_input();
  const std::vector<std::uint64_t> seqs = seqs_of(log);
  ASSERT_FALSE(seqs.empty());
  // Whatever had been read by then and nothing else: a gapless prefix of what was written.
  EXPECT_GE(seqs.back(), before_stop);
  EXPECT_TRUE(exact_sequence(seqs, 0, seqs.back() + 1));
  EXPECT_TRUE(well_closed(log));
}

// ---------------------------------------------------------------------------------------
// --state

// The saved entry for the (only) path.
FollowStateEntry saved_entry(const std::string& state_path) {
  const std::vector<FollowStateEntry> entries = load_follow_state(state_path);
  EXPECT_EQ(entries.size(), 1u);
  return entries.empty() ? FollowStateEntry{} : entries.front();
}

TEST_P(FollowerTest, StateAfterACleanStopResumesExactly) {
  const std::string path = dir_.file("app.log");
  const std::string state = dir_.file("follow.state");
  {
    Writer before(path);
    before.lines(100);  // before the first run: skipped, it starts at the end
  }
  FollowConfig c = config({path});
  c.state_path = state;
  Writer writer(path, 100);
  std::vector<std::uint64_t> first_run;
  std::string partial;
  {
    FollowRun run(c);
    writer.lines(20000);
    ASSERT_TRUE(run.consumer().wait_seq(writer.next_seq() - 1));
    // An unterminated last line at the stop is not handed on: the restart reads it whole.
    const std::string whole = "seq=" + std::to_string(writer.next_seq()) + " the line written in two parts\n";
    writer.raw(whole.substr(0, 12));
    writer.skip();
    partial = whole.substr(12);
    std::this_thread::sleep_for(5 * kPoll);
    ASSERT_TRUE(run.stop());
    run.save_state();
    first_run = seqs_of(run.only_input());
    EXPECT_TRUE(well_closed(run.only_input()));
  }
  const FollowStateEntry e = saved_entry(state);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(e.path, path);
  EXPECT_EQ(e.dev, static_cast<std::uint64_t>(st.st_dev));
  EXPECT_EQ(e.ino, static_cast<std::uint64_t>(st.st_ino));
  EXPECT_EQ(e.offset, static_cast<std::uint64_t>(st.st_size) - 12) << "the acknowledged end of the whole lines";
  EXPECT_EQ(e.head_len, kStateHeadBytes);
  EXPECT_EQ(e.head_hash, fnv1a64(slurp(path).substr(0, kStateHeadBytes)));
  EXPECT_FALSE(std::filesystem::exists(state + ".tmp"));

  writer.raw(partial);  // while no one follows
  writer.lines(5000);
  FollowRun second(c);
  writer.lines(5000);
  ASSERT_TRUE(second.consumer().wait_seq(writer.next_seq() - 1));
  ASSERT_TRUE(second.stop());
  std::vector<std::uint64_t> all = first_run;
  const std::vector<std::uint64_t> resumed = seqs_of(second.only_input());
  all.insert(all.end(), resumed.begin(), resumed.end());
  EXPECT_TRUE(exact_sequence(first_run, 100, 20100));
  EXPECT_TRUE(exact_sequence(all, 100, writer.next_seq())) << "first run + resumed run";
  ASSERT_FALSE(second.only_input().lines.empty());
  EXPECT_EQ(second.only_input().lines.front().offset, e.offset);
  std::printf("[ %s ] clean stop: %zu + %zu lines, 0 repeated\n", mode(), first_run.size(), resumed.size());
}

// kill -9: the state file holds the last periodic save. The restart repeats only lines
// after its offset and loses none.
TEST_P(FollowerTest, StateAfterACrashRepeatsOnlyLinesAfterTheSavedOffset) {
  const std::string path = dir_.file("app.log");
  const std::string state = dir_.file("follow.state");
  spit(path, "");
  FollowConfig c = config({path});
  c.state_path = state;
  std::mt19937 rng(static_cast<unsigned>(Clock::now().time_since_epoch().count()));
  constexpr std::uint64_t kLines = 60000;
  const std::uint64_t crash_at = std::uniform_int_distribution<std::uint64_t>(kLines / 4, kLines / 2)(rng);
  Writer writer(path);
  std::vector<Line> first;
  {
    FollowRun run(c);
    writer.lines(crash_at);
    // A save with some progress in it; then the periodic saves go on while the writer
    // does, and it dies in the middle.
    ASSERT_TRUE(run.consumer().wait_seq(crash_at / 2));
    run.save_state_now();
    EXPECT_GT(saved_entry(state).offset, 0u);
    std::thread more([&] { writer.lines(5000); });
    run.crash();
    more.join();
    first = run.only_input().lines;
  }
  const FollowStateEntry e = saved_entry(state);
  writer.lines(kLines - writer.next_seq());
  FollowRun second(c);
  ASSERT_TRUE(second.consumer().wait_seq(writer.next_seq() - 1));
  ASSERT_TRUE(second.stop());
  const std::vector<Line> resumed = second.only_input().lines;
  ASSERT_FALSE(resumed.empty());
  EXPECT_EQ(resumed.front().offset, e.offset) << "the restart reads from the saved offset";
  EXPECT_TRUE(exact_sequence(seqs_of(second.only_input()), *seq_of(resumed.front().text), writer.next_seq()));

  // Every seq at least once; a seq in both runs only if its line lies after the offset.
  std::map<std::uint64_t, std::uint64_t> offset_of;
  std::set<std::uint64_t> in_first;
  for (const Line& l : first) {
    in_first.insert(*seq_of(l.text));
    offset_of[*seq_of(l.text)] = l.offset;
    EXPECT_TRUE(l.offset >= e.offset || l.offset + l.text.size() <= e.offset);
  }
  std::uint64_t repeated = 0, repeated_before_offset = 0;
  std::set<std::uint64_t> all = in_first;
  for (const Line& l : resumed) {
    const std::uint64_t s = *seq_of(l.text);
    all.insert(s);
    if (in_first.count(s) != 0) {
      ++repeated;
      if (l.offset < e.offset) ++repeated_before_offset;
    }
  }
  EXPECT_EQ(all.size(), writer.next_seq());
  EXPECT_EQ(*all.rbegin(), writer.next_seq() - 1);
  EXPECT_EQ(repeated_before_offset, 0u);
  // Every line ending at or before the saved offset was delivered before the crash.
  std::uint64_t acknowledged_lines = 0;
  for (const Line& l : first) acknowledged_lines += l.offset + l.text.size() <= e.offset ? 1 : 0;
  EXPECT_EQ(acknowledged_lines, resumed.empty() ? 0 : *seq_of(resumed.front().text));
  std::printf(
      "[ %s ] crash: %llu lines written, crash after %llu, state offset %llu, %zu + %zu delivered, %llu repeated\n",
      mode(), static_cast<unsigned long long>(writer.next_seq()), static_cast<unsigned long long>(crash_at),
      static_cast<unsigned long long>(e.offset), first.size(), resumed.size(),
      static_cast<unsigned long long>(repeated));
}

// rename app.log -> app.log.1 and a new app.log between two runs: the rest of the old file
// first (found again by its inode and fingerprint), then the new one from its start.
TEST_P(FollowerTest, StateAcrossARotationWhileDownReadsTheOldFileThenTheNew) {
  const std::string path = dir_.file("app.log");
  const std::string state = dir_.file("follow.state");
  spit(path, "");
  FollowConfig c = config({path});
  c.state_path = state;
  Writer writer(path);
  std::vector<std::uint64_t> first_run;
  {
    FollowRun run(c);
    writer.lines(10000);
    ASSERT_TRUE(run.consumer().wait_seq(writer.next_seq() - 1));
    ASSERT_TRUE(run.stop());
    run.save_state();
    first_run = seqs_of(run.only_input());
  }
  writer.lines(3000);
  // The old file's last line is unterminated when it is rotated: it is handed on as a
  // line when the old file is left.
  writer.raw("seq=" + std::to_string(writer.next_seq()) + " unterminated when rotated");
  writer.skip();
  writer.rotate_rename(path + ".1");
  writer.lines(4000);
  FollowRun second(c);
  writer.lines(1000);
  ASSERT_TRUE(second.consumer().wait_seq(writer.next_seq() - 1));
  ASSERT_TRUE(second.stop());
  const InputLog log = second.only_input();
  std::vector<std::uint64_t> all = first_run;
  for (std::uint64_t s : seqs_of(log)) all.push_back(s);
  EXPECT_TRUE(exact_sequence(all, 0, writer.next_seq())) << "first run + the old file's rest + the new file";
  EXPECT_TRUE(well_closed(log));
  EXPECT_EQ(log.streams.size(), 2u) << "the old file, then the new one";
  EXPECT_EQ(second.counters().rotations, 1u);
  EXPECT_EQ(second.notices().count("was rotated while not followed"), 1u) << second.notices().joined();
}

// A file truncated or deleted while no one followed cannot be resumed: the new content is
// read from its start.
TEST_P(FollowerTest, StateOfAFileTruncatedOrDeletedWhileDownStartsOver) {
  const std::string path = dir_.file("app.log");
  const std::string state = dir_.file("follow.state");
  spit(path, "");
  FollowConfig c = config({path});
  c.state_path = state;
  for (const bool truncate : {true, false}) {
    SCOPED_TRACE(truncate ? "truncated" : "deleted");
    std::uint64_t first_seq = 0;
    {
      Writer writer(path);
      FollowRun run(c);
      writer.lines(2000);
      ASSERT_TRUE(run.consumer().wait_seq(writer.next_seq() - 1));
      ASSERT_TRUE(run.stop());
      run.save_state();
    }
    if (truncate) {
      ASSERT_EQ(::truncate(path.c_str(), 0), 0);
    } else {
      // Deleted; a link elsewhere keeps its inode alive, so the new file cannot reuse its
      // number, and out of the path's directory, so the Follower cannot find it there.
      std::filesystem::create_directories(dir_.file("elsewhere"));
      ASSERT_EQ(::link(path.c_str(), dir_.file("elsewhere/kept").c_str()), 0);
      ASSERT_EQ(::unlink(path.c_str()), 0);
    }
    Writer writer(path, 500000);
    first_seq = writer.next_seq();
    writer.lines(3000);  // more than before: the offset alone cannot tell
    FollowRun second(c);
    ASSERT_TRUE(second.consumer().wait_seq(writer.next_seq() - 1));
    ASSERT_TRUE(second.stop());
    second.save_state();
    EXPECT_TRUE(exact_sequence(seqs_of(second.only_input()), first_seq, writer.next_seq()));
    EXPECT_EQ(second.notices().count(truncate ? "truncated or rewritten since the state was saved"
                                              : "the file the state file names is gone"),
              1u)
        << second.notices().joined();
    ASSERT_EQ(::unlink(path.c_str()), 0);
    spit(path, "");
  }
}

TEST_P(FollowerTest, StateOfAPathMissingAtTheStopReadsItFromItsStartLater) {
  const std::string path = dir_.file("later.log");
  const std::string state = dir_.file("follow.state");
  FollowConfig c = config({path});
  c.state_path = state;
  {
    FollowRun run(c);
    ASSERT_TRUE(run.stop());
    run.save_state();
  }
  const FollowStateEntry e = saved_entry(state);
  EXPECT_EQ(e.dev, 0u);
  EXPECT_EQ(e.ino, 0u);
  EXPECT_EQ(e.offset, 0u);
  Writer writer(path);
  writer.lines(1000);  // appears while no one follows: all of it is new
  FollowRun second(c);
  ASSERT_TRUE(second.consumer().wait_seq(999));
  ASSERT_TRUE(second.stop());
  EXPECT_TRUE(exact_sequence(seqs_of(second.only_input()), 0, 1000));
}

// After a rotation the state names the old file until its last line is acknowledged.
TEST_P(FollowerTest, StateNamesTheOldFileUntilItsLastLineIsAcknowledged) {
  const std::string path = dir_.file("app.log");
  const std::string state = dir_.file("follow.state");
  spit(path, "");
  FollowConfig c = config({path});
  c.state_path = state;
  FollowRun run(c);
  Writer writer(path);
  writer.lines(100);
  ASSERT_TRUE(run.consumer().wait_seq(99));
  struct stat old_file {};
  ASSERT_EQ(::stat(path.c_str(), &old_file), 0);
  // The consumer stops acknowledging (it takes nothing); the old file's rest and the
  // rotation wait in the channel.
  run.consumer().pause(true);
  std::this_thread::sleep_for(50ms);
  writer.lines(100);
  writer.rotate_rename(path + ".1");
  writer.lines(100);
  const auto deadline = Clock::now() + kPatience;
  while (run.counters().rotations == 0 && Clock::now() < deadline) std::this_thread::sleep_for(1ms);
  ASSERT_EQ(run.counters().rotations, 1u);
  std::this_thread::sleep_for(5 * c.state_interval);
  FollowStateEntry e = saved_entry(state);
  EXPECT_EQ(e.ino, static_cast<std::uint64_t>(old_file.st_ino)) << "still the old file";
  EXPECT_EQ(e.offset, static_cast<std::uint64_t>(old_file.st_size)) << "at its last acknowledged line";
  run.consumer().pause(false);
  ASSERT_TRUE(run.consumer().wait_seq(299));
  struct stat new_file {};
  ASSERT_EQ(::stat(path.c_str(), &new_file), 0);
  const auto deadline2 = Clock::now() + kPatience;
  while (Clock::now() < deadline2) {
    e = saved_entry(state);
    if (e.ino == static_cast<std::uint64_t>(new_file.st_ino) &&
        e.offset == static_cast<std::uint64_t>(new_file.st_size))
      break;
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(e.ino, static_cast<std::uint64_t>(new_file.st_ino)) << "the new file once the old one is acknowledged";
  EXPECT_EQ(e.offset, static_cast<std::uint64_t>(new_file.st_size));
  ASSERT_TRUE(run.stop());
}

INSTANTIATE_TEST_SUITE_P(Modes, FollowerTest, testing::Values(Mode{true}, Mode{false}), mode_name);

// ---------------------------------------------------------------------------------------
// The state file itself

TEST(FollowState, FnvAndFingerprint) {
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ULL);
  TempDir dir;
  const std::string path = dir.file("f");
  spit(path, "hello world");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(head_fingerprint(fd, 5), fnv1a64("hello"));
  EXPECT_EQ(head_fingerprint(fd, 0), fnv1a64(""));
  EXPECT_EQ(head_fingerprint(fd, 12), std::nullopt) << "the file holds fewer bytes";
  ::close(fd);
}

TEST(FollowState, FormatAndParseRoundTrip) {
  const std::vector<FollowStateEntry> entries = {
      {2049, 1234567, 9000, 1024, 0x0123456789abcdefULL, "/var/log/app.log"},
      {0, 0, 0, 0, fnv1a64(""), "relative path with  spaces "},
      {18446744073709551615ULL, 1, 5, 5, 0xffffffffffffffffULL, "x"},
  };
  const std::string text = format_follow_state(entries);
  EXPECT_TRUE(text.starts_with("gpufilter-follow-state 1\n2049 1234567 9000 1024 0123456789abcdef /var/log/app.log\n"))
      << text;
  EXPECT_EQ(parse_follow_state(text, "s"), entries);
  EXPECT_THROW(format_follow_state({{1, 2, 3, 3, 4, "a\nb"}}), ConfigError);
}

TEST(FollowState, MalformedFilesNameTheFileAndTheLine) {
  const auto error_of = [](const std::string& text) -> std::string {
    try {
      parse_follow_state(text, "STATE");
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "(parsed)";
  };
  const std::string header = "gpufilter-follow-state 1\n";
  EXPECT_NE(error_of("").find("STATE: line 1:"), std::string::npos);
  EXPECT_NE(error_of("gpufilter-follow-state 2\n").find("STATE: line 1:"), std::string::npos);
  EXPECT_NE(error_of(header + "1 2 3 3 ab p\n1 2 x 0 ab p\n").find("STATE: line 3:"), std::string::npos);
  EXPECT_NE(error_of(header + "1 2 3 3 ab\n").find("STATE: line 2:"), std::string::npos) << "no path";
  EXPECT_NE(error_of(header + "1 2 3 3 zz p\n").find("STATE: line 2:"), std::string::npos) << "hash not hex";
  EXPECT_NE(error_of(header + "1 2 3 4 ab p\n").find("STATE: line 2:"), std::string::npos) << "head_len > offset";
  EXPECT_NE(error_of(header + "1 2 3000 2000 ab p\n").find("STATE: line 2:"), std::string::npos) << "head_len > 1024";
  EXPECT_NE(error_of(header + "1 2 3 3 ab p").find("STATE: line 2:"), std::string::npos) << "cut";
  EXPECT_NE(error_of(header + "-1 2 3 3 ab p\n").find("STATE: line 2:"), std::string::npos);
  EXPECT_EQ(error_of(header + "1 2 3 3 ab p\n"), "(parsed)");
  EXPECT_EQ(error_of(header), "(parsed)");
}

TEST(FollowState, LoadAndSave) {
  TempDir dir;
  const std::string state = dir.file("state");
  EXPECT_TRUE(load_follow_state(state).empty()) << "a missing file is a fresh start";
  const std::vector<FollowStateEntry> entries = {{1, 2, 3, 3, 4, "p"}};
  save_follow_state(state, format_follow_state(entries));
  EXPECT_EQ(load_follow_state(state), entries);
  EXPECT_FALSE(std::filesystem::exists(state + ".tmp"));
  EXPECT_THROW(save_follow_state(dir.file("no/such/dir/state"), "x"), ConfigError);
  // A Follower refuses a malformed state file at construction, naming it and the line.
  spit(state, "gpufilter-follow-state 1\nnot numbers\n");
  asio::io_context io;
  RecordChannel channel({1u << 16, 3});
  RecordedNotices notices;
  FollowConfig c;
  c.paths = {dir.file("app.log")};
  c.state_path = state;
  c.max_line_bytes = 1000;
  try {
    Follower follower(io, channel, c, notices);
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(state + ": line 2:"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gpufilter
