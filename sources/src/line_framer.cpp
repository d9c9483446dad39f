#include "gpufilter/sources/line_framer.hpp"

#include <algorithm>
#include <cstring>

namespace gpufilter {

LineFramer::LineFramer(std::size_t max_line_bytes, std::uint64_t offset)
    : max_line_(std::max<std::size_t>(max_line_bytes, 1)), offset_(offset) {}

std::span<char> LineFramer::prepare(std::size_t min_room) {
  if (begin_ > 0 && (begin_ == size_ || begin_ >= buffer_.size() / 2 || buffer_.size() - size_ < min_room)) {
    std::memmove(buffer_.data(), buffer_.data() + begin_, size_ - begin_);
    size_ -= begin_;
    checked_ -= begin_;
    begin_ = 0;
  }
  if (buffer_.size() - size_ < min_room) buffer_.resize(size_ + min_room);
  return std::span<char>(buffer_.data() + size_, buffer_.size() - size_);
}

void LineFramer::drop_front(std::size_t n) {
  begin_ += n;
  offset_ += n;
  if (checked_ < begin_) checked_ = begin_;
}

void LineFramer::check() {
  // Nothing received yet, or everything given back (release()): the buffer may have no
  // storage at all, and memchr must not be given its null data() even for 0 bytes.
  if (begin_ == size_) return;
  for (;;) {
    if (discarding_) {
      // Only ever at begin_: everything before it was handed on.
      const char* nl = static_cast<const char*>(std::memchr(buffer_.data() + begin_, '\n', size_ - begin_));
      if (nl == nullptr) {
        drop_front(size_ - begin_);
        return;
      }
      drop_front(static_cast<std::size_t>(nl - buffer_.data()) + 1 - begin_);
      discarding_ = false;
      continue;
    }
    const char* nl = static_cast<const char*>(std::memchr(buffer_.data() + checked_, '\n', size_ - checked_));
    const std::size_t line_end = nl != nullptr ? static_cast<std::size_t>(nl - buffer_.data()) : size_;
    if (line_end - checked_ <= max_line_) {
      if (nl == nullptr) return;  // a partial line, short enough so far
      checked_ = line_end + 1;
      continue;
    }
    // Over-long, complete or not. It can be dropped only once the lines before it are
    // handed on, so that the ready lines stay one contiguous piece.
    if (checked_ != begin_) return;
    ++too_long_;
    ++skipped_;
    if (nl != nullptr) {
      drop_front(line_end + 1 - begin_);
    } else {
      drop_front(size_ - begin_);
      discarding_ = true;
      return;
    }
  }
}

void LineFramer::commit(std::size_t n) {
  size_ += n;
  check();
}

void LineFramer::end_of_stream() {
  if (discarding_) {
    discarding_ = false;
    return;
  }
  // Bytes past checked_ that end in '\n' are whole lines waiting behind an over-long one.
  if (size_ > checked_ && buffer_[size_ - 1] != '\n') {
    // An over-long unterminated tail gets no '\n': check() drops it once the lines before
    // it are taken, as it would have on arrival had they been taken already, so offset()
    // ends at the stream's last byte however the stream was read and taken.
    const auto* nl = static_cast<const char*>(memrchr(buffer_.data() + checked_, '\n', size_ - checked_));
    const std::size_t tail_begin = nl != nullptr ? static_cast<std::size_t>(nl - buffer_.data()) + 1 : checked_;
    if (size_ - tail_begin > max_line_) return;
    prepare(1);
    buffer_[size_++] = '\n';
    check();
  }
}

void LineFramer::release() {
  constexpr std::size_t kSlack = 4096;
  const std::size_t held = size_ - begin_;
  if (buffer_.capacity() - held <= std::max(held, kSlack)) return;
  std::vector<char> kept(buffer_.begin() + static_cast<std::ptrdiff_t>(begin_),
                         buffer_.begin() + static_cast<std::ptrdiff_t>(size_));
  buffer_.swap(kept);
  checked_ -= begin_;
  size_ = held;
  begin_ = 0;
}

LineFramer::Ready LineFramer::ready() const noexcept {
  return Ready{std::string_view(buffer_.data() + begin_, checked_ - begin_), offset_, skipped_};
}

void LineFramer::consumed(std::size_t n) {
  if (n == 0) return;
  begin_ += n;
  offset_ += n;
  skipped_ = 0;
  check();  // an over-long line waiting behind the ready ones can go now
}

}  // namespace gpufilter
