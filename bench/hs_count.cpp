// gpufilter-hs-count: the benchmark's Hyperscan reference. Counts the lines of FILE that
// contain any of the literal patterns (one per line of PATTERNFILE, as grep -F -f reads
// them), like `grep -F -c`: the file is mapped, cut at line boundaries into parts, and the
// parts are scanned by hs_compile_lit_multi's database on every core.
//
// --regex: the lines are regular expressions instead (grep -E -f), compiled with
// hs_compile_multi in PCRE syntax: write them so that they mean the same in ERE and PCRE (no
// backslash-letter classes, bracket expressions without backslashes). Like grep, no match
// spans a newline: every pattern gets HS_FLAG_MULTILINE (^ and $ at line edges) and a '\n'
// in each negated bracket expression (`.` already excludes it; [[:space:]] would not: avoid
// it). HS_FLAG_ALLOWEMPTY where a pattern can match the empty string. HS_FLAG_SINGLEMATCH is
// not used: it would report a pattern once per part, not once per line. Instead every match
// names its line (the one around its end offset), and each line counts once, whatever order
// the matches come in. A pattern Hyperscan refuses is reported with its line number and
// message, and the program exits 2.
//
//   gpufilter-hs-count -f PATTERNFILE [--regex] [-i] [--threads N] [--compile-ms] FILE
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
#include <cstdlib>
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
  bool caseless = false, report = false, regex = false;
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
    else if (a == "--regex") o.regex = true;
    else if (a == "--threads") o.threads = static_cast<unsigned>(std::max(1, std::stoi(value())));
    else if (a == "--compile-ms") o.report = true;
    else if (!a.empty() && a[0] == '-') throw std::invalid_argument("unknown option " + a);
    else if (o.input.empty()) o.input = a;
    else throw std::invalid_argument("one FILE only");
  }
  if (o.patterns.empty() || o.input.empty())
    throw std::invalid_argument(
        "usage: gpufilter-hs-count -f PATTERNFILE [--regex] [-i] [--threads N] [--compile-ms] FILE");
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

// Literal mode. Matches arrive in end-offset order: one that ends inside the line counted
// last is skipped, any other counts its line and remembers where that line ends.
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

// Regex mode. The line of a match is the one whose [start, end] holds the match's end
// offset `to`, `end` being the offset of its '\n' (or of the part's end): a match never holds
// a '\n', so this is the line of its last byte, or, for an empty match, the line it sits in.
// A match inside the line counted last is skipped; any other adds its line's end to `ends`,
// counted once each at the end, so the order of the matches does not matter.
struct RegexPartScan {
  const char* data;
  std::size_t size;
  std::size_t line_start = 1, line_end = 0;  // the line counted last; none yet
  std::vector<std::size_t> ends{};
  std::uint64_t matches = 0;
};

int on_regex_match(unsigned, unsigned long long, unsigned long long to, unsigned, void* context) {
  auto* s = static_cast<RegexPartScan*>(context);
  ++s->matches;
  if (to >= s->line_start && to <= s->line_end) return 0;
  if (to >= s->size && s->size > 0 && s->data[s->size - 1] == '\n') return 0;  // after the last '\n': no line
  const void* nl = std::memchr(s->data + to, '\n', s->size - to);
  const void* before = to > 0 ? ::memrchr(s->data, '\n', to) : nullptr;
  s->line_end = nl ? static_cast<std::size_t>(static_cast<const char*>(nl) - s->data) : s->size;
  s->line_start = before ? static_cast<std::size_t>(static_cast<const char*>(before) - s->data) + 1 : 0;
  s->ends.push_back(s->line_end);
  return 0;
}

std::uint64_t count_all_lines(const Mapping& m) {
  if (m.size == 0) return 0;
  return static_cast<std::uint64_t>(std::count(m.data, m.data + m.size, '\n')) + (m.data[m.size - 1] != '\n');
}

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

[[noreturn]] void compile_failed(const char* what, hs_compile_error_t* error, bool with_index) {
  std::string message = std::string(what) + ": ";
  if (with_index && error->expression >= 0) message += "pattern " + std::to_string(error->expression + 1) + ": ";
  message += error->message;
  hs_free_compile_error(error);
  throw std::runtime_error(message);
}

hs_database_t* compile_literals(const std::vector<std::string>& patterns, bool caseless) {
  std::vector<const char*> expressions;
  std::vector<std::size_t> lengths;
  std::vector<unsigned> flags(patterns.size(), caseless ? HS_FLAG_CASELESS : 0u), ids(patterns.size());
  for (std::size_t i = 0; i < patterns.size(); ++i) {
    expressions.push_back(patterns[i].data());
    lengths.push_back(patterns[i].size());
    ids[i] = static_cast<unsigned>(i);
  }
  hs_database_t* db = nullptr;
  hs_compile_error_t* error = nullptr;
  if (hs_compile_lit_multi(expressions.data(), flags.data(), ids.data(), lengths.data(),
                           static_cast<unsigned>(patterns.size()), HS_MODE_BLOCK, nullptr, &db, &error) != HS_SUCCESS)
    compile_failed("hs_compile_lit_multi", error, false);
  return db;
}

// The end of the bracket expression that opens at p[open] ('['), or npos: a ']' right after
// "[" or "[^" is a member; "[:", "[." and "[=" run to their ":]", ".]" and "=]"; a backslash
// takes the next character along (PCRE, which Hyperscan parses).
std::size_t bracket_end(const std::string& p, std::size_t open) {
  std::size_t i = open + 1;
  if (i < p.size() && p[i] == '^') ++i;
  if (i < p.size() && p[i] == ']') ++i;
  for (; i < p.size(); ++i) {
    if (p[i] == ']') return i;
    if (p[i] == '\\') {
      ++i;
    } else if (p[i] == '[' && i + 1 < p.size() && (p[i + 1] == ':' || p[i + 1] == '.' || p[i + 1] == '=')) {
      const std::size_t close = p.find(std::string{p[i + 1], ']'}, i + 2);
      if (close == std::string::npos) return std::string::npos;
      i = close + 1;
    }
  }
  return std::string::npos;
}

// `pattern` with a '\n' added to each negated bracket expression, so that no match spans lines.
std::string exclude_newline(const std::string& pattern) {
  std::string out;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '\\' && i + 1 < pattern.size()) {
      out += pattern.substr(i++, 2);
    } else if (pattern[i] == '[') {
      const std::size_t end = bracket_end(pattern, i);
      if (end == std::string::npos) return out + pattern.substr(i);  // unclosed: Hyperscan reports it
      out += pattern.substr(i, end - i);
      if (pattern.compare(i, 2, "[^") == 0) out += "\\n";
      out += ']';
      i = end;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

// Every pattern checked alone first (hs_expression_info), so that all refusals are reported,
// and to learn which can match the empty string (they get HS_FLAG_ALLOWEMPTY).
hs_database_t* compile_regexes(const std::vector<std::string>& patterns, bool caseless) {
  std::vector<std::string> rewritten;
  std::vector<unsigned> flags, ids;
  std::string refused;
  std::size_t refusals = 0;
  for (std::size_t i = 0; i < patterns.size(); ++i) {
    rewritten.push_back(exclude_newline(patterns[i]));
    flags.push_back(HS_FLAG_MULTILINE | (caseless ? HS_FLAG_CASELESS : 0u));
    ids.push_back(static_cast<unsigned>(i));
    hs_expr_info_t* info = nullptr;
    hs_compile_error_t* error = nullptr;
    if (hs_expression_info(rewritten[i].c_str(), flags[i] | HS_FLAG_ALLOWEMPTY, &info, &error) != HS_SUCCESS) {
      if (++refusals <= 20)
        refused += "\n  pattern " + std::to_string(i + 1) + " '" + patterns[i] + "': " + error->message;
      hs_free_compile_error(error);
      continue;
    }
    if (info->min_width == 0) flags[i] |= HS_FLAG_ALLOWEMPTY;
    std::free(info);
  }
  if (refusals > 0)
    throw std::runtime_error("Hyperscan refuses " + std::to_string(refusals) + " of " +
                             std::to_string(patterns.size()) + " patterns (line: message):" + refused +
                             (refusals > 20 ? "\n  ..." : ""));
  std::vector<const char*> expressions;
  for (const auto& r : rewritten) expressions.push_back(r.c_str());
  hs_database_t* db = nullptr;
  hs_compile_error_t* error = nullptr;
  if (hs_compile_multi(expressions.data(), flags.data(), ids.data(), static_cast<unsigned>(patterns.size()),
                       HS_MODE_BLOCK, nullptr, &db, &error) != HS_SUCCESS)
    compile_failed("hs_compile_multi", error, true);
  return db;
}

// One part: its matching lines, and the matches reported (regex mode).
bool scan_part(const hs_database_t* db, hs_scratch_t* scratch, const char* data, std::size_t size, bool regex,
               std::uint64_t& lines, std::uint64_t& matches) {
  if (size > UINT_MAX) return false;
  const auto length = static_cast<unsigned>(size);
  if (!regex) {
    PartScan s{data, size};
    if (hs_scan(db, data, length, 0, scratch, on_match, &s) != HS_SUCCESS) return false;
    lines = s.lines;
    return true;
  }
  RegexPartScan s{data, size};
  if (hs_scan(db, data, length, 0, scratch, on_regex_match, &s) != HS_SUCCESS) return false;
  std::sort(s.ends.begin(), s.ends.end());
  lines = static_cast<std::uint64_t>(std::unique(s.ends.begin(), s.ends.end()) - s.ends.begin());
  matches = s.matches;
  return true;
}

struct Count {
  std::uint64_t lines = 0, matches = 0;
};

// The parts scanned on `threads` threads, each with its own scratch.
Count scan_all(const hs_database_t* db, hs_scratch_t* prototype, const Mapping& input, unsigned threads, bool regex) {
  const std::vector<std::size_t> bounds = cut(input, std::size_t{threads} * 4);
  std::atomic<std::size_t> next{0};
  std::atomic<std::uint64_t> lines{0}, matches{0};
  std::atomic<bool> failed{false};
  auto work = [&] {
    hs_scratch_t* scratch = nullptr;
    if (hs_clone_scratch(prototype, &scratch) != HS_SUCCESS) { failed = true; return; }
    for (std::size_t p; (p = next++) + 1 < bounds.size();) {
      std::uint64_t l = 0, m = 0;
      if (!scan_part(db, scratch, input.data + bounds[p], bounds[p + 1] - bounds[p], regex, l, m)) {
        failed = true;
        break;
      }
      lines += l;
      matches += m;
    }
    hs_free_scratch(scratch);
  };
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < std::min<std::size_t>(threads, bounds.size() - 1); ++t) pool.emplace_back(work);
  for (auto& t : pool) t.join();
  if (failed) throw std::runtime_error("hs_scan failed (a line of 4 GiB or more?)");
  return {lines, matches};
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse_options(argc, argv);
    const std::vector<std::string> patterns = read_patterns(o.patterns);
    const Mapping input(o.input);
    double compile_ms = 0;
    const auto scan_start = std::chrono::steady_clock::now();
    Count total;
    const bool match_all = std::any_of(patterns.begin(), patterns.end(), [](const auto& p) { return p.empty(); });
    if (match_all) {
      total.lines = count_all_lines(input);  // the empty pattern selects every line
    } else if (!patterns.empty() && input.size > 0) {
      const auto compile_start = std::chrono::steady_clock::now();
      hs_database_t* db = o.regex ? compile_regexes(patterns, o.caseless) : compile_literals(patterns, o.caseless);
      hs_scratch_t* prototype = nullptr;
      if (hs_alloc_scratch(db, &prototype) != HS_SUCCESS) throw std::runtime_error("hs_alloc_scratch failed");
      compile_ms = ms_since(compile_start);
      try {
        total = scan_all(db, prototype, input, o.threads, o.regex);
      } catch (...) {
        hs_free_scratch(prototype);
        hs_free_database(db);
        throw;
      }
      hs_free_scratch(prototype);
      hs_free_database(db);
    }
    std::printf("%llu\n", static_cast<unsigned long long>(total.lines));
    if (o.report)
      std::fprintf(stderr,
                   "gpufilter-hs-count: {\"compile_ms\":%.3f,\"scan_ms\":%.3f,\"threads\":%u,\"patterns\":%zu,"
                   "\"mode\":\"%s\",\"matches\":%llu,\"hyperscan\":\"%s\"}\n",
                   compile_ms, ms_since(scan_start) - compile_ms, o.threads, patterns.size(),
                   o.regex ? "regex" : "literal", static_cast<unsigned long long>(total.matches), hs_version());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpufilter-hs-count: %s\n", e.what());
    return 2;
  }
}
