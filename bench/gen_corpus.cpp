// gpufilter-gen-corpus: writes the benchmark's input. DIR/corpus.log is whole lines drawn
// at random from the Loghub logs with every digit re-drawn (so lines differ); the pattern
// files DIR/patterns-N.txt (N = 1 .. 1,000,000) hold a few rare real tokens and random
// absent strings, patterns-dense.txt common tokens that most lines contain, and
// patterns-icase.txt set 100 with its letters randomly re-cased. Deterministic for a seed,
// whatever the thread count; prints a one-line JSON summary.
//
//   gpufilter-gen-corpus --loghub DIR --size BYTES[K|M|G] --out DIR [--seed N] [--threads N]
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace fs = std::filesystem;

namespace {

constexpr std::size_t kBlock = 8u << 20;               // corpus bytes per generation task
constexpr std::size_t kRareTokens = 7;                 // 1 + log10(1,000,000)
constexpr double kRareMin = 1e-4, kRareMax = 1e-3;     // line fraction of a rare token
constexpr double kDenseTarget = 0.9;                   // line fraction the dense set aims at
constexpr std::size_t kDenseMaxTokens = 16;
constexpr std::size_t kLargestSet = 1'000'000;
constexpr std::size_t kIcaseSet = 100;

__extension__ typedef unsigned __int128 u128;

// splitmix64: small, fast and good enough to draw lines, digits and strings.
struct Rng {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  std::uint64_t below(std::uint64_t n) {  // uniform in [0, n); the bias is below 2^-40
    return static_cast<std::uint64_t>((static_cast<u128>(next()) * n) >> 64);
  }
};

Rng stream(std::uint64_t seed, std::uint64_t purpose) {
  Rng r{seed ^ (purpose * 0xd1342543de82ef95ULL)};
  r.next();
  return r;
}

// Streams of the seed, so that adding one never shifts another.
enum Purpose : std::uint64_t { kTokens = 1, kFillers, kIcase, kCorpusBlocks = 1000 };

struct Options {
  fs::path loghub, out;
  std::uint64_t size = 0, seed = 1;
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
};

std::uint64_t parse_size(const std::string& s) {
  std::size_t used = 0;
  const unsigned long long n = std::stoull(s, &used);
  const std::string suffix = s.substr(used);
  int shift = 0;
  if (suffix == "K" || suffix == "k") shift = 10;
  else if (suffix == "M" || suffix == "m") shift = 20;
  else if (suffix == "G" || suffix == "g") shift = 30;
  else if (!suffix.empty()) throw std::invalid_argument("bad size '" + s + "' (a number with K, M or G)");
  if (n > (~0ULL >> shift)) throw std::invalid_argument("size too large: " + s);
  return n << shift;
}

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) throw std::invalid_argument("missing value for " + a);
    const std::string v = argv[++i];
    if (a == "--loghub") o.loghub = v;
    else if (a == "--out") o.out = v;
    else if (a == "--size") o.size = parse_size(v);
    else if (a == "--seed") o.seed = std::stoull(v);
    else if (a == "--threads") o.threads = std::max(1, std::stoi(v));
    else throw std::invalid_argument("unknown option " + a);
  }
  if (o.loghub.empty() || o.out.empty() || o.size == 0)
    throw std::invalid_argument("usage: gpufilter-gen-corpus --loghub DIR --size BYTES[K|M|G] --out DIR "
                                "[--seed N] [--threads N]");
  if (o.size < 1024) throw std::invalid_argument("--size must be at least 1K");
  return o;
}

// The source lines, each with the offsets of its digits.
struct Source {
  std::string text;  // every line followed by '\n'
  struct Line {
    std::size_t begin, length, digits_begin, digits_end;
    std::uint32_t file;
  };
  std::vector<Line> lines;
  std::vector<std::uint32_t> digits;
  std::size_t files = 0;

  std::string_view line(std::size_t i) const { return {text.data() + lines[i].begin, lines[i].length}; }
};

Source load(const fs::path& dir) {
  std::vector<fs::path> paths;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".log") paths.push_back(e.path());
  std::sort(paths.begin(), paths.end());
  if (paths.empty()) throw std::runtime_error("no *.log files in " + dir.string());
  Source s;
  for (const fs::path& p : paths) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream buffer;
    buffer << in.rdbuf();
    const std::string data = buffer.str();
    std::size_t pos = 0;
    while (pos < data.size()) {
      std::size_t end = data.find('\n', pos);
      if (end == std::string::npos) end = data.size();
      std::string line = data.substr(pos, end - pos);
      pos = end + 1;
      std::erase(line, '\r');
      if (line.empty() || line.find('\0') != std::string::npos) continue;  // NUL: binary to grep
      Source::Line l{s.text.size(), line.size(), s.digits.size(), 0, static_cast<std::uint32_t>(s.files)};
      for (std::size_t i = 0; i < line.size(); ++i)
        if (line[i] >= '0' && line[i] <= '9') s.digits.push_back(static_cast<std::uint32_t>(i));
      l.digits_end = s.digits.size();
      s.lines.push_back(l);
      s.text += line;
      s.text += '\n';
    }
    ++s.files;
  }
  if (s.lines.empty()) throw std::runtime_error("no lines in " + dir.string());
  return s;
}

// Fills buf[0, n) with whole lines: each a random source line with its digits re-drawn; the
// last line is cut short to end the block exactly. Returns the number of lines.
std::size_t fill_block(const Source& s, Rng& rng, char* buf, std::size_t n) {
  std::size_t lines = 0, r = n;
  char* p = buf;
  std::uint64_t digit_bits = 0;
  int digits_left = 0;
  while (r > 0) {
    const Source::Line& l = s.lines[rng.below(s.lines.size())];
    std::size_t keep = l.length;  // bytes of the line written, before its '\n'
    if (l.length + 1 == r - 1) continue;     // would leave one byte: an empty line
    if (l.length + 1 > r) keep = r - 1;      // the block's last line, cut short
    std::memcpy(p, s.text.data() + l.begin, keep);
    // Up to 16 digits from one draw: the high word of x * 10 is a digit, the low word the next x.
    for (std::size_t d = l.digits_begin; d < l.digits_end && s.digits[d] < keep; ++d) {
      if (digits_left == 0) digit_bits = rng.next(), digits_left = 16;
      const auto wide = static_cast<u128>(digit_bits) * 10;
      p[s.digits[d]] = static_cast<char>('0' + static_cast<int>(wide >> 64));
      digit_bits = static_cast<std::uint64_t>(wide);
      --digits_left;
    }
    p[keep] = '\n';
    p += keep + 1;
    r -= keep + 1;
    ++lines;
  }
  return lines;
}

std::size_t write_corpus(const Source& s, const Options& o, const fs::path& path) {
  const fs::path tmp = path.string() + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw std::runtime_error("cannot create " + tmp.string() + ": " + std::strerror(errno));
  const std::size_t blocks = std::max<std::size_t>(1, o.size / kBlock);  // the last takes the rest
  std::atomic<std::size_t> next{0}, lines{0};
  std::atomic<bool> failed{false};
  auto work = [&] {
    std::vector<char> buf(kBlock * 2);
    for (std::size_t b; !failed && (b = next++) < blocks;) {
      const std::size_t begin = b * kBlock;
      const std::size_t n = b + 1 == blocks ? o.size - begin : kBlock;
      Rng rng = stream(o.seed, kCorpusBlocks + b);
      lines += fill_block(s, rng, buf.data(), n);
      for (std::size_t done = 0; done < n;) {
        const ssize_t w = ::pwrite(fd, buf.data() + done, n - done, static_cast<off_t>(begin + done));
        if (w <= 0) { failed = true; break; }
        done += static_cast<std::size_t>(w);
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < std::min<std::size_t>(o.threads, blocks); ++t) pool.emplace_back(work);
  for (auto& t : pool) t.join();
  if (failed || ::close(fd) != 0) throw std::runtime_error("cannot write " + tmp.string());
  fs::rename(tmp, path);
  return lines;
}

bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// Words: maximal runs of letters. For each word of at least 3 letters, the source lines
// that hold it as a word (sorted, each once) and the file of its first line.
struct Word {
  std::vector<std::uint32_t> lines;
  std::uint32_t file;
};

std::vector<std::pair<std::string_view, Word>> words_of(const Source& s) {
  std::unordered_map<std::string_view, Word> words;
  for (std::size_t i = 0; i < s.lines.size(); ++i) {
    const std::string_view line = s.line(i);
    for (std::size_t p = 0; p < line.size();) {
      if (!is_letter(line[p])) { ++p; continue; }
      std::size_t e = p;
      while (e < line.size() && is_letter(line[e])) ++e;
      if (e - p >= 3) {
        Word& w = words.try_emplace(line.substr(p, e - p), Word{{}, s.lines[i].file}).first->second;
        if (w.lines.empty() || w.lines.back() != i) w.lines.push_back(static_cast<std::uint32_t>(i));
      }
      p = e;
    }
  }
  std::vector<std::pair<std::string_view, Word>> sorted(words.begin(), words.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return sorted;
}

// Source lines that contain `needle` anywhere (grep -F's sense), as a bitmap.
std::vector<bool> lines_containing(const Source& s, std::string_view needle) {
  std::vector<bool> hit(s.lines.size());
  std::size_t line = 0;
  for (std::size_t pos = s.text.find(needle); pos != std::string::npos;) {
    while (s.lines[line].begin + s.lines[line].length < pos) ++line;
    hit[line] = true;
    pos = s.text.find(needle, s.lines[line].begin + s.lines[line].length + 1);
  }
  return hit;
}

double fraction(const std::vector<bool>& hit) {
  return static_cast<double>(std::count(hit.begin(), hit.end(), true)) / static_cast<double>(hit.size());
}

struct Token {
  std::string text;
  double source_fraction;
};

// Rare tokens: words of at least 5 letters found in kRareMin..kRareMax of the source lines,
// in a seeded random order, from different files while that is possible.
std::vector<Token> rare_tokens(const Source& s, const std::vector<std::pair<std::string_view, Word>>& words,
                               std::uint64_t seed) {
  std::vector<const std::pair<std::string_view, Word>*> candidates;
  const double n = static_cast<double>(s.lines.size());
  for (const auto& w : words) {
    const auto count = static_cast<double>(w.second.lines.size());
    if (w.first.size() >= 5 && count >= kRareMin * n && count <= kRareMax * n) candidates.push_back(&w);
  }
  Rng rng = stream(seed, kTokens);
  for (std::size_t i = candidates.size(); i > 1; --i) std::swap(candidates[i - 1], candidates[rng.below(i)]);
  std::vector<Token> picked;
  std::vector<bool> file_used(s.files);
  for (bool distinct_files : {true, false}) {
    for (const auto* c : candidates) {
      if (picked.size() == kRareTokens) break;
      if (distinct_files && file_used[c->second.file]) continue;
      const std::string text(c->first);
      if (std::any_of(picked.begin(), picked.end(), [&](const Token& t) { return t.text == text; })) continue;
      const double f = fraction(lines_containing(s, text));
      if (f < kRareMin || f > kRareMax) continue;  // as a substring it may be more common
      picked.push_back({text, f});
      file_used[c->second.file] = true;
    }
  }
  if (picked.size() < kRareTokens) throw std::runtime_error("too few rare tokens in the Loghub lines");
  return picked;
}

// Dense tokens: greedy cover of the source lines by common words, up to kDenseTarget.
std::vector<std::string> dense_tokens(const Source& s, const std::vector<std::pair<std::string_view, Word>>& words) {
  std::vector<bool> covered(s.lines.size());
  std::size_t covered_count = 0;
  std::vector<std::string> picked;
  while (picked.size() < kDenseMaxTokens &&
         static_cast<double>(covered_count) < kDenseTarget * static_cast<double>(s.lines.size())) {
    const Word* best = nullptr;
    std::string_view best_text;
    std::size_t best_gain = 0;
    for (const auto& [text, w] : words) {
      if (w.lines.size() <= best_gain) continue;
      std::size_t gain = 0;
      for (std::uint32_t l : w.lines) gain += !covered[l];
      if (gain > best_gain) best = &w, best_text = text, best_gain = gain;
    }
    if (best == nullptr) break;
    for (std::uint32_t l : best->lines) covered_count += !covered[l], covered[l] = true;
    picked.emplace_back(best_text);
  }
  return picked;
}

// Distinct random strings of 8..24 characters over [a-z0-9_.-] with at least three letters
// from g-z: neither digits nor hex nor dotted numbers, so absent from the corpus.
std::vector<std::string> fillers(std::size_t count, std::uint64_t seed) {
  static constexpr std::string_view kAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789_.-";
  Rng rng = stream(seed, kFillers);
  std::vector<std::string> out;
  std::unordered_set<std::string> seen;
  out.reserve(count);
  seen.reserve(count);
  while (out.size() < count) {
    std::string f(8 + rng.below(17), ' ');
    int rare_letters = 0;
    for (char& c : f) {
      c = kAlphabet[rng.below(kAlphabet.size())];
      rare_letters += c >= 'g' && c <= 'z';
    }
    if (rare_letters >= 3 && seen.insert(f).second) out.push_back(std::move(f));
  }
  return out;
}

void write_patterns(const fs::path& path, const std::vector<std::string>& patterns) {
  std::string data;
  for (const std::string& p : patterns) data += p + '\n';
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
  if (!out.flush()) throw std::runtime_error("cannot write " + path.string());
}

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += c;
    else if (static_cast<unsigned char>(c) < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", c);
      out += esc;
    } else out += c;
  }
  return out + "\"";
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const auto start = std::chrono::steady_clock::now();
    const Options o = parse_options(argc, argv);
    fs::create_directories(o.out);
    const Source source = load(o.loghub);
    const auto words = words_of(source);
    const std::vector<Token> rare = rare_tokens(source, words, o.seed);
    const std::vector<std::string> dense = dense_tokens(source, words);
    const std::vector<std::string> filler = fillers(kLargestSet, o.seed);

    std::vector<std::string> set_names;
    for (std::size_t n = 1; n <= kLargestSet; n *= 10) {
      std::size_t tokens = 1;
      for (std::size_t k = n; k >= 10; k /= 10) ++tokens;  // 1 + floor(log10 n)
      tokens = std::min(tokens, n);
      std::vector<std::string> set;
      for (std::size_t i = 0; i < tokens; ++i) set.push_back(rare[i].text);
      set.insert(set.end(), filler.begin(), filler.begin() + static_cast<std::ptrdiff_t>(n - tokens));
      write_patterns(o.out / ("patterns-" + std::to_string(n) + ".txt"), set);
      set_names.push_back(std::to_string(n));
      if (n == kIcaseSet) {
        Rng rng = stream(o.seed, kIcase);
        for (std::string& p : set)
          for (char& c : p)
            if (is_letter(c) && rng.below(2)) c = static_cast<char>(c ^ 0x20);
        write_patterns(o.out / "patterns-icase.txt", set);
      }
    }
    write_patterns(o.out / "patterns-dense.txt", dense);
    std::vector<bool> dense_hit(source.lines.size());
    for (const std::string& t : dense) {
      const std::vector<bool> hit = lines_containing(source, t);
      for (std::size_t i = 0; i < hit.size(); ++i) dense_hit[i] = dense_hit[i] || hit[i];
    }

    const fs::path corpus = o.out / "corpus.log";
    const std::size_t lines = write_corpus(source, o, corpus);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

    std::string json = "{\"corpus\":" + json_string(corpus.string());
    json += ",\"bytes\":" + std::to_string(o.size);
    json += ",\"lines\":" + std::to_string(lines);
    json += ",\"seed\":" + std::to_string(o.seed);
    json += ",\"source_files\":" + std::to_string(source.files);
    json += ",\"source_lines\":" + std::to_string(source.lines.size());
    json += ",\"rare_tokens\":[";
    for (std::size_t i = 0; i < rare.size(); ++i) {
      json += i ? ",{\"token\":" : "{\"token\":";
      json += json_string(rare[i].text);
      json += ",\"source_line_fraction\":" + std::to_string(rare[i].source_fraction) + "}";
    }
    json += "],\"dense_tokens\":[";
    for (std::size_t i = 0; i < dense.size(); ++i) {
      json += i ? "," : "";
      json += json_string(dense[i]);
    }
    json += "],\"dense_source_line_fraction\":" + std::to_string(fraction(dense_hit));
    json += ",\"sets\":[";
    for (const std::string& n : set_names) json += "\"" + n + "\",";
    json += "\"dense\",\"icase\"],\"threads\":" + std::to_string(o.threads);
    json += ",\"seconds\":" + std::to_string(seconds) + "}";
    std::puts(json.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpufilter-gen-corpus: %s\n", e.what());
    return 2;
  }
}
