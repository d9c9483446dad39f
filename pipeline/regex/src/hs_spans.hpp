// HsSpans: grep's -o/--color walk for -G/-E patterns that Hyperscan reads exactly as
// grep's regex does and that look at nothing around a match (no anchor, no word
// assertion, no empty match): the leftmost start of a match after a point, and the longest
// match there, from one Hyperscan scan with start of match (HS_FLAG_SOM_LEFTMOST) instead
// of glibc's search, which tries each start in turn.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <utility>
#include <string>
#include <string_view>
#include <vector>

struct hs_database;
struct hs_scratch;

namespace gpufilter::regex {

class HsSpans {
 public:
  // Nothing where Hyperscan refuses some expression (with start of match): glibc walks.
  static std::unique_ptr<HsSpans> compile(const std::vector<std::string>& expressions, bool ignore_case);
  ~HsSpans();
  HsSpans(const HsSpans&) = delete;
  HsSpans& operator=(const HsSpans&) = delete;
  // One for another thread: the same database, its own scratch.
  std::unique_ptr<HsSpans> clone() const;

  // The leftmost-longest match of any expression in `text` as [first, second), or none.
  // A match's start is its leftmost for its end; the leftmost of those starts is the
  // leftmost of all matches, and the longest match from there reports that start.
  // Returns false where Hyperscan could not scan the text (its HS_UNKNOWN_ERROR on some
  // literal sets; regex_fuzz found one): glibc walks then.
  bool leftmost_longest(std::string_view text, std::optional<std::pair<std::size_t, std::size_t>>& found);

 private:
  HsSpans(std::shared_ptr<hs_database> database);
  std::shared_ptr<hs_database> database_;
  hs_scratch* scratch_ = nullptr;
};

}  // namespace gpufilter::regex
