// SpaceAhead: keeps the pages of an output file on tmpfs allocated a little ahead of its
// writer, on a thread of its own, so that the writer's write(2) only copies.
//
// Writing a new file on tmpfs allocates a page for every 4 KiB written, inside the
// write: one thread wrote 2.1 GB/s into /dev/shm on the H200 machine, the bound of a
// dense search printing there (docs/PERFORMANCE.md, "Output into tmpfs"). fallocate(2)
// with FALLOC_FL_KEEP_SIZE allocates those pages beforehand without changing the file's
// size, so a reader, or a run that is killed, never sees bytes that were not written;
// the pages left past the end are given back (a hole punched) when the SpaceAhead goes.
// Only the file's own pages beyond its size are ever punched: never a written byte.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>

namespace gpufilter {

class SpaceAhead {
 public:
  // Null unless `fd` is a regular file on tmpfs, opened without O_APPEND (where appends
  // land is not this writer's to know), whose offset is `offset`.
  static std::unique_ptr<SpaceAhead> open(int fd);
  explicit SpaceAhead(int fd, std::uint64_t offset);
  ~SpaceAhead();
  SpaceAhead(const SpaceAhead&) = delete;
  SpaceAhead& operator=(const SpaceAhead&) = delete;

  // The writer has written `bytes` more at its offset.
  void wrote(std::uint64_t bytes);

  static constexpr std::uint64_t kStart = 16u << 20;  // an output this long gets one
  static constexpr std::uint64_t kAhead = 64u << 20;  // kept allocated past the writer
  static constexpr std::uint64_t kStep = 8u << 20;    // a fallocate(2) call's size

 private:
  void run();

  int fd_;
  std::uint64_t page_;  // the system's: reservations start on one, and end on one
  std::mutex mutex_;
  std::condition_variable wake_;
  std::uint64_t written_;   // the writer's offset
  std::uint64_t reserved_;  // allocated up to here (the thread's)
  bool stopping_ = false;
  std::thread thread_;  // last: it starts once the members it uses are made
};

}  // namespace gpufilter
