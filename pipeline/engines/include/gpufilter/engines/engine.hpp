// The engine layer: the one place that decides which engine scans an input and builds it.
//
//   EngineRequest (engine auto|host|device, device spec, pattern statistics, input kind
//   and size) -> Engines::plan() -> EnginePlan (engine, sizes, and the reason) ->
//   Engines::compile() -> Engine (pattern table, scan program) -> Engine::make_scanner()
//
// gpufilter and gpufilterd both call it and include no engine's header. The decision is
// choose_engine(), a pure function that tests check as a table (engine_test.cpp); its
// figures are in docs/PERFORMANCE.md. The defaults of chunk size, slots and the host-scan
// threshold live here, once.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpufilter/core/chunk.hpp"
#include "gpufilter/core/errors.hpp"
#include "gpufilter/engines/device_info.hpp"
#include "gpufilter/engines/scanner.hpp"
#include "gpufilter/patterns/pattern_set.hpp"
#include "gpufilter/patterns/pattern_table.hpp"

namespace gpufilter {

// Up to this many literals the host engine (Hyperscan on every core, scanning files where
// they lie) outscans any OpenCL device, a GPU included; past it Hyperscan's compile and
// scan slow down sharply.
inline constexpr std::size_t kHostEngineMaxPatterns = 10'000;
// Past kHostEngineMaxPatterns, a CPU OpenCL device (PoCL) scans more slowly than the host
// engine on the same cores but starts without Hyperscan's compile, which grows faster than
// the count: it is taken only for regular files small enough that the compile would cost
// more than the slower scan (cpu_device_crossover_bytes), and never when an earlier run
// left the database in the compile cache (a load, not a compile). See docs/PERFORMANCE.md.
std::uint64_t cpu_device_crossover_bytes(std::size_t literals) noexcept;
// Hyperscan refuses longer literals ("Pattern length exceeds limit": 16,000 bytes compile,
// 16,001 do not), so sets with one go to the OpenCL engine, which has no such limit.
inline constexpr std::size_t kHostEngineMaxPatternBytes = 16'000;
// With a device engine, chunks smaller than this are scanned on the host (the same trie,
// walked by the CPU): the latency of a small batch on a stream is then not a device round
// trip. bench/latency measures both sides of it.
inline constexpr std::size_t kDefaultHostScanBelow = 16u << 10;

// Co-scanning (--engine=both: the host engine and an OpenCL device on one input,
// CoScanner). A device that joins brings lanes (threads, each copying chunks into its own
// pinned staging) and the chunks each keeps in flight; 3 and 3 were the best of 2-8 lanes
// on the H200 machine (docs/PERFORMANCE.md).
inline constexpr std::size_t kCoScanLanes = 3;
inline constexpr std::size_t kCoScanSlotsPerLane = 3;
// In a co-scan, chunks smaller than this stay on the host: a small file or the tail of one
// is scanned before a device round trip would end.
inline constexpr std::size_t kCoScanHostBelow = 1u << 20;

// What the user asked for: --engine / the daemon's `engine:`.
enum class EngineChoice { kAuto, kHost, kDevice, kBoth };
// The engines there are: Hyperscan on the host's cores, an OpenCL device, or both on one
// input (the host at once, the device when it is ready).
enum class EngineKind { kHost, kDevice, kBoth };
// What the OpenCL device that would be used is, as far as the choice is concerned.
enum class DeviceKind { kNone, kCpu, kGpu };
// What is scanned: regular files or pipes (FileScan), many streams (StreamScan), packets
// and flows (RecordScan).
enum class InputKind { kFiles, kStreams, kPackets };

struct PatternStats {
  std::size_t count = 0;    // distinct literals: what an engine compiles
  std::size_t longest = 0;  // bytes of the longest
  // A pattern file of 1,000,000 lines holding five patterns is five literals to an engine
  // (before, it took a GPU: tests/cli/hostile_input_test.cpp, 527 MB against 182 MB).
  static PatternStats of(const PatternSet& patterns);
};

struct EngineDecision {
  EngineKind engine;
  std::string reason;  // one sentence for --stats, the daemon's log and /metrics
};

// The policy. `device` is asked only when the answer depends on it (asking OpenCL costs
// its start-up); it returns kNone when there is no OpenCL device, and throws NoDeviceError
// when a device named by the user does not exist. `input_bytes`: the total size when
// every input is a regular file; none for pipes, streams and live captures.
// `host_stored` (asked only when the answer depends on it): whether the host engine's
// database for these patterns is in the compile cache; none: not.
EngineDecision choose_engine(EngineChoice choice, PatternStats patterns, InputKind input,
                             std::optional<std::uint64_t> input_bytes, const std::function<DeviceKind()>& device,
                             const std::function<bool()>& host_stored = {});

struct EngineRequest {
  EngineChoice choice = EngineChoice::kAuto;
  PatternStats patterns;
  InputKind input = InputKind::kFiles;
  std::optional<std::uint64_t> input_bytes;
  // Overrides of the defaults (0 / none: the default for the engine and the input).
  std::size_t chunk_bytes = 0;
  std::size_t slots = 0;
  std::optional<std::size_t> host_scan_below;
  // Streams: a batch must hold the longest record (max_line_bytes + 1).
  std::size_t min_chunk_bytes = 0;
  DeviceFaults device_faults{};  // tests: faults for a device engine to inject
  // Co-scanning: lanes per device and chunks in flight per lane (0: the defaults).
  std::size_t lanes = 0;
  std::size_t slots_per_lane = 0;
  // The patterns to be compiled, and how: the policy may ask whether the host engine's
  // database for them is kept from an earlier run (none: it is taken not to be).
  const PatternSet* compiled = nullptr;
  MatchOptions match_options;
};

struct EnginePlan {
  EngineKind engine = EngineKind::kHost;
  std::string reason;
  ScanConfig scanning;  // chunk size, slots, host_scan_below, device faults (locate: later)
  std::size_t lanes = kCoScanLanes;
  std::size_t slots_per_lane = kCoScanSlotsPerLane;
  // The table plan() built to ask whether the host engine's database is stored, from
  // EngineRequest::compiled: compile() takes it over for those patterns (once) rather
  // than build it again (0.3 s for 1,000,000 literals on 2 cores).
  mutable std::shared_ptr<PatternTable> table;
  const PatternSet* table_of = nullptr;
  std::size_t distinct_patterns = 0;  // EngineRequest::patterns.count
};

// A device failure mid-run; the scanner goes on on the host (DeviceScanner). Called once
// per engine, on the thread that scans; it must not throw.
using DeviceFaultHandler = std::function<void(const DeviceError& error, const Chunk& chunk)>;

// A compiled engine: the pattern table (and on a device, its scan program), and once
// make_scanner() has been called, the scanner.
class Engine {
 public:
  virtual ~Engine() = default;
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  EngineKind kind() const noexcept { return kind_; }
  // "gpu" for an OpenCL device, "cpu" for the host engine, as Scanner::engine().
  std::string_view name() const noexcept {
    return kind_ == EngineKind::kDevice ? "gpu" : kind_ == EngineKind::kBoth ? "cpu+gpu" : "cpu";
  }
  // The device's name, or "host (Hyperscan)".
  const std::string& device_name() const noexcept { return device_name_; }
  const std::string& reason() const noexcept { return reason_; }
  virtual const PatternTable& table() const noexcept = 0;

  // Builds the scanner: `locate` hands on positions and pattern ids (what the consumer
  // needs: Searcher::needs_locations(), a rule set, packets), `count_patterns` per-pattern
  // counts. Once per engine.
  virtual Scanner& make_scanner(bool locate, bool count_patterns) = 0;
  // Before make_scanner(): the consumer needs one occurrence per line ending in `eol`, no
  // more (ScanConfig::one_per_line).
  void locate_one_per_line(char eol) noexcept { scanning_.one_per_line = static_cast<unsigned char>(eol); }
  Scanner& scanner() noexcept { return *scanner_; }
  // After make_scanner(): another scanner like it, sharing its compiled patterns, that
  // scans on the thread that submits chunks, for a search of many files on several
  // threads at once (one such scanner per thread). Null where the engine has none (an
  // OpenCL device: its chunks go through one queue).
  virtual std::unique_ptr<Scanner> make_thread_scanner() const { return nullptr; }
  // Device engines: `handler` hears of a device failure. The host engine never fails so.
  virtual void on_device_fault(DeviceFaultHandler handler) { (void)handler; }
  // False when a device failure lost or may have doubled per-pattern counts.
  virtual bool counts_exact() const noexcept { return true; }
  // Co-scanning: blocks until the device has joined or failed to (tests, benchmarks).
  virtual void wait_for_device() {}
  // What --stats adds for this engine: "" or ",\"key\":value..." (JSON members).
  virtual std::string stats_json() const { return {}; }

  struct Timings {
    double device_ms = 0;   // opening the OpenCL device (0 when it was open already)
    double table_ms = 0;    // the pattern table
    double kernel_ms = 0;   // the device's scan kernel, built while the table is
    double program_ms = 0;  // the device's scan program: the tables' upload (and a kernel, if not built before)
    double scanner_ms = 0;  // the scanner (the host engine compiles its database here)
  };
  const Timings& timings() const noexcept { return timings_; }

 protected:
  Engine(EngineKind kind, std::string device_name, std::string reason, ScanConfig scanning)
      : kind_(kind), device_name_(std::move(device_name)), reason_(std::move(reason)), scanning_(scanning) {}

  // The plan's scan configuration with what make_scanner() was asked for.
  ScanConfig scanning_for(bool locate, bool count_patterns) const {
    ScanConfig scanning = scanning_;
    scanning.locate = locate;
    scanning.count_patterns = count_patterns;
    return scanning;
  }

  EngineKind kind_;
  std::string device_name_;
  std::string reason_;
  ScanConfig scanning_;
  Timings timings_;
  // Derived engines reset it in their destructors, before what it scans with goes.
  std::unique_ptr<Scanner> scanner_;
};

// Plans and builds engines for one device spec, and owns the OpenCL device once one is
// opened (a daemon's reload builds its next engine on the same device).
class Engines {
 public:
  // `device_spec`: gpu, cpu, PLATFORM:DEVICE, or empty for the first GPU, else the first
  // CPU device; "all" for every GPU (every device where there is none); several of these
  // separated by commas. Several devices share the input: a device engine deals its
  // chunks out to them in turn, a co-scanning one gives each its lanes.
  explicit Engines(std::string device_spec);
  ~Engines();
  Engines(const Engines&) = delete;
  Engines& operator=(const Engines&) = delete;

  // Decides (choose_engine) and sizes. Throws NoDeviceError when a named device is missing.
  EnginePlan plan(const EngineRequest& request);
  // Builds the pattern table and, for a device, opens it and builds the scan program.
  // Throws NoDeviceError, DeviceError, KernelBuildError, PatternError.
  std::unique_ptr<Engine> compile(const EnginePlan& plan, const PatternSet& patterns, MatchOptions match);

  // Whether an OpenCL device was opened, or may be by a co-scanning engine (its driver's
  // teardown, or its start-up, can then be skipped at exit).
  bool device_opened() const noexcept;

 private:
  DeviceKind device_kind();

  struct Device;
  std::string spec_;
  std::optional<DeviceKind> kind_;  // found once, of the first device named
  std::size_t device_count_ = 1;     // devices named, found with kind_
  std::vector<std::unique_ptr<Device>> devices_;  // opened once
  bool co_scanning_ = false;        // a co-scanning engine was built: it opens its own
};

// Every OpenCL device of every platform (--list-devices). Throws NoDeviceError when there
// is no platform at all.
std::vector<DeviceInfo> opencl_devices();

// GPUFILTER_INJECT_DEVICE_FAULT's value (tests make the device fail mid-run; the syntax is
// DeviceFaults::parse's). The front ends read the variable; errors name it.
DeviceFaults device_faults_from(const char* value);

}  // namespace gpufilter
