// Scanner and the scan kernel on a real OpenCL device (PoCL on a CPU-only machine),
// checked occurrence for occurrence against the plain CPU reference matcher.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gpufilter/opencl/device.hpp"
#include "gpufilter/core/errors.hpp"
#include "gpufilter/opencl/scan_program.hpp"
#include "gpufilter/patterns/pattern_set.hpp"
#include "reference_matcher.hpp"
#include "gpufilter/opencl/device_scanner.hpp"
#include "testutil/testutil.hpp"

namespace {

using gpufilter::DeviceContext;
using gpufilter::ScanLayout;
using gpufilter::ScanProgram;
using gpufilter::MatchOptions;
using gpufilter::Occurrence;
using gpufilter::PatternSet;
using gpufilter::PatternTable;
using gpufilter::ScanConfig;
using gpufilter::DeviceScanner;
using gpufilter::Scanner;
using gpufilter::ScanSlot;
using namespace std::string_literals;
using gpufilter::test::as_pairs;
using gpufilter::test::diff;
using gpufilter::test::Pair;
using gpufilter::test::random_patterns;
using gpufilter::test::random_string;
using gpufilter::test::reference;

// Scans `text` as one chunk in a free slot and returns its occurrences.
std::vector<Pair> scan_one(Scanner& scanner, const std::string& text, std::size_t overlap, std::uint64_t seq = 0,
                           std::uint64_t* total = nullptr) {
  ScanSlot* slot = scanner.acquire();
  EXPECT_NE(slot, nullptr);
  if (slot == nullptr) return {};
  std::memcpy(slot->staging(), text.data(), text.size());
  slot->chunk() = gpufilter::Chunk{};
  slot->chunk().seq = seq;
  slot->chunk().offset = 0;
  slot->chunk().data = slot->staging();
  slot->chunk().size = text.size();
  slot->chunk().overlap = overlap;
  scanner.submit(*slot);
  ScanSlot& done = scanner.complete_oldest();
  EXPECT_EQ(&done, slot);
  auto r = as_pairs(done.occurrences());
  if (total != nullptr) *total = done.total();
  scanner.release(done);
  return r;
}

struct Alphabet {
  const char* name;
  std::string chars;
};

std::vector<Alphabet> alphabets() {
  std::string all;
  for (int c = 0; c < 256; ++c) all.push_back(static_cast<char>(c));
  return {{"ab", "ab"}, {"aAbB", "aAbBcC"}, {"nul", "a\0\0b"s}, {"high", "x\x80\xff\xc3Y\n"}, {"all-bytes", all}};
}

TEST(Scanner, RandomPatternSetsMatchReference) {
  GPUFILTER_OPEN_DEVICE(dev);
  std::mt19937 rng(2024);
  struct SetSpec {
    std::size_t count;
    std::size_t max_len;
  };
  const SetSpec sets[] = {{1, 1}, {1, 300}, {3, 4}, {40, 12}, {300, 300}, {2000, 40}};
  const std::size_t chunk_sizes[] = {64, 100, 1000, 4096};
  std::size_t checked = 0, occurrences = 0, matchers = 0;
  for (const Alphabet& a : alphabets()) {
    for (const SetSpec& spec : sets) {
      for (bool ic : {false, true}) {
        const std::string seed_text = random_string(rng, a.chars, 4096);
        const PatternSet patterns = random_patterns(rng, a.chars, spec.count, spec.max_len, seed_text);
        // 1, 2 or 4 start positions per work-item (the GPU default is 4, a CPU device's 1),
        // each walk where its position is or the walks gathered per work-group.
        const unsigned positions = 1u << (matchers % 3);
        // One gate or two: every fourth set its own, so that each meets both layouts.
        const auto gates = matchers % 4 < 2 ? ScanLayout::Gates::kOne : ScanLayout::Gates::kTwo;
        const auto walks = matchers++ % 2 == 0 ? ScanLayout::Walks::kInPlace : ScanLayout::Walks::kCompacted;
        const ScanProgram matcher(*dev, PatternTable(patterns, MatchOptions{.ignore_case = ic}),
                                  ScanLayout{.positions = positions, .walks = walks, .gates = gates});
        const PatternTable& table = matcher.table();
        for (std::size_t chunk : chunk_sizes) {
          const std::size_t slots = 1 + checked % 3;
          DeviceScanner scanner(*dev, matcher, ScanConfig{.chunk_bytes = chunk, .slots = slots});
          for (int round = 0; round < 3; ++round) {
            // A few sizes only: PoCL compiles the kernel once per distinct global size.
            const std::size_t menu[] = {0, 1, 17, chunk / 2 + 1, chunk - 1};
            std::size_t size = round == 0 ? chunk : menu[(checked + static_cast<std::size_t>(round)) % 5];
            // Mostly fresh text; sometimes the text the long patterns came from.
            std::string text = round == 2 ? seed_text.substr(0, size) : random_string(rng, a.chars, size);
            const std::size_t ov_choices[] = {0, table.max_length() - 1, size / 3, size};
            const std::size_t overlap = std::min(size, ov_choices[static_cast<std::size_t>(round + checked) % 4]);
            const auto expected = reference(patterns, table, text, overlap);
            const auto actual = scan_one(scanner, text, overlap);
            ASSERT_EQ(diff(expected, actual), "")
                << a.name << " count=" << spec.count << " max_len=" << spec.max_len << " ignore_case=" << ic
                << " chunk=" << chunk << " slots=" << slots << " size=" << size << " overlap=" << overlap
                << " positions=" << positions << " compacted=" << matcher.compacted()
                << " two_gates=" << matcher.two_gates();
            ++checked;
            occurrences += expected.size();
          }
        }
      }
    }
  }
  EXPECT_GT(occurrences, checked);
}

TEST(Scanner, TenThousandPatterns) {
  GPUFILTER_OPEN_DEVICE(dev);
  std::mt19937 rng(77);
  for (const std::string& alphabet : {"ab"s, "abcdefghijklmnopqrstuvwxyz0123456789 "s}) {
    for (bool ic : {false, true}) {
      const std::string seed_text = random_string(rng, alphabet, 20000);
      const PatternSet patterns = random_patterns(rng, alphabet, 10000, 300, seed_text);
      const ScanProgram matcher(*dev, patterns, MatchOptions{.ignore_case = ic});
      DeviceScanner scanner(*dev, matcher, ScanConfig{.chunk_bytes = 4096, .slots = 2});
      for (std::size_t overlap : {0u, 299u}) {
        const std::string text = seed_text.substr(overlap == 0 ? 0 : 8000, 2500);
        const auto expected = reference(patterns, matcher.table(), text, overlap);
        EXPECT_EQ(diff(expected, scan_one(scanner, text, overlap)), "")
            << "alphabet=" << alphabet << " ignore_case=" << ic << " overlap=" << overlap;
        EXPECT_FALSE(expected.empty());
      }
    }
  }
}

// The compacted kernel (a work-group gathers its walks past the gate, then takes them
// side by side) on sets large enough for auto to choose it on a GPU, 3,000 and 400,000
// patterns of two to eight bytes (so that some walks end at the third byte), against a
// reference by hashing every substring of the set's lengths: both kernels, both cases, 1
// and 4 positions, several sizes and overlaps.
TEST(Scanner, CompactedWalksOnLargeSets) {
  GPUFILTER_OPEN_DEVICE(dev);
  std::mt19937 rng(31);
  const std::string alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123";
  const std::string text = random_string(rng, alphabet + "\n", 1 << 16);
  for (std::size_t count : {std::size_t{3000}, std::size_t{400000}}) {
    PatternSet patterns;
    for (std::size_t i = 0; i < count; ++i) {
      const std::size_t length = 2 + rng() % 7;
      if (i % 10 == 0) {
        patterns.add(text.substr(rng() % (text.size() - length), length));
      } else {
        patterns.add(random_string(rng, alphabet, length));
      }
    }
    for (bool ic : {false, true}) {
      PatternTable table(patterns, MatchOptions{.ignore_case = ic});
      std::unordered_map<std::string_view, std::uint32_t> ids;
      for (std::uint32_t id = 0; id < table.unique_count(); ++id) ids.emplace(table.unique_pattern(id), id);
      for (const auto walks : {ScanLayout::Walks::kInPlace, ScanLayout::Walks::kCompacted}) {
        for (unsigned positions : {1u, 4u}) {
          // The second gate on two of the four layouts, one of each walk and start count.
          const bool two = (walks == ScanLayout::Walks::kCompacted) != (positions == 4u);
          // With a kernel built before the table (as Engines::compile does), for the other
          // start count with the larger set and for either gate count: taken where it fits
          // the layout, else built again.
          const unsigned built_positions = count == 3000 ? positions : 5 - positions;
          const ScanProgram matcher(
              *dev, table,
              ScanLayout{.positions = positions, .walks = walks,
                         .gates = two ? ScanLayout::Gates::kTwo : ScanLayout::Gates::kOne},
              ScanProgram::build_kernel(*dev, positions == 1 ? 1000000 : 0, ScanLayout{.positions = built_positions}));
          ASSERT_EQ(matcher.compacted(), walks == ScanLayout::Walks::kCompacted);
          ASSERT_EQ(matcher.two_gates(), two);
          DeviceScanner scanner(*dev, matcher, ScanConfig{.chunk_bytes = text.size(), .slots = 2});
          for (const auto& [size, overlap] : {std::pair<std::size_t, std::size_t>{text.size(), 0},
                                              {text.size(), 7}, {4097, 3}, {5, 0}, {4, 1}, {3, 0}, {2, 1}}) {
            std::string folded = text.substr(0, size);
            for (char& c : folded) c = static_cast<char>(gpufilter::fold_byte(static_cast<unsigned char>(c), ic));
            std::vector<Pair> expected;
            for (std::size_t p = 0; p < size; ++p)
              for (std::size_t length = 2; length <= 8 && p + length <= size; ++length)
                if (p + length > overlap) {
                  if (const auto it = ids.find(std::string_view(folded).substr(p, length)); it != ids.end())
                    expected.emplace_back(static_cast<std::uint32_t>(p), it->second);
                }
            auto actual = scan_one(scanner, text.substr(0, size), overlap);
            std::sort(expected.begin(), expected.end());
            std::sort(actual.begin(), actual.end());
            ASSERT_EQ(diff(expected, actual), "") << "count=" << count << " ic=" << ic << " compacted=" << matcher.compacted() << " two_gates=" << matcher.two_gates()
                                                  << " positions=" << positions << " size=" << size
                                                  << " overlap=" << overlap;
            if (size == text.size()) {
              EXPECT_GT(expected.size(), 1000u);
            }
          }
        }
      }
    }
  }
}

TEST(Scanner, OneMebibyteChunks) {
  GPUFILTER_OPEN_DEVICE(dev);
  std::mt19937 rng(5);
  const std::string text = random_string(rng, "abcd\n", 1 << 20);
  const PatternSet patterns = random_patterns(rng, "abcd", 60, 20, text);
  for (bool ic : {false, true}) {
    const ScanProgram matcher(*dev, patterns, MatchOptions{.ignore_case = ic});
    DeviceScanner scanner(*dev, matcher, ScanConfig{.chunk_bytes = 1 << 20, .slots = 2});
    for (std::size_t overlap : {std::size_t{0}, matcher.table().max_length() - 1, std::size_t{500000}}) {
      const auto expected = reference(patterns, matcher.table(), text, overlap);
      EXPECT_EQ(diff(expected, scan_one(scanner, text, overlap)), "") << "overlap=" << overlap << " ic=" << ic;
    }
  }
}

TEST(Scanner, MoreOccurrencesThanOutputCapacity) {
  GPUFILTER_OPEN_DEVICE(dev);
  const std::string many(100000, 'a');
  for (const std::string& list : {"a"s, "a\naa\naaa"s}) {
    PatternSet patterns;
    patterns.add_list(list);
    const ScanProgram matcher(*dev, patterns, MatchOptions{});
    for (bool count : {false, true}) {
      // 128 KiB chunks start with room for chunk/16 = 8,192 located occurrences.
      DeviceScanner scanner(*dev, matcher, ScanConfig{.chunk_bytes = 128 << 10, .slots = 1, .count_patterns = count});
      std::vector<std::uint64_t> expected_counts(matcher.table().unique_count(), 0);
      auto add_counts = [&](const std::vector<Pair>& v) {
        for (const Pair& o : v) ++expected_counts[o.second];
      };
      const auto expected = reference(patterns, matcher.table(), many, 0);
      ASSERT_GT(expected.size(), std::size_t{(128 << 10) / 16});
      std::uint64_t total = 0;
      EXPECT_EQ(diff(expected, scan_one(scanner, many, 0, 0, &total)), "") << list;
      EXPECT_EQ(total, expected.size());
      add_counts(expected);
      // The same slot again: a smaller chunk, then a larger one than before.
      const std::string small = "xaxaax";
      const auto expected_small = reference(patterns, matcher.table(), small, 2);
      EXPECT_EQ(diff(expected_small, scan_one(scanner, small, 2, 1)), "") << list;
      add_counts(expected_small);
      const std::string more(120000, 'a');
      const auto expected_more = reference(patterns, matcher.table(), more, 3);
      EXPECT_EQ(diff(expected_more, scan_one(scanner, more, 3, 2)), "") << list;
      add_counts(expected_more);
      if (count) {
        // The rescan that fills the grown buffer must not count twice.
        EXPECT_EQ(scanner.pattern_counts(), expected_counts) << list;
      }
    }
  }
}

// Several slots in flight, each needing the grow-and-rescan path when completed.
TEST(Scanner, GrowWhileOtherSlotsInFlight) {
  GPUFILTER_OPEN_DEVICE(dev);
  PatternSet patterns;
  patterns.add_list("a\nab\nb");
  const ScanProgram matcher(*dev, patterns, MatchOptions{});
  DeviceScanner scanner(*dev, matcher, ScanConfig{.chunk_bytes = 64 << 10, .slots = 3, .count_patterns = true});
  std::mt19937 rng(4);
  std::vector<std::uint64_t> expected_counts(matcher.table().unique_count(), 0);
  for (int round = 0; round < 2; ++round) {
    std::vector<std::string> texts;
    std::vector<ScanSlot*> slots;
    for (int i = 0; i < 3; ++i) {
      texts.push_back(random_string(rng, i == 1 ? "ab"s : "aab\n"s, std::size_t{60000} >> (2 * round)));
      ScanSlot* slot = scanner.acquire();
      ASSERT_NE(slot, nullptr);
      std::memcpy(slot->staging(), texts.back().data(), texts.back().size());
      slot->chunk() = gpufilter::Chunk{};
      slot->chunk().seq = static_cast<std::uint64_t>(i);
      slot->chunk().data = slot->staging();
      slot->chunk().size = texts.back().size();
      slot->chunk().overlap = static_cast<std::size_t>(i);
      scanner.submit(*slot);
      slots.push_back(slot);
    }
    for (int i = 0; i < 3; ++i) {
      ScanSlot& done = scanner.complete_oldest();
      ASSERT_EQ(&done, slots[static_cast<std::size_t>(i)]);
      const auto expected = reference(patterns, matcher.table(), texts[static_cast<std::size_t>(i)], static_cast<std::size_t>(i));
      if (round == 0) {
        EXPECT_GT(expected.size(), std::size_t{(64 << 10) / 16});
      }
      for (const Pair& o : expected) ++expected_counts[o.second];
      EXPECT_EQ(diff(expected, as_pairs(done.occurrences())), "") << "round " << round << " chunk " << i;
    }
    for (ScanSlot* s : slots) scanner.release(*s);
  }
  EXPECT_EQ(scanner.pattern_counts(), expected_counts);
}

TEST(Scanner, NulBytesInTextAndPatterns) {
  GPUFILTER_OPEN_DEVICE(dev);
  PatternSet patterns;
  patterns.add_file_contents("\0\n\0\0\na\0b\n\0A\nx\n"s);
  std::mt19937 rng(3);
  for (bool ic : {false, true}) {
    const ScanProgram matcher(*dev, patterns, MatchOptions{.ignore_case = ic});
    DeviceScanner scanner(*dev, matcher, ScanConfig{.chunk_bytes = 512, .slots = 2});
    for (int i = 0; i < 20; ++i) {
      const std::string text = random_string(rng, "\0\0aAbx\n"s, 512);
      const std::size_t overlap = static_cast<std::size_t>(i % 4);
      const auto expected = reference(patterns, matcher.table(), text, overlap);
      EXPECT_FALSE(expected.empty());
      EXPECT_EQ(diff(expected, scan_one(scanner, text, overlap)), "") << "ic=" << ic << " i=" << i;
    }
  }
}

TEST(Scanner, OverlapOwnership) {
  GPUFILTER_OPEN_DEVICE(dev);
  PatternSet patterns;
  patterns.add_list("abc\nbcd\nc\ncdab\nd");
  const ScanProgram matcher(*dev, patterns, MatchOptions{});
  DeviceScanner scanner(*dev, matcher, ScanConfig{.chunk_bytes = 64, .slots = 2});
  const std::string text = "abcdabcdabcd";
  std::size_t seen_dropped = 0;
  const auto all = reference(patterns, matcher.table(), text, 0);
  for (std::size_t overlap = 0; overlap <= text.size(); ++overlap) {
    const auto expected = reference(patterns, matcher.table(), text, overlap);
    const auto actual = scan_one(scanner, text, overlap);
    EXPECT_EQ(diff(expected, actual), "") << "overlap=" << overlap;
    for (const Pair& o : actual)
      EXPECT_GT(o.first + matcher.table().unique_length(o.second), overlap) << "owned by the previous chunk";
    seen_dropped += all.size() - actual.size();
  }
  EXPECT_GT(seen_dropped, 0u);
}

TEST(Scanner, EmptyChunk) {
  GPUFILTER_OPEN_DEVICE(dev);
  PatternSet patterns;
  patterns.add("a");
  const ScanProgram matcher(*dev, patterns, MatchOptions{});
  DeviceScanner scanner(*dev, matcher, ScanConfig{.chunk_bytes = 64, .slots = 2, .count_patterns = true});
  std::uint64_t total = 99;
  EXPECT_TRUE(scan_one(scanner, "", 0, 0, &total).empty());
  EXPECT_EQ(total, 0u);
  EXPECT_EQ(scan_one(scanner, "aa", 0, 1), reference(patterns, matcher.table(), "aa", 0));
  EXPECT_EQ(scanner.pattern_counts(), (std::vector<std::uint64_t>{2}));
}

TEST(Scanner, PatternCountsSumOverChunks) {
  GPUFILTER_OPEN_DEVICE(dev);
  std::mt19937 rng(8);
  for (bool ic : {false, true}) {
    const std::string seed_text = random_string(rng, "abAB\0"s, 3000);
    const PatternSet patterns = random_patterns(rng, "abAB\0"s, 200, 30, seed_text);
    const ScanProgram matcher(*dev, patterns, MatchOptions{.ignore_case = ic});
    for (bool locate : {true, false}) {
      DeviceScanner scanner(*dev, matcher,
                      ScanConfig{.chunk_bytes = 1000, .slots = 3, .locate = locate, .count_patterns = true});
      std::vector<std::uint64_t> expected(matcher.table().unique_count(), 0);
      for (int i = 0; i < 12; ++i) {
        const std::size_t size = std::size_t{1000} >> (i % 4);
        const std::string text = i % 3 == 0 ? seed_text.substr(static_cast<std::size_t>(i) * 100, size)
                                            : random_string(rng, "abAB\0"s, size);
        const std::size_t overlap = std::min(size, static_cast<std::size_t>(i * 7));
        const auto ref = reference(patterns, matcher.table(), text, overlap);
        for (const Pair& o : ref) ++expected[o.second];
        std::uint64_t total = 0;
        const auto actual = scan_one(scanner, text, overlap, static_cast<std::uint64_t>(i), &total);
        EXPECT_EQ(total, ref.size()) << "chunk " << i;
        if (locate) EXPECT_EQ(diff(ref, actual), "") << "chunk " << i;
        else EXPECT_TRUE(actual.empty()) << "located although locate=false";
      }
      EXPECT_EQ(scanner.pattern_counts(), expected) << "ic=" << ic << " locate=" << locate;
    }
  }
  // Without count_patterns: zeros.
  PatternSet p;
  p.add("a");
  const ScanProgram m(*dev, p, MatchOptions{});
  DeviceScanner s(*dev, m, ScanConfig{.chunk_bytes = 64, .slots = 2});
  scan_one(s, "aaaa", 0);
  EXPECT_EQ(s.pattern_counts(), (std::vector<std::uint64_t>{0}));
}

TEST(Scanner, SeveralChunksInFlight) {
  GPUFILTER_OPEN_DEVICE(dev);
  std::mt19937 rng(31);
  const std::string seed_text = random_string(rng, "abc\n", 5000);
  const PatternSet patterns = random_patterns(rng, "abc", 100, 25, seed_text);
  const ScanProgram matcher(*dev, patterns, MatchOptions{});
  for (std::size_t slots : {1u, 2u, 3u}) {
    DeviceScanner scanner(*dev, matcher, ScanConfig{.chunk_bytes = 2048, .slots = slots});
    // Fill every slot, complete in order, and keep a random number in flight.
    std::vector<std::pair<std::string, std::size_t>> inputs;  // text, overlap (by seq)
    std::vector<ScanSlot*> order;
    std::uint64_t next_seq = 0, next_done = 0;
    for (int step = 0; step < 60; ++step) {
      ScanSlot* slot = scanner.acquire();
      const bool complete = slot == nullptr || (scanner.in_flight() > 0 && rng() % 3 == 0);
      if (slot != nullptr && complete) {
        scanner.release(*slot);
        slot = nullptr;
      }
      if (slot != nullptr) {
        const std::size_t size = std::size_t{2048} >> (rng() % 5);
        const std::size_t at = std::uniform_int_distribution<std::size_t>(0, seed_text.size() - size)(rng);
        std::string text = seed_text.substr(at, size);
        const std::size_t overlap = std::min<std::size_t>(size, rng() % 40);
        std::memcpy(slot->staging(), text.data(), text.size());
        slot->chunk() = gpufilter::Chunk{};
        slot->chunk().seq = next_seq++;
        slot->chunk().offset = at;
        slot->chunk().data = slot->staging();
        slot->chunk().size = size;
        slot->chunk().overlap = overlap;
        scanner.submit(*slot);
        inputs.emplace_back(std::move(text), overlap);
        order.push_back(slot);
        ASSERT_LE(scanner.in_flight(), slots);
      } else {
        ASSERT_GT(scanner.in_flight(), 0u);
        ScanSlot& done = scanner.complete_oldest();
        ASSERT_EQ(&done, order[next_done]) << "slots complete in submission order";
        ASSERT_EQ(done.chunk().seq, next_done);
        const auto& [text, overlap] = inputs[next_done];
        EXPECT_EQ(diff(reference(patterns, matcher.table(), text, overlap), as_pairs(done.occurrences())), "")
            << "slots=" << slots << " seq=" << next_done;
        ++next_done;
        scanner.release(done);
      }
    }
    while (scanner.in_flight() > 0) {
      ScanSlot& done = scanner.complete_oldest();
      const auto& [text, overlap] = inputs[next_done];
      EXPECT_EQ(diff(reference(patterns, matcher.table(), text, overlap), as_pairs(done.occurrences())), "")
          << "slots=" << slots << " seq=" << next_done;
      ++next_done;
      scanner.release(done);
    }
    EXPECT_EQ(next_done, next_seq);
    EXPECT_GT(next_seq, 10u);
  }
}

TEST(Scanner, ThreeSubmittedThenCompletedInOrder) {
  GPUFILTER_OPEN_DEVICE(dev);
  PatternSet patterns;
  patterns.add_list("ab\nb\nbba");
  const ScanProgram matcher(*dev, patterns, MatchOptions{});
  DeviceScanner scanner(*dev, matcher, ScanConfig{.chunk_bytes = 256, .slots = 3});
  const std::string texts[3] = {"abba abba", "bbbbbbbbab", "nothing here"};
  ScanSlot* slots[3];
  for (int i = 0; i < 3; ++i) {
    slots[i] = scanner.acquire();
    ASSERT_NE(slots[i], nullptr);
    std::memcpy(slots[i]->staging(), texts[i].data(), texts[i].size());
    slots[i]->chunk() = gpufilter::Chunk{};
    slots[i]->chunk().seq = static_cast<std::uint64_t>(i);
    slots[i]->chunk().data = slots[i]->staging();
    slots[i]->chunk().size = texts[i].size();
    scanner.submit(*slots[i]);
  }
  EXPECT_EQ(scanner.acquire(), nullptr);
  EXPECT_EQ(scanner.in_flight(), 3u);
  for (int i = 0; i < 3; ++i) {
    ScanSlot& done = scanner.complete_oldest();
    EXPECT_EQ(&done, slots[i]);
    EXPECT_EQ(diff(reference(patterns, matcher.table(), texts[i], 0), as_pairs(done.occurrences())), "") << i;
    EXPECT_EQ(done.total(), done.occurrences().size());
  }
  EXPECT_EQ(scanner.in_flight(), 0u);
  for (ScanSlot* s : slots) scanner.release(*s);

  // discard_in_flight drops results and frees every slot.
  for (int i = 0; i < 3; ++i) {
    ScanSlot* s = scanner.acquire();
    ASSERT_NE(s, nullptr);
    std::memcpy(s->staging(), texts[0].data(), texts[0].size());
    s->chunk() = gpufilter::Chunk{};
    s->chunk().data = s->staging();
    s->chunk().size = texts[0].size();
    scanner.submit(*s);
  }
  scanner.discard_in_flight();
  EXPECT_EQ(scanner.in_flight(), 0u);
  EXPECT_EQ(diff(reference(patterns, matcher.table(), texts[1], 0), scan_one(scanner, texts[1], 0)), "");
}

}  // namespace

namespace {

// The host path for small chunks (ScanConfig::host_scan_below) against the device path:
// the same chunks, in the same slots, give the same occurrences, totals and per-pattern
// counts, byte for byte, across alphabets, case folding, overlaps, NUL bytes and
// match-dense text.
TEST(Scanner, HostPathForSmallChunksEqualsDevicePath) {
  GPUFILTER_OPEN_DEVICE(dev);
  std::mt19937 rng(44);
  std::size_t host_scanned = 0;
  for (const Alphabet& a : alphabets()) {
    for (bool ic : {false, true}) {
      const std::string seed_text = random_string(rng, a.chars, 6000);
      const PatternSet patterns = random_patterns(rng, a.chars, 300, 24, seed_text, true);
      const ScanProgram matcher(*dev, patterns, MatchOptions{.ignore_case = ic});
      const ScanConfig base{.chunk_bytes = 4096, .slots = 3, .locate = true, .count_patterns = true};
      ScanConfig on_host = base;
      on_host.host_scan_below = 4097;  // every chunk
      ScanConfig on_device = base;
      on_device.host_scan_below = 0;
      DeviceScanner host(*dev, matcher, on_host);
      DeviceScanner device(*dev, matcher, on_device);
      for (int i = 0; i < 20; ++i) {
        const std::size_t size = 1 + rng() % 4096;
        const std::string text = i % 2 == 0 ? seed_text.substr(rng() % (seed_text.size() - size), size)
                                            : random_string(rng, a.chars, size);
        const std::size_t overlap = std::min<std::size_t>(size, rng() % 40);
        std::uint64_t host_total = 0, device_total = 0;
        const auto from_host = scan_one(host, text, overlap, static_cast<std::uint64_t>(i), &host_total);
        const auto from_device = scan_one(device, text, overlap, static_cast<std::uint64_t>(i), &device_total);
        EXPECT_EQ(diff(from_device, from_host), "") << a.name << " ic=" << ic << " chunk " << i;
        EXPECT_EQ(host_total, device_total) << a.name << " ic=" << ic << " chunk " << i;
        EXPECT_EQ(diff(reference(patterns, matcher.table(), text, overlap), from_host), "") << a.name;
      }
      EXPECT_EQ(host.pattern_counts(), device.pattern_counts()) << a.name << " ic=" << ic;
      EXPECT_EQ(host.host_chunks(), 20u);
      EXPECT_EQ(device.host_chunks(), 0u);
      host_scanned += host.host_chunks();
    }
  }
  EXPECT_GT(host_scanned, 0u);
}

// Below the threshold on the host, at or above it on the device, interleaved in one
// scanner: results still come back in submission order and equal the reference.
TEST(Scanner, HostAndDeviceChunksInterleaveInOrder) {
  GPUFILTER_OPEN_DEVICE(dev);
  std::mt19937 rng(45);
  const std::string seed_text = random_string(rng, "abc\n", 20000);
  const PatternSet patterns = random_patterns(rng, "abc", 100, 12, seed_text);
  const ScanProgram matcher(*dev, patterns, MatchOptions{});
  DeviceScanner scanner(*dev, matcher, ScanConfig{.chunk_bytes = 8192, .slots = 3, .host_scan_below = 1024});
  std::vector<std::string> texts;
  for (int i = 0; i < 30; ++i) {
    const std::size_t size = i % 2 == 0 ? 1 + rng() % 1023 : 1024 + rng() % 7000;
    texts.push_back(seed_text.substr(rng() % (seed_text.size() - size), size));
  }
  std::size_t next_done = 0;
  auto complete = [&] {
    ScanSlot& done = scanner.complete_oldest();
    EXPECT_EQ(done.chunk().seq, next_done);
    EXPECT_EQ(diff(reference(patterns, matcher.table(), texts[next_done], 0), as_pairs(done.occurrences())), "")
        << "chunk " << next_done;
    ++next_done;
    scanner.release(done);
  };
  for (std::size_t i = 0; i < texts.size(); ++i) {
    ScanSlot* slot = scanner.acquire();
    if (slot == nullptr) {
      complete();
      slot = scanner.acquire();
    }
    std::memcpy(slot->staging(), texts[i].data(), texts[i].size());
    slot->chunk() = gpufilter::Chunk{};
    slot->chunk().seq = i;
    slot->chunk().data = slot->staging();
    slot->chunk().size = texts[i].size();
    scanner.submit(*slot);
  }
  while (scanner.in_flight() > 0) complete();
  EXPECT_EQ(next_done, texts.size());
  EXPECT_EQ(scanner.host_chunks(), 15u);
}

}  // namespace
