// FileScan: one straight flow per input.
//
//   Source -> Chunker -> ScanSlot (pinned upload, >= 2 in flight) -> scan kernel
//          -> occurrences, in submission order -> ChunkConsumer (grep's Searcher) -> Sink
//
// One pipeline thread submits chunks and delivers results while the engine scans the
// chunks in flight (on the device, or on host workers). A regular file is read ahead by a
// ReadAhead thread (whose large reads are split over a WorkerPool), unless the host engine
// scans it where it lies (mapped: ChunkerConfig::mapping), whose chunks the pipeline
// thread cuts itself; a stream, which can stall, is read by the pipeline thread between
// deliveries, so that a quiet input never holds back a complete line. Chunks complete in
// the order they were submitted.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpufilter/core/sink.hpp"
#include "gpufilter/core/source.hpp"
#include "gpufilter/core/workers.hpp"
#include "gpufilter/engines/scanner.hpp"
#include "gpufilter/scan/chunker.hpp"

namespace gpufilter {

// What FileScan hands each scanned chunk to, in input order: grep's Searcher
// (grep/searcher.hpp). The drive loop knows nothing of lines or grep's rules.
class ChunkConsumer {
 public:
  virtual ~ChunkConsumer() = default;
  // `size`: a regular file's (Source::file_size), none for other inputs.
  virtual void begin_input(const std::string& name, std::optional<std::uint64_t> size = std::nullopt) = 0;
  // A chunk with its occurrences (the scanner locates) or with their count alone. kStop:
  // the input is decided; read no more of it.
  virtual Flow consume(const Chunk& chunk, std::span<const Occurrence> occurrences) = 0;
  virtual Flow consume_count(const Chunk& chunk, std::uint64_t occurrences) = 0;

  // Work on a chunk that can be done before its turn, where the engine scanned it
  // (Scanner::set_after_scan: the host engine's workers, several chunks at once, while
  // earlier chunks are consumed): deciding lines. Whether this consumer has such work for
  // the input about to begin (readying it: called with nothing in flight).
  virtual bool works_ahead() noexcept { return false; }
  // That work, kept in `note` (made here when null). On any thread, several at once: it
  // reads nothing that consume() changes. Never throws: what failed is done in turn.
  virtual void work_ahead(const Chunk&, std::span<const Occurrence>, std::unique_ptr<SlotNote>&) const noexcept {}
  // consume(), given what work_ahead() left for this chunk (null: nothing).
  virtual Flow consume_noted(const Chunk& chunk, std::span<const Occurrence> occurrences, SlotNote*) {
    return consume(chunk, occurrences);
  }
  virtual InputSummary finish_input() = 0;
  // The input went quiet: write out what the consumer's sink holds.
  virtual void flush() = 0;
};

struct FileScanConfig {
  // A complete line on a slow input waits at most this long before its partial chunk is
  // scanned and the output flushed.
  std::chrono::milliseconds batch_timeout{2};
  bool detect_binary = true;  // false for -a / --binary-files=text
  char eol = '\n';            // the byte that ends a line ('\0' for -z, --null-data)
  bool scan_to_end = false;   // keep scanning after the searcher stops (--pattern-counts)
  bool count_lines = false;   // count every line read (lines_seen)
  WorkerPool* workers = nullptr;  // splits the chunker's NUL search (null: one thread)
  // Bytes scanned so far, over every input, added (relaxed) as chunks are delivered: read
  // by another thread (a progress line); several FileScans may add to one. Null: not
  // published.
  std::atomic<std::uint64_t>* progress = nullptr;
  // Whether an engine that scans in place is given a regular file mapped
  // (ChunkerConfig::mapping): by default where mapping beats reading that file on this
  // machine; always or never for tests and benchmarks.
  FileMapping mapping = FileMapping::kIfFaster;
};

class FileScan {
 public:
  FileScan(Scanner& scanner, ChunkConsumer& consumer, FileScanConfig config)
      : scanner_(scanner), searcher_(consumer), config_(config) {}

  // Searches one input to its end, or until the searcher has decided it. A read error
  // ends the input like its end would, after what was read is searched, and is reported
  // in InputSummary::read_error. Throws DeviceError; Sink::finish is then not called.
  InputSummary run(Source& source);

  std::uint64_t bytes_scanned() const noexcept { return bytes_scanned_; }
  std::uint64_t lines_seen() const noexcept { return lines_seen_; }
  // Inputs scanned where they lie (mapped) so far (--stats).
  std::uint64_t inputs_mapped() const noexcept { return inputs_mapped_; }
  // Where the pipeline thread's time went, over every input so far (--stats).
  struct Times {
    double fill_s = 0;     // reading and cutting chunks into slots (a file: waiting for them)
    double wait_s = 0;     // waiting for the engine to finish the oldest chunk
    double deliver_s = 0;  // grep's line rules and the sink
  };
  const Times& times() const noexcept { return times_; }
  // When the first chunk of any input was submitted (the end of start-up); zero before.
  std::chrono::steady_clock::time_point first_submit() const noexcept { return first_submit_; }

 private:
  std::size_t piece_bytes(Source& source) const;
  void submit(ScanSlot& slot);
  void deliver_oldest();
  void drain();
  void discard_everything() noexcept;
  void read_file(Chunker& chunker, const std::string& name, std::string& read_error);
  bool read_stream(Chunker& chunker, std::string& read_error, bool while_growing = false);

  Scanner& scanner_;
  Chunker* chunker_ = nullptr;  // of the input being searched
  ChunkConsumer& searcher_;
  FileScanConfig config_;
  bool stopped_ = false;
  bool ahead_ = false;  // the engine runs the consumer's work_ahead() on this input's chunks
  bool open_line_ = false;  // the last byte delivered was not the line end (FileScanConfig::eol)
  std::uint64_t bytes_scanned_ = 0;
  std::uint64_t lines_seen_ = 0;
  std::uint64_t inputs_mapped_ = 0;
  std::chrono::steady_clock::time_point first_submit_{};
  Times times_;
};

}  // namespace gpufilter
