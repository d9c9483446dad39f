// line_framer_fuzz: LineFramer, the newline framing of followed files and sockets.
//
// Input: [0] bits 0-2 pick max_line_bytes (1, 2, 3, 5, 8, 16, 64, 1024), bits 3-7 seed the
// second run; [1] bits 0-2 pick the largest piece of the second run (1, 2, 3, 5, 17, 64,
// 1000 bytes, or whole); then the stream's bytes.
// Checked: the run that gets the stream in one piece and takes every line equals a plain
// model of the framing (every '\n'-ended line of at most max_line_bytes, its offset, the
// over-long lines dropped before it; at the end an unterminated last line with a '\n'
// added); a second run that gets the stream in small pieces and takes lines a few at a
// time produces exactly the same; no line longer than max_line_bytes comes out; with
// every line taken the framer holds at most one partial line.
#include <cstdint>
#include <string>
#include <string_view>

#include "framer_driver.hpp"
#include "gpufilter/sources/line_framer.hpp"

namespace {

using gpufilter::fuzz::Outcome;

constexpr std::size_t kMaxLines[] = {1, 2, 3, 5, 8, 16, 64, 1024};
constexpr std::size_t kPieces[] = {1, 2, 3, 5, 17, 64, 1000, 0};
constexpr std::uint64_t kStart = 1000;  // a followed file resumed at an offset

Outcome model(std::string_view input, std::size_t max_line) {
  Outcome e;
  std::uint64_t skipped = 0;
  std::size_t pos = 0;
  bool added_newline = false;
  while (pos < input.size()) {
    const std::size_t nl = input.find('\n', pos);
    const bool complete = nl != std::string_view::npos;
    const std::size_t end = complete ? nl : input.size();
    if (end - pos > max_line) {
      ++e.too_long;
      ++skipped;
    } else {
      e.records.push_back({std::string(input.substr(pos, end - pos)) + "\n", kStart + pos, skipped});
      skipped = 0;
      added_newline = !complete;
    }
    pos = complete ? nl + 1 : input.size();
  }
  // The '\n' that ends an unterminated last line counts as a byte handed on.
  e.offset = kStart + input.size() + (added_newline ? 1 : 0);
  return e;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const std::size_t max_line = kMaxLines[data[0] & 7];
  const std::string_view input(reinterpret_cast<const char*>(data) + 2, size - 2);

  gpufilter::fuzz::Rng rng_whole(0);
  gpufilter::LineFramer whole(max_line, kStart);
  const Outcome a = gpufilter::fuzz::run(whole, input, 0, rng_whole, false);
  const Outcome expected = model(input, max_line);
  if (a != expected) gpufilter::fuzz::fail("the framer differs from the model (first: model)", expected, &a);

  gpufilter::fuzz::Rng rng(data[0] >> 3 | static_cast<std::uint32_t>(data[1]) << 5);
  gpufilter::LineFramer pieces(max_line, kStart);
  const Outcome b = gpufilter::fuzz::run(pieces, input, kPieces[data[1] & 7], rng, (data[1] & 8) != 0);
  if (a != b) gpufilter::fuzz::fail("the lines depend on how the stream was split or taken", a, &b);
  return 0;
}
