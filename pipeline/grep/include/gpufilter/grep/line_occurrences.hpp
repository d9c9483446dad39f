// LineCutter: the one way to cut scanned bytes into lines, each with its own occurrences.
// A scan reports occurrences relative to a whole piece of many lines; the Searcher and
// gpufilterd's rules judge one line at a time, with positions relative to that line.
//
// The Occurrence contract makes the cut exact: an occurrence is a literal, and no pattern
// holds a '\n' (PatternSet splits on it), so every occurrence lies inside one line. The
// cutter hands an occurrence to the line it starts in; one that ran past that line's end
// would reach the consumer unchanged, and every consumer checks the bounds itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <vector>

#include "gpufilter/core/chunk.hpp"

namespace gpufilter {

// An occurrence within one line: position relative to the line's first byte. Wider than
// Occurrence because a line joined from many chunks can be longer than 4 GiB.
struct LineOccurrence {
  std::uint64_t position;
  std::uint32_t pattern;
};

// One line as LineCutter yields it. T: LineOccurrence, or Occurrence where lines are
// bounded by a chunk (gpufilterd's rules).
template <typename T>
struct CutLine {
  std::string_view text;         // without its '\n'
  std::uint64_t offset = 0;      // absolute offset of text[0] in the input; never an index
  std::span<const T> occurrences;  // those starting in the line, relative to text[0], in the order given
  bool terminated = false;       // ended by '\n' (false: the bytes after the last '\n' of `data`)
};

template <typename T = LineOccurrence>
class LineCutter {
 public:
  // Cuts data[from, data.size()) into lines. data[0] sits at absolute `offset`;
  // `occurrences` are relative to data[0], sorted by position (PatternTable::before order
  // is kept), and those before `index` were already handed out. `scratch` holds the
  // current line's occurrences and is reused from line to line (and call to call).
  // `eol` ends a line: '\n', or '\0' for grep -z (no pattern holds either then).
  LineCutter(std::string_view data, std::uint64_t offset, std::span<const Occurrence> occurrences,
             std::vector<T>& scratch, std::size_t from = 0, std::size_t index = 0, char eol = '\n') noexcept
      : data_(data),
        offset_(offset),
        occurrences_(occurrences),
        scratch_(scratch),
        pos_(from),
        index_(index),
        eol_(eol) {}

  // The next line into `line`; false when no byte is left. `line` stays valid until the
  // next call (its occurrences live in the scratch vector).
  bool next(CutLine<T>& line) {
    if (pos_ >= data_.size()) return false;
    const std::size_t begin = pos_;
    const void* nl = std::memchr(data_.data() + begin, eol_, data_.size() - begin);
    const std::size_t end = nl != nullptr ? static_cast<std::size_t>(static_cast<const char*>(nl) - data_.data())
                                          : data_.size();
    scratch_.clear();
    for (; index_ < occurrences_.size() && occurrences_[index_].position < end; ++index_)
      scratch_.push_back(T{static_cast<decltype(T::position)>(occurrences_[index_].position - begin),
                           occurrences_[index_].pattern});
    line.text = data_.substr(begin, end - begin);
    line.offset = offset_ + begin;
    line.occurrences = scratch_;
    line.terminated = nl != nullptr;
    pos_ = end + 1;
    return true;
  }

  // The first occurrence not yet handed out: one past the last line's, or one starting
  // at or past data.size() (a line that the next piece completes).
  std::size_t index() const noexcept { return index_; }

 private:
  std::string_view data_;
  std::uint64_t offset_;
  std::span<const Occurrence> occurrences_;
  std::vector<T>& scratch_;
  std::size_t pos_;
  std::size_t index_;
  char eol_;  // the byte that ends a line ('\0' for grep -z)
};

}  // namespace gpufilter
