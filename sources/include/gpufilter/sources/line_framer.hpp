// LineFramer: one stream's bytes -> whole lines, with the stream's own partial-line state.
// Every reader of a line-oriented stream (a followed file, a TCP or unix connection)
// receives into it and hands on only whole lines, so lines of two streams never mix.
//
//   prepare(n) -> read into it -> commit(got) -> ready() -> RecordChannel::append
//   -> consumed(taken)  (less than ready() when the channel is full: stop reading)
//
// A line longer than max_line_bytes (its '\n' not counted) is dropped whole, counted in
// lines_too_long(), and reported with the next lines (Ready::skipped). Memory: at most
// max_line_bytes plus one read, plus the ready lines the channel has not taken yet; after
// release(), about twice what is held.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace gpufilter {

class LineFramer {
 public:
  // `offset`: where the first byte received lies in the stream (a file's start offset).
  explicit LineFramer(std::size_t max_line_bytes, std::uint64_t offset = 0);

  // Room for at least `min_room` more bytes; then commit() what was written there.
  std::span<char> prepare(std::size_t min_room);
  void commit(std::size_t n);
  // The input ended: an unterminated last line becomes a line of its own ('\n' added).
  void end_of_stream();

  struct Ready {
    std::string_view lines;  // whole lines, each ending in '\n'; may be empty
    std::uint64_t offset;    // stream offset of lines[0]
    std::uint64_t skipped;   // over-long lines dropped just before lines[0]
  };
  Ready ready() const noexcept;
  // `n` bytes of ready().lines were handed on (a whole number of lines).
  void consumed(std::size_t n);

  // Stream offset just past the last byte handed on (or dropped).
  std::uint64_t offset() const noexcept { return offset_; }
  std::uint64_t lines_too_long() const noexcept { return too_long_; }
  // Bytes received and not yet handed on: the partial last line and ready lines.
  std::size_t buffered() const noexcept { return size_ - begin_; }
  // The part of a line received so far that is not yet complete.
  std::size_t partial() const noexcept { return size_ - checked_; }
  // Gives back buffer memory beyond what is held, when the free space is larger than both
  // the held bytes and 4 KiB: a reader that goes idle keeps only its partial line, and a
  // line trickling in is not copied over and over (the slack kept is at least the line).
  void release();
  // Bytes of buffer allocated (held plus free space).
  std::size_t capacity() const noexcept { return buffer_.capacity(); }
  std::size_t max_line_bytes() const noexcept { return max_line_; }

 private:
  void check();                    // validates complete lines from checked_ on
  void drop_front(std::size_t n);  // drops n bytes at begin_ (an over-long line)

  std::size_t max_line_;
  std::vector<char> buffer_;
  std::size_t begin_ = 0;    // first byte not handed on
  std::size_t checked_ = 0;  // end of the whole, valid lines ready to hand on
  std::size_t size_ = 0;     // bytes held
  std::uint64_t offset_;     // stream offset of buffer_[begin_]
  std::uint64_t skipped_ = 0;
  std::uint64_t too_long_ = 0;
  bool discarding_ = false;  // inside an over-long line: drop up to its '\n'
};

}  // namespace gpufilter
