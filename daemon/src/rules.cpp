#include "gpufilter/daemon/rules.hpp"

#include <algorithm>
#include <cstring>

#include "gpufilter/grep/line_occurrences.hpp"
#include "gpufilter/grep/word.hpp"

namespace gpufilter::daemon {
namespace {

std::string hex_fingerprint(const std::string& rule, const std::string& group) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  auto mix = [&](std::string_view s) {
    for (const char c : s) {
      h ^= static_cast<unsigned char>(c);
      h *= 0x100000001b3ULL;
    }
  };
  mix(rule);
  mix(std::string_view("\0", 1));
  mix(group);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, h >>= 4) out[static_cast<std::size_t>(i)] = kHex[h & 15];
  return out;
}

}  // namespace

// ---- RuleSet ---------------------------------------------------------------------------

RuleSet::RuleSet(std::vector<RuleConfig> rules) : rules_(std::move(rules)) {
  for (std::uint32_t r = 0; r < rules_.size(); ++r) {
    const RuleConfig& rule = rules_[r];
    any_ignore_case_ = any_ignore_case_ || rule.ignore_case;
    if (rule.invert) invert_.push_back(r);
    for (std::uint32_t p = 0; p < rule.patterns.size(); ++p) {
      patterns_.add(rule.patterns[p]);
      given_.push_back(Ref{r, p});
    }
  }
}

void RuleSet::bind(const PatternTable& table) {
  table_ = &table;
  by_unique_.assign(table.unique_count(), {});
  for (std::size_t i = 0; i < given_.size(); ++i) {
    const std::uint32_t u = table.unique_of(i);
    if (u != PatternTable::kNoPattern) by_unique_[u].push_back(given_[i]);
  }
}

void RuleSet::matching_rules(std::string_view line, std::span<const Occurrence> occurrences,
                             std::vector<std::uint32_t>& out) const {
  out.clear();
  for (const Occurrence& o : occurrences) {
    const std::size_t at = o.position;
    for (const Ref& ref : by_unique_[o.pattern]) {
      const RuleConfig& rule = rules_[ref.rule];
      const std::string& p = rule.patterns[ref.pattern];
      if (at + p.size() > line.size()) continue;
      // The scan folded case for every rule when one ignores it: confirm the others.
      if (!rule.ignore_case && any_ignore_case_ && std::memcmp(line.data() + at, p.data(), p.size()) != 0) continue;
      if (rule.word && !is_whole_word(line, at, at + p.size())) continue;
      out.push_back(ref.rule);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  // invert: the rule matches lines where none of its patterns does.
  if (!invert_.empty()) {
    std::vector<std::uint32_t> result;
    for (const std::uint32_t r : out)
      if (!rules_[r].invert) result.push_back(r);
    for (const std::uint32_t r : invert_)
      if (!std::binary_search(out.begin(), out.end(), r)) result.push_back(r);
    std::sort(result.begin(), result.end());
    out.swap(result);
  }
}

// ---- RuleEngine ------------------------------------------------------------------------

RuleEngine::RuleEngine(std::shared_ptr<const RuleSet> rules, Emit emit, Metrics* metrics)
    : rules_(std::move(rules)), emit_(std::move(emit)), metrics_(metrics) {}

std::optional<std::string> RuleEngine::group_of(const RuleConfig& rule, std::string_view source,
                                                std::string_view text) const {
  switch (rule.threshold.group_by) {
    case ThresholdConfig::GroupBy::kNone: return std::string();
    case ThresholdConfig::GroupBy::kSource: return std::string(source);
    case ThresholdConfig::GroupBy::kField: {
      // The LAST occurrence: whoever writes the log line chooses what comes before the
      // field (sshd's "Invalid user X from ..." logs the user name first), so the first
      // one is theirs to forge. fail2ban's sshd filter anchors at the end for this reason.
      const std::size_t at = text.rfind(rule.threshold.field_after);
      if (at == std::string_view::npos) return std::nullopt;
      std::size_t begin = at + rule.threshold.field_after.size();
      std::size_t end = begin;
      const std::size_t limit = std::min(text.size(), begin + kMaxGroupBytes);
      while (end < limit && text[end] != ' ' && text[end] != '\t' && text[end] != '\r') ++end;
      return std::string(text.substr(begin, end - begin));
    }
  }
  return std::string();
}

Alert RuleEngine::make_alert(const RuleConfig& rule, const std::string& group, const Group& g,
                             Alert::State state) const {
  Alert a;
  a.state = state;
  a.rule = rule.name;
  a.severity = rule.severity;
  a.group = group;
  a.labels = rule.labels;
  a.labels["alertname"] = rule.name;
  a.labels["severity"] = rule.severity;
  if (rule.threshold.group_by != ThresholdConfig::GroupBy::kNone) a.labels["group"] = group;
  a.annotations = rule.annotations;
  a.source = g.last_source;
  a.line = g.last_line;
  a.matches = g.hits.size();
  a.suppressed = g.suppressed;
  a.starts_at = g.starts_at;
  a.fingerprint = hex_fingerprint(rule.name, group);
  return a;
}

void RuleEngine::line(std::string_view source, std::string_view text, std::span<const Occurrence> occurrences,
                      Clock::time_point now) {
  if (occurrences.empty() && !rules_->has_invert_rules()) return;
  rules_->matching_rules(text, occurrences, scratch_);
  for (const std::uint32_t r : scratch_) matched(r, source, text, now);
}

void RuleEngine::matched(std::uint32_t r, std::string_view source, std::string_view text, Clock::time_point now) {
  const RuleConfig& rule = rules_->rules()[r];
  RuleState& state = state_[rule.name];
  ++state.matches;
  std::optional<std::string> field = group_of(rule, source, text);
  if (!field) return;  // grouped by a field this line does not hold: in no group's count
  std::string group = std::move(*field);
  if (state.groups.size() >= kMaxGroups && state.groups.count(group) == 0) {
    group = "(other)";
    ++state.overflowed;
  }
  Group& g = state.groups[group];
  g.last_match = now;
  g.last_line.assign(text.data(), std::min<std::size_t>(text.size(), 4096));
  g.last_source.assign(source);
  // Throttle: one alert per group per cooldown; the matches in between are counted.
  if (g.active && now < g.last_alert + rule.cooldown) {
    ++g.suppressed;
    ++state.suppressed;
    return;
  }
  g.hits.push_back(now);
  const Clock::duration window = rule.threshold.window;
  while (!g.hits.empty() && window.count() > 0 && g.hits.front() <= now - window) g.hits.pop_front();
  if (g.hits.size() > rule.threshold.count) g.hits.pop_front();
  if (g.hits.size() < rule.threshold.count) return;
  if (!g.active) g.starts_at = SystemClock::now();
  g.active = true;
  const Alert alert = make_alert(rule, group, g, Alert::State::kFiring);
  g.last_alert = now;
  g.suppressed = 0;
  g.hits.clear();
  ++state.alerts;
  emit_(alert);
}

void RuleEngine::resolve(const RuleConfig& rule, const std::string& group, Group& g) {
  Alert alert = make_alert(rule, group, g, Alert::State::kResolved);
  alert.ends_at = SystemClock::now();
  g.active = false;
  emit_(alert);
}

void RuleEngine::tick(Clock::time_point now) {
  for (const RuleConfig& rule : rules_->rules()) {
    auto it = state_.find(rule.name);
    if (it == state_.end()) continue;
    RuleState& state = it->second;
    for (auto g = state.groups.begin(); g != state.groups.end();) {
      Group& group = g->second;
      if (group.active && now - group.last_match >= rule.resolve_after) resolve(rule, g->first, group);
      // A group with nothing pending is forgotten (its window emptied, nothing active).
      const Clock::duration window = rule.threshold.window;
      while (!group.hits.empty() && window.count() > 0 && group.hits.front() <= now - window) group.hits.pop_front();
      if (!group.active && group.hits.empty() && group.suppressed == 0) g = state.groups.erase(g);
      else ++g;
    }
    if (metrics_ != nullptr) {
      const Labels labels{{"rule", rule.name}};
      metrics_->add("gpufilterd_rule_matches_total", labels, static_cast<double>(state.matches - state.reported_matches));
      metrics_->add("gpufilterd_alerts_suppressed_total", labels,
                    static_cast<double>(state.suppressed - state.reported_suppressed));
      metrics_->add("gpufilterd_rule_groups_overflowed_total", labels,
                    static_cast<double>(state.overflowed - state.reported_overflowed));
      state.reported_matches = state.matches;
      state.reported_suppressed = state.suppressed;
      state.reported_overflowed = state.overflowed;
    }
  }
}

void RuleEngine::replace(std::shared_ptr<const RuleSet> rules, Clock::time_point now) {
  (void)now;
  std::map<std::string, RuleState> kept;
  for (const RuleConfig& old_rule : rules_->rules()) {
    auto it = state_.find(old_rule.name);
    if (it == state_.end()) continue;
    const auto same = std::find_if(rules->rules().begin(), rules->rules().end(),
                                   [&](const RuleConfig& r) { return r.same_as(old_rule); });
    if (same != rules->rules().end()) {
      kept.emplace(old_rule.name, std::move(it->second));
      continue;
    }
    // Changed or removed: its active alerts end here.
    for (auto& [group, g] : it->second.groups)
      if (g.active) resolve(old_rule, group, g);
  }
  state_ = std::move(kept);
  rules_ = std::move(rules);
}

std::uint64_t RuleEngine::matches(const std::string& rule) const {
  const auto it = state_.find(rule);
  return it == state_.end() ? 0 : it->second.matches;
}
std::uint64_t RuleEngine::alerts(const std::string& rule) const {
  const auto it = state_.find(rule);
  return it == state_.end() ? 0 : it->second.alerts;
}
std::uint64_t RuleEngine::suppressed(const std::string& rule) const {
  const auto it = state_.find(rule);
  return it == state_.end() ? 0 : it->second.suppressed;
}

// ---- RuleConsumer ----------------------------------------------------------------------

RuleConsumer::RuleConsumer(RuleEngine& engine, Metrics* metrics) : engine_(engine), metrics_(metrics) {}

std::string RuleConsumer::source_label(const std::string& name) {
  for (const char* scheme : {"tcp", "udp", "unix"}) {
    const std::size_t n = std::strlen(scheme);
    if (name.compare(0, n, scheme) == 0 && name.size() > n && name[n] == ':') return scheme;
  }
  return name;
}

void RuleConsumer::open(const BatchEntry& entry) {
  inputs_[entry.stream] = Input{entry.name, source_label(entry.name)};
  if (entry.continues != kNoStream) inputs_.erase(entry.continues);
}

void RuleConsumer::close(const BatchEntry& entry) {
  if (entry.ends_input) inputs_.erase(entry.stream);
}

void RuleConsumer::lines(const BatchEntry& entry, const Chunk& piece, std::span<const Occurrence> occurrences) {
  const auto it = inputs_.find(entry.stream);
  static const Input unknown{"(unknown)", "(unknown)"};
  const Input& input = it == inputs_.end() ? unknown : it->second;
  LineCutter<Occurrence> cutter(std::string_view(piece.data, piece.size), piece.offset, occurrences, scratch_);
  CutLine<Occurrence> line;
  LineMatch match{};
  match.source = input.name;
  Sink& rules = engine_;
  std::uint64_t lines = 0;
  while (cutter.next(line)) {
    match.line = line.text;
    match.offset = line.offset;
    match.occurrences = line.occurrences;
    rules.matched(match);
    ++lines;
  }
  auto& c = counts_[input.label];
  c.first += lines;
  c.second += piece.size;
}

void RuleConsumer::tick() {
  const RuleEngine::Clock::time_point now = RuleEngine::Clock::now();
  if (now - last_tick_ < std::chrono::milliseconds(50)) return;
  last_tick_ = now;
  engine_.tick(now);
  if (metrics_ == nullptr) return;
  for (auto& [label, c] : counts_) {
    metrics_->add("gpufilterd_lines_scanned_total", {{"source", label}}, static_cast<double>(c.first));
    metrics_->add("gpufilterd_bytes_scanned_total", {{"source", label}}, static_cast<double>(c.second));
    c = {0, 0};
  }
}

void RuleConsumer::batch_done(std::size_t bytes, double seconds) {
  (void)bytes;
  if (metrics_ != nullptr) metrics_->observe("gpufilterd_batch_latency_seconds", {}, seconds);
}

}  // namespace gpufilter::daemon
