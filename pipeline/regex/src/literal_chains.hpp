// LiteralChains: the patterns whose Hyperscan text is literals joined by ".*" (a Loghub
// template, "acquire lock=.*, flags=.*, tag=\".*\""), decided without a database: such a
// text matches a line exactly when its literals occur in the line in their order without
// overlapping, and the earliest place of each after the one before is as good as any. A
// set of 1,358 templates spent most of a short run building Hyperscan's databases for
// them (about 70 ms a group of 64 on one core here), and a line then met a group's
// database where two or three searches of a literal (PairFind) decide its candidate.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gpufilter/core/pair_find.hpp"

namespace gpufilter::regex {

class LiteralChains {
 public:
  // `expressions[k]` (Hyperscan syntax, as HsSelect takes them) stands for pattern
  // `ids[k]`; those that are chains are kept, the others left in `rest` (same order).
  // `ignore_case`: ASCII letters fold, as Hyperscan's caseless reading outside UTF-8 mode
  // (the only one GnuRegex gives it). `utf8`: the lines asked about are valid UTF-8.
  LiteralChains(const std::vector<std::string>& expressions, const std::vector<std::uint32_t>& ids,
                bool ignore_case, bool utf8, std::vector<std::string>& rest_expressions,
                std::vector<std::uint32_t>& rest_ids);

  bool empty() const noexcept { return chains_.empty(); }
  // Whether pattern i is a chain here.
  bool has(std::uint32_t pattern) const noexcept {
    return pattern < index_.size() && index_[pattern] != kNone;
  }
  // Does chain `pattern` match `line` (a line Hyperscan would be given: no '\n', valid
  // UTF-8 in UTF-8 mode)? Under ignore_case, `line` is given with its ASCII letters
  // lowered (fold() into a buffer the caller keeps, once for all of a line's chains).
  bool matches(std::uint32_t pattern, std::string_view line) const noexcept;
  bool ignore_case() const noexcept { return ignore_case_; }
  static void fold(std::string_view line, std::string& folded);

  // The literals of Hyperscan text `expression` if it is a chain of them (none: ".*").
  static bool parse(const std::string& expression, bool utf8, std::vector<std::string>& literals);

 private:
  static constexpr std::uint32_t kNone = 0xffffffffu;
  std::vector<std::uint32_t> index_;              // by pattern: its chain in chains_, or kNone
  std::vector<std::vector<PairFind>> chains_;  // literals, lowered under ignore_case
  bool ignore_case_ = false;
};

}  // namespace gpufilter::regex
