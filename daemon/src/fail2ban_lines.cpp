// RuleSet's fail2ban filters over the lines of a stream: one line at a time
// (fail2ban_lines()), or a batch of one source's lines ahead of their delivery in steps
// (fail2ban_begin(), fail2ban_date(), fail2ban_ahead() and fail2ban_search_ahead(),
// fail2ban_filter()), each step's tasks side by side on a pool's threads and beside other
// batches' steps (Fail2banPipeline), each filter still reading its lines in order. Either way each filter makes of each line what it
// would make of it alone (tests/daemon/rules_test.cpp).
#include <algorithm>
#include <array>
#include <exception>
#include <span>

#include "gpufilter/daemon/rules.hpp"

namespace gpufilter::daemon {

// fail2ban reads a line without its end: a CRLF log's '\r' is not part of it.
std::string_view RuleSet::fail2ban_text(std::string_view text) {
  while (!text.empty() && text.back() == '\r') text.remove_suffix(1);
  return text;
}

// A jail's filter reads only its own files' lines: its multi-line buffer and its date
// detector learn from nothing else, as fail2ban's do.
bool RuleSet::fail2ban_reads(std::size_t i, std::string_view source) const {
  const std::vector<std::string>& only = rules_[fail2ban_rules_[i]].only_sources;
  return only.empty() || std::find(only.begin(), only.end(), source) != only.end();
}

std::vector<fail2ban::Filter::Outcome>& RuleSet::fail2ban_lines(std::string_view source, std::string_view line,
                                                                std::span<const Occurrence> occurrences,
                                                                std::optional<double> known) const {
  if (Fail2banBatch* b = handing_out_; b != nullptr && b->next < b->lines.size()) {
    if (b->lines[b->next].data() == line.data() && b->lines[b->next].size() == line.size()) {
      hand_out(*b, b->next++);
      return outcomes_;
    }
    handing_out_ = nullptr;  // not the lines prepared (never so from RuleConsumer): read as they come
  }
  for (auto& at : literals_at_) at.clear();
  for (const Occurrence& o : occurrences) {
    for (const Ref& ref : by_unique_[o.pattern])
      if (ref.pattern == kLiteral) literals_at_[fail2ban_index_[ref.rule]].push_back(o.position);
  }
  dated_.clear();
  outcomes_.resize(fail2ban_rules_.size());
  found_in_line_.clear();
  for (std::size_t i = 0; i < fail2ban_rules_.size(); ++i) {
    if (!fail2ban_reads(i, source)) {
      outcomes_[i] = {};
      continue;
    }
    const std::size_t reader = date_reader_[i];
    auto it = std::find_if(dated_.begin(), dated_.end(), [&](const auto& d) { return d.first == reader; });
    if (it == dated_.end()) {
      fail2ban::Filter& dater = *fail2ban_.at(fail2ban_rules_[reader]);
      dated_.emplace_back(reader, known ? dater.known_line(line, *known) : dater.date_line(line));
      it = dated_.end() - 1;
    }
    outcomes_[i] = fail2ban_.at(fail2ban_rules_[i])->line(it->second, literals_at_[i]);
    fail2ban_captures(outcomes_[i]);
    const fail2ban::Filter::Outcome& o = outcomes_[i];
    if (!o.failures.empty() || !o.ignore_hits.empty() || o.matched) found_in_line_.push_back(i);
  }
  return outcomes_;
}

// Line j's outcomes into outcomes_: what a filter found there. Only the outcomes the line
// before found something in need emptying (in place, keeping their memory): the others
// are empty already.
void RuleSet::hand_out(Fail2banBatch& b, std::size_t j) const {
  if (outcomes_.size() != fail2ban_rules_.size()) {
    outcomes_.assign(fail2ban_rules_.size(), {});
    found_in_line_.clear();
  }
  for (const std::size_t i : found_in_line_) {
    fail2ban::Filter::Outcome& out = outcomes_[i];
    out.failures.clear();
    out.ignore_hits.clear();
    out.matched = false;
  }
  found_in_line_.clear();
  for (; b.by_line_next < b.by_line.size() && b.by_line[b.by_line_next][0] == j; ++b.by_line_next) {
    const auto [line, i, entry] = b.by_line[b.by_line_next];
    outcomes_[i] = std::move(b.found[i][entry].second);
    found_in_line_.push_back(i);
  }
}

std::size_t RuleSet::fail2ban_begin(Fail2banBatch& b, std::string_view source, std::span<const std::string_view> lines,
                                    std::span<const std::span<const Occurrence>> occurrences,
                                    std::optional<double> known) const {
  const std::size_t rules = fail2ban_rules_.size();
  b.source = source;
  b.known = known;
  b.lines.assign(lines.begin(), lines.end());
  b.next = 0;
  b.found.resize(rules);  // each filter's task fills its own, side by side
  b.by_line.clear();
  b.by_line_next = 0;
  b.literals.resize(rules);
  for (auto& l : b.literals) l.clear();
  for (std::size_t j = 0; j < lines.size(); ++j)
    for (const Occurrence& o : occurrences[j])
      for (const Ref& ref : by_unique_[o.pattern])
        if (ref.pattern == kLiteral) b.literals[fail2ban_index_[ref.rule]].emplace_back(j, o.position);
  b.readers.clear();
  for (std::size_t i = 0; i < rules; ++i)
    if (fail2ban_reads(i, source) && std::find(b.readers.begin(), b.readers.end(), date_reader_[i]) == b.readers.end())
      b.readers.push_back(date_reader_[i]);
  b.dated.resize(b.readers.size());
  b.failed.assign(b.readers.size() + rules, nullptr);
  b.piece.assign(rules, 0);
  b.ahead_tasks.clear();
  b.lane_count = 0;
  if (b.lanes_of != serial_) {  // another set's filters
    b.lanes.clear();
    b.lanes.resize(rules);
    b.lanes_of = serial_;
  }
  b.queued.resize(rules);
  for (auto& q : b.queued) q.clear();
  b.lane_tasks.clear();
  b.lane_failed.clear();
  return b.readers.size();
}

void RuleSet::fail2ban_date(Fail2banBatch& b, std::size_t k) const noexcept {
  try {
    fail2ban::Filter& reader = *fail2ban_.at(fail2ban_rules_[b.readers[k]]);
    b.dated[k].clear();
    for (const std::string_view line : b.lines)
      b.dated[k].push_back(b.known ? reader.known_line(line, *b.known) : reader.date_line(line));
  } catch (...) {
    b.failed[k] = std::current_exception();
  }
}

namespace {

// Lines [first, last) of a batch as one filter reads them, to fn(j, dated line, offsets of
// the filter's literals in it): `dated`, its date reader's lines; `literals`, its
// (line, offset) pairs in line order.
template <typename Fn>
void each_line(const std::vector<fail2ban::Filter::DatedLine>& dated,
               const std::vector<std::pair<std::size_t, std::size_t>>& literals, std::size_t first, std::size_t last,
               Fn&& fn) {
  auto next = std::lower_bound(literals.begin(), literals.end(), std::pair<std::size_t, std::size_t>(first, 0));
  std::vector<std::size_t> at;
  for (std::size_t j = first; j < last; ++j) {
    at.clear();
    for (; next != literals.end() && next->first == j; ++next) at.push_back(next->second);
    fn(j, dated[j], std::span<const std::size_t>(at));
  }
}

}  // namespace

// The lines filter i's date reader dated for batch `b`.
const std::vector<fail2ban::Filter::DatedLine>& RuleSet::dated_for(const Fail2banBatch& b, std::size_t i) const {
  return b.dated[static_cast<std::size_t>(std::find(b.readers.begin(), b.readers.end(), date_reader_[i]) -
                                          b.readers.begin())];
}

// Where a line holds none of a filter's literals the filter answers at once (Filter::line):
// only the lines that hold one (or every line, for a filter without literals) are searched.
std::size_t RuleSet::fail2ban_ahead(Fail2banBatch& b, std::size_t width) const {
  const std::size_t rules = fail2ban_rules_.size();
  if (b.ahead_of != serial_) {  // another set's filters: their searches are not these
    b.ahead.clear();
    b.ahead.resize(rules);
    b.ahead_of = serial_;
  }
  const std::size_t lines = b.lines.size();
  std::size_t all = 0;
  std::vector<std::size_t> searched(rules, 0);
  for (std::size_t i = 0; i < rules; ++i) {
    const fail2ban::Filter& filter = *fail2ban_.at(fail2ban_rules_[i]);
    if (!fail2ban_reads(i, b.source) || !filter.searches_ahead()) continue;
    if (!filter.literals()) {
      searched[i] = lines;
    } else {
      std::size_t last = SIZE_MAX;
      for (const auto& [line, at] : b.literals[i]) searched[i] += line != last ? (last = line, 1) : 0;
    }
    all += searched[i];
  }
  // Where a filter searched ahead reads in lanes: one lane for every four threads.
  b.lane_count = width >= 8 ? std::min<std::size_t>(width / 4, 8) : 0;
  for (std::size_t i = 0; i < rules; ++i) {
    // A filter that would take more than its share of the step: in pieces, each at least
    // kAheadPiece searched lines, as many as there are threads.
    if (searched[i] < fail2ban::Filter::kAheadPiece || searched[i] * width <= all) continue;
    const std::size_t pieces = std::min(width, searched[i] / fail2ban::Filter::kAheadPiece);
    b.piece[i] = (lines + pieces - 1) / pieces;
    const fail2ban::Filter& filter = *fail2ban_.at(fail2ban_rules_[i]);
    while (b.ahead[i].size() < pieces) b.ahead[i].push_back(filter.ahead());
    for (std::size_t p = 0; p * b.piece[i] < lines; ++p) b.ahead_tasks.emplace_back(i, p);
  }
  return b.ahead_tasks.size();
}

void RuleSet::fail2ban_search_ahead(Fail2banBatch& b, std::size_t task) const noexcept {
  const auto [i, p] = b.ahead_tasks[task];
  fail2ban::Filter::Ahead& ahead = b.ahead[i][p];
  ahead.clear();
  try {
    const fail2ban::Filter& filter = *fail2ban_.at(fail2ban_rules_[i]);
    const std::size_t first = p * b.piece[i], last = std::min(b.lines.size(), first + b.piece[i]);
    each_line(dated_for(b, i), b.literals[i], first, last,
              [&](std::size_t j, const fail2ban::Filter::DatedLine& dated, std::span<const std::size_t> at) {
                filter.search_ahead(dated, at, j, ahead);
              });
  } catch (...) {
    ahead.clear();  // the filter's task searches for itself, and meets what failed here on its own thread
  }
}

void RuleSet::fail2ban_filter(Fail2banBatch& b, std::size_t i) const noexcept {
  auto& found = b.found[i];
  found.clear();
  if (!fail2ban_reads(i, b.source)) return;
  try {
    fail2ban::Filter& filter = *fail2ban_.at(fail2ban_rules_[i]);
    const std::size_t piece = b.piece[i];
    if (b.lane_count != 0 && filter.reads_in_lanes()) {  // every batch: see Filter::plan()
      if (!b.lanes[i] || b.lanes[i]->count() != b.lane_count) b.lanes[i] = filter.lanes(b.lane_count);
      fail2ban::Filter::Lanes& lanes = *b.lanes[i];
      lanes.clear();
      fail2ban::Filter::Outcome o;
      each_line(dated_for(b, i), b.literals[i], 0, b.lines.size(),
                [&](std::size_t j, const fail2ban::Filter::DatedLine& dated, std::span<const std::size_t> at) {
                  fail2ban::Filter::Ahead* ahead = piece != 0 ? &b.ahead[i][j / piece] : nullptr;
                  if (filter.plan(dated, at, ahead, j, lanes, o) != fail2ban::Filter::Lanes::kDone) {
                    b.queued[i].push_back(found.size());
                    found.emplace_back(j, fail2ban::Filter::Outcome());  // its lane's, a step later
                  } else if (!o.failures.empty() || !o.ignore_hits.empty() || o.matched) {
                    fail2ban_captures(o);
                    found.emplace_back(j, std::move(o));
                  }
                });
      return;
    }
    each_line(dated_for(b, i), b.literals[i], 0, b.lines.size(),
              [&](std::size_t j, const fail2ban::Filter::DatedLine& dated, std::span<const std::size_t> at) {
                if (at.empty() && filter.learns_only(dated)) return;  // most filters, most lines
                fail2ban::Filter::Outcome o =
                    piece == 0 ? filter.line(dated, at) : filter.line(dated, at, b.ahead[i][j / piece], j);
                if (!o.failures.empty() || !o.ignore_hits.empty() || o.matched) {
                  fail2ban_captures(o);
                  found.emplace_back(j, std::move(o));
                }
              });
  } catch (...) {
    b.failed[b.readers.size() + i] = std::current_exception();
  }
}

std::size_t RuleSet::fail2ban_lanes(Fail2banBatch& b) const {
  b.lane_tasks.clear();
  b.into.resize(b.queued.size());
  for (std::size_t i = 0; i < b.queued.size(); ++i) {
    if (b.queued[i].empty() || b.failed[b.readers.size() + i]) continue;
    b.into[i].clear();
    for (const std::size_t k : b.queued[i]) b.into[i].push_back(&b.found[i][k].second);
    for (std::size_t lane = 0; lane < b.lanes[i]->count(); ++lane)
      if (b.lanes[i]->queued(lane) != 0) b.lane_tasks.emplace_back(i, lane);
  }
  b.lane_failed.assign(b.lane_tasks.size(), nullptr);
  return b.lane_tasks.size();
}

void RuleSet::fail2ban_lane(Fail2banBatch& b, std::size_t task) const noexcept {
  const auto [i, lane] = b.lane_tasks[task];
  try {
    fail2ban_.at(fail2ban_rules_[i])->read_lane(*b.lanes[i], lane, b.into[i]);
    for (const std::size_t j : b.lanes[i]->queued_to(lane)) fail2ban_captures(*b.into[i][j]);
  } catch (...) {
    b.lane_failed[task] = std::current_exception();
  }
}

void RuleSet::fail2ban_captures(fail2ban::Filter::Outcome& outcome) {
  for (fail2ban::Filter::Failure& f : outcome.failures) {
    if (f.nofail) continue;  // not a failure the rules count
    std::array<fail2ban::Fields::value_type, 3> more = {
        {{"failregex", std::to_string(f.failregex + 1)}, {"host", f.id}, {"user", f.user}}};
    f.fields.set(std::span(more.data(), f.user.empty() ? 2 : 3));
  }
}

void RuleSet::fail2ban_check(const Fail2banBatch& b) {
  for (const std::exception_ptr& e : b.failed)
    if (e) std::rethrow_exception(e);  // as fail2ban_lines() would have thrown it
  for (const std::exception_ptr& e : b.lane_failed)
    if (e) std::rethrow_exception(e);
}

void RuleSet::fail2ban_hand_out(Fail2banBatch* b) const {
  handing_out_ = nullptr;
  if (b == nullptr) return;
  fail2ban_check(*b);
  b->by_line.clear();
  for (std::size_t i = 0; i < b->found.size(); ++i)
    for (std::size_t k = 0; k < b->found[i].size(); ++k)
      b->by_line.push_back({static_cast<std::uint32_t>(b->found[i][k].first), static_cast<std::uint32_t>(i),
                            static_cast<std::uint32_t>(k)});
  std::sort(b->by_line.begin(), b->by_line.end());
  b->by_line_next = 0;
  handing_out_ = b;
}

void RuleSet::prepare_fail2ban(std::string_view source, std::span<const std::string_view> lines,
                               std::span<const std::span<const Occurrence>> occurrences, WorkerPool& pool) const {
  Fail2banBatch& b = prepared_;
  pool.run(fail2ban_begin(b, source, lines, occurrences), [&](std::size_t k) { fail2ban_date(b, k); });
  for (std::size_t k = 0; k < b.readers.size(); ++k)
    if (b.failed[k]) std::rethrow_exception(b.failed[k]);  // before a filter reads its dates
  pool.run(fail2ban_filters(), [&](std::size_t i) { fail2ban_filter(b, i); });
  fail2ban_hand_out(&b);
}

}  // namespace gpufilter::daemon
