// LineFramer against a plain reference: the same input cut at every split point (and in
// random pieces), handed on whole or in part (the channel full), with and without the end
// of the stream, must give the same lines at the same offsets with the same skip counts.
#include "gpufilter/sources/line_framer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace gpufilter {
namespace {

using namespace std::string_literals;

// A line as it reaches the channel: its offset, its bytes ('\n' included) and the
// over-long lines dropped just before it (reported with the first line of an append).
struct Line {
  std::uint64_t offset;
  std::string text;
  std::uint64_t skipped;
  bool operator==(const Line&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Line& l) {
  std::string shown;
  for (const char c : l.text) shown += c == '\n' ? std::string("\\n") : std::string(1, c);
  return os << "{" << l.offset << ", \"" << shown << "\", skipped " << l.skipped << "}";
}

struct Expected {
  std::vector<Line> lines;
  std::uint64_t too_long = 0;
};

// What LineFramer must produce: every '\n'-ended line of at most max_line bytes (its '\n'
// not counted); at the end of the stream a non-empty unterminated last line too. An
// over-long line is counted as soon as it is known to be over-long, complete or not.
Expected reference(std::string_view input, std::size_t max_line, bool end_of_stream) {
  Expected e;
  std::uint64_t skipped = 0;
  std::size_t pos = 0;
  while (pos < input.size()) {
    const std::size_t nl = input.find('\n', pos);
    const bool complete = nl != std::string_view::npos;
    const std::size_t end = complete ? nl : input.size();
    if (end - pos > max_line) {
      ++e.too_long;
      ++skipped;
    } else if (complete || end_of_stream) {
      e.lines.push_back({pos, std::string(input.substr(pos, end - pos)) + "\n", skipped});
      skipped = 0;
    }
    pos = complete ? nl + 1 : input.size();
  }
  return e;
}

// The channel's side: takes whole lines from ready(), all of them or, when `take` says
// so, only some (a full channel), and records them.
struct Consumer {
  std::vector<Line> lines;
  std::mt19937* rng = nullptr;  // null: take everything
  int stalls = 0;               // times it took less than was ready

  void take(LineFramer& f) {
    for (;;) {
      const LineFramer::Ready r = f.ready();
      if (r.lines.empty()) return;
      ASSERT_EQ(r.lines.back(), '\n');
      // Count the lines and choose how many to take.
      std::vector<std::size_t> ends;
      for (std::size_t i = 0; i < r.lines.size(); ++i) {
        if (r.lines[i] == '\n') ends.push_back(i + 1);
      }
      std::size_t count = ends.size();
      if (rng != nullptr) count = std::uniform_int_distribution<std::size_t>(0, ends.size())(*rng);
      const std::size_t n = count == 0 ? 0 : ends[count - 1];
      std::size_t begin = 0;
      for (std::size_t i = 0; i < count; ++i) {
        lines.push_back({r.offset + begin, std::string(r.lines.substr(begin, ends[i] - begin)), i == 0 ? r.skipped : 0});
        begin = ends[i];
      }
      f.consumed(n);
      if (n < r.lines.size()) {
        ++stalls;
        return;  // the channel is full: the reader stops here until there is room
      }
    }
  }
};

void feed(LineFramer& f, std::string_view piece) {
  const std::span<char> room = f.prepare(piece.size());
  ASSERT_GE(room.size(), piece.size());
  std::copy(piece.begin(), piece.end(), room.begin());  // memcpy with an empty piece would pass null
  f.commit(piece.size());
}

// Feeds `pieces`, taking after each; then, with `end`, ends the stream; then takes
// everything (the channel has room again). Returns what came out.
std::vector<Line> run(LineFramer& f, const std::vector<std::string_view>& pieces, bool end, Consumer& consumer) {
  for (const std::string_view piece : pieces) {
    feed(f, piece);
    consumer.take(f);
  }
  if (end) f.end_of_stream();
  consumer.rng = nullptr;
  consumer.take(f);
  return consumer.lines;
}

std::string show(std::string_view s) {
  std::string out;
  for (const char c : s) out += c == '\n' ? std::string("\\n") : std::string(1, c);
  return out;
}

const std::vector<std::string> kInputs = {
    "",
    "\n",
    "\n\n\n",
    "a\n",
    "abc",
    "abc\ndef\n",
    "abc\ndef",
    "one\ntwo\n\nfour\r\nfive",
    "short\nthis line is far too long\nok\n",
    "this line is far too long\nok\n",
    "ok\nthis line is far too long",
    "ok\nthis line is far too long\n",
    "xxxxxxxxxxxx\nyyyyyyyyyyyyyy\nzz\n",
    "exactly8\n123456789\n1234567\n",
    "a\0b\nc\0\n"s,
    "12345678",
};

TEST(LineFramer, EverySplitPointMatchesTheReference) {
  for (std::size_t max_line : {1u, 3u, 8u, 1000u}) {
    for (std::string_view input : kInputs) {
      for (bool end : {false, true}) {
        const Expected want = reference(input, max_line, end);
        for (std::size_t cut = 0; cut <= input.size(); ++cut) {
          SCOPED_TRACE("input \"" + show(input) + "\" max_line " + std::to_string(max_line) + " cut " +
                       std::to_string(cut) + (end ? " end" : ""));
          LineFramer f(max_line);
          Consumer consumer;
          const auto got = run(f, {input.substr(0, cut), input.substr(cut)}, end, consumer);
          EXPECT_EQ(got, want.lines);
          EXPECT_EQ(f.lines_too_long(), want.too_long);
          if (end) {
            EXPECT_EQ(f.buffered(), 0u);
          }
        }
      }
    }
  }
}

TEST(LineFramer, EveryPairOfSplitPoints) {
  const std::string input = "alpha\nbe\nthe long one here\n\ngamma delta\nz";
  for (bool end : {false, true}) {
    const Expected want = reference(input, 8, end);
    for (std::size_t a = 0; a <= input.size(); ++a) {
      for (std::size_t b = a; b <= input.size(); ++b) {
        SCOPED_TRACE("cuts " + std::to_string(a) + " " + std::to_string(b) + (end ? " end" : ""));
        LineFramer f(8);
        Consumer consumer;
        const std::string_view in(input);
        EXPECT_EQ(run(f, {in.substr(0, a), in.substr(a, b - a), in.substr(b)}, end, consumer), want.lines);
        EXPECT_EQ(f.lines_too_long(), want.too_long);
      }
    }
  }
}

TEST(LineFramer, OneByteAtATime) {
  const std::string input = "first\nsecond line is long\n\nthird\nlast";
  for (bool end : {false, true}) {
    const Expected want = reference(input, 10, end);
    LineFramer f(10);
    Consumer consumer;
    std::vector<std::string_view> pieces;
    for (std::size_t i = 0; i < input.size(); ++i) pieces.push_back(std::string_view(input).substr(i, 1));
    EXPECT_EQ(run(f, pieces, end, consumer), want.lines);
    EXPECT_EQ(f.lines_too_long(), 1u);
  }
}

// Random pieces and a channel that takes only some lines at a time: the lines, their
// offsets and the skip counts are those of the reference however they are cut and taken.
TEST(LineFramer, RandomPiecesAndPartialConsumption) {
  std::mt19937 rng(20240611);
  for (int round = 0; round < 400; ++round) {
    std::string input;
    const int lines = std::uniform_int_distribution<int>(0, 30)(rng);
    for (int i = 0; i < lines; ++i) {
      const int length = std::uniform_int_distribution<int>(0, 3)(rng) == 0
                             ? std::uniform_int_distribution<int>(10, 60)(rng)
                             : std::uniform_int_distribution<int>(0, 12)(rng);
      for (int k = 0; k < length; ++k) input += static_cast<char>('a' + (i + k) % 26);
      if (std::uniform_int_distribution<int>(0, 9)(rng) == 0) input += '\r';
      input += '\n';
    }
    if (round % 2 == 0) input += "tail-without-newline";
    const std::size_t max_line = std::uniform_int_distribution<std::size_t>(1, 24)(rng);
    const bool end = round % 3 != 0;
    std::vector<std::string_view> pieces;
    for (std::size_t pos = 0; pos < input.size();) {
      const std::size_t n = std::min(input.size() - pos, std::uniform_int_distribution<std::size_t>(1, 40)(rng));
      pieces.push_back(std::string_view(input).substr(pos, n));
      pos += n;
    }
    SCOPED_TRACE("round " + std::to_string(round) + " max_line " + std::to_string(max_line));
    const Expected want = reference(input, max_line, end);
    LineFramer f(max_line);
    Consumer consumer;
    consumer.rng = &rng;
    ASSERT_EQ(run(f, pieces, end, consumer), want.lines);
    EXPECT_EQ(f.lines_too_long(), want.too_long);
  }
}

TEST(LineFramer, ReadyLinesAndOffsets) {
  LineFramer f(100, 1000);  // a file read from offset 1000
  feed(f, "one\ntwo\nthr");
  LineFramer::Ready r = f.ready();
  EXPECT_EQ(r.lines, "one\ntwo\n");
  EXPECT_EQ(r.offset, 1000u);
  EXPECT_EQ(r.skipped, 0u);
  EXPECT_EQ(f.partial(), 3u);
  EXPECT_EQ(f.buffered(), 11u);
  f.consumed(4);  // the channel took "one\n" only
  r = f.ready();
  EXPECT_EQ(r.lines, "two\n");
  EXPECT_EQ(r.offset, 1004u);
  EXPECT_EQ(f.offset(), 1004u);
  feed(f, "ee\nfour\n");  // more arrives before the rest was taken: kept in order
  r = f.ready();
  EXPECT_EQ(r.lines, "two\nthree\nfour\n");
  EXPECT_EQ(r.offset, 1004u);
  f.consumed(r.lines.size());
  EXPECT_EQ(f.offset(), 1019u);
  EXPECT_EQ(f.buffered(), 0u);
  EXPECT_EQ(f.ready().lines, "");
}

TEST(LineFramer, OverlongLineIsReportedWithTheNextLine) {
  LineFramer f(4);
  feed(f, "ok\n");
  feed(f, "toolong");  // over-long before its end, behind a line not yet handed on
  LineFramer::Ready r = f.ready();
  EXPECT_EQ(r.lines, "ok\n");
  EXPECT_EQ(r.skipped, 0u);
  EXPECT_EQ(f.lines_too_long(), 0u) << "dropped before the line ahead of it was handed on";
  f.consumed(3);
  EXPECT_EQ(f.lines_too_long(), 1u);
  EXPECT_EQ(f.ready().lines, "");
  feed(f, "still going\nnext\n");
  r = f.ready();
  EXPECT_EQ(r.lines, "next\n");
  EXPECT_EQ(r.offset, 3u + 7u + 12u);
  EXPECT_EQ(r.skipped, 1u);
  f.consumed(0);  // the channel was full: the skip stays with the line
  EXPECT_EQ(f.ready().skipped, 1u);
  f.consumed(5);
  feed(f, "x\n");
  EXPECT_EQ(f.ready().skipped, 0u);
}

// A reader that hands on what is ready before it reads again holds at most one line
// (max_line_bytes) plus one read: an over-long line is dropped as it arrives.
TEST(LineFramer, MemoryIsBoundedByOneLineAndOneRead) {
  LineFramer f(16);
  feed(f, "line one\nline two\n");
  f.consumed(f.ready().lines.size());
  for (int i = 0; i < 1000; ++i) {
    feed(f, "x");
    ASSERT_LE(f.buffered(), 16u) << "after " << i + 1 << " bytes of an over-long line";
    EXPECT_EQ(f.ready().lines, "");
  }
  feed(f, "\nafter\n");
  EXPECT_EQ(f.ready().lines, "after\n");
  EXPECT_EQ(f.ready().skipped, 1u);
  EXPECT_EQ(f.ready().offset, 18u + 1001u);
  EXPECT_EQ(f.lines_too_long(), 1u);
  f.consumed(6);
  // An over-long line behind lines the channel has not taken waits for them (the ready
  // lines stay one piece), and goes as soon as they are taken.
  feed(f, "a\n" + std::string(20, 'y'));
  EXPECT_EQ(f.ready().lines, "a\n");
  EXPECT_EQ(f.buffered(), 22u);
  f.consumed(2);
  EXPECT_EQ(f.buffered(), 0u);
  EXPECT_EQ(f.lines_too_long(), 2u);
}

TEST(LineFramer, EndOfStream) {
  {
    LineFramer f(100);
    feed(f, "a\nb");
    f.end_of_stream();
    EXPECT_EQ(f.ready().lines, "a\nb\n") << "the unterminated last line is a line";
  }
  {
    LineFramer f(100);
    feed(f, "a\nb\n");
    f.end_of_stream();
    EXPECT_EQ(f.ready().lines, "a\nb\n") << "no empty line is made up after a final newline";
  }
  {
    LineFramer f(100);
    f.end_of_stream();
    EXPECT_EQ(f.ready().lines, "");
  }
  {
    LineFramer f(3);
    feed(f, "ok\ntoolong");
    f.end_of_stream();  // the over-long tail waits behind "ok" and is then dropped
    EXPECT_EQ(f.ready().lines, "ok\n");
    f.consumed(3);
    EXPECT_EQ(f.ready().lines, "");
    EXPECT_EQ(f.lines_too_long(), 1u);
    EXPECT_EQ(f.buffered(), 0u);
  }
  {
    LineFramer f(3);
    feed(f, "toolong");  // dropped at once, discarding to its end
    f.end_of_stream();
    feed(f, "");
    EXPECT_EQ(f.ready().lines, "");
    EXPECT_EQ(f.lines_too_long(), 1u);
  }
}

// The end of a stream whose last bytes are whole lines waiting behind an over-long one
// (not yet dropped because the lines before it were not taken) makes up no empty line.
TEST(LineFramer, EndOfStreamAfterAWaitingOverlongLineAddsNoEmptyLine) {
  LineFramer f(4);
  feed(f, "ok\ntoolong\nb\n");
  EXPECT_EQ(f.ready().lines, "ok\n");
  f.end_of_stream();
  f.consumed(3);
  LineFramer::Ready r = f.ready();
  EXPECT_EQ(r.lines, "b\n");
  EXPECT_EQ(r.skipped, 1u);
  f.consumed(r.lines.size());
  EXPECT_EQ(f.ready().lines, "") << "an empty line was made up at the end of the stream";
  EXPECT_EQ(f.buffered(), 0u);

  LineFramer g(4);
  feed(g, "ok\ntoolong\n");
  g.end_of_stream();
  g.consumed(3);
  EXPECT_EQ(g.ready().lines, "") << "an empty line was made up at the end of the stream";
  EXPECT_EQ(g.lines_too_long(), 1u);
}

TEST(LineFramer, ExactlyMaxLineBytesIsNotTooLong) {
  LineFramer f(5);
  feed(f, "12345\n123456\n\r\n");
  EXPECT_EQ(f.ready().lines, "12345\n");
  f.consumed(6);
  EXPECT_EQ(f.ready().lines, "\r\n");
  EXPECT_EQ(f.ready().skipped, 1u);
  EXPECT_EQ(f.ready().offset, 13u);
}

// Found by line_framer_fuzz (tests/fuzz/regressions/line_framer_fuzz/): an over-long
// unterminated last line waiting behind lines not yet taken got a '\n' made up at the end
// of the stream before it was dropped, so offset() ended one byte past the stream; taken
// earlier, the same line was dropped on arrival and offset() ended at the stream's end.
TEST(LineFramer, OverlongUnterminatedTailEndsAtTheStreamsEnd) {
  const std::string stream = "ok\ntoolong";
  for (const bool take_first : {true, false}) {
    SCOPED_TRACE(take_first ? "lines taken before the end" : "lines taken after the end");
    LineFramer f(4, 100);
    feed(f, stream);
    EXPECT_EQ(f.ready().lines, "ok\n");
    if (take_first) f.consumed(3);
    f.end_of_stream();
    if (!take_first) f.consumed(3);
    EXPECT_EQ(f.ready().lines, "");
    EXPECT_EQ(f.lines_too_long(), 1u);
    EXPECT_EQ(f.buffered(), 0u);
    EXPECT_EQ(f.offset(), 100 + stream.size());
  }
}

// release(), as a listener calls it when a connection has nothing more to read: after a
// burst the buffer shrinks to the partial line it holds. A line then trickling in a byte
// at a time, released after every byte (the connection idles between bytes), is not copied
// over and over: the capacity stays within twice the line plus 4 KiB and changes only a few
// dozen times; the line arrives whole, at its offset.
TEST(LineFramer, ReleaseKeepsOnlyThePartialLine) {
  LineFramer f(1u << 20);
  std::string burst;
  for (int i = 0; i < 2000; ++i) burst += "burst line " + std::to_string(i) + "\n";
  const std::uint64_t partial_at = burst.size();
  burst += "partial";
  feed(f, burst);
  f.consumed(f.ready().lines.size());
  EXPECT_GE(f.capacity(), burst.size());
  f.release();
  EXPECT_EQ(f.buffered(), 7u);
  EXPECT_LE(f.capacity(), 4096u) << "an idle stream keeps its read buffer";
  EXPECT_EQ(f.ready().lines, "");

  std::size_t changes = 0;
  std::size_t capacity = f.capacity();
  for (int i = 0; i < 100000; ++i) {
    feed(f, "x");
    f.release();
    ASSERT_LE(f.capacity(), 2 * f.buffered() + 4096) << "after " << i + 1 << " bytes";
    if (f.capacity() != capacity) ++changes;
    capacity = f.capacity();
  }
  EXPECT_LT(changes, 64u) << "the buffer was reallocated for most bytes";
  feed(f, "\n");
  EXPECT_EQ(f.ready().lines, "partial" + std::string(100000, 'x') + "\n");
  EXPECT_EQ(f.ready().offset, partial_at);
  f.consumed(f.ready().lines.size());
  f.release();
  EXPECT_EQ(f.capacity(), 0u);
  EXPECT_EQ(f.offset(), partial_at + 7 + 100000 + 1);
}

}  // namespace
}  // namespace gpufilter
