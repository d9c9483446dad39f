#include "gpufilter/sources/file_source.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "gpufilter/core/errors.hpp"
#include "gpufilter/core/mapping_cost.hpp"
#include "gpufilter/core/workers.hpp"
#include "mapped_file.hpp"

namespace gpufilter {

FileSource::FileSource(int fd, bool owned, std::string name, const struct stat* known)
    : fd_(fd), owned_(owned), name_(std::move(name)) {
  struct stat st {};
  if (known != nullptr) st = *known;
  regular_ = (known != nullptr || ::fstat(fd_, &st) == 0) && S_ISREG(st.st_mode);
  if (regular_) {
    device_ = st.st_dev;
    inode_ = st.st_ino;
    size_ = static_cast<std::uint64_t>(st.st_size);
    // A file this source opened is at its start; an inherited descriptor may be anywhere.
    const off_t at = owned_ ? 0 : ::lseek(fd_, 0, SEEK_CUR);
    offset_ = at < 0 ? 0 : static_cast<std::uint64_t>(at);
    start_ = offset_;
  } else if (S_ISFIFO(st.st_mode)) {
    // A pipe of 1 MiB, not 64 KiB: a writer as fast as the reads (`cat log |`) then wakes
    // this reader once a megabyte, not once a block (512 MB through `cat`: 16,000 context
    // switches). Where the system's limit refuses it, the pipe stays as it is. Each read
    // still takes at most what the pipe held before, as grep's reads of the same pipe do:
    // where a NUL lies, binary mode begins at the read that brought it.
    constexpr int kPipeBytes = 1 << 20;
    const int was = ::fcntl(fd_, F_GETPIPE_SZ);
    if (was > 0 && was < kPipeBytes && ::fcntl(fd_, F_SETPIPE_SZ, kPipeBytes) >= 0)
      read_limit_ = static_cast<std::size_t>(was);
  }
}

std::unique_ptr<FileSource> FileSource::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) throw SourceError(path, errno);
  return std::unique_ptr<FileSource>(new FileSource(fd, true, path));
}

std::unique_ptr<FileSource> FileSource::adopt(int fd, const std::string& path, const struct stat* known) {
  return std::unique_ptr<FileSource>(new FileSource(fd, true, path, known));
}

std::unique_ptr<FileSource> FileSource::standard_input(std::string name) {
  return std::unique_ptr<FileSource>(new FileSource(STDIN_FILENO, false, std::move(name)));
}

FileSource::~FileSource() {
  if (owned_) ::close(fd_);
}

namespace {

// Reads until dst is full or the file ends; the errno of a failure, else 0.
int pread_full(int fd, char* dst, std::size_t size, std::uint64_t offset, std::size_t& got) {
  got = 0;
  while (got < size) {
    const ssize_t n = ::pread(fd, dst + got, size - got, static_cast<off_t>(offset + got));
    if (n == 0) return 0;
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    got += static_cast<std::size_t>(n);
  }
  return 0;
}

// pread_full() in steps of 256 KiB, each searched for `byte` (when not null) while it is
// in this core's cache, until one holds it: `first` is its index, or Source::kNotFound.
int pread_searching(int fd, char* dst, std::size_t size, std::uint64_t offset, std::size_t& got, const char* byte,
                    std::size_t& first) {
  constexpr std::size_t kStep = 256u << 10;
  first = Source::kNotFound;
  if (byte == nullptr) return pread_full(fd, dst, size, offset, got);
  got = 0;
  while (got < size) {
    std::size_t step = 0;
    const std::size_t want = std::min(kStep, size - got);
    const int error = pread_full(fd, dst + got, want, offset + got, step);
    if (first == Source::kNotFound) {
      const std::size_t at = Source::index_of(dst + got, step, *byte);
      if (at != Source::kNotFound) first = got + at;
    }
    got += step;
    if (error != 0 || step < want) return error;
  }
  return 0;
}

}  // namespace

std::size_t FileSource::read(std::span<char> dst) { return read_searching(dst, nullptr, nullptr); }

std::size_t FileSource::read_finding(std::span<char> dst, char byte, std::size_t& first) {
  return read_searching(dst, &byte, &first);
}

std::size_t FileSource::read_searching(std::span<char> dst, const char* byte, std::size_t* first) {
  if (first != nullptr) *first = kNotFound;
  if (stop_ != nullptr && stop_->requested()) return 0;
  // A large read of a regular file is copied out of the page cache by several threads:
  // one thread's copy runs well below what the device link takes. A small file is read
  // here: waking the pool cost more than the copy (500 files of 20 KB took 0.5 s). Each
  // thread searches what it copied while it is in cache: a second pass over a 64 MiB
  // chunk cost the GPU path's reader 0.1 s of 0.57 s for 16 GiB on one H100 lease, and
  // two thirds of the process's user time on another (docs/PERFORMANCE.md).
  constexpr std::size_t kPiece = 1u << 20;
  if (regular_ && workers_ != nullptr && dst.size() >= 2 * kPiece && unread_size().value_or(0) >= 2 * kPiece) {
    WorkerPool& pool = *workers_;
    struct Piece {
      std::size_t begin = 0, wanted = 0, got = 0, first = kNotFound;
      int error = 0;
    };
    std::vector<Piece> piece(pool.width());
    const std::size_t pieces = pool.split(dst.size(), kPiece, [&](std::size_t i, std::size_t begin, std::size_t end) {
      Piece& p = piece[i];
      p.begin = begin;
      p.wanted = end - begin;
      p.error = pread_searching(fd_, dst.data() + begin, end - begin, offset_ + begin, p.got, byte, p.first);
    });
    // What was read is the run of pieces up to the first short one; the file ended (or
    // failed) there, and whatever later pieces saw is not part of this read.
    std::size_t total = 0;
    for (std::size_t i = 0; i < pieces; ++i) {
      total += piece[i].got;
      if (piece[i].error != 0 && total == 0) throw SourceError(name_, piece[i].error);
      if (first != nullptr && *first == kNotFound && piece[i].first != kNotFound) *first = piece[i].begin + piece[i].first;
      if (piece[i].error != 0 || piece[i].got < piece[i].wanted) break;
    }
    offset_ += total;
    ::lseek(fd_, static_cast<off_t>(offset_), SEEK_SET);  // keep the descriptor where a plain read would
    return total;
  }
  for (;;) {
    const ssize_t n = ::read(fd_, dst.data(), std::min(dst.size(), read_limit_));
    if (n >= 0) {
      if (regular_) offset_ += static_cast<std::uint64_t>(n);  // where the next split read begins
      const auto got = static_cast<std::size_t>(n);
      if (byte != nullptr) *first = index_of(dst.data(), got, *byte);
      return got;
    }
    if (errno != EINTR) throw SourceError(name_, errno);
    if (stop_ != nullptr && stop_->requested()) return 0;
  }
}

std::unique_ptr<MappedBytes> FileSource::map_unread(std::size_t min_bytes, bool if_faster, std::size_t read_back) {
  if (!regular_ || (stop_ != nullptr && stop_->requested())) return nullptr;
  if (unread_size().value_or(0) < min_bytes) return nullptr;  // most small files stop here, with no system call
  struct stat st {};
  const off_t at = ::lseek(fd_, 0, SEEK_CUR);  // both read paths keep the descriptor here
  if (at < 0 || ::fstat(fd_, &st) != 0 || st.st_size <= at || static_cast<std::uint64_t>(at) < read_back) return nullptr;
  const auto unread = static_cast<std::uint64_t>(st.st_size - at);
  if (unread < min_bytes || unread > SIZE_MAX / 2) return nullptr;
  if (if_faster && !mapping_beats_reading(fd_, static_cast<std::uint64_t>(at), static_cast<std::size_t>(unread)))
    return nullptr;
  const std::uint64_t from = static_cast<std::uint64_t>(at) - read_back;
  std::unique_ptr<MappedFile> mapped = MappedFile::map(fd_, from, static_cast<std::size_t>(unread + read_back));
  if (!mapped) return nullptr;
  // Reads go on after the mapping, where a file that grew has more.
  offset_ = static_cast<std::uint64_t>(st.st_size);
  ::lseek(fd_, static_cast<off_t>(offset_), SEEK_SET);
  return mapped;
}

std::optional<std::uint64_t> FileSource::file_size() const {
  if (!regular_) return std::nullopt;
  return size_;  // at open, as grep's st_size
}

// The size seen at open until the reads reach it; then asked again (a file that grew).
std::optional<std::uint64_t> FileSource::unread_size() const {
  if (!regular_) return std::nullopt;
  if (size_ > offset_) return size_ - offset_;
  struct stat st {};
  if (::fstat(fd_, &st) != 0) return std::nullopt;
  size_ = static_cast<std::uint64_t>(st.st_size);
  return size_ > offset_ ? size_ - offset_ : 0;
}

bool FileSource::is_same_file_as(const struct stat& other) const {
  return regular_ && S_ISREG(other.st_mode) && other.st_dev == device_ && other.st_ino == inode_;
}

std::size_t FileSource::peek(std::span<char> dst) const {
  if (!regular_) return 0;
  std::size_t got = 0;
  if (const int error = pread_full(fd_, dst.data(), dst.size(), offset_, got); error != 0) throw SourceError(name_, error);
  return got;
}

int FileSource::leave_at(std::optional<std::uint64_t> consumed) {
  if (!regular_) return 0;  // a pipe or terminal: what was read is gone anyway
  const off_t at = consumed ? ::lseek(fd_, static_cast<off_t>(start_ + *consumed), SEEK_SET) : ::lseek(fd_, 0, SEEK_END);
  return at < 0 ? errno : 0;
}

bool FileSource::wait_readable(std::chrono::milliseconds timeout) {
  if (regular_) return true;
  pollfd p[2] = {{fd_, POLLIN, 0}, {stop_ != nullptr ? stop_->fd() : -1, POLLIN, 0}};
  for (;;) {
    // A stop makes the input readable: the next read() ends it.
    const int n = ::poll(p, 2, timeout.count() < 0 ? -1 : static_cast<int>(timeout.count()));
    if (n >= 0) return n > 0;  // POLLHUP and POLLERR count as readable: read() reports them
    if (errno != EINTR) return true;
    if (stop_ != nullptr && stop_->requested()) return true;
  }
}

}  // namespace gpufilter
