#include "gpufilter/core/workers.hpp"

#include <algorithm>
#include <cstring>

namespace gpufilter {

WorkerPool::WorkerPool(std::size_t threads) : helpers_(threads) {}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : threads_) t.join();
}

// Takes indices of the current task until none is left; called with the lock held.
void WorkerPool::drain(std::unique_lock<std::mutex>& lock) {
  while (task_ != nullptr && next_ < count_) {
    const std::size_t i = next_++;
    const auto* task = task_;
    lock.unlock();
    (*task)(i);
    lock.lock();
    if (++finished_ == count_) done_.notify_all();
  }
}

void WorkerPool::work() {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stopping_ || (task_ != nullptr && next_ < count_); });
    if (stopping_) return;
    drain(lock);
  }
}

void WorkerPool::run(std::size_t n, const std::function<void(std::size_t)>& task) {
  if (n == 0) return;
  if (n == 1 || helpers_ == 0) {
    for (std::size_t i = 0; i < n; ++i) task(i);
    return;
  }
  std::lock_guard serial(run_mutex_);
  // Started by the first run() that has work for them: a short run (one small file, a
  // line from a pipe) never pays for fifteen threads it does not use.
  if (threads_.empty()) {
    threads_.reserve(helpers_);
    for (std::size_t i = 0; i < helpers_; ++i) threads_.emplace_back([this] { work(); });
  }
  std::unique_lock lock(mutex_);
  task_ = &task;
  next_ = 0;
  count_ = n;
  finished_ = 0;
  wake_.notify_all();
  drain(lock);
  done_.wait(lock, [&] { return finished_ == count_; });
  task_ = nullptr;
}

std::size_t WorkerPool::default_threads() {
  return std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, 16) - 1;
}

std::size_t WorkerPool::split(std::size_t size, std::size_t min_piece,
                              const std::function<void(std::size_t, std::size_t, std::size_t)>& task) {
  const std::size_t pieces = std::clamp<std::size_t>(size / std::max<std::size_t>(min_piece, 1), 1, width());
  const std::size_t step = (size + pieces - 1) / pieces;
  run(pieces, [&](std::size_t i) {
    const std::size_t begin = std::min(size, i * step);
    task(i, begin, std::min(size, begin + step));
  });
  return pieces;
}

const char* find_byte(WorkerPool* workers, const char* data, std::size_t size, char byte) {
  constexpr std::size_t kPiece = 1u << 20;  // below this, one memchr is quicker than a hand-off
  if (workers == nullptr || size < 2 * kPiece) return static_cast<const char*>(std::memchr(data, byte, size));
  WorkerPool& pool = *workers;
  std::vector<const char*> found(pool.width(), nullptr);
  const std::size_t pieces = pool.split(size, kPiece, [&](std::size_t i, std::size_t begin, std::size_t end) {
    found[i] = static_cast<const char*>(std::memchr(data + begin, byte, end - begin));
  });
  for (std::size_t i = 0; i < pieces; ++i)
    if (found[i] != nullptr) return found[i];
  return nullptr;
}

}  // namespace gpufilter
