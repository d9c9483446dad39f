// gpufilter-kernel-bench: kernel-only throughput. Uploads up to --bytes of INPUT (cut at
// a line end) into one scan slot once, then runs the scan kernel over that resident copy
// --iterations times: no host copies, no uploads, no read-back of positions. Prints one
// JSON line: {"kernel_gbps", "bytes", "iterations", "device", "patterns", "occurrences",
// "positions_per_item", "compacted" (the walks gathered per work-group: --walks
// compacted|in-place|auto, auto by default), and the upload rates from pinned staging: "upload_write_gbps" (a
// write from the mapped pointer, what the pipeline does), "upload_copy_gbps" (a copy from
// the staging buffer object)}.
#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>

#include "gpufilter/opencl/device.hpp"
#include "gpufilter/opencl/device_scanner.hpp"
#include "gpufilter/core/errors.hpp"
#include "gpufilter/opencl/scan_program.hpp"

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: gpufilter-kernel-bench [--device SPEC] [-i] -f PATTERNFILE [--bytes N] "
               "[--iterations K] [--positions P] [--walks auto|compacted|in-place] [--group N] INPUT\n");
  return 2;
}

// At most `limit` bytes of the file at `path`.
std::string slurp(const std::string& path, std::size_t limit) {
  std::ifstream in(path, std::ios::binary);
  std::string data;
  if (in) {
    std::string piece(std::size_t{1} << 20, '\0');
    while (data.size() < limit && in.read(piece.data(), static_cast<std::streamsize>(piece.size())).gcount() > 0)
      data.append(piece.data(), std::min(static_cast<std::size_t>(in.gcount()), limit - data.size()));
  }
  if (in.bad() || (!in.eof() && data.size() < limit)) throw std::runtime_error("cannot read " + path);
  return data;
}

}  // namespace

int main(int argc, char** argv) {
  std::string device_spec, pattern_file, input;
  std::size_t bytes = std::size_t{1} << 30;
  unsigned iterations = 10;
  unsigned positions = 0;  // start positions per work-item; 0: the ScanProgram's default
  bool ignore_case = false;
  gpufilter::ScanLayout::Walks walks = gpufilter::ScanLayout::Walks::kAuto;
  unsigned group = 0;  // work-items a group when the walks are gathered; 0: the default
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : std::string(); };
    if (a == "--device") device_spec = next();
    else if (a == "-i") ignore_case = true;
    else if (a == "-f") pattern_file = next();
    else if (a == "--bytes") bytes = std::strtoull(next().c_str(), nullptr, 10);
    else if (a == "--iterations") iterations = static_cast<unsigned>(std::strtoul(next().c_str(), nullptr, 10));
    else if (a == "--positions") positions = static_cast<unsigned>(std::strtoul(next().c_str(), nullptr, 10));
    else if (a == "--group") group = static_cast<unsigned>(std::strtoul(next().c_str(), nullptr, 10));
    else if (a == "--walks") {
      const std::string g = next();
      if (g == "compacted") walks = gpufilter::ScanLayout::Walks::kCompacted;
      else if (g == "in-place") walks = gpufilter::ScanLayout::Walks::kInPlace;
      else if (g != "auto") return usage();
    } else if (!a.empty() && a[0] != '-' && input.empty()) input = a;
    else return usage();
  }
  if (pattern_file.empty() || input.empty() || iterations == 0 || bytes == 0) return usage();
  try {
    gpufilter::PatternSet patterns;
    patterns.add_file_contents(slurp(pattern_file, std::numeric_limits<std::size_t>::max()));
    std::string text = slurp(input, std::min<std::size_t>(bytes, (std::size_t{1} << 32) - 4096));
    if (const auto nl = text.rfind('\n'); nl != std::string::npos) text.resize(nl + 1);

    gpufilter::DeviceContext device(device_spec);
    const gpufilter::ScanProgram matcher(device, gpufilter::PatternTable(patterns, gpufilter::MatchOptions{ignore_case}),
                                         gpufilter::ScanLayout{.positions = positions, .walks = walks, .group_items = group});
    gpufilter::DeviceScanner scanner(device, matcher,
                                     gpufilter::ScanConfig{.chunk_bytes = text.size(), .slots = 1, .locate = false});
    gpufilter::ScanSlot& slot = *scanner.acquire();
    std::memcpy(slot.staging(), text.data(), text.size());
    slot.chunk() = gpufilter::Chunk{.data = slot.staging(), .size = text.size()};
    scanner.submit(slot);
    const std::uint64_t occurrences = scanner.complete_oldest().total();
    scanner.rescan_resident(slot, 1);  // warm-up
    const double seconds = scanner.rescan_resident(slot, iterations);
    scanner.time_uploads(slot, 1, false);  // warm-up
    const double write_s = scanner.time_uploads(slot, iterations, false);
    const double copy_s = scanner.time_uploads(slot, iterations, true);
    const double uploaded = static_cast<double>(text.size()) * iterations / 1e9;
    std::printf(
        "{\"kernel_gbps\":%.3f,\"bytes\":%zu,\"iterations\":%u,\"device\":\"%s\",\"patterns\":%zu,"
        "\"occurrences\":%llu,\"positions_per_item\":%u,\"compacted\":%s,\"upload_write_gbps\":%.3f,\"upload_copy_gbps\":%.3f}\n",
        static_cast<double>(text.size()) * iterations / seconds / 1e9, text.size(), iterations,
        device.info().name.c_str(), patterns.size(), static_cast<unsigned long long>(occurrences),
        matcher.positions_per_item(), matcher.compacted() ? "true" : "false", uploaded / write_s, uploaded / copy_s);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpufilter-kernel-bench: %s\n", e.what());
    return 2;
  }
}
