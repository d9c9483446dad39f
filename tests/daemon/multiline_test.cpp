// Multiline records (daemon/multiline.hpp): which lines begin a record with start,
// continuation or both; full records (max_lines, max_bytes) handed on as they are; the
// timeout; occurrences moved to their place in the joined record; the first line's fields.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpufilter/daemon/multiline.hpp"

namespace gpufilter::daemon {
namespace {

using namespace std::chrono_literals;

struct Joined {
  std::vector<std::string> texts;
  std::vector<std::vector<Occurrence>> occurrences;
  std::vector<std::uint64_t> offsets;
  Joiner::Emit emit() {
    return [this](const Joiner::Record& r) {
      texts.emplace_back(r.text);
      occurrences.emplace_back(r.occurrences.begin(), r.occurrences.end());
      offsets.push_back(r.offset);
    };
  }
};

std::vector<std::string> join(const MultilineConfig& config, const std::vector<std::string>& lines) {
  Joiner joiner(std::make_shared<const Multiline>(config));
  Joined out;
  std::uint64_t offset = 0;
  for (const std::string& l : lines) {
    joiner.line(l, {}, offset, nullptr, Joiner::Clock::now(), out.emit());
    offset += l.size() + 1;
  }
  joiner.flush(out.emit());
  return out.texts;
}

const std::vector<std::string> kTrace = {
    "2026-11-28 ERROR failed", "java.lang.IllegalStateException: x", "\tat a.B.c(B.java:1)",
    "Caused by: java.io.IOException", "\tat d.E.f(E.java:2)", "2026-11-28 INFO ok", "2026-11-28 INFO two"};

TEST(Multiline, StartBeginsRecordsAndEverythingElseContinues) {
  MultilineConfig c;
  c.start = R"(^\d{4}-\d\d-\d\d )";
  EXPECT_EQ(join(c, kTrace),
            (std::vector<std::string>{"2026-11-28 ERROR failed\njava.lang.IllegalStateException: x\n\tat a.B.c(B.java:1)\n"
                                      "Caused by: java.io.IOException\n\tat d.E.f(E.java:2)",
                                      "2026-11-28 INFO ok", "2026-11-28 INFO two"}));
}

TEST(Multiline, ContinuationAloneJoinsOnlyWhatMatches) {
  MultilineConfig c;
  c.continuation = R"(^(\s|Caused by:))";
  EXPECT_EQ(join(c, kTrace), (std::vector<std::string>{"2026-11-28 ERROR failed",
                                                       "java.lang.IllegalStateException: x\n\tat a.B.c(B.java:1)\n"
                                                       "Caused by: java.io.IOException\n\tat d.E.f(E.java:2)",
                                                       "2026-11-28 INFO ok", "2026-11-28 INFO two"}));
  // With a start too, a line matching neither begins a record.
  c.start = "^2026";
  EXPECT_EQ(join(c, kTrace).size(), 4u);
}

TEST(Multiline, FullRecordsAreHandedOnAsTheyAre) {
  MultilineConfig c;
  c.start = "^2026";
  c.max_lines = 2;
  EXPECT_EQ(join(c, kTrace).size(), 5u);  // 5 lines of the trace: 2 + 2 + 1
  c.max_lines = 500;
  c.max_bytes = 40;
  const std::vector<std::string> cut = join(c, kTrace);
  for (const std::string& r : cut) EXPECT_LE(r.size(), 40u) << r;
  EXPECT_EQ(cut.front(), "2026-11-28 ERROR failed");
}

TEST(Multiline, OccurrencesMoveToTheirPlaceAndTheFirstLinesFieldsStay) {
  MultilineConfig c;
  c.start = "^S";
  Joiner joiner(std::make_shared<const Multiline>(c));
  Joined out;
  const auto first = std::make_shared<const RecordFields>(RecordFields{{{"kafka.key", "k1"}}});
  const auto second = std::make_shared<const RecordFields>(RecordFields{{{"kafka.key", "k2"}}});
  const Occurrence o1[] = {{2, 7}};
  const Occurrence o2[] = {{0, 8}, {3, 9}};
  const auto now = Joiner::Clock::now();
  const RecordFields* seen = nullptr;
  const Joiner::Emit emit = [&](const Joiner::Record& r) {
    out.emit()(r);
    seen = r.fields;
  };
  joiner.line("S ab", o1, 100, first, now, emit);
  joiner.line(" xyz", o2, 105, second, now, emit);
  EXPECT_FALSE(joiner.due(now + 999ms));
  EXPECT_TRUE(joiner.due(now + 1s));
  joiner.flush(emit);
  ASSERT_EQ(out.texts.size(), 1u);
  EXPECT_EQ(out.texts[0], "S ab\n xyz");
  EXPECT_EQ(out.offsets[0], 100u);
  ASSERT_EQ(out.occurrences[0].size(), 3u);
  EXPECT_EQ(out.occurrences[0][0].position, 2u);
  EXPECT_EQ(out.occurrences[0][1].position, 5u);
  EXPECT_EQ(out.occurrences[0][2].position, 8u);
  EXPECT_EQ(seen, first.get());
  EXPECT_FALSE(joiner.due(now + 10s));  // nothing waits any more
}

}  // namespace
}  // namespace gpufilter::daemon
