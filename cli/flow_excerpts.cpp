// A flow's matches and the bytes around them, kept within their limits.
#include "flow_excerpts.hpp"

#include <algorithm>

namespace gpufilter {

bool FlowExcerpts::charge(std::size_t bytes, ExcerptBudget& budget) {
  if (budget.used + bytes > budget.limits.max_total_bytes) return false;
  budget.used += bytes;
  bytes_ += bytes;
  return true;
}

void FlowExcerpts::release(ExcerptBudget& budget) {
  budget.used -= std::min(budget.used, bytes_);
  bytes_ = 0;
}

// The direction's last region takes what it still wants of bytes (from stream offset at).
void FlowExcerpts::grow(int direction, std::uint64_t at, std::string_view bytes, ExcerptBudget& budget) {
  if (last_region_[direction] < 0) return;
  FlowRegion& r = regions_[static_cast<std::size_t>(last_region_[direction])];
  const std::uint64_t have = r.offset + r.bytes.size();
  const std::uint64_t limit =
      std::min({want_end_[direction], at + bytes.size(), r.offset + budget.limits.max_region_bytes});
  if (have < at) {  // bytes never captured lie between: the region ends where it is
    want_end_[direction] = have;
    return;
  }
  if (have >= limit) return;
  const std::string_view more = bytes.substr(have - at, limit - have);
  if (!charge(more.size(), budget)) {
    want_end_[direction] = have;
    return;
  }
  r.bytes.append(more);
}

void FlowExcerpts::piece(int direction, std::uint64_t at, std::string_view bytes, ExcerptBudget& budget) {
  grow(direction, at, bytes, budget);
}

void FlowExcerpts::match(int direction, std::uint64_t at, std::string_view bytes, std::size_t begin,
                         std::size_t end, std::uint32_t pattern, std::size_t floor, ExcerptBudget& budget) {
  const ExcerptLimits& limits = budget.limits;
  const std::uint64_t offset = at + begin;
  if (offset < match_end_[direction]) return;  // overlaps the last one
  match_end_[direction] = at + end;
  const std::string_view text = bytes.substr(begin, std::min(end - begin, limits.max_match_bytes));
  if (matches_.size() >= limits.max_matches || !charge(text.size() + sizeof(FlowMatch), budget)) {
    ++left_out_;
    return;
  }
  matches_.push_back(FlowMatch{direction != 0, offset, std::string(text), end - begin, pattern});
  // Its region: the context before it (within this piece, which holds enough of the stream
  // before the new bytes), it, and the context after it, here and in pieces to come.
  const std::uint64_t start = at + std::max(floor, begin - std::min(begin, limits.before));
  const std::uint64_t target = at + end + limits.after;
  const long last = last_region_[direction];
  if (last >= 0) {
    const FlowRegion& r = regions_[static_cast<std::size_t>(last)];
    if (r.offset + r.bytes.size() >= start && r.offset + limits.max_region_bytes > offset) {
      want_end_[direction] = std::max(want_end_[direction], target);
      grow(direction, at, bytes, budget);
      return;
    }
  }
  if (regions_.size() >= limits.max_regions || !charge(sizeof(FlowRegion), budget)) return;
  regions_.push_back(FlowRegion{direction != 0, start, {}});
  last_region_[direction] = static_cast<long>(regions_.size() - 1);
  want_end_[direction] = target;
  grow(direction, at, bytes, budget);
}

}  // namespace gpufilter
