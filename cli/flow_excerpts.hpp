// What a selected --stream flow shows of its matches: the first matches (their offsets in
// their direction's byte stream and their bytes) and the regions around them (the -B and
// -A context bytes, 64 each by default), collected while the flow is scanned, piece by
// piece, within limits per flow and for all open flows together (ExcerptBudget). Past a
// limit a match is only counted (left_out). docs/CAPTURES.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "gpufilter/sinks/packet_printer.hpp"

namespace gpufilter {

struct ExcerptLimits {
  std::size_t before = 64;               // context bytes before a match
  std::size_t after = 64;                // and after it
  std::size_t max_matches = 256;         // per flow
  std::size_t max_regions = 32;          // per flow
  std::size_t max_region_bytes = 4096;   // a region grows no further
  std::size_t max_match_bytes = 4096;    // a longer match keeps its first bytes
  std::size_t max_total_bytes = std::size_t{64} << 20;  // all open flows' excerpts together
};

// Shared by all flows of a run.
struct ExcerptBudget {
  ExcerptLimits limits;
  std::size_t used = 0;
};

class FlowExcerpts {
 public:
  // A piece of `direction`'s stream, `bytes` from stream offset `at`, was scanned: the
  // direction's last region takes the after-context bytes it still waits for. Call before
  // the piece's matches.
  void piece(int direction, std::uint64_t at, std::string_view bytes, ExcerptBudget& budget);
  // A match at bytes[begin, end) of that piece; one that overlaps the direction's last
  // match is not another match (grep -o's spans do not overlap). Its region starts no
  // earlier than bytes[floor] (regexes: the match's line).
  void match(int direction, std::uint64_t at, std::string_view bytes, std::size_t begin, std::size_t end,
             std::uint32_t pattern, std::size_t floor, ExcerptBudget& budget);
  // The flow ended: its bytes go back to the budget.
  void release(ExcerptBudget& budget);

  const std::vector<FlowMatch>& matches() const noexcept { return matches_; }
  const std::vector<FlowRegion>& regions() const noexcept { return regions_; }
  std::uint64_t left_out() const noexcept { return left_out_; }

 private:
  bool charge(std::size_t bytes, ExcerptBudget& budget);
  void grow(int direction, std::uint64_t at, std::string_view bytes, ExcerptBudget& budget);

  std::vector<FlowMatch> matches_;
  std::vector<FlowRegion> regions_;
  std::uint64_t left_out_ = 0;
  std::size_t bytes_ = 0;               // charged to the budget
  long last_region_[2] = {-1, -1};      // each direction's newest region
  std::uint64_t want_end_[2] = {0, 0};  // the stream offset its after-context reaches
  std::uint64_t match_end_[2] = {0, 0}; // where the direction's last match ended
};

}  // namespace gpufilter
