// The whole FileScan (Chunker -> Scanner on the OpenCL device or the host engine ->
// Searcher -> Sink), two ways:
//  * one expected output for every configuration (ripgrep SearcherTester style): tiny
//    chunks, 1..3 slots and reads of 1..7 bytes must give exactly what one big chunk gives;
//  * that output against a plain CPU model of grep's line rules built on
//    reference_occurrences (for inputs without binary data).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <span>
#include <cstdint>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gpufilter/opencl/device.hpp"
#include "gpufilter/core/errors.hpp"
#include "gpufilter/opencl/scan_program.hpp"
#include "gpufilter/patterns/pattern_set.hpp"
#include "gpufilter/scan/file_scan.hpp"
#include "reference_matcher.hpp"
#include "gpufilter/opencl/device_scanner.hpp"
#include "gpufilter/hyperscan/host_scanner.hpp"
#include "gpufilter/grep/searcher.hpp"
#include "testutil/testutil.hpp"

namespace {

using gpufilter::BinaryFiles;
using gpufilter::DeviceContext;
using gpufilter::ScanProgram;
using gpufilter::MatchOptions;
using gpufilter::MatchSpan;
using gpufilter::Occurrence;
using gpufilter::PatternSet;
using gpufilter::PatternTable;
using gpufilter::FileScan;
using gpufilter::FileScanConfig;
using gpufilter::ScanConfig;
using gpufilter::DeviceScanner;
using gpufilter::HostScanner;
using gpufilter::Scanner;
using gpufilter::Searcher;
using gpufilter::SearchOptions;
using gpufilter::test::corpus_path;
using gpufilter::test::RecordingSink;
using gpufilter::test::StringSource;
using namespace std::string_literals;
using Events = std::vector<std::string>;


// --- Running the pipeline -------------------------------------------------------------

struct RunConfig {
  std::size_t chunk = 1 << 20;
  std::size_t slots = 2;
  std::vector<std::size_t> reads;  // cycled read sizes; empty: unlimited
  bool regular = true;
  bool host = false;  // HostScanner (Hyperscan) instead of DeviceScanner
  std::string describe() const {
    std::string s = "chunk=" + std::to_string(chunk) + " slots=" + std::to_string(slots) + " reads=";
    if (reads.empty()) s += "all";
    for (std::size_t r : reads) s += std::to_string(r) + ",";
    return s + (regular ? " regular" : " stream") + (host ? " host" : " device");
  }
};

struct RunResult {
  Events events;
  gpufilter::InputSummary summary;
  std::uint64_t bytes_scanned = 0;
  std::uint64_t lines_seen = 0;
};

std::unique_ptr<Scanner> make_scanner(DeviceContext& dev, const ScanProgram& matcher, ScanConfig config, bool host) {
  if (host) return std::make_unique<HostScanner>(matcher.table(), config);
  return std::make_unique<DeviceScanner>(dev, matcher, config);
}

RunResult run_pipeline(DeviceContext& dev, const ScanProgram& matcher, const SearchOptions& options,
                       const std::string& input, const RunConfig& rc, bool detect_binary = true) {
  const auto engine = make_scanner(dev, matcher, ScanConfig{.chunk_bytes = rc.chunk, .slots = rc.slots}, rc.host);
  Scanner& scanner = *engine;
  RecordingSink sink;
  Searcher searcher(matcher.table(), options, sink);
  FileScan pipeline(scanner, searcher, FileScanConfig{.detect_binary = detect_binary, .count_lines = true});
  StringSource source(input, 0, "(test)", rc.regular);
  if (!rc.reads.empty()) source.set_read_sizes(rc.reads);
  RunResult r;
  r.summary = pipeline.run(source);
  r.events = sink.events();
  r.bytes_scanned = pipeline.bytes_scanned();
  r.lines_seen = pipeline.lines_seen();
  return r;
}

// "" when equal, otherwise the first differing event.
std::string diff(const Events& expected, const Events& actual) {
  if (expected == actual) return {};
  std::size_t i = 0;
  while (i < expected.size() && i < actual.size() && expected[i] == actual[i]) ++i;
  auto show = [](const Events& v, std::size_t k) { return k < v.size() ? "'" + v[k] + "'" : std::string("(end)"); };
  return std::to_string(expected.size()) + " events expected, " + std::to_string(actual.size()) +
         " got; first difference at event " + std::to_string(i) + ": expected " + show(expected, i) + ", got " +
         show(actual, i);
}

// --- A plain model of grep's line rules (no binary data) ------------------------------

std::size_t count_lines(const std::string& input) {
  std::size_t n = static_cast<std::size_t>(std::count(input.begin(), input.end(), '\n'));
  if (!input.empty() && input.back() != '\n') ++n;
  return n;
}

class Model {
 public:
  Model(const PatternSet& patterns, const PatternTable& table, SearchOptions options)
      : patterns_(patterns), table_(table), o_(options) {}

  // GNU grep -w -o/--color walks a line with searches that ignore the byte before their
  // own start (see Searcher::word_spans); this model does not reproduce that walk.
  bool applies() const { return !(o_.word && !o_.whole_line && o_.spans); }

  Events run(const std::string& input, const std::string& name = "(test)") const {
    struct Line {
      std::string_view text;
      std::uint64_t offset;
      bool matched;
      std::vector<Occurrence> occ;
    };
    std::vector<Line> lines;
    for (std::size_t at = 0; at < input.size();) {
      std::size_t nl = input.find('\n', at);
      if (nl == std::string::npos) nl = input.size();
      Line l{std::string_view(input).substr(at, nl - at), at, false, {}};
      l.occ = gpufilter::reference_occurrences(patterns_, table_, l.text);
      l.matched = matches(l.text, l.occ);
      lines.push_back(std::move(l));
      at = nl + 1;
    }
    Events ev{"begin " + name};
    std::uint64_t selected = 0;
    std::optional<std::size_t> last_out;
    std::size_t pending_after = 0;
    bool draining = false;
    auto emit = [&](std::size_t i, bool as_selected) {
      const Line& l = lines[i];
      std::string s = (as_selected ? "match " : "context ") + std::to_string(l.offset) + " " +
                      std::to_string(o_.line_numbers ? i + 1 : 0) + " " + std::string(l.text);
      if (o_.spans && l.matched && as_selected != o_.invert)
        for (const MatchSpan& m : spans(l.text, l.occ))
          s += " [" + std::to_string(m.begin) + "," + std::to_string(m.end) + ")";
      ev.push_back(s);
      last_out = i;
    };
    for (std::size_t i = 0; i < lines.size(); ++i) {
      if (draining) {
        emit(i, false);
        if (--pending_after == 0) break;
        continue;
      }
      const bool sel = lines[i].matched != o_.invert;
      if (sel) {
        ++selected;
        if (!o_.quiet) {
          std::size_t first = i >= o_.before ? i - o_.before : 0;
          if (last_out) first = std::max(first, *last_out + 1);
          if (o_.group_separators && last_out && first != *last_out + 1) ev.push_back("break");
          for (std::size_t k = first; k < i; ++k) emit(k, false);
          emit(i, true);
          pending_after = o_.after;
        }
        if (o_.stop_on_first) break;
        if (selected >= o_.max_count) {
          if (!o_.quiet && pending_after > 0) draining = true;
          else break;
        }
      } else if (!o_.quiet && pending_after > 0) {
        --pending_after;
        emit(i, false);
      }
    }
    ev.push_back("finish " + std::to_string(selected));
    return ev;
  }

 private:
  static bool is_word(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  }
  bool valid(std::string_view line, std::size_t pos, std::size_t len) const {
    if (o_.whole_line) return pos == 0 && len == line.size();
    if (!o_.word) return true;
    if (pos > 0 && is_word(static_cast<unsigned char>(line[pos - 1]))) return false;
    if (pos + len < line.size() && is_word(static_cast<unsigned char>(line[pos + len]))) return false;
    return true;
  }
  bool matches(std::string_view line, const std::vector<Occurrence>& occ) const {
    if (table_.has_empty_pattern()) {
      if (o_.whole_line) {
        if (line.empty()) return true;
      } else if (!o_.word) {
        return true;
      } else {
        for (std::size_t p = 0; p <= line.size(); ++p)
          if ((p == 0 || !is_word(static_cast<unsigned char>(line[p - 1]))) &&
              (p == line.size() || !is_word(static_cast<unsigned char>(line[p]))))
            return true;
      }
    }
    for (const Occurrence& x : occ)
      if (valid(line, x.position, table_.unique_length(x.pattern))) return true;
    return false;
  }
  // Leftmost-longest, non-overlapping valid matches.
  std::vector<MatchSpan> spans(std::string_view line, const std::vector<Occurrence>& occ) const {
    std::vector<MatchSpan> out;
    std::size_t cursor = 0;
    for (std::size_t pos = 0; pos < line.size(); ++pos) {
      if (pos < cursor) continue;
      std::size_t best = 0;
      for (const Occurrence& x : occ)
        if (x.position == pos && valid(line, pos, table_.unique_length(x.pattern)))
          best = std::max<std::size_t>(best, table_.unique_length(x.pattern));
      if (best > 0) {
        out.push_back({pos, pos + best});
        cursor = pos + best;
      }
    }
    return out;
  }

  const PatternSet& patterns_;
  const PatternTable& table_;
  SearchOptions o_;
};

// --- Option sets and configurations ---------------------------------------------------

std::vector<std::pair<std::string, SearchOptions>> option_sets() {
  std::vector<std::pair<std::string, SearchOptions>> v;
  v.push_back({"default", SearchOptions{}});
  v.push_back({"invert", SearchOptions{.invert = true}});
  v.push_back({"word", SearchOptions{.word = true}});
  v.push_back({"whole_line", SearchOptions{.whole_line = true}});
  v.push_back({"line_numbers", SearchOptions{.line_numbers = true}});
  v.push_back({"spans", SearchOptions{.line_numbers = true, .spans = true}});
  v.push_back({"word-spans", SearchOptions{.word = true, .spans = true}});
  v.push_back({"invert-spans", SearchOptions{.invert = true, .spans = true}});
  v.push_back({"context", SearchOptions{.before = 2, .after = 1, .group_separators = true, .line_numbers = true}});
  v.push_back({"context-0", SearchOptions{.group_separators = true}});
  v.push_back({"context-invert",
               SearchOptions{.invert = true, .before = 1, .after = 3, .group_separators = true, .spans = true}});
  v.push_back({"max_count", SearchOptions{.max_count = 3, .line_numbers = true}});
  v.push_back({"max_count-context",
               SearchOptions{.max_count = 2, .before = 1, .after = 2, .group_separators = true, .line_numbers = true}});
  v.push_back({"max_count-invert", SearchOptions{.invert = true, .max_count = 4}});
  v.push_back({"count", SearchOptions{.quiet = true, .counting = true}});
  v.push_back({"quiet", SearchOptions{.quiet = true, .stop_on_first = true}});
  return v;
}

// Small configurations; chunk sizes start at the longest pattern (see
// ChunkSmallerThanLongestPattern for smaller ones).
std::vector<RunConfig> tiny_configs(std::size_t longest, std::size_t count) {
  const std::size_t base = std::max<std::size_t>(4, longest);
  const std::size_t chunks[] = {base, base + 1, base + 3, 2 * base + 1, std::max<std::size_t>(base, 64)};
  const std::vector<std::size_t> reads[] = {{1}, {2, 7, 3}, {7}, {}, {1, 2, 3, 4, 5, 6, 7}};
  std::vector<RunConfig> v;
  for (std::size_t i = 0; i < count; ++i)
    v.push_back(RunConfig{chunks[i % 5], 1 + (i / 2) % 3, reads[(i * 3 + 1) % 5], i % 4 != 3, i % 3 == 1});
  return v;
}

// Runs `input` under every option set: the big-chunk run must equal the model (when
// `model` is set) and every tiny configuration must equal the big-chunk run.
void check_input(DeviceContext& dev, const std::string& what, const PatternSet& patterns, MatchOptions match,
                 const std::string& input, std::size_t configs_per_option, bool model = true,
                 bool detect_binary = true) {
  const ScanProgram matcher(dev, patterns, match);
  const auto configs = tiny_configs(matcher.table().max_length(), configs_per_option);
  for (const auto& [name, options] : option_sets()) {
    SCOPED_TRACE(what + " options=" + name);
    const RunResult big = run_pipeline(dev, matcher, options, input, RunConfig{}, detect_binary);
    if (model && Model(patterns, matcher.table(), options).applies()) {
      const Events expected = Model(patterns, matcher.table(), options).run(input);
      ASSERT_EQ(diff(expected, big.events), "") << "big chunk vs the CPU model";
    }
    for (const RunConfig& rc : configs) {
      if (!rc.regular && !detect_binary) continue;
      if (!rc.regular && input.find('\0') != std::string::npos) continue;  // binary offsets differ without read-ahead
      const RunResult r = run_pipeline(dev, matcher, options, input, rc, detect_binary);
      ASSERT_EQ(diff(big.events, r.events), "") << rc.describe();
      EXPECT_EQ(r.summary.selected_lines, big.summary.selected_lines) << rc.describe();
      EXPECT_EQ(r.summary.binary_matched, big.summary.binary_matched) << rc.describe();
      const bool early_stop = options.max_count != SearchOptions{}.max_count || options.stop_on_first ||
                              big.summary.binary_matched;
      if (!early_stop) {
        EXPECT_EQ(r.bytes_scanned, input.size()) << rc.describe();
      }
    }
  }
}

std::string random_lines(std::mt19937& rng, std::size_t lines, std::size_t max_len, const std::string& alphabet,
                         bool final_newline) {
  std::string s;
  std::uniform_int_distribution<std::size_t> len(0, max_len);
  std::uniform_int_distribution<std::size_t> pick(0, alphabet.size() - 1);
  for (std::size_t i = 0; i < lines; ++i) {
    const std::size_t n = len(rng);
    for (std::size_t k = 0; k < n; ++k) s.push_back(alphabet[pick(rng)]);
    if (i % 5 == 4) s.push_back('\r');
    s.push_back('\n');
  }
  if (!final_newline && !s.empty()) s.pop_back();
  return s;
}

PatternSet list(const std::string& text) {
  PatternSet p;
  p.add_list(text);
  return p;
}

// --- Tests ----------------------------------------------------------------------------

TEST(FileScan, SmallHandWrittenInputs) {
  GPUFILTER_OPEN_DEVICE(dev);
  const std::string text =
      "foo bar\nfoobar\n\nbar\r\nfoo_bar baz\nBAR foo\nxfoo foox\n-foo-\nfoo\nbarfoo\nlast line without newline foo";
  check_input(*dev, "hand", list("foo\nbar"), MatchOptions{}, text, 6);
  check_input(*dev, "hand-ic", list("FOO\nbar baz"), MatchOptions{.ignore_case = true}, text, 6);
  check_input(*dev, "hand-overlapping", list("o\noo\nfoo b\nbar\nr"), MatchOptions{}, text, 6);
  check_input(*dev, "empty-pattern", list(""), MatchOptions{}, text, 3);
  check_input(*dev, "empty-and-foo", list("\nfoo"), MatchOptions{}, text, 3);
}

TEST(FileScan, EdgeInputs) {
  GPUFILTER_OPEN_DEVICE(dev);
  for (const std::string& input : {""s, "\n"s, "a"s, "a\n"s, "\n\n\n"s, "ab\r\n"s, "xa"s}) {
    check_input(*dev, "input '" + input + "'", list("a"), MatchOptions{}, input, 4);
    check_input(*dev, "input '" + input + "' empty pattern", list(""), MatchOptions{}, input, 2);
  }
}

TEST(FileScan, RandomInputsSmallAlphabet) {
  GPUFILTER_OPEN_DEVICE(dev);
  std::mt19937 rng(17);
  for (int round = 0; round < 3; ++round) {
    const std::string text = random_lines(rng, 60, 40, "ab _", round != 1);
    PatternSet p;
    const std::size_t n = 1 + static_cast<std::size_t>(round) * 3;
    for (std::size_t i = 0; i < n; ++i) {
      std::string s;
      const std::size_t len = 1 + rng() % 4;
      for (std::size_t k = 0; k < len; ++k) s.push_back("ab _"[rng() % 4]);
      p.add(s);
    }
    check_input(*dev, "random round " + std::to_string(round), p, MatchOptions{.ignore_case = round == 2}, text, 4);
  }
}

TEST(FileScan, LongLinesAcrossChunks) {
  GPUFILTER_OPEN_DEVICE(dev);
  std::mt19937 rng(23);
  // Lines of up to 400 bytes over "ab": every tiny chunk splits them, with overlap.
  const std::string text = random_lines(rng, 12, 400, "ab", false);
  check_input(*dev, "long lines", list("abba\nbbbbb\naaaaaaaa\nbab\naba"), MatchOptions{}, text, 5);
}

// Patterns drawn from the log's own tokens; CRLF and no final newline are real here.
PatternSet tokens_of(const std::string& log, std::uint32_t seed, std::size_t count) {
  std::mt19937 rng(seed);
  std::vector<std::string> tokens;
  std::size_t at = 0;
  while (at < log.size()) {
    std::size_t end = log.find_first_of(" \n", at);
    if (end == std::string::npos) end = log.size();
    if (end > at && end - at <= 24) tokens.push_back(log.substr(at, end - at));
    at = end + 1;
  }
  PatternSet p;
  for (std::size_t i = 0; i < count && !tokens.empty(); ++i) {
    std::string t = tokens[rng() % tokens.size()];
    if (i % 3 == 2 && t.size() > 3) t = t.substr(1, t.size() - 2);  // a piece of a token
    p.add(t);
  }
  return p;
}

// Whether the option set `name` is one of `chosen`: all of them in a release build, every
// other one under a sanitizer (there these tests took over a minute each under TSan, with
// PoCL's per-chunk cost; what they check beyond the pipeline's threads, the release run
// has checked).
bool sampled(const std::string& name, std::initializer_list<const char*> chosen) {
  std::size_t i = 0;
  for (const char* c : chosen) {
#if defined(GPUFILTER_SANITIZED)
    if (i++ % 2 == 1) continue;
#else
    ++i;
#endif
    if (name == c) return true;
  }
  return false;
}

TEST(FileScan, CorpusLogs) {
  GPUFILTER_OPEN_DEVICE(dev);
  for (const char* name : {"loghub/OpenSSH_2k.log", "loghub/Proxifier_2k.log"}) {
    const std::string log = gpufilter::test::read_file(corpus_path(name));
    ASSERT_GT(log.size(), 100000u);
    // The tail: CRLF (OpenSSH) and the missing final newline, through tiny chunks.
    const std::string tail = log.substr(log.size() - 3000);
    check_input(*dev, std::string(name) + " tail", tokens_of(tail, 1, 6), MatchOptions{}, tail, 3);
    check_input(*dev, std::string(name) + " tail -i", tokens_of(tail, 2, 4), MatchOptions{.ignore_case = true}, tail, 2);
  }
}

TEST(FileScan, WholeCorpusLogs) {
  GPUFILTER_OPEN_DEVICE(dev);
  for (const char* name : {"loghub/OpenSSH_2k.log", "loghub/HDFS_2k.log", "loghub/Apache_2k.log"}) {
    const std::string log = gpufilter::test::read_file(corpus_path(name));
    const PatternSet patterns = tokens_of(log, 3, 8);
    const ScanProgram matcher(*dev, patterns, MatchOptions{});
    const std::size_t base = std::max<std::size_t>(64, matcher.table().max_length());
    // Chunk sizes stay small: PoCL compiles the kernel once per distinct chunk length.
    const RunConfig configs[] = {{base, 3, {}, true}, {base + 7, 2, {4093}, true}};
    for (const auto& [opt_name, options] : option_sets()) {
      if (!sampled(opt_name, {"default", "context-invert", "spans", "max_count"})) continue;
      SCOPED_TRACE(std::string(name) + " options=" + opt_name);
      const RunResult big = run_pipeline(*dev, matcher, options, log, RunConfig{});
      ASSERT_EQ(diff(Model(patterns, matcher.table(), options).run(log), big.events), "") << "big chunk vs model";
      for (const RunConfig& rc : configs)
        ASSERT_EQ(diff(big.events, run_pipeline(*dev, matcher, options, log, rc).events), "") << rc.describe();
    }
  }
}

// Inputs with NUL bytes: binary mode must start at the same line whatever the chunking.
TEST(FileScan, BinaryInputsAgreeAcrossConfigurations) {
  GPUFILTER_OPEN_DEVICE(dev);
  std::mt19937 rng(41);
  std::string text = random_lines(rng, 4000, 90, "abcdefgh ", true);  // about 180 KB
  text[150000] = '\0';
  const PatternSet patterns = list("abc\nhg\nd d");
  const ScanProgram matcher(*dev, patterns, MatchOptions{});
  const RunConfig configs[] = {{64, 3, {}, true}, {61, 2, {7, 4093}, true}, {40, 1, {}, true}};
  for (const BinaryFiles mode : {BinaryFiles::kBinary, BinaryFiles::kWithoutMatch, BinaryFiles::kText}) {
    for (const auto& [opt_name, base_options] : option_sets()) {
      if (!sampled(opt_name, {"default", "invert", "count", "context"})) continue;
      SearchOptions options = base_options;
      options.binary_files = mode;
      const bool detect = mode != BinaryFiles::kText;
      SCOPED_TRACE("options=" + opt_name + " mode=" + std::to_string(static_cast<int>(mode)));
      const RunResult big = run_pipeline(*dev, matcher, options, text, RunConfig{}, detect);
      if (mode == BinaryFiles::kText) {
        ASSERT_EQ(diff(Model(patterns, matcher.table(), options).run(text), big.events), "") << "-a vs model";
      } else {
        EXPECT_FALSE(big.events.empty());
        if (mode == BinaryFiles::kBinary && !options.invert) {
          EXPECT_TRUE(big.summary.binary_matched);
        }
      }
      for (const RunConfig& rc : configs)
        ASSERT_EQ(diff(big.events, run_pipeline(*dev, matcher, options, text, rc, detect).events), "")
            << rc.describe();
    }
  }
}

TEST(FileScan, SherlockWithNul) {
  GPUFILTER_OPEN_DEVICE(dev);
  const std::string text = gpufilter::test::read_file(corpus_path("text/sherlock-nul.txt"));
  ASSERT_NE(text.find('\0'), std::string::npos);
  const PatternSet patterns = list("Sherlock\nHolmes\nthe");
  const ScanProgram matcher(*dev, patterns, MatchOptions{});
  for (const auto& [opt_name, options] : option_sets()) {
    if (opt_name != "default" && opt_name != "count" && opt_name != "invert") continue;
    SCOPED_TRACE("options=" + opt_name);
    const RunResult big = run_pipeline(*dev, matcher, options, text, RunConfig{});
    for (const RunConfig& rc : {RunConfig{64, 2, {}, true}, RunConfig{50, 3, {5, 1000}, true}})
      ASSERT_EQ(diff(big.events, run_pipeline(*dev, matcher, options, text, rc).events), "") << rc.describe();
    // -a: the NUL is an ordinary byte; the model applies.
    SearchOptions text_options = options;
    text_options.binary_files = BinaryFiles::kText;
    const RunResult text_mode = run_pipeline(*dev, matcher, text_options, text, RunConfig{}, false);
    ASSERT_EQ(diff(Model(patterns, matcher.table(), options).run(text), text_mode.events), "") << "-a vs model";
  }
}

// FileScan::lines_seen (FileScanConfig::count_lines, the empty pattern's --pattern-counts
// figure) counts every line, the unterminated last one included, however it was chunked.
TEST(FileScan, LinesSeenCountsEveryLine) {
  GPUFILTER_OPEN_DEVICE(dev);
  std::mt19937 rng(61);
  const PatternSet patterns = list("\nab");
  const ScanProgram matcher(*dev, patterns, MatchOptions{});
  std::vector<std::string> inputs = {"", "\n", "abcdefgh", "abcdefgh\n", "x\nabcdefgh", "abcdefghijklmnopq"};
  inputs.push_back(random_lines(rng, 12, 400, "ab", false));
  inputs.push_back(random_lines(rng, 12, 400, "ab", true));
  for (const std::string& input : inputs) {
    for (std::size_t chunk : {4u, 8u, 17u, 64u, 1u << 20}) {
      for (bool regular : {true, false}) {
        for (bool detect : {true, false}) {
          const RunConfig rc{chunk, 2, {1, 7}, regular};
          const RunResult r = run_pipeline(*dev, matcher, SearchOptions{.quiet = true, .counting = true}, input, rc,
                                           detect);
          EXPECT_EQ(r.lines_seen, count_lines(input))
              << "input of " << input.size() << " bytes ending '" << input.substr(input.size() - std::min<std::size_t>(input.size(), 3))
              << "', " << rc.describe() << " detect_binary=" << detect;
          EXPECT_EQ(r.summary.selected_lines, count_lines(input)) << rc.describe();
          EXPECT_EQ(r.bytes_scanned, input.size()) << rc.describe();
        }
      }
    }
  }
}

// --pattern-counts: with scan_to_end the device counts every occurrence of the whole
// input exactly once, however the chunker split it (overlaps included), even after the
// searcher stopped (-m 1).
TEST(FileScan, PatternCountsThroughChunking) {
  GPUFILTER_OPEN_DEVICE(dev);
  std::mt19937 rng(71);
  const std::string log = gpufilter::test::read_file(corpus_path("loghub/OpenSSH_2k.log"));
  const std::string inputs[] = {random_lines(rng, 12, 400, "ab", false), log.substr(log.size() - 4000)};
  const PatternSet sets[] = {list("abba\nbbbbb\naaaaaaaa\nbab\na\n"), tokens_of(log.substr(log.size() - 4000), 5, 10)};
  for (int k = 0; k < 2; ++k) {
    const std::string& input = inputs[k];
    for (bool ic : {false, true}) {
      const ScanProgram matcher(*dev, sets[k], MatchOptions{.ignore_case = ic});
      std::vector<std::uint64_t> expected(matcher.table().unique_count(), 0);
      for (const Occurrence& o : gpufilter::reference_occurrences(sets[k], matcher.table(), input)) ++expected[o.pattern];
      auto configs = tiny_configs(matcher.table().max_length(), 6);
      configs.push_back(RunConfig{});
      for (const RunConfig& rc : configs) {
        const auto engine = make_scanner(
            *dev, matcher, ScanConfig{.chunk_bytes = rc.chunk, .slots = rc.slots, .count_patterns = true}, rc.host);
        Scanner& scanner = *engine;
        RecordingSink sink;
        Searcher searcher(matcher.table(), SearchOptions{.max_count = 1}, sink);
        FileScan pipeline(scanner, searcher, FileScanConfig{.scan_to_end = true});
        StringSource source(input, 0, "(test)", rc.regular);
        if (!rc.reads.empty()) source.set_read_sizes(rc.reads);
        pipeline.run(source);
        EXPECT_EQ(scanner.pattern_counts(), expected) << "set " << k << " ic=" << ic << " " << rc.describe();
        EXPECT_EQ(pipeline.bytes_scanned(), input.size()) << rc.describe();
      }
    }
  }
}

// One FileScan and Searcher over several inputs: an input stopped early (-m) leaves
// nothing behind for the next, and context groups of a later input are separated from
// an earlier input's output.
TEST(FileScan, SeveralInputsThroughOnePipeline) {
  GPUFILTER_OPEN_DEVICE(dev);
  std::mt19937 rng(83);
  const PatternSet patterns = list("ab\nba a");
  const ScanProgram matcher(*dev, patterns, MatchOptions{});
  const std::string inputs[] = {random_lines(rng, 80, 30, "ab ", true), random_lines(rng, 50, 30, "ab ", false),
                                "", random_lines(rng, 40, 300, "ab ", false)};
  const SearchOptions stops{.max_count = 2, .line_numbers = true};
  const SearchOptions context{.before = 1, .after = 1, .group_separators = true, .line_numbers = true};
  for (const SearchOptions& options : {stops, context}) {
    const std::size_t base = std::max<std::size_t>(4, matcher.table().max_length());
    for (const RunConfig& rc : {RunConfig{}, RunConfig{base, 3, {3, 1}, true}, RunConfig{base + 5, 2, {}, false}}) {
      DeviceScanner scanner(*dev, matcher, ScanConfig{.chunk_bytes = rc.chunk, .slots = rc.slots});
      RecordingSink sink;
      Searcher searcher(matcher.table(), options, sink);
      FileScan pipeline(scanner, searcher, FileScanConfig{});
      Events expected;
      bool output = false;
      for (std::size_t i = 0; i < std::size(inputs); ++i) {
        StringSource source(inputs[i], 0, "input" + std::to_string(i), rc.regular);
        if (!rc.reads.empty()) source.set_read_sizes(rc.reads);
        pipeline.run(source);
        Events e = Model(patterns, matcher.table(), options).run(inputs[i], "input" + std::to_string(i));
        // grep's "--" also separates the first group of an input from earlier output.
        if (options.group_separators && output && e.size() > 2 && e[1] != "break") e.insert(e.begin() + 1, "break");
        output = output || e.size() > 2;
        expected.insert(expected.end(), e.begin(), e.end());
      }
      EXPECT_EQ(diff(expected, sink.events()), "") << rc.describe() << " max_count=" << options.max_count;
    }
  }
}

// A Sink that records like RecordingSink and also marks flush().
class FlushRecordingSink final : public gpufilter::Sink {
 public:
  void begin(const gpufilter::InputInfo& input) override { inner_.begin(input); }
  gpufilter::Flow matched(const gpufilter::LineMatch& line) override { return inner_.matched(line); }
  void context(const gpufilter::LineMatch& line) override { inner_.context(line); }
  void context_break() override { inner_.context_break(); }
  void finish(const gpufilter::InputSummary& summary) override { inner_.finish(summary); }
  void flush() override { flushed_after_.push_back(inner_.events().size()); }
  const Events& events() const { return inner_.events(); }
  // For each flush(), how many events had been recorded when it came.
  const std::vector<std::size_t>& flushed_after() const { return flushed_after_; }

 private:
  RecordingSink inner_;
  std::vector<std::size_t> flushed_after_;
};

// A stream that goes quiet (wait_readable false once) at scripted points.
class StallingSource final : public gpufilter::Source {
 public:
  explicit StallingSource(std::vector<std::string> pieces) : pieces_(std::move(pieces)) {}
  bool wait_readable(std::chrono::milliseconds) override {
    if (stall_pending_) {
      stall_pending_ = false;
      return false;
    }
    return true;
  }
  std::size_t read(std::span<char> dst) override {
    if (next_ >= pieces_.size()) return 0;
    const std::string& p = pieces_[next_];
    const std::size_t n = std::min(dst.size(), p.size() - pos_);
    std::memcpy(dst.data(), p.data() + pos_, n);
    pos_ += n;
    if (pos_ == p.size()) {
      ++next_;
      pos_ = 0;
      stall_pending_ = true;  // the input goes quiet after every piece
    }
    return n;
  }
  const std::string& name() const override { return name_; }

 private:
  std::vector<std::string> pieces_;
  std::size_t next_ = 0, pos_ = 0;
  bool stall_pending_ = false;
  std::string name_ = "(test)";
};

// When a slow input goes quiet, every complete line read so far has been searched and
// its output flushed; nothing is lost or reordered.
TEST(FileScan, StallingInputFlushesCompleteLines) {
  GPUFILTER_OPEN_DEVICE(dev);
  const PatternSet patterns = list("foo");
  const ScanProgram matcher(*dev, patterns, MatchOptions{});
  const std::vector<std::string> pieces = {"foo 1\n", "bar\nfoo 2\npart", "ial foo 3", "\nfoo", " 4\n", "tail foo"};
  std::string input;
  for (const auto& p : pieces) input += p;
  const SearchOptions options{.line_numbers = true};
  const Events expected = Model(patterns, matcher.table(), options).run(input);
  for (std::size_t chunk : {std::size_t{1} << 20, std::size_t{8}}) {
    for (std::size_t slots : {1u, 3u}) {
      DeviceScanner scanner(*dev, matcher, ScanConfig{.chunk_bytes = chunk, .slots = slots});
      FlushRecordingSink sink;
      Searcher searcher(matcher.table(), options, sink);
      FileScan pipeline(scanner, searcher, FileScanConfig{});
      StallingSource source(pieces);
      pipeline.run(source);
      ASSERT_EQ(diff(expected, sink.events()), "") << "chunk=" << chunk << " slots=" << slots;
      // After each piece that completes a matching line, a flush follows that line's event
      // before any later line's: pieces 0, 1, 3 and 4 end with "foo 1", "foo 2", "foo 3", "foo 4" emitted.
      for (const char* line : {"foo 1", "foo 2", "partial foo 3", "foo 4"}) {
        const auto at = std::find_if(sink.events().begin(), sink.events().end(),
                                     [&](const std::string& e) { return e.ends_with(std::string(" ") + line); });
        ASSERT_NE(at, sink.events().end()) << line;
        const std::size_t index = static_cast<std::size_t>(at - sink.events().begin()) + 1;
        EXPECT_TRUE(std::find(sink.flushed_after().begin(), sink.flushed_after().end(), index) !=
                    sink.flushed_after().end())
            << "no flush right after '" << line << "' (chunk=" << chunk << " slots=" << slots << ")";
      }
    }
  }
}

// A chunk size below the longest pattern: the chunker raises its capacity to
// overlap + 1 = longest pattern, so the result must still be the big-chunk result.
TEST(FileScan, ChunkSmallerThanLongestPattern) {
  GPUFILTER_OPEN_DEVICE(dev);
  const std::string text = "a long line with a pattern longer than the chunk\nshort\npatterns here\n";
  const PatternSet patterns = list("pattern longer\nshort");
  const ScanProgram matcher(*dev, patterns, MatchOptions{});
  const SearchOptions options{.line_numbers = true, .spans = true};
  const Events expected = Model(patterns, matcher.table(), options).run(text);
  for (std::size_t chunk : {4u, 8u, 13u}) {
    SCOPED_TRACE("chunk=" + std::to_string(chunk));
    ASSERT_LT(chunk, matcher.table().max_length());
    Events got;
    try {
      got = run_pipeline(*dev, matcher, options, text, RunConfig{chunk, 2, {}, true}).events;
    } catch (const gpufilter::Error& e) {
      ADD_FAILURE() << "pipeline threw: " << e.what();
      continue;
    }
    EXPECT_EQ(diff(expected, got), "");
  }
}

}  // namespace
