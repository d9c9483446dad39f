// gpupermute: lexicographic permutations on the GPU (permute.cl through
// GpuPermuter). Exit status: 0 done; 1 --check found a difference; 2 bad arguments or
// any other error (no device, a kernel that does not build, an output that cannot be
// written).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpufilter/cli/progress.hpp"
#include "gpufilter/permute/permuter.hpp"
#include "gpufilter/opencl/device.hpp"
#include "gpufilter/core/errors.hpp"

namespace {

namespace perm = gpufilter::permute;

constexpr const char* kUsage =
    "usage: gpupermute N [--offset K] [--count M] [--steps L] [--output FILE|-] [--text] [--check]\n"
    "                    [--device SPEC] [--batch-bytes B]\n"
    "       gpupermute --elements STRING [the same options]\n"
    "       gpupermute [N | --elements STRING] --rank PERMUTATION\n";

constexpr const char* kHelp =
    "Writes the permutations of 0..N-1 (N <= 20), or the distinct permutations of the bytes of\n"
    "STRING (--elements aabbc), in lexicographic order, numbered from 0, generated on the GPU.\n"
    "\n"
    "  --offset K        start at permutation K (default 0)\n"
    "  --count M         write M permutations (default: all from K to the last)\n"
    "  --steps L         next_permutation steps per work-item after the one found by\n"
    "                    decomposition (default 15; 0: decomposition only)\n"
    "  --output FILE|-   where to write (default -, standard output; with --check the\n"
    "                    default is to write nothing)\n"
    "  --text            one permutation per line: numbers separated by spaces for N, the\n"
    "                    elements themselves for --elements (default: N bytes each, no separator)\n"
    "  --check           compare every permutation with std::next_permutation on the host;\n"
    "                    exit 1 at the first difference\n"
    "  --device SPEC     gpu, cpu or PLATFORM:DEVICE (default: the first GPU, else the first CPU)\n"
    "  --batch-bytes B   output bytes per device batch (default: 256 MiB or what the device allows)\n"
    "  --rank PERM       print the index of PERM instead: numbers separated by commas or spaces\n"
    "                    (N is their count unless given), or a string with --elements\n"
    "  --list-devices    list the OpenCL devices and exit\n"
    "  --no-progress     no progress line (shown on a terminal standard error after a second\n"
    "                    when the output goes elsewhere: bytes, GB/s, time left)\n";

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A whole decimal number in [0, 2^64).
std::uint64_t parse_u64(std::string_view what, std::string_view text) {
  std::uint64_t value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec == std::errc::result_out_of_range)
    throw UsageError(std::string(what) + " '" + std::string(text) + "' is not a number from 0 to 2^64-1");
  if (ec != std::errc() || ptr != text.data() + text.size())
    throw UsageError(std::string(what) + " '" + std::string(text) + "' is not a whole number");
  return value;
}

struct Args {
  std::optional<std::uint64_t> n;
  std::optional<std::string> elements;
  std::optional<std::string> rank;
  std::uint64_t offset = 0;
  std::optional<std::uint64_t> count;
  unsigned steps = 15;
  std::optional<std::string> output;
  bool text = false;
  bool check = false;
  bool help = false;
  bool list_devices = false;
  std::string device;
  std::size_t batch_bytes = 0;
  bool slice_given = false;
  bool no_progress = false;
};

Args parse(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::optional<std::string> inline_value;
    if (arg.rfind("--", 0) == 0) {
      if (const auto eq = arg.find('='); eq != std::string::npos) {
        inline_value = arg.substr(eq + 1);
        arg.resize(eq);
      }
    }
    auto value = [&]() -> std::string {
      if (inline_value) return *inline_value;
      if (i + 1 >= argc) throw UsageError("option " + arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--help" || arg == "-h") args.help = true;
    else if (arg == "--list-devices") args.list_devices = true;
    else if (arg == "--offset") args.offset = parse_u64("offset", value()), args.slice_given = true;
    else if (arg == "--count") args.count = parse_u64("count", value()), args.slice_given = true;
    else if (arg == "--steps") {
      const auto steps = parse_u64("steps", value());
      if (steps > perm::kMaxSteps)
        throw UsageError("steps " + std::to_string(steps) + " is too many: at most " + std::to_string(perm::kMaxSteps));
      args.steps = static_cast<unsigned>(steps);
    } else if (arg == "--output" || arg == "-o") args.output = value();
    else if (arg == "--text") args.text = true;
    else if (arg == "--check") args.check = true;
    else if (arg == "--no-progress") args.no_progress = true;
    else if (arg == "--device") args.device = value();
    else if (arg == "--batch-bytes") {
      args.batch_bytes = static_cast<std::size_t>(parse_u64("batch bytes", value()));
      if (args.batch_bytes == 0) throw UsageError("batch bytes must be at least 1");
    } else if (arg == "--elements") args.elements = value();
    else if (arg == "--rank") args.rank = value();
    else if (arg.size() > 1 && arg[0] == '-') throw UsageError("unknown option " + arg);
    else if (!args.n) args.n = parse_u64("N", arg);
    else throw UsageError("unexpected argument '" + arg + "'");
  }
  if (args.help || args.list_devices) return args;
  if (args.n && args.elements) throw UsageError("give N or --elements, not both");
  if (!args.n && !args.elements && !args.rank) throw UsageError("give N or --elements");
  if (args.n && *args.n > perm::kMaxRange)
    throw UsageError("N = " + std::to_string(*args.n) + " is too large: N! must fit in 64 bits, so N is at most " +
                     std::to_string(perm::kMaxRange));
  if (args.n && *args.n == 0) throw UsageError("N must be at least 1");
  if (args.rank && (args.slice_given || args.check || args.text || args.output))
    throw UsageError("--rank takes no --offset, --count, --check, --text or --output");
  return args;
}

// "3,1,0,2" or "3 1 0 2": the values of a permutation of 0..N-1.
std::vector<std::uint8_t> parse_values(const std::string& text) {
  std::vector<std::uint8_t> values;
  std::size_t i = 0;
  while (i < text.size()) {
    if (text[i] == ',' || text[i] == ' ') {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < text.size() && text[j] != ',' && text[j] != ' ') ++j;
    const auto v = parse_u64("element", std::string_view(text).substr(i, j - i));
    if (v >= perm::kMaxRange)
      throw perm::ArgumentError("element " + std::to_string(v) + " is not one of 0.." +
                                std::to_string(perm::kMaxRange - 1));
    values.push_back(static_cast<std::uint8_t>(v));
    i = j;
  }
  if (values.empty()) throw UsageError("--rank needs a permutation, e.g. --rank 2,0,1");
  return values;
}

// An output file descriptor with a write that finishes or throws.
class Output {
 public:
  explicit Output(const std::string& path) : name_(path == "-" ? "standard output" : path) {
    if (path == "-") {
      fd_ = STDOUT_FILENO;
    } else {
      fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
      if (fd_ < 0) fail("cannot open");
      owned_ = true;
    }
  }
  ~Output() {
    if (owned_) ::close(fd_);
  }
  void write(const void* data, std::size_t size) {
    const auto* p = static_cast<const char*>(data);
    while (size > 0) {
      const ssize_t w = ::write(fd_, p, size);
      if (w < 0) {
        if (errno == EINTR) continue;
        fail("cannot write");
      }
      p += w;
      size -= static_cast<std::size_t>(w);
    }
  }
  void close() {
    if (owned_) {
      owned_ = false;
      if (::close(fd_) != 0) fail("cannot close");
    }
  }

 private:
  [[noreturn]] void fail(const char* what) {
    throw gpufilter::Error(std::string(what) + " " + name_ + ": " + std::strerror(errno));
  }
  std::string name_;
  int fd_ = -1;
  bool owned_ = false;
};

struct CheckFailed {
  std::uint64_t index;
  std::vector<std::uint8_t> device, host;
};

std::string show(const perm::Multiset& set, const std::uint8_t* p) {
  std::string s;
  for (unsigned i = 0; i < set.size(); ++i) {
    if (set.is_range()) {
      if (i != 0) s += ' ';
      s += std::to_string(p[i]);
    } else {
      s += static_cast<char>(p[i]);
    }
  }
  return s;
}

// A progress line on a terminal standard error while a large output goes elsewhere (a
// file, a pipe): after a second, "4.2 GB of 19.9 GB, 3.1 GB/s, 5 s left".
bool wants_progress(const Args& args) {
  const bool to_terminal = args.output.value_or("-") == "-" && ::isatty(STDOUT_FILENO);
  return !args.no_progress && !to_terminal && gpufilter::cli::terminal_can_show_progress();
}

// The bytes the slice writes: each permutation takes the same room (its values are the
// set's, in some order); none when that overflows.
std::optional<std::uint64_t> output_bytes(const perm::Multiset& set, const perm::Slice& slice, bool text) {
  std::uint64_t each = set.size();
  if (text) {
    each = set.size() + 1;  // the characters and a newline
    if (set.is_range()) {   // numbers with spaces between them
      each = set.size();
      for (unsigned v = 0; v < set.size(); ++v) each += v >= 10 ? 2 : 1;
    }
  }
  if (each != 0 && slice.count > UINT64_MAX / each) return std::nullopt;
  return slice.count * each;
}

int run(const Args& args) {
  if (args.list_devices) {
    for (const auto& d : gpufilter::list_devices())
      std::cout << d.platform_index << ':' << d.device_index << "  " << d.type << "  " << d.name << "  ("
                << d.platform_name << ", " << d.version << ")\n";
    return 0;
  }
  if (args.rank) {
    std::vector<std::uint8_t> permutation;
    std::optional<perm::Multiset> set;
    if (args.elements) {
      set = perm::Multiset::of(*args.elements);
      permutation.assign(args.rank->begin(), args.rank->end());
    } else {
      permutation = parse_values(*args.rank);
      set = perm::Multiset::range(args.n ? static_cast<unsigned>(*args.n) : static_cast<unsigned>(permutation.size()));
    }
    std::cout << perm::rank(*set, permutation) << '\n';
    return 0;
  }

  const perm::Multiset set =
      args.elements ? perm::Multiset::of(*args.elements) : perm::Multiset::range(static_cast<unsigned>(*args.n));
  const perm::Slice slice = perm::make_slice(set, args.offset, args.count);
  const unsigned n = set.size();

  std::optional<Output> out;
  if (args.output || !args.check) out.emplace(args.output.value_or("-"));

  std::atomic<std::uint64_t> written{0};
  gpufilter::FdWriter terminal(STDERR_FILENO);
  std::unique_ptr<gpufilter::cli::ProgressLine> progress;
  if (out && wants_progress(args))
    progress = std::make_unique<gpufilter::cli::ProgressLine>(
        terminal, [&written] { return written.load(std::memory_order_relaxed); }, output_bytes(set, slice, args.text));

  gpufilter::DeviceContext device(args.device);
  perm::GpuPermuter permuter(device, set, perm::GpuOptions{.steps = args.steps, .batch_bytes = args.batch_bytes});

  std::vector<std::uint8_t> expected;  // --check: the host's current permutation
  if (args.check) expected = perm::nth(set, slice.offset);
  std::string text;
  permuter.generate(slice.offset, slice.count, [&](std::uint64_t first, std::span<const std::uint8_t> bytes) {
    if (args.check) {
      for (std::size_t i = 0; i < bytes.size(); i += n) {
        if (std::memcmp(bytes.data() + i, expected.data(), n) != 0)
          throw CheckFailed{first + i / n, {bytes.begin() + i, bytes.begin() + i + n}, expected};
        std::next_permutation(expected.begin(), expected.end());
      }
    }
    if (!out) return;
    if (!args.text) {
      out->write(bytes.data(), bytes.size());
      written.fetch_add(bytes.size(), std::memory_order_relaxed);
      return;
    }
    text.clear();
    for (std::size_t i = 0; i < bytes.size(); i += n) {
      if (set.is_range()) {
        for (unsigned j = 0; j < n; ++j) {
          const unsigned v = bytes[i + j];
          if (j != 0) text += ' ';
          if (v >= 10) text += static_cast<char>('0' + v / 10);
          text += static_cast<char>('0' + v % 10);
        }
      } else {
        text.append(reinterpret_cast<const char*>(bytes.data() + i), n);
      }
      text += '\n';
    }
    out->write(text.data(), text.size());
    written.fetch_add(text.size(), std::memory_order_relaxed);
  });
  if (out) out->close();
  if (progress) progress->stop();
  if (args.check)
    std::cerr << "gpupermute: checked " << slice.count << " permutation" << (slice.count == 1 ? "" : "s")
              << " from " << slice.offset << " against std::next_permutation: all equal\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args args = parse(argc, argv);
    if (args.help) {
      std::cout << kUsage << '\n' << kHelp;
      return 0;
    }
    return run(args);
  } catch (const UsageError& e) {
    std::cerr << "gpupermute: " << e.what() << '\n' << kUsage;
    return 2;
  } catch (const CheckFailed& f) {
    // A permutation differs: which one, and both versions.
    perm::Multiset set = perm::Multiset::of(f.host);
    std::cerr << "gpupermute: --check: permutation " << f.index << " differs: device [" << show(set, f.device.data())
              << "], std::next_permutation [" << show(set, f.host.data()) << "]\n";
    return 1;
  } catch (const gpufilter::KernelBuildError& e) {
    std::cerr << "gpupermute: " << e.what() << '\n';
    for (const auto& [device, log] : e.logs()) std::cerr << "--- build log for " << device << ":\n" << log << '\n';
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "gpupermute: " << e.what() << '\n';
    return 2;
  }
}
