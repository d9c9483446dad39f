// StreamGrep: grep's rules over many streams at once (followed files, connections),
// on the StreamScan (stream_scan.hpp).
//
//   RecordChannel -> StreamScan (scan) -> per entry: that input's Searcher -> Sink
//
// Each input has a Searcher of its own, so -m, -c, context and line numbers count per
// input, as grep counts them per file; lines of different inputs reach the one Sink
// interleaved, each naming its input (LineMatch::source). After the output is flushed,
// the channel is told up to where each stream's output is written (acknowledge), which
// is what a --state file may safely record.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_map>

#include "gpufilter/core/record_channel.hpp"
#include "gpufilter/engines/scanner.hpp"
#include "gpufilter/grep/searcher.hpp"
#include "gpufilter/core/sink.hpp"
#include "gpufilter/scan/stream_scan.hpp"

namespace gpufilter {

struct StreamGrepConfig {
  // -q: everything is decided at the first selected line.
  bool stop_on_first_selected = false;
  // > 0: everything is decided once this many inputs are (-m, -l: every followed file).
  std::size_t inputs_to_decide = 0;
  // How long the loop waits while nothing at all is going on, between checks.
  std::chrono::milliseconds idle_wait{100};
};

class StreamGrep final : private StreamConsumer {
 public:
  StreamGrep(Scanner& scanner, SearchOptions options, Sink& sink, RecordChannel& channel,
                 StreamGrepConfig config);
  ~StreamGrep() override;

  // Called once, on the scan thread, when everything is decided (-q, every input's -m):
  // the caller should stop the readers, which then finish the channel.
  void on_decided(std::function<void()> callback) { on_decided_ = std::move(callback); }

  // Scans and delivers until the channel is finished; then finishes every open input,
  // flushes and acknowledges. Throws DeviceError (and the Sink's errors).
  void run();

  bool selected() const noexcept { return selected_; }  // some input selected a line
  std::uint64_t bytes_scanned() const noexcept { return loop_.bytes_scanned(); }
  std::uint64_t batches() const noexcept { return loop_.batches(); }
  std::uint64_t lines() const noexcept { return lines_; }

 private:
  struct Input {
    std::unique_ptr<Searcher> searcher;
    bool finished = false;
  };

  void open(const BatchEntry& e) override;
  void close(const BatchEntry& e) override;
  void lines(const BatchEntry& e, const Chunk& piece, std::span<const Occurrence> occurrences) override;
  void flush() override { sink_.flush(); }
  void finish(Input& input);
  void decide_all();

  Scanner& scanner_;
  SearchOptions options_;
  Sink& sink_;
  StreamGrepConfig config_;
  StreamScan loop_;
  std::function<void()> on_decided_;
  bool decided_ = false;

  std::unordered_map<StreamId, Input> inputs_;  // by the stream that carries the input now
  std::unordered_map<StreamId, Input> parked_;  // closed, to be continued (rotation)
  std::size_t inputs_decided_ = 0;
  bool selected_ = false;
  std::uint64_t lines_ = 0;
};

}  // namespace gpufilter
