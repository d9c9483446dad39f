// HsDatabase (Hyperscan) checked occurrence for occurrence, order included, against the
// plain CPU reference matcher: the same answer the device scan must give.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gpufilter/core/errors.hpp"
#include "gpufilter/hyperscan/hs_database.hpp"
#include "gpufilter/patterns/pattern_set.hpp"
#include "reference_matcher.hpp"
#include "testutil/testutil.hpp"

namespace {

using gpufilter::HsDatabase;
using gpufilter::MatchOptions;
using gpufilter::Occurrence;
using gpufilter::PatternSet;
using gpufilter::PatternTable;
using gpufilter::test::as_pairs;
using gpufilter::test::diff;
using gpufilter::test::Pair;
using gpufilter::test::random_patterns;
using gpufilter::test::random_string;
using gpufilter::test::reference;
using namespace std::string_literals;

// Located occurrences; the returned count must agree with them.
std::vector<Pair> host(const HsDatabase& m, HsDatabase::Scratch& scratch, const std::string& text,
                       std::size_t overlap) {
  std::vector<Occurrence> out;
  const std::uint64_t total = m.scan(text.data(), text.size(), overlap, scratch, &out, nullptr);
  EXPECT_EQ(total, out.size());
  return as_pairs(out);
}

std::vector<std::uint64_t> counts_of(const std::vector<Pair>& v, std::size_t unique_count) {
  std::vector<std::uint64_t> c(unique_count, 0);
  for (const Pair& o : v) ++c[o.second];
  return c;
}

// Every way of asking: located (with and without counts), counted, totalled only.
void check_all_modes(const PatternSet& patterns, const PatternTable& table, const HsDatabase& m,
                     HsDatabase::Scratch& scratch, const std::string& text, std::size_t overlap,
                     const std::string& what) {
  const auto expected = reference(patterns, table, text, overlap);
  const auto expected_counts = counts_of(expected, table.unique_count());
  ASSERT_EQ(diff(expected, host(m, scratch, text, overlap)), "") << what << " overlap=" << overlap;

  std::vector<Occurrence> out;
  std::vector<std::uint64_t> counts(table.unique_count(), 0);
  EXPECT_EQ(m.scan(text.data(), text.size(), overlap, scratch, &out, counts.data()), expected.size()) << what;
  EXPECT_EQ(diff(expected, as_pairs(out)), "") << what << " (with counts)";
  EXPECT_EQ(counts, expected_counts) << what;

  std::vector<std::uint64_t> counts_only(table.unique_count(), 0);
  EXPECT_EQ(m.scan(text.data(), text.size(), overlap, scratch, nullptr, counts_only.data()), expected.size())
      << what;
  EXPECT_EQ(counts_only, expected_counts) << what;
  EXPECT_EQ(m.scan(text.data(), text.size(), overlap, scratch, nullptr, nullptr), expected.size()) << what;
}

struct Alphabet {
  const char* name;
  std::string chars;
};

std::vector<Alphabet> alphabets() {
  std::string all;
  for (int c = 0; c < 256; ++c) all.push_back(static_cast<char>(c));
  return {{"ab", "ab"},
          {"aAbBcC", "aAbBcC"},
          {"nul", "a\0\0b\n"s},
          {"high", "x\x80\xff\xc3Y\n@[`{"},
          {"all-bytes", all}};
}

TEST(HsDatabase, RandomPatternSetsMatchReference) {
  std::mt19937 rng(2024);
  struct SetSpec {
    std::size_t count;
    std::size_t max_len;
  };
  const SetSpec sets[] = {{1, 1}, {1, 64}, {3, 4}, {40, 12}, {300, 64}, {2000, 40}};
  std::size_t checked = 0, occurrences = 0, same_position = 0;
  for (const Alphabet& a : alphabets()) {
    for (const SetSpec& spec : sets) {
      for (bool ic : {false, true}) {
        const std::string seed_text = random_string(rng, a.chars, 4096);
        const PatternSet patterns = random_patterns(rng, a.chars, spec.count, spec.max_len, seed_text, true);
        const PatternTable table(patterns, MatchOptions{.ignore_case = ic});
        const HsDatabase matcher(table);
        auto scratch = matcher.new_scratch();
        for (int round = 0; round < 4; ++round) {
          const std::size_t menu[] = {4096, 1, 17, 1000, 2049};
          const std::size_t size = menu[(checked + static_cast<std::size_t>(round)) % 5];
          // Mostly fresh text; sometimes the text the long patterns came from.
          const std::string text = round % 2 == 1 ? seed_text.substr(0, size) : random_string(rng, a.chars, size);
          const std::size_t ov_choices[] = {0, table.max_length() - 1, size / 3, size};
          const std::size_t overlap = std::min(size, ov_choices[static_cast<std::size_t>(round + checked) % 4]);
          const auto expected = reference(patterns, table, text, overlap);
          ASSERT_EQ(diff(expected, host(matcher, scratch, text, overlap)), "")
              << a.name << " count=" << spec.count << " max_len=" << spec.max_len << " ignore_case=" << ic
              << " size=" << size << " overlap=" << overlap;
          for (std::size_t i = 1; i < expected.size(); ++i) same_position += expected[i].first == expected[i - 1].first;
          ++checked;
          occurrences += expected.size();
        }
      }
    }
  }
  // The sets must be dense enough to exercise the reordering.
  EXPECT_GT(occurrences, 100 * checked);
  EXPECT_GT(same_position, 10 * checked);
}

TEST(HsDatabase, AllModesAgreeOnDenseInput) {
  std::mt19937 rng(11);
  for (bool ic : {false, true}) {
    const std::string seed_text = random_string(rng, "abAB\0\n"s, 3000);
    const PatternSet patterns = random_patterns(rng, "abAB\0\n"s, 200, 30, seed_text, true);
    const PatternTable table(patterns, MatchOptions{.ignore_case = ic});
    const HsDatabase matcher(table);
    auto scratch = matcher.new_scratch();
    for (std::size_t overlap : {std::size_t{0}, std::size_t{29}, std::size_t{1500}}) {
      check_all_modes(patterns, table, matcher, scratch, seed_text, overlap, "seed ic=" + std::to_string(ic));
      check_all_modes(patterns, table, matcher, scratch, random_string(rng, "abAB\0\n"s, 2000), overlap,
                      "random ic=" + std::to_string(ic));
    }
  }
}

// Every occurrence nests in a longer one: the whole scan is one reordering segment.
TEST(HsDatabase, NestedRunsOfOneByte) {
  PatternSet patterns;
  for (std::size_t len = 1; len <= 64; ++len) patterns.add(std::string(len, 'a'));
  patterns.add("ab");
  patterns.add("aab");
  const PatternTable table(patterns, MatchOptions{});
  const HsDatabase matcher(table);
  auto scratch = matcher.new_scratch();
  for (const std::string& text : {std::string(3000, 'a'), std::string(100, 'a') + "b" + std::string(70, 'a') + "b"}) {
    for (std::size_t overlap : {std::size_t{0}, std::size_t{1}, std::size_t{63}, std::size_t{200}})
      check_all_modes(patterns, table, matcher, scratch, text, overlap, "size=" + std::to_string(text.size()));
  }
}

// Hyperscan 5.4's literal API fails hs_scan with HS_UNKNOWN_ERROR (intel/hyperscan#303)
// on text containing a long literal of mostly one repeated byte, when the database has
// another literal too. chunker_fuzz found it twice (tests/fuzz/regressions/chunker_fuzz/
// hs-scan-unknown-error*); the matcher then scans the chunk with the trie walk.
TEST(HsDatabase, HyperscanLiteralBugFallsBackToTheWalk) {
  std::vector<std::vector<std::string>> sets;
  // The front pattern of each set is the long one, which the texts below contain.
  for (std::size_t a : {0u, 2u, 5u})
    for (std::size_t b : {30u, 34u, 40u, 61u})
      sets.push_back({std::string(a, 'x') + "y" + std::string(b, 'x'), "a", "xy"});
  // The pattern set of the fuzz input (-i -w, four patterns), byte for byte.
  sets.push_back({"0"s + std::string(55, '\0') + "\x08"s + std::string(61, '\0'), "aba", "a",
                  "aaaa\x9d\x9e" "a ababab\xff\xff\xff\xf6" "ab\xd0" "a"});
  // The second one (hs-scan-unknown-error-2): a log line beside runs of two bytes.
  sets.push_back({std::string(37, '\xc7') + std::string(39, '\x10') + std::string(46, '\xc7'),
                  "sshd7 WARN  kern\x9c\x93\xc5\xdf\x9b\x96\x8c\x94 sda1 is 91% full"});
  std::mt19937 rng(303);
  for (const auto& set : sets) {
    PatternSet patterns;
    for (const std::string& p : set) patterns.add(p);
    for (bool ic : {false, true}) {
      const PatternTable table(patterns, MatchOptions{.ignore_case = ic});
      const HsDatabase matcher(table);
      auto scratch = matcher.new_scratch();
      const std::string& longest = set.front();
      for (const std::string& text :
           {longest, "aa" + longest + "zz" + longest + "a", random_string(rng, "xXya\0"s, 300) + longest,
            std::string(100, 'x') + "y" + std::string(100, 'x') + "a"}) {
        for (std::size_t overlap : {std::size_t{0}, std::size_t{1}, std::size_t{40}, text.size() - 1})
          check_all_modes(patterns, table, matcher, scratch, text, overlap,
                          "pattern of " + std::to_string(longest.size()) + " bytes, ic=" + std::to_string(ic));
        // The walk and Hyperscan share the scratch: a scan that works still works after one
        // that fell back.
        check_all_modes(patterns, table, matcher, scratch, "xyz a", 0, "after the fallback");
        // The NUL search is done by the fallback too.
        const void* at = std::memchr(text.data(), '\0', text.size());
        std::size_t nul = 0;
        matcher.scan(text.data(), text.size(), 0, scratch, nullptr, nullptr, &nul);
        EXPECT_EQ(nul, at == nullptr ? HsDatabase::kNoNul
                                     : static_cast<std::size_t>(static_cast<const char*>(at) - text.data()));
      }
    }
  }
}

TEST(HsDatabase, NulAndNewlineInPatterns) {
  PatternSet patterns;
  for (const std::string& p : {"\0"s, "\0\0"s, "a\0b"s, "\0A"s, "\n"s, "x\ny"s, "\0\n\0"s, "\n\n"s, "x"s})
    patterns.add(p);
  ASSERT_TRUE(PatternTable(patterns, MatchOptions{}).has_nul_byte());
  std::mt19937 rng(3);
  for (bool ic : {false, true}) {
    const PatternTable table(patterns, MatchOptions{.ignore_case = ic});
    const HsDatabase matcher(table);
    auto scratch = matcher.new_scratch();
    for (int i = 0; i < 20; ++i) {
      const std::string text = random_string(rng, "\0\0aAbxy\n"s, 512);
      const std::size_t overlap = static_cast<std::size_t>(i % 4);
      const auto expected = reference(patterns, table, text, overlap);
      EXPECT_FALSE(expected.empty());
      EXPECT_EQ(diff(expected, host(matcher, scratch, text, overlap)), "") << "ic=" << ic << " i=" << i;
    }
  }
}

// Case folding is ASCII only: '@' '[' '`' '{' and bytes >= 0x80 never fold.
TEST(HsDatabase, IgnoreCaseFoldsAsciiLettersOnly) {
  PatternSet patterns;
  patterns.add_list("HeLLo\nhello\nWORLD\nwOr\n@\n`\n[a\n{Z\n\xc1\xe1\nO w");
  const std::string alphabet = "hHeElLoOwWrRdD @`[{\xc1\xe1";
  std::mt19937 rng(9);
  for (bool ic : {false, true}) {
    const PatternTable table(patterns, MatchOptions{.ignore_case = ic});
    EXPECT_EQ(table.unique_count(), ic ? patterns.size() - 1 : patterns.size());
    const HsDatabase matcher(table);
    auto scratch = matcher.new_scratch();
    std::size_t found = 0;
    for (int i = 0; i < 30; ++i) {
      const std::string text = random_string(rng, alphabet, 4000) + "HELLO hello HeLlO WoRlD [A {z \xc1\xe1";
      const auto expected = reference(patterns, table, text, 0);
      found += expected.size();
      EXPECT_EQ(diff(expected, host(matcher, scratch, text, 0)), "") << "ic=" << ic << " i=" << i;
    }
    EXPECT_GT(found, 0u);
  }
}

TEST(HsDatabase, DuplicatePatternsShareOneId) {
  PatternSet patterns;
  patterns.add_list("abc\nab\nabc\nABC\nb\nab\nAbC\nb");
  for (bool ic : {false, true}) {
    const PatternTable table(patterns, MatchOptions{.ignore_case = ic});
    EXPECT_EQ(table.unique_count(), ic ? 3u : 5u);
    const HsDatabase matcher(table);
    EXPECT_EQ(matcher.unique_count(), table.unique_count());
    auto scratch = matcher.new_scratch();
    const std::string text = "abcABCabCxxAbcab b";
    check_all_modes(patterns, table, matcher, scratch, text, 0, "ic=" + std::to_string(ic));
    check_all_modes(patterns, table, matcher, scratch, text, 4, "ic=" + std::to_string(ic));
  }
}

TEST(HsDatabase, OverlapOwnershipForEveryOverlap) {
  std::mt19937 rng(17);
  PatternSet fixed;
  fixed.add_list("abc\nbcd\nc\ncdab\nd");
  PatternSet random_set = random_patterns(rng, "ab", 60, 9, random_string(rng, "ab", 300));
  const std::pair<const PatternSet*, std::string> cases[] = {
      {&fixed, "abcdabcdabcd"}, {&random_set, random_string(rng, "ab", 150)}, {&random_set, std::string(40, 'a')}};
  for (const auto& [patterns, text] : cases) {
    const PatternTable table(*patterns, MatchOptions{});
    const HsDatabase matcher(table);
    auto scratch = matcher.new_scratch();
    const auto all = reference(*patterns, table, text, 0);
    std::size_t dropped = 0;
    for (std::size_t overlap = 0; overlap <= text.size() + 1; ++overlap) {
      const auto expected = reference(*patterns, table, text, overlap);
      const auto actual = host(matcher, scratch, text, overlap);
      EXPECT_EQ(diff(expected, actual), "") << "text=" << text << " overlap=" << overlap;
      for (const Pair& o : actual)
        EXPECT_GT(o.first + table.unique_length(o.second), overlap) << "owned by the previous chunk";
      dropped += all.size() - actual.size();
    }
    EXPECT_GT(dropped, 0u);
    EXPECT_TRUE(host(matcher, scratch, text, text.size()).empty());
  }
}

TEST(HsDatabase, EmptyTextAndAppending) {
  PatternSet patterns;
  patterns.add_list("a\nab");
  const PatternTable table(patterns, MatchOptions{});
  const HsDatabase matcher(table);
  auto scratch = matcher.new_scratch();
  std::vector<Occurrence> out{{7, 1}, {3, 0}};
  std::vector<std::uint64_t> counts(2, 5);
  EXPECT_EQ(matcher.scan(nullptr, 0, 0, scratch, &out, counts.data()), 0u);
  EXPECT_EQ(matcher.scan("", 0, 0, scratch, &out, counts.data()), 0u);
  EXPECT_EQ(as_pairs(out), (std::vector<Pair>{{7, 1}, {3, 0}}));
  EXPECT_EQ(counts, (std::vector<std::uint64_t>{5, 5}));
  // A scan appends after what `out` holds and adds to the counters.
  const std::string text = "xabaab";
  EXPECT_EQ(matcher.scan(text.data(), text.size(), 0, scratch, &out, counts.data()), 5u);
  std::vector<Pair> expected{{7, 1}, {3, 0}};
  for (const Pair& p : reference(patterns, table, text, 0)) expected.push_back(p);
  EXPECT_EQ(as_pairs(out), expected);
  EXPECT_EQ(counts, (std::vector<std::uint64_t>{5 + 3, 5 + 2}));
}

TEST(HsDatabase, NoUniquePatterns) {
  PatternSet only_empty;
  only_empty.add("");
  PatternSet none;
  for (const PatternSet* patterns : {&only_empty, &none}) {
    const PatternTable table(*patterns, MatchOptions{});
    EXPECT_EQ(table.unique_count(), 0u);
    const HsDatabase matcher(table);
    auto scratch = matcher.new_scratch();
    std::vector<Occurrence> out;
    const std::string text = "abc\n\0x"s;
    EXPECT_EQ(matcher.scan(text.data(), text.size(), 0, scratch, &out, nullptr), 0u);
    EXPECT_TRUE(out.empty());
    EXPECT_TRUE(reference(*patterns, table, text, 0).empty());
  }
}

TEST(HsDatabase, PatternLongerThanText) {
  PatternSet patterns;
  patterns.add_list("abcdefgh\nbcd\nabcd");
  const PatternTable table(patterns, MatchOptions{});
  const HsDatabase matcher(table);
  auto scratch = matcher.new_scratch();
  for (const std::string& text : {"abc"s, "abcd"s, "abcdefg"s, "abcdefgh"s}) {
    const auto expected = reference(patterns, table, text, 0);
    EXPECT_EQ(diff(expected, host(matcher, scratch, text, 0)), "") << text;
    EXPECT_EQ(expected.size(), text.size() >= 8 ? 3u : text.size() >= 4 ? 2u : 0u) << text;
  }
  PatternSet just_long;
  just_long.add(std::string(100, 'x'));
  const PatternTable long_table(just_long, MatchOptions{});
  const HsDatabase long_matcher(long_table);
  auto long_scratch = long_matcher.new_scratch();
  EXPECT_TRUE(host(long_matcher, long_scratch, std::string(99, 'x'), 0).empty());
  EXPECT_EQ(host(long_matcher, long_scratch, std::string(101, 'x'), 0), (std::vector<Pair>{{0, 0}, {1, 0}}));
}

// (Two literals each: a lone literal is OneLiteral's, with no database and no scratch.)
TEST(HsDatabase, ScratchOfAnotherMatcherIsRefused) {
  PatternSet a, b;
  a.add("a");
  a.add("x");
  b.add("b");
  b.add("y");
  const PatternTable ta(a, MatchOptions{}), tb(b, MatchOptions{});
  const HsDatabase ma(ta);
  HsDatabase mb(tb);
  auto scratch_b = mb.new_scratch();
  EXPECT_THROW(ma.scan("aaa", 3, 0, scratch_b, nullptr, nullptr), gpufilter::Error);
  // A moved Scratch keeps working; a moved matcher keeps its database.
  HsDatabase::Scratch moved = std::move(scratch_b);
  EXPECT_EQ(mb.scan("bab", 3, 0, moved, nullptr, nullptr), 2u);
  const HsDatabase mc(std::move(mb));
  EXPECT_EQ(mc.scan("bbb", 3, 0, moved, nullptr, nullptr), 3u);
}

// Real text: OpenSSH log lines, with patterns taken from its words.
TEST(HsDatabase, OpenSshCorpus) {
  const std::string text = gpufilter::test::read_file(gpufilter::test::corpus_path("loghub/OpenSSH_2k.log"));
  ASSERT_GT(text.size(), 100000u);
  std::vector<std::string> words;
  std::string word;
  for (char c : text) {
    if (c == ' ' || c == '\n' || c == '[' || c == ']' || c == ':' || c == '=') {
      if (!word.empty()) words.push_back(word);
      word.clear();
    } else {
      word.push_back(c);
    }
  }
  std::sort(words.begin(), words.end());
  words.erase(std::unique(words.begin(), words.end()), words.end());
  ASSERT_GT(words.size(), 500u);
  std::mt19937 rng(42);
  std::shuffle(words.begin(), words.end(), rng);
  PatternSet patterns;
  for (std::size_t i = 0; i < 400; ++i) patterns.add(words[i]);
  patterns.add_list("sshd\nFailed password\nPAM\nroot\nInvalid user\nLabSZ\nNOT-IN-THE-LOG\nauthentication failure");
  for (bool ic : {false, true}) {
    const PatternTable table(patterns, MatchOptions{.ignore_case = ic});
    const HsDatabase matcher(table);
    auto scratch = matcher.new_scratch();
    for (std::size_t overlap : {std::size_t{0}, std::size_t{12345}}) {
      const auto expected = reference(patterns, table, text, overlap);
      EXPECT_GT(expected.size(), 10000u);
      EXPECT_EQ(diff(expected, host(matcher, scratch, text, overlap)), "") << "ic=" << ic << " overlap=" << overlap;
    }
  }
}

TEST(HsDatabase, ConcurrentScansWithSeparateScratch) {
  std::mt19937 rng(99);
  const std::string seed_text = random_string(rng, "abc\n", 20000);
  const PatternSet patterns = random_patterns(rng, "abc", 500, 20, seed_text);
  const PatternTable table(patterns, MatchOptions{});
  const HsDatabase matcher(table);
  constexpr std::size_t kThreads = 4;
  std::vector<std::string> texts;
  std::vector<std::vector<Pair>> expected;
  for (std::size_t t = 0; t < kThreads; ++t) {
    texts.push_back(t % 2 == 0 ? seed_text.substr(t * 1000, 15000) : random_string(rng, "abc\n", 15000));
    expected.push_back(reference(patterns, table, texts.back(), t));
    ASSERT_FALSE(expected.back().empty());
  }
  std::vector<std::vector<Pair>> results(kThreads);
  std::vector<std::vector<std::uint64_t>> counts(kThreads, std::vector<std::uint64_t>(table.unique_count(), 0));
  std::vector<std::size_t> mismatches(kThreads, 0);
  constexpr int kRounds = 20;
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto scratch = matcher.new_scratch();
      for (int round = 0; round < kRounds; ++round) {
        std::vector<Occurrence> out;
        matcher.scan(texts[t].data(), texts[t].size(), t, scratch, &out, counts[t].data());
        auto pairs = as_pairs(out);
        if (round == 0) results[t] = std::move(pairs);
        else if (pairs != results[t]) ++mismatches[t];
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (std::size_t t = 0; t < kThreads; ++t) {
    EXPECT_EQ(diff(expected[t], results[t]), "") << "thread " << t;
    EXPECT_EQ(mismatches[t], 0u) << "thread " << t;
    auto want = counts_of(expected[t], table.unique_count());
    for (auto& c : want) c *= kRounds;
    EXPECT_EQ(counts[t], want) << "thread " << t;
  }
}

// A larger chunk with dense, nested occurrences: the reordering at scale.
TEST(HsDatabase, OneMebibyteDenseChunk) {
  std::mt19937 rng(5);
  const std::string text = random_string(rng, "abcd\n", 1 << 20);
  const PatternSet patterns = random_patterns(rng, "abcd", 60, 20, text);
  for (bool ic : {false, true}) {
    const PatternTable table(patterns, MatchOptions{.ignore_case = ic});
    const HsDatabase matcher(table);
    auto scratch = matcher.new_scratch();
    for (std::size_t overlap : {std::size_t{0}, table.max_length() - 1, std::size_t{500000}}) {
      const auto expected = reference(patterns, table, text, overlap);
      EXPECT_GT(expected.size(), 10000u);
      EXPECT_EQ(diff(expected, host(matcher, scratch, text, overlap)), "") << "overlap=" << overlap << " ic=" << ic;
    }
  }
}

}  // namespace

namespace {

// The first NUL byte found with the scan (a mapped chunk's binary-file test, searched
// piece by piece after each is scanned) is memchr's, overlap or not, NUL among the
// patterns or not, and the occurrences and counts are those of a scan that does not ask
// for it.
TEST(HsDatabase, TheScanFindsTheFirstNul) {
  std::mt19937 rng(77);
  for (int round = 0; round < 90; ++round) {
    const std::string alphabet = round % 3 == 0 ? "ab\0"s : round % 3 == 1 ? "abc\n" : "xyzXYZ\0"s;
    // Every tenth text is longer than the pieces (256 KiB) the NUL search goes by, so that
    // occurrences straddle their edges; NULs then lie around the first edge.
    const bool long_text = round % 10 == 9;
    std::string text = random_string(rng, long_text ? "ab\n"s : alphabet, long_text ? 700000 + round : 50 + round * 37);
    if (long_text && round % 20 == 9) text[(256u << 10) - 1 + round % 3] = '\0';
    const PatternSet patterns = random_patterns(rng, alphabet, 1 + round % 7, 2 + round % 13, text);
    const PatternTable table(patterns, MatchOptions{.ignore_case = round % 4 == 1});
    const HsDatabase matcher(table);
    auto scratch = matcher.new_scratch();
    if (round % 5 == 4) text.push_back('\0');  // a NUL as the last byte
    const void* at = std::memchr(text.data(), '\0', text.size());
    const std::size_t want = at == nullptr ? HsDatabase::kNoNul : static_cast<std::size_t>(static_cast<const char*>(at) - text.data());
    for (std::size_t overlap : {std::size_t{0}, std::size_t{3}, text.size() / 2, text.size()}) {
      const std::string what = "round " + std::to_string(round) + " overlap " + std::to_string(overlap);
      std::vector<Occurrence> plain, with_nul;
      std::vector<std::uint64_t> plain_counts(table.unique_count(), 0), counts(table.unique_count(), 0);
      const std::uint64_t total = matcher.scan(text.data(), text.size(), overlap, scratch, &plain, plain_counts.data());
      std::size_t nul = 12345;
      EXPECT_EQ(matcher.scan(text.data(), text.size(), overlap, scratch, &with_nul, counts.data(), &nul), total) << what;
      EXPECT_EQ(nul, want) << what;
      EXPECT_EQ(diff(as_pairs(plain), as_pairs(with_nul)), "") << what;
      EXPECT_EQ(counts, plain_counts) << what;
      nul = 12345;
      EXPECT_EQ(matcher.scan(text.data(), text.size(), overlap, scratch, nullptr, nullptr, &nul), total) << what;
      EXPECT_EQ(nul, want) << what;
    }
  }
}

}  // namespace

// One case-sensitive literal is found without Hyperscan (one_literal.hpp): 32 starting
// positions at a time, then one by one near the end. Every length against every text size
// around those blocks, each overlap, runs of one byte (overlapping occurrences) included.
TEST(HsDatabase, OneLiteralAtEveryAlignment) {
  std::mt19937 rng(7);
  const std::string literals[] = {"a", "ab", "aa", "aaaa", "aba", "INFO", "\n", "a\0b"s, "\xff\x80",
                                  std::string(33, 'a'), "session opened for user"};
  for (const std::string& literal : literals) {
    PatternSet patterns;
    patterns.add(literal);
    const PatternTable table(patterns, MatchOptions{});
    const HsDatabase matcher(table);
    auto scratch = matcher.new_scratch();
    for (std::size_t size = 0; size < 100; ++size) {
      for (const std::string& chars : {"ab"s, "a"s, "aINFOb\n\0\xff\x80"s}) {
        std::string text = random_string(rng, chars, size);
        if (size > literal.size() && size % 3 == 0) text.replace(size - literal.size(), literal.size(), literal);
        for (const std::size_t overlap : {std::size_t{0}, size / 2, size}) {
          const auto expected = reference(patterns, table, text, overlap);
          ASSERT_EQ(diff(expected, host(matcher, scratch, text, overlap)), "")
              << "literal of " << literal.size() << ", size " << size << ", overlap " << overlap;
        }
      }
    }
    const std::string dense = random_string(rng, "aINFOb\n", 5000);
    check_all_modes(patterns, table, matcher, scratch, dense, 0, "one literal, dense");
  }
}

// With one_per_line, a scan may leave out occurrences of a line (cut at the eol or a NUL)
// that already has one, never a line's last, and keeps their order. A lone literal's scan
// skips the rest of such a line, within its block of 32 starts or past it: lines of every
// length up to hundreds of bytes.
TEST(HsDatabase, OnePerLineKeepsOneOfEveryLine) {
  std::mt19937 rng(5);
  const std::string alphabets[] = {"aAbBe\n\n \0"s, std::string(60, 'e') + "ab \n"s, std::string(200, 'e') + "\n\0"s};
  for (const std::string& list : {"e"s, "ee"s, "ab\nb"s, "a\naa\nba\nbab"s}) {
    for (bool ic : {false, true}) {
      PatternSet patterns;
      patterns.add_list(list);
      const PatternTable table(patterns, MatchOptions{.ignore_case = ic});
      const HsDatabase matcher(table);
      auto scratch = matcher.new_scratch();
      for (const char eol : {'\n', '\0'}) {
        for (int round = 0; round < 150; ++round) {
          const std::string text = random_string(rng, alphabets[round % 3], static_cast<std::size_t>(round) * 37);
          const std::size_t overlap = static_cast<std::size_t>(round % 3) * text.size() / 4;
          const auto all = reference(patterns, table, text, overlap);
          std::vector<Occurrence> out;
          const std::uint64_t total = matcher.scan(text.data(), text.size(), overlap, scratch, &out, nullptr,
                                                   nullptr, static_cast<unsigned char>(eol));
          EXPECT_EQ(total, out.size());
          const auto kept = as_pairs(out);
          const std::string what = list + " round " + std::to_string(round);
          // In order, and each one of the reference's.
          auto at = all.begin();
          for (const Pair& o : kept) {
            at = std::find(at, all.end(), o);
            ASSERT_NE(at, all.end()) << what << ": kept out of order or not an occurrence";
          }
          const auto line_of = [&](std::size_t position) {
            while (position > 0 && text[position - 1] != eol && text[position - 1] != '\0') --position;
            return position;
          };
          std::set<std::size_t> with, kept_lines;
          for (const Pair& o : all) with.insert(line_of(o.first));
          for (const Pair& o : kept) kept_lines.insert(line_of(o.first));
          EXPECT_EQ(kept_lines, with) << what;
          if (list == "e" && eol == '\n' && round == 149) {
            EXPECT_LT(kept.size(), all.size());
          }
        }
      }
    }
  }
}
