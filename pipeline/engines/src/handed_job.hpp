// A chunk handed from the pipeline thread to a device's thread (CoScanner's lanes,
// DevicesScanner's device threads). Nothing is thrown across the thread: settle() keeps
// what the work throws as the job's error_, which finish() raises on the pipeline thread;
// finished() wakes finish(), which waits on done_.
#pragma once

#include <atomic>
#include <exception>
#include <new>

namespace gpufilter {

template <class Job, class Work>
void settle(Job& job, const Work& work) {
  try {
    work();
  } catch (const std::bad_alloc&) {
    job.error_ = "memory exhausted";
  } catch (const std::exception& e) {
    job.error_ = e.what();
  }
}

template <class Job>
void finished(Job& job) {
  job.done_.store(true, std::memory_order_release);
  job.done_.notify_one();
}

}  // namespace gpufilter
