// gpupermute-bench: full sets of lexicographic permutations of 0..N-1 (default N = 11
// and 12) three ways in one run, and a markdown table with the ratios:
//   - GPU kernel time with the output kept on the device (OpenCL event profiling, summed
//     over the launches; the output buffer is reused when the set exceeds one allocation);
//   - GPU with the output copied back, batch by batch, into pinned host memory and
//     written to /dev/null (wall time), against the device-to-host link measured here;
//   - a multi-threaded CPU generator: the range split into one part per thread by
//     decomposition (nth), std::next_permutation inside each part, into host memory.
// Every timing is the best of --repeat runs after a warm-up. The GPU output is compared
// with the CPU's byte for byte (unless --no-verify). --sweep adds kernel times for a
// range of --steps values at the largest N (0 is pure decomposition).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "gpufilter/permute/permuter.hpp"
#include "gpufilter/opencl/device.hpp"
#include "gpufilter/core/errors.hpp"

namespace {

namespace perm = gpufilter::permute;
using Clock = std::chrono::steady_clock;

int usage() {
  std::fprintf(stderr,
               "usage: gpupermute-bench [--device SPEC] [--sizes 11,12] [--steps L] [--repeat R] [--threads T]\n"
               "                        [--batch-bytes B] [--sweep] [--no-verify]\n");
  return 2;
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string grouped(std::uint64_t v) {
  const std::string digits = std::to_string(v);
  std::string s;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i != 0 && (digits.size() - i) % 3 == 0) s += ',';
    s += digits[i];
  }
  return s;
}

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string time_text(double s) { return s < 1.0 ? fmt("%.2f ms", s * 1e3) : fmt("%.3f s", s); }

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

// Kernel seconds (summed event profiling) for the full set, output kept in one device
// buffer of at most `buffer_bytes`, reused launch after launch.
double device_kernel_seconds(perm::GpuPermuter& permuter, const cl::Buffer& out, std::uint64_t buffer_perms) {
  const std::uint64_t total = permuter.set().permutations();
  std::vector<cl::Event> events;
  for (std::uint64_t first = 0; first < total;) {
    const std::uint64_t count = std::min({total - first, buffer_perms, permuter.max_launch()});
    events.push_back(permuter.enqueue(out, first, count));
    first += count;
  }
  permuter.kernel_queue().finish();
  double s = 0;
  for (auto& e : events)
    s += static_cast<double>(e.getProfilingInfo<CL_PROFILING_COMMAND_END>() -
                             e.getProfilingInfo<CL_PROFILING_COMMAND_START>()) * 1e-9;
  return s;
}

// Device-to-host bandwidth into pinned memory (GB/s): reads of `bytes` repeated.
double link_gbps(const gpufilter::DeviceContext& device, std::size_t bytes) {
  cl::CommandQueue queue(device.context(), device.device());
  cl::Buffer src(device.context(), CL_MEM_READ_WRITE, bytes);
  cl::Buffer pinned(device.context(), CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, bytes);
  void* host = queue.enqueueMapBuffer(pinned, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, bytes);
  std::vector<std::uint8_t> pattern(bytes, 0x5a);
  queue.enqueueWriteBuffer(src, CL_TRUE, 0, bytes, pattern.data());
  queue.enqueueReadBuffer(src, CL_TRUE, 0, bytes, host);  // warm-up
  double best = 1e30;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = Clock::now();
    queue.enqueueReadBuffer(src, CL_TRUE, 0, bytes, host);
    best = std::min(best, seconds_since(t0));
  }
  queue.enqueueUnmapMemObject(pinned, host);
  queue.finish();
  return static_cast<double>(bytes) / best * 1e-9;
}

struct Row {
  unsigned n = 0;
  std::uint64_t perms = 0, bytes = 0;
  double kernel_s = 0, copy_s = 0, cpu_s = 0;
  bool verified = false, equal = true;
};

struct Args {
  std::string device_spec;
  std::vector<unsigned> sizes{11, 12};
  unsigned steps = 15, repeat = 3, threads = std::max(1u, std::thread::hardware_concurrency());
  std::size_t batch_bytes = 0;
  bool sweep = false, verify = true;
};

// False on a bad argument.
bool parse_args(int argc, char** argv, Args& args) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : std::string(); };
    if (a == "--device") args.device_spec = next();
    else if (a == "--sizes") {
      args.sizes.clear();
      const std::string list = next();
      for (std::size_t p = 0; p < list.size();) {
        args.sizes.push_back(static_cast<unsigned>(std::strtoul(list.c_str() + p, nullptr, 10)));
        const auto comma = list.find(',', p);
        p = comma == std::string::npos ? list.size() : comma + 1;
      }
    } else if (a == "--steps") args.steps = static_cast<unsigned>(std::strtoul(next().c_str(), nullptr, 10));
    else if (a == "--repeat") args.repeat = std::max(1u, static_cast<unsigned>(std::strtoul(next().c_str(), nullptr, 10)));
    else if (a == "--threads") args.threads = std::max(1u, static_cast<unsigned>(std::strtoul(next().c_str(), nullptr, 10)));
    else if (a == "--batch-bytes") args.batch_bytes = std::strtoull(next().c_str(), nullptr, 10);
    else if (a == "--sweep") args.sweep = true;
    else if (a == "--no-verify") args.verify = false;
    else return false;
  }
  for (const unsigned n : args.sizes)
    if (n < 1 || n > perm::kMaxRange) return false;
  return true;
}

struct Measured {
  std::size_t link_bytes = 0;
  std::size_t work_group = 0;
  std::uint64_t batch_perms = 0;
};

// One N: the kernel with its output kept on the device, the CPU generator, and the GPU
// copied back batch by batch to /dev/null (checked against the CPU's output).
Row measure(gpufilter::DeviceContext& device, const Args& args, unsigned n, int null_fd, Measured& m) {
  const auto set = perm::Multiset::range(n);
  Row row{n, set.permutations(), set.permutations() * n};
  std::fprintf(stderr, "N=%u: %s permutations, %.2f GB\n", n, grouped(row.perms).c_str(),
               static_cast<double>(row.bytes) * 1e-9);
  {
    perm::GpuPermuter permuter(device, set, perm::GpuOptions{.steps = args.steps, .profiling = true});
    m.work_group = permuter.work_group();
    const std::uint64_t buffer_bytes = std::min<std::uint64_t>(row.bytes, device.info().max_allocation / n * n);
    cl::Buffer out(device.context(), CL_MEM_READ_WRITE, buffer_bytes);
    device_kernel_seconds(permuter, out, buffer_bytes / n);  // warm-up
    row.kernel_s = 1e30;
    for (unsigned r = 0; r < args.repeat; ++r)
      row.kernel_s = std::min(row.kernel_s, device_kernel_seconds(permuter, out, buffer_bytes / n));
  }
  std::vector<std::uint8_t> cpu(row.bytes);  // touched beforehand
  std::memset(cpu.data(), 0, cpu.size());
  row.cpu_s = 1e30;
  for (unsigned r = 0; r < args.repeat; ++r) {
    const auto t0 = Clock::now();
    perm::generate_host(set, 0, row.perms, cpu, args.threads);
    row.cpu_s = std::min(row.cpu_s, seconds_since(t0));
  }
  perm::GpuPermuter permuter(device, set, perm::GpuOptions{.steps = args.steps, .batch_bytes = args.batch_bytes});
  m.batch_perms = permuter.batch_permutations();
  m.link_bytes = std::max<std::size_t>(m.link_bytes, std::min(row.bytes, m.batch_perms * n));
  auto to_null = [&](std::uint64_t, std::span<const std::uint8_t> bytes) {
    for (std::size_t done = 0; done < bytes.size();) {
      const ssize_t w = ::write(null_fd, bytes.data() + done, bytes.size() - done);
      if (w < 0) throw gpufilter::Error("cannot write /dev/null");
      done += static_cast<std::size_t>(w);
    }
  };
  permuter.generate(0, row.perms, to_null);  // warm-up
  row.copy_s = 1e30;
  for (unsigned r = 0; r < args.repeat; ++r) {
    const auto t0 = Clock::now();
    permuter.generate(0, row.perms, to_null);
    row.copy_s = std::min(row.copy_s, seconds_since(t0));
  }
  if (args.verify) {
    row.verified = true;
    permuter.generate(0, row.perms, [&](std::uint64_t first, std::span<const std::uint8_t> bytes) {
      if (std::memcmp(bytes.data(), cpu.data() + first * n, bytes.size()) != 0) row.equal = false;
    });
  }
  return row;
}

// The table; true when every checked output equalled the CPU's.
bool print_rows(const gpufilter::DeviceContext& device, const Args& args, const Measured& m, double link,
                const std::vector<Row>& rows) {
  const auto& info = device.info();
  std::printf("device: %s (%s, %s), steps %u, work-group %zu, batch %s permutations; link device->host (pinned, "
              "measured): %.1f GB/s\nCPU: %s, %u threads\n\n",
              info.name.c_str(), info.platform_name.c_str(), info.driver.c_str(), args.steps, m.work_group,
              grouped(m.batch_perms).c_str(), link, cpu_model().c_str(), args.threads);
  std::printf("| N | permutations | output | GPU kernel, output on device | GPU -> pinned host -> /dev/null | "
              "link bound | CPU, %u threads | kernel vs CPU | copy-back / link bound | GPU = CPU |\n",
              args.threads);
  std::printf("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n");
  bool all_equal = true;
  for (const auto& r : rows) {
    const double gb = static_cast<double>(r.bytes) * 1e-9;
    const double bound = gb / link;
    all_equal = all_equal && r.equal;
    std::printf("| %u | %s | %.2f GB | %s (%.1f GB/s, %.2f G perm/s) | %s (%.1f GB/s) | %s | %s (%.1f GB/s) | %.1fx | "
                "%.2fx | %s |\n",
                r.n, grouped(r.perms).c_str(), gb, time_text(r.kernel_s).c_str(), gb / r.kernel_s,
                static_cast<double>(r.perms) / r.kernel_s * 1e-9, time_text(r.copy_s).c_str(), gb / r.copy_s,
                time_text(bound).c_str(), time_text(r.cpu_s).c_str(), gb / r.cpu_s, r.cpu_s / r.kernel_s,
                r.copy_s / bound, !r.verified ? "not checked" : r.equal ? "yes" : "NO");
  }
  return all_equal;
}

// --sweep: kernel time by next_permutation steps per work-item, the largest N.
void sweep_steps(gpufilter::DeviceContext& device, const Args& args) {
  const unsigned n = *std::max_element(args.sizes.begin(), args.sizes.end());
  const auto set = perm::Multiset::range(n);
  const std::uint64_t bytes = set.permutations() * n;
  const std::uint64_t buffer_bytes = std::min<std::uint64_t>(bytes, device.info().max_allocation / n * n);
  cl::Buffer out(device.context(), CL_MEM_READ_WRITE, buffer_bytes);
  std::printf("\nKernel time by steps (next_permutation steps per work-item after the decomposed one), N = %u, "
              "output on device:\n\n| steps | work-group | kernel | G perm/s | vs steps 0 |\n| ---: | ---: | ---: "
              "| ---: | ---: |\n",
              n);
  double base = 0;
  for (const unsigned s : {0u, 1u, 3u, 7u, 15u, 31u, 63u}) {
    perm::GpuPermuter permuter(device, set, perm::GpuOptions{.steps = s, .profiling = true});
    device_kernel_seconds(permuter, out, buffer_bytes / n);
    double best = 1e30;
    for (unsigned r = 0; r < args.repeat; ++r)
      best = std::min(best, device_kernel_seconds(permuter, out, buffer_bytes / n));
    if (s == 0) base = best;
    std::printf("| %u | %zu | %s | %.2f | %.2fx |\n", s, permuter.work_group(), time_text(best).c_str(),
                static_cast<double>(set.permutations()) / best * 1e-9, base / best);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!parse_args(argc, argv, args)) return usage();
  try {
    gpufilter::DeviceContext device(args.device_spec);
    const int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null_fd < 0) throw gpufilter::Error("cannot open /dev/null");
    Measured m;
    std::vector<Row> rows;
    for (const unsigned n : args.sizes) rows.push_back(measure(device, args, n, null_fd, m));
    const double link = link_gbps(device, std::max<std::size_t>(m.link_bytes, std::size_t{64} << 20));
    const bool all_equal = print_rows(device, args, m, link, rows);
    if (args.sweep && !args.sizes.empty()) sweep_steps(device, args);
    ::close(null_fd);
    return all_equal ? 0 : 1;
  } catch (const gpufilter::KernelBuildError& e) {
    std::fprintf(stderr, "gpupermute-bench: %s\n", e.what());
    for (const auto& [name, log] : e.logs()) std::fprintf(stderr, "--- %s:\n%s\n", name.c_str(), log.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpupermute-bench: %s\n", e.what());
    return 2;
  }
}
