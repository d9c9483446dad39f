// SyslogFramer: one stream connection's bytes -> lines, for syslog senders and plain
// line writers alike. The framing is detected per connection from its first bytes:
//
//   "[1-9][0-9]{0,8} <"  RFC 6587 octet counting: MSG-LEN SP MSG, where every syslog
//                        MSG starts with "<PRI>". Each frame's message becomes one line:
//                        a trailing LF counted in MSG-LEN is removed, any other LF is
//                        written as "#012" (rsyslog's escape), and '\n' ends the line.
//                        LF, CR and spaces between frames are skipped.
//   anything else        newline-delimited (RFC 6587 non-transparent framing): a
//                        LineFramer does the work.
//
// Same use as LineFramer: prepare(n) -> read into it -> commit(got) -> ready() ->
// RecordChannel::append -> consumed(taken). In octet mode ready() holds one frame at a
// time, at the stream offset of the message's first byte (the header is not part of the
// line), so frames never need to be contiguous with each other.
//
// A frame whose MSG-LEN, or whose escaped line, exceeds max_line_bytes is dropped (its
// bytes discarded as they arrive), counted in lines_too_long() and reported with the next
// line (Ready::skipped). A malformed header (a non-digit where MSG-LEN belongs, more than 9
// digits, no space after them) leaves the framer failed(): the frames before it are still
// ready to hand on, nothing after it is read, and error() says where.
//
// Memory: one read of unparsed bytes plus one frame in octet mode; LineFramer's bound in
// newline mode; after release(), about twice what is held.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpufilter/sources/line_framer.hpp"

namespace gpufilter {

class SyslogFramer {
 public:
  enum class Framing { kUndecided, kLines, kOctetCounted };
  using Ready = LineFramer::Ready;

  explicit SyslogFramer(std::size_t max_line_bytes);

  // Room for at least `min_room` more bytes; then commit() what was written there.
  std::span<char> prepare(std::size_t min_room);
  void commit(std::size_t n);
  // The connection ended. Newline mode: an unterminated last line becomes a line. Octet
  // mode: a frame cut short becomes a line of what arrived; a header cut short fails.
  void end_of_stream();

  Ready ready() const noexcept;
  // `n` bytes of ready().lines were handed on (a whole number of lines).
  void consumed(std::size_t n);

  Framing framing() const noexcept { return framing_; }
  // A malformed octet-counted header was seen; error() is "malformed octet-counted frame
  // at byte N" (N: its stream offset) or "truncated octet-counted frame at byte N".
  bool failed() const noexcept { return !error_.empty(); }
  const std::string& error() const noexcept { return error_; }

  // Stream offset just past the last line handed on (or frame dropped).
  std::uint64_t offset() const noexcept;
  std::uint64_t lines_too_long() const noexcept;
  // Bytes received and not yet handed on or dropped.
  std::size_t buffered() const noexcept;
  // Gives back buffer memory beyond what is held (LineFramer::release()): for a connection
  // that has nothing to read now.
  void release();
  // Bytes of buffer allocated.
  std::size_t capacity() const noexcept;
  std::size_t max_line_bytes() const noexcept { return max_line_; }

 private:
  enum class State { kBetween, kLength, kBody, kSkipping };

  void detect();             // decides the framing once enough bytes are in
  void parse();              // octet mode: frames from raw_ until one is ready
  void body(std::size_t n);  // n message bytes from raw_ into frame_, LFs escaped
  void at_end();             // octet mode: the stream ended with raw_ parsed
  void fail(const char* what, std::uint64_t at);
  void advance(std::size_t n) noexcept {
    begin_ += n;
    raw_offset_ += n;
  }

  std::size_t max_line_;
  Framing framing_ = Framing::kUndecided;
  std::unique_ptr<LineFramer> lines_;  // newline mode

  // Undecided and octet mode: received bytes not yet parsed.
  std::vector<char> raw_;
  std::size_t begin_ = 0;
  std::size_t size_ = 0;
  std::uint64_t raw_offset_ = 0;  // stream offset of raw_[begin_]

  // Octet mode.
  State state_ = State::kBetween;
  std::uint64_t length_ = 0;       // MSG-LEN of the frame being read
  unsigned digits_ = 0;            // of MSG-LEN so far
  std::uint64_t header_at_ = 0;    // stream offset of the frame's first digit
  std::uint64_t remaining_ = 0;    // message bytes still to come
  std::string frame_;              // the line being built, '\n' added once whole
  bool frame_ready_ = false;
  std::uint64_t frame_offset_ = 0;  // stream offset of the message's first byte
  std::uint64_t frame_end_ = 0;     // stream offset just past the frame
  std::uint64_t done_offset_ = 0;   // offset(): past the last frame handed on or dropped
  std::uint64_t skipped_ = 0;
  std::uint64_t too_long_ = 0;
  bool ended_ = false;  // end_of_stream() was called
  std::string error_;
};

}  // namespace gpufilter
