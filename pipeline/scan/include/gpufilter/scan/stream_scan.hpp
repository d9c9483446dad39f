// StreamScan: the scan thread of many streams at once, whatever is done with the lines.
//
//   RecordChannel --batch of whole lines of many inputs--> ScanSlot -> scan
//     -> StreamConsumer: open / lines (with that piece's occurrences) / close, in order
//     -> flush, then acknowledge to the channel what was delivered (for --state files)
//
// Two consumers: StreamGrep's (grep's rules per input, grep/stream_grep.hpp) and
// gpufilterd's rules (daemon/). Between batches, with nothing in flight, the loop can run
// a task on its own thread, such as a reload that replaces the scanner: no line is lost
// or scanned twice across it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "gpufilter/core/record_channel.hpp"
#include "gpufilter/engines/scanner.hpp"
#include "gpufilter/scan/in_flight.hpp"

namespace gpufilter {

class StreamConsumer {
 public:
  virtual ~StreamConsumer() = default;
  virtual void open(const BatchEntry& entry) = 0;
  virtual void close(const BatchEntry& entry) = 0;
  // Whole lines of one stream: piece.data[0..size) at stream offset piece.offset, each
  // line ending in '\n'; occurrences relative to piece.data, in PatternTable::before order.
  virtual void lines(const BatchEntry& entry, const Chunk& piece, std::span<const Occurrence> occurrences) = 0;
  // Output may sit in buffers: write it out (acknowledgements follow).
  virtual void flush() = 0;
  // Called on the scan thread about every idle wait and after each batch (timers).
  virtual void tick() {}
  // A batch was delivered: its bytes and how long it took from submit to delivery.
  virtual void batch_done(std::size_t bytes, double seconds) {
    (void)bytes;
    (void)seconds;
  }
};

class StreamScan {
 public:
  // The scanner must locate occurrences and take chunks at least as large as the batches.
  StreamScan(Scanner& scanner, StreamConsumer& consumer, RecordChannel& channel,
                 std::chrono::milliseconds idle_wait = std::chrono::milliseconds(100));

  // Scans and delivers until the channel is finished, then flushes and acknowledges.
  // Throws DeviceError (and the consumer's errors).
  void run();

  // Thread-safe: runs `task` on the scan thread between batches, with nothing in flight
  // and the output flushed. A task queued after run() has returned never runs: callers
  // wait for it with a timeout.
  void run_between_batches(std::function<void()> task);
  // Only from such a task: scan with `scanner` from the next batch on.
  void replace_scanner(Scanner& scanner) noexcept { in_flight_.replace_scanner(scanner); }
  Scanner& scanner() noexcept { return in_flight_.scanner(); }

  std::uint64_t bytes_scanned() const noexcept { return bytes_; }
  std::uint64_t batches() const noexcept { return batches_; }
  // Seconds during which some batch was in flight (device or host engine busy).
  // Readable from any thread.
  double busy_seconds() const noexcept { return busy_s_.load(std::memory_order_relaxed); }

 private:
  void submit(RecordBatch* batch);
  void deliver_oldest();
  void deliver(const Chunk& chunk, std::span<const Occurrence> occurrences, const std::vector<BatchEntry>& entries);
  void flush();
  void run_tasks();

  using Clock = std::chrono::steady_clock;
  struct Batch {  // what a submitted batch needs to be delivered
    std::vector<BatchEntry> entries;
    Clock::time_point submitted;
  };

  StreamConsumer& consumer_;
  RecordChannel& channel_;
  std::chrono::milliseconds idle_wait_;
  InFlight<Batch> in_flight_;
  std::unordered_map<StreamId, std::uint64_t> acks_;  // delivered, not yet flushed
  std::vector<Occurrence> scratch_;  // one entry's occurrences, relative to its piece
  std::mutex tasks_mutex_;
  std::vector<std::function<void()>> tasks_;
  std::atomic<bool> has_tasks_{false};
  std::uint64_t seq_ = 0;
  std::uint64_t bytes_ = 0;
  std::uint64_t batches_ = 0;
  std::atomic<double> busy_s_{0};
  Clock::time_point busy_since_{};
};

}  // namespace gpufilter
