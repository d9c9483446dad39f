// ReadAhead: a thread that fills scan slots from a regular file while the pipeline thread
// submits earlier chunks and delivers their results, so reading (the bound of the whole
// pipeline on a GPU: docs/PERFORMANCE.md) overlaps everything else. Slots come back
// filled in the order they were given. Only for inputs whose reads never wait, so that
// stopping it never waits on an input; a pipe keeps the pipeline's own loop.
#pragma once

#include <concurrentqueue/blockingconcurrentqueue.h>

#include <atomic>
#include <cstddef>
#include <string>
#include <thread>

#include "gpufilter/scan/chunker.hpp"
#include "gpufilter/engines/scanner.hpp"

namespace gpufilter {

class ReadAhead {
 public:
  struct Filled {
    ScanSlot* slot = nullptr;
    Chunker::Status status = Chunker::Status::kEnd;  // kChunk or kEnd
    std::string read_error;  // the input failed here (SourceError): it ends, as at its end
    std::string failure;     // anything else that went wrong on the reader thread
  };

  explicit ReadAhead(Chunker& chunker);
  // Stops the thread; slots still held must have been taken back (take()) before.
  ~ReadAhead();
  ReadAhead(const ReadAhead&) = delete;
  ReadAhead& operator=(const ReadAhead&) = delete;

  // Hands a free slot to the reader, to be filled after those given before.
  void give(ScanSlot& slot);
  // The oldest slot given, once filled (blocks). After the input's end every slot comes
  // back with kEnd.
  Filled take();
  // Slots given and not yet taken back.
  std::size_t held() const noexcept { return held_; }
  // The search stopped: slots not yet being filled come back unfilled (kEnd), so that
  // taking them back waits for one read at most, not for every slot given (-l read 40 MB).
  void cancel() noexcept { cancelled_.store(true, std::memory_order_relaxed); }

 private:
  void work();

  Chunker& chunker_;
  moodycamel::BlockingConcurrentQueue<ScanSlot*> free_;  // nullptr: stop
  moodycamel::BlockingConcurrentQueue<Filled> filled_;
  std::size_t held_ = 0;
  std::atomic<bool> cancelled_{false};
  std::thread thread_;
};

}  // namespace gpufilter
