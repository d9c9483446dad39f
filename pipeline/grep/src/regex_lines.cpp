#include "gpufilter/grep/regex_lines.hpp"

#include <algorithm>
#include <unordered_map>

#include "gpufilter/core/utf8.hpp"
#include "gpufilter/regex/factors.hpp"

namespace gpufilter {
namespace {

std::string folded(std::string s, bool ignore_case) {
  for (char& c : s) c = static_cast<char>(fold_byte(static_cast<unsigned char>(c), ignore_case));
  return s;
}

}  // namespace

// What one thread needs to decide lines: its copy of the regexes and its scratch.
struct RegexLines::Lane {
  std::unique_ptr<regex::LineRegex> regex;  // null until the lane's first line
  std::vector<std::uint32_t> candidates;
  std::vector<std::uint64_t> seen;  // generation per regex
  std::uint64_t generation = 0;
  RegexCounts counts;
  std::uint64_t model = 0;  // an ahead lane's: the prepare_ahead() it was copied after
};

RegexLines::RegexLines(std::unique_ptr<regex::LineRegex> regex, const std::vector<std::string>& patterns,
                       regex::Syntax syntax, bool ignore_case, bool utf8)
    : pattern_count_(patterns.size()) {
  lanes_.push_back(std::make_unique<Lane>());
  lanes_[0]->regex = std::move(regex);
  lanes_[0]->seen.assign(patterns.size(), 0);
  const regex::LineRegex& given = *lanes_[0]->regex;
  regex::FactorOptions options;
  options.ignore_case = ignore_case;
  options.utf8 = utf8;
  options.min_length = 2;
  std::unordered_map<std::string, std::uint32_t> index_of;  // folded factor -> index in factors_
  index_of.reserve(patterns.size());
  for (std::size_t i = 0; i < patterns.size(); ++i) {
    const auto found = given.whole_list() ? std::nullopt : regex::required_factors(patterns[i], syntax, options);
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
  lanes_[0]->regex->factors_known(unfiltered_.size());
  if (!unfiltered_.empty() && lanes_[0]->regex->prepare_lines()) {
    // Every line is asked anyway, and one pass of all the regexes over a piece of lines
    // decides them (Searcher::predecide): the factors would be scanned for nothing.
    lines_ready_ = 1;
    unfiltered_.clear();
    for (std::size_t i = 0; i < patterns.size(); ++i) unfiltered_.push_back(static_cast<std::uint32_t>(i));
    factors_ = PatternSet();
    patterns_of_factor_.clear();
  }
  if (factors_.empty()) factors_.add("");
  // A line without any factor is asked about these alone.
  if (!unfiltered_.empty()) lanes_[0]->regex->expect_candidates(unfiltered_);
}

RegexLines::~RegexLines() = default;

std::unique_ptr<RegexLines> RegexLines::copy() const {
  std::unique_ptr<RegexLines> c(new RegexLines());
  c->factors_ = factors_;
  c->pattern_count_ = pattern_count_;
  c->patterns_of_factor_ = patterns_of_factor_;
  c->patterns_of_id_ = patterns_of_id_;
  c->unfiltered_ = unfiltered_;
  c->lines_ready_ = lines_ready_;
  c->count_full_scans_ = count_full_scans_;
  c->lanes_.push_back(std::make_unique<Lane>());
  c->lanes_[0]->regex = lanes_[0]->regex->clone();
  c->lanes_[0]->seen.assign(pattern_count_, 0);
  return c;
}

void RegexLines::set_lanes(std::size_t count) {
  while (lanes_.size() < count) lanes_.push_back(std::make_unique<Lane>());
}

RegexLines::Lane& RegexLines::lane(std::size_t index) {
  Lane& l = *lanes_[index];
  if (!l.regex) {
    l.regex = lanes_[0]->regex->clone();
    l.seen.assign(pattern_count_, 0);
  }
  return l;
}

bool RegexLines::prepare_lines() {
  if (lines_ready_ < 0) {
    lines_ready_ = lanes_[0]->regex->prepare_lines() ? 1 : 0;
    // Copies made before share nothing of it: made again on their next use.
    for (std::size_t i = 1; i < lanes_.size(); ++i) lanes_[i]->regex.reset();
  }
  return lines_ready_ == 1;
}

bool RegexLines::select_lines_on(std::size_t index, std::string_view piece, std::vector<const char*>& line_starts,
                                 std::vector<const char*>& line_ends) {
  return select_lines_in(lane(index), piece, line_starts, line_ends);
}

bool RegexLines::select_lines_in(Lane& l, std::string_view piece, std::vector<const char*>& line_starts,
                                 std::vector<const char*>& line_ends) {
  const std::size_t before = line_starts.size();
  if (!l.regex->select_lines(piece, line_starts, line_ends)) return false;
  // Every line was searched in full; those selected are confirmed.
  if (count_full_scans_)
    l.counts.full_scan += count_byte(piece, '\n') + (!piece.empty() && piece.back() != '\n' ? 1 : 0);
  l.counts.confirmed += line_starts.size() - before;
  return true;
}

void RegexLines::prepare_ahead() {
  const std::lock_guard<std::mutex> lock(ahead_mutex_);
  const bool lines = lines_ready_ == 1;
  if (ahead_model_ && ahead_lines_ == lines) return;
  // A copy made before prepare_lines() said yes cannot decide whole pieces: lanes made
  // from it stop being handed out (those leased go on, line by line).
  ahead_model_ = lanes_[0]->regex->clone();
  ahead_lines_ = lines;
  ++ahead_models_;
  ahead_idle_.clear();
}

RegexLines::AheadLease RegexLines::lease_ahead() {
  const std::lock_guard<std::mutex> lock(ahead_mutex_);
  if (!ahead_model_) return AheadLease(*this, nullptr);
  if (ahead_idle_.empty()) {
    auto made = std::make_unique<Lane>();
    made->regex = ahead_model_->clone();
    made->seen.assign(pattern_count_, 0);
    made->model = ahead_models_;
    ahead_idle_.push_back(made.get());
    ahead_lanes_.push_back(std::move(made));
  }
  Lane* l = ahead_idle_.back();
  ahead_idle_.pop_back();
  return AheadLease(*this, l);
}

RegexLines::AheadLease::~AheadLease() {
  if (lane_ == nullptr) return;
  const std::lock_guard<std::mutex> lock(owner_.ahead_mutex_);
  if (lane_->model == owner_.ahead_models_) owner_.ahead_idle_.push_back(lane_);
}

RegexCounts RegexLines::counts() const noexcept {
  RegexCounts sum;
  auto add = [&sum](const Lane& l) {
    sum.candidates += l.counts.candidates;
    sum.confirmed += l.counts.confirmed;
    sum.full_scan += l.counts.full_scan;
  };
  for (const auto& l : lanes_) add(*l);
  const std::lock_guard<std::mutex> lock(ahead_mutex_);
  for (const auto& l : ahead_lanes_) add(*l);
  return sum;
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

bool RegexLines::gather(Lane& l, std::span<const LineOccurrence> occurrences, bool count) const {
  l.candidates.clear();
  ++l.generation;
  for (const LineOccurrence& o : occurrences) {
    if (o.pattern >= patterns_of_id_.size()) continue;
    for (std::uint32_t i : patterns_of_id_[o.pattern]) {
      if (l.seen[i] == l.generation) continue;
      l.seen[i] = l.generation;
      l.candidates.push_back(i);
    }
  }
  if (count && !l.candidates.empty()) ++l.counts.candidates;
  else if (count && !unfiltered_.empty()) ++l.counts.full_scan;
  l.candidates.insert(l.candidates.end(), unfiltered_.begin(), unfiltered_.end());
  std::sort(l.candidates.begin(), l.candidates.end());
  return !l.candidates.empty();
}

bool RegexLines::line_matches_on(std::size_t index, std::string_view line,
                                 std::span<const LineOccurrence> occurrences) {
  return line_matches_in(lane(index), line, occurrences);
}

bool RegexLines::line_matches_in(Lane& l, std::string_view line, std::span<const LineOccurrence> occurrences) {
  if (!gather(l, occurrences, true)) return false;
  if (!l.regex->selects_any(line, l.candidates, nullptr)) return false;
  ++l.counts.confirmed;
  return true;
}

void RegexLines::gather_all(Lane& l) const {
  l.candidates.resize(pattern_count_);
  for (std::size_t i = 0; i < pattern_count_; ++i) l.candidates[i] = static_cast<std::uint32_t>(i);
}

bool RegexLines::any_selects(std::string_view line) {
  Lane& l = lane(0);
  gather_all(l);
  return l.regex->selects_any(line, l.candidates, nullptr);
}

// grep's print_line_middle: matches from where the last one ended; an empty match moves
// on by one byte and prints nothing.
void RegexLines::match_spans_in(Lane& l, std::string_view line, std::span<const LineOccurrence> occurrences,
                                std::vector<MatchSpan>& out) {
  out.clear();
  if (!gather(l, occurrences, false)) return;
  std::size_t from = 0;
  regex::Found found;
  while (from <= line.size() && l.regex->find(line, from, l.candidates, found)) {
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
  Lane& l = lane(0);
  if (!gather(l, occurrences, false)) return;
  l.regex->selects_any(line, l.candidates, &out);
}

}  // namespace gpufilter
