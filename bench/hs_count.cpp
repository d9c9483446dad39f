// gpufilter-hs-count: the benchmark's Hyperscan reference. Counts the lines of FILE that
// contain any of the literal patterns (one per line of PATTERNFILE, as grep -F -f reads
// them), like `grep -F -c`: the file is mapped, cut at line boundaries into parts, and the
// parts are scanned by hs_compile_lit_multi's database on every core.
//
//   gpufilter-hs-count -f PATTERNFILE [-i] [--threads N] [--compile-ms] FILE
// --compile-ms adds one line on stderr: gpufilter-hs-count: {"compile_ms":..,"scan_ms":..,...}
#include <fcntl.h>
#include <hs.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr std::size_t kMaxPart = 1u << 30;  // well below hs_scan's 4 GiB length limit

struct Options {
  std::string patterns, input;
  bool caseless = false, report = false;
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
};

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument("missing value for " + a);
      return argv[++i];
    };
    if (a == "-f") o.patterns = value();
    else if (a == "-i") o.caseless = true;
    else if (a == "--threads") o.threads = static_cast<unsigned>(std::max(1, std::stoi(value())));
    else if (a == "--compile-ms") o.report = true;
    else if (!a.empty() && a[0] == '-') throw std::invalid_argument("unknown option " + a);
    else if (o.input.empty()) o.input = a;
    else throw std::invalid_argument("one FILE only");
  }
  if (o.patterns.empty() || o.input.empty())
    throw std::invalid_argument("usage: gpufilter-hs-count -f PATTERNFILE [-i] [--threads N] [--compile-ms] FILE");
  return o;
}

// grep -f: every line is a pattern, taken as is; a final newline ends the last one.
std::vector<std::string> read_patterns(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string data = buffer.str();
  std::vector<std::string> out;
  for (std::size_t pos = 0; pos < data.size();) {
    std::size_t end = data.find('\n', pos);
    if (end == std::string::npos) end = data.size();
    out.push_back(data.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

// A read-only mapping of the whole input.
struct Mapping {
  const char* data = nullptr;
  std::size_t size = 0;
  explicit Mapping(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    struct stat st {};
    if (fd < 0 || ::fstat(fd, &st) != 0) throw std::runtime_error(path + ": " + std::strerror(errno));
    size = static_cast<std::size_t>(st.st_size);
    if (size > 0) {
      void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) throw std::runtime_error(path + ": mmap: " + std::strerror(errno));
      data = static_cast<const char*>(p);
    }
    ::close(fd);
  }
  ~Mapping() {
    if (data != nullptr) ::munmap(const_cast<char*>(data), size);
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
};

// Part boundaries: line starts near equal cuts, at least `parts` parts, none over kMaxPart
// unless one line is.
std::vector<std::size_t> cut(const Mapping& m, std::size_t parts) {
  parts = std::max(parts, (m.size + kMaxPart - 1) / kMaxPart);
  std::vector<std::size_t> bounds{0};
  for (std::size_t i = 1; i < parts; ++i) {
    const std::size_t target = std::max(bounds.back(), m.size / parts * i);
    if (target >= m.size) break;
    const void* nl = std::memchr(m.data + target, '\n', m.size - target);
    if (nl == nullptr) break;
    const std::size_t b = static_cast<std::size_t>(static_cast<const char*>(nl) - m.data) + 1;
    if (b > bounds.back() && b < m.size) bounds.push_back(b);
  }
  bounds.push_back(m.size);
  return bounds;
}

// Matches arrive in end-offset order: one that ends inside the line counted last is skipped,
// any other counts its line and remembers where that line ends.
struct PartScan {
  const char* data;
  std::size_t size;
  std::size_t counted_end = 0;
  std::uint64_t lines = 0;
};

int on_match(unsigned, unsigned long long, unsigned long long to, unsigned, void* context) {
  auto* s = static_cast<PartScan*>(context);
  if (to <= s->counted_end) return 0;
  const void* nl = std::memchr(s->data + to, '\n', s->size - to);
  s->counted_end = nl ? static_cast<std::size_t>(static_cast<const char*>(nl) - s->data) + 1 : s->size;
  ++s->lines;
  return 0;
}

std::uint64_t count_all_lines(const Mapping& m) {
  if (m.size == 0) return 0;
  return static_cast<std::uint64_t>(std::count(m.data, m.data + m.size, '\n')) + (m.data[m.size - 1] != '\n');
}

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse_options(argc, argv);
    const std::vector<std::string> patterns = read_patterns(o.patterns);
    const Mapping input(o.input);
    double compile_ms = 0;
    const auto scan_start = std::chrono::steady_clock::now();
    std::uint64_t total = 0;
    const bool match_all = std::any_of(patterns.begin(), patterns.end(), [](const auto& p) { return p.empty(); });
    if (match_all) {
      total = count_all_lines(input);  // the empty pattern selects every line
    } else if (!patterns.empty() && input.size > 0) {
      std::vector<const char*> expressions;
      std::vector<std::size_t> lengths;
      std::vector<unsigned> flags(patterns.size(), o.caseless ? HS_FLAG_CASELESS : 0u), ids(patterns.size());
      for (std::size_t i = 0; i < patterns.size(); ++i) {
        expressions.push_back(patterns[i].data());
        lengths.push_back(patterns[i].size());
        ids[i] = static_cast<unsigned>(i);
      }
      const auto compile_start = std::chrono::steady_clock::now();
      hs_database_t* db = nullptr;
      hs_compile_error_t* error = nullptr;
      if (hs_compile_lit_multi(expressions.data(), flags.data(), ids.data(), lengths.data(),
                               static_cast<unsigned>(patterns.size()), HS_MODE_BLOCK, nullptr, &db,
                               &error) != HS_SUCCESS) {
        const std::string message = error->message;
        hs_free_compile_error(error);
        throw std::runtime_error("hs_compile_lit_multi: " + message);
      }
      hs_scratch_t* prototype = nullptr;
      if (hs_alloc_scratch(db, &prototype) != HS_SUCCESS) throw std::runtime_error("hs_alloc_scratch failed");
      compile_ms = ms_since(compile_start);

      const std::vector<std::size_t> bounds = cut(input, std::size_t{o.threads} * 4);
      std::atomic<std::size_t> next{0};
      std::atomic<std::uint64_t> lines{0};
      std::atomic<bool> failed{false};
      auto work = [&] {
        hs_scratch_t* scratch = nullptr;
        if (hs_clone_scratch(prototype, &scratch) != HS_SUCCESS) { failed = true; return; }
        for (std::size_t p; (p = next++) + 1 < bounds.size();) {
          PartScan s{input.data + bounds[p], bounds[p + 1] - bounds[p]};
          if (s.size > UINT_MAX ||
              hs_scan(db, s.data, static_cast<unsigned>(s.size), 0, scratch, on_match, &s) != HS_SUCCESS) {
            failed = true;
            break;
          }
          lines += s.lines;
        }
        hs_free_scratch(scratch);
      };
      std::vector<std::thread> pool;
      for (unsigned t = 0; t < std::min<std::size_t>(o.threads, bounds.size() - 1); ++t) pool.emplace_back(work);
      for (auto& t : pool) t.join();
      hs_free_scratch(prototype);
      hs_free_database(db);
      if (failed) throw std::runtime_error("hs_scan failed (a line of 4 GiB or more?)");
      total = lines;
    }
    std::printf("%llu\n", static_cast<unsigned long long>(total));
    if (o.report)
      std::fprintf(stderr,
                   "gpufilter-hs-count: {\"compile_ms\":%.3f,\"scan_ms\":%.3f,\"threads\":%u,\"patterns\":%zu,"
                   "\"hyperscan\":\"%s\"}\n",
                   compile_ms, ms_since(scan_start) - compile_ms, o.threads, patterns.size(), hs_version());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpufilter-hs-count: %s\n", e.what());
    return 2;
  }
}
