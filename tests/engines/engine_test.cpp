// The engine policy as a table: device kind x pattern count x input kind (and size) ->
// engine. choose_engine() is the one decision gpufilter and gpufilterd both take; the
// figures behind each row are in docs/PERFORMANCE.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "gpufilter/core/errors.hpp"
#include "gpufilter/engines/engine.hpp"
#include "gpufilter/hyperscan/hs_database.hpp"
#include "gpufilter/patterns/pattern_set.hpp"
#include "testutil/testutil.hpp"

namespace gpufilter {
namespace {

constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;
constexpr EngineKind H = EngineKind::kHost;
constexpr EngineKind D = EngineKind::kDevice;

struct Row {
  EngineChoice choice;
  DeviceKind device;
  std::size_t patterns;
  std::size_t longest;
  InputKind input;
  std::optional<std::uint64_t> bytes;
  EngineKind expected;
  bool asks_device;  // whether the answer needed the device's kind
};

std::string describe(const Row& r) {
  return "choice " + std::to_string(static_cast<int>(r.choice)) + ", device " +
         std::to_string(static_cast<int>(r.device)) + ", " + std::to_string(r.patterns) + " patterns (longest " +
         std::to_string(r.longest) + "), input " + std::to_string(static_cast<int>(r.input)) + ", bytes " +
         (r.bytes ? std::to_string(*r.bytes) : std::string("none"));
}

TEST(EnginePolicy, ChoosesByDeviceKindPatternCountAndInput) {
  using C = EngineChoice;
  using K = DeviceKind;
  using I = InputKind;
  const Row rows[] = {
      // Asked for: no question of the device.
      {C::kHost, K::kGpu, 100'000, 10, I::kFiles, 64 * kGiB, H, false},
      {C::kDevice, K::kNone, 1, 1, I::kStreams, std::nullopt, D, false},
      {C::kDevice, K::kCpu, 10, 5, I::kFiles, kGiB, D, false},
      // One literal: the host engine on any device, for any input.
      {C::kAuto, K::kGpu, 1, 5, I::kFiles, 64 * kGiB, H, false},
      {C::kAuto, K::kNone, 1, 5, I::kStreams, std::nullopt, H, false},
      // Up to 10,000 literals the host engine, whatever the device and the input: it scans
      // files in place on every core, ahead of the GPU path (docs/PERFORMANCE.md).
      {C::kAuto, K::kGpu, 100, 10, I::kFiles, 4 * kGiB, H, false},
      {C::kAuto, K::kGpu, 10'000, 10, I::kFiles, 16 * kGiB, H, false},
      {C::kAuto, K::kGpu, 100, 10, I::kFiles, std::nullopt, H, false},  // a pipe
      {C::kAuto, K::kGpu, 10'000, 10, I::kStreams, std::nullopt, H, false},
      {C::kAuto, K::kGpu, 100, 10, I::kPackets, std::nullopt, H, false},  // a live capture
      {C::kAuto, K::kGpu, 100, 10, I::kPackets, 8 * kGiB, H, false},      // capture files
      {C::kAuto, K::kCpu, 100, 10, I::kFiles, 64 * kGiB, H, false},
      {C::kAuto, K::kNone, 100, 10, I::kFiles, 64 * kGiB, H, false},
      // More than 10,000 literals: a GPU; a CPU OpenCL device only where Hyperscan's
      // compile would cost more than its slower scan (measured, docs/PERFORMANCE.md:
      // 10,001 literals PoCL over 10 MB, the host over 256 MB; 30,000 and 100,000 PoCL
      // up to 256 MB and more).
      {C::kAuto, K::kGpu, 10'001, 10, I::kStreams, std::nullopt, D, true},
      {C::kAuto, K::kCpu, 10'001, 10, I::kFiles, 256u << 20, H, true},
      {C::kAuto, K::kCpu, 10'001, 10, I::kFiles, 10u << 20, D, true},
      {C::kAuto, K::kCpu, 30'000, 10, I::kFiles, 256u << 20, D, true},
      {C::kAuto, K::kCpu, 30'000, 10, I::kFiles, 1u << 30, H, true},
      {C::kAuto, K::kCpu, 100'000, 10, I::kFiles, 256u << 20, D, true},
      {C::kAuto, K::kCpu, 100'000, 10, I::kFiles, std::uint64_t{4} << 30, H, true},
      {C::kAuto, K::kCpu, 100'000, 10, I::kStreams, std::nullopt, H, true},
      {C::kAuto, K::kCpu, 1'000'000, 10, I::kFiles, 64 * kGiB, H, true},
      // A literal longer than Hyperscan takes: any device.
      {C::kAuto, K::kCpu, 2, 16'001, I::kStreams, std::nullopt, D, true},
      {C::kAuto, K::kGpu, 2, 16'000, I::kFiles, 1, H, false},
      // ... and without any OpenCL device, the host engine still searches.
      {C::kAuto, K::kNone, 1'000'000, 10, I::kFiles, 64 * kGiB, H, true},
      {C::kAuto, K::kNone, 2, 20'000, I::kFiles, 1, H, true},
  };
  for (const Row& r : rows) {
    bool asked = false;
    const EngineDecision d = choose_engine(r.choice, PatternStats{r.patterns, r.longest}, r.input, r.bytes, [&] {
      asked = true;
      return r.device;
    });
    EXPECT_EQ(d.engine, r.expected) << describe(r) << ": " << d.reason;
    EXPECT_EQ(asked, r.asks_device) << describe(r);
    EXPECT_FALSE(d.reason.empty()) << describe(r);
  }
}

// A CPU OpenCL device is taken for a large set only when Hyperscan would compile: where an
// earlier run left the database in the cache, the host engine (it then starts as fast and
// outscans PoCL: 10,001 to 100,000 literals over 10 to 256 MB, 3-8x, docs/PERFORMANCE.md).
// The cache is looked at only where the answer depends on it.
TEST(EnginePolicy, ACpuDeviceOnlyWhenTheHostEngineWouldCompile) {
  const auto cpu = [] { return DeviceKind::kCpu; };
  for (const bool stored : {false, true}) {
    bool asked = false;
    const auto host_stored = [&] {
      asked = true;
      return stored;
    };
    const EngineDecision small = choose_engine(EngineChoice::kAuto, PatternStats{30'000, 10}, InputKind::kFiles,
                                               std::uint64_t{64} << 20, cpu, host_stored);
    EXPECT_EQ(small.engine, stored ? EngineKind::kHost : EngineKind::kDevice) << small.reason;
    EXPECT_TRUE(asked);
    asked = false;
    const EngineDecision large = choose_engine(EngineChoice::kAuto, PatternStats{30'000, 10}, InputKind::kFiles,
                                               std::uint64_t{8} << 30, cpu, host_stored);
    EXPECT_EQ(large.engine, EngineKind::kHost) << large.reason;
    EXPECT_FALSE(asked);
  }
  // The crossover grows faster than the count, as the compile does.
  EXPECT_LT(cpu_device_crossover_bytes(10'001), std::uint64_t{64} << 20);
  EXPECT_GT(cpu_device_crossover_bytes(30'000), std::uint64_t{256} << 20);
  EXPECT_GT(cpu_device_crossover_bytes(100'000), 4 * cpu_device_crossover_bytes(30'000));
}

// Through the engine layer: a set whose database an earlier run stored goes to the host
// engine on a CPU device; the same set with the cache empty, to the device.
TEST(EnginePolicy, PlanAsksTheCompileCache) {
  test::TempDir cache;
  ::setenv("GPUFILTER_CACHE_DIR", cache.path().c_str(), 1);
  PatternSet patterns;
  for (int i = 0; i < 20'000; ++i) patterns.add("needle-" + std::to_string(i * 7919));
  EngineRequest request;
  request.patterns = PatternStats::of(patterns);
  request.compiled = &patterns;
  request.input_bytes = std::uint64_t{1} << 20;
  Engines engines("");
  std::vector<DeviceInfo> devices;
  try {
    devices = opencl_devices();
  } catch (const Error&) {
    // none: skipped below
  }
  if (devices.empty() || std::any_of(devices.begin(), devices.end(), [](const DeviceInfo& d) { return d.is_gpu; })) {
    ::unsetenv("GPUFILTER_CACHE_DIR");
    GTEST_SKIP() << "not a machine whose only OpenCL devices are CPUs";
  }
  EXPECT_EQ(engines.plan(request).engine, EngineKind::kDevice);
  {
    const PatternTable table(patterns, MatchOptions{});
    const HsDatabase compiled(table);  // stored by hs_cache: a compile of 20,000 literals takes 10 ms or more
  }
  const EnginePlan after = engines.plan(request);
  EXPECT_EQ(after.engine, EngineKind::kHost) << after.reason;
  request.match_options.ignore_case = true;  // another database
  EXPECT_EQ(engines.plan(request).engine, EngineKind::kDevice);
  ::unsetenv("GPUFILTER_CACHE_DIR");
}

TEST(EnginePolicy, ANamedDeviceThatDoesNotExistIsAnError) {
  Engines engines("7:7");
  EngineRequest request;
  request.patterns = PatternStats{1, 1};
  EXPECT_THROW(engines.plan(request), NoDeviceError);
  // Asked for the host engine, the device is not looked at.
  request.choice = EngineChoice::kHost;
  EXPECT_EQ(engines.plan(request).engine, EngineKind::kHost);
}

TEST(EnginePolicy, SizesLiveWithThePlan) {
  Engines engines("");
  EngineRequest request;
  request.choice = EngineChoice::kHost;
  request.patterns = PatternStats{3, 4};
  request.input = InputKind::kStreams;
  request.min_chunk_bytes = (8u << 20) + 1;  // max_line_bytes + 1
  EnginePlan plan = engines.plan(request);
  EXPECT_EQ(plan.scanning.chunk_bytes, (8u << 20) + 1);
  EXPECT_GE(plan.scanning.slots, 3u);
  EXPECT_EQ(plan.scanning.host_scan_below, 0u);
  request.chunk_bytes = 4096;
  request.slots = 2;
  request.min_chunk_bytes = 0;
  plan = engines.plan(request);
  EXPECT_EQ(plan.scanning.chunk_bytes, 4096u);
  EXPECT_EQ(plan.scanning.slots, 2u);
  EXPECT_FALSE(engines.device_opened());
}

// The policy counts what an engine compiles: 20,000 lines of five patterns are five.
TEST(EnginePolicy, CountsDistinctLiterals) {
  PatternSet patterns;
  for (int i = 0; i < 20'000; ++i) patterns.add(i % 5 == 0 ? "sshd" : i % 5 == 1 ? "" : "error " + std::to_string(i % 3));
  const PatternStats stats = PatternStats::of(patterns);
  EXPECT_EQ(stats.count, 5u);
  EXPECT_EQ(stats.longest, 7u);
  EXPECT_EQ(choose_engine(EngineChoice::kAuto, stats, InputKind::kFiles, 1u << 20, [] { return DeviceKind::kGpu; }).engine,
            EngineKind::kHost);
}

TEST(EnginePolicy, BuildsTheChosenEngine) {
  PatternSet patterns;
  patterns.add("needle");
  patterns.add("hay");
  Engines engines("");
  EngineRequest request;
  request.patterns = PatternStats::of(patterns);
  const EnginePlan plan = engines.plan(request);  // a pipe: the host engine
  ASSERT_EQ(plan.engine, EngineKind::kHost);
  std::unique_ptr<Engine> engine = engines.compile(plan, patterns, MatchOptions{});
  EXPECT_EQ(engine->kind(), EngineKind::kHost);
  EXPECT_EQ(engine->name(), "cpu");
  EXPECT_EQ(engine->table().unique_count(), 2u);
  Scanner& scanner = engine->make_scanner(true, false);
  EXPECT_EQ(scanner.engine(), "cpu");
  EXPECT_EQ(&engine->scanner(), &scanner);
  EXPECT_TRUE(engine->counts_exact());
  EXPECT_FALSE(engines.device_opened());
}

// An error that unwinds a run with chunks in flight destroys the engine while its workers
// scan: the scanner must go before the pattern table it scans with (this crashed one run
// in four of Faults.FullStandardOutputIsAWriteErrorAsInGrep on a loaded machine; under
// AddressSanitizer it is a use after free every time).
TEST(EnginePolicy, AnEngineDestroyedWithChunksInFlightWaitsForThem) {
  PatternSet patterns;
  for (int i = 0; i < 50; ++i) patterns.add("needle" + std::to_string(i));
  for (int round = 0; round < 20; ++round) {
    Engines engines("");
    EngineRequest request;
    request.choice = EngineChoice::kHost;
    request.patterns = PatternStats::of(patterns);
    request.chunk_bytes = 1u << 20;
    request.slots = 4;
    std::unique_ptr<Engine> engine = engines.compile(engines.plan(request), patterns, MatchOptions{});
    Scanner& scanner = engine->make_scanner(true, false);
    while (ScanSlot* slot = scanner.acquire()) {
      std::string text;
      while (text.size() + 64 < scanner.chunk_bytes()) text += "haystack needle7 haystack needle42 and more\n";
      std::memcpy(slot->staging(), text.data(), text.size());
      slot->chunk().data = slot->staging();
      slot->chunk().size = text.size();
      scanner.submit(*slot);
    }
    engine.reset();  // four chunks in flight
  }
}

TEST(EnginePolicy, DeviceFaultPlansNameTheVariable) {
  EXPECT_FALSE(device_faults_from(nullptr).any());
  EXPECT_FALSE(device_faults_from("").any());
  EXPECT_EQ(device_faults_from("finish:2").finish, 2u);
  try {
    device_faults_from("nonsense");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("GPUFILTER_INJECT_DEVICE_FAULT"), std::string::npos) << e.what();
  }
}

// Co-scanning is asked for, never chosen by auto: on the H200 machine the GPU's share cost
// the host engine's workers more than it scanned for up to 10,000 literals
// (docs/PERFORMANCE.md, 2026-11-27).
TEST(EnginePolicy, BothOnlyWhenAskedFor) {
  auto gpu = [] { return DeviceKind::kGpu; };
  EXPECT_EQ(choose_engine(EngineChoice::kBoth, PatternStats{1, 5}, InputKind::kFiles, 1u << 20, gpu).engine,
            EngineKind::kBoth);
  for (const std::size_t n : {1u, 1'000u, 10'000u}) {
    EXPECT_EQ(choose_engine(EngineChoice::kAuto, PatternStats{n, 8}, InputKind::kFiles, std::uint64_t{16} << 30, gpu)
                  .engine,
              EngineKind::kHost);
  }
}

}  // namespace
}  // namespace gpufilter
