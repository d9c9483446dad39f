// StreamGrep: many inputs through one RecordChannel and one scanner. A producer
// thread appends the lines of several inputs in random interleavings (some inputs carried
// on by a second stream, as a followed file is after rotation) into a small channel, so
// backpressure and batch boundaries fall everywhere. Each input's output, picked out of
// the interleaved sink calls by LineMatch::source, must equal what the one-input FileScan
// gives for that input alone, on both engines and on the device's host path.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gpufilter/opencl/device_scanner.hpp"
#include "gpufilter/hyperscan/host_scanner.hpp"
#include "gpufilter/opencl/scan_program.hpp"
#include "gpufilter/scan/file_scan.hpp"
#include "gpufilter/core/record_channel.hpp"
#include "gpufilter/grep/stream_grep.hpp"
#include "gpufilter/scan/stream_scan.hpp"
#include "testutil/testutil.hpp"

namespace {

using namespace gpufilter;
using namespace std::string_literals;
using gpufilter::test::random_patterns;
using gpufilter::test::random_string;
using gpufilter::test::StringSource;

// Sink calls per input, as text; context breaks carry no input and are left out.
class PerSourceSink final : public Sink {
 public:
  Flow matched(const LineMatch& line) override {
    add(line.source, "match " + describe(line));
    return Flow::kContinue;
  }
  void context(const LineMatch& line) override { add(line.source, "context " + describe(line)); }
  void finish(const InputSummary& summary) override {
    add(summary.name, "finish " + std::to_string(summary.selected_lines));
  }
  void flush() override { ++flushes; }
  std::map<std::string, std::vector<std::string>> events;
  int flushes = 0;

 private:
  static std::string describe(const LineMatch& line) {
    std::string ids;
    for (const std::uint32_t id : line.patterns) ids += " #" + std::to_string(id);
    return std::to_string(line.offset) + " " + std::to_string(line.number) + " [" + std::string(line.line) + "]" + ids;
  }
  void add(std::string_view source, std::string event) {
    std::lock_guard lock(mutex_);
    events[std::string(source)].push_back(std::move(event));
  }
  std::mutex mutex_;
};

struct Input {
  std::string name;
  std::string text;  // whole lines, each ending in '\n'
};

// What the one-input FileScan gives for `input` alone.
std::vector<std::string> expected_events(Scanner& scanner, const SearchOptions& options, const Input& input) {
  PerSourceSink sink;
  Searcher searcher(scanner.table(), options, sink);
  FileScan pipeline(scanner, searcher, FileScanConfig{.detect_binary = false});
  StringSource source(input.text, 0, input.name);
  pipeline.run(source);
  return sink.events[input.name];
}

// Appends every input's lines in random pieces and interleavings; an input marked
// `rotated` switches to a second stream half-way, which continues its input.
void produce(RecordChannel& channel, const std::vector<Input>& inputs, std::mt19937 rng) {
  std::mutex m;
  std::condition_variable cv;
  bool space = false;
  channel.set_space_callback([&] {
    std::lock_guard lock(m);
    space = true;
    cv.notify_one();
  });
  struct State {
    StreamId stream;
    std::size_t pos = 0;
    bool rotated = false;
  };
  std::vector<State> states;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    states.push_back(State{channel.new_stream_id()});
    channel.open(states[i].stream, inputs[i].name);
  }
  std::size_t open = inputs.size();
  while (open > 0) {
    const std::size_t i = rng() % inputs.size();
    State& s = states[i];
    const std::string& text = inputs[i].text;
    if (s.pos == text.size()) continue;
    if (!s.rotated && i % 2 == 1 && s.pos > text.size() / 2) {
      s.rotated = true;
      const StreamId next = channel.new_stream_id();
      channel.close(s.stream, false);
      channel.open(next, inputs[i].name, s.stream);
      s.stream = next;
    }
    std::size_t end = s.pos;
    for (std::size_t lines = 1 + rng() % 6; lines > 0 && end < text.size(); --lines) end = text.find('\n', end) + 1;
    std::size_t at = s.pos;
    while (at < end) {
      const std::size_t taken = channel.append(s.stream, at, std::string_view(text).substr(at, end - at));
      at += taken;
      if (at < end) {
        std::unique_lock lock(m);
        cv.wait_for(lock, std::chrono::milliseconds(50), [&] { return space; });
        space = false;
      }
    }
    s.pos = end;
    if (s.pos == text.size()) {
      channel.close(s.stream);
      --open;
    }
  }
  channel.finish();
}

std::vector<Input> make_inputs(std::mt19937& rng, std::size_t count) {
  std::vector<Input> inputs;
  for (std::size_t i = 0; i < count; ++i) {
    Input in{"input-" + std::to_string(i), {}};
    const std::size_t lines = rng() % 300;
    for (std::size_t k = 0; k < lines; ++k) {
      in.text += random_string(rng, "abcab \r\0"s, rng() % 60);
      in.text += '\n';
    }
    inputs.push_back(std::move(in));
  }
  return inputs;
}

std::vector<SearchOptions> option_sets() {
  std::vector<SearchOptions> v;
  v.push_back(SearchOptions{.line_numbers = true, .pattern_ids = true});
  v.push_back(SearchOptions{.invert = true, .line_numbers = true});
  v.push_back(SearchOptions{.word = true, .line_numbers = true, .pattern_ids = true});
  v.push_back(SearchOptions{.whole_line = true});
  v.push_back(SearchOptions{.max_count = 3, .line_numbers = true});
  v.push_back(SearchOptions{.before = 1, .after = 2, .group_separators = true, .line_numbers = true});
  v.push_back(SearchOptions{.quiet = true, .counting = true});
  v.push_back(SearchOptions{.quiet = true, .stop_on_first = true});
  return v;
}

void check(Scanner& stream_scanner, Scanner& reference_scanner, std::mt19937& rng, std::size_t batch_bytes) {
  const std::vector<Input> inputs = make_inputs(rng, 2 + rng() % 6);
  for (const SearchOptions& options : option_sets()) {
    PerSourceSink sink;
    RecordChannel channel(RecordChannel::Config{batch_bytes, 2 + rng() % 2});
    StreamGrep pipeline(stream_scanner, options, sink, channel, StreamGrepConfig{});
    std::thread producer(produce, std::ref(channel), std::cref(inputs), std::mt19937(rng()));
    pipeline.run();
    producer.join();
    bool any = false;
    for (const Input& in : inputs) {
      const std::vector<std::string> expected = expected_events(reference_scanner, options, in);
      EXPECT_EQ(sink.events[in.name], expected) << in.name << " batch_bytes=" << batch_bytes;
      for (const std::string& e : expected) any = any || e.rfind("finish 0", 0) != 0;
    }
    EXPECT_EQ(pipeline.selected(), any);
    EXPECT_GT(sink.flushes, 0);
  }
}

TEST(StreamGrep, InterleavedInputsEqualEachInputAlone) {
  GPUFILTER_OPEN_DEVICE(dev);
  std::mt19937 rng(71);
  for (int round = 0; round < 3; ++round) {
    const std::string sample = random_string(rng, "abcab \r\0"s, 2000);
    const PatternSet patterns = random_patterns(rng, "abc \0"s, 1 + rng() % 40, 6, sample);
    const ScanProgram matcher(*dev, patterns, MatchOptions{.ignore_case = round == 1});
    HostScanner reference(matcher.table(), ScanConfig{.chunk_bytes = 1 << 16, .slots = 2});
    for (std::size_t batch : {std::size_t{128}, std::size_t{4096}}) {
      HostScanner host(matcher.table(), ScanConfig{.chunk_bytes = batch, .slots = 3});
      check(host, reference, rng, batch);
      DeviceScanner device(*dev, matcher, ScanConfig{.chunk_bytes = batch, .slots = 2});
      check(device, reference, rng, batch);
      // The device engine with small batches scanned on the host.
      DeviceScanner mixed(*dev, matcher, ScanConfig{.chunk_bytes = batch, .slots = 3, .host_scan_below = batch / 2});
      check(mixed, reference, rng, batch);
    }
  }
}

// Over-long lines a reader dropped still count in line numbers.
TEST(StreamGrep, SkippedLinesCountInLineNumbers) {
  PatternSet patterns;
  patterns.add("x");
  const PatternTable table(patterns, MatchOptions{});
  HostScanner host(table, ScanConfig{.chunk_bytes = 256, .slots = 2});
  PerSourceSink sink;
  RecordChannel channel(RecordChannel::Config{256, 2});
  const StreamId s = channel.new_stream_id();
  channel.open(s, "tcp://peer");
  channel.append(s, 0, "ax\nb\n");
  channel.append(s, 100, "cx\n", 2);  // two lines were dropped between
  channel.close(s);
  channel.finish();
  StreamGrep pipeline(host, SearchOptions{.line_numbers = true}, sink, channel, StreamGrepConfig{});
  pipeline.run();
  EXPECT_EQ(sink.events["tcp://peer"],
            (std::vector<std::string>{"match 0 1 [ax]", "match 100 5 [cx]", "finish 2"}));
}

// -q: the first selected line anywhere decides everything, once.
TEST(StreamGrep, QuietDecidesAtTheFirstSelectedLine) {
  PatternSet patterns;
  patterns.add("needle");
  const PatternTable table(patterns, MatchOptions{});
  HostScanner host(table, ScanConfig{.chunk_bytes = 256, .slots = 2});
  PerSourceSink sink;
  RecordChannel channel(RecordChannel::Config{256, 2});
  const StreamId a = channel.new_stream_id(), b = channel.new_stream_id();
  channel.open(a, "a");
  channel.open(b, "b");
  channel.append(a, 0, "hay\n");
  channel.append(b, 0, "a needle\n");
  channel.append(a, 4, "needle too\n");
  channel.finish();
  StreamGrep pipeline(host, SearchOptions{.quiet = true, .stop_on_first = true}, sink, channel,
                          StreamGrepConfig{.stop_on_first_selected = true});
  int decided = 0;
  pipeline.on_decided([&] { ++decided; });
  pipeline.run();
  EXPECT_EQ(decided, 1);
  EXPECT_TRUE(pipeline.selected());
  EXPECT_EQ(sink.events["b"], (std::vector<std::string>{"finish 1"}));
}

// Acknowledgements come only after the output is flushed, and name each stream's end.
TEST(StreamGrep, AcknowledgesWhatWasFlushed) {
  PatternSet patterns;
  patterns.add("x");
  const PatternTable table(patterns, MatchOptions{});
  HostScanner host(table, ScanConfig{.chunk_bytes = 64, .slots = 2});
  PerSourceSink sink;
  RecordChannel channel(RecordChannel::Config{64, 2});
  const StreamId s = channel.new_stream_id();
  channel.open(s, "f");
  channel.append(s, 1000, "x1\nx2\n");
  channel.close(s);
  channel.finish();
  EXPECT_FALSE(channel.acknowledged(s).has_value());
  StreamGrep pipeline(host, SearchOptions{}, sink, channel, StreamGrepConfig{});
  pipeline.run();
  ASSERT_TRUE(channel.acknowledged(s).has_value());
  EXPECT_EQ(*channel.acknowledged(s), 1006u);
}

}  // namespace

namespace {

using namespace gpufilter;

// Records every line with the positions of its occurrences in it.
class LineRecorder final : public StreamConsumer {
 public:
  void open(const BatchEntry&) override {}
  void close(const BatchEntry&) override {}
  void lines(const BatchEntry&, const Chunk& piece, std::span<const Occurrence> occurrences) override {
    std::size_t begin = 0, index = 0;
    while (begin < piece.size) {
      const std::size_t end = std::string_view(piece.data, piece.size).find('\n', begin);
      std::vector<std::uint32_t> ids;
      for (; index < occurrences.size() && occurrences[index].position < end; ++index)
        ids.push_back(static_cast<std::uint32_t>(occurrences[index].position - begin));
      seen.emplace_back(std::string(piece.data + begin, end - begin), ids);
      begin = end + 1;
    }
  }
  void flush() override {}
  std::vector<std::pair<std::string, std::vector<std::uint32_t>>> seen;
};

// A task between batches swaps the scanner while a producer keeps appending: every line
// arrives once, in order, and lines after the swap are scanned with the new patterns.
TEST(StreamScan, ReplacingTheScannerBetweenBatchesLosesAndRepeatsNothing) {
  PatternSet before_set, after_set;
  before_set.add("old");
  after_set.add("new");
  const PatternTable before(before_set, MatchOptions{}), after(after_set, MatchOptions{});
  HostScanner first(before, ScanConfig{.chunk_bytes = 256, .slots = 2});
  HostScanner second(after, ScanConfig{.chunk_bytes = 256, .slots = 2});
  RecordChannel channel(RecordChannel::Config{256, 2});
  LineRecorder recorder;
  StreamScan loop(first, recorder, channel, std::chrono::milliseconds(5));
  std::atomic<std::size_t> swapped_at{0};
  std::thread producer([&] {
    const StreamId s = channel.new_stream_id();
    channel.open(s, "s");
    std::uint64_t offset = 0;
    for (int i = 0; i < 20000; ++i) {
      const std::string line = "line " + std::to_string(i) + " old new\n";
      while (channel.append(s, offset, line) == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
      offset += line.size();
      if (i == 10000) loop.run_between_batches([&] {
          swapped_at = recorder.seen.size();
          loop.replace_scanner(second);
        });
    }
    channel.close(s);
    channel.finish();
  });
  loop.run();
  producer.join();
  ASSERT_EQ(recorder.seen.size(), 20000u);
  ASSERT_GT(swapped_at.load(), 0u);
  for (std::size_t i = 0; i < recorder.seen.size(); ++i) {
    ASSERT_EQ(recorder.seen[i].first, "line " + std::to_string(i) + " old new");
    // One occurrence per line: "old" before the swap, "new" (4 bytes later) after it.
    const std::size_t old_at = recorder.seen[i].first.find("old");
    ASSERT_EQ(recorder.seen[i].second,
              std::vector<std::uint32_t>{static_cast<std::uint32_t>(i < swapped_at ? old_at : old_at + 4)})
        << "line " << i << ", swapped at " << swapped_at;
  }
  // The task ran after line 10,000 was appended; lines appended meanwhile may have gone
  // in the batches before it, so the switch falls at or after that line.
  EXPECT_GE(swapped_at.load(), 1u);
  EXPECT_LT(swapped_at.load(), 20000u);
}

}  // namespace
