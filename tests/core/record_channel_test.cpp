// RecordChannel: whole lines only, bounded batches, backpressure and its wake-up, events
// kept in order with the lines around them, and the consumer taking a partial batch at once.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpufilter/core/record_channel.hpp"

namespace {

using gpufilter::BatchEntry;
using gpufilter::RecordBatch;
using gpufilter::RecordChannel;
using gpufilter::StreamId;
using std::chrono::milliseconds;

std::string bytes_of(const RecordBatch& b, const BatchEntry& e) {
  return std::string(b.bytes.data() + e.begin, e.end - e.begin);
}

TEST(RecordChannel, AppendsWholeLinesAndStopsWhenEveryBatchIsTaken) {
  RecordChannel channel(RecordChannel::Config{16, 2});
  int calls = 0;
  channel.set_space_callback([&] { ++calls; });
  const StreamId s = channel.new_stream_id();
  // 3 + 6 + 9 bytes: the third line does not fit in the first batch's 16.
  const std::string lines = "ab\nabcde\nabcdefgh\nabcdefghijklm\n";
  const std::size_t taken = channel.append(s, 100, lines);
  // Batch 1: "ab\nabcde\n" (9), batch 2: "abcdefgh\n" (9); the 14-byte line does not fit.
  EXPECT_EQ(taken, 18u);
  RecordBatch* first = channel.take(milliseconds(0));
  ASSERT_NE(first, nullptr);
  ASSERT_EQ(first->entries.size(), 1u);
  EXPECT_EQ(bytes_of(*first, first->entries[0]), "ab\nabcde\n");
  EXPECT_EQ(first->entries[0].offset, 100u);
  EXPECT_EQ(calls, 0);
  channel.recycle(first);
  EXPECT_EQ(calls, 1);  // the short append is told once
  EXPECT_EQ(channel.append(s, 118, std::string_view(lines).substr(18)), 14u);
  RecordBatch* second = channel.take(milliseconds(0));
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(bytes_of(*second, second->entries[0]), "abcdefgh\n");
  EXPECT_EQ(second->entries[0].offset, 109u);
  RecordBatch* third = channel.take(milliseconds(0));
  ASSERT_NE(third, nullptr);
  EXPECT_EQ(bytes_of(*third, third->entries[0]), "abcdefghijklm\n");
  EXPECT_EQ(third->entries[0].offset, 118u);
  EXPECT_EQ(channel.take(milliseconds(0)), nullptr);
}

TEST(RecordChannel, EventsStayInOrderWhenNoBatchIsFree) {
  RecordChannel channel(RecordChannel::Config{8, 2});
  const StreamId a = channel.new_stream_id(), b = channel.new_stream_id();
  channel.open(a, "a");
  EXPECT_EQ(channel.append(a, 0, "1234567\n"), 8u);  // fills batch 1
  EXPECT_EQ(channel.append(a, 8, "1234567\n"), 8u);  // fills batch 2
  channel.close(a);                                  // no batch free: waits
  channel.open(b, "b");
  EXPECT_EQ(channel.append(b, 0, "x\n"), 0u);  // backpressure
  RecordBatch* one = channel.take(milliseconds(0));
  RecordBatch* two = channel.take(milliseconds(0));
  ASSERT_TRUE(one && two);
  EXPECT_EQ(one->entries.front().kind, BatchEntry::Kind::kOpen);
  channel.recycle(one);
  EXPECT_EQ(channel.append(b, 0, "x\n"), 2u);
  RecordBatch* three = channel.take(milliseconds(0));
  ASSERT_NE(three, nullptr);
  ASSERT_EQ(three->entries.size(), 3u);
  EXPECT_EQ(three->entries[0].kind, BatchEntry::Kind::kClose);
  EXPECT_EQ(three->entries[0].stream, a);
  EXPECT_EQ(three->entries[1].kind, BatchEntry::Kind::kOpen);
  EXPECT_EQ(three->entries[1].name, "b");
  EXPECT_EQ(three->entries[2].kind, BatchEntry::Kind::kLines);
  channel.recycle(two);
  channel.recycle(three);
  channel.finish();
  EXPECT_TRUE(channel.finished());
}

TEST(RecordChannel, LinesOfOneStreamMergeOnlyWhenContiguous) {
  RecordChannel channel(RecordChannel::Config{64, 2});
  const StreamId a = channel.new_stream_id(), b = channel.new_stream_id();
  channel.append(a, 0, "a1\n");
  channel.append(a, 3, "a2\n");     // contiguous: one entry
  channel.append(b, 0, "b1\n");
  channel.append(a, 6, "a3\n");     // after b's: a new entry
  channel.append(a, 50, "a9\n", 1);  // a gap (a dropped line): a new entry with skipped=1
  RecordBatch* batch = channel.take(milliseconds(0));
  ASSERT_NE(batch, nullptr);
  ASSERT_EQ(batch->entries.size(), 4u);
  EXPECT_EQ(bytes_of(*batch, batch->entries[0]), "a1\na2\n");
  EXPECT_EQ(bytes_of(*batch, batch->entries[1]), "b1\n");
  EXPECT_EQ(bytes_of(*batch, batch->entries[2]), "a3\n");
  EXPECT_EQ(batch->entries[3].offset, 50u);
  EXPECT_EQ(batch->entries[3].skipped, 1u);
}

TEST(RecordChannel, LinesOfDifferentRecordsKeepTheirOwnFields) {
  RecordChannel channel(RecordChannel::Config{64, 2});
  const StreamId a = channel.new_stream_id();
  auto one = std::make_shared<gpufilter::RecordFields>(gpufilter::RecordFields{{{"kafka.key", "one"}}});
  auto two = std::make_shared<gpufilter::RecordFields>(gpufilter::RecordFields{{{"kafka.key", "two"}}});
  channel.append(a, 0, "r1 line 1\n", 0, one);
  channel.append(a, 10, "r1 line 2\n", 0, one);  // the same record: one entry
  channel.append(a, 20, "r2\n", 0, two);         // contiguous, but another record
  channel.append(a, 23, "plain\n");              // no fields: another entry
  RecordBatch* batch = channel.take(milliseconds(0));
  ASSERT_NE(batch, nullptr);
  ASSERT_EQ(batch->entries.size(), 3u);
  EXPECT_EQ(bytes_of(*batch, batch->entries[0]), "r1 line 1\nr1 line 2\n");
  EXPECT_EQ(batch->entries[0].fields, one);
  EXPECT_EQ(batch->entries[1].fields, two);
  EXPECT_EQ(batch->entries[2].fields, nullptr);
}

TEST(RecordChannel, RefusesPiecesThatAreNotWholeLines) {
  RecordChannel channel(RecordChannel::Config{8, 2});
  EXPECT_THROW(channel.append(1, 0, "no newline"), std::invalid_argument);
  EXPECT_THROW(channel.append(1, 0, "longer than a batch\n"), std::invalid_argument);
}

TEST(RecordChannel, TakeWaitsAndWakes) {
  RecordChannel channel(RecordChannel::Config{64, 2});
  EXPECT_EQ(channel.take(milliseconds(10)), nullptr);
  channel.wake();
  EXPECT_EQ(channel.take(milliseconds(-1)), nullptr);  // woken, not blocked forever
  channel.finish();
  EXPECT_EQ(channel.take(milliseconds(-1)), nullptr);
  EXPECT_TRUE(channel.finished());
}

}  // namespace
