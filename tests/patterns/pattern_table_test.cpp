// PatternSet splitting (grep's -e / -f rules) and PatternTable: de-duplication, folding,
// and the host trie walk against the plain reference matcher.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gpufilter/patterns/pattern_set.hpp"
#include "gpufilter/patterns/pattern_table.hpp"
#include "reference_matcher.hpp"
#include "testutil/testutil.hpp"

namespace {

using gpufilter::MatchOptions;
using gpufilter::Occurrence;
using gpufilter::PatternSet;
using gpufilter::PatternTable;
using namespace std::string_literals;

std::vector<std::string> list_of(std::string_view text) {
  PatternSet p;
  p.add_list(text);
  return p.patterns();
}

std::vector<std::string> file_of(std::string_view contents) {
  PatternSet p;
  p.add_file_contents(contents);
  return p.patterns();
}

using V = std::vector<std::string>;

TEST(PatternSet, AddListSplitsOnNewlines) {
  EXPECT_EQ(list_of("a\nb"), (V{"a", "b"}));
  EXPECT_EQ(list_of(""), (V{""}));
  EXPECT_EQ(list_of("a\n"), (V{"a", ""}));
  EXPECT_EQ(list_of("\n"), (V{"", ""}));
  EXPECT_EQ(list_of("a\n\nb"), (V{"a", "", "b"}));
  EXPECT_EQ(list_of("a\r\nb"), (V{"a\r", "b"}));
  EXPECT_EQ(list_of("x\0y\n\0"s), (V{"x\0y"s, "\0"s}));
}

TEST(PatternSet, AddFileContentsOnePatternPerLine) {
  EXPECT_EQ(file_of(""), V{});
  EXPECT_EQ(file_of("a\n"), (V{"a"}));
  EXPECT_EQ(file_of("a"), (V{"a"}));
  EXPECT_EQ(file_of("\n"), (V{""}));
  EXPECT_EQ(file_of("\n\n"), (V{"", ""}));
  EXPECT_EQ(file_of("a\nb\n"), (V{"a", "b"}));
  EXPECT_EQ(file_of("a\n\nb"), (V{"a", "", "b"}));
  EXPECT_EQ(file_of("\0\n\0a\0\n"s), (V{"\0"s, "\0a\0"s}));
}

TEST(PatternSet, SizesAndEmptyPattern) {
  PatternSet p;
  EXPECT_TRUE(p.empty());
  EXPECT_FALSE(p.has_empty_pattern());
  EXPECT_EQ(p.max_length(), 0u);
  p.add_list("abc\nde");
  EXPECT_EQ(p.size(), 2u);
  EXPECT_FALSE(p.has_empty_pattern());
  EXPECT_EQ(p.max_length(), 3u);
  p.add_file_contents("\n");
  EXPECT_EQ(p.size(), 3u);
  EXPECT_TRUE(p.has_empty_pattern());
  p.add("0123456789");
  EXPECT_EQ(p.max_length(), 10u);
  EXPECT_EQ(p[3], "0123456789");

  PatternSet f;
  f.add_file_contents("");
  EXPECT_TRUE(f.empty());
  EXPECT_FALSE(f.has_empty_pattern());
}

// A list long enough to be counted on several threads, with duplicates near and far and
// empty patterns, counts as the serial first_of_each().
TEST(PatternSet, DistinctCountOfALargeListIsFirstOfEach) {
  std::mt19937 rng(5);
  std::vector<std::string> list;
  for (std::size_t i = 0; i < 200000; ++i) {
    const std::size_t pick = rng() % 10;
    if (pick == 0 && !list.empty())
      list.push_back(list[rng() % list.size()]);
    else if (pick == 1)
      list.emplace_back();
    else
      list.push_back(std::to_string(rng() % 150000) + std::string(rng() % 20, 'x'));
  }
  EXPECT_EQ(gpufilter::distinct_count(list), gpufilter::first_of_each(list).size());
  list.resize(1000);
  EXPECT_EQ(gpufilter::distinct_count(list), gpufilter::first_of_each(list).size());
}

TEST(PatternTable, DeduplicatesAndFolds) {
  PatternSet p;
  p.add_list("abc\nabd\nabc\n\nABC\nab\0c"s);
  {
    PatternTable t(p, MatchOptions{});
    EXPECT_EQ(t.pattern_count(), 6u);
    EXPECT_EQ(t.unique_count(), 4u);  // abc, abd, ABC, ab\0c
    EXPECT_EQ(t.unique_of(0), t.unique_of(2));
    EXPECT_NE(t.unique_of(0), t.unique_of(1));
    EXPECT_NE(t.unique_of(0), t.unique_of(4));
    EXPECT_NE(t.unique_of(0), t.unique_of(5));
    EXPECT_EQ(t.unique_of(3), PatternTable::kNoPattern);
    EXPECT_TRUE(t.has_empty_pattern());
    EXPECT_FALSE(t.matches_nothing());
    EXPECT_EQ(t.max_length(), 4u);
    EXPECT_EQ(t.unique_length(t.unique_of(5)), 4u);
  }
  {
    PatternTable t(p, MatchOptions{.ignore_case = true});
    EXPECT_EQ(t.unique_count(), 3u);  // abc = ABC
    EXPECT_EQ(t.unique_of(0), t.unique_of(4));
    EXPECT_EQ(t.unique_of(0), t.unique_of(2));
    EXPECT_TRUE(t.options().ignore_case);
  }
}

TEST(PatternTable, EmptySets) {
  PatternSet none;
  PatternTable t0(none, MatchOptions{});
  EXPECT_TRUE(t0.matches_nothing());
  EXPECT_EQ(t0.unique_count(), 0u);
  EXPECT_EQ(t0.max_length(), 0u);
  int calls = 0;
  t0.for_each_at("abc", [&](std::uint32_t) { ++calls; });
  EXPECT_EQ(calls, 0);

  PatternSet empty;
  empty.add_list("");
  PatternTable t1(empty, MatchOptions{});
  EXPECT_FALSE(t1.matches_nothing());
  EXPECT_TRUE(t1.has_empty_pattern());
  EXPECT_EQ(t1.unique_count(), 0u);
  EXPECT_EQ(t1.unique_of(0), PatternTable::kNoPattern);
}

std::string fold(std::string s, bool ignore_case) {
  for (char& c : s) c = static_cast<char>(gpufilter::fold_byte(static_cast<unsigned char>(c), ignore_case));
  return s;
}

using gpufilter::test::as_pairs;
using gpufilter::test::Pair;
using gpufilter::test::random_patterns;
using gpufilter::test::random_string;

struct Alphabet {
  const char* name;
  std::string chars;
};

std::vector<Alphabet> alphabets() {
  std::string all;
  for (int c = 0; c < 256; ++c)
    if (c != '\n') all.push_back(static_cast<char>(c));
  return {{"ab", "ab"},
          {"aAbB", "aAbBzZ"},
          {"nul", "a\0\x01"s},
          {"high", "x\x80\xff\xc3Y"},
          {"lines", "abc \n"},
          {"all-bytes", all}};
}

// Unique ids agree with the folded strings: equal folded patterns share an id, distinct
// ones do not, and every id is used with its length.
TEST(PatternTable, UniqueIdsMatchFoldedStrings) {
  std::mt19937 rng(1234);
  for (const Alphabet& a : alphabets()) {
    for (bool ic : {false, true}) {
      for (std::size_t count : {1u, 10u, 500u, 5000u}) {
        const std::string text = random_string(rng, a.chars, 2000);
        PatternSet p = random_patterns(rng, a.chars, count, 40, text);
        p.add("");
        const PatternTable t(p, MatchOptions{.ignore_case = ic});
        SCOPED_TRACE(std::string(a.name) + " ignore_case=" + std::to_string(ic) + " count=" + std::to_string(count));
        std::map<std::string, std::uint32_t> id_of;
        std::set<std::uint32_t> used;
        std::size_t max_len = 0;
        for (std::size_t i = 0; i < p.size(); ++i) {
          const std::string f = fold(p[i], ic);
          max_len = std::max(max_len, f.size());
          const std::uint32_t id = t.unique_of(i);
          if (f.empty()) {
            ASSERT_EQ(id, PatternTable::kNoPattern);
            continue;
          }
          ASSERT_LT(id, t.unique_count());
          ASSERT_EQ(t.unique_length(id), f.size());
          auto [it, inserted] = id_of.emplace(f, id);
          ASSERT_EQ(it->second, id) << "pattern " << i << " folded differently from an equal one";
          if (inserted) {
            ASSERT_TRUE(used.insert(id).second) << "two distinct patterns share id " << id;
          }
        }
        EXPECT_EQ(used.size(), t.unique_count());
        EXPECT_EQ(t.max_length(), max_len);
        EXPECT_EQ(t.pattern_count(), p.size());
        EXPECT_TRUE(t.has_empty_pattern());
        // The device hash table is a power of two, at most half full.
        const std::size_t slots = std::size_t{t.edge_mask()} + 1;
        EXPECT_TRUE(std::has_single_bit(slots));
        EXPECT_EQ(t.edge_slots().size(), slots);
        const auto filled = std::count_if(t.edge_slots().begin(), t.edge_slots().end(),
                                          [](const auto& s) { return s.key != PatternTable::kEmptyKey; });
        EXPECT_LE(static_cast<std::size_t>(filled) * 2, slots);
        EXPECT_EQ(t.root_next().size(), 256u);
      }
    }
  }
}

// The host trie walk from every position of `text`, in the device's order.
std::vector<Pair> walk_every_position(const PatternTable& t, const std::string& text) {
  std::vector<Pair> walked;
  for (std::size_t i = 0; i < text.size(); ++i) {
    std::vector<std::uint32_t> ids;
    t.for_each_at(std::string_view(text).substr(i), [&](std::uint32_t id) { ids.push_back(id); });
    std::sort(ids.begin(), ids.end(),
              [&](std::uint32_t x, std::uint32_t y) { return t.unique_length(x) > t.unique_length(y); });
    for (std::uint32_t id : ids) walked.emplace_back(static_cast<std::uint32_t>(i), id);
  }
  return walked;
}


// for_each_at at every position finds what the plain reference finds.
TEST(PatternTable, ForEachAtAgreesWithReference) {
  std::mt19937 rng(99);
  std::size_t total = 0;
  for (const Alphabet& a : alphabets()) {
    for (bool ic : {false, true}) {
      for (std::size_t count : {1u, 7u, 200u, 3000u}) {
        for (std::size_t max_len : {1u, 5u, 300u}) {
          const std::string text = random_string(rng, a.chars, count >= 3000 ? 700 : 3000);
          const PatternSet p = random_patterns(rng, a.chars, count, max_len, text);
          const PatternTable t(p, MatchOptions{.ignore_case = ic});
          const std::vector<Pair> walked = walk_every_position(t, text);
          const auto expected = as_pairs(gpufilter::reference_occurrences(p, t, text));
          ASSERT_EQ(walked.size(), expected.size())
              << a.name << " ic=" << ic << " count=" << count << " max_len=" << max_len;
          ASSERT_TRUE(walked == expected) << a.name << " ic=" << ic << " count=" << count << " max_len=" << max_len;
          total += expected.size();
        }
      }
    }
  }
  EXPECT_GT(total, 0u);
}

// A set large enough to be built on several threads (one first byte's subtree each)
// walks as the reference matches, and its gates let every pattern's own prefix through.
TEST(PatternTable, LargeSetsBuiltOnThreadsWalkAsTheReference) {
  std::mt19937 rng(7);
  for (const std::string& chars : {"abc\x80\xff"s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789 .:"s}) {
    for (bool ic : {false, true}) {
      const std::string text = random_string(rng, chars, 6000);
      const PatternSet random = random_patterns(rng, chars, 40000, 24, text);
      PatternSet p;
      p.add("");  // empty patterns among the first and the last pieces dealt to the threads
      for (std::size_t i = 0; i < random.size(); ++i) p.add(random[i]);
      p.add("");
      p.add(p[5]);  // a duplicate
      p.add("a\0b"s);
      const PatternTable t(p, MatchOptions{.ignore_case = ic});
      ASSERT_TRUE(t.has_empty_pattern());
      EXPECT_TRUE(t.has_nul_byte());
      EXPECT_EQ(t.unique_of(0), PatternTable::kNoPattern);
      EXPECT_EQ(t.unique_of(p.size() - 3), PatternTable::kNoPattern);
      EXPECT_EQ(t.unique_of(p.size() - 2), t.unique_of(5));
      for (std::size_t i = 1; i + 3 < p.size(); ++i)
        ASSERT_EQ(t.unique_pattern(t.unique_of(i)), fold(p[i], ic)) << "pattern " << i;
      const std::vector<Pair> walked = walk_every_position(t, text);
      const auto expected = as_pairs(gpufilter::reference_occurrences(p, t, text));
      ASSERT_TRUE(walked == expected) << " ic=" << ic << ": " << walked.size() << " against " << expected.size();
      for (std::uint32_t id = 0; id < t.unique_count(); ++id) {
        const std::string_view s = t.unique_pattern(id);
        if (s.size() < 3) continue;
        const auto b = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
        const std::uint32_t word = t.prefix_words()[PatternTable::prefix_word(b(0), b(1), b(2), t.prefix_shift())];
        EXPECT_NE(word & (s.size() == 3 ? 1u : 1u << PatternTable::prefix_bit(b(3))), 0u) << "pattern " << id;
        if (s.size() < 4) continue;
        const std::uint32_t deep = t.deep_words()[PatternTable::deep_word(b(0), b(1), b(2), b(3), t.deep_shift())];
        EXPECT_NE(deep & (s.size() == 4 ? 1u : 1u << PatternTable::prefix_bit(b(4))), 0u) << "pattern " << id;
      }
    }
  }
}

TEST(PatternTable, PrefixPatternsAllReported) {
  PatternSet p;
  p.add_list("a\naa\naaa\nb\nab");
  const PatternTable t(p, MatchOptions{});
  const std::string text = "aaab";
  const auto ref = as_pairs(gpufilter::reference_occurrences(p, t, text));
  const std::vector<Pair> walked = walk_every_position(t, text);
  EXPECT_EQ(walked, ref);
  EXPECT_EQ(ref.size(), 3u + 2u + 1u + 1u + 1u);  // aaa,aa,a | aa,a | a,ab | b
}

TEST(ReferenceMatcher, OverlapDropsOccurrencesEndingInside) {
  PatternSet p;
  p.add_list("ab\nb\nabc");
  const PatternTable t(p, MatchOptions{});
  const std::string text = "abcab";
  const auto all = gpufilter::reference_occurrences(p, t, text, 0);
  for (std::size_t overlap = 0; overlap <= text.size() + 1; ++overlap) {
    const auto some = gpufilter::reference_occurrences(p, t, text, overlap);
    std::vector<Occurrence> want;
    for (const Occurrence& o : all)
      if (o.position + t.unique_length(o.pattern) > overlap) want.push_back(o);
    EXPECT_EQ(as_pairs(some), as_pairs(want)) << "overlap " << overlap;
  }
}

}  // namespace
