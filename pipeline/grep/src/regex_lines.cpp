#include "gpufilter/grep/regex_lines.hpp"

#include <algorithm>
#include <map>

#include "gpufilter/regex/factors.hpp"

namespace gpufilter {
namespace {

std::string folded(std::string s, bool ignore_case) {
  for (char& c : s) c = static_cast<char>(fold_byte(static_cast<unsigned char>(c), ignore_case));
  return s;
}

}  // namespace

RegexLines::RegexLines(std::unique_ptr<regex::LineRegex> regex, const std::vector<std::string>& patterns,
                       regex::Syntax syntax, bool ignore_case, bool utf8)
    : regex_(std::move(regex)), seen_(patterns.size(), 0) {
  regex::FactorOptions options;
  options.ignore_case = ignore_case;
  options.utf8 = utf8;
  options.min_length = 2;
  std::map<std::string, std::uint32_t> index_of;  // folded factor -> index in factors_
  for (std::size_t i = 0; i < patterns.size(); ++i) {
    const auto found = regex_->whole_list() ? std::nullopt : regex::required_factors(patterns[i], syntax, options);
    if (!found) {
      unfiltered_.push_back(static_cast<std::uint32_t>(i));
      continue;
    }
    for (const std::string& f : *found) {
      auto [it, added] = index_of.emplace(folded(f, ignore_case), static_cast<std::uint32_t>(patterns_of_factor_.size()));
      if (added) {
        factors_.add(f);
        patterns_of_factor_.emplace_back();
      }
      auto& of = patterns_of_factor_[it->second];
      if (of.empty() || of.back() != i) of.push_back(static_cast<std::uint32_t>(i));
    }
  }
  if (factors_.empty()) factors_.add("");
}

void RegexLines::bind(const PatternTable& table) {
  patterns_of_id_.assign(table.unique_count(), {});
  for (std::size_t k = 0; k < patterns_of_factor_.size(); ++k) {
    const std::uint32_t id = table.unique_of(k);
    if (id == PatternTable::kNoPattern) continue;
    auto& to = patterns_of_id_[id];
    to.insert(to.end(), patterns_of_factor_[k].begin(), patterns_of_factor_[k].end());
  }
}

bool RegexLines::gather(std::span<const LineOccurrence> occurrences, bool count) {
  candidates_.clear();
  ++generation_;
  for (const LineOccurrence& o : occurrences) {
    if (o.pattern >= patterns_of_id_.size()) continue;
    for (std::uint32_t i : patterns_of_id_[o.pattern]) {
      if (seen_[i] == generation_) continue;
      seen_[i] = generation_;
      candidates_.push_back(i);
    }
  }
  if (count && !candidates_.empty()) ++counts_.candidates;
  else if (count && !unfiltered_.empty()) ++counts_.full_scan;
  candidates_.insert(candidates_.end(), unfiltered_.begin(), unfiltered_.end());
  std::sort(candidates_.begin(), candidates_.end());
  return !candidates_.empty();
}

bool RegexLines::line_matches(std::string_view line, std::span<const LineOccurrence> occurrences) {
  if (!gather(occurrences, true)) return false;
  if (!regex_->selects_any(line, candidates_, nullptr)) return false;
  ++counts_.confirmed;
  return true;
}

// grep's print_line_middle: matches from where the last one ended; an empty match moves
// on by one byte and prints nothing.
void RegexLines::match_spans(std::string_view line, std::span<const LineOccurrence> occurrences,
                             std::vector<MatchSpan>& out) {
  out.clear();
  if (!gather(occurrences, false)) return;
  std::size_t from = 0;
  regex::Found found;
  while (from <= line.size() && regex_->find(line, from, candidates_, found)) {
    if (found.length == 0) {
      from = found.begin + 1;
      continue;
    }
    const std::size_t end = std::min(found.begin + found.length, line.size());
    out.push_back({found.begin, end, found.newline});
    from = found.begin + found.length;
  }
}

void RegexLines::matched_patterns(std::string_view line, std::span<const LineOccurrence> occurrences,
                                  std::vector<std::uint32_t>& out) {
  out.clear();
  if (!gather(occurrences, false)) return;
  regex_->selects_any(line, candidates_, &out);
}

}  // namespace gpufilter
