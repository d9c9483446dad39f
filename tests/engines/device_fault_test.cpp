// The OpenCL device failing mid-stream (issue 8): ScanConfig::device_faults makes
// DeviceScanner's own OpenCL calls throw real cl::Errors (a failed kernel launch, a failed
// wait after the kernel ran, no memory to grow an occurrence buffer or to make a slot, a
// lost device), and the scanner must redo on the host every chunk it had not completed
// and go on there. Checked on a real device (PoCL here) against the reference matcher, a
// run without faults and the host engine: no occurrence, total, per-pattern count or line
// lost or doubled, one fault counted, and counts flagged where they cannot be exact.
#include <gtest/gtest.h>

#include <CL/opencl.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpufilter/opencl/device.hpp"
#include "gpufilter/opencl/device_scanner.hpp"
#include "gpufilter/core/errors.hpp"
#include "gpufilter/hyperscan/host_scanner.hpp"
#include "gpufilter/opencl/scan_program.hpp"
#include "gpufilter/patterns/pattern_set.hpp"
#include "gpufilter/scan/file_scan.hpp"
#include "gpufilter/grep/searcher.hpp"
#include "testutil/testutil.hpp"

namespace {

using gpufilter::ConfigError;
using gpufilter::DeviceContext;
using gpufilter::DeviceError;
using gpufilter::DeviceFaults;
using gpufilter::DeviceScanner;
using gpufilter::HostScanner;
using gpufilter::ScanProgram;
using gpufilter::MatchOptions;
using gpufilter::PatternSet;
using gpufilter::PatternTable;
using gpufilter::FileScan;
using gpufilter::FileScanConfig;
using gpufilter::ScanConfig;
using gpufilter::Scanner;
using gpufilter::ScanSlot;
using gpufilter::Searcher;
using gpufilter::SearchOptions;
using gpufilter::test::as_pairs;
using gpufilter::test::corpus_path;
using gpufilter::test::diff;
using gpufilter::test::Pair;
using gpufilter::test::read_file;
using gpufilter::test::RecordingSink;
using gpufilter::test::reference;
using gpufilter::test::StringSource;

// Two real logs, one after the other (about 440 KB).
std::string corpus_text() {
  return read_file(corpus_path("loghub/OpenSSH_2k.log")) + read_file(corpus_path("loghub/Linux_2k.log"));
}

// Words of both logs: a few selected lines per chunk, some patterns sharing prefixes.
PatternSet pattern_set(const std::vector<std::string>& list) {
  PatternSet set;
  for (const std::string& p : list) set.add(p);
  return set;
}

PatternSet sparse_patterns() {
  return pattern_set({"Failed password", "Invalid user", "preauth", "authentication failure", "session opened",
                      "session", "root", "Received disconnect", "kernel", "error", "ALERT", "not found"});
}

// Digits too: more occurrences per chunk than a slot's first occurrence buffer holds at
// 64 KiB (one per 16 bytes), so buffers grow.
PatternSet dense_patterns() {
  return pattern_set({"0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "sshd", "Failed password", "user"});
}

// Only digits: one occurrence per digit.
PatternSet digit_patterns() { return pattern_set({"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}); }

// The lines of `text` ordered by their share of digits (stable): with digit_patterns(),
// each fixed-size chunk then holds more occurrences than the one before, so every chunk
// past the first buffer's size grows its slot's buffer, whatever slot it is in.
std::string by_digit_density(const std::string& text) {
  struct Line {
    std::string_view text;
    std::size_t digits;
  };
  std::vector<Line> lines;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t nl = text.find('\n', at);
    const std::size_t end = nl == std::string::npos ? text.size() : nl + 1;
    const std::string_view line(text.data() + at, end - at);
    lines.push_back({line, static_cast<std::size_t>(std::count_if(line.begin(), line.end(), [](char c) {
                       return c >= '0' && c <= '9';
                     }))});
    at = end;
  }
  std::stable_sort(lines.begin(), lines.end(), [](const Line& a, const Line& b) {
    return a.digits * b.text.size() < b.digits * a.text.size();
  });
  std::string sorted;
  for (const Line& line : lines) sorted += line.text;
  return sorted;
}

// `text` cut into chunks of `size` bytes (the scanner does not care about lines), and the
// reference matcher's answer for each.
struct Chunked {
  std::vector<std::string> chunks;
  std::vector<std::vector<Pair>> expected;
  std::vector<std::vector<std::uint64_t>> counts;  // per unique pattern, per chunk
};

Chunked cut(const std::string& text, std::size_t size, const PatternSet& patterns, const PatternTable& table) {
  Chunked c;
  for (std::size_t at = 0; at < text.size(); at += size) {
    c.chunks.push_back(text.substr(at, size));
    c.expected.push_back(reference(patterns, table, c.chunks.back(), 0));
    std::vector<std::uint64_t> counts(table.unique_count(), 0);
    for (const Pair& p : c.expected.back()) ++counts[p.second];
    c.counts.push_back(std::move(counts));
  }
  return c;
}

std::vector<std::uint64_t> sum_counts(const Chunked& c, std::size_t from = 0) {
  std::vector<std::uint64_t> sum(c.counts.empty() ? 0 : c.counts[0].size(), 0);
  for (std::size_t i = from; i < c.counts.size(); ++i)
    for (std::size_t k = 0; k < sum.size(); ++k) sum[k] += c.counts[i][k];
  return sum;
}

struct ScanRun {
  std::vector<std::vector<Pair>> occurrences;
  std::vector<std::uint64_t> totals;
  std::vector<std::uint64_t> counts;
  bool counts_exact = true;
  std::uint64_t faults = 0;
  std::uint64_t fallback_chunks = 0;
  std::uint64_t host_chunks = 0;
  std::optional<DeviceError> fault;
  int handler_calls = 0;
  std::optional<std::uint64_t> fault_seq;  // the chunk the handler was given, if any
  std::size_t completed_at_fault = 0;      // chunks completed when the fault came
};

// Submits every chunk in order as the pipeline does (a free slot, or the oldest completed
// first when every slot is in flight), so that up to `slots` chunks are in flight when a
// fault comes, and collects what each chunk completes with.
ScanRun scan_all(DeviceContext& dev, const ScanProgram& matcher, const ScanConfig& config, const Chunked& c) {
  DeviceScanner scanner(dev, matcher, config);
  ScanRun r;
  std::size_t next_done = 0;
  scanner.on_fault([&](const DeviceError&, const gpufilter::Chunk& chunk) {
    ++r.handler_calls;
    if (chunk.size > 0) r.fault_seq = chunk.seq;
    r.completed_at_fault = next_done;
  });
  const auto complete = [&] {
    ScanSlot& done = scanner.complete_oldest();
    EXPECT_EQ(done.chunk().seq, next_done);
    r.occurrences.push_back(as_pairs(done.occurrences()));
    r.totals.push_back(done.total());
    ++next_done;
    scanner.release(done);
  };
  for (std::size_t i = 0; i < c.chunks.size(); ++i) {
    ScanSlot* slot = scanner.acquire();
    while (slot == nullptr) {
      complete();
      slot = scanner.acquire();
    }
    std::memcpy(slot->staging(), c.chunks[i].data(), c.chunks[i].size());
    slot->chunk() = gpufilter::Chunk{};
    slot->chunk().seq = i;
    slot->chunk().offset = i * config.chunk_bytes;
    slot->chunk().data = slot->staging();
    slot->chunk().size = c.chunks[i].size();
    scanner.submit(*slot);
  }
  while (scanner.in_flight() > 0) complete();
  r.counts = scanner.pattern_counts();
  r.counts_exact = scanner.counts_exact();
  r.faults = scanner.device_faults();
  r.fallback_chunks = scanner.fallback_chunks();
  r.host_chunks = scanner.host_chunks();
  r.fault = scanner.fault();
  return r;
}

// Every chunk completed once, in order, with the reference's occurrences and totals.
void expect_complete(const ScanRun& r, const Chunked& c, bool locate, const std::string& what) {
  ASSERT_EQ(r.totals.size(), c.chunks.size()) << what;
  for (std::size_t i = 0; i < c.chunks.size(); ++i) {
    EXPECT_EQ(r.totals[i], c.expected[i].size()) << what << " chunk " << i;
    if (locate) EXPECT_EQ(diff(c.expected[i], r.occurrences[i]), "") << what << " chunk " << i;
    else EXPECT_TRUE(r.occurrences[i].empty()) << what << " chunk " << i;
  }
}

struct Kind {
  const char* name;
  std::uint64_t DeviceFaults::*field;
  int code;
  const char* call;
};

const Kind kSubmit{"submit", &DeviceFaults::submit, CL_OUT_OF_RESOURCES, "clEnqueueNDRangeKernel"};
const Kind kFinish{"finish", &DeviceFaults::finish, CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST, "clWaitForEvents"};
const Kind kOom{"oom", &DeviceFaults::oom, CL_MEM_OBJECT_ALLOCATION_FAILURE, "clCreateBuffer"};
const Kind kAlloc{"alloc", &DeviceFaults::alloc, CL_MEM_OBJECT_ALLOCATION_FAILURE, "clCreateBuffer"};
const Kind kLost{"lost", &DeviceFaults::lost, CL_OUT_OF_RESOURCES, "clFlush"};

// One faulty run: complete and exact output, one fault of the planned kind, reported once
// with its chunk, and the per-pattern counts exact or flagged as the header documents.
void check_fault(DeviceContext& dev, const ScanProgram& matcher, ScanConfig config, const Chunked& c, const Kind& kind,
                 std::uint64_t n, std::optional<std::uint64_t> fault_seq, const std::string& note) {
  config.device_faults.*kind.field = n;
  const std::string what = std::string(kind.name) + ":" + std::to_string(n) + " " + note +
                           " chunk=" + std::to_string(config.chunk_bytes) + " slots=" + std::to_string(config.slots) +
                           " locate=" + std::to_string(config.locate);
  const ScanRun r = scan_all(dev, matcher, config, c);
  expect_complete(r, c, config.locate, what);
  EXPECT_EQ(r.faults, 1u) << what;
  EXPECT_EQ(r.handler_calls, 1) << what;
  ASSERT_TRUE(r.fault.has_value()) << what;
  EXPECT_EQ(r.fault->code(), kind.code) << what;
  EXPECT_EQ(r.fault->call(), kind.call) << what;
  EXPECT_EQ(r.fault_seq, fault_seq) << what;
  // The failing chunk and those in flight beside it were redone on the host, and every
  // chunk after them was scanned there: nothing of the device was used after the fault.
  EXPECT_GE(r.fallback_chunks, 1u) << what;
  EXPECT_LE(r.fallback_chunks, config.slots) << what;
  EXPECT_EQ(r.host_chunks, c.chunks.size() - r.completed_at_fault) << what;
  if (!config.count_patterns) return;
  if (kind.field == &DeviceFaults::lost) {
    // The counters could not be read: the counts are the host's alone, every chunk not
    // completed before the fault, and flagged.
    EXPECT_FALSE(r.counts_exact) << what;
    EXPECT_EQ(r.counts, sum_counts(c, r.completed_at_fault)) << what << " completed at fault " << r.completed_at_fault;
  } else {
    EXPECT_TRUE(r.counts_exact) << what;
    EXPECT_EQ(r.counts, sum_counts(c)) << what;
  }
}

class DeviceFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      dev_.emplace();
    } catch (const gpufilter::NoDeviceError& e) {
      GTEST_SKIP() << "no OpenCL device: " << e.what();
    }
  }
  std::optional<DeviceContext> dev_;
};

TEST(DeviceFaults, ParsesThePlanAndRejectsMalformedOnes) {
  const DeviceFaults one = DeviceFaults::parse("submit:3");
  EXPECT_EQ(one.submit, 3u);
  EXPECT_EQ(one.finish + one.oom + one.alloc + one.lost, 0u);
  EXPECT_TRUE(one.any());
  const DeviceFaults all = DeviceFaults::parse("finish:1,oom:22,alloc:2,lost:5,submit:7");
  EXPECT_EQ(all.finish, 1u);
  EXPECT_EQ(all.oom, 22u);
  EXPECT_EQ(all.alloc, 2u);
  EXPECT_EQ(all.lost, 5u);
  EXPECT_EQ(all.submit, 7u);
  EXPECT_FALSE(DeviceFaults{}.any());
  for (const char* bad : {"", "submit", "submit:", "submit:0", "submit:-1", "submit:x", "submit:3,", "burn:1",
                          "submit:1:2", ",submit:1", "submit:99999999999999999999999"}) {
    try {
      DeviceFaults::parse(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("'") + bad + "'"), std::string::npos) << e.what();
    }
  }
}

// Without a plan: every chunk on the device, no fault, exact counts. The baseline that
// the faulty runs below must equal.
TEST_F(DeviceFaultTest, NoPlanNoFault) {
  const PatternSet patterns = sparse_patterns();
  const ScanProgram matcher(*dev_, patterns, MatchOptions{});
  const Chunked c = cut(corpus_text(), 16 << 10, patterns, matcher.table());
  const ScanConfig config{.chunk_bytes = 16 << 10, .slots = 3, .count_patterns = true};
  const ScanRun r = scan_all(*dev_, matcher, config, c);
  expect_complete(r, c, true, "no plan");
  EXPECT_EQ(r.faults, 0u);
  EXPECT_EQ(r.handler_calls, 0);
  EXPECT_FALSE(r.fault.has_value());
  EXPECT_EQ(r.fallback_chunks, 0u);
  EXPECT_EQ(r.host_chunks, 0u);
  EXPECT_TRUE(r.counts_exact);
  EXPECT_EQ(r.counts, sum_counts(c));
}

// A failed kernel launch, a failed wait after the kernel ran, and a lost device, at the
// first, a middle and the last chunk, with 2 and 3 slots in flight, 4 KiB and 64 KiB
// chunks, locating occurrences or only counting them (grep -c).
TEST_F(DeviceFaultTest, SubmitFinishAndLostAtFirstMiddleAndLastChunk) {
  const std::string text = corpus_text();
  for (const PatternSet& patterns : {sparse_patterns(), dense_patterns()}) {
    const ScanProgram matcher(*dev_, patterns, MatchOptions{});
    for (std::size_t chunk : {std::size_t{4} << 10, std::size_t{64} << 10}) {
      const Chunked c = cut(text, chunk, patterns, matcher.table());
      ASSERT_GE(c.chunks.size(), 6u);
      const std::uint64_t last = c.chunks.size();
      for (std::size_t slots : {2u, 3u}) {
        for (const Kind* kind : {&kSubmit, &kFinish, &kLost}) {
          for (std::uint64_t n : {std::uint64_t{1}, last / 2, last}) {
            for (bool locate : {true, false}) {
              // Count-only runs (grep -c) at the middle chunk only: the same paths, cheaper.
              if (!locate && n != last / 2) continue;
              const ScanConfig config{.chunk_bytes = chunk, .slots = slots, .locate = locate, .count_patterns = true};
              check_fault(*dev_, matcher, config, c, *kind, n, n - 1, std::to_string(patterns.size()) + " patterns");
            }
          }
        }
      }
    }
  }
}

// No memory to grow an occurrence buffer: the chunk's kernel completed and counted, so
// the host rescans it without counting and the counts stay exact. The lines are ordered
// by their share of digits, so every chunk past the first buffer's size grows its slot's
// buffer: the Nth growth is the Nth such chunk, in whatever slot.
TEST_F(DeviceFaultTest, FailedBufferGrowthAtFirstMiddleAndLastGrowth) {
  const PatternSet patterns = digit_patterns();
  const ScanProgram matcher(*dev_, patterns, MatchOptions{});
  constexpr std::size_t kChunk = 64 << 10;
  std::string text = by_digit_density(corpus_text());
  text.resize(text.size() / kChunk * kChunk);  // full chunks only: a short last one holds fewer
  const Chunked c = cut(text, kChunk, patterns, matcher.table());
  const std::size_t first_capacity = std::max<std::size_t>(4096, kChunk / 16);  // DeviceScanner's kMinOutput
  std::vector<std::uint64_t> growing;  // chunks that grow a buffer, in order
  for (std::size_t i = 0; i < c.chunks.size(); ++i)
    if (c.expected[i].size() > first_capacity) growing.push_back(i);
  ASSERT_GE(growing.size(), 3u);
  for (std::size_t k = 1; k < growing.size(); ++k)
    ASSERT_GT(c.expected[growing[k]].size(), c.expected[growing[k - 1]].size()) << "chunk " << growing[k];
  for (std::size_t slots : {2u, 3u}) {
    for (std::size_t g : {std::size_t{0}, growing.size() / 2, growing.size() - 1}) {
      const ScanConfig config{.chunk_bytes = kChunk, .slots = slots, .count_patterns = true};
      check_fault(*dev_, matcher, config, c, kOom, g + 1, growing[g], "digit-sorted");
    }
  }
}

// No memory for a slot made when first needed (after the first): the chunks in flight in
// the other slots are redone on the host, and the new slot has host staging only.
TEST_F(DeviceFaultTest, FailedSlotAllocation) {
  const PatternSet patterns = sparse_patterns();
  const ScanProgram matcher(*dev_, patterns, MatchOptions{});
  const Chunked c = cut(corpus_text(), 16 << 10, patterns, matcher.table());
  for (std::size_t slots : {2u, 3u, 4u}) {
    for (std::uint64_t n = 1; n < slots; ++n) {
      const ScanConfig config{.chunk_bytes = 16 << 10, .slots = slots, .count_patterns = true};
      check_fault(*dev_, matcher, config, c, kAlloc, n, std::nullopt, "sparse");
    }
  }
}

// An early stop (grep -m, -q) drops the chunks in flight after a fault; the scanner goes
// on with later chunks on the host, and tears down cleanly.
TEST_F(DeviceFaultTest, DiscardAfterFaultThenScanOn) {
  const PatternSet patterns = sparse_patterns();
  const ScanProgram matcher(*dev_, patterns, MatchOptions{});
  const Chunked c = cut(corpus_text(), 16 << 10, patterns, matcher.table());
  for (const Kind* kind : {&kFinish, &kLost}) {
    ScanConfig config{.chunk_bytes = 16 << 10, .slots = 3, .count_patterns = true};
    config.device_faults.*kind->field = 2;
    DeviceScanner scanner(*dev_, matcher, config);
    const auto submit = [&](std::size_t i) {
      ScanSlot* slot = scanner.acquire();
      ASSERT_NE(slot, nullptr);
      std::memcpy(slot->staging(), c.chunks[i].data(), c.chunks[i].size());
      slot->chunk() = gpufilter::Chunk{};
      slot->chunk().seq = i;
      slot->chunk().data = slot->staging();
      slot->chunk().size = c.chunks[i].size();
      scanner.submit(*slot);
    };
    for (std::size_t i = 0; i < 3; ++i) submit(i);
    ScanSlot& first = scanner.complete_oldest();
    EXPECT_EQ(diff(c.expected[0], as_pairs(first.occurrences())), "") << kind->name;
    scanner.release(first);
    submit(3);  // lost:2 failed at chunk 1's submission; finish:2 fails in the discard below
    scanner.discard_in_flight();
    EXPECT_EQ(scanner.in_flight(), 0u);
    EXPECT_EQ(scanner.device_faults(), 1u) << kind->name;
    for (std::size_t i = 4; i < 8; ++i) {
      submit(i);
      ScanSlot& done = scanner.complete_oldest();
      EXPECT_EQ(diff(c.expected[i], as_pairs(done.occurrences())), "") << kind->name << " chunk " << i;
      EXPECT_EQ(done.total(), c.expected[i].size());
      scanner.release(done);
    }
    EXPECT_EQ(scanner.device_faults(), 1u) << kind->name;
  }
}

// --- The whole pipeline: line output ------------------------------------------------

struct LineRun {
  std::vector<std::string> events;
  std::uint64_t faults = 0;
  std::uint64_t selected = 0;
};

LineRun run_lines(DeviceContext& dev, const ScanProgram& matcher, const std::string& text, bool regular,
                  const DeviceFaults& faults, bool host_engine = false) {
  const ScanConfig config{.chunk_bytes = 16 << 10, .slots = 3, .device_faults = faults};
  std::unique_ptr<Scanner> scanner;
  if (host_engine) scanner = std::make_unique<HostScanner>(matcher.table(), config);
  else scanner = std::make_unique<DeviceScanner>(dev, matcher, config);
  RecordingSink sink;
  Searcher searcher(matcher.table(), SearchOptions{.line_numbers = true, .spans = true}, sink);
  FileScan pipeline(*scanner, searcher, FileScanConfig{});
  // A stream is read in pieces of a few KB, as from a pipe, so chunks are cut where the
  // reads end as well as where the chunk fills.
  StringSource source(text, regular ? 0 : 5000, "(test)", regular);
  LineRun r;
  r.selected = pipeline.run(source).selected_lines;
  r.events = sink.events();
  if (!host_engine) r.faults = static_cast<DeviceScanner&>(*scanner).device_faults();
  return r;
}

// "" when equal, otherwise the event counts and the first differing event.
std::string first_difference(const std::vector<std::string>& expected, const std::vector<std::string>& actual) {
  if (expected == actual) return {};
  std::size_t i = 0;
  while (i < expected.size() && i < actual.size() && expected[i] == actual[i]) ++i;
  const auto show = [](const std::vector<std::string>& v, std::size_t k) {
    if (k >= v.size()) return std::string("(end)");
    std::string quoted(1, '\'');
    quoted.append(v[k], 0, 300);
    quoted.push_back('\'');
    return quoted;
  };
  return std::to_string(expected.size()) + " events expected, " + std::to_string(actual.size()) +
         " got; first difference at event " + std::to_string(i) + ": expected " + show(expected, i) + ", got " +
         show(actual, i);
}

// Lines holding at least one pattern, found with std::string::find.
std::uint64_t naive_selected(const std::string& text, const PatternSet& patterns) {
  std::uint64_t n = 0;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t nl = text.find('\n', at);
    const std::size_t end = nl == std::string::npos ? text.size() : nl;
    const std::string_view line(text.data() + at, end - at);
    if (std::any_of(patterns.patterns().begin(), patterns.patterns().end(),
                    [&](const std::string& p) { return line.find(p) != std::string_view::npos; }))
      ++n;
    at = end + 1;
  }
  return n;
}

// The pipeline over a regular file (read ahead on its own thread) and over a stream read
// in pieces: with each kind of fault at the first, a middle and the last chunk, the
// selected lines, their offsets, numbers and match spans equal a run without faults and
// the host engine's, and their number the plain count of lines holding a pattern.
TEST_F(DeviceFaultTest, PipelineLinesUnchangedByFaults) {
  const std::string text = corpus_text();
  const PatternSet patterns = dense_patterns();
  const ScanProgram matcher(*dev_, patterns, MatchOptions{});
  const std::uint64_t expected_selected = naive_selected(text, patterns);
  ASSERT_GT(expected_selected, 1000u);
  for (bool regular : {true, false}) {
    const std::string where = regular ? "file" : "stream";
    const LineRun host = run_lines(*dev_, matcher, text, regular, {}, true);
    const LineRun clean = run_lines(*dev_, matcher, text, regular, {});
    EXPECT_EQ(host.selected, expected_selected) << where;
    EXPECT_EQ(clean.events, host.events) << where;
    EXPECT_EQ(clean.faults, 0u);
    const std::uint64_t chunks = text.size() / (16 << 10);  // at least this many
    for (const Kind* kind : {&kSubmit, &kFinish, &kLost, &kAlloc}) {
      for (std::uint64_t n : {std::uint64_t{1}, chunks / 2, chunks}) {
        if (kind == &kAlloc && n > 2) continue;  // two slots are made after the first
        DeviceFaults faults;
        faults.*kind->field = n;
        const LineRun r = run_lines(*dev_, matcher, text, regular, faults);
        const std::string what = where + " " + kind->name + ":" + std::to_string(n);
        EXPECT_EQ(r.faults, 1u) << what;
        EXPECT_EQ(r.selected, expected_selected) << what;
        EXPECT_EQ(first_difference(clean.events, r.events), "") << what;
      }
    }
  }
}

// A dense set and 64 KiB chunks, where buffers do grow: the pipeline survives the
// failed growth with every line in place.
TEST_F(DeviceFaultTest, PipelineLinesUnchangedByFailedGrowth) {
  const std::string text = corpus_text();
  const PatternSet patterns = dense_patterns();
  const ScanProgram matcher(*dev_, patterns, MatchOptions{});
  for (bool regular : {true, false}) {
    const ScanConfig base{.chunk_bytes = 64 << 10, .slots = 3};
    const auto run = [&](const DeviceFaults& faults, std::uint64_t* fault_count) {
      ScanConfig config = base;
      config.device_faults = faults;
      DeviceScanner scanner(*dev_, matcher, config);
      RecordingSink sink;
      Searcher searcher(matcher.table(), SearchOptions{.line_numbers = true, .spans = true}, sink);
      FileScan pipeline(scanner, searcher, FileScanConfig{});
      StringSource source(text, regular ? 0 : 7000, "(test)", regular);
      pipeline.run(source);
      *fault_count = scanner.device_faults();
      return sink.events();
    };
    std::uint64_t none = 0, one = 0;
    const auto clean = run({}, &none);
    for (std::uint64_t n : {1u, 2u}) {
      DeviceFaults faults;
      faults.oom = n;
      const auto faulty = run(faults, &one);
      EXPECT_EQ(none, 0u);
      EXPECT_EQ(one, 1u) << (regular ? "file" : "stream") << " oom:" << n;
      EXPECT_EQ(first_difference(clean, faulty), "") << (regular ? "file" : "stream") << " oom:" << n;
    }
  }
}

}  // namespace
