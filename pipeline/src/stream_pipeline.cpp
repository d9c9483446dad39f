#include "gpufilter/pipeline/stream_pipeline.hpp"

#include <algorithm>
#include <cstring>

namespace gpufilter {

StreamPipeline::StreamPipeline(Scanner& scanner, SearchOptions options, Sink& sink, RecordChannel& channel,
                               StreamPipelineConfig config)
    : scanner_(scanner), options_(options), sink_(sink), channel_(channel), config_(config) {}

StreamPipeline::~StreamPipeline() = default;

void StreamPipeline::run() {
  bool unflushed = false;  // output may sit in the sink's buffer, acknowledgements pending
  try {
    for (;;) {
      if (scanner_.in_flight() > 0 && scanner_.in_flight() >= scanner_.slot_count()) {
        deliver_oldest();
        unflushed = true;
        continue;
      }
      // Never wait for input while results or output are waiting.
      const bool busy = scanner_.in_flight() > 0 || unflushed;
      RecordBatch* batch = channel_.take(busy ? std::chrono::milliseconds(0) : config_.idle_wait);
      if (batch != nullptr) {
        if (batch->size == 0) {
          // Only opens and closes: they follow every line submitted before them.
          while (scanner_.in_flight() > 0) deliver_oldest();
          const std::vector<BatchEntry> entries = std::move(batch->entries);
          channel_.recycle(batch);
          deliver(Chunk{}, {}, entries);
        } else {
          submit(batch);
        }
        unflushed = true;
        continue;
      }
      if (scanner_.in_flight() > 0) {
        deliver_oldest();
        continue;
      }
      if (unflushed) {
        flush();
        unflushed = false;
        continue;
      }
      if (channel_.finished()) break;
    }
  } catch (...) {
    try {
      scanner_.discard_in_flight();
    } catch (...) {
      // The first error is the one to report.
    }
    throw;
  }
  for (auto& [id, input] : inputs_) finish(input);
  for (auto& [id, input] : parked_) finish(input);
  flush();
}

void StreamPipeline::submit(RecordBatch* batch) {
  ScanSlot* slot = scanner_.acquire();  // one is free: run() delivers when all are in flight
  Chunk& chunk = slot->chunk();
  chunk = Chunk{};
  chunk.seq = seq_++;
  chunk.data = slot->staging();
  chunk.size = batch->size;
  std::memcpy(chunk.data, batch->bytes.data(), batch->size);
  in_flight_.push_back(std::move(batch->entries));
  channel_.recycle(batch);  // the reader may refill it while this one scans
  scanner_.submit(*slot);
  bytes_ += chunk.size;
  ++batches_;
}

void StreamPipeline::deliver_oldest() {
  ScanSlot& slot = scanner_.complete_oldest();
  const std::vector<BatchEntry> entries = std::move(in_flight_.front());
  in_flight_.pop_front();
  try {
    deliver(slot.chunk(), slot.occurrences(), entries);
  } catch (...) {
    scanner_.release(slot);
    throw;
  }
  scanner_.release(slot);
}

void StreamPipeline::deliver(const Chunk& chunk, std::span<const Occurrence> occurrences,
                             const std::vector<BatchEntry>& entries) {
  std::size_t index = 0;  // occurrences are sorted by position; entries by their bytes
  for (const BatchEntry& e : entries) {
    switch (e.kind) {
      case BatchEntry::Kind::kOpen: open(e); break;
      case BatchEntry::Kind::kClose: close(e); break;
      case BatchEntry::Kind::kLines: lines(e, chunk, occurrences, index); break;
    }
  }
}

void StreamPipeline::open(const BatchEntry& e) {
  if (e.continues != kNoStream) {
    auto parked = parked_.find(e.continues);
    if (parked != parked_.end()) {
      inputs_.emplace(e.stream, std::move(parked->second));
      parked_.erase(parked);
      return;
    }
  }
  Input input;
  input.searcher = std::make_unique<Searcher>(scanner_.table(), options_, sink_);
  input.searcher->begin_input(e.name);
  inputs_.emplace(e.stream, std::move(input));
}

void StreamPipeline::close(const BatchEntry& e) {
  auto it = inputs_.find(e.stream);
  if (it == inputs_.end()) return;
  if (e.ends_input) finish(it->second);
  else parked_.emplace(e.stream, std::move(it->second));
  inputs_.erase(it);
}

void StreamPipeline::finish(Input& input) {
  if (input.finished) return;
  input.finished = true;
  const InputSummary summary = input.searcher->finish_input();
  if (summary.selected_lines > 0) {
    selected_ = true;
    if (config_.stop_on_first_selected) decide_all();
  }
}

void StreamPipeline::decide_all() {
  if (decided_) return;
  decided_ = true;
  if (on_decided_) on_decided_();
}

void StreamPipeline::lines(const BatchEntry& e, const Chunk& chunk, std::span<const Occurrence> occurrences,
                           std::size_t& index) {
  while (index < occurrences.size() && occurrences[index].position < e.begin) ++index;
  const std::size_t first = index;
  while (index < occurrences.size() && occurrences[index].position < e.end) ++index;
  acks_[e.stream] = e.offset + (e.end - e.begin);
  lines_ += static_cast<std::uint64_t>(std::count(chunk.data + e.begin, chunk.data + e.end, '\n'));

  auto it = inputs_.find(e.stream);
  if (it == inputs_.end() || it->second.finished || decided_) return;
  Input& input = it->second;
  scratch_.clear();
  for (std::size_t i = first; i < index; ++i)
    scratch_.push_back(Occurrence{occurrences[i].position - static_cast<std::uint32_t>(e.begin), occurrences[i].pattern});
  Chunk piece;
  piece.seq = chunk.seq;
  piece.offset = e.offset;
  piece.data = chunk.data + e.begin;
  piece.size = e.end - e.begin;
  input.searcher->skip_lines(e.skipped);
  if (input.searcher->consume(piece, scratch_) == Flow::kStop) {
    // The input is decided (-m reached, -l or -q matched): say so now, not at its end.
    finish(input);
    if (config_.inputs_to_decide > 0 && ++inputs_decided_ >= config_.inputs_to_decide) decide_all();
  }
}

void StreamPipeline::flush() {
  sink_.flush();
  for (const auto& [stream, offset] : acks_) channel_.acknowledge(stream, offset);
  acks_.clear();
}

}  // namespace gpufilter
