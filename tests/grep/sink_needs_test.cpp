// Sink::needs(): each printer states what it needs, and the Searcher adds it to the
// options it is given. The options in effect must be those the front end set itself
// before the printers said so: the oracle below is that front end's old code.
#include <gtest/gtest.h>

#include <unistd.h>

#include <optional>
#include <vector>

#include "gpufilter/grep/searcher.hpp"
#include "gpufilter/patterns/pattern_set.hpp"
#include "gpufilter/patterns/pattern_table.hpp"
#include "gpufilter/sinks/grep_printer.hpp"
#include "gpufilter/sinks/json_printer.hpp"
#include "gpufilter/sinks/output.hpp"

namespace {

using gpufilter::BinaryFiles;
using gpufilter::GrepPrinter;
using gpufilter::JsonPrinter;
using gpufilter::Output;
using gpufilter::PrinterOptions;
using gpufilter::SearchOptions;
using gpufilter::SinkNeeds;
using Mode = PrinterOptions::Mode;

constexpr Mode kModes[] = {Mode::kLines, Mode::kCount, Mode::kFilesWithMatches, Mode::kFilesWithoutMatch,
                           Mode::kQuiet};

// One run's choices that bear on what the sink needs (--json allows lines, -c and -q).
struct RunChoices {
  Mode mode;
  bool only_matching;
  bool color;
  bool line_numbers;
  bool json;
  BinaryFiles binary_files;
  bool streams;
};

PrinterOptions printing_of(const RunChoices& r) {
  PrinterOptions p;
  p.mode = r.mode;
  p.only_matching = r.only_matching;
  p.line_numbers = r.line_numbers;
  if (r.color) p.colors = gpufilter::Colors{};
  return p;
}

// cli/main.cpp's search_options() before Sink::needs(): the front end decided for the sink.
SearchOptions decided_by_front_end(const RunChoices& r) {
  const bool lines_out = r.mode == Mode::kLines;
  SearchOptions s;
  s.line_numbers = r.line_numbers;
  s.spans = lines_out && (r.only_matching || r.color);
  s.quiet = !lines_out;
  s.binary_files = r.binary_files;
  if (r.json) {
    s.binary_files = BinaryFiles::kText;
    s.line_numbers = true;
    s.pattern_ids = true;
    s.spans = true;                   // submatches
    s.quiet = r.mode == Mode::kQuiet;  // -c counts the lines it is given
  }
  if (r.streams) s.binary_files = BinaryFiles::kText;
  return s;
}

// search_options() now: only grep's rules, -q, and the stream's lack of an end.
SearchOptions given_by_front_end(const RunChoices& r) {
  SearchOptions s;
  s.quiet = r.mode == Mode::kQuiet;
  s.binary_files = r.streams ? BinaryFiles::kText : r.binary_files;
  return s;
}

class SinkNeedsTest : public ::testing::Test {
 protected:
  SinkNeedsTest() : table_(patterns(), gpufilter::MatchOptions{}), out_(STDOUT_FILENO), err_(STDERR_FILENO) {}
  static gpufilter::PatternSet patterns() {
    gpufilter::PatternSet set;
    set.add("needle");
    return set;
  }
  gpufilter::PatternTable table_;
  Output out_;
  Output err_;
};

TEST_F(SinkNeedsTest, GrepPrinterNeedsLinesOnlyInLinesModeAndSpansForOnlyMatchingOrColor) {
  for (const Mode mode : kModes) {
    for (const bool o : {false, true}) {
      for (const bool color : {false, true}) {
        for (const bool n : {false, true}) {
          const RunChoices run{mode, o, color, n, false, BinaryFiles::kBinary, false};
          const GrepPrinter printer(out_, err_, printing_of(run));
          const SinkNeeds needs = printer.needs();
          SCOPED_TRACE(testing::Message() << "mode " << static_cast<int>(mode) << " -o " << o << " color " << color
                                          << " -n " << n);
          EXPECT_EQ(needs.lines, mode == Mode::kLines);
          EXPECT_EQ(needs.spans, mode == Mode::kLines && (o || color));
          EXPECT_FALSE(needs.pattern_ids);
          EXPECT_EQ(needs.line_numbers, n);
          EXPECT_FALSE(needs.any_bytes);
        }
      }
    }
  }
}

TEST_F(SinkNeedsTest, JsonPrinterNeedsSpansPatternIdsLineNumbersAndEveryByte) {
  const JsonPrinter printer(out_, {{0, "needle"}}, JsonPrinter::Options{});
  const SinkNeeds needs = printer.needs();
  EXPECT_TRUE(needs.lines);
  EXPECT_TRUE(needs.spans);
  EXPECT_TRUE(needs.pattern_ids);
  EXPECT_TRUE(needs.line_numbers);
  EXPECT_TRUE(needs.any_bytes);
}

TEST_F(SinkNeedsTest, TheSinkDefaultAddsNothing) {
  struct Quiet final : gpufilter::Sink {
    gpufilter::Flow matched(const gpufilter::LineMatch&) override { return gpufilter::Flow::kContinue; }
  } sink;
  const SearchOptions given{.line_numbers = true, .spans = true};
  const gpufilter::Searcher searcher(table_, given, sink);
  EXPECT_TRUE(searcher.options().line_numbers);
  EXPECT_TRUE(searcher.options().spans);
  EXPECT_FALSE(searcher.options().pattern_ids);
  EXPECT_FALSE(searcher.options().quiet);
  EXPECT_EQ(searcher.options().binary_files, BinaryFiles::kBinary);
}

TEST_F(SinkNeedsTest, OptionsInEffectAreThoseTheFrontEndUsedToSet) {
  int runs = 0;
  for (const bool json : {false, true}) {
    for (const Mode mode : kModes) {
      // --json refuses -l and -L
      if (json && (mode == Mode::kFilesWithMatches || mode == Mode::kFilesWithoutMatch)) continue;
      for (const bool o : {false, true}) {
        for (const bool color : {false, true}) {
          for (const bool n : {false, true}) {
            for (const BinaryFiles b : {BinaryFiles::kBinary, BinaryFiles::kText, BinaryFiles::kWithoutMatch}) {
              for (const bool streams : {false, true}) {
                const RunChoices run{mode, o, color, n, json, b, streams};
                GrepPrinter grep(out_, err_, printing_of(run));
                JsonPrinter json_printer(out_, {{0, "needle"}}, JsonPrinter::Options{});
                gpufilter::Sink& sink = json ? static_cast<gpufilter::Sink&>(json_printer) : grep;
                const gpufilter::Searcher searcher(table_, given_by_front_end(run), sink);
                const SearchOptions want = decided_by_front_end(run);
                const SearchOptions& got = searcher.options();
                SCOPED_TRACE(testing::Message() << "json " << json << " mode " << static_cast<int>(mode) << " -o " << o
                                                << " color " << color << " -n " << n << " binary "
                                                << static_cast<int>(b) << " streams " << streams);
                EXPECT_EQ(got.line_numbers, want.line_numbers);
                EXPECT_EQ(got.spans, want.spans);
                EXPECT_EQ(got.pattern_ids, want.pattern_ids);
                EXPECT_EQ(got.quiet, want.quiet);
                EXPECT_EQ(got.binary_files, want.binary_files);
                ++runs;
              }
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(runs, (5 * 2 + 3 * 2) * 2 * 2 * 3 * 2);  // --json: lines, -c and -q, with -o or not
}

}  // namespace
