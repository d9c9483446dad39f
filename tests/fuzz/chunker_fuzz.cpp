// chunker_fuzz: the differential fuzzer of the line path. The real pipeline (Chunker ->
// HostScanner (Hyperscan) -> Searcher -> a recording Sink), with chunks as small as the
// pipeline accepts and reads of input-derived sizes, against a line filter written here
// as plainly as possible: split at '\n', look for each pattern with std::string_view::find
// in an ASCII-folded copy, apply grep's -w/-x/-v/-m and context rules line by line. Any
// difference in the selected and context lines (bytes, offsets, numbers, -o spans, pattern
// ids), the counts, or the per-pattern occurrence counts prints both sides and traps.
//
// Input layout (every byte means something, so mutations stay meaningful):
//   [0] flags: 1 -i, 2 -w, 4 -x, 8 -v, 16 -n, 32 spans (-o/--color), 64 -m, 128 a stream
//   [1] flags: 1 --pattern-counts (scan to the end), 2 binary detection (text without
//       NUL only), 4|8 slots - 1, 16|32 context: -A, -B or -C, 64 pattern ids (--json),
//       128 two scan threads
//   [2] chunk size - 1 (255: 64 KiB); the scanner raises it to twice the longest pattern
//   [3] seed and limit of the read sizes
//   [4] bits 0-2 the number of patterns, 3-4 the context length, 5-7 the -m count
//   then that many patterns, each ended by '\n' (any other byte, NUL and CR included, is
//   a pattern byte; an empty line is the empty pattern), then the text.
// With NUL bytes in the text the run is grep -a (binary detection off): the text is
// plain lines then, and GNU's binary-file rules are the pipeline tests' business.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpufilter/core/chunk.hpp"
#include "gpufilter/hyperscan/host_scanner.hpp"
#include "gpufilter/patterns/pattern_set.hpp"
#include "gpufilter/patterns/pattern_table.hpp"
#include "gpufilter/scan/file_scan.hpp"
#include "gpufilter/grep/searcher.hpp"
#include "gpufilter/core/sink.hpp"
#include "gpufilter/core/source.hpp"

#include "fuzz_support.hpp"

namespace {

using gpufilter::Flow;
using gpufilter::LineMatch;
using gpufilter::MatchSpan;

// A source over the text whose reads end at input-derived places.
class FuzzSource final : public gpufilter::Source {
 public:
  FuzzSource(std::string_view data, std::uint8_t seed, bool regular)
      : data_(data), state_(0x9E3779B9u ^ (seed * 0x01000193u)), regular_(regular) {
    static constexpr std::size_t kLimits[] = {1, 2, 3, 7, 16, 100, 4096, 1 << 20};
    limit_ = kLimits[seed & 7];
  }
  std::size_t read(std::span<char> dst) override {
    state_ ^= state_ << 13;
    state_ ^= state_ >> 17;
    state_ ^= state_ << 5;
    const std::size_t want = 1 + state_ % limit_;
    const std::size_t n = std::min({dst.size(), want, data_.size() - pos_});
    std::copy_n(data_.data() + pos_, n, dst.data());
    pos_ += n;
    return n;
  }
  bool is_regular_file() const override { return regular_; }
  const std::string& name() const override { return name_; }

 private:
  std::string_view data_;
  std::size_t pos_ = 0;
  std::uint32_t state_;
  std::size_t limit_;
  bool regular_;
  std::string name_ = "(fuzz)";
};

// One line of output, as text: "match|context OFFSET NUMBER [BYTES] spans ids".
std::string describe(const char* kind, std::string_view line, std::uint64_t offset, std::uint64_t number,
                     std::span<const MatchSpan> spans, std::span<const std::uint32_t> ids) {
  std::string s = std::string(kind) + " " + std::to_string(offset) + " " + std::to_string(number) + " [" +
                  gpufilter::fuzz::printable(line) + "]";
  for (const MatchSpan& m : spans) s += " (" + std::to_string(m.begin) + "," + std::to_string(m.end) + ")";
  if (!ids.empty()) {
    s += " ids";
    for (const std::uint32_t id : ids) s += " " + std::to_string(id);
  }
  return s;
}

class RecordingSink final : public gpufilter::Sink {
 public:
  Flow matched(const LineMatch& m) override {
    events.push_back(describe("match", m.line, m.offset, m.number, m.spans, m.patterns));
    return Flow::kContinue;
  }
  void context(const LineMatch& m) override {
    events.push_back(describe("context", m.line, m.offset, m.number, m.spans, m.patterns));
  }
  void context_break() override { events.push_back("break"); }
  void finish(const gpufilter::InputSummary& summary) override { finished = summary.selected_lines; }
  std::vector<std::string> events;
  std::optional<std::uint64_t> finished;
};

bool is_word(char c) {
  const auto u = static_cast<unsigned char>(c);
  return (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || (u >= '0' && u <= '9') || u == '_';
}

std::string lower(std::string_view s, bool fold) {
  std::string out(s);
  if (fold)
    for (char& c : out)
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

struct Settings {
  bool ignore_case, word, whole_line, invert, numbers, spans, pattern_ids;
  std::uint64_t max_count;
  std::size_t before, after;
  bool separators;
};

// The plain model: what grep -F prints for `text` (one input, no binary data).
class Reference {
 public:
  Reference(const gpufilter::PatternSet& patterns, const gpufilter::PatternTable& table, Settings s)
      : table_(table), s_(s) {
    for (const std::string& p : patterns.patterns()) {
      if (p.empty()) {
        empty_ = true;
        continue;
      }
      const std::string f = lower(p, s.ignore_case);
      if (std::find(patterns_.begin(), patterns_.end(), f) == patterns_.end()) patterns_.push_back(f);
    }
  }

  struct Result {
    std::vector<std::string> events;
    std::uint64_t selected = 0;
    bool stopped_early = false;
  };

  Result run(std::string_view text) const {
    struct Line {
      std::string_view text;
      std::uint64_t offset;
    };
    std::vector<Line> lines;
    for (std::size_t at = 0; at < text.size();) {
      std::size_t nl = text.find('\n', at);
      if (nl == std::string_view::npos) nl = text.size();
      lines.push_back({text.substr(at, nl - at), at});
      at = nl + 1;
    }
    Result r;
    std::optional<std::size_t> last_out;
    std::size_t pending_after = 0;
    bool draining = false;
    auto emit = [&](std::size_t i, bool as_selected) {
      const Line& l = lines[i];
      const Match m = match(l.text);
      std::vector<MatchSpan> spans;
      if (s_.spans && m.matched && as_selected != s_.invert) spans = m.spans;
      std::vector<std::uint32_t> ids;
      if (s_.pattern_ids && m.matched) ids = m.ids;
      r.events.push_back(describe(as_selected ? "match" : "context", l.text, l.offset, s_.numbers ? i + 1 : 0, spans, ids));
      last_out = i;
    };
    if (s_.max_count == 0) {
      r.stopped_early = true;
      return r;
    }
    for (std::size_t i = 0; i < lines.size(); ++i) {
      if (draining) {
        emit(i, false);
        if (--pending_after == 0) {
          r.stopped_early = i + 1 < lines.size();
          return r;
        }
        continue;
      }
      const bool selected = match(lines[i].text).matched != s_.invert;
      if (selected) {
        ++r.selected;
        std::size_t first = i >= s_.before ? i - s_.before : 0;
        if (last_out) first = std::max(first, *last_out + 1);
        if (s_.separators && last_out && first != *last_out + 1) r.events.push_back("break");
        for (std::size_t k = first; k < i; ++k) emit(k, false);
        emit(i, true);
        pending_after = s_.after;
        if (r.selected >= s_.max_count) {
          if (pending_after > 0) {
            draining = true;
          } else {
            r.stopped_early = i + 1 < lines.size();
            return r;
          }
        }
      } else if (pending_after > 0) {
        --pending_after;
        emit(i, false);
      }
    }
    return r;
  }

  // Occurrences of every unique pattern in the whole text, overlapping ones included, by
  // the table's unique id (what --pattern-counts counts).
  std::vector<std::uint64_t> pattern_counts(std::string_view text) const {
    std::vector<std::uint64_t> counts(table_.unique_count(), 0);
    const std::string folded = lower(text, s_.ignore_case);
    for (std::uint32_t id = 0; id < table_.unique_count(); ++id) {
      const std::string_view p = table_.unique_pattern(id);
      for (std::size_t at = folded.find(p); at != std::string::npos; at = folded.find(p, at + 1)) ++counts[id];
    }
    return counts;
  }

 private:
  struct Match {
    bool matched = false;
    std::vector<MatchSpan> spans;     // leftmost-longest, non-overlapping (not for -w without -x)
    std::vector<std::uint32_t> ids;  // unique ids with a valid occurrence, ascending
  };

  bool valid(std::string_view line, std::size_t at, std::size_t length) const {
    if (s_.whole_line) return at == 0 && length == line.size();
    if (!s_.word) return true;
    if (at > 0 && is_word(line[at - 1])) return false;
    if (at + length < line.size() && is_word(line[at + length])) return false;
    return true;
  }

  std::uint32_t id_of(std::string_view folded_pattern) const {
    for (std::uint32_t id = 0; id < table_.unique_count(); ++id)
      if (table_.unique_pattern(id) == folded_pattern) return id;
    std::fprintf(stderr, "chunker_fuzz: the table lacks a pattern\n");
    __builtin_trap();
  }

  Match match(std::string_view line) const {
    Match m;
    const std::string folded = lower(line, s_.ignore_case);
    if (empty_) {
      if (s_.whole_line) {
        m.matched = m.matched || line.empty();
      } else if (!s_.word) {
        m.matched = true;
      } else {
        for (std::size_t p = 0; p <= line.size() && !m.matched; ++p)
          m.matched = (p == 0 || !is_word(line[p - 1])) && (p == line.size() || !is_word(line[p]));
      }
    }
    std::vector<std::size_t> longest(line.size() + 1, 0);  // the longest valid match at each position
    for (const std::string& p : patterns_) {
      bool found = false;
      for (std::size_t at = folded.find(p); at != std::string::npos; at = folded.find(p, at + 1)) {
        if (!valid(line, at, p.size())) continue;
        found = true;
        longest[at] = std::max(longest[at], p.size());
      }
      if (found) {
        m.matched = true;
        m.ids.push_back(id_of(p));
      }
    }
    std::sort(m.ids.begin(), m.ids.end());
    for (std::size_t at = 0; at < line.size();) {
      if (longest[at] == 0) {
        ++at;
        continue;
      }
      m.spans.push_back({at, at + longest[at]});
      at += longest[at];
    }
    return m;
  }

  const gpufilter::PatternTable& table_;
  Settings s_;
  std::vector<std::string> patterns_;  // folded, distinct, non-empty
  bool empty_ = false;
};

void report(const std::string& what, const std::vector<std::string>& expected, const std::vector<std::string>& got) {
  std::fprintf(stderr, "chunker_fuzz: %s\n--- reference (%zu)\n", what.c_str(), expected.size());
  for (const std::string& e : expected) std::fprintf(stderr, "%s\n", e.c_str());
  std::fprintf(stderr, "--- pipeline (%zu)\n", got.size());
  for (const std::string& e : got) std::fprintf(stderr, "%s\n", e.c_str());
  __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 5) return 0;
  const unsigned f0 = data[0], f1 = data[1], f4 = data[4];
  const std::string_view rest(reinterpret_cast<const char*>(data) + 5, size - 5);

  gpufilter::PatternSet patterns;
  std::size_t at = 0;
  for (unsigned i = 0; i < (f4 & 7); ++i) {
    const std::size_t nl = rest.find('\n', at);
    if (nl == std::string_view::npos) break;
    patterns.add(rest.substr(at, nl - at));
    at = nl + 1;
  }
  const std::string_view text = rest.substr(at);
  const bool has_nul = text.find('\0') != std::string_view::npos;

  static constexpr std::size_t kContext[] = {0, 1, 2, 5};
  const std::size_t context = kContext[(f4 >> 3) & 3];
  const unsigned context_kind = (f1 >> 4) & 3;  // none, -A, -B, -C
  Settings s{};
  s.ignore_case = (f0 & 1) != 0;
  s.word = (f0 & 2) != 0;
  s.whole_line = (f0 & 4) != 0;
  s.invert = (f0 & 8) != 0;
  s.numbers = (f0 & 16) != 0;
  // grep -w -o walks a line in its own peculiar way (Searcher::word_spans): not modelled.
  s.spans = (f0 & 32) != 0 && (!s.word || s.whole_line);
  s.pattern_ids = (f1 & 64) != 0;
  s.max_count = (f0 & 64) != 0 ? f4 >> 5 : UINT64_MAX;
  s.after = context_kind == 1 || context_kind == 3 ? context : 0;
  s.before = context_kind == 2 || context_kind == 3 ? context : 0;
  s.separators = context_kind != 0;
  const bool stream = (f0 & 128) != 0;
  const bool count_patterns = (f1 & 1) != 0;
  const bool detect_binary = (f1 & 2) != 0 && !has_nul;
  const std::size_t slots = 1 + ((f1 >> 2) & 3);
  const std::size_t chunk = data[2] == 255 ? std::size_t{1} << 16 : std::size_t{data[2]} + 1u;

  const gpufilter::PatternTable table(patterns, gpufilter::MatchOptions{.ignore_case = s.ignore_case});
  gpufilter::HostScanner scanner(table,
                                 gpufilter::ScanConfig{.chunk_bytes = chunk, .slots = slots,
                                                       .count_patterns = count_patterns},
                                 (f1 & 128) != 0 ? 2 : 1);
  gpufilter::SearchOptions options;
  options.invert = s.invert;
  options.word = s.word;
  options.whole_line = s.whole_line;
  options.max_count = s.max_count;
  options.before = s.before;
  options.after = s.after;
  options.group_separators = s.separators;
  options.line_numbers = s.numbers;
  options.spans = s.spans;
  options.pattern_ids = s.pattern_ids;
  options.binary_files = detect_binary ? gpufilter::BinaryFiles::kBinary : gpufilter::BinaryFiles::kText;
  RecordingSink sink;
  gpufilter::Searcher searcher(table, options, sink);
  gpufilter::FileScan pipeline(scanner, searcher,
                               gpufilter::FileScanConfig{.detect_binary = detect_binary,
                                                         .scan_to_end = count_patterns,
                                                         .count_lines = true});
  FuzzSource source(text, data[3], !stream);
  const gpufilter::InputSummary summary = pipeline.run(source);

  const Reference reference(patterns, table, s);
  const Reference::Result expected = reference.run(text);
  if (expected.events != sink.events) report("the selected lines differ", expected.events, sink.events);
  if (summary.selected_lines != expected.selected || sink.finished != expected.selected)
    report("selected " + std::to_string(summary.selected_lines) + ", expected " + std::to_string(expected.selected),
           expected.events, sink.events);
  if (summary.binary_matched || !summary.read_error.empty()) report("a binary match or read error", {}, {});
  if (!expected.stopped_early || count_patterns) {
    const std::uint64_t lines = static_cast<std::uint64_t>(std::count(text.begin(), text.end(), '\n')) +
                                (!text.empty() && text.back() != '\n' ? 1 : 0);
    if (pipeline.bytes_scanned() != text.size() || pipeline.lines_seen() != lines)
      report("scanned " + std::to_string(pipeline.bytes_scanned()) + " bytes and " +
                 std::to_string(pipeline.lines_seen()) + " lines of " + std::to_string(text.size()) + " and " +
                 std::to_string(lines),
             {}, {});
  }
  if (count_patterns) {
    const std::vector<std::uint64_t> got = scanner.pattern_counts();
    const std::vector<std::uint64_t> want = reference.pattern_counts(text);
    if (got != want) {
      std::vector<std::string> a, b;
      for (std::size_t i = 0; i < want.size(); ++i) a.push_back(std::to_string(i) + ": " + std::to_string(want[i]));
      for (std::size_t i = 0; i < got.size(); ++i) b.push_back(std::to_string(i) + ": " + std::to_string(got[i]));
      report("per-pattern counts differ", a, b);
    }
  }
  return 0;
}
