// SyslogFramer: framing detection from the first bytes however they are split, RFC 6587
// octet counting against a plain reference at every split point (LF escaping, over-long
// frames, stray separators, partial consumption), malformed and truncated frames, and
// newline mode being exactly LineFramer's.
#include "gpufilter/sources/syslog_framer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "gpufilter/sources/line_framer.hpp"

namespace gpufilter {
namespace {

using Framing = SyslogFramer::Framing;

struct Line {
  std::uint64_t offset;
  std::string text;
  std::uint64_t skipped;
  bool operator==(const Line&) const = default;
};

std::string show(std::string_view s) {
  std::string out;
  for (const char c : s) {
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else out += c;
  }
  return out;
}

std::ostream& operator<<(std::ostream& os, const Line& l) {
  return os << "{" << l.offset << ", \"" << show(l.text) << "\", skipped " << l.skipped << "}";
}

template <class Framer>
void feed(Framer& f, std::string_view piece) {
  const std::span<char> room = f.prepare(piece.size());
  ASSERT_GE(room.size(), piece.size());
  std::copy(piece.begin(), piece.end(), room.begin());  // memcpy with an empty piece would pass null
  f.commit(piece.size());
}

// The channel's side: takes whole lines from ready(), everything, or with `rng` a random
// number of lines (0 included: the channel is full), and records them.
struct Consumer {
  std::vector<Line> lines;
  std::mt19937* rng = nullptr;

  template <class Framer>
  void take(Framer& f) {
    for (;;) {
      const auto r = f.ready();
      if (r.lines.empty()) return;
      ASSERT_EQ(r.lines.back(), '\n');
      std::vector<std::size_t> ends;
      for (std::size_t i = 0; i < r.lines.size(); ++i) {
        if (r.lines[i] == '\n') ends.push_back(i + 1);
      }
      std::size_t count = ends.size();
      if (rng != nullptr) count = std::uniform_int_distribution<std::size_t>(0, ends.size())(*rng);
      std::size_t begin = 0;
      for (std::size_t i = 0; i < count; ++i) {
        lines.push_back({r.offset + begin, std::string(r.lines.substr(begin, ends[i] - begin)), i == 0 ? r.skipped : 0});
        begin = ends[i];
      }
      f.consumed(begin);
      if (begin < r.lines.size()) return;
    }
  }
};

template <class Framer>
std::vector<Line> run(Framer& f, const std::vector<std::string_view>& pieces, bool end, Consumer& consumer) {
  for (const std::string_view piece : pieces) {
    feed(f, piece);
    consumer.take(f);
  }
  if (end) f.end_of_stream();
  consumer.rng = nullptr;
  consumer.take(f);
  return consumer.lines;
}

std::vector<std::string_view> cut(std::string_view s, std::initializer_list<std::size_t> points) {
  std::vector<std::string_view> pieces;
  std::size_t from = 0;
  for (const std::size_t p : points) {
    pieces.push_back(s.substr(from, p - from));
    from = p;
  }
  pieces.push_back(s.substr(from));
  return pieces;
}

std::vector<std::string_view> bytes(std::string_view s) {
  std::vector<std::string_view> pieces;
  for (std::size_t i = 0; i < s.size(); ++i) pieces.push_back(s.substr(i, 1));
  return pieces;
}

// ---- Octet counting: a stream of frames and what must come of it.

struct Frames {
  std::string stream;
  std::vector<Line> lines;
  std::uint64_t too_long = 0;
};

// rsyslog's line for a message: a trailing LF dropped, any other written as #012.
std::string escaped(std::string_view message) {
  if (!message.empty() && message.back() == '\n') message.remove_suffix(1);
  std::string out;
  for (const char c : message) {
    if (c == '\n') out += "#012";
    else out += c;
  }
  return out;
}

// `separators[i]` goes before frame i + 1 (stray bytes some senders write).
Frames frames(const std::vector<std::string>& messages, std::size_t max_line,
              const std::vector<std::string>& separators = {}) {
  Frames f;
  std::uint64_t skipped = 0;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    if (i > 0 && i - 1 < separators.size()) f.stream += separators[i - 1];
    const std::string& m = messages[i];
    f.stream += std::to_string(m.size()) + " ";
    const std::uint64_t offset = f.stream.size();
    f.stream += m;
    const std::string line = escaped(m);
    if (m.size() > max_line || line.size() > max_line) {
      ++f.too_long;
      ++skipped;
      continue;
    }
    f.lines.push_back({offset, line + "\n", skipped});
    skipped = 0;
  }
  return f;
}

const std::vector<std::string> kMessages = {
    "<13>1 2024-06-11T10:00:00Z host app - - - first message",
    "<14>short",
    "<13>with a trailing newline\n",
    "<11>two\nlines inside",
    "<11>\n",
    "<12>x",
    "<13>ends in two\n\n",
    "<9>crlf inside\r\nand\r\n",
};

TEST(SyslogFramerDetect, DecidesOnlyWhenTheBytesSay) {
  struct Case {
    std::string input;
    Framing framing;
    std::size_t decided_at;  // bytes after which the framing is known (0: never)
  };
  const std::vector<Case> cases = {
      {"12 <", Framing::kOctetCounted, 4},
      {"123456789 <", Framing::kOctetCounted, 11},
      {"1234567890 <", Framing::kLines, 10},  // ten digits are no MSG-LEN
      {"12 x", Framing::kLines, 4},
      {"12  <", Framing::kLines, 4},
      {"12x <", Framing::kLines, 3},
      {"0 <", Framing::kLines, 1},  // MSG-LEN has no leading zero
      {"05 <", Framing::kLines, 1},
      {"<34>1 2024 host", Framing::kLines, 1},
      {" 12 <", Framing::kLines, 1},
      {"\n12 <", Framing::kLines, 1},
      {"12 apples\n", Framing::kLines, 4},
      {"1", Framing::kUndecided, 0},
      {"12 ", Framing::kUndecided, 0},
      {"", Framing::kUndecided, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE("input \"" + show(c.input) + "\"");
    SyslogFramer f(1000);
    for (std::size_t i = 0; i < c.input.size(); ++i) {
      feed(f, std::string_view(c.input).substr(i, 1));
      const bool decided = c.decided_at != 0 && i + 1 >= c.decided_at;
      EXPECT_EQ(f.framing(), decided ? c.framing : Framing::kUndecided) << "after " << i + 1 << " bytes";
      if (!decided) {
        EXPECT_EQ(f.ready().lines, "");
      }
    }
    EXPECT_EQ(f.framing(), c.framing);
    EXPECT_FALSE(f.failed());
  }
}

TEST(SyslogFramerDetect, TheEndDecidesForLines) {
  for (const std::string input : {"1", "12", "12 ", "123456789"}) {
    SCOPED_TRACE(input);
    SyslogFramer f(100);
    feed(f, input);
    EXPECT_EQ(f.framing(), Framing::kUndecided);
    f.end_of_stream();
    EXPECT_EQ(f.framing(), Framing::kLines);
    EXPECT_EQ(f.ready().lines, input + "\n");
    EXPECT_EQ(f.ready().offset, 0u);
  }
  SyslogFramer empty(100);
  empty.end_of_stream();
  EXPECT_EQ(empty.ready().lines, "");
  EXPECT_EQ(empty.buffered(), 0u);
}

// Newline mode is LineFramer's, whatever the first bytes were and however they were cut.
TEST(SyslogFramerLines, SameAsLineFramerAtEverySplitPoint) {
  const std::vector<std::string> inputs = {
      "plain line\nsecond\n",
      "12 apples\n13 pears\npartial",
      "1\n2\n3\n",
      "123456789012 <x>\nmore\n",
      "<13>Jun 11 10:00:00 host app: BSD syslog over TCP\n<14>next\n",
      "a line that is far too long for the limit\nok\n",
      "1",
  };
  for (const std::string& input : inputs) {
    for (bool end : {false, true}) {
      for (std::size_t a = 0; a <= input.size(); ++a) {
        for (std::size_t b = a; b <= input.size(); b += 3) {
          SCOPED_TRACE(std::string("\"") + show(input) + "\" cuts " + std::to_string(a) + " " + std::to_string(b) +
                       (end ? " end" : ""));
          LineFramer lf(16);
          SyslogFramer sf(16);
          Consumer lc;
          Consumer sc;
          const auto want = run(lf, cut(input, {a, b}), end, lc);
          ASSERT_EQ(run(sf, cut(input, {a, b}), end, sc), want);
          EXPECT_EQ(sf.lines_too_long(), lf.lines_too_long());
          if (!input.empty() && (end || input.size() >= 4)) {
            EXPECT_EQ(sf.framing(), Framing::kLines);
          }
        }
      }
    }
  }
}

TEST(SyslogFramerOctets, EverySplitPointMatchesTheReference) {
  const Frames want = frames(kMessages, 1000);
  const std::string_view in(want.stream);
  for (std::size_t a = 0; a <= in.size(); ++a) {
    SCOPED_TRACE("cut at " + std::to_string(a));
    SyslogFramer f(1000);
    Consumer consumer;
    EXPECT_EQ(run(f, cut(in, {a}), true, consumer), want.lines);
    EXPECT_EQ(f.framing(), Framing::kOctetCounted);
    EXPECT_FALSE(f.failed()) << f.error();
    EXPECT_EQ(f.buffered(), 0u);
    EXPECT_EQ(f.offset(), in.size());
  }
}

TEST(SyslogFramerOctets, EveryPairOfSplitPoints) {
  const Frames want = frames({"<1>ab\ncd", "<2>\n", "<3>e"}, 100, {"\n", "\r\n "});
  const std::string_view in(want.stream);
  for (std::size_t a = 0; a <= in.size(); ++a) {
    for (std::size_t b = a; b <= in.size(); ++b) {
      SCOPED_TRACE("cuts " + std::to_string(a) + " " + std::to_string(b));
      SyslogFramer f(100);
      Consumer consumer;
      EXPECT_EQ(run(f, cut(in, {a, b}), false, consumer), want.lines);
    }
  }
}

// What a sender with TCP_NODELAY and one write per byte produces.
TEST(SyslogFramerOctets, OneByteAtATime) {
  const Frames want = frames(kMessages, 1000, {"\n", "", "\r\n", "  "});
  SyslogFramer f(1000);
  Consumer consumer;
  EXPECT_EQ(run(f, bytes(want.stream), false, consumer), want.lines);
  EXPECT_FALSE(f.failed()) << f.error();
}

TEST(SyslogFramerOctets, NewlinesInsideAMessageAreEscaped) {
  SyslogFramer f(1000);
  feed(f, "9 <1>a\nb\nc\n11 <2>x\r\ny\n\n\n\n13 <3>no newline");
  Consumer consumer;
  run(f, {}, true, consumer);
  ASSERT_EQ(consumer.lines.size(), 3u);
  EXPECT_EQ(consumer.lines[0].text, "<1>a#012b#012c\n") << "the trailing LF is the sender's line end";
  EXPECT_EQ(consumer.lines[1].text, "<2>x\r#012y#012#012#012\n");
  EXPECT_EQ(consumer.lines[2].text, "<3>no newline\n");
  EXPECT_EQ(consumer.lines[0].offset, 2u);
  EXPECT_EQ(consumer.lines[1].offset, 14u);
  EXPECT_EQ(consumer.lines[2].offset, 28u);
}

TEST(SyslogFramerOctets, ReadyHoldsOneFrameAtATime) {
  SyslogFramer f(1000);
  feed(f, "5 <1>ab6 <2>cde7 <3>fghi");
  EXPECT_EQ(f.ready().lines, "<1>ab\n");
  EXPECT_EQ(f.ready().offset, 2u);
  f.consumed(0);  // the channel was full: the frame stays
  EXPECT_EQ(f.ready().lines, "<1>ab\n");
  EXPECT_EQ(f.buffered(), 6u + 17u);
  f.consumed(6);
  EXPECT_EQ(f.offset(), 7u);
  EXPECT_EQ(f.ready().lines, "<2>cde\n");
  EXPECT_EQ(f.ready().offset, 9u);
  f.consumed(7);
  EXPECT_EQ(f.ready().lines, "<3>fghi\n");
  EXPECT_EQ(f.ready().offset, 17u);
  f.consumed(8);
  EXPECT_EQ(f.ready().lines, "");
  EXPECT_EQ(f.offset(), 24u);
}

TEST(SyslogFramerOctets, RandomPiecesAndPartialConsumption) {
  std::mt19937 rng(6587);
  for (int round = 0; round < 300; ++round) {
    std::vector<std::string> messages;
    std::vector<std::string> separators;
    const int count = std::uniform_int_distribution<int>(1, 25)(rng);
    for (int i = 0; i < count; ++i) {
      std::string m = "<";
      m += std::to_string(i % 191);
      m += '>';
      const int length = std::uniform_int_distribution<int>(0, 4)(rng) == 0
                             ? std::uniform_int_distribution<int>(30, 200)(rng)
                             : std::uniform_int_distribution<int>(0, 25)(rng);
      for (int k = 0; k < length; ++k) {
        const int r = std::uniform_int_distribution<int>(0, 15)(rng);
        m += r == 0 ? '\n' : r == 1 ? '\r' : static_cast<char>('a' + (k + i) % 26);
      }
      if (i % 3 == 0) m += '\n';
      messages.push_back(std::move(m));
      const int s = std::uniform_int_distribution<int>(0, 5)(rng);
      separators.push_back(s == 0 ? "\n" : s == 1 ? "\r\n" : s == 2 ? " " : "");
    }
    const std::size_t max_line = std::uniform_int_distribution<std::size_t>(8, 120)(rng);
    const Frames want = frames(messages, max_line, separators);
    std::vector<std::string_view> pieces;
    for (std::size_t pos = 0; pos < want.stream.size();) {
      const std::size_t n =
          std::min(want.stream.size() - pos, std::uniform_int_distribution<std::size_t>(1, 50)(rng));
      pieces.push_back(std::string_view(want.stream).substr(pos, n));
      pos += n;
    }
    SCOPED_TRACE("round " + std::to_string(round) + " max_line " + std::to_string(max_line));
    SyslogFramer f(max_line);
    Consumer consumer;
    consumer.rng = &rng;
    ASSERT_EQ(run(f, pieces, round % 2 == 0, consumer), want.lines);
    EXPECT_EQ(f.lines_too_long(), want.too_long);
    EXPECT_FALSE(f.failed()) << f.error();
  }
}

TEST(SyslogFramerOctets, OverlongFramesAreSkippedAsTheyArrive) {
  const std::string big(5000, 'x');
  const Frames want = frames({"<1>before", "<2>" + big, "<3>after", "<4>" + big, "<5>" + big, "<6>last"}, 64);
  ASSERT_EQ(want.lines.size(), 3u);
  EXPECT_EQ(want.lines[1].skipped, 1u);
  EXPECT_EQ(want.lines[2].skipped, 2u);
  SyslogFramer f(64);
  Consumer consumer;
  std::size_t most = 0;
  for (const std::string_view piece : bytes(want.stream)) {
    feed(f, piece);
    consumer.take(f);
    most = std::max(most, f.buffered());
  }
  EXPECT_EQ(consumer.lines, want.lines);
  EXPECT_EQ(f.lines_too_long(), 3u);
  EXPECT_LE(most, 64u + 1u) << "an over-long frame must not be held";
}

TEST(SyslogFramerOctets, EscapingCanMakeAFrameTooLong) {
  // 10 bytes of message, 4 LFs: 22 bytes once escaped, over a limit of 16.
  SyslogFramer f(16);
  feed(f, "10 <1>\n\n\n\nabc6 <2>cde");
  EXPECT_EQ(f.ready().lines, "<2>cde\n");
  EXPECT_EQ(f.ready().skipped, 1u);
  EXPECT_EQ(f.ready().offset, 15u);
  EXPECT_EQ(f.lines_too_long(), 1u);
}

TEST(SyslogFramerOctets, ExactlyMaxLineBytesIsNotTooLong) {
  SyslogFramer f(6);
  // The middle frame's line would be 6 bytes, but its MSG-LEN (7) is over the limit.
  feed(f, "6 <1>abc7 <1>abc\n6 <1>xyz");
  Consumer consumer;
  run(f, {}, false, consumer);
  ASSERT_EQ(consumer.lines.size(), 2u);
  EXPECT_EQ(consumer.lines[0].text, "<1>abc\n");
  EXPECT_EQ(consumer.lines[1].text, "<1>xyz\n");
  EXPECT_EQ(consumer.lines[1].skipped, 1u);
  EXPECT_EQ(f.lines_too_long(), 1u);
}

TEST(SyslogFramerOctets, MalformedHeaderFailsAfterTheFramesBeforeIt) {
  struct Case {
    std::string input;
    std::size_t lines;
    std::string error;
  };
  const std::vector<Case> cases = {
      {"5 <1>ab5 <2>cdx <3>", 2, "malformed octet-counted frame at byte 14"},
      {"5 <1>ab12x <2>", 1, "malformed octet-counted frame at byte 9"},
      {"5 <1>ab1234567890 <2>", 1, "malformed octet-counted frame at byte 16"},
      {"5 <1>ab0 <2>", 1, "malformed octet-counted frame at byte 7"},
      {"5 <1>ab<2>x", 1, "malformed octet-counted frame at byte 7"},
      {"5 <1>ab\n\r 5 <2>cd\t", 2, "malformed octet-counted frame at byte 17"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string("\"") + show(c.input) + "\"");
    for (std::size_t a = 0; a <= c.input.size(); ++a) {
      SyslogFramer f(100);
      Consumer consumer;
      run(f, cut(c.input, {a}), false, consumer);
      EXPECT_EQ(consumer.lines.size(), c.lines) << "cut at " << a;
      EXPECT_TRUE(f.failed()) << "cut at " << a;
      EXPECT_EQ(f.error(), c.error) << "cut at " << a;
      feed(f, "5 <3>ok");
      EXPECT_EQ(f.ready().lines, "") << "nothing after a malformed header";
    }
  }
}

TEST(SyslogFramerOctets, TheEndCutsAFrameShort) {
  {
    SyslogFramer f(100);
    feed(f, "5 <1>ab9 <2>cd");
    f.end_of_stream();
    Consumer consumer;
    run(f, {}, false, consumer);
    ASSERT_EQ(consumer.lines.size(), 2u);
    EXPECT_EQ(consumer.lines[1].text, "<2>cd\n") << "what arrived of a frame cut short was received";
    EXPECT_EQ(consumer.lines[1].offset, 9u);
    EXPECT_FALSE(f.failed());
  }
  for (const std::string input : {"5 <1>ab12", "5 <1>ab12 "}) {
    SyslogFramer f(100);
    feed(f, input);
    f.end_of_stream();
    Consumer consumer;
    run(f, {}, false, consumer);
    EXPECT_EQ(consumer.lines.size(), 1u);
    EXPECT_TRUE(f.failed()) << input;
    EXPECT_EQ(f.error(), "truncated octet-counted frame at byte 7") << input;
  }
  {
    SyslogFramer f(4);
    feed(f, "9 <1>abcdef");  // over-long and cut short: nothing to hand on
    f.end_of_stream();
    EXPECT_EQ(f.ready().lines, "");
    EXPECT_FALSE(f.failed());
    EXPECT_EQ(f.lines_too_long(), 1u);
  }
}

// Found by syslog_framer_fuzz (tests/fuzz/regressions/syslog_framer_fuzz/): in newline
// mode an over-long unterminated last line left offset() one byte past the stream when it
// waited behind lines not yet taken at the end of the stream (LineFramer's fix).
TEST(SyslogFramerLines, OverlongUnterminatedTailEndsAtTheStreamsEnd) {
  const std::string stream = "ok\ntoolong";
  for (const bool take_first : {true, false}) {
    SCOPED_TRACE(take_first ? "lines taken before the end" : "lines taken after the end");
    SyslogFramer f(4);
    feed(f, stream);
    EXPECT_EQ(f.ready().lines, "ok\n");
    if (take_first) f.consumed(3);
    f.end_of_stream();
    if (!take_first) f.consumed(3);
    EXPECT_EQ(f.ready().lines, "");
    EXPECT_EQ(f.lines_too_long(), 1u);
    EXPECT_EQ(f.buffered(), 0u);
    EXPECT_EQ(f.offset(), stream.size());
  }
}

// Octet counts that lie, at the framer: a count of 999,999,999 (the largest 9 digits)
// with a short message drops that frame and skips what follows as it arrives, holding
// nothing of it (10 MiB fed in 64 KiB reads, buffered() stays within one read, and
// release() gives the read back); the stream's end ends the skip, counted once. A count
// shorter than its message leaves the message's rest where a header belongs: malformed.
// "-5 <" or eleven digits as a connection's first bytes are not a count at all: lines.
TEST(SyslogFramerOctets, CountsThatLie) {
  {
    SyslogFramer f(1u << 20);
    feed(f, "5 <1>ab999999999 <13>short");
    Consumer consumer;
    run(f, {}, false, consumer);
    ASSERT_EQ(consumer.lines.size(), 1u);
    const std::string junk(64u << 10, 'j');
    for (int i = 0; i < 160; ++i) {
      feed(f, junk);
      ASSERT_LE(f.buffered(), junk.size()) << "after " << i + 1 << " reads";
      ASSERT_EQ(f.ready().lines, "");
      f.release();
      ASSERT_LE(f.capacity(), 4096u + f.buffered()) << "after " << i + 1 << " reads";
    }
    EXPECT_EQ(f.lines_too_long(), 1u);
    EXPECT_FALSE(f.failed());
    f.end_of_stream();
    EXPECT_EQ(f.ready().lines, "");
    EXPECT_FALSE(f.failed());
    EXPECT_EQ(f.lines_too_long(), 1u);
    EXPECT_EQ(f.offset(), 7u + 19u + 160u * junk.size()) << "the skip ends where the stream ends";
  }
  {
    SyslogFramer f(100);
    feed(f, "5 <1>ab5 <13>the count is too short\n");
    Consumer consumer;
    run(f, {}, false, consumer);
    ASSERT_EQ(consumer.lines.size(), 2u);
    EXPECT_EQ(consumer.lines[1].text, "<13>t\n");
    EXPECT_TRUE(f.failed());
    EXPECT_EQ(f.error(), "malformed octet-counted frame at byte 14");
  }
  for (const std::string first : {"-5 <13>negative\n", "99999999999 <13>eleven digits\n", "0 <13>zero\n"}) {
    SyslogFramer f(100);
    feed(f, first);
    EXPECT_EQ(f.framing(), SyslogFramer::Framing::kLines) << first;
    EXPECT_EQ(f.ready().lines, first);
    EXPECT_FALSE(f.failed());
  }
}

}  // namespace
}  // namespace gpufilter
