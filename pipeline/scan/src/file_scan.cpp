#include "gpufilter/scan/file_scan.hpp"

#include <algorithm>
#include <string>
#include <string_view>

#include "gpufilter/core/errors.hpp"
#include "gpufilter/core/utf8.hpp"
#include "read_ahead.hpp"

namespace gpufilter {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point& mark) {
  const Clock::time_point now = Clock::now();
  const double s = std::chrono::duration<double>(now - mark).count();
  mark = now;
  return s;
}

}  // namespace

void FileScan::deliver_oldest() {
  Clock::time_point mark = Clock::now();
  ScanSlot& slot = scanner_.complete_oldest();
  times_.wait_s += seconds_since(mark);
  Chunk& chunk = slot.chunk();
  chunker_->settle_binary(chunk, slot.first_nul());
  bytes_scanned_ += chunk.size - chunk.overlap;
  if (config_.progress != nullptr) config_.progress->fetch_add(chunk.size - chunk.overlap, std::memory_order_relaxed);
  if (config_.count_lines && chunk.size > chunk.overlap) {
    lines_seen_ += count_byte(std::string_view(chunk.data + chunk.overlap, chunk.size - chunk.overlap), config_.eol);
    open_line_ = chunk.data[chunk.size - 1] != config_.eol;
  }
  if (!stopped_) {
    const Flow flow = scanner_.locates()
                          ? searcher_.consume_noted(chunk, slot.occurrences(), ahead_ ? slot.note().get() : nullptr)
                          : searcher_.consume_count(chunk, slot.total());
    stopped_ = flow == Flow::kStop;
  }
  const bool flush = chunk.flush_after;
  chunker_->done_with(chunk);
  scanner_.release(slot);
  if (flush) searcher_.flush();
  times_.deliver_s += seconds_since(mark);
}

void FileScan::submit(ScanSlot& slot) {
  if (first_submit_ == Clock::time_point{}) first_submit_ = Clock::now();
  scanner_.submit(slot);
}

void FileScan::drain() {
  while (scanner_.in_flight() > 0) deliver_oldest();
}

// Waits for every slot still in flight and drops it, whatever failed: a failed input's
// run() may leave some (its one discard_in_flight() stops at the first failed slot).
void FileScan::discard_everything() noexcept {
  while (scanner_.in_flight() > 0) {
    try {
      scanner_.discard_in_flight();
    } catch (...) {
      // That input's failure was reported, or is being.
    }
  }
}

// A regular file: the ReadAhead thread fills up to half the slots ahead (2 at least: 2 of
// one GPU's 4, 4 of two GPUs' 8), so that it goes on reading while this thread submits
// and delivers; this thread submits them in order and delivers results whenever every
// slot it may use is taken. It uses the slots that keep the engine busy with copied
// chunks (Scanner::copied_slots()), not all: a slot's staging costs fresh pages the first
// time it is filled (the host engine's ten slots here: 40 MiB for a 61 MB file, a quarter
// of the run).
void FileScan::read_file(Chunker& chunker, const std::string& name, std::string& read_error) {
  const std::size_t in_use = std::max<std::size_t>(2, scanner_.copied_slots());
  const std::size_t kReadAhead = std::max<std::size_t>(2, in_use / 2);
  ReadAhead ahead(chunker);
  // Every slot the reader holds comes back to the scanner, whatever ends the loop.
  auto reclaim = [&] {
    ahead.cancel();
    while (ahead.held() > 0) scanner_.release(*ahead.take().slot);
  };
  try {
    while (!stopped_ || config_.scan_to_end) {
      while (ahead.held() < kReadAhead && scanner_.in_flight() + ahead.held() < in_use) {
        ScanSlot* slot = scanner_.acquire();
        if (slot == nullptr) break;
        ahead.give(*slot);
      }
      if (ahead.held() == 0) {
        deliver_oldest();
        continue;
      }
      Clock::time_point mark = Clock::now();
      ReadAhead::Filled filled = ahead.take();
      times_.fill_s += seconds_since(mark);
      if (filled.status != Chunker::Status::kChunk) {
        scanner_.release(*filled.slot);
        if (!filled.failure.empty()) throw Error("reading " + name + ": " + filled.failure);
        read_error = std::move(filled.read_error);
        break;
      }
      submit(*filled.slot);
    }
  } catch (...) {
    reclaim();
    throw;
  }
  reclaim();
}

// A stream: read between deliveries, never blocking on a quiet input while results or
// output are waiting; a partial chunk is cut after the batch timeout (Chunker). Also a
// file's first, small chunks (`while_growing`), each delivered before the next is read
// (Chunk::flush_after). Returns whether the input ended.
bool FileScan::read_stream(Chunker& chunker, std::string& read_error, bool while_growing) {
  bool unflushed = false;  // lines may sit in the sink's buffer
  while ((!stopped_ || config_.scan_to_end) && (!while_growing || chunker.growing())) {
    ScanSlot* slot = scanner_.acquire();
    if (slot == nullptr) {
      deliver_oldest();
      unflushed = true;
      continue;
    }
    const bool waiting = scanner_.in_flight() > 0 || unflushed;
    const auto idle = waiting ? config_.batch_timeout : std::chrono::milliseconds(-1);
    Chunker::Status status;
    Clock::time_point mark = Clock::now();
    try {
      // With nothing in flight, a complete line goes at once rather than after the batch
      // timeout: latency at low rates; at high rates the engine is busy and chunks grow.
      status = chunker.fill(slot->staging(), slot->chunk(), idle, scanner_.in_flight() == 0);
    } catch (const SourceError& e) {
      read_error = e.what();
      status = Chunker::Status::kEnd;
    }
    times_.fill_s += seconds_since(mark);
    if (status != Chunker::Status::kChunk) {
      scanner_.release(*slot);
      if (status == Chunker::Status::kEnd) return true;
      drain();  // kIdle: the input is quiet
      searcher_.flush();
      unflushed = false;
      continue;
    }
    const bool flush_now = slot->chunk().flush_after;
    submit(*slot);
    if (flush_now) {
      drain();
      unflushed = false;
    }
  }
  return false;
}

// A regular file of one chunk or less, for an engine that scans on host workers, is cut
// into a piece per worker (64 KiB at least), so that every core scans it rather than one:
// hundreds of small files were searched one core at a time.
std::size_t FileScan::piece_bytes(Source& source) const {
  constexpr std::size_t kMinPiece = 64u << 10;
  const std::size_t chunk = scanner_.chunk_bytes();
  const std::optional<std::uint64_t> size = source.unread_size();
  if (!scanner_.scans_in_place() || config_.workers == nullptr || !size || *size > chunk) return chunk;
  const std::size_t width = config_.workers->width();
  const std::size_t piece = static_cast<std::size_t>((*size + width - 1) / width);
  return std::min(chunk, std::max({kMinPiece, 4 * scanner_.table().max_length(), piece}));
}

InputSummary FileScan::run(Source& source) {
  stopped_ = false;
  open_line_ = false;
  searcher_.begin_input(source.name(), source.file_size());
  ChunkerConfig chunking;
  chunking.capacity = piece_bytes(source);
  // An input of more than a chunk starts with small ones (ChunkerConfig::first_capacity),
  // 64 KiB of 4 MiB chunks: `-l ERROR` on 250 MB read 40 MB before its answer, 25 ms
  // against grep's 5. (Tests' small --chunk-size values thus sweep these chunks too.)
  if (source.unread_size().value_or(SIZE_MAX) > chunking.capacity) chunking.first_capacity = chunking.capacity / 64;
  chunking.overlap = scanner_.table().max_length() > 0 ? scanner_.table().max_length() - 1 : 0;
  chunking.detect_binary = config_.detect_binary;
  chunking.eol = config_.eol;
  chunking.batch_timeout = config_.batch_timeout;
  chunking.workers = config_.workers;
  // (Asked only of a file larger than a chunk, the only kind the chunker maps.)
  const bool mappable = scanner_.scans_in_place() && source.unread_size().value_or(0) > chunking.capacity;
  chunking.mapping = mappable ? config_.mapping : FileMapping::kNever;
  chunking.in_flight = scanner_.slot_count() * chunking.capacity;
  Chunker chunker(source, chunking);
  chunker_ = &chunker;
  // The consumer's work ahead runs on the engine's threads while this input is searched;
  // not when the scan goes on past the consumer's decision (--pattern-counts), where it
  // would decide lines no one takes. It is set and cleared with nothing in flight.
  discard_everything();
  ahead_ = scanner_.locates() && !config_.scan_to_end && searcher_.works_ahead() &&
           scanner_.set_after_scan([&consumer = searcher_](ScanSlot& slot) {
             consumer.work_ahead(slot.chunk(), slot.occurrences(), slot.note());
           });
  struct AheadEnd {
    FileScan& scan;
    ~AheadEnd() {
      if (!scan.ahead_) return;
      scan.ahead_ = false;
      scan.discard_everything();  // after a failure, some may still be in flight
      scan.scanner_.set_after_scan({});
    }
  } ahead_end{*this};

  std::string read_error;
  try {
    // The first, small chunks one by one; a search that stops there maps nothing.
    const bool ended = chunker.growing() && read_stream(chunker, read_error, /*while_growing=*/true);
    if (!ended && (!stopped_ || config_.scan_to_end)) {
      chunker.map_rest();
      if (chunker.in_place()) ++inputs_mapped_;
      // A mapped file's chunks are cut without a copy: no reader thread to wait for, and
      // the stream loop never waits on a regular file. Nor does a file of one chunk get a
      // reader thread: it has nothing to overlap, and starting one per file cost 1 ms a file.
      const bool read_ahead = !chunker.in_place() && source.unread_size().value_or(0) > scanner_.chunk_bytes();
      if (read_ahead) read_file(chunker, source.name(), read_error);
      else read_stream(chunker, read_error);
    }
    if (stopped_ && !config_.scan_to_end) scanner_.discard_in_flight();
    else drain();
    if (open_line_) ++lines_seen_;  // the input ended without a final newline
  } catch (...) {
    discard_everything();  // the first error is the one to report
    chunker_ = nullptr;
    throw;
  }
  chunker_ = nullptr;  // run()'s own: gone when it returns
  InputSummary summary = searcher_.finish_input();
  summary.read_error = std::move(read_error);
  return summary;
}

}  // namespace gpufilter
