// syslog_framer_fuzz: SyslogFramer, the framing of TCP and unix connections: RFC 6587
// octet counting ("MSG-LEN SP <PRI>...") or newline framing, decided from the first bytes.
//
// Input: [0] bits 0-2 pick max_line_bytes (1, 2, 3, 5, 8, 16, 64, 1024), bits 3-7 seed the
// second run; [1] bits 0-2 pick the largest piece of the second run (1, 2, 3, 5, 17, 64,
// 1000 bytes, or whole), bit 3 makes it take lines a few at a time; then the connection's
// bytes. Lying counts (huge, cut short, non-digits, more than 9 digits) are the input's
// business; the seeds have some of each.
// Checked: the records (lines, offsets, over-long frames dropped before each), the final
// offset, the over-long count, the framing chosen and the error do not depend on how the
// bytes were split or how fast lines were taken; no line longer than max_line_bytes comes
// out and every line ends in its one '\n'; with every line taken the framer holds at most
// one partial frame; nothing is left after the end of the stream unless it failed.
#include <cstdint>
#include <string_view>

#include "framer_driver.hpp"
#include "gpufilter/sources/syslog_framer.hpp"

namespace {

constexpr std::size_t kMaxLines[] = {1, 2, 3, 5, 8, 16, 64, 1024};
constexpr std::size_t kPieces[] = {1, 2, 3, 5, 17, 64, 1000, 0};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using gpufilter::fuzz::Outcome;
  if (size < 2) return 0;
  const std::size_t max_line = kMaxLines[data[0] & 7];
  const std::string_view input(reinterpret_cast<const char*>(data) + 2, size - 2);

  gpufilter::fuzz::Rng rng_whole(0);
  gpufilter::SyslogFramer whole(max_line);
  const Outcome a = gpufilter::fuzz::run(whole, input, 0, rng_whole, false);
  for (const gpufilter::fuzz::Record& r : a.records)
    if (r.line.find('\n') != r.line.size() - 1) gpufilter::fuzz::fail("a record holds a '\\n' inside", a);

  gpufilter::fuzz::Rng rng(data[0] >> 3 | static_cast<std::uint32_t>(data[1]) << 5);
  gpufilter::SyslogFramer pieces(max_line);
  const Outcome b = gpufilter::fuzz::run(pieces, input, kPieces[data[1] & 7], rng, (data[1] & 8) != 0);
  if (a != b) gpufilter::fuzz::fail("the records depend on how the stream was split or taken", a, &b);
  if (whole.framing() != pieces.framing()) gpufilter::fuzz::fail("the framing depends on the split", a, &b);
  return 0;
}
