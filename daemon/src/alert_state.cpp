// RuleEngine's state across a restart (DaemonConfig::alert_state). A JSON object:
//
//   {"format": "gpufilterd-alert-state 1", "saved_at_ms": WALL,
//    "rules": [{"name": N, "definition": HEX, "groups": [{"group": G, "hits_age_ms": [...],
//      "active": B, "last_match_age_ms": A, "last_alert_age_ms": A, "starts_at_ms": WALL,
//      "suppressed": N, "last_line": L, "last_source": S, "captures": {...}}]}]}
//
// Ages are taken at the save; at the restore they are counted back from the restore's own
// moment, the time the process was down included, so that a window keeps sliding and a
// cooldown keeps running while gpufilterd is down. A rule that reads the log's clock
// (event_time, a fail2ban filter) keeps its hits and last alert as log times ("hits_ms",
// "last_alert_ms"); a jail also its failure count, first failure and ban's end.
// "definition" fingerprints everything that decides when a rule fires: a rule changed
// while gpufilterd was down starts afresh, as at a reload.
#include <nlohmann/json.hpp>

#include "gpufilter/core/errors.hpp"
#include "gpufilter/daemon/rules.hpp"
#include "gpufilter/sources/follow_state.hpp"

namespace gpufilter::daemon {
namespace {

using Json = nlohmann::json;
using Clock = RuleEngine::Clock;
constexpr const char* kFormat = "gpufilterd-alert-state 1";

std::int64_t ms(Clock::duration d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); }

// A group's captures as a JSON object (name order, as they are kept).
Json captures_json(const RuleEngine::Captures& captures) {
  Json out = Json::object();
  for (const auto& [key, value] : captures) out[key] = value;
  return out;
}

std::string definition(const RuleConfig& r) {
  std::string text = r.name;
  const auto add = [&](const std::string& field) {
    text += '\x1f';
    text += field;
  };
  for (const auto& p : r.patterns) add("p" + p);
  for (const auto& x : r.regexes) add("r" + x);
  add(std::to_string(static_cast<int>(r.syntax)) + (r.ignore_case ? "i" : "") + (r.word ? "w" : "") +
      (r.invert ? "v" : ""));
  add(std::to_string(r.threshold.count) + "/" + std::to_string(r.threshold.window.count()) + "/" +
      std::to_string(static_cast<int>(r.threshold.group_by)) + "/" + r.threshold.field_after + "/" +
      r.threshold.capture);
  add(std::to_string(r.cooldown.count()) + "/" + std::to_string(r.resolve_after.count()));
  if (r.event_time) add(r.event_time->capture + "/" + r.event_time->format);
  if (!r.field.empty()) add("f" + r.field);  // only when set: older state files stay valid
  if (!r.fail2ban_filter.empty()) {
    std::string options;
    for (const auto& [k, v] : r.fail2ban_options) options += k + "=" + v + ",";
    std::string hosts;
    for (const auto& h : r.ignore_hosts) hosts += h + ",";
    add("b" + r.fail2ban_filter + "[" + options + "]" + r.fail2ban_dir + (r.threshold.fail2ban ? "/jail/" : "/") + hosts);
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a64(text)));
  return hex;
}

}  // namespace

std::string RuleEngine::save_state(Clock::time_point now, SystemClock::time_point wall) const {
  Json rules = Json::array();
  for (const RuleConfig& rule : rules_->rules()) {
    const auto it = state_.find(rule.name);
    if (it == state_.end()) continue;
    const bool log_clock = rule.log_clock();
    Json groups = Json::array();
    for (const auto& [name, g] : it->second.groups) {
      if (!g.active && g.hits.empty()) continue;  // nothing a restart would miss
      Json hits = Json::array();
      for (const Clock::time_point hit : g.hits) hits.push_back(log_clock ? ms(hit.time_since_epoch()) : ms(now - hit));
      groups.push_back({{"group", name},
                        {log_clock ? "hits_ms" : "hits_age_ms", std::move(hits)},
                        {"active", g.active},
                        {"last_match_age_ms", ms(now - g.last_match)},
                        {log_clock ? "last_alert_ms" : "last_alert_age_ms",
                         log_clock ? ms(g.last_alert.time_since_epoch()) : ms(now - g.last_alert)},
                        {"starts_at_ms", ms(g.starts_at.time_since_epoch())},
                        {"suppressed", g.suppressed},
                        {"last_line", g.last_line},
                        {"last_source", g.last_source},
                        {"captures", captures_json(g.captures)}});
      if (rule.threshold.fail2ban) {  // fail2ban's FailTicket and the ban's end (-1: never)
        groups.back()["retry"] = g.retry;
        groups.back()["first_ms"] = ms(g.first.time_since_epoch());
        groups.back()["ban_end_ms"] = g.ban_end == Clock::time_point::max() ? -1 : ms(g.ban_end.time_since_epoch());
      }
    }
    if (!groups.empty()) rules.push_back({{"name", rule.name}, {"definition", definition(rule)}, {"groups", groups}});
  }
  const Json state = {{"format", kFormat}, {"saved_at_ms", ms(wall.time_since_epoch())}, {"rules", std::move(rules)}};
  // Lines and captures hold what the logs' writers wrote: invalid UTF-8 is replaced.
  return state.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
}

std::vector<Alert> RuleEngine::restore_state(std::string_view text, Clock::time_point now,
                                             SystemClock::time_point wall) {
  std::map<std::string, RuleState> restored;
  std::vector<Alert> firing;
  try {
    const Json state = Json::parse(text);
    if (state.at("format") != kFormat) throw ConfigError("not a gpufilterd alert state (format)");
    // The time the process was down counts as time passed; a clock set back counts none.
    const Clock::duration down = std::max(wall - SystemClock::time_point(std::chrono::milliseconds(state.at("saved_at_ms").get<std::int64_t>())),
                                          SystemClock::duration::zero());
    const Clock::time_point saved = now - down;
    for (const Json& r : state.at("rules")) {
      const std::string name = r.at("name").get<std::string>();
      const auto rule = std::find_if(rules_->rules().begin(), rules_->rules().end(),
                                     [&](const RuleConfig& c) { return c.name == name; });
      if (rule == rules_->rules().end() || definition(*rule) != r.at("definition").get<std::string>()) continue;
      const bool log_clock = rule->log_clock();
      RuleState& rs = restored[name];
      for (const Json& j : r.at("groups")) {
        if (rs.groups.size() >= kMaxGroups) break;
        Group g;
        const auto at = [&](const Json& v) {
          return log_clock ? Clock::time_point(std::chrono::milliseconds(v.get<std::int64_t>()))
                           : saved - std::chrono::milliseconds(v.get<std::int64_t>());
        };
        for (const Json& h : j.at(log_clock ? "hits_ms" : "hits_age_ms")) g.hits.push_back(at(h));
        g.active = j.at("active").get<bool>();
        g.last_match = saved - std::chrono::milliseconds(j.at("last_match_age_ms").get<std::int64_t>());
        g.last_alert = at(j.at(log_clock ? "last_alert_ms" : "last_alert_age_ms"));
        g.starts_at = SystemClock::time_point(std::chrono::milliseconds(j.at("starts_at_ms").get<std::int64_t>()));
        g.suppressed = j.at("suppressed").get<std::uint64_t>();
        g.last_line = j.at("last_line").get<std::string>();
        g.last_source = j.at("last_source").get<std::string>();
        for (auto& [key, value] : j.at("captures").get<std::map<std::string, std::string>>())  // an object of strings
          g.captures.emplace(key, std::move(value));
        if (rule->threshold.fail2ban) {
          g.retry = j.at("retry").get<std::uint64_t>();
          g.first = Clock::time_point(std::chrono::milliseconds(j.at("first_ms").get<std::int64_t>()));
          const std::int64_t end = j.at("ban_end_ms").get<std::int64_t>();
          g.ban_end = end < 0 ? Clock::time_point::max() : Clock::time_point(std::chrono::milliseconds(end));
        }
        const std::string group = j.at("group").get<std::string>();
        if (g.active) firing.push_back(make_alert(*rule, group, g, Alert::State::kFiring));
        rs.groups.emplace(group, std::move(g));
      }
    }
  } catch (const Json::exception& e) {
    throw ConfigError(std::string("unreadable alert state: ") + e.what());
  }
  for (auto& [name, rs] : restored) state_[name].groups = std::move(rs.groups);
  return firing;
}

}  // namespace gpufilter::daemon
