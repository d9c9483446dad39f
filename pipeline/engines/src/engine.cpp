#include "gpufilter/engines/engine.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <optional>
#include <thread>
#include <string_view>
#include <utility>

#include "co_scanner.hpp"
#include "devices_scanner.hpp"
#include "gpufilter/hyperscan/hs_database.hpp"
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

}  // namespace

std::string device_shares_json(const std::vector<DeviceShare>& shares) {
  std::string out = ",\"device_shares\":[";
  for (std::size_t i = 0; i < shares.size(); ++i)
    out += (i == 0 ? "{\"device\":" : ",{\"device\":") + json_string(shares[i].device) +
           ",\"chunks\":" + std::to_string(shares[i].chunks) + ",\"bytes\":" + std::to_string(shares[i].bytes) + "}";
  return out + "]";
}

namespace {

std::string literals(std::size_t n) { return std::to_string(n) + (n == 1 ? " literal" : " literals"); }

// Runs work(i) for every i below n, each on a thread of its own (on this one when n is 1:
// opening a device and building its program take a driver's time, so several devices are
// readied side by side). The first failure is thrown here, once every thread has ended.
template <class Work>
void on_threads(std::size_t n, const Work& work) {
  if (n == 1) return work(0);
  std::vector<std::exception_ptr> failed(n);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < n; ++i)
    threads.emplace_back([&, i] {
      try {
        work(i);
      } catch (...) {
        failed[i] = std::current_exception();
      }
    });
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : failed)
    if (e) std::rethrow_exception(e);
}

// `n` tables equal to `table` (one per device: a scan program takes its own).
std::vector<PatternTable> copies(PatternTable table, std::size_t n) {
  std::vector<PatternTable> out;
  for (std::size_t i = 0; i + 1 < n; ++i) out.push_back(table);
  if (n != 0) out.push_back(std::move(table));
  return out;
}

// "NAME" for one device, "N devices: NAME, NAME" for several.
std::string devices_name(const std::vector<DeviceInfo>& devices) {
  if (devices.size() == 1) return devices.front().name;
  std::string out = std::to_string(devices.size()) + " devices: ";
  for (std::size_t i = 0; i < devices.size(); ++i) out += (i == 0 ? "" : ", ") + devices[i].name;
  return out;
}

}  // namespace

// Hyperscan's compile of `literals` literals against PoCL's slower scan and start, on a
// CPU-only machine (2 cores, 2026-11-30, docs/PERFORMANCE.md, `-c -F` over 10 to 256 MB):
// the compile took 0.15 s for 10,001 literals, 0.77 s for 30,000 and 3.65 s for 100,000
// (about the count to the power 1.4); PoCL scanned 2.1-2.4 ns a byte slower than the host
// engine and started about 0.05 s later. Where the compile costs more than that, PoCL.
std::uint64_t cpu_device_crossover_bytes(std::size_t literals) noexcept {
  constexpr double kCompileSecondsAt10k = 0.15, kCompileGrowth = 1.4;
  constexpr double kSlowerSecondsPerByte = 2.3e-9, kLaterStartSeconds = 0.05;
  const double compile = kCompileSecondsAt10k * std::pow(static_cast<double>(literals) / 1e4, kCompileGrowth);
  return static_cast<std::uint64_t>(std::max(0.0, compile - kLaterStartSeconds) / kSlowerSecondsPerByte);
}

EngineDecision choose_engine(EngineChoice choice, PatternStats patterns, InputKind input,
                             std::optional<std::uint64_t> input_bytes, const std::function<DeviceKind()>& device,
                             const std::function<bool()>& host_stored) {
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
        if (input_bytes && *input_bytes < cpu_device_crossover_bytes(patterns.count)) {
          if (host_stored && host_stored())
            return {EngineKind::kHost, literals(patterns.count) +
                                           ": their Hyperscan database is kept from an earlier run, so the host "
                                           "engine starts as fast as a CPU OpenCL device and outscans it"};
          return {EngineKind::kDevice, literals(patterns.count) + " over " + std::to_string(*input_bytes >> 20) +
                                           " MiB: Hyperscan's compile would cost more than a CPU OpenCL device's "
                                           "slower scan"};
        }
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
  return {distinct_count(patterns.patterns()), patterns.max_length()};
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

bool Engines::device_opened() const noexcept { return !devices_.empty() || co_scanning_; }

// The first device named stands for them all in the choice of engine.
DeviceKind Engines::device_kind() {
  if (!kind_) {
    try {
      const std::vector<DeviceInfo> found = find_devices(spec_);
      kind_ = found.front().is_gpu ? DeviceKind::kGpu : DeviceKind::kCpu;
      device_count_ = found.size();
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
  EnginePlan plan;
  const auto host_stored = [&request, &plan] {
    if (request.compiled == nullptr) return false;
    plan.table = std::make_shared<PatternTable>(*request.compiled, request.match_options);
    plan.table_of = request.compiled;
    return HsDatabase::stored(*plan.table);
  };
  EngineDecision decision = choose_engine(request.choice, request.patterns, request.input, request.input_bytes,
                                          [this] { return device_kind(); }, host_stored);
  plan.engine = decision.engine;
  plan.reason = std::move(decision.reason);
  plan.distinct_patterns = request.patterns.count;
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
    // On a GPU, 64 MiB chunks and 4 slots keep the link busy (docs/PERFORMANCE.md); as
    // many per device where several share the input.
    const bool gpu = device_kind() == DeviceKind::kGpu;
    s.chunk_bytes = request.chunk_bytes != 0 ? request.chunk_bytes : (gpu && !streams ? 64u << 20 : 4u << 20);
    s.slots = (request.slots != 0 ? request.slots : (gpu ? 4 : 3)) * std::max<std::size_t>(device_count_, 1);
    s.host_scan_below = request.host_scan_below.value_or(kDefaultHostScanBelow);
    s.device_faults = request.device_faults;
  }
  s.chunk_bytes = std::max(s.chunk_bytes, request.min_chunk_bytes);
  return plan;
}

namespace {

// The plan's table where it holds these patterns (taken once), else a new one.
PatternTable table_for(const EnginePlan& plan, const PatternSet& patterns, MatchOptions match) {
  if (plan.table && plan.table_of == &patterns && plan.table->options().ignore_case == match.ignore_case) {
    PatternTable taken = std::move(*plan.table);
    plan.table.reset();
    return taken;
  }
  return PatternTable(patterns, match);
}

class HostEngine final : public Engine {
 public:
  HostEngine(const EnginePlan& plan, const PatternSet& patterns, MatchOptions match)
      : Engine(EngineKind::kHost, "host (Hyperscan)", plan.reason, plan.scanning) {
    const Clock::time_point start = Clock::now();
    table_ = std::make_unique<PatternTable>(table_for(plan, patterns, match));
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
  std::string stats_json() const override {
    if (host_scanner_ == nullptr) return {};
    const HostScanner::WorkerTimes t = host_scanner_->worker_times();
    char text[160];
    std::snprintf(text, sizeof text, ",\"workers_cpu_s\":%.3f,\"workers_scan_s\":%.3f,\"workers_after_scan_s\":%.3f",
                  t.cpu_s, t.scan_s, t.after_s);
    return text;
  }

 private:
  std::unique_ptr<PatternTable> table_;
  HostScanner* host_scanner_ = nullptr;  // scanner_, once made
};

// One OpenCL device (DeviceScanner), or several sharing the input (DevicesScanner),
// each with a scan program of its own, built side by side.
class DeviceEngine final : public Engine {
 public:
  // `kernels`: each device's scan kernel (one per device), built beside the table
  // (Engines::compile).
  DeviceEngine(const EnginePlan& plan, std::vector<DeviceContext*> devices, const Timings& timings, PatternTable table,
               std::vector<ScanProgram::Kernel> kernels)
      : Engine(EngineKind::kDevice, devices_name(infos(devices)), plan.reason, plan.scanning),
        devices_(std::move(devices)) {
    timings_ = timings;
    const Clock::time_point start = Clock::now();
    std::vector<PatternTable> tables = copies(std::move(table), devices_.size());
    programs_.resize(devices_.size());
    on_threads(devices_.size(), [&](std::size_t i) {
      programs_[i] = std::make_unique<ScanProgram>(*devices_[i], std::move(tables[i]), ScanLayout{}, std::move(kernels[i]));
    });
    timings_.program_ms = ms_since(start);
  }
  // The scanner (the base's) goes first: chunks in flight still use the programs.
  ~DeviceEngine() override { scanner_.reset(); }
  const PatternTable& table() const noexcept override { return programs_.front()->table(); }
  Scanner& make_scanner(bool locate, bool count_patterns) override {
    const ScanConfig scanning = scanning_for(locate, count_patterns);
    const Clock::time_point start = Clock::now();
    if (devices_.size() == 1) {
      auto scanner = std::make_unique<DeviceScanner>(*devices_.front(), *programs_.front(), scanning);
      device_scanner_ = scanner.get();
      scanner_ = std::move(scanner);
    } else {
      std::vector<const ScanProgram*> programs;
      for (const auto& p : programs_) programs.push_back(p.get());
      auto scanner = std::make_unique<DevicesScanner>(devices_, programs, scanning);
      devices_scanner_ = scanner.get();
      scanner_ = std::move(scanner);
    }
    timings_.scanner_ms = ms_since(start);
    if (on_fault_) on_device_fault(on_fault_);
    return *scanner_;
  }
  void on_device_fault(DeviceFaultHandler handler) override {
    on_fault_ = std::move(handler);
    if (device_scanner_ != nullptr) device_scanner_->on_fault(on_fault_);
    if (devices_scanner_ != nullptr) devices_scanner_->on_fault(on_fault_);
  }
  bool counts_exact() const noexcept override {
    if (device_scanner_ != nullptr) return device_scanner_->counts_exact();
    return devices_scanner_ == nullptr || devices_scanner_->counts_exact();
  }
  std::string stats_json() const override {
    return devices_scanner_ != nullptr ? device_shares_json(devices_scanner_->shares()) : std::string();
  }

 private:
  static std::vector<DeviceInfo> infos(const std::vector<DeviceContext*>& devices) {
    std::vector<DeviceInfo> out;
    for (const DeviceContext* d : devices) out.push_back(d->info());
    return out;
  }

  std::vector<DeviceContext*> devices_;
  std::vector<std::unique_ptr<ScanProgram>> programs_;
  DeviceScanner* device_scanner_ = nullptr;    // one device
  DevicesScanner* devices_scanner_ = nullptr;  // several
  DeviceFaultHandler on_fault_;
};

// The host engine at once, and OpenCL devices beside it, each once a thread of its own has
// opened it and built its scan program (CoScanner::add_device). A device that cannot be
// opened leaves the others, or the host engine alone (--stats says why).
class CoEngine final : public Engine {
 public:
  CoEngine(const EnginePlan& plan, std::string device_spec, const PatternSet& patterns, MatchOptions match)
      : Engine(EngineKind::kBoth, "host (Hyperscan) and an OpenCL device", plan.reason, plan.scanning),
        started_(Clock::now()),
        lanes_(plan.lanes),
        slots_per_lane_(plan.slots_per_lane) {
    table_ = std::make_unique<PatternTable>(table_for(plan, patterns, match));
    timings_.table_ms = ms_since(started_);
    starter_ = std::thread(
        [this, spec = std::move(device_spec), table = *table_]() mutable { start_devices(spec, std::move(table)); });
  }
  // The starter first (it may still be opening devices), then the scanner (its lanes scan
  // with the programs), then the programs and the devices.
  ~CoEngine() override {
    starter_.join();
    scanner_.reset();
    devices_.clear();
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
    for (auto& device : devices_) join(*device);
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
  std::string stats_json() const override;

 private:
  struct Joining {
    std::unique_ptr<DeviceContext> device;
    std::unique_ptr<ScanProgram> program;
    bool joined = false;
    double joined_ms = 0;
  };

  // On the starter thread: finds the devices, then readies each on a thread of its own.
  void start_devices(const std::string& spec, PatternTable table) {
    std::vector<DeviceInfo> found;
    try {
      found = find_devices(spec);
    } catch (const std::exception& e) {
      std::lock_guard lock(mutex_);
      not_joined_ = e.what();
    }
    std::vector<PatternTable> tables = copies(std::move(table), found.size());
    on_threads(std::max<std::size_t>(found.size(), 1), [&](std::size_t i) {
      if (i < found.size()) start_device(spec_of(found[i]), std::move(tables[i]));
    });
    {
      std::lock_guard lock(mutex_);
      settled_ = true;
    }
    settled_cv_.notify_all();
  }
  void start_device(const std::string& spec, PatternTable table) {
    try {
      auto joining = std::make_unique<Joining>();
      joining->device = std::make_unique<DeviceContext>(spec);
      joining->program = std::make_unique<ScanProgram>(*joining->device, std::move(table));
      std::lock_guard lock(mutex_);
      devices_.push_back(std::move(joining));
      if (co_ != nullptr) join(*devices_.back());
    } catch (const std::exception& e) {
      std::lock_guard lock(mutex_);
      if (not_joined_.empty()) not_joined_ = e.what();
    }
  }
  // With mutex_ held: the device's lanes join the scanner.
  void join(Joining& device) {
    if (device.joined) return;
    try {
      co_->add_device(*device.device, *device.program, lanes_, slots_per_lane_);
      device.joined = true;
      device.joined_ms = ms_since(started_);
    } catch (const std::exception& e) {
      if (not_joined_.empty()) not_joined_ = e.what();
    }
  }

  Clock::time_point started_;
  std::size_t lanes_;
  std::size_t slots_per_lane_;
  std::unique_ptr<PatternTable> table_;
  DeviceFaultHandler on_fault_;
  mutable std::mutex mutex_;  // guards what the starter threads set
  std::condition_variable settled_cv_;
  bool settled_ = false;
  std::vector<std::unique_ptr<Joining>> devices_;  // readied, in the order they became ready
  CoScanner* co_ = nullptr;
  std::string not_joined_;  // the first device's failure, if any
  std::thread starter_;     // last: it starts when every member above is made
};

std::string CoEngine::stats_json() const {
  std::lock_guard lock(mutex_);
  const Joining* first = nullptr;
  std::string names;
  for (const auto& d : devices_) {
    if (!d->joined) continue;
    if (first == nullptr) first = d.get();
    names += (names.empty() ? "" : ", ") + d->device->info().name;
  }
  std::string s = ",\"device_joined\":" + std::string(first != nullptr ? "true" : "false");
  if (first != nullptr)
    s += ",\"device_joined_ms\":" + std::to_string(first->joined_ms) + ",\"joined_device\":" + json_string(names);
  if (!not_joined_.empty()) s += ",\"device_not_joined\":" + json_string(not_joined_);
  if (co_ != nullptr) {
    s += ",\"device_chunks\":" + std::to_string(co_->device_chunks()) +
         ",\"host_chunks\":" + std::to_string(co_->host_chunks());
    if (devices_.size() > 1) s += device_shares_json(co_->device_shares());
  }
  return s;
}

}  // namespace

std::unique_ptr<Engine> Engines::compile(const EnginePlan& plan, const PatternSet& patterns, MatchOptions match) {
  if (plan.engine == EngineKind::kHost) return std::make_unique<HostEngine>(plan, patterns, match);
  if (plan.engine == EngineKind::kBoth) {
    co_scanning_ = true;
    return std::make_unique<CoEngine>(plan, spec_, patterns, match);
  }
  // The pattern table is built while the devices open and their scan kernels build, which
  // need only the device (NVIDIA's driver took 100-135 ms for a context on the H100 and H200
  // machines, 45-65 ms for the kernel; the table for a million literals 0.2 s).
  Engine::Timings timings;
  std::optional<PatternTable> table;
  std::vector<ScanProgram::Kernel> kernels;
  on_threads(2, [&](std::size_t i) {
    const Clock::time_point start = Clock::now();
    if (i == 0) {
      table.emplace(table_for(plan, patterns, match));
      timings.table_ms = ms_since(start);
      return;
    }
    if (devices_.empty()) {
      const std::vector<DeviceInfo> found = find_devices(spec_);
      std::vector<std::unique_ptr<Device>> opened(found.size());
      on_threads(found.size(), [&](std::size_t d) { opened[d] = std::make_unique<Device>(spec_of(found[d])); });
      devices_ = std::move(opened);
      timings.device_ms = ms_since(start);
    }
    const Clock::time_point built = Clock::now();
    kernels.resize(devices_.size());
    on_threads(devices_.size(), [&](std::size_t d) {
      kernels[d] = ScanProgram::build_kernel(devices_[d]->context, plan.distinct_patterns);
    });
    timings.kernel_ms = ms_since(built);
  });
  std::vector<DeviceContext*> contexts;
  for (const auto& d : devices_) contexts.push_back(&d->context);
  return std::make_unique<DeviceEngine>(plan, std::move(contexts), timings, std::move(*table), std::move(kernels));
}

}  // namespace gpufilter
