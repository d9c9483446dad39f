#include "gpufilter/engines/engine.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>
#include <string_view>
#include <unordered_set>
#include <utility>

#include "co_scanner.hpp"
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

// A JSON string for --stats (CoEngine::stats_json): a device's name, an error message.
std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(c));
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string literals(std::size_t n) { return std::to_string(n) + (n == 1 ? " literal" : " literals"); }

}  // namespace

EngineDecision choose_engine(EngineChoice choice, PatternStats patterns, InputKind input,
                             std::optional<std::uint64_t> input_bytes, const std::function<DeviceKind()>& device) {
  if (choice == EngineChoice::kHost) return {EngineKind::kHost, "asked for: the host engine"};
  if (choice == EngineChoice::kDevice) return {EngineKind::kDevice, "asked for: the OpenCL device"};
  if (choice == EngineChoice::kBoth)
    return {EngineKind::kBoth, "asked for: the host engine and the OpenCL device together"};
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
  // (docs/PERFORMANCE.md, 2026-11-27, H200 machine), and it starts in milliseconds. Nor
  // does co-scanning (EngineKind::kBoth) beat it there: the GPU's share costs the host's
  // workers more than it scans (docs/PERFORMANCE.md, 2026-11-27): --engine=both only.
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

bool Engines::device_opened() const noexcept { return device_ != nullptr || co_scanning_; }

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
  if (plan.engine != EngineKind::kDevice) {
    // Regular files are scanned where they lie (mapped, no staging): four 4 MiB chunks in
    // flight per worker keep every worker busy while the oldest is delivered (on the H200
    // machine, 1,000 literals over 8.6 GB: 0.36 s with 16 MiB and one per worker, 0.29 s).
    // Streams and captures are copied into slots: one per worker plus two, one filling, one
    // delivered.
    const std::size_t threads = HostScanner::default_threads();
    s.chunk_bytes = request.chunk_bytes != 0 ? request.chunk_bytes : 4u << 20;
    const bool files = request.input == InputKind::kFiles;  // captures and streams fill staging
    s.slots = request.slots != 0 ? request.slots : (files ? 4 * threads + 2 : threads + 2);
    if (plan.engine == EngineKind::kBoth) {
      s.host_scan_below = request.host_scan_below.value_or(kCoScanHostBelow);
      s.device_faults = request.device_faults;
      if (request.lanes != 0) plan.lanes = request.lanes;
      if (request.slots_per_lane != 0) plan.slots_per_lane = request.slots_per_lane;
    }
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
    const ScanConfig scanning = scanning_for(locate, count_patterns);
    const Clock::time_point start = Clock::now();
    auto scanner = std::make_unique<HostScanner>(*table_, scanning);
    host_scanner_ = scanner.get();
    scanner_ = std::move(scanner);
    timings_.scanner_ms = ms_since(start);
    return *scanner_;
  }
  std::unique_ptr<Scanner> make_thread_scanner() const override {
    return host_scanner_ != nullptr ? host_scanner_->twin_on_caller_thread() : nullptr;
  }

 private:
  std::unique_ptr<PatternTable> table_;
  HostScanner* host_scanner_ = nullptr;  // scanner_, once made
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
    const ScanConfig scanning = scanning_for(locate, count_patterns);
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

// The host engine at once, and an OpenCL device beside it once a thread of its own has
// opened the device and built the scan program (CoScanner::add_device). A device that
// cannot be opened leaves the host engine alone (--stats says why).
class CoEngine final : public Engine {
 public:
  CoEngine(const EnginePlan& plan, std::string device_spec, const PatternSet& patterns, MatchOptions match)
      : Engine(EngineKind::kBoth, "host (Hyperscan) and an OpenCL device", plan.reason, plan.scanning),
        started_(Clock::now()),
        lanes_(plan.lanes),
        slots_per_lane_(plan.slots_per_lane) {
    table_ = std::make_unique<PatternTable>(patterns, match);
    timings_.table_ms = ms_since(started_);
    starter_ = std::thread(
        [this, spec = std::move(device_spec), table = *table_]() mutable { start_device(spec, std::move(table)); });
  }
  // The starter first (it may still be opening the device), then the scanner (its lanes
  // scan with the program), then the program and the device.
  ~CoEngine() override {
    starter_.join();
    scanner_.reset();
    program_.reset();
    device_.reset();
  }
  const PatternTable& table() const noexcept override { return *table_; }
  Scanner& make_scanner(bool locate, bool count_patterns) override {
    const ScanConfig scanning = scanning_for(locate, count_patterns);
    const Clock::time_point start = Clock::now();
    auto scanner = std::make_unique<CoScanner>(*table_, scanning);
    timings_.scanner_ms = ms_since(start);
    if (on_fault_) scanner->on_fault(on_fault_);
    std::lock_guard lock(mutex_);
    co_ = scanner.get();
    scanner_ = std::move(scanner);
    if (program_) join();
    return *scanner_;
  }
  void on_device_fault(DeviceFaultHandler handler) override {
    on_fault_ = std::move(handler);
    if (co_ != nullptr) co_->on_fault(on_fault_);
  }
  bool counts_exact() const noexcept override { return co_ == nullptr || co_->counts_exact(); }
  void wait_for_device() override {
    std::unique_lock lock(mutex_);
    settled_cv_.wait(lock, [this] { return settled_; });
  }
  std::string stats_json() const override {
    std::lock_guard lock(mutex_);
    std::string s = ",\"device_joined\":" + std::string(joined_ ? "true" : "false");
    if (joined_) s += ",\"device_joined_ms\":" + std::to_string(joined_ms_) + ",\"joined_device\":" + json_string(joined_name_);
    if (!not_joined_.empty()) s += ",\"device_not_joined\":" + json_string(not_joined_);
    if (co_ != nullptr)
      s += ",\"device_chunks\":" + std::to_string(co_->device_chunks()) +
           ",\"host_chunks\":" + std::to_string(co_->host_chunks());
    return s;
  }

 private:
  void start_device(const std::string& spec, PatternTable table) {
    std::string why_not;
    try {
      auto device = std::make_unique<DeviceContext>(spec);
      auto program = std::make_unique<ScanProgram>(*device, std::move(table));
      std::lock_guard lock(mutex_);
      device_ = std::move(device);
      program_ = std::move(program);
      if (co_ != nullptr) join();
    } catch (const std::exception& e) {
      why_not = e.what();
    }
    {
      std::lock_guard lock(mutex_);
      if (!why_not.empty()) not_joined_ = why_not;
      settled_ = true;
    }
    settled_cv_.notify_all();
  }
  // With mutex_ held: the device's lanes join the scanner.
  void join() {
    try {
      co_->add_device(*device_, *program_, lanes_, slots_per_lane_);
      joined_ = true;
      joined_ms_ = ms_since(started_);
      joined_name_ = device_->info().name;
    } catch (const std::exception& e) {
      not_joined_ = e.what();
    }
  }

  Clock::time_point started_;
  std::size_t lanes_;
  std::size_t slots_per_lane_;
  std::unique_ptr<PatternTable> table_;
  DeviceFaultHandler on_fault_;
  mutable std::mutex mutex_;  // guards what the starter thread sets
  std::condition_variable settled_cv_;
  bool settled_ = false;
  std::unique_ptr<DeviceContext> device_;
  std::unique_ptr<ScanProgram> program_;
  CoScanner* co_ = nullptr;
  bool joined_ = false;
  double joined_ms_ = 0;
  std::string joined_name_;
  std::string not_joined_;
  std::thread starter_;  // last: it starts when every member above is made
};

}  // namespace

std::unique_ptr<Engine> Engines::compile(const EnginePlan& plan, const PatternSet& patterns, MatchOptions match) {
  if (plan.engine == EngineKind::kHost) return std::make_unique<HostEngine>(plan, patterns, match);
  if (plan.engine == EngineKind::kBoth) {
    co_scanning_ = true;
    return std::make_unique<CoEngine>(plan, spec_, patterns, match);
  }
  double device_ms = 0;
  if (!device_) {
    const Clock::time_point start = Clock::now();
    device_ = std::make_unique<Device>(spec_);
    device_ms = ms_since(start);
  }
  return std::make_unique<DeviceEngine>(plan, device_->context, device_ms, patterns, match);
}

}  // namespace gpufilter
