#include "gpufilter/engines/engine.hpp"

#include <algorithm>
#include <chrono>
#include <string_view>
#include <unordered_set>
#include <utility>

#include "gpufilter/hyperscan/host_scanner.hpp"
#include "gpufilter/opencl/device.hpp"
#include "gpufilter/opencl/device_scanner.hpp"
#include "gpufilter/opencl/scan_program.hpp"

namespace gpufilter {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

std::string literals(std::size_t n) { return std::to_string(n) + (n == 1 ? " literal" : " literals"); }

}  // namespace

EngineDecision choose_engine(EngineChoice choice, PatternStats patterns, InputKind input,
                             std::optional<std::uint64_t> input_bytes, const std::function<DeviceKind()>& device) {
  if (choice == EngineChoice::kHost) return {EngineKind::kHost, "asked for: the host engine"};
  if (choice == EngineChoice::kDevice) return {EngineKind::kDevice, "asked for: the OpenCL device"};
  if (patterns.longest > kHostEngineMaxPatternBytes) {
    const DeviceKind kind = device();
    if (kind != DeviceKind::kNone)
      return {EngineKind::kDevice, "a literal of " + std::to_string(patterns.longest) +
                                       " bytes is longer than the host engine takes (" +
                                       std::to_string(kHostEngineMaxPatternBytes) + ")"};
    return {EngineKind::kHost, "no OpenCL device: the host engine"};
  }
  if (patterns.count > kHostEngineMaxPatterns) {
    switch (device()) {
      case DeviceKind::kGpu:
        return {EngineKind::kDevice, literals(patterns.count) + ": more than the host engine is fastest for (" +
                                         std::to_string(kHostEngineMaxPatterns) + ")"};
      case DeviceKind::kCpu:
        // PoCL scans 5-10x slower than Hyperscan on the same cores, but builds 10x faster:
        // it wins only where Hyperscan's compile outweighs the whole scan.
        if (input_bytes && *input_bytes < patterns.count * kCpuDeviceMaxBytesPerLiteral)
          return {EngineKind::kDevice, literals(patterns.count) + " over " + std::to_string(*input_bytes >> 20) +
                                           " MiB: Hyperscan's compile would cost more than a CPU OpenCL device's "
                                           "slower scan"};
        return {EngineKind::kHost, literals(patterns.count) + (input_bytes                        ? " over this much input"
                                                         : input == InputKind::kPackets ? " on a live capture"
                                                                                        : " on input of unknown size") +
                                       ": the host engine outscans a CPU OpenCL device on the same cores"};
      case DeviceKind::kNone: break;
    }
    return {EngineKind::kHost, "no OpenCL device: the host engine"};
  }
  // Up to kHostEngineMaxPatterns the host engine is the fastest on any device: it scans a
  // regular file where it lies, on every core, ahead of the GPU path's copy over the link
  // (docs/PERFORMANCE.md, 2026-11-27, H200 machine), and it starts in milliseconds.
  return {EngineKind::kHost, literals(patterns.count) + ": the host engine is fastest for up to " +
                                 std::to_string(kHostEngineMaxPatterns) + " literals on any device"};
}

PatternStats PatternStats::of(const PatternSet& patterns) {
  std::unordered_set<std::string_view> distinct;
  distinct.reserve(patterns.size());
  for (std::size_t i = 0; i < patterns.size(); ++i) distinct.insert(patterns[i]);
  return {distinct.size(), patterns.max_length()};
}

std::vector<DeviceInfo> opencl_devices() { return list_devices(); }

DeviceFaults device_faults_from(const char* value) {
  if (value == nullptr || *value == '\0') return {};
  try {
    return DeviceFaults::parse(value);
  } catch (const ConfigError& e) {
    throw ConfigError(std::string("GPUFILTER_INJECT_DEVICE_FAULT: ") + e.what());
  }
}

// ---- Engines ----

struct Engines::Device {
  explicit Device(std::string_view spec) : context(spec) {}
  DeviceContext context;
};

Engines::Engines(std::string device_spec) : spec_(std::move(device_spec)) {}
Engines::~Engines() = default;

bool Engines::device_opened() const noexcept { return device_ != nullptr; }

DeviceKind Engines::device_kind() {
  if (!kind_) {
    try {
      kind_ = find_device(spec_).is_gpu ? DeviceKind::kGpu : DeviceKind::kCpu;
    } catch (const NoDeviceError&) {
      if (!spec_.empty()) throw;  // a device was asked for by name
      kind_ = DeviceKind::kNone;
    }
  }
  return *kind_;
}

EnginePlan Engines::plan(const EngineRequest& request) {
  // A device named by the user must exist whatever engine auto then takes.
  if (request.choice == EngineChoice::kAuto && !spec_.empty()) device_kind();
  EngineDecision decision = choose_engine(request.choice, request.patterns, request.input, request.input_bytes,
                                          [this] { return device_kind(); });
  EnginePlan plan;
  plan.engine = decision.engine;
  plan.reason = std::move(decision.reason);
  ScanConfig& s = plan.scanning;
  const bool streams = request.input == InputKind::kStreams;
  if (plan.engine == EngineKind::kHost) {
    // Regular files are scanned where they lie (mapped, no staging): four 4 MiB chunks in
    // flight per worker keep every worker busy while the oldest is delivered (on the H200
    // machine, 1,000 literals over 8.6 GB: 0.36 s with 16 MiB and one per worker, 0.29 s).
    // Streams and captures are copied into slots: one per worker plus two, one filling, one
    // delivered.
    const std::size_t threads = HostScanner::default_threads();
    s.chunk_bytes = request.chunk_bytes != 0 ? request.chunk_bytes : 4u << 20;
    const bool files = request.input == InputKind::kFiles;  // captures and streams fill staging
    s.slots = request.slots != 0 ? request.slots : (files ? 4 * threads + 2 : threads + 2);
  } else {
    // On a GPU, 64 MiB chunks and 4 slots keep the link busy (docs/PERFORMANCE.md).
    const bool gpu = device_kind() == DeviceKind::kGpu;
    s.chunk_bytes = request.chunk_bytes != 0 ? request.chunk_bytes : (gpu && !streams ? 64u << 20 : 4u << 20);
    s.slots = request.slots != 0 ? request.slots : (gpu ? 4 : 3);
    s.host_scan_below = request.host_scan_below.value_or(kDefaultHostScanBelow);
    s.device_faults = request.device_faults;
  }
  s.chunk_bytes = std::max(s.chunk_bytes, request.min_chunk_bytes);
  return plan;
}

namespace {

class HostEngine final : public Engine {
 public:
  HostEngine(const EnginePlan& plan, const PatternSet& patterns, MatchOptions match)
      : Engine(EngineKind::kHost, "host (Hyperscan)", plan.reason, plan.scanning) {
    const Clock::time_point start = Clock::now();
    table_ = std::make_unique<PatternTable>(patterns, match);
    timings_.table_ms = ms_since(start);
  }
  // The scanner (the base's) goes first: its workers may still be scanning with the table
  // when an error unwinds a run with chunks in flight.
  ~HostEngine() override { scanner_.reset(); }
  const PatternTable& table() const noexcept override { return *table_; }
  Scanner& make_scanner(bool locate, bool count_patterns) override {
    ScanConfig scanning = scanning_;
    scanning.locate = locate;
    scanning.count_patterns = count_patterns;
    const Clock::time_point start = Clock::now();
    scanner_ = std::make_unique<HostScanner>(*table_, scanning);
    timings_.scanner_ms = ms_since(start);
    return *scanner_;
  }

 private:
  std::unique_ptr<PatternTable> table_;
};

class DeviceEngine final : public Engine {
 public:
  DeviceEngine(const EnginePlan& plan, DeviceContext& device, double device_ms, const PatternSet& patterns,
               MatchOptions match)
      : Engine(EngineKind::kDevice, device.info().name, plan.reason, plan.scanning), device_(device) {
    timings_.device_ms = device_ms;
    Clock::time_point start = Clock::now();
    PatternTable table(patterns, match);
    timings_.table_ms = ms_since(start);
    start = Clock::now();
    program_ = std::make_unique<ScanProgram>(device, std::move(table));
    timings_.program_ms = ms_since(start);
  }
  // The scanner (the base's) goes first: chunks in flight still use the program.
  ~DeviceEngine() override { scanner_.reset(); }
  const PatternTable& table() const noexcept override { return program_->table(); }
  Scanner& make_scanner(bool locate, bool count_patterns) override {
    ScanConfig scanning = scanning_;
    scanning.locate = locate;
    scanning.count_patterns = count_patterns;
    const Clock::time_point start = Clock::now();
    auto scanner = std::make_unique<DeviceScanner>(device_, *program_, scanning);
    timings_.scanner_ms = ms_since(start);
    device_scanner_ = scanner.get();
    if (on_fault_) device_scanner_->on_fault(on_fault_);
    scanner_ = std::move(scanner);
    return *scanner_;
  }
  void on_device_fault(DeviceFaultHandler handler) override {
    on_fault_ = std::move(handler);
    if (device_scanner_ != nullptr) device_scanner_->on_fault(on_fault_);
  }
  bool counts_exact() const noexcept override { return device_scanner_ == nullptr || device_scanner_->counts_exact(); }

 private:
  DeviceContext& device_;
  std::unique_ptr<ScanProgram> program_;
  DeviceScanner* device_scanner_ = nullptr;
  DeviceFaultHandler on_fault_;
};

}  // namespace

std::unique_ptr<Engine> Engines::compile(const EnginePlan& plan, const PatternSet& patterns, MatchOptions match) {
  if (plan.engine == EngineKind::kHost) return std::make_unique<HostEngine>(plan, patterns, match);
  double device_ms = 0;
  if (!device_) {
    const Clock::time_point start = Clock::now();
    device_ = std::make_unique<Device>(spec_);
    device_ms = ms_since(start);
  }
  return std::make_unique<DeviceEngine>(plan, device_->context, device_ms, patterns, match);
}

}  // namespace gpufilter
