// RecordChannel: the seam between stream readers and the scan thread when many streams
// (followed files, socket connections) feed one scanner.
//
//   readers (I/O thread) --append whole lines--> RecordBatch --take--> StreamGrep
//                        <--------- on_space, acknowledge(offset) ----
//
// A reader frames its own bytes (sources/framing.hpp) and appends only whole lines, each
// ending in '\n', so lines of two streams never interleave mid-line. A batch holds the
// lines of many streams with entries saying whose they are, plus the streams' open and
// close events in arrival order. A fixed number of batches exists: when every one is
// taken, append() takes less than it was given and the reader stops reading until
// on_space fires (backpressure). Memory is bounded by batches x batch_bytes.
//
// The consumer takes the oldest full batch, or else the partly filled one at once: a
// line waits for its batch only while the scanner is busy with earlier ones.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gpufilter/core/record_fields.hpp"

namespace gpufilter {

using StreamId = std::uint64_t;
inline constexpr StreamId kNoStream = 0;

struct BatchEntry {
  enum class Kind : std::uint8_t { kOpen, kLines, kClose };
  Kind kind = Kind::kLines;
  StreamId stream = kNoStream;
  // kLines: the batch bytes [begin, end), one or more whole lines each ending in '\n'.
  std::size_t begin = 0;
  std::size_t end = 0;
  std::uint64_t offset = 0;   // kLines: where `begin` lies in the stream (file offset, bytes received)
  std::uint64_t skipped = 0;  // kLines: over-long lines dropped just before these lines
  // kOpen: the input's name ("app.log", "tcp://127.0.0.1:40312"); `continues`: a closed
  // stream whose input this one carries on (a followed file after rotation), or kNoStream.
  std::string name;
  StreamId continues = kNoStream;
  // kOpen: which configured source the input comes from (gpufilterd: its index + 1, for
  // what a source asks of its records, such as multiline:); 0 when none says.
  std::uint32_t origin = 0;
  // kClose: false when the input goes on in a later stream (see `continues`).
  bool ends_input = true;
  // kLines: the fields of the record these lines are (null: none); lines of different
  // records never share an entry.
  std::shared_ptr<const RecordFields> fields;
};

struct RecordBatch {
  std::vector<char> bytes;  // capacity: RecordChannel::Config::batch_bytes
  std::size_t size = 0;
  std::vector<BatchEntry> entries;
};

class RecordChannel {
 public:
  struct Config {
    std::size_t batch_bytes = 1u << 20;  // at least the longest line plus its '\n'
    std::size_t batches = 3;             // at least 2
  };
  explicit RecordChannel(Config config);
  RecordChannel(const RecordChannel&) = delete;
  RecordChannel& operator=(const RecordChannel&) = delete;

  std::size_t batch_bytes() const noexcept { return config_.batch_bytes; }
  // A stream id no other stream of this channel has (thread-safe; never kNoStream).
  StreamId new_stream_id() noexcept { return next_id_.fetch_add(1) + 1; }

  // ---- Producer side (reader threads). Never blocks, never throws but bad_alloc.
  void open(StreamId stream, std::string name, StreamId continues = kNoStream, std::uint32_t origin = 0);
  void close(StreamId stream, bool ends_input = true);
  // Appends whole lines of one stream (`lines` must end in '\n'; each line shorter than
  // batch_bytes). Returns the bytes taken, always a whole number of lines; fewer than
  // given when every batch is in use. `offset`: where lines[0] lies in the stream;
  // `skipped`: over-long lines dropped just before; `fields`: the record's (its lines
  // get entries of their own).
  std::size_t append(StreamId stream, std::uint64_t offset, std::string_view lines, std::uint64_t skipped = 0,
                     const std::shared_ptr<const RecordFields>& fields = nullptr);
  // Called once, from the consumer's thread, after an append() came up short and a batch
  // became free; the producer should post its retry to its own thread. Set before use.
  void set_space_callback(std::function<void()> callback);
  // No more records will come: the consumer takes what is left, then take() ends.
  void finish();

  // ---- Consumer side (one thread).
  // The oldest full batch, else the partly filled one if it holds anything, else waits
  // up to `timeout` for one. nullptr when there is none yet, or when finished().
  RecordBatch* take(std::chrono::milliseconds timeout);
  void recycle(RecordBatch* batch);
  // finish() was called and every batch has been taken.
  bool finished() const;
  // Wakes a consumer blocked in take() (it returns nullptr).
  void wake();

  // ---- Acknowledgements: the consumer says up to where a stream's output is written.
  void acknowledge(StreamId stream, std::uint64_t end_offset);
  std::optional<std::uint64_t> acknowledged(StreamId stream) const;
  void forget(StreamId stream);

 private:
  RecordBatch* current_locked();  // the batch being filled, made current if needed

  Config config_;
  std::atomic<StreamId> next_id_{0};
  mutable std::mutex mutex_;
  std::condition_variable ready_cv_;
  std::vector<std::unique_ptr<RecordBatch>> all_;
  std::vector<RecordBatch*> free_;
  std::deque<RecordBatch*> ready_;  // full, in order
  RecordBatch* current_ = nullptr;
  std::vector<BatchEntry> pending_;  // events that came while no batch was free
  bool finished_ = false;
  bool woken_ = false;
  bool short_ = false;  // an append came up short: call back when a batch frees
  std::function<void()> on_space_;
  std::unordered_map<StreamId, std::uint64_t> acks_;
};

}  // namespace gpufilter
