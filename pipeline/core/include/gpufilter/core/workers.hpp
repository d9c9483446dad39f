// WorkerPool: host threads that split one large, simple piece of work (copying a chunk
// out of the page cache, looking for a NUL byte) so that one host thread is not what
// bounds the pipeline. run() is a blocking parallel-for; the calling thread takes part.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace gpufilter {

class WorkerPool {
 public:
  // `threads` helpers besides the caller (0: run() works alone on the calling thread).
  explicit WorkerPool(std::size_t threads);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Threads that take part in run(), the caller included.
  std::size_t width() const noexcept { return helpers_ + 1; }

  // Calls task(i) once for every i in [0, n) across the pool and returns when all have
  // returned. `task` must not throw. Calls from several threads are served one at a time.
  void run(std::size_t n, const std::function<void(std::size_t)>& task);

  // Splits [0, size) into at most width() contiguous pieces of at least `min_piece` bytes
  // (one, on the calling thread, below twice that) and calls task(i, begin, end) for each
  // piece i as run() does. Returns the number of pieces.
  std::size_t split(std::size_t size, std::size_t min_piece,
                    const std::function<void(std::size_t, std::size_t, std::size_t)>& task);

  // Helpers for a pool that uses the machine: one thread per core beyond the first, at
  // most 15. There is no process-wide pool: a front end makes one and passes it to the
  // readers and chunkers that split work (FileSource::set_workers, ChunkerConfig).
  static std::size_t default_threads();

 private:
  void work();
  void drain(std::unique_lock<std::mutex>& lock);

  std::mutex run_mutex_;  // one run() at a time
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(std::size_t)>* task_ = nullptr;
  std::size_t next_ = 0;
  std::size_t count_ = 0;
  std::size_t finished_ = 0;
  bool stopping_ = false;
  std::size_t helpers_;
  std::vector<std::thread> threads_;  // helpers_ of them once a run() needs them
};

// The first `byte` in data[0, size), looked for in parallel pieces when size is large and
// there is a pool (null: on this thread).
const char* find_byte(WorkerPool* pool, const char* data, std::size_t size, char byte);

}  // namespace gpufilter
