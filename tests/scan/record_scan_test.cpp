// RecordScan on the host engine: records without bytes (packets without payload, the ends
// of flows) still fill a chunk, at RecordScan::kMaxRecords, so the records waiting for
// their results stay bounded by the slots, not by the length of the capture; every record
// is still delivered once, in order, with its occurrences.
#include "gpufilter/scan/record_scan.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gpufilter/hyperscan/host_scanner.hpp"
#include "gpufilter/patterns/pattern_set.hpp"

namespace gpufilter {
namespace {

TEST(RecordScan, EmptyRecordsDoNotPileUp) {
  PatternSet patterns;
  patterns.add("abc");
  const PatternTable table(patterns, MatchOptions{});
  HostScanner scanner(table, ScanConfig{.chunk_bytes = 1 << 20, .slots = 2});
  std::vector<std::uint64_t> tags;
  std::size_t found = 0;
  RecordScan records(scanner, [&](std::uint64_t tag, std::string_view, std::size_t, std::span<const Occurrence> o) {
    tags.push_back(tag);
    found += o.size();
  });
  const std::string abc = "abc";
  const std::span<const std::uint8_t> bytes(reinterpret_cast<const std::uint8_t*>(abc.data()), abc.size());
  constexpr std::uint64_t kRecords = 600000;
  std::size_t most_waiting = 0;
  for (std::uint64_t i = 0; i < kRecords; ++i) {
    // Mostly empty records, a few tiny ones: far less than a chunk of bytes in all.
    records.add(i, i % 1000 == 0 ? bytes : std::span<const std::uint8_t>());
    most_waiting = std::max<std::size_t>(most_waiting, i + 1 - tags.size());
  }
  EXPECT_LE(most_waiting, 4 * RecordScan::kMaxRecords);
  records.finish();
  ASSERT_EQ(tags.size(), kRecords);
  for (std::uint64_t i = 0; i < kRecords; ++i) ASSERT_EQ(tags[i], i);
  EXPECT_EQ(found, kRecords / 1000);
}

}  // namespace
}  // namespace gpufilter
