#include "read_ahead.hpp"

#include <chrono>
#include <exception>
#include <new>

#include "gpufilter/core/errors.hpp"

namespace gpufilter {

ReadAhead::ReadAhead(Chunker& chunker) : chunker_(chunker), thread_([this] { work(); }) {}

ReadAhead::~ReadAhead() {
  free_.enqueue(nullptr);
  thread_.join();
}

void ReadAhead::give(ScanSlot& slot) {
  ++held_;
  free_.enqueue(&slot);
}

ReadAhead::Filled ReadAhead::take() {
  Filled f;
  filled_.wait_dequeue(f);
  --held_;
  return f;
}

// The reader thread. Nothing is thrown across it: a failure travels in Filled.
void ReadAhead::work() {
  bool ended = false;
  for (;;) {
    ScanSlot* slot = nullptr;
    free_.wait_dequeue(slot);
    if (slot == nullptr) return;
    Filled f;
    f.slot = slot;
    if (!ended && !cancelled_.load(std::memory_order_relaxed)) {
      try {
        // A regular file never waits, so no idle timeout applies.
        f.status = chunker_.fill(slot->staging(), slot->chunk(), std::chrono::milliseconds(-1));
      } catch (const SourceError& e) {
        f.read_error = e.what();
      } catch (const std::bad_alloc&) {
        f.failure = "memory exhausted";
      } catch (const std::exception& e) {
        f.failure = e.what();
      }
      ended = f.status != Chunker::Status::kChunk;
    }
    filled_.enqueue(std::move(f));
  }
}

}  // namespace gpufilter
