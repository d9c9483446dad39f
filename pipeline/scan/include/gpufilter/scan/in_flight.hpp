// InFlight<T>: the one in-flight queue of a drive loop. A Scanner completes its slots in
// submission order; a loop that must know more than the chunk to deliver it (a stream
// batch's entries, the records packed into a chunk) submits that with the slot, and gets
// it back with the completed slot. The loops keep no queue of their own beside the
// Scanner's: FileScan needs nothing more than the chunk, StreamScan and RecordScan use
// this.
#pragma once

#include <cstddef>
#include <deque>
#include <utility>

#include "gpufilter/engines/scanner.hpp"

namespace gpufilter {

template <class T>
class InFlight {
 public:
  explicit InFlight(Scanner& scanner) : scanner_(&scanner) {}

  Scanner& scanner() const noexcept { return *scanner_; }
  // Only with nothing in flight (a reload between batches).
  void replace_scanner(Scanner& scanner) noexcept { scanner_ = &scanner; }

  std::size_t size() const noexcept { return what_.size(); }
  bool empty() const noexcept { return what_.empty(); }
  // Every slot is in flight: complete the oldest before acquiring another.
  bool full() const noexcept { return !what_.empty() && what_.size() >= scanner_->slot_count(); }

  // Starts scanning `slot`'s chunk; `what` comes back with it from complete_oldest().
  void submit(ScanSlot& slot, T what) {
    what_.push_back(std::move(what));
    scanner_->submit(slot);
  }

  struct Completed {
    ScanSlot& slot;  // the caller's until release()
    T what;
  };
  // Waits for the oldest slot. Throws what the scanner throws (DeviceError).
  Completed complete_oldest() {
    T what = std::move(what_.front());
    what_.pop_front();
    return Completed{scanner_->complete_oldest(), std::move(what)};
  }
  void release(ScanSlot& slot) { scanner_->release(slot); }
  // Waits for everything in flight and drops it unread (after an error or an early stop).
  void discard() {
    what_.clear();
    scanner_->discard_in_flight();
  }

 private:
  Scanner* scanner_;
  std::deque<T> what_;
};

}  // namespace gpufilter
