// SyslogFramer: framing detection and RFC 6587 octet counting; newline framing is
// LineFramer's (see syslog_framer.hpp).
#include "gpufilter/sources/syslog_framer.hpp"

#include <algorithm>
#include <cstring>
#include <string>

namespace gpufilter {

namespace {

constexpr unsigned kMaxDigits = 9;  // MSG-LEN below 10^9: rsyslog's limit too

bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

}  // namespace

SyslogFramer::SyslogFramer(std::size_t max_line_bytes) : max_line_(std::max<std::size_t>(max_line_bytes, 1)) {}

std::span<char> SyslogFramer::prepare(std::size_t min_room) {
  if (lines_) return lines_->prepare(min_room);
  if (begin_ > 0 && (begin_ == size_ || begin_ >= raw_.size() / 2 || raw_.size() - size_ < min_room)) {
    std::memmove(raw_.data(), raw_.data() + begin_, size_ - begin_);
    size_ -= begin_;
    begin_ = 0;
  }
  if (raw_.size() - size_ < min_room) raw_.resize(size_ + min_room);
  return std::span<char>(raw_.data() + size_, raw_.size() - size_);
}

void SyslogFramer::commit(std::size_t n) {
  if (lines_) {
    lines_->commit(n);
    return;
  }
  size_ += n;
  if (framing_ == Framing::kUndecided) detect();
  else parse();
}

void SyslogFramer::end_of_stream() {
  if (ended_) return;
  ended_ = true;
  if (lines_) lines_->end_of_stream();
  else if (framing_ == Framing::kUndecided) detect();
  else parse();
}

// Octet counting needs "[1-9][0-9]{0,8} <" at the very start: at most 11 bytes decide.
// Until then nothing is handed on, however the bytes are split.
void SyslogFramer::detect() {
  const char* b = raw_.data() + begin_;
  const std::size_t n = size_ - begin_;
  enum class Verdict { kWait, kLines, kOctets } verdict = Verdict::kWait;
  if (n == 0) {
    verdict = Verdict::kWait;
  } else if (b[0] < '1' || b[0] > '9') {
    verdict = Verdict::kLines;
  } else {
    std::size_t i = 1;
    while (i < n && i <= kMaxDigits && is_digit(b[i])) ++i;
    if (i > kMaxDigits) verdict = Verdict::kLines;  // ten digits: no MSG-LEN
    else if (i == n) verdict = Verdict::kWait;
    else if (b[i] != ' ') verdict = Verdict::kLines;
    else if (i + 1 == n) verdict = Verdict::kWait;
    else verdict = b[i + 1] == '<' ? Verdict::kOctets : Verdict::kLines;
  }
  if (verdict == Verdict::kWait) {
    if (!ended_) return;
    if (n == 0) return;  // nothing was ever received
    verdict = Verdict::kLines;  // "12" then the end: a line like any other
  }
  if (verdict == Verdict::kOctets) {
    framing_ = Framing::kOctetCounted;
    parse();
    return;
  }
  // Newline mode from here on: what was held goes to a LineFramer as if just received.
  framing_ = Framing::kLines;
  lines_ = std::make_unique<LineFramer>(max_line_, raw_offset_);
  const std::span<char> dst = lines_->prepare(n);
  std::memcpy(dst.data(), b, n);
  std::vector<char>().swap(raw_);
  begin_ = size_ = 0;
  lines_->commit(n);
  if (ended_) lines_->end_of_stream();
}

void SyslogFramer::fail(const char* what, std::uint64_t at) {
  error_ = std::string(what) + " octet-counted frame at byte " + std::to_string(at);
}

// Parses until a frame is whole (it waits in frame_ until consumed()), the bytes run out,
// or the stream is malformed.
void SyslogFramer::parse() {
  while (!frame_ready_ && error_.empty()) {
    const std::size_t avail = size_ - begin_;
    if (avail == 0) {
      if (ended_) at_end();
      return;
    }
    const char c = raw_[begin_];
    switch (state_) {
      case State::kBetween:
        if (c == '\n' || c == '\r' || c == ' ') {
          advance(1);  // stray separators some senders put between frames
        } else if (c >= '1' && c <= '9') {
          header_at_ = raw_offset_;
          length_ = static_cast<std::uint64_t>(c - '0');
          digits_ = 1;
          state_ = State::kLength;
          advance(1);
        } else {
          fail("malformed", raw_offset_);
        }
        break;
      case State::kLength:
        if (is_digit(c)) {
          if (digits_ == kMaxDigits) {
            fail("malformed", raw_offset_);
            break;
          }
          length_ = length_ * 10 + static_cast<std::uint64_t>(c - '0');
          ++digits_;
          advance(1);
        } else if (c == ' ') {
          advance(1);
          frame_offset_ = raw_offset_;
          frame_end_ = raw_offset_ + length_;
          remaining_ = length_;
          frame_.clear();
          if (length_ > max_line_) {
            ++too_long_;
            ++skipped_;
            state_ = State::kSkipping;
          } else {
            state_ = State::kBody;
          }
        } else {
          fail("malformed", raw_offset_);
        }
        break;
      case State::kBody:
        body(static_cast<std::size_t>(std::min<std::uint64_t>(remaining_, avail)));
        break;
      case State::kSkipping: {
        const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(remaining_, avail));
        advance(n);
        remaining_ -= n;
        if (remaining_ == 0) {
          state_ = State::kBetween;
          done_offset_ = frame_end_;
        }
        break;
      }
    }
  }
}

void SyslogFramer::body(std::size_t n) {
  const char* p = raw_.data() + begin_;
  const char* const end = p + n;
  // The message's last byte lies in this piece when the piece ends the frame.
  const char* const last = n == remaining_ ? end - 1 : nullptr;
  while (p < end) {
    const auto* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<std::size_t>(end - p)));
    frame_.append(p, nl != nullptr ? nl : end);
    if (nl == nullptr) break;
    // A trailing LF is the sender's line end (rsyslog, syslog-ng add one); any other
    // would split the message into two lines, so it is escaped as rsyslog does.
    if (nl != last) frame_ += "#012";
    p = nl + 1;
  }
  advance(n);
  remaining_ -= n;
  if (frame_.size() > max_line_) {
    // Escaping made it too long: dropped like a long MSG-LEN, the rest as it arrives.
    ++too_long_;
    ++skipped_;
    std::string().swap(frame_);
    state_ = State::kSkipping;
    if (remaining_ == 0) {
      state_ = State::kBetween;
      done_offset_ = frame_end_;
    }
    return;
  }
  if (remaining_ == 0) {
    frame_ += '\n';
    frame_ready_ = true;
    state_ = State::kBetween;
  }
}

void SyslogFramer::at_end() {
  switch (state_) {
    case State::kBetween:
      break;
    case State::kLength:
      fail("truncated", header_at_);
      break;
    case State::kBody:
      if (remaining_ == length_) {
        fail("truncated", header_at_);  // a header and no message
        break;
      }
      // A frame cut short: what arrived was received, so it is a line like an
      // unterminated last line in newline mode.
      frame_ += '\n';
      frame_end_ = raw_offset_;
      frame_ready_ = true;
      break;
    case State::kSkipping:
      done_offset_ = raw_offset_;
      break;
  }
  state_ = State::kBetween;
}

SyslogFramer::Ready SyslogFramer::ready() const noexcept {
  if (lines_) return lines_->ready();
  if (frame_ready_) return Ready{std::string_view(frame_), frame_offset_, skipped_};
  return Ready{std::string_view(), done_offset_, skipped_};
}

void SyslogFramer::consumed(std::size_t n) {
  if (lines_) {
    lines_->consumed(n);
    return;
  }
  if (n == 0 || !frame_ready_) return;
  // One frame is one line: it is taken whole or not at all.
  frame_ready_ = false;
  frame_.clear();
  skipped_ = 0;
  done_offset_ = frame_end_;
  parse();
}

std::uint64_t SyslogFramer::offset() const noexcept { return lines_ ? lines_->offset() : done_offset_; }

std::uint64_t SyslogFramer::lines_too_long() const noexcept {
  return too_long_ + (lines_ ? lines_->lines_too_long() : 0);
}

std::size_t SyslogFramer::buffered() const noexcept {
  return lines_ ? lines_->buffered() : (size_ - begin_) + frame_.size();
}

void SyslogFramer::release() {
  if (lines_) {
    lines_->release();
    return;
  }
  // The same rule as LineFramer::release(): give back slack larger than what is held and
  // 4 KiB, so that a frame trickling in is not copied over and over.
  constexpr std::size_t kSlack = 4096;
  const std::size_t held = size_ - begin_;
  if (raw_.capacity() - held > std::max(held, kSlack)) {
    std::vector<char> kept(raw_.begin() + static_cast<std::ptrdiff_t>(begin_),
                           raw_.begin() + static_cast<std::ptrdiff_t>(size_));
    raw_.swap(kept);
    size_ = held;
    begin_ = 0;
  }
  if (frame_.capacity() - frame_.size() > std::max(frame_.size(), kSlack)) {
    // A copy rather than shrink_to_fit(), which the standard allows to do nothing.
    std::string kept(frame_);
    frame_.swap(kept);
  }
}

std::size_t SyslogFramer::capacity() const noexcept {
  return lines_ ? lines_->capacity() : raw_.capacity() + frame_.capacity();
}

}  // namespace gpufilter
