// Output's buffer, and the Writers it writes through.
#include "gpufilter/sinks/output.hpp"

#include "space_ahead.hpp"

#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace gpufilter {

OutputError::OutputError(int error_number)
    : Error(std::string("write error: ") + std::strerror(error_number)), errno_(error_number) {}

bool OutputError::closed() const noexcept { return errno_ == EPIPE; }

FdWriter::FdWriter(int fd, bool space_ahead) noexcept : fd_(fd), space_ahead_(space_ahead) {}

FdWriter::~FdWriter() = default;

void FdWriter::write(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      throw OutputError(errno);
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
    wrote(static_cast<std::size_t>(n));
  }
}

void FdWriter::wrote(std::size_t bytes) noexcept {
  written_ += bytes;
  if (ahead_) {
    ahead_->wrote(bytes);
  } else if (space_ahead_ && written_ >= SpaceAhead::kStart) {
    space_ahead_ = false;  // tried once
    try {
      ahead_ = SpaceAhead::open(fd_);
    } catch (const std::exception&) {
      // No thread or no memory for it: the writes go on as they were.
    }
  }
}

// The write-behind thread and the buffer it writes. No exception leaves the thread: a
// write error is kept as its errno for the caller's thread to rethrow.
struct Output::Behind {
  Behind(Writer& w, std::size_t capacity) : writer(w), buffer(new char[capacity]), thread([this] { run(); }) {}
  ~Behind() {
    {
      std::lock_guard lock(mutex);
      stopping = true;
    }
    wake.notify_all();
    thread.join();
  }

  void run() {
    std::unique_lock lock(mutex);
    for (;;) {
      wake.wait(lock, [this] { return pending || stopping; });
      if (!pending) return;
      lock.unlock();
      int failed = 0;
      try {
        writer.write(std::string_view(buffer.get(), size));
      } catch (const OutputError& e) {
        failed = e.error_number();
      }
      lock.lock();
      pending = false;
      if (error == 0) error = failed;
      done.notify_all();
    }
  }

  Writer& writer;
  std::mutex mutex;
  std::condition_variable wake, done;
  std::unique_ptr<char[]> buffer;  // the thread's while `pending`
  std::size_t size = 0;
  bool pending = false;   // buffer[0, size) is to be written
  bool stopping = false;
  int error = 0;          // errno of a failed write, not yet rethrown
  std::thread thread;     // last: it starts once the members it uses are made
};

Output::Output(int fd, bool line_buffered, std::size_t capacity, bool write_behind)
    : owned_(std::make_unique<FdWriter>(fd)),
      writer_(owned_.get()),
      line_buffered_(line_buffered),
      write_behind_(write_behind && !line_buffered),
      capacity_(capacity),
      buffer_(new char[capacity]) {}

Output::Output(Writer& writer, bool line_buffered, std::size_t capacity, bool write_behind)
    : writer_(&writer),
      line_buffered_(line_buffered),
      write_behind_(write_behind && !line_buffered),
      capacity_(capacity),
      buffer_(new char[capacity]) {}

Output::~Output() {
  try {
    flush();
  } catch (const OutputError&) {
    // Errors surface through explicit flush() calls; a destructor cannot report them.
  }
}

void Output::wait_behind() {
  if (!behind_) return;
  std::unique_lock lock(behind_->mutex);
  behind_->done.wait(lock, [this] { return !behind_->pending; });
  if (const int error = behind_->error; error != 0) {
    behind_->error = 0;
    throw OutputError(error);
  }
}

void Output::drain() {
  // Emptied first: after a failed write the buffered bytes are dropped, not written again.
  const std::size_t size = size_;
  size_ = 0;
  if (size == 0) return;
  if (!write_behind_) {
    writer_->write(std::string_view(buffer_.get(), size));
    return;
  }
  if (!behind_) behind_ = std::make_unique<Behind>(*writer_, capacity_);
  wait_behind();  // the other buffer is written (or its error thrown): take it
  {
    std::lock_guard lock(behind_->mutex);
    std::swap(buffer_, behind_->buffer);
    behind_->size = size;
    behind_->pending = true;
  }
  behind_->wake.notify_one();
}

void Output::write(std::string_view bytes) {
  if (bytes.size() >= capacity_) {
    drain();
    wait_behind();  // in order: after what the thread is writing
    writer_->write(bytes);
    return;
  }
  if (capacity_ - size_ < bytes.size()) drain();
  std::memcpy(buffer_.get() + size_, bytes.data(), bytes.size());
  size_ += bytes.size();
}

void Output::end_line(char terminator) {
  put(terminator);
  if (line_buffered_) drain();
}

void Output::write_number(std::uint64_t value) {
  char digits[24];
  const auto result = std::to_chars(digits, digits + sizeof digits, value);
  write(std::string_view(digits, static_cast<std::size_t>(result.ptr - digits)));
}

void Output::flush() {
  if (size_ > 0 && write_behind_ && !behind_) {
    // Never full yet: written here, without starting the thread for it.
    const std::size_t size = size_;
    size_ = 0;
    writer_->write(std::string_view(buffer_.get(), size));
    return;
  }
  if (size_ > 0) drain();
  wait_behind();
}

}  // namespace gpufilter
