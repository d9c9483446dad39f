// GrepPrinter in memory: the bytes GNU grep writes for lines with -H/-n/-b, context lines
// and "--", -o parts, -c, -l/-L, and --color with a fixed GREP_COLORS.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gpufilter/sinks/grep_printer.hpp"

namespace gpufilter {
namespace {

// One printer writing to memory; err collects the binary-file notice.
struct Printed {
  StringWriter text;
  StringWriter errors;
  Output out{text};
  Output err{errors};
  GrepPrinter printer;
  explicit Printed(PrinterOptions options) : printer(out, err, std::move(options)) {}
  std::string all() {
    out.flush();
    return text.text();
  }
};

LineMatch line(std::string_view text, std::uint64_t offset, std::uint64_t number,
               std::span<const MatchSpan> spans = {}) {
  return LineMatch{text, offset, number, spans, {}, {}, {}};
}

TEST(GrepPrinter, LinesWithFileNameNumberAndOffset) {
  PrinterOptions o;
  o.with_filename = true;
  o.line_numbers = true;
  o.byte_offset = true;
  Printed p(o);
  p.printer.begin(InputInfo{"app.log"});
  p.printer.context(line("before", 10, 2));
  p.printer.matched(line("ERROR here", 17, 3));
  p.printer.context_break();
  p.printer.matched(line("ERROR again", 90, 9));
  p.printer.finish(InputSummary{"app.log", 2, false, {}, {}});
  EXPECT_EQ(p.all(), "app.log-2-10-before\napp.log:3:17:ERROR here\n--\napp.log:9:90:ERROR again\n");
}

TEST(GrepPrinter, OnlyMatchingPrintsEachSpanAtItsOffset) {
  PrinterOptions o;
  o.only_matching = true;
  o.byte_offset = true;
  Printed p(o);
  const std::vector<MatchSpan> spans = {{0, 3}, {8, 11}};
  p.printer.begin(InputInfo{"x"});
  p.printer.matched(line("foo bar foo", 100, 1, spans));
  EXPECT_EQ(p.all(), "100:foo\n108:foo\n");
}

TEST(GrepPrinter, CountAndFileLists) {
  PrinterOptions count;
  count.mode = PrinterOptions::Mode::kCount;
  count.with_filename = true;
  Printed c(count);
  c.printer.begin(InputInfo{"a.log"});
  c.printer.matched(line("hit", 0, 1));  // counted by the pipeline, not printed
  c.printer.finish(InputSummary{"a.log", 7, false, {}, {}});
  EXPECT_EQ(c.all(), "a.log:7\n");

  PrinterOptions with;
  with.mode = PrinterOptions::Mode::kFilesWithMatches;
  Printed l(with);
  l.printer.finish(InputSummary{"yes.log", 1, false, {}, {}});
  l.printer.finish(InputSummary{"no.log", 0, false, {}, {}});
  EXPECT_EQ(l.all(), "yes.log\n");

  PrinterOptions without;
  without.mode = PrinterOptions::Mode::kFilesWithoutMatch;
  Printed big_l(without);
  big_l.printer.finish(InputSummary{"yes.log", 1, false, {}, {}});
  big_l.printer.finish(InputSummary{"no.log", 0, false, {}, {}});
  EXPECT_EQ(big_l.all(), "no.log\n");
}

TEST(GrepPrinter, BinaryMatchIsANoticeOnTheErrorOutput) {
  Printed p(PrinterOptions{});
  p.printer.begin(InputInfo{"blob.bin"});
  p.printer.finish(InputSummary{"blob.bin", 1, true, {}, {}});
  EXPECT_EQ(p.all(), "");
  EXPECT_EQ(p.errors.text(), "gpufilter: blob.bin: binary file matches\n");
}

// What `GREP_COLORS='ms=01;32:fn=34:ln=33:se=36' grep --color=always -Hn foo` writes.
TEST(GrepPrinter, ColorsAsGrepWritesThem) {
  PrinterOptions o;
  o.with_filename = true;
  o.line_numbers = true;
  o.colors = Colors::from_environment(nullptr, "ms=01;32:fn=34:ln=33:se=36");
  Printed p(o);
  const std::vector<MatchSpan> spans = {{0, 3}, {8, 11}};
  p.printer.begin(InputInfo{"/tmp/g.txt"});
  p.printer.matched(line("foo bar foo", 0, 1, spans));
  const std::string expected =
      "\33[34m\33[K/tmp/g.txt\33[m\33[K\33[36m\33[K:\33[m\33[K\33[33m\33[K1\33[m\33[K\33[36m\33[K:\33[m\33[K"
      "\33[01;32m\33[Kfoo\33[m\33[K bar \33[01;32m\33[Kfoo\33[m\33[K\n";
  EXPECT_EQ(p.all(), expected);
}

}  // namespace
}  // namespace gpufilter
