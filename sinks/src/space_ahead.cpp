// SpaceAhead's thread: fallocate(2) a step at a time while the writer is within kAhead.
#include "space_ahead.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>

namespace gpufilter {

std::unique_ptr<SpaceAhead> SpaceAhead::open(int fd) {
  struct stat st {};
  struct statfs fs {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return nullptr;
  if (::fstatfs(fd, &fs) != 0 || fs.f_type != TMPFS_MAGIC) return nullptr;
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || (flags & O_APPEND) != 0) return nullptr;
  const off_t offset = ::lseek(fd, 0, SEEK_CUR);
  if (offset < 0) return nullptr;
  return std::make_unique<SpaceAhead>(fd, static_cast<std::uint64_t>(offset));
}

SpaceAhead::SpaceAhead(int fd, std::uint64_t offset)
    : fd_(fd),
      page_(static_cast<std::uint64_t>(std::max(::sysconf(_SC_PAGESIZE), 4096L))),
      written_(offset),
      reserved_(offset),
      thread_([this] { run(); }) {}

SpaceAhead::~SpaceAhead() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
  // Give back the pages past the file's end. The size is read now: bytes written there by
  // anyone, through this descriptor or another, lie below it and are never punched.
  // The last page reserved is given back whole.
  const std::uint64_t end = (reserved_ + page_ - 1) / page_ * page_;
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || static_cast<std::uint64_t>(st.st_size) >= end) return;
  (void)::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, st.st_size,
                    static_cast<off_t>(end - static_cast<std::uint64_t>(st.st_size)));
}

void SpaceAhead::wrote(std::uint64_t bytes) {
  bool behind = false;
  {
    std::lock_guard lock(mutex_);
    written_ += bytes;
    behind = reserved_ < written_ + kAhead;
  }
  if (behind) wake_.notify_one();
}

void SpaceAhead::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || reserved_ < written_ + kAhead; });
    if (stopping_) return;
    // Never behind the writer: the pages it has already written need nothing. On whole
    // pages: the first offset (where the writer was at open) need not be one.
    const std::uint64_t from = std::max(reserved_, written_) / page_ * page_;
    lock.unlock();
    // KEEP_SIZE: the file's size stays what was written. A failure (ENOSPC, a full
    // tmpfs; EOPNOTSUPP) ends the reserving, and the writes report what they meet.
    const bool ok = ::fallocate(fd_, FALLOC_FL_KEEP_SIZE, static_cast<off_t>(from), static_cast<off_t>(kStep)) == 0;
    lock.lock();
    if (!ok) return;
    reserved_ = from + kStep;
  }
}

}  // namespace gpufilter
