// count_lines: the library without the command line. Counts the lines of FILE that
// contain any PATTERN, on the default OpenCL device, and checks the count against a
// plain CPU scan of the same file.
//
//   gpufilter_example_count FILE PATTERN...
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "gpufilter/opencl/device.hpp"
#include "gpufilter/opencl/scan_program.hpp"
#include "gpufilter/opencl/device_scanner.hpp"
#include "gpufilter/grep/searcher.hpp"
#include "gpufilter/scan/file_scan.hpp"
#include "gpufilter/sources/file_source.hpp"

namespace {

// A Sink that only counts selected lines.
class CountingSink final : public gpufilter::Sink {
 public:
  gpufilter::Flow matched(const gpufilter::LineMatch&) override {
    ++lines;
    return gpufilter::Flow::kContinue;
  }
  std::uint64_t lines = 0;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s FILE PATTERN...\n", argv[0]);
    return 2;
  }
  try {
    gpufilter::PatternSet patterns;
    for (int i = 2; i < argc; ++i) patterns.add(argv[i]);

    gpufilter::DeviceContext device;                        // first GPU, else PoCL
    gpufilter::ScanProgram matcher(device, patterns, {});       // compiled once
    gpufilter::DeviceScanner scanner(device, matcher, {});        // pinned slots
    CountingSink sink;
    gpufilter::Searcher searcher(matcher.table(), {}, sink);
    gpufilter::FileScan pipeline(scanner, searcher, {});
    auto source = gpufilter::FileSource::open(argv[1]);
    const auto summary = pipeline.run(*source);

    // The same question answered on the CPU, line by line.
    std::ifstream in(argv[1], std::ios::binary);
    std::string line;
    std::uint64_t expected = 0;
    while (std::getline(in, line)) {
      for (const auto& p : patterns.patterns())
        if (line.find(p) != std::string::npos) {
          ++expected;
          break;
        }
    }
    std::printf("%llu lines match on %s (CPU check: %llu)\n", static_cast<unsigned long long>(summary.selected_lines),
                device.info().name.c_str(), static_cast<unsigned long long>(expected));
    return summary.selected_lines == expected && sink.lines == expected ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "count_lines: %s\n", e.what());
    return 2;
  }
}
