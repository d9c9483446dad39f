// LineCutter: scanned pieces cut into lines, each with the occurrences that start in it.
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "gpufilter/grep/line_occurrences.hpp"

namespace {

using gpufilter::CutLine;
using gpufilter::LineCutter;
using gpufilter::LineOccurrence;
using gpufilter::Occurrence;

// A line as the tests compare it: its occurrences as (position, pattern) pairs.
struct Seen {
  std::string text;
  std::uint64_t offset;
  std::vector<std::pair<std::uint64_t, std::uint32_t>> occurrences;
  bool terminated;
  bool operator==(const Seen&) const = default;
};

void PrintTo(const Seen& s, std::ostream* os) {
  *os << "{\"" << s.text << "\" @" << s.offset << (s.terminated ? " nl" : " open") << " [";
  for (const auto& [p, id] : s.occurrences) *os << "(" << p << "," << id << ")";
  *os << "]}";
}

template <typename T = LineOccurrence>
std::vector<Seen> cut(std::string_view data, std::uint64_t offset, const std::vector<Occurrence>& occurrences,
                      std::size_t from = 0, std::size_t index = 0, std::size_t* index_after = nullptr) {
  std::vector<T> scratch;
  LineCutter<T> cutter(data, offset, occurrences, scratch, from, index);
  std::vector<Seen> out;
  CutLine<T> line;
  while (cutter.next(line)) {
    Seen s{std::string(line.text), line.offset, {}, line.terminated};
    for (const T& o : line.occurrences) s.occurrences.emplace_back(o.position, o.pattern);
    out.push_back(std::move(s));
  }
  if (index_after != nullptr) *index_after = cutter.index();
  return out;
}

TEST(LineCutter, NothingToCut) {
  EXPECT_TRUE(cut("", 0, {}).empty());
  EXPECT_TRUE(cut("abc\n", 0, {}, 4).empty());
}

TEST(LineCutter, LinesWithoutOccurrencesComeOutEmptyHanded) {
  const std::vector<Seen> expected{{"alpha", 100, {}, true}, {"b", 106, {}, true}, {"gamma", 108, {}, true}};
  EXPECT_EQ(cut("alpha\nb\ngamma\n", 100, {}), expected);
}

TEST(LineCutter, PositionsBecomeRelativeToTheirLine) {
  // "abc" at 0 and "c" at 2 in the first line, "def" (a whole line) at 4, nothing in
  // "gh", "h" at the very end of the last line.
  const std::vector<Seen> expected{{"abc", 0, {{0, 7}, {2, 1}}, true},
                                   {"def", 4, {{0, 3}}, true},
                                   {"gh", 8, {}, true},
                                   {"xh", 11, {{1, 5}}, true}};
  EXPECT_EQ(cut("abc\ndef\ngh\nxh\n", 0, {{0, 7}, {2, 1}, {4, 3}, {12, 5}}), expected);
}

TEST(LineCutter, KeepsTheOrderGivenAtOnePosition) {
  // PatternTable::before order: the longest first at a position; the cutter never sorts.
  const std::vector<Seen> expected{{"xy", 0, {}, true}, {"abcd", 3, {{1, 9}, {1, 2}, {3, 4}}, true}};
  EXPECT_EQ(cut("xy\nabcd\n", 0, {{4, 9}, {4, 2}, {6, 4}}), expected);
}

TEST(LineCutter, EmptyLinesAreLines) {
  const std::vector<Seen> expected{
      {"", 0, {}, true}, {"", 1, {}, true}, {"z", 2, {{0, 0}}, true}, {"", 4, {}, true}};
  EXPECT_EQ(cut("\n\nz\n\n", 0, {{2, 0}}), expected);
}

TEST(LineCutter, CrlfKeepsTheCarriageReturnInTheLine) {
  // grep -F sees "\r" as a byte of the line: a pattern may end on it.
  const std::vector<Seen> expected{{"ab\r", 0, {{1, 0}}, true}, {"c\r", 4, {{1, 1}}, true}};
  EXPECT_EQ(cut("ab\r\nc\r\n", 0, {{1, 0}, {5, 1}}), expected);
}

TEST(LineCutter, AnOccurrenceGoesToTheLineItStartsIn) {
  // Patterns hold no '\n', so no occurrence crosses one (the Occurrence contract). Were
  // one to, it would reach the line it starts in unchanged, past that line's end, where
  // consumers check the bounds; the next line never sees it.
  const std::vector<Seen> expected{{"ab", 0, {{1, 3}}, true}, {"cd", 3, {}, true}};
  EXPECT_EQ(cut("ab\ncd\n", 0, {{1, 3}}), expected);
}

TEST(LineCutter, BytesAfterTheLastNewlineAreAnOpenLine) {
  const std::vector<Seen> expected{{"a", 0, {}, true}, {"bc", 2, {{1, 0}}, false}};
  EXPECT_EQ(cut("a\nbc", 0, {{3, 0}}), expected);
}

TEST(LineCutter, StartsWhereAnEarlierCutStoppedAndLeavesWhatLiesBeyond) {
  // The Searcher's case: data[0, 2) was a split line's end (its occurrence, index 0, handed
  // out already), and "de" at [5, 7) goes on in the next chunk: only [2, 5) is cut.
  const std::string_view chunk = "a\nbc\nde";
  std::size_t index = 0;
  const std::vector<Seen> expected{{"bc", 12, {{0, 1}}, true}};
  EXPECT_EQ(cut(chunk.substr(0, 5), 10, {{0, 0}, {2, 1}, {6, 2}}, 2, 1, &index), expected);
  EXPECT_EQ(index, 2u);
}

TEST(LineCutter, ChunkBoundedLinesTakeOccurrenceItself) {
  // gpufilterd's rules take Occurrence (32-bit positions) for lines within one chunk.
  const std::vector<Seen> expected{{"one", 0, {{0, 4}}, true}, {"two", 4, {{2, 5}}, true}};
  EXPECT_EQ(cut<Occurrence>("one\ntwo\n", 0, {{0, 4}, {6, 5}}), expected);
}

}  // namespace
