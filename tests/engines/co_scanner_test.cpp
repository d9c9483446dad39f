// Co-scanning (--engine=both): the host engine and an OpenCL device (PoCL on a CPU-only
// machine) scan one stream of chunks together; every chunk's occurrences, total and first
// NUL are the reference's, whichever engine took it, and come back in submission order.
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gpufilter/core/errors.hpp"
#include "gpufilter/engines/engine.hpp"
#include "gpufilter/patterns/pattern_set.hpp"
#include "testutil/testutil.hpp"

namespace {

using namespace gpufilter;
using gpufilter::test::as_pairs;
using gpufilter::test::diff;
using gpufilter::test::Pair;
using gpufilter::test::random_patterns;
using gpufilter::test::random_string;
using gpufilter::test::reference;

bool have_opencl() {
  try {
    return !opencl_devices().empty();
  } catch (const NoDeviceError&) {
    return false;
  }
}

struct CoRun {
  std::unique_ptr<Engines> engines;
  std::unique_ptr<Engine> engine;
};

CoRun co_engine(const PatternSet& patterns, std::size_t chunk_bytes, std::size_t slots, DeviceFaults faults = {},
               std::size_t lanes = 2) {
  CoRun run;
  run.engines = std::make_unique<Engines>("");
  EngineRequest request;
  request.choice = EngineChoice::kBoth;
  request.patterns = PatternStats::of(patterns);
  request.chunk_bytes = chunk_bytes;
  request.slots = slots;
  request.host_scan_below = 0;  // every chunk may go to the device
  request.lanes = lanes;
  request.slots_per_lane = lanes == 1 ? 1 : 2;
  request.device_faults = faults;
  const EnginePlan plan = run.engines->plan(request);
  EXPECT_EQ(plan.engine, EngineKind::kBoth);
  run.engine = run.engines->compile(plan, patterns, MatchOptions{});
  return run;
}

struct Sent {
  std::string text;
  std::size_t overlap;
  std::size_t nul_search;
};

// Submits `texts` as chunks through every slot, completing the oldest when none is free,
// and checks each completed chunk against the reference.
void scan_and_check(Scanner& scanner, const PatternSet& patterns, const std::vector<Sent>& texts) {
  std::deque<const Sent*> in_flight;
  std::vector<std::unique_ptr<std::string>> outside;  // half the chunks lie there, as a mapped file's do
  std::size_t next = 0;
  std::uint64_t seq = 0;
  auto complete = [&] {
    const Sent& sent = *in_flight.front();
    in_flight.pop_front();
    ScanSlot& slot = scanner.complete_oldest();
    ASSERT_EQ(slot.chunk().size, sent.text.size());
    const std::vector<Pair> expected = reference(patterns, scanner.table(), sent.text, sent.overlap);
    EXPECT_EQ(diff(expected, as_pairs(slot.occurrences())), "") << "chunk " << slot.chunk().seq;
    EXPECT_EQ(slot.total(), expected.size());
    const std::size_t nul = sent.text.find('\0');
    const std::size_t want_nul = nul < sent.nul_search ? nul : ScanSlot::kNoNul;
    if (sent.nul_search > 0) {
      EXPECT_EQ(slot.first_nul(), want_nul) << "chunk " << slot.chunk().seq;
    }
    scanner.release(slot);
  };
  while (next < texts.size() || !in_flight.empty()) {
    ScanSlot* slot = next < texts.size() ? scanner.acquire() : nullptr;
    if (slot == nullptr) {
      complete();
      continue;
    }
    const Sent& sent = texts[next++];
    char* data = slot->staging();
    if (seq % 2 == 0) {
      outside.push_back(std::make_unique<std::string>(sent.text));
      data = outside.back()->data();
    } else {
      std::memcpy(data, sent.text.data(), sent.text.size());
    }
    slot->chunk() = Chunk{};
    slot->chunk().seq = seq++;
    slot->chunk().data = data;
    slot->chunk().size = sent.text.size();
    slot->chunk().overlap = sent.overlap;
    slot->chunk().nul_search = sent.nul_search;
    scanner.submit(*slot);
    in_flight.push_back(&sent);
  }
}

std::vector<Sent> random_texts(std::mt19937& rng, std::size_t count, std::size_t max_bytes) {
  std::vector<Sent> texts;
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t n = std::uniform_int_distribution<std::size_t>(1, max_bytes)(rng);
    std::string text = random_string(rng, "abcde \n", n);
    if (i % 5 == 3) text[std::uniform_int_distribution<std::size_t>(0, n - 1)(rng)] = '\0';
    const std::size_t overlap = std::uniform_int_distribution<std::size_t>(0, std::min<std::size_t>(n - 1, 7))(rng);
    const std::size_t nul_search = i % 3 == 0 ? 0 : n;  // a mapped chunk's: all of it (no read-ahead here)
    texts.push_back({std::move(text), overlap, nul_search});
  }
  return texts;
}

TEST(CoScanner, EveryChunkIsTheReferencesWhicheverEngineTookIt) {
  if (!have_opencl()) GTEST_SKIP() << "no OpenCL platform";
  std::mt19937 rng(17);
  const std::string sample = random_string(rng, "abcde \n", 4096);
  const PatternSet patterns = random_patterns(rng, "abcde ", 60, 8, sample);
  // One lane of one chunk and 80 chunks in flight: the lane takes a chunk whenever it is
  // free and the host engine the others, however fast either is (an ASan build too).
  CoRun run = co_engine(patterns, 4096, 80, {}, 1);
  Scanner& scanner = run.engine->make_scanner(true, false);
  run.engine->wait_for_device();
  const std::string stats = run.engine->stats_json();
  ASSERT_NE(stats.find("\"device_joined\":true"), std::string::npos) << stats;
  scan_and_check(scanner, patterns, random_texts(rng, 300, 4096));
  const std::string after = run.engine->stats_json();
  EXPECT_EQ(after.find("\"device_chunks\":0,"), std::string::npos) << after;
  EXPECT_EQ(after.find("\"host_chunks\":0"), std::string::npos) << after;
  EXPECT_EQ(scanner.engine(), "cpu+gpu");
  EXPECT_EQ(run.engine->name(), "cpu+gpu");
}

// Start-up never waits for the device: chunks scan on the host before it has joined, and
// the device's lanes join a scanner with chunks in flight.
TEST(CoScanner, ScansBeforeTheDeviceJoinsAndWhileItDoes) {
  if (!have_opencl()) GTEST_SKIP() << "no OpenCL platform";
  std::mt19937 rng(5);
  const std::string sample = random_string(rng, "abcde \n", 4096);
  const PatternSet patterns = random_patterns(rng, "abcde ", 30, 6, sample);
  CoRun run = co_engine(patterns, 2048, 4);
  Scanner& scanner = run.engine->make_scanner(true, false);
  scan_and_check(scanner, patterns, random_texts(rng, 2000, 2048));
  run.engine->wait_for_device();
  scan_and_check(scanner, patterns, random_texts(rng, 100, 2048));
}

TEST(CoScanner, CountsPatternsOverBothEngines) {
  if (!have_opencl()) GTEST_SKIP() << "no OpenCL platform";
  PatternSet patterns;
  patterns.add("ab");
  patterns.add("b");
  CoRun run = co_engine(patterns, 1024, 4);
  Scanner& scanner = run.engine->make_scanner(false, true);
  run.engine->wait_for_device();
  std::vector<Sent> texts(200, Sent{"xabx b\n", 0, 0});
  for (Sent& s : texts) s.text += std::string(900, 'y');
  std::size_t submitted = 0;
  while (submitted < texts.size() || scanner.in_flight() > 0) {
    ScanSlot* slot = submitted < texts.size() ? scanner.acquire() : nullptr;
    if (slot == nullptr) {
      ScanSlot& done = scanner.complete_oldest();
      EXPECT_EQ(done.total(), 3u);
      scanner.release(done);
      continue;
    }
    const std::string& text = texts[submitted].text;
    std::memcpy(slot->staging(), text.data(), text.size());
    slot->chunk() = Chunk{};
    slot->chunk().seq = submitted++;
    slot->chunk().data = slot->staging();
    slot->chunk().size = text.size();
    scanner.submit(*slot);
  }
  const std::vector<std::uint64_t> counts = scanner.pattern_counts();
  ASSERT_EQ(counts.size(), 2u);
  const PatternTable& table = run.engine->table();
  EXPECT_EQ(counts[table.unique_of(0)], 200u);
  EXPECT_EQ(counts[table.unique_of(1)], 400u);
  EXPECT_TRUE(run.engine->counts_exact());
}

// A device that fails mid-run falls back inside its lane: the results stay the
// reference's, and the fault is reported once, on the thread that completes chunks.
TEST(CoScanner, ADeviceFaultIsReportedOnceAndLosesNothing) {
  if (!have_opencl()) GTEST_SKIP() << "no OpenCL platform";
  std::mt19937 rng(9);
  const std::string sample = random_string(rng, "abcde \n", 4096);
  const PatternSet patterns = random_patterns(rng, "abcde ", 40, 6, sample);
  DeviceFaults faults;
  faults.submit = 3;
  CoRun run = co_engine(patterns, 4096, 6, faults);
  int reported = 0;
  const std::thread::id self = std::this_thread::get_id();
  run.engine->on_device_fault([&](const DeviceError& error, const Chunk&) {
    ++reported;
    EXPECT_EQ(std::this_thread::get_id(), self);
    EXPECT_EQ(error.code(), -5);  // CL_OUT_OF_RESOURCES
  });
  Scanner& scanner = run.engine->make_scanner(true, false);
  run.engine->wait_for_device();
  scan_and_check(scanner, patterns, random_texts(rng, 200, 4096));
  EXPECT_EQ(reported, 1);
}

// No OpenCL device to be had: the host engine scans alone, and --stats says why.
TEST(CoScanner, WithoutADeviceTheHostScansAlone) {
  PatternSet patterns;
  patterns.add("needle");
  Engines engines("7:7");  // no such device
  EngineRequest request;
  request.choice = EngineChoice::kBoth;
  request.patterns = PatternStats::of(patterns);
  request.host_scan_below = 0;
  std::unique_ptr<Engine> engine = engines.compile(engines.plan(request), patterns, MatchOptions{});
  Scanner& scanner = engine->make_scanner(true, false);
  engine->wait_for_device();
  EXPECT_NE(engine->stats_json().find("\"device_not_joined\""), std::string::npos) << engine->stats_json();
  std::mt19937 rng(3);
  scan_and_check(scanner, patterns, {Sent{"a needle\nno\nneedle", 0, 0}, Sent{std::string("needle\0x", 8), 2, 8}});
}

}  // namespace
