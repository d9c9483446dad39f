#include "gpufilter/scan/stream_scan.hpp"

#include <cstring>

namespace gpufilter {

StreamScan::StreamScan(Scanner& scanner, StreamConsumer& consumer, RecordChannel& channel,
                               std::chrono::milliseconds idle_wait)
    : consumer_(consumer), channel_(channel), idle_wait_(idle_wait), in_flight_(scanner) {}

void StreamScan::run_between_batches(std::function<void()> task) {
  {
    std::lock_guard lock(tasks_mutex_);
    tasks_.push_back(std::move(task));
    has_tasks_ = true;
  }
  channel_.wake();
}

void StreamScan::run_tasks() {
  while (!in_flight_.empty()) deliver_oldest();
  flush();
  std::vector<std::function<void()>> tasks;
  {
    std::lock_guard lock(tasks_mutex_);
    tasks.swap(tasks_);
    has_tasks_ = false;
  }
  for (auto& task : tasks) task();
}

void StreamScan::run() {
  bool unflushed = false;  // output may sit in the consumer's buffers, acknowledgements pending
  try {
    for (;;) {
      if (has_tasks_.load()) {
        run_tasks();
        unflushed = false;
      }
      if (in_flight_.full()) {
        deliver_oldest();
        unflushed = true;
        continue;
      }
      // Never wait for input while results or output are waiting.
      const bool busy = !in_flight_.empty() || unflushed;
      RecordBatch* batch = channel_.take(busy ? std::chrono::milliseconds(0) : idle_wait_);
      if (batch != nullptr) {
        if (batch->size == 0) {
          // Only opens and closes: they follow every line submitted before them.
          while (!in_flight_.empty()) deliver_oldest();
          const std::vector<BatchEntry> entries = std::move(batch->entries);
          channel_.recycle(batch);
          deliver(Chunk{}, {}, entries);
        } else {
          submit(batch);
        }
        unflushed = true;
        continue;
      }
      if (!in_flight_.empty()) {
        deliver_oldest();
        continue;
      }
      if (unflushed) {
        flush();
        unflushed = false;
        continue;
      }
      consumer_.tick();
      if (channel_.finished()) break;
    }
  } catch (...) {
    try {
      in_flight_.discard();
    } catch (...) {
      // The first error is the one to report.
    }
    throw;
  }
  flush();
}

void StreamScan::submit(RecordBatch* batch) {
  ScanSlot* slot = in_flight_.scanner().acquire();  // one is free: run() delivers when all are in flight
  Chunk& chunk = slot->chunk();
  chunk = Chunk{};
  chunk.seq = seq_++;
  chunk.data = slot->staging();
  chunk.size = batch->size;
  std::memcpy(chunk.data, batch->bytes.data(), batch->size);
  const Clock::time_point now = Clock::now();
  if (in_flight_.empty()) busy_since_ = now;
  std::vector<BatchEntry> entries = std::move(batch->entries);
  channel_.recycle(batch);  // the reader may refill it while this one scans
  in_flight_.submit(*slot, Batch{std::move(entries), now});
  bytes_ += chunk.size;
  ++batches_;
}

void StreamScan::deliver_oldest() {
  auto [slot, done] = in_flight_.complete_oldest();
  const Clock::time_point now = Clock::now();
  if (in_flight_.empty())
    busy_s_.store(busy_s_.load(std::memory_order_relaxed) + std::chrono::duration<double>(now - busy_since_).count(),
                  std::memory_order_relaxed);
  try {
    deliver(slot.chunk(), slot.occurrences(), done.entries);
    consumer_.batch_done(slot.chunk().size, std::chrono::duration<double>(now - done.submitted).count());
  } catch (...) {
    in_flight_.release(slot);
    throw;
  }
  in_flight_.release(slot);
  consumer_.tick();
}

void StreamScan::deliver(const Chunk& chunk, std::span<const Occurrence> occurrences,
                             const std::vector<BatchEntry>& entries) {
  std::size_t index = 0;  // occurrences are sorted by position; entries by their bytes
  std::vector<Occurrence>& piece_occurrences = scratch_;
  for (const BatchEntry& e : entries) {
    switch (e.kind) {
      case BatchEntry::Kind::kOpen: consumer_.open(e); break;
      case BatchEntry::Kind::kClose: consumer_.close(e); break;
      case BatchEntry::Kind::kLines: {
        while (index < occurrences.size() && occurrences[index].position < e.begin) ++index;
        piece_occurrences.clear();
        for (; index < occurrences.size() && occurrences[index].position < e.end; ++index)
          piece_occurrences.push_back(
              Occurrence{occurrences[index].position - static_cast<std::uint32_t>(e.begin), occurrences[index].pattern});
        Chunk piece;
        piece.seq = chunk.seq;
        piece.offset = e.offset;
        piece.data = chunk.data + e.begin;
        piece.size = e.end - e.begin;
        acks_[e.stream] = e.offset + (e.end - e.begin);
        consumer_.lines(e, piece, piece_occurrences);
        break;
      }
    }
  }
}

void StreamScan::flush() {
  consumer_.flush();
  for (const auto& [stream, offset] : acks_) channel_.acknowledge(stream, offset);
  acks_.clear();
}

}  // namespace gpufilter
