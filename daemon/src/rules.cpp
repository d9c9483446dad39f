#include "gpufilter/daemon/rules.hpp"

#include "gpufilter/daemon/fail2ban_pipeline.hpp"

#include <time.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <ctime>
#include <cstring>
#include <limits>

#include "gpufilter/grep/line_occurrences.hpp"
#include <nlohmann/json.hpp>

#include "gpufilter/core/record_fields.hpp"
#include "gpufilter/fail2ban/jails.hpp"
#include "gpufilter/grep/word.hpp"
#include "gpufilter/regex/factors.hpp"

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

// The log's own clock: what the group took, read with the rule's strptime format; nullopt
// when it does not parse. Without a year in the format, the current one (syslog's lines).
std::optional<SystemClock::time_point> event_time(const EventTimeConfig& config, const RuleEngine::Captures& captures) {
  const auto it = captures.find(config.capture);
  if (it == captures.end() || it->second.empty()) return std::nullopt;
  std::tm tm{};
  tm.tm_year = std::numeric_limits<int>::min();
  const char* end = ::strptime(it->second.c_str(), config.format.c_str(), &tm);
  if (end == nullptr || *end != '\0') return std::nullopt;
  if (tm.tm_year == std::numeric_limits<int>::min()) {
    const std::time_t now = std::time(nullptr);
    std::tm today{};
    ::gmtime_r(&now, &today);
    tm.tm_year = today.tm_year;
  }
  const long offset = tm.tm_gmtoff;  // %z, else 0: UTC
  const std::time_t t = ::timegm(&tm) - offset;
  return SystemClock::from_time_t(t);
}

}  // namespace

// ---- RuleSet ---------------------------------------------------------------------------

namespace {
std::uint64_t next_serial() {
  static std::atomic<std::uint64_t> last{0};
  return ++last;
}
}  // namespace

RuleSet::RuleSet(std::vector<RuleConfig> rules) : rules_(std::move(rules)), serial_(next_serial()) {
  for (std::uint32_t r = 0; r < rules_.size(); ++r) {
    const RuleConfig& rule = rules_[r];
    if (!rule.fail2ban_filter.empty()) {
      // Loaded as load_config() checked it; every line goes to it on the host.
      fail2ban::FilterOptions options;
      options.config_dir = rule.fail2ban_dir;
      options.values = rule.fail2ban_options;
      fail2ban_[r] = std::make_unique<fail2ban::Filter>(fail2ban::Filter::load(rule.fail2ban_filter, options));
      fail2ban_rules_.push_back(r);
      date_reader_.push_back(fail2ban_rules_.size() - 1);
      for (std::size_t i = 0; i + 1 < fail2ban_rules_.size(); ++i) {
        // Alike detectors agree only when fed the same lines: the same sources too.
        if (fail2ban_.at(fail2ban_rules_[i])->date_key() == fail2ban_[r]->date_key() &&
            rules_[fail2ban_rules_[i]].only_sources == rule.only_sources) {
          date_reader_.back() = i;
          break;
        }
      }
      if (const auto& literals = fail2ban_[r]->literals()) {
        for (const std::string& l : *literals) {
          patterns_.add(l);
          given_.push_back(Ref{r, kLiteral});
        }
      }
      continue;
    }
    if (!rule.field.empty()) {
      // Matched against a field's value on the host (matches()), never in the scan.
      field_rules_.push_back(r);
      if (!rule.regexes.empty()) add_regex_rule(r, false);
      continue;
    }
    any_ignore_case_ = any_ignore_case_ || rule.ignore_case;
    if (rule.invert) invert_.push_back(r);
    for (std::uint32_t p = 0; p < rule.patterns.size(); ++p) {
      patterns_.add(rule.patterns[p]);
      given_.push_back(Ref{r, p});
    }
    if (!rule.regexes.empty()) add_regex_rule(r, true);
  }
  fail2ban_index_.assign(rules_.size(), SIZE_MAX);
  for (std::size_t i = 0; i < fail2ban_rules_.size(); ++i) fail2ban_index_[fail2ban_rules_[i]] = i;
  literals_at_.resize(fail2ban_rules_.size());
  // Every rule a regex without a factor: the engines still need a set to scan.
  if (patterns_.empty()) {
    patterns_.add("");
    given_.push_back(Ref{kNoRule, 0});
  }
}

// Its regexes compiled as load_config() checked them, and their required factors added to
// the one pattern set, so that the scan finds the lines worth asking.
void RuleSet::add_regex_rule(std::uint32_t r, bool scanned) {
  const RuleConfig& rule = rules_[r];
  auto compiled = std::make_unique<RegexRule>();
  regex::FactorOptions options;
  options.ignore_case = rule.ignore_case;
  std::vector<std::string> factors;
  bool every_line = false;
  for (const std::string& p : rule.regexes) {
    const std::string text = rule.syntax == regex::Syntax::kPerl ? regex::with_host_tags(p) : p;
    compiled->regexes.push_back(std::make_unique<regex::CaptureRegex>(text, rule.syntax, rule.ignore_case, rule.word));
    if (!scanned) continue;
    const auto found = regex::required_factors(text, rule.syntax, options);
    if (!found) every_line = true;
    else factors.insert(factors.end(), found->begin(), found->end());
  }
  if (!scanned) {
    // A field rule: compiled only.
  } else if (every_line) {
    unfiltered_.push_back(r);
  } else {
    std::sort(factors.begin(), factors.end());
    factors.erase(std::unique(factors.begin(), factors.end()), factors.end());
    for (const std::string& f : factors) {
      patterns_.add(f);
      given_.push_back(Ref{r, kFactor});
    }
  }
  regex_rules_.emplace(r, std::move(compiled));
}

bool RuleSet::regex_matches(std::uint32_t rule, std::string_view line) const {
  for (const auto& re : regex_rules_.at(rule)->regexes)
    if (re->match(line, nullptr)) return true;
  return false;
}

std::map<std::string, std::string> RuleSet::captures(std::uint32_t rule, std::string_view line) const {
  std::map<std::string, std::string> out;
  const auto it = regex_rules_.find(rule);
  if (it == regex_rules_.end()) return out;
  std::vector<std::string> values;
  for (const auto& re : it->second->regexes) {
    if (!re->match(line, &values)) continue;
    for (std::size_t i = 0; i < values.size(); ++i) out.emplace(re->names()[i], values[i]);
    break;
  }
  return out;
}

bool RuleSet::matches(std::uint32_t r, std::string_view text) const {
  const RuleConfig& rule = rules_[r];
  bool any = !rule.regexes.empty() && regex_matches(r, text);
  const auto fold = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; };
  for (std::size_t p = 0; p < rule.patterns.size() && !any; ++p) {
    const std::string& needle = rule.patterns[p];
    const auto equal = [&](char a, char b) { return rule.ignore_case ? fold(a) == fold(b) : a == b; };
    for (auto at = std::search(text.begin(), text.end(), needle.begin(), needle.end(), equal); at != text.end();
         at = std::search(at + 1, text.end(), needle.begin(), needle.end(), equal)) {
      const std::size_t begin = static_cast<std::size_t>(at - text.begin());
      if (!rule.word || is_whole_word(text, begin, begin + needle.size())) {
        any = true;
        break;
      }
    }
  }
  return any != rule.invert;
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
  regex_candidates_.assign(unfiltered_.begin(), unfiltered_.end());
  for (const Occurrence& o : occurrences) {
    const std::size_t at = o.position;
    for (const Ref& ref : by_unique_[o.pattern]) {
      if (ref.rule == kNoRule || ref.pattern == kLiteral) continue;
      if (ref.pattern == kFactor) {
        regex_candidates_.push_back(ref.rule);
        continue;
      }
      const RuleConfig& rule = rules_[ref.rule];
      const std::string& p = rule.patterns[ref.pattern];
      if (at + p.size() > line.size()) continue;
      // The scan folded case for every rule when one ignores it: confirm the others.
      if (!rule.ignore_case && any_ignore_case_ && std::memcmp(line.data() + at, p.data(), p.size()) != 0) continue;
      if (rule.word && !is_whole_word(line, at, at + p.size())) continue;
      out.push_back(ref.rule);
    }
  }
  std::sort(regex_candidates_.begin(), regex_candidates_.end());
  regex_candidates_.erase(std::unique(regex_candidates_.begin(), regex_candidates_.end()), regex_candidates_.end());
  for (const std::uint32_t r : regex_candidates_)
    if (regex_matches(r, line)) out.push_back(r);
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
                                                std::string_view text, const Captures& captures) const {
  switch (rule.threshold.group_by) {
    case ThresholdConfig::GroupBy::kNone: return std::string();
    case ThresholdConfig::GroupBy::kSource: return std::string(source);
    case ThresholdConfig::GroupBy::kCapture: {
      // A group that took no part in the match: the line is in no group, as a missing field.
      const auto it = captures.find(rule.threshold.capture);
      if (it == captures.end() || it->second.empty()) return std::nullopt;
      return it->second.substr(0, kMaxGroupBytes);
    }
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
  if (!g.captures.empty()) {
    for (auto& [key, value] : a.labels) value = filled(value, g.captures);
    for (auto& [key, value] : a.annotations) value = filled(value, g.captures);
  }
  a.source = g.last_source;
  a.line = g.last_line;
  a.matches = g.hits.size();
  a.suppressed = g.suppressed;
  a.starts_at = g.starts_at;
  a.fingerprint = hex_fingerprint(rule.name, group);
  return a;
}

void RuleEngine::line(std::string_view source, std::string_view text, std::span<const Occurrence> occurrences,
                      Clock::time_point now, const RecordFields* fields) {
  selected_.clear();
  if (!occurrences.empty() || rules_->asks_every_line()) {
    rules_->matching_rules(text, occurrences, scratch_);
    for (const std::uint32_t r : scratch_) matched(r, source, text, now, fields, text);
    if (select_) selected_.assign(scratch_.begin(), scratch_.end());
  }
  if (fields != nullptr && !rules_->field_rules().empty()) field_rules(source, text, now, *fields);
  if (!rules_->fail2ban_rules().empty()) fail2ban_rules(source, text, occurrences, now, fields);
  if (select_ && !selected_.empty()) select(source, text, fields);
}

// The record to the outputs that take records: its rules in the configuration's order,
// its fields and (when a record key asks for them) the named groups of its first regex
// rule that matched the record itself (not a JSON field).
void RuleEngine::select(std::string_view source, std::string_view text, const RecordFields* fields) {
  std::sort(selected_.begin(), selected_.end());
  SelectedRecord& r = selection_;
  r.source = source;
  r.text = text;
  r.rules.clear();
  r.captures.clear();
  for (const std::uint32_t i : selected_) r.rules.push_back(rules_->rules()[i].name);
  if (select_captures_) {
    for (const std::uint32_t i : selected_) {
      const RuleConfig& rule = rules_->rules()[i];
      if (rule.regexes.empty() || rule.invert || !rule.field.empty()) continue;
      r.captures = rules_->captures(i, text);
      break;
    }
    if (fields != nullptr)
      for (const auto& [name, value] : fields->values) r.captures.emplace(name, value);
  }
  select_(r);
}

// Each failure a rule's fail2ban filter finds in the line is a match of the rule: its
// group the failure's address ({{host}}), its time the line's (fail2ban's findtime and
// bantime follow the log's clock). A match marked <F-NOFAIL> is none.
void RuleEngine::fail2ban_rules(std::string_view source, std::string_view text,
                                std::span<const Occurrence> occurrences, Clock::time_point now,
                                const RecordFields* fields) {
  std::vector<fail2ban::Filter::Outcome>& outcomes =
      rules_->fail2ban_lines(source, RuleSet::fail2ban_text(text), occurrences, journal_time(fields));
  for (const std::size_t i : rules_->fail2ban_found()) {  // the others found nothing
    const std::uint32_t r = rules_->fail2ban_rules()[i];
    bool failed = false;
    for (fail2ban::Filter::Failure& f : outcomes[i].failures) {
      if (f.nofail) continue;
      Failure failure;
      // The rules' captures (RuleSet::fail2ban_captures()); the outcome is the RuleSet's
      // scratch: read once.
      failure.captures = std::move(f.fields);
      if (f.time)
        failure.time = SystemClock::time_point(
            std::chrono::duration_cast<SystemClock::duration>(std::chrono::duration<double>(*f.time)));
      matched(r, source, text, now, fields, text, &failure);
      failed = true;
    }
    if (failed && select_) selected_.push_back(r);
  }
}

// The rules of a JSON field: each looks at its field's value ("json." + field), if the
// record has that field, on the host.
void RuleEngine::field_rules(std::string_view source, std::string_view text, Clock::time_point now,
                             const RecordFields& fields) {
  for (const std::uint32_t r : rules_->field_rules()) {
    const std::string& field = rules_->rules()[r].field;
    for (const auto& [name, value] : fields.values) {
      if (name.size() != field.size() + 5 || !name.starts_with("json.") || name.compare(5, field.size(), field) != 0)
        continue;
      if (rules_->matches(r, value)) {
        matched(r, source, text, now, &fields, value);
        if (select_) selected_.push_back(r);
      }
      break;
    }
  }
}

// `matched_text`: what the rule matched (the line, or a JSON field's value): where its
// regex's groups are read.
void RuleEngine::matched(std::uint32_t r, std::string_view source, std::string_view text, Clock::time_point now,
                         const RecordFields* fields, std::string_view matched_text, Failure* failure) {
  const RuleConfig& rule = rules_->rules()[r];
  // A jail's ignoreip hosts' failures are not counted (fail2ban's Filter.inIgnoreIPList,
  // before the failure manager sees them); its own files alone reach it (fail2ban_lines()).
  if (failure != nullptr && !rule.ignore_hosts.empty()) {
    const auto host = failure->captures.find("host");
    if (host != failure->captures.end() && fail2ban::ignored(rule.ignore_hosts, host->second)) return;
  }
  RuleState& state = state_[rule.name];
  ++state.matches;
  changed_ = true;
  Captures captures;
  if (failure != nullptr) {
    captures = std::move(failure->captures);  // the caller's, made for this call
  } else if (!rule.regexes.empty() && !rule.invert) {
    for (auto& [name, value] : rules_->captures(r, matched_text)) captures.emplace(name, std::move(value));
  }
  if (fields != nullptr)
    for (const auto& [name, value] : fields->values) captures.emplace(name, value);
  std::optional<std::string> field = group_of(rule, source, text, captures);
  if (!field) return;  // grouped by a field this line does not hold: in no group's count
  std::string group = std::move(*field);
  if (state.groups.size() >= kMaxGroups && state.groups.count(group) == 0) {
    group = "(other)";
    ++state.overflowed;
  }
  // The window, the cooldown and startsAt follow the log's clock when the rule reads it
  // (a replayed log alerts as it did when it was written); resolution stays on ours.
  const std::optional<SystemClock::time_point> logged = failure != nullptr ? failure->time
                                                       : rule.event_time ? event_time(*rule.event_time, captures)
                                                                         : std::nullopt;
  const Clock::time_point when =
      logged ? Clock::time_point(std::chrono::duration_cast<Clock::duration>(logged->time_since_epoch())) : now;
  Group& g = state.groups[group];
  g.last_match = now;
  g.last_line.assign(text.data(), std::min<std::size_t>(text.size(), 4096));
  g.last_source.assign(source);
  g.captures = std::move(captures);
  if (rule.threshold.fail2ban) {
    // A failure without a date is fail2ban's "now".
    const Clock::time_point at = logged ? when
                                        : Clock::time_point(std::chrono::duration_cast<Clock::duration>(
                                              SystemClock::now().time_since_epoch()));
    if (!jail_bans(rule, g, at)) {
      if (g.active && at <= g.ban_end) {
        ++g.suppressed;
        ++state.suppressed;
      }
      return;
    }
  } else {
    // Throttle: one alert per group per cooldown; the matches in between are counted.
    if (g.active && when < g.last_alert + rule.cooldown && when >= g.last_alert) {
      ++g.suppressed;
      ++state.suppressed;
      return;
    }
    g.hits.push_back(when);
    const Clock::duration window = rule.threshold.window;
    while (!g.hits.empty() && window.count() > 0 && (g.hits.front() <= when - window || g.hits.front() > when))
      g.hits.pop_front();
    if (g.hits.size() > rule.threshold.count) g.hits.pop_front();
    if (g.hits.size() < rule.threshold.count) return;
  }
  if (!g.active) g.starts_at = logged ? *logged : SystemClock::now();
  g.active = true;
  const Alert alert = make_alert(rule, group, g, Alert::State::kFiring);
  g.last_alert = when;
  g.suppressed = 0;
  g.hits.clear();
  ++state.alerts;
  emit_(alert);
}

// fail2ban's FailManager.addFailure/cleanup/toBan and BanManager.addBanTicket for one
// failure of `g`'s host at `when` (the log's clock): whether it starts a ban (an alert).
// Not a sliding window: the count of a host whose first failure is older than findtime is
// scaled to the findtime (FailTicket.adjustTime: round(retry / (when - first) * findtime),
// Python's round, half to even), and a host quiet for findtime starts afresh (cleanup).
// A ban lasts bantime from the failure that reached maxretry; reaching it again during the
// ban prolongs the ban (when + bantime) without a new alert.
bool RuleEngine::jail_bans(const RuleConfig& rule, Group& g, Clock::time_point when) {
  using Seconds = std::chrono::duration<double>;
  const Clock::duration findtime = rule.threshold.window;
  Clock::time_point& last = g.hits.empty() ? when : g.hits.back();
  if (g.hits.empty() || last <= when - findtime) {
    g.hits.assign(1, when);
    g.retry = 1;
    g.first = when;
  } else {
    if (when > last) {
      if (g.first < when - findtime) {
        const double scaled = static_cast<double>(g.retry) / Seconds(when - g.first).count() * Seconds(findtime).count();
        g.retry = static_cast<std::uint64_t>(std::nearbyint(scaled));  // round half to even, as Python's round()
        g.first = when - findtime;
      }
      last = when;
    }
    ++g.retry;
  }
  if (g.retry < rule.threshold.count) return false;
  // toBan: the failures go to the ban and are forgotten (the alert's `matches`: their count).
  const std::uint64_t failures = g.retry;
  g.hits.clear();
  g.retry = 0;
  const Clock::time_point end = rule.cooldown >= kPermanentBan ? Clock::time_point::max() : when + rule.cooldown;
  if (g.active && when <= g.ban_end) {
    g.ban_end = std::max(g.ban_end, end);
    return false;
  }
  g.ban_end = end;
  g.hits.assign(failures, when);
  g.active = false;  // the earlier ban is over on the log's clock: this one starts now (startsAt)
  return true;
}

void RuleEngine::resolve(const RuleConfig& rule, const std::string& group, Group& g) {
  Alert alert = make_alert(rule, group, g, Alert::State::kResolved);
  alert.ends_at = SystemClock::now();
  g.active = false;
  changed_ = true;
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
      // A group with nothing pending is forgotten (its window emptied, nothing active). A
      // window on the log's clock is not emptied by ours: such a group is forgotten once
      // quiet for resolve_after.
      const Clock::duration window = rule.threshold.window;
      if (rule.log_clock()) {
        if (!group.active && now - group.last_match >= rule.resolve_after) group.hits.clear();
      } else {
        while (!group.hits.empty() && window.count() > 0 && group.hits.front() <= now - window) group.hits.pop_front();
      }
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
  if (persist_ && changed_ && now - persisted_at_ >= persist_every_) {
    persist_(save_state(now, SystemClock::now()));
    changed_ = false;
    persisted_at_ = now;
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

RuleConsumer::RuleConsumer(RuleEngine& engine, Metrics* metrics, std::vector<RecordShape> shapes)
    : engine_(engine), metrics_(metrics), shapes_(std::move(shapes)) {}

RuleConsumer::~RuleConsumer() = default;

namespace {

void add_json_fields(const nlohmann::json& object, const std::string& prefix, int depth, RecordFields& out) {
  for (const auto& [key, value] : object.items()) {
    std::string name = prefix;
    name += key;
    if (value.is_object()) {
      if (depth < 8) add_json_fields(value, name + ".", depth + 1, out);
    } else if (value.is_string()) {
      out.values.emplace_back(std::move(name), value.get<std::string>());
    } else if (!value.is_array()) {
      out.values.emplace_back(std::move(name), value.dump());
    }
  }
}

}  // namespace

std::shared_ptr<const RecordFields> json_fields(std::string_view text, std::size_t max_bytes,
                                                const RecordFields* base) {
  if (text.size() > max_bytes) return nullptr;
  const nlohmann::json parsed = nlohmann::json::parse(text, nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object()) return nullptr;
  auto fields = std::make_shared<RecordFields>();
  if (base != nullptr) fields->values = base->values;
  add_json_fields(parsed, "json.", 1, *fields);
  return fields;
}

std::string RuleConsumer::source_label(const std::string& name) {
  for (const char* scheme : {"tcp", "udp", "unix"}) {
    const std::size_t n = std::strlen(scheme);
    if (name.compare(0, n, scheme) == 0 && name.size() > n && name[n] == ':') return scheme;
  }
  // A capture's flow direction, "pcap:FILE 10.0.0.1:40000 -> 10.0.0.2:80": the capture.
  if (name.starts_with("pcap:") || name.starts_with("interface:")) {
    const std::size_t arrow = name.rfind(" -> ");
    const std::size_t space = arrow == std::string::npos || arrow == 0 ? std::string::npos : name.rfind(' ', arrow - 1);
    if (space != std::string::npos) return name.substr(0, space);
  }
  return name;
}

void RuleConsumer::open(const BatchEntry& entry) {
  Input input{entry.name, source_label(entry.name), nullptr, nullptr};
  if (entry.origin > 0 && entry.origin <= shapes_.size()) {
    input.shape = &shapes_[entry.origin - 1];
    if (input.shape->multiline) input.joiner = std::make_unique<Joiner>(input.shape->multiline);
  }
  // A rotated file's next stream goes on with the record being joined.
  if (entry.continues != kNoStream) {
    const auto it = inputs_.find(entry.continues);
    if (it != inputs_.end() && it->second.joiner && input.joiner) input.joiner = std::move(it->second.joiner);
    inputs_.erase(entry.continues);
  }
  inputs_[entry.stream] = std::move(input);
}

void RuleConsumer::close(const BatchEntry& entry) {
  if (!entry.ends_input) return;
  const auto it = inputs_.find(entry.stream);
  if (it == inputs_.end()) return;
  if (it->second.joiner) it->second.joiner->flush([&](const Joiner::Record& r) { record(it->second, r); });
  inputs_.erase(it);
}

// A joined record to the rules, as one line that holds '\n's.
void RuleConsumer::record(const Input& input, const Joiner::Record& r) {
  LineMatch match{};
  match.source = input.name;
  match.line = r.text;
  match.offset = r.offset;
  match.occurrences = r.occurrences;
  match.fields = r.fields;
  deliver(input, match);
}

// A record to the rules; a JSON source's parsed first (its fields, or counted as invalid).
void RuleConsumer::deliver(const Input& input, LineMatch& match) {
  std::shared_ptr<const RecordFields> json;
  if (input.shape != nullptr && input.shape->json) {
    json = json_fields(match.line, input.shape->json_max_bytes, match.fields);
    if (json) match.fields = json.get();
    else ++json_invalid_;
  }
  static_cast<Sink&>(engine_).matched(match);
}

void RuleConsumer::lines(const BatchEntry& entry, const Chunk& piece, std::span<const Occurrence> occurrences) {
  const auto it = inputs_.find(entry.stream);
  static const Input unknown{"(unknown)", "(unknown)", nullptr, nullptr};
  const Input& input = it == inputs_.end() ? unknown : it->second;
  LineCutter<Occurrence> cutter(std::string_view(piece.data, piece.size), piece.offset, occurrences, scratch_);
  auto& c = counts_[input.label];
  c.second += piece.size;
  if (!input.joiner && engine_.rules().fail2ban_in_parallel(WorkerPool::default_threads() + 1)) {
    c.first += lines_in_batches(input, entry, cutter);
    return;
  }
  CutLine<Occurrence> line;
  LineMatch match{};
  match.source = input.name;
  match.fields = entry.fields.get();
  std::uint64_t lines = 0;
  const RuleEngine::Clock::time_point now = RuleEngine::Clock::now();
  while (cutter.next(line)) {
    ++lines;
    if (input.joiner) {
      input.joiner->line(line.text, line.occurrences, line.offset, entry.fields, now,
                         [&](const Joiner::Record& r) { record(input, r); });
      continue;
    }
    match.line = line.text;
    match.offset = line.offset;
    match.occurrences = line.occurrences;
    match.fields = entry.fields.get();
    deliver(input, match);
  }
  c.first += lines;
}

// The lines of a piece, a batch at a time through the fail2ban filters and delivered, as
// lines() delivers them, by a Fail2banPipeline.
std::uint64_t RuleConsumer::lines_in_batches(const Input& input, const BatchEntry& entry,
                                             LineCutter<Occurrence>& cutter) {
  static_assert(std::tuple_size_v<decltype(gathered_)> == Fail2banPipeline::kSlots);
  if (!pool_) pool_ = std::make_unique<WorkerPool>(WorkerPool::default_threads());
  if (!pipeline_) pipeline_ = std::make_unique<Fail2banPipeline>(*pool_);
  std::uint64_t lines = 0;
  const auto gather = [&](std::size_t slot, std::vector<std::string_view>& texts,
                          std::vector<std::span<const Occurrence>>& spans) {
    Gathered& g = gathered_[slot];
    g.lines.clear();
    g.offsets.clear();
    g.occurrences.clear();
    g.starts.clear();
    CutLine<Occurrence> line;
    while (g.lines.size() < kFail2banBatch && cutter.next(line)) {
      g.lines.push_back(line.text);
      g.offsets.push_back(line.offset);
      g.starts.push_back(g.occurrences.size());
      g.occurrences.insert(g.occurrences.end(), line.occurrences.begin(), line.occurrences.end());
    }
    g.starts.push_back(g.occurrences.size());
    lines += g.lines.size();
    for (std::size_t j = 0; j < g.lines.size(); ++j) {
      texts.push_back(RuleSet::fail2ban_text(g.lines[j]));
      spans.push_back(g.occurrences_of(j));
    }
  };
  const auto deliver_slot = [&](std::size_t slot) {
    const Gathered& g = gathered_[slot];
    LineMatch match{};
    match.source = input.name;
    for (std::size_t j = 0; j < g.lines.size(); ++j) {
      match.line = g.lines[j];
      match.offset = g.offsets[j];
      match.occurrences = g.occurrences_of(j);
      match.fields = entry.fields.get();
      deliver(input, match);
    }
  };
  pipeline_->run(engine_.rules(), input.name, gather, deliver_slot, journal_time(entry.fields.get()));
  return lines;
}

void RuleConsumer::tick() {
  const RuleEngine::Clock::time_point now = RuleEngine::Clock::now();
  if (now - last_tick_ < std::chrono::milliseconds(50)) return;
  last_tick_ = now;
  for (auto& [stream, input] : inputs_)
    if (input.joiner && input.joiner->due(now))
      input.joiner->flush([&, &in = input](const Joiner::Record& r) { record(in, r); });
  engine_.tick(now);
  if (metrics_ == nullptr) return;
  if (json_invalid_ > 0) metrics_->add("gpufilterd_source_json_invalid_total", {}, static_cast<double>(json_invalid_));
  json_invalid_ = 0;
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
