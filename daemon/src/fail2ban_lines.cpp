// RuleSet's fail2ban filters over the lines of a stream: one line at a time
// (fail2ban_lines()), or many lines of one source ahead of their delivery
// (prepare_fail2ban()), the date readers side by side on a pool's threads and then the
// filters side by side, each filter still reading its lines in order. Either way each
// filter makes of each line what it would make of it alone (tests/daemon/rules_test.cpp).
#include <algorithm>
#include <exception>

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
                                                                std::span<const Occurrence> occurrences) const {
  Prepared& p = prepared_;
  if (p.next < p.lines.size()) {
    if (p.lines[p.next].data() == line.data() && p.lines[p.next].size() == line.size()) {
      outcomes_.swap(p.outcomes[p.next++]);  // the slot keeps the old vector's memory for the next batch
      return outcomes_;
    }
    p.lines.clear();  // not the lines prepared (never so from RuleConsumer): read as they come
    p.next = 0;
  }
  for (auto& at : literals_at_) at.clear();
  for (const Occurrence& o : occurrences) {
    for (const Ref& ref : by_unique_[o.pattern])
      if (ref.pattern == kLiteral) literals_at_[fail2ban_index_[ref.rule]].push_back(o.position);
  }
  dated_.clear();
  outcomes_.resize(fail2ban_rules_.size());
  for (std::size_t i = 0; i < fail2ban_rules_.size(); ++i) {
    if (!fail2ban_reads(i, source)) {
      outcomes_[i] = {};
      continue;
    }
    const std::size_t reader = date_reader_[i];
    auto it = std::find_if(dated_.begin(), dated_.end(), [&](const auto& d) { return d.first == reader; });
    if (it == dated_.end()) {
      dated_.emplace_back(reader, fail2ban_.at(fail2ban_rules_[reader])->date_line(line));
      it = dated_.end() - 1;
    }
    outcomes_[i] = fail2ban_.at(fail2ban_rules_[i])->line(it->second, literals_at_[i]);
  }
  return outcomes_;
}

bool RuleSet::fail2ban_in_parallel() const noexcept { return fail2ban_rules_.size() > 1; }

// Three steps over the lines: (1) each filter's literals' offsets, line by line, on this
// thread; (2) each date reader (filters alike in their date settings share one) dates
// every line, the readers side by side; (3) each filter takes every line with its reader's
// dates and its literals, the filters side by side. A filter's state (its buffer, its
// detector) is touched by one thread at a time, and in line order.
void RuleSet::prepare_fail2ban(std::string_view source, std::span<const std::string_view> lines,
                               std::span<const std::span<const Occurrence>> occurrences, WorkerPool& pool) const {
  const std::size_t rules = fail2ban_rules_.size();
  Prepared& p = prepared_;
  p.lines.assign(lines.begin(), lines.end());
  p.next = 0;
  p.outcomes.resize(lines.size());
  for (auto& o : p.outcomes) o.assign(rules, {});
  p.literals.resize(rules);
  for (auto& l : p.literals) l.clear();
  for (std::size_t j = 0; j < lines.size(); ++j)
    for (const Occurrence& o : occurrences[j])
      for (const Ref& ref : by_unique_[o.pattern])
        if (ref.pattern == kLiteral) p.literals[fail2ban_index_[ref.rule]].emplace_back(j, o.position);

  std::vector<std::size_t> readers;  // the readers of this source's filters
  for (std::size_t i = 0; i < rules; ++i)
    if (fail2ban_reads(i, source) && std::find(readers.begin(), readers.end(), date_reader_[i]) == readers.end())
      readers.push_back(date_reader_[i]);
  p.dated.resize(readers.size());
  std::vector<std::exception_ptr> failed(std::max(rules, readers.size()));
  pool.run(readers.size(), [&](std::size_t k) {
    try {
      fail2ban::Filter& reader = *fail2ban_.at(fail2ban_rules_[readers[k]]);
      p.dated[k].clear();
      for (const std::string_view line : lines) p.dated[k].push_back(reader.date_line(line));
    } catch (...) {
      failed[k] = std::current_exception();
    }
  });
  for (const std::exception_ptr& e : failed)
    if (e) std::rethrow_exception(e);  // on the thread that asked, as fail2ban_lines() would throw

  pool.run(rules, [&](std::size_t i) {
    if (!fail2ban_reads(i, source)) return;
    try {
      const std::size_t k = static_cast<std::size_t>(
          std::find(readers.begin(), readers.end(), date_reader_[i]) - readers.begin());
      fail2ban::Filter& filter = *fail2ban_.at(fail2ban_rules_[i]);
      const auto& mine = p.literals[i];
      std::vector<std::size_t> at;
      auto next = mine.begin();
      for (std::size_t j = 0; j < lines.size(); ++j) {
        at.clear();
        for (; next != mine.end() && next->first == j; ++next) at.push_back(next->second);
        p.outcomes[j][i] = filter.line(p.dated[k][j], at);
      }
    } catch (...) {
      failed[i] = std::current_exception();
    }
  });
  for (const std::exception_ptr& e : failed)
    if (e) std::rethrow_exception(e);
}

}  // namespace gpufilter::daemon
