// gpufilterd's rules: one pattern set for every rule, mapped back per line with case,
// -w and invert confirmed on the host (checked against a naive per-rule search over
// random lines, 300 rules at once); thresholds in sliding windows per group, cooldown
// with suppressed counts, resolution after a quiet period, and a reload that keeps the
// state of unchanged rules. Time is passed in, so windows are exact.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gpufilter/daemon/fail2ban_pipeline.hpp"
#include "gpufilter/daemon/metrics.hpp"
#include "gpufilter/daemon/rules.hpp"
#include "reference_matcher.hpp"
#include "testutil/testutil.hpp"

namespace {

using namespace gpufilter;
using namespace gpufilter::daemon;
using namespace std::chrono_literals;
using Clock = RuleEngine::Clock;

bool word_char(unsigned char c) { return std::isalnum(c) != 0 || c == '_'; }

std::string lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
  return s;
}

// The plain answer: does `rule` match `line`?
bool naive_match(const RuleConfig& rule, const std::string& line) {
  bool any = false;
  for (const std::string& p : rule.patterns) {
    const std::string hay = rule.ignore_case ? lower(line) : line;
    const std::string needle = rule.ignore_case ? lower(p) : p;
    for (std::size_t at = hay.find(needle); at != std::string::npos && !any; at = hay.find(needle, at + 1)) {
      const std::size_t end = at + needle.size();
      if (rule.word && ((at > 0 && word_char(static_cast<unsigned char>(hay[at - 1]))) ||
                        (end < hay.size() && word_char(static_cast<unsigned char>(hay[end])))))
        continue;
      any = true;
    }
  }
  return any != rule.invert;
}

// A bound rule set with its table.
struct Bound {
  std::shared_ptr<RuleSet> rules;
  std::unique_ptr<PatternTable> table;
  explicit Bound(std::vector<RuleConfig> configs)
      : rules(std::make_shared<RuleSet>(std::move(configs))),
        table(std::make_unique<PatternTable>(rules->patterns(), rules->match_options())) {
    rules->bind(*table);
  }
  std::vector<Occurrence> scan(const std::string& line) const {
    return reference_occurrences(rules->patterns(), *table, line);
  }
};

RuleConfig rule(std::string name, std::vector<std::string> patterns) {
  RuleConfig r;
  r.name = std::move(name);
  r.patterns = std::move(patterns);
  r.cooldown = 0ms;
  return r;
}

TEST(RuleSet, OneScanMapsBackToEveryRule) {
  std::mt19937 rng(5);
  const std::string alphabet = "abAB _-";
  std::vector<RuleConfig> configs;
  for (int i = 0; i < 300; ++i) {
    std::string name = "r";  // (GCC 12 warns falsely on "r" + std::to_string(i))
    name += std::to_string(i);
    RuleConfig r = rule(name, {});
    for (int k = 0, n = 1 + static_cast<int>(rng() % 3); k < n; ++k)
      r.patterns.push_back(test::random_string(rng, alphabet, 1 + rng() % 4));
    r.ignore_case = rng() % 3 == 0;
    r.word = rng() % 4 == 0;
    r.invert = rng() % 20 == 0;
    configs.push_back(r);
  }
  configs.push_back(rule("dup", {configs[0].patterns[0]}));  // the same literal in two rules
  const Bound bound(configs);
  EXPECT_TRUE(bound.rules->match_options().ignore_case);  // some rule folds case: one folded scan
  std::vector<std::uint32_t> got;
  std::size_t matched_lines = 0;
  for (int i = 0; i < 2000; ++i) {
    const std::string line = test::random_string(rng, alphabet, rng() % 30);
    bound.rules->matching_rules(line, bound.scan(line), got);
    std::vector<std::uint32_t> want;
    for (std::uint32_t r = 0; r < configs.size(); ++r)
      if (naive_match(configs[r], line)) want.push_back(r);
    ASSERT_EQ(got, want) << "line '" << line << "'";
    matched_lines += !got.empty();
  }
  EXPECT_GT(matched_lines, 100u);
}

struct Recorder {
  std::vector<Alert> alerts;
  RuleEngine::Emit emit() {
    return [this](const Alert& a) { alerts.push_back(a); };
  }
};

TEST(RuleEngine, ThresholdCountsInASlidingWindowPerGroup) {
  RuleConfig r = rule("ssh", {"Failed password"});
  r.threshold = ThresholdConfig{3, 10s, ThresholdConfig::GroupBy::kField, "from ", ""};
  r.cooldown = 1min;
  const Bound bound({r});
  Recorder rec;
  RuleEngine engine(bound.rules, rec.emit());
  const Clock::time_point t0 = Clock::now();
  auto feed = [&](const std::string& line, Clock::duration at) {
    engine.line("auth.log", line, bound.scan(line), t0 + at);
  };
  feed("Failed password for root from 10.0.0.1 port 22", 0s);
  feed("Failed password for root from 10.0.0.2 port 22", 1s);
  feed("Failed password for root from 10.0.0.1 port 22", 2s);
  EXPECT_TRUE(rec.alerts.empty());
  feed("Accepted password for root from 10.0.0.1 port 22", 3s);  // no match
  feed("Failed password for admin from 10.0.0.1 port 22", 4s);  // third for 10.0.0.1
  ASSERT_EQ(rec.alerts.size(), 1u);
  const Alert& a = rec.alerts[0];
  EXPECT_EQ(a.state, Alert::State::kFiring);
  EXPECT_EQ(a.rule, "ssh");
  EXPECT_EQ(a.group, "10.0.0.1");
  EXPECT_EQ(a.labels.at("group"), "10.0.0.1");
  EXPECT_EQ(a.labels.at("alertname"), "ssh");
  EXPECT_EQ(a.matches, 3u);
  EXPECT_EQ(a.source, "auth.log");
  EXPECT_EQ(a.line, "Failed password for admin from 10.0.0.1 port 22");
  EXPECT_FALSE(a.fingerprint.empty());
  // 10.0.0.2: matches 11 s apart never make three within 10 s.
  feed("Failed password for x from 10.0.0.2 port 22", 12s);
  feed("Failed password for x from 10.0.0.2 port 22", 23s);
  feed("Failed password for x from 10.0.0.2 port 22", 34s);
  EXPECT_EQ(rec.alerts.size(), 1u);
  EXPECT_EQ(engine.matches("ssh"), 7u);
}

TEST(RuleEngine, CooldownGivesOneAlertPerIntervalAndCountsTheRest) {
  RuleConfig r = rule("oom", {"Out of memory"});
  r.cooldown = 1min;
  const Bound bound({r});
  Recorder rec;
  RuleEngine engine(bound.rules, rec.emit());
  const Clock::time_point t0 = Clock::now();
  for (int i = 0; i < 100; ++i) engine.line("k", "Out of memory: kill", bound.scan("Out of memory: kill"), t0 + i * 100ms);
  ASSERT_EQ(rec.alerts.size(), 1u);
  EXPECT_EQ(engine.suppressed("oom"), 99u);
  engine.line("k", "Out of memory again", bound.scan("Out of memory again"), t0 + 61s);
  ASSERT_EQ(rec.alerts.size(), 2u);
  EXPECT_EQ(rec.alerts[1].suppressed, 99u);
  EXPECT_EQ(rec.alerts[1].starts_at, rec.alerts[0].starts_at);  // still the same firing alert
}

// A Kafka record's fields (RecordFields) are read as named groups are: in labels and
// for grouping, by literal rules too.
TEST(RuleEngine, RecordFieldsFillLabelsAndGroups) {
  RuleConfig r = rule("denied", {"denied"});
  r.threshold.group_by = ThresholdConfig::GroupBy::kCapture;
  r.threshold.capture = "kafka.key";
  r.labels = {{"tenant", "{{kafka.key}}"}, {"at", "{{kafka.partition}}/{{kafka.offset}}"}};
  const Bound bound({r});
  Recorder rec;
  RuleEngine engine(bound.rules, rec.emit());
  const Clock::time_point t0 = Clock::now();
  const RecordFields a{{{"kafka.key", "acme"}, {"kafka.partition", "3"}, {"kafka.offset", "41"}}};
  const RecordFields b{{{"kafka.key", "initech"}, {"kafka.partition", "0"}, {"kafka.offset", "7"}}};
  const RecordFields keyless{{{"kafka.partition", "1"}, {"kafka.offset", "9"}}};
  engine.line("kafka:t/3", "access denied", bound.scan("access denied"), t0, &a);
  engine.line("kafka:t/0", "access denied", bound.scan("access denied"), t0, &b);
  engine.line("kafka:t/1", "access denied", bound.scan("access denied"), t0, &keyless);  // no key: no group
  ASSERT_EQ(rec.alerts.size(), 2u);
  EXPECT_EQ(rec.alerts[0].group, "acme");
  EXPECT_EQ(rec.alerts[0].labels.at("tenant"), "acme");
  EXPECT_EQ(rec.alerts[0].labels.at("at"), "3/41");
  EXPECT_EQ(rec.alerts[1].group, "initech");
  EXPECT_EQ(rec.alerts[1].labels.at("at"), "0/7");
}

TEST(JsonRecords, MembersBecomeFieldsAndAnythingElseIsNone) {
  const RecordFields base{{{"kafka.key", "k"}}};
  const auto f = json_fields(R"({"msg":"caf\u00e9 \"quoted\"","n":42,"ok":true,"nil":null,"list":[1,2],)"
                             R"("http":{"status":502,"req":{"path":"/pay"}}})",
                             1 << 20, &base);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->values, (std::vector<std::pair<std::string, std::string>>{{"kafka.key", "k"},
                                                                        {"json.http.req.path", "/pay"},
                                                                        {"json.http.status", "502"},
                                                                        {"json.msg", "caf\xc3\xa9 \"quoted\""},
                                                                        {"json.n", "42"},
                                                                        {"json.nil", "null"},
                                                                        {"json.ok", "true"}}));
  EXPECT_EQ(json_fields("not json", 1 << 20, nullptr), nullptr);
  EXPECT_EQ(json_fields("[1,2]", 1 << 20, nullptr), nullptr);
  EXPECT_EQ(json_fields(R"({"a":1} trailing)", 1 << 20, nullptr), nullptr);
  EXPECT_EQ(json_fields(R"({"a":"long enough"})", 10, nullptr), nullptr);
  std::string deep;
  for (int i = 0; i < 100000; ++i) deep += "{\"a\":";
  deep += "1";
  for (int i = 0; i < 100000; ++i) deep += "}";
  const auto nested = json_fields(deep, 1 << 20, nullptr);  // no stack runs out; depth 8 kept
  ASSERT_NE(nested, nullptr);
  EXPECT_TRUE(nested->values.empty());
}

// A rule with field: matches that field's value on the host, not the line: literal
// (case, -w), regex (its groups read from the value), invert; a record without the
// field is matched by no such rule.
TEST(RuleEngine, FieldRulesMatchTheFieldsValue) {
  RuleConfig literal = rule("literal", {"DECLINED"});
  literal.field = "message";
  literal.ignore_case = true;
  literal.word = true;
  RuleConfig re = rule("regex", {});
  re.field = "message";
  re.regexes = {"order (?P<order>\\d+)"};
  re.labels = {{"order", "{{order}}"}, {"service", "{{json.service}}"}};
  RuleConfig quiet = rule("not-ok", {"ok"});
  quiet.field = "status";
  quiet.invert = true;
  const Bound bound({literal, re, quiet});
  Recorder rec;
  RuleEngine engine(bound.rules, rec.emit());
  const Clock::time_point t0 = Clock::now();
  const auto send = [&](const std::string& line) {
    const auto f = json_fields(line, 1 << 20, nullptr);
    engine.line("s", line, bound.scan(line), t0, f.get());
  };
  send(R"({"service":"pay","message":"payment declined, order 17","status":"ok"})");
  send(R"({"service":"pay","message":"undeclined","note":"DECLINED order 9","status":"failed"})");
  send(R"({"service":"pay","status":"ok"})");
  std::vector<std::string> fired;
  for (const Alert& a : rec.alerts) fired.push_back(a.rule);
  EXPECT_EQ(fired, (std::vector<std::string>{"literal", "regex", "not-ok"}));
  ASSERT_EQ(rec.alerts.size(), 3u);
  EXPECT_EQ(rec.alerts[1].labels.at("order"), "17");
  EXPECT_EQ(rec.alerts[1].labels.at("service"), "pay");
  // Without fields (a text source), no field rule looks.
  engine.line("s", "payment declined, order 1", bound.scan("payment declined, order 1"), t0 + 1s);
  EXPECT_EQ(rec.alerts.size(), 3u);
}

// A fail2ban_filter rule: each failure the stock sshd filter finds is a match, grouped by
// its address; with threshold 1 and no cooldown, one alert per failure, so the alerts per
// group are fail2ban-regex -o ip's counts per address on the same log.
TEST(RuleEngine, Fail2banFilterFailuresAreMatchesGroupedByTheirHost) {
  RuleConfig r = rule("sshd", {});
  r.fail2ban_filter = "sshd";
  r.threshold.group_by = ThresholdConfig::GroupBy::kCapture;
  r.threshold.capture = "host";
  r.labels = {{"user", "{{user}}"}, {"address", "{{host}}"}};
  const Bound bound({r});
  Recorder rec;
  RuleEngine engine(bound.rules, rec.emit());
  const std::string path = gpufilter::test::corpus_path("loghub/OpenSSH_2k.log");
  std::string text = gpufilter::test::read_file(path);
  text.erase(text.rfind('\n') + 1);  // fail2ban does not read a last line without its newline
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) engine.line("auth.log", line, bound.scan(line), Clock::now());
  std::map<std::string, int> ours;
  for (const Alert& a : rec.alerts) {
    ++ours[a.group];
    EXPECT_EQ(a.labels.at("address"), a.group);
  }
  const gpufilter::test::ProcessResult theirs =
      gpufilter::test::run_process({"/usr/bin/fail2ban-regex", "-r", "-o", "ip", path, "/etc/fail2ban/filter.d/sshd.conf"});
  ASSERT_EQ(theirs.status, 0) << theirs.err;
  std::map<std::string, int> want;
  std::istringstream ips(theirs.out);
  for (std::string ip; std::getline(ips, ip);) ++want[ip];
  EXPECT_EQ(ours, want);
  EXPECT_GT(want.size(), 10u);
  // The user a failure names is a label.
  EXPECT_TRUE(std::any_of(rec.alerts.begin(), rec.alerts.end(),
                          [](const Alert& a) { return a.labels.at("user") == "webmaster"; }));
}

// fail2ban filters in one scan with other rules (one read for all jails): their literals
// join the pattern set, a line without one meets only the date detector, and the answers
// stay fail2ban-regex's, also when another rule makes the scan fold case.
TEST(RuleEngine, Fail2banFiltersShareTheScanWithOtherRules) {
  RuleConfig sshd = rule("sshd", {});
  sshd.fail2ban_filter = "sshd";
  sshd.threshold.group_by = ThresholdConfig::GroupBy::kCapture;
  sshd.threshold.capture = "host";
  RuleConfig pam = rule("pam", {});
  pam.fail2ban_filter = "pam-generic";
  pam.threshold.group_by = ThresholdConfig::GroupBy::kCapture;
  pam.threshold.capture = "host";
  RuleConfig closed = rule("closed", {"CONNECTION CLOSED"});
  closed.ignore_case = true;
  const Bound bound({sshd, pam, closed});
  EXPECT_GT(bound.rules->patterns().size(), 10u);  // the filters' literals are in the scan
  Recorder rec;
  RuleEngine engine(bound.rules, rec.emit());
  const std::string path = gpufilter::test::corpus_path("loghub/OpenSSH_2k.log");
  std::string text = gpufilter::test::read_file(path);
  text.erase(text.rfind('\n') + 1);
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) engine.line("auth.log", line, bound.scan(line), Clock::now());
  for (const char* filter : {"sshd", "pam-generic"}) {
    std::map<std::string, int> ours, want;
    for (const Alert& a : rec.alerts)
      if (a.rule == (std::string(filter) == "sshd" ? "sshd" : "pam")) ++ours[a.group];
    const gpufilter::test::ProcessResult theirs = gpufilter::test::run_process(
        {"/usr/bin/fail2ban-regex", "-r", "-o", "ip", path, std::string("/etc/fail2ban/filter.d/") + filter + ".conf"});
    ASSERT_EQ(theirs.status, 0) << theirs.err;
    std::istringstream ips(theirs.out);
    for (std::string ip; std::getline(ips, ip);) ++want[ip];
    EXPECT_EQ(ours, want) << filter;
    EXPECT_FALSE(want.empty()) << filter;
  }
  EXPECT_GT(engine.matches("closed"), 0u);
}

// The sample logs of single-line and multi-line filters one after the other, then the
// OpenSSH sample: the lines the batch tests below give their filters.
std::vector<std::string> fail2ban_test_lines() {
  std::vector<std::string> lines;
  const std::string logs = "/usr/lib/python3/dist-packages/fail2ban/tests/files/logs/";
  for (const std::string& path : {logs + "sshd", logs + "slapd", logs + "mongodb-auth", logs + "pam-generic",
                                  logs + "dovecot", gpufilter::test::corpus_path("loghub/OpenSSH_2k.log")}) {
    std::istringstream in(gpufilter::test::read_file(path));
    for (std::string line; std::getline(in, line);) lines.push_back(line);
  }
  return lines;
}

std::vector<RuleConfig> fail2ban_rules(std::initializer_list<const char*> filters) {
  std::vector<RuleConfig> configs;
  for (const char* filter : filters) {
    RuleConfig r = rule(filter, {});
    r.fail2ban_filter = filter;
    configs.push_back(r);
  }
  return configs;
}

// One line's outcomes, every filter's, as text; each failure adds four ':'. And whether
// RuleSet::fail2ban_found() names exactly the outcomes that hold anything, in order.
std::string describe(const std::vector<fail2ban::Filter::Outcome>& outcomes, const RuleSet& rules) {
  std::string s;
  std::vector<std::size_t> holding;
  for (std::size_t i = 0; i < outcomes.size(); ++i)
    if (outcomes[i].matched || outcomes[i].ignored() || !outcomes[i].failures.empty()) holding.push_back(i);
  if (holding != rules.fail2ban_found()) s += "(fail2ban_found() lists others) ";
  for (const fail2ban::Filter::Outcome& o : outcomes) {
    s += o.matched ? "m" : "-";
    s += o.ignored() ? "i" : "-";
    for (const fail2ban::Filter::Failure& f : o.failures) {
      s.append(" ").append(std::to_string(f.failregex)).append(":").append(f.id).append(":").append(f.user);
      s.append(":").append(f.time ? std::to_string(*f.time) : "none").append(":").append(std::to_string(f.attempts));
    }
    s += " |";
  }
  return s;
}

// Several fail2ban filters' outcomes made a batch of lines at a time, the date readers and
// then the filters side by side on a pool (RuleSet::prepare_fail2ban()), are those made
// line by line: batches of odd sizes, lines of two sources (one jail reads only one).
TEST(RuleSet, Fail2banFiltersPreparedSideBySideAnswerAsLineByLine) {
  std::vector<RuleConfig> configs =
      fail2ban_rules({"sshd", "pam-generic", "slapd", "mongodb-auth", "selinux-ssh", "dovecot"});
  configs[1].only_sources = {"auth.log"};
  const Bound by_line(configs), by_batch(configs);
  const std::vector<std::string> lines = fail2ban_test_lines();
  WorkerPool pool(3);
  std::size_t failures = 0;
  for (std::size_t at = 0, k = 0; at < lines.size(); ++k) {
    const std::size_t n = std::min<std::size_t>(lines.size() - at, 1 + (k * 37) % 101);
    const std::string source = k % 5 == 3 ? "other.log" : "auth.log";
    std::vector<std::vector<Occurrence>> found(n);
    std::vector<std::string_view> texts(n);
    std::vector<std::span<const Occurrence>> spans(n);
    for (std::size_t j = 0; j < n; ++j) {
      texts[j] = RuleSet::fail2ban_text(lines[at + j]);
      found[j] = by_batch.scan(lines[at + j]);
      spans[j] = found[j];
    }
    by_batch.rules->prepare_fail2ban(source, texts, spans, pool);
    for (std::size_t j = 0; j < n; ++j) {
      const std::string want = describe(by_line.rules->fail2ban_lines(source, texts[j], by_line.scan(lines[at + j])), *by_line.rules);
      ASSERT_EQ(describe(by_batch.rules->fail2ban_lines(source, texts[j], spans[j]), *by_batch.rules), want)
          << source << " line " << at + j << ": " << lines[at + j];
      failures += static_cast<std::size_t>(std::count(want.begin(), want.end(), ':')) / 4;
    }
    at += n;
  }
  EXPECT_GT(failures, 500u);
}

// Fail2banPipeline (RuleConsumer's path): five batches in flight, one being dated, one
// searched ahead, one in the filters, one in their lanes (sshd's, from eight threads) and
// one delivered, on pools of one to eight threads,
// for one filter (its date reader, searches, filter and delivery overlapping) and for six;
// each run of the pipeline one source's lines, in batches of odd sizes, small ones and
// ones large enough to be searched ahead in pieces. The outcomes handed out are line by
// line's, and every line is handed out.
TEST(RuleSet, Fail2banPipelineAnswersAsLineByLine) {
  const std::vector<std::string> lines = fail2ban_test_lines();
  for (const auto& filters : {fail2ban_rules({"sshd"}),
                              fail2ban_rules({"sshd", "pam-generic", "slapd", "mongodb-auth", "selinux-ssh", "dovecot"})}) {
    for (const std::size_t threads : {0, 1, 3, 7})
    for (const bool large : {false, true}) {
      std::vector<RuleConfig> configs = filters;
      if (configs.size() > 1) configs[1].only_sources = {"auth.log"};
      const Bound by_line(configs), by_batch(configs);
      WorkerPool pool(threads);
      Fail2banPipeline pipeline(pool);
      std::size_t at = 0, k = 0, failures = 0, delivered = 0;
      std::array<std::vector<std::vector<Occurrence>>, Fail2banPipeline::kSlots> found;
      std::array<std::pair<std::size_t, std::size_t>, Fail2banPipeline::kSlots> range;  // lines of each slot
      for (std::size_t run = 0; at < lines.size(); ++run) {
        const std::string source = run % 3 == 2 ? "other.log" : "auth.log";
        const std::size_t run_end = std::min(lines.size(), at + 200 + run * 611 % 1500);
        const auto gather = [&](std::size_t slot, std::vector<std::string_view>& texts,
                                std::vector<std::span<const Occurrence>>& spans) {
          const std::size_t n = std::min<std::size_t>(run_end - at, large ? 150 + (k++ * 211) % 500 : 1 + (k++ * 37) % 101);
          range[slot] = {at, at + n};
          found[slot].resize(n);
          for (std::size_t j = 0; j < n; ++j) found[slot][j] = by_batch.scan(lines[at + j]);
          for (std::size_t j = 0; j < n; ++j) {
            texts.push_back(RuleSet::fail2ban_text(lines[at + j]));
            spans.push_back(found[slot][j]);
          }
          at += n;
        };
        const auto deliver = [&](std::size_t slot) {
          for (std::size_t i = range[slot].first; i < range[slot].second; ++i, ++delivered) {
            const std::string_view text = RuleSet::fail2ban_text(lines[i]);
            const std::string want = describe(by_line.rules->fail2ban_lines(source, text, by_line.scan(lines[i])), *by_line.rules);
            const std::string got = describe(by_batch.rules->fail2ban_lines(source, text, found[slot][i - range[slot].first]), *by_batch.rules);
            ASSERT_EQ(got, want) << configs.size() << " filters, " << threads << " threads, " << source << " line " << i
                                 << ": " << lines[i];
            failures += static_cast<std::size_t>(std::count(want.begin(), want.end(), ':')) / 4;
          }
        };
        pipeline.run(*by_batch.rules, source, gather, deliver);
        ASSERT_FALSE(HasFatalFailure());
      }
      EXPECT_EQ(delivered, lines.size()) << configs.size() << " filters, " << threads << " threads";
      EXPECT_GT(failures, configs.size() > 1 ? 500u : 100u) << configs.size() << " filters, " << threads << " threads";
    }
  }
}

TEST(RuleEngine, QuietGroupsResolve) {
  RuleConfig r = rule("disk", {"disk full"});
  r.resolve_after = 5s;
  r.threshold.group_by = ThresholdConfig::GroupBy::kSource;
  const Bound bound({r});
  Recorder rec;
  RuleEngine engine(bound.rules, rec.emit());
  const Clock::time_point t0 = Clock::now();
  engine.line("a.log", "disk full", bound.scan("disk full"), t0);
  engine.line("b.log", "disk full", bound.scan("disk full"), t0 + 3s);
  engine.tick(t0 + 4s);
  EXPECT_EQ(rec.alerts.size(), 2u);
  engine.tick(t0 + 6s);  // a.log quiet for 6 s, b.log for 3 s
  ASSERT_EQ(rec.alerts.size(), 3u);
  EXPECT_EQ(rec.alerts[2].state, Alert::State::kResolved);
  EXPECT_EQ(rec.alerts[2].group, "a.log");
  EXPECT_EQ(rec.alerts[2].fingerprint, rec.alerts[0].fingerprint);
  EXPECT_GE(rec.alerts[2].ends_at, rec.alerts[2].starts_at);
  engine.tick(t0 + 9s);
  ASSERT_EQ(rec.alerts.size(), 4u);
  EXPECT_EQ(rec.alerts[3].group, "b.log");
  engine.tick(t0 + 60s);
  EXPECT_EQ(rec.alerts.size(), 4u);  // resolved once
}

TEST(RuleEngine, InvertRulesMatchLinesWithoutTheirPatterns) {
  RuleConfig r = rule("no-heartbeat-word", {"ok"});
  r.invert = true;
  const Bound bound({r, rule("other", {"x"})});
  Recorder rec;
  RuleEngine engine(bound.rules, rec.emit());
  const Clock::time_point t0 = Clock::now();
  engine.line("s", "all ok", bound.scan("all ok"), t0);
  EXPECT_EQ(engine.matches("no-heartbeat-word"), 0u);
  engine.line("s", "failed", bound.scan("failed"), t0);
  EXPECT_EQ(engine.matches("no-heartbeat-word"), 1u);
  EXPECT_EQ(engine.matches("other"), 0u);
}

TEST(RuleEngine, ReloadKeepsTheStateOfUnchangedRules) {
  RuleConfig kept = rule("kept", {"alpha"});
  kept.threshold = ThresholdConfig{3, 1min, ThresholdConfig::GroupBy::kNone, "", ""};
  RuleConfig changed = rule("changed", {"beta"});
  changed.threshold = ThresholdConfig{3, 1min, ThresholdConfig::GroupBy::kNone, "", ""};
  RuleConfig removed = rule("removed", {"gamma"});
  const Bound before({kept, changed, removed});
  Recorder rec;
  RuleEngine engine(before.rules, rec.emit());
  const Clock::time_point t0 = Clock::now();
  for (const char* l : {"alpha", "alpha", "beta", "beta", "gamma"}) engine.line("s", l, before.scan(l), t0);
  ASSERT_EQ(rec.alerts.size(), 1u);  // gamma fired
  RuleConfig changed2 = changed;
  changed2.patterns.push_back("delta");
  const Bound after({kept, changed2, rule("new", {"epsilon"})});
  engine.replace(after.rules, t0 + 1s);
  ASSERT_EQ(rec.alerts.size(), 2u);  // the removed rule's active alert is resolved
  EXPECT_EQ(rec.alerts[1].rule, "removed");
  EXPECT_EQ(rec.alerts[1].state, Alert::State::kResolved);
  engine.line("s", "alpha", after.scan("alpha"), t0 + 2s);  // third alpha: kept its two
  ASSERT_EQ(rec.alerts.size(), 3u);
  EXPECT_EQ(rec.alerts[2].rule, "kept");
  engine.line("s", "beta", after.scan("beta"), t0 + 2s);  // changed: starts from zero
  EXPECT_EQ(rec.alerts.size(), 3u);
  engine.line("s", "epsilon", after.scan("epsilon"), t0 + 2s);
  ASSERT_EQ(rec.alerts.size(), 4u);
  EXPECT_EQ(rec.alerts[3].rule, "new");
}

// alert_state: what save_state() wrote comes back in a new engine for rules whose
// definition is unchanged; the time between the save and the restore counts as passed
// (a window slides past old hits, a cooldown runs out); a changed rule starts afresh; the
// firing groups come back as alerts to adopt, not sent.
TEST(RuleEngine, StateSavedAndRestoredAcrossARestart) {
  RuleConfig storm = rule("storm", {"Out of memory"});
  storm.cooldown = 10min;
  storm.resolve_after = 1h;
  RuleConfig slow = rule("slow", {"disk full"});
  slow.threshold = ThresholdConfig{3, 1min, ThresholdConfig::GroupBy::kSource, "", ""};
  RuleConfig changing = rule("changing", {"beta"});
  changing.threshold = ThresholdConfig{2, 1h, ThresholdConfig::GroupBy::kNone, "", ""};
  const Bound before({storm, slow, changing});
  Recorder first;
  RuleEngine engine(before.rules, first.emit());
  const Clock::time_point t0 = Clock::now();
  const SystemClock::time_point wall0 = SystemClock::now();
  for (const char* l : {"Out of memory", "beta"}) engine.line("a.log", l, before.scan(l), t0);
  for (const char* source : {"a.log", "a.log", "b.log"}) engine.line(source, "disk full", before.scan("disk full"), t0);
  ASSERT_EQ(first.alerts.size(), 1u);
  EXPECT_TRUE(engine.changed());
  const std::string saved = engine.save_state(t0, wall0);

  // Restored 30 s later (the process down meanwhile), with "changing" redefined.
  RuleConfig changed = changing;
  changed.patterns.push_back("gamma");
  const Bound after({storm, slow, changed});
  Recorder second;
  RuleEngine restored(after.rules, second.emit());
  const Clock::time_point t1 = Clock::now() + 1h;  // another process's clock
  const std::vector<Alert> firing = restored.restore_state(saved, t1, wall0 + 30s);
  ASSERT_EQ(firing.size(), 1u);
  EXPECT_EQ(firing[0].rule, "storm");
  EXPECT_EQ(firing[0].fingerprint, first.alerts[0].fingerprint);
  EXPECT_LT(std::chrono::abs(firing[0].starts_at - first.alerts[0].starts_at), 1ms);  // kept in ms
  EXPECT_TRUE(second.alerts.empty());
  restored.line("a.log", "Out of memory", after.scan("Out of memory"), t1);  // in the cooldown
  EXPECT_TRUE(second.alerts.empty());
  EXPECT_EQ(restored.suppressed("storm"), 1u);
  restored.line("a.log", "disk full", after.scan("disk full"), t1);  // a.log's third within the minute
  ASSERT_EQ(second.alerts.size(), 1u);
  EXPECT_EQ(second.alerts[0].rule, "slow");
  EXPECT_EQ(second.alerts[0].group, "a.log");
  restored.line("x", "beta", after.scan("beta"), t1);  // changed: its first beta was forgotten
  EXPECT_EQ(second.alerts.size(), 1u);
  // 40 s later: b.log's one hit is 70 s old, out of the minute's window.
  restored.line("b.log", "disk full", after.scan("disk full"), t1 + 40s);
  restored.line("b.log", "disk full", after.scan("disk full"), t1 + 40s);
  EXPECT_EQ(second.alerts.size(), 1u);
  // The storm's cooldown (10 min from the first alert) runs out 9.5 min after the restore.
  restored.line("a.log", "Out of memory", after.scan("Out of memory"), t1 + 9min + 31s);
  ASSERT_EQ(second.alerts.size(), 2u);
  EXPECT_EQ(second.alerts[1].rule, "storm");
  EXPECT_EQ(second.alerts[1].suppressed, 1u);

  Recorder third;
  RuleEngine broken(after.rules, third.emit());
  EXPECT_THROW(broken.restore_state("{\"format\": \"something else\"}", t1, wall0), ConfigError);
  EXPECT_THROW(broken.restore_state("[1, 2", t1, wall0), ConfigError);
  EXPECT_EQ(broken.save_state(t1, wall0).find("\"groups\""), std::string::npos);  // nothing restored
}

// The captures a group's labels are filled from (a regex rule's named groups; a fail2ban
// failure's fields, host and user) are saved with the group and come back with it: a
// restored firing alert has the labels the alert had.
TEST(RuleEngine, CapturesComeBackAcrossARestart) {
  RuleConfig order = rule("order", {});
  order.regexes = {"order (?P<order>\\d+) by (?P<who>\\w+)"};
  order.labels = {{"order", "{{order}}"}, {"who", "{{who}}"}};
  RuleConfig jail = rule("sshd", {});
  jail.fail2ban_filter = "sshd";
  jail.labels = {{"user", "{{user}}"}, {"host", "{{host}}"}, {"failregex", "{{failregex}}"}};
  for (RuleConfig* r : {&order, &jail}) {
    r->cooldown = 10min;
    r->resolve_after = 1h;
  }
  const Bound bound({order, jail});
  Recorder first;
  RuleEngine engine(bound.rules, first.emit());
  const Clock::time_point t0 = Clock::now();
  const SystemClock::time_point wall0 = SystemClock::now();
  const std::string lines[] = {"order 17 by alice",
                               "Dec 10 06:55:46 host sshd[1]: Failed password for root from 10.0.0.1 port 22 ssh2"};
  for (const std::string& l : lines) engine.line("app.log", l, bound.scan(l), t0);
  ASSERT_EQ(first.alerts.size(), 2u);
  EXPECT_EQ(first.alerts[0].labels.at("who"), "alice");
  EXPECT_EQ(first.alerts[1].labels.at("user"), "root");
  EXPECT_EQ(first.alerts[1].labels.at("host"), "10.0.0.1");
  EXPECT_EQ(first.alerts[1].labels.at("failregex"), "4");
  const std::string saved = engine.save_state(t0, wall0);
  EXPECT_NE(saved.find("\"captures\":{\"order\":\"17\",\"who\":\"alice\"}"), std::string::npos) << saved;

  Recorder second;
  RuleEngine restored(bound.rules, second.emit());
  const std::vector<Alert> firing = restored.restore_state(saved, Clock::now(), wall0 + 1s);
  ASSERT_EQ(firing.size(), 2u);
  for (const Alert& a : firing) {
    const Alert& was = a.rule == "order" ? first.alerts[0] : first.alerts[1];
    EXPECT_EQ(a.labels, was.labels) << a.rule;
  }
  // Captures that are not an object of strings make the state no state of ours.
  std::string odd = saved;
  const std::size_t at = odd.find("{\"order\":\"17\",\"who\":\"alice\"}");
  ASSERT_NE(at, std::string::npos);
  odd.replace(at, std::string("{\"order\":\"17\",\"who\":\"alice\"}").size(), "[\"17\"]");
  Recorder third;
  RuleEngine refused(bound.rules, third.emit());
  EXPECT_THROW(refused.restore_state(odd, Clock::now(), wall0 + 1s), ConfigError);
}

// A jail across a restart: its failure counts, first failures and bans (on the log's
// clock, not ours) come back, so a restart neither forgets two failures nor re-bans a
// banned host; a permanent ban stays permanent.
TEST(RuleEngine, JailCountsAndBansSurviveARestart) {
  RuleConfig jail = rule("sshd", {});
  jail.fail2ban_filter = "sshd";
  jail.threshold = ThresholdConfig{3, 10min, ThresholdConfig::GroupBy::kCapture, "", "host"};
  jail.threshold.fail2ban = true;
  jail.cooldown = 10min;  // bantime
  RuleConfig forever = jail;
  forever.name = "forever";
  forever.cooldown = std::chrono::duration_cast<Millis>(36500LL * 24h);  // bantime = -1
  const auto line = [](const char* ip, int minute) {
    return "2024-01-10 10:" + std::string(minute < 10 ? "0" : "") + std::to_string(minute) +
           ":00 myhost sshd[4242]: Failed password for root from " + ip + " port 22 ssh2";
  };
  const Bound bound({jail, forever});
  const SystemClock::time_point wall = SystemClock::now();
  std::string saved;
  std::vector<Alert> alerts;
  const auto run = [&](std::initializer_list<std::pair<const char*, int>> failures) {
    Recorder rec;
    RuleEngine engine(bound.rules, rec.emit());
    const Clock::time_point now = Clock::now() + std::chrono::hours(alerts.size() + 1);  // another process
    if (!saved.empty()) engine.restore_state(saved, now, wall);
    for (const auto& [ip, minute] : failures) {
      const std::string l = line(ip, minute);
      engine.line("auth.log", l, bound.scan(l), now);
    }
    saved = engine.save_state(now, wall);
    alerts.insert(alerts.end(), rec.alerts.begin(), rec.alerts.end());
    return rec.alerts.size();
  };
  EXPECT_EQ(run({{"192.0.2.1", 0}, {"192.0.2.1", 1}}), 0u);
  EXPECT_EQ(run({{"192.0.2.1", 2}}), 2u);  // the third failure: both jails ban
  EXPECT_EQ(run({{"192.0.2.1", 3}, {"192.0.2.1", 4}, {"192.0.2.1", 5}}), 0u);  // banned: the ban grows to 15m
  EXPECT_EQ(run({{"192.0.2.1", 14}, {"192.0.2.1", 14}, {"192.0.2.1", 14}}), 0u);  // still banned: on to 24m
  // The ban ended at 24m: sshd bans again, forever does not.
  EXPECT_EQ(run({{"192.0.2.1", 40}, {"192.0.2.1", 41}, {"192.0.2.1", 42}}), 1u);
  ASSERT_EQ(alerts.size(), 3u);
  EXPECT_EQ(alerts[2].rule, "sshd");
  EXPECT_EQ(alerts[2].group, "192.0.2.1");
}

// The rules are a Sink: a line reaches them as a LineMatch with every occurrence in it,
// and they say that they need the occurrences (SinkNeeds), not spans or pattern ids.
TEST(RuleEngine, IsASinkThatNeedsOccurrences) {
  const Bound bound({rule("fail", {"Failed"}), rule("root", {"root"})});
  Recorder rec;
  RuleEngine engine(bound.rules, rec.emit());
  Sink& sink = engine;
  const SinkNeeds needs = sink.needs();
  EXPECT_TRUE(needs.occurrences);
  EXPECT_FALSE(needs.spans);
  EXPECT_FALSE(needs.pattern_ids);
  const std::string text = "Failed password for root";
  const std::vector<Occurrence> found = bound.scan(text);
  LineMatch line{};
  line.line = text;
  line.source = "auth.log";
  line.occurrences = found;
  EXPECT_EQ(sink.matched(line), Flow::kContinue);
  EXPECT_EQ(engine.matches("fail"), 1u);
  EXPECT_EQ(engine.matches("root"), 1u);
  line.occurrences = {};  // no occurrence: no rule
  sink.matched(line);
  EXPECT_EQ(engine.matches("fail"), 1u);
}

TEST(RuleConsumer, SocketSourcesShareOneLabel) {
  EXPECT_EQ(RuleConsumer::source_label("tcp://127.0.0.1:4000"), "tcp");
  EXPECT_EQ(RuleConsumer::source_label("udp://[::1]:9"), "udp");
  EXPECT_EQ(RuleConsumer::source_label("unix:/run/x.sock#3"), "unix");
  EXPECT_EQ(RuleConsumer::source_label("/var/log/auth.log"), "/var/log/auth.log");
}

}  // namespace

namespace {

// Grouped by a field: a matching line that lacks the field is a match, in no group.
TEST(RuleEngine, LinesWithoutTheGroupFieldCountInNoGroup) {
  RuleConfig r = rule("ssh", {"Failed password"});
  r.threshold = ThresholdConfig{2, 1min, ThresholdConfig::GroupBy::kField, "from ", ""};
  const Bound bound({r});
  Recorder rec;
  RuleEngine engine(bound.rules, rec.emit());
  const Clock::time_point t0 = Clock::now();
  for (int i = 0; i < 5; ++i) engine.line("s", "Failed password (no address)", bound.scan("Failed password (no address)"), t0);
  EXPECT_EQ(engine.matches("ssh"), 5u);
  EXPECT_TRUE(rec.alerts.empty());
  engine.line("s", "Failed password from 1.2.3.4", bound.scan("Failed password from 1.2.3.4"), t0);
  engine.line("s", "Failed password from 1.2.3.4", bound.scan("Failed password from 1.2.3.4"), t0);
  ASSERT_EQ(rec.alerts.size(), 1u);
  EXPECT_EQ(rec.alerts[0].group, "1.2.3.4");
}

// The group is the token after the LAST occurrence of field_after: the part of an sshd line
// an attacker writes (the user name) comes before the real "from ADDRESS", so a forged
// "from 10.9.9.9" there must not choose the group (nor spread one address over many).
TEST(RuleEngine, AForgedGroupFieldEarlierInTheLineDoesNotChooseTheGroup) {
  RuleConfig r = rule("ssh", {"Invalid user"});
  r.threshold = ThresholdConfig{2, 1min, ThresholdConfig::GroupBy::kField, "from ", ""};
  const Bound bound({r});
  Recorder rec;
  RuleEngine engine(bound.rules, rec.emit());
  const Clock::time_point t0 = Clock::now();
  const std::string forged[] = {
      "sshd[1]: Invalid user x from 10.9.9.9 from 203.0.113.99 port 5",
      "sshd[1]: Invalid user from 10.8.8.8 from 203.0.113.99 port 6",
  };
  for (const std::string& line : forged) engine.line("s", line, bound.scan(line), t0);
  ASSERT_EQ(rec.alerts.size(), 1u);
  EXPECT_EQ(rec.alerts[0].group, "203.0.113.99");
}

// The group token's length is the log writer's choice (up to max_line_bytes): it is cut to
// kMaxGroupBytes, so 10,000 groups of forged megabyte tokens cannot take gigabytes of keys
// and labels.
TEST(RuleEngine, AnOverlongGroupFieldIsCut) {
  RuleConfig r = rule("ssh", {"Invalid user"});
  r.threshold = ThresholdConfig{1, 0ms, ThresholdConfig::GroupBy::kField, "from ", ""};
  const Bound bound({r});
  Recorder rec;
  RuleEngine engine(bound.rules, rec.emit());
  const std::string line = "Invalid user x from " + std::string(100000, 'a') + " port 5";
  engine.line("s", line, bound.scan(line), Clock::now());
  ASSERT_EQ(rec.alerts.size(), 1u);
  EXPECT_EQ(rec.alerts[0].group, std::string(256, 'a'));
}

// Past 10,000 groups a rule's new groups share "(other)": forged fields can fill the
// table, so the matches put there are counted (gpufilterd_rule_groups_overflowed_total).
TEST(RuleEngine, GroupsPastTheLimitShareOtherAndAreCounted) {
  RuleConfig r = rule("ssh", {"Invalid user"});
  r.threshold = ThresholdConfig{2, 1h, ThresholdConfig::GroupBy::kField, "from ", ""};
  const Bound bound({r});
  Recorder rec;
  Metrics metrics;
  RuleEngine engine(bound.rules, rec.emit(), &metrics);
  const Clock::time_point t0 = Clock::now();
  for (int i = 0; i < 10003; ++i) {
    const std::string line = "Invalid user x from 10.0." + std::to_string(i) + " port 5";
    engine.line("s", line, bound.scan(line), t0);
  }
  engine.tick(t0);
  ASSERT_EQ(rec.alerts.size(), 1u);  // the three past the limit, in one group
  EXPECT_EQ(rec.alerts[0].group, "(other)");
  EXPECT_NE(metrics.render().find("gpufilterd_rule_groups_overflowed_total{rule=\"ssh\"} 3\n"), std::string::npos)
      << metrics.render();
}

}  // namespace

namespace {

RuleConfig regex_rule(std::string name, std::vector<std::string> regexes) {
  RuleConfig r;
  r.name = std::move(name);
  r.regexes = std::move(regexes);
  r.cooldown = 0ms;
  return r;
}

// \s* before the end: the sample (as many logs copied from elsewhere) ends its lines with CRLF.
const char kSshRegex[] = "Failed password for .* from <HOST> port \\d+ ssh2\\s*$";

// fail2ban's <HOST> in a rule anchored at the end of the line: the address a user name
// forges earlier in the line ("from 10.9.9.9", a whole fake tail) neither chooses the group
// nor hides the real one; IPv6 and ::ffff: mapped addresses are hosts too; labels and
// annotations are filled from the groups.
TEST(RuleEngine, RegexRuleGroupsByTheHostCaptureAndCannotBeFooled) {
  RuleConfig r = regex_rule("ssh", {kSshRegex});
  r.threshold = ThresholdConfig{1, 0ms, ThresholdConfig::GroupBy::kCapture, "", "host"};
  r.labels = {{"address", "{{host}}"}};
  r.annotations = {{"summary", "password guessing from {{host}} ({{nothing}})"}};
  const Bound bound({r});
  Recorder rec;
  RuleEngine engine(bound.rules, rec.emit());
  const Clock::time_point t0 = Clock::now();
  const std::vector<std::pair<std::string, std::string>> lines = {
      {"sshd[1]: Failed password for invalid user x from 10.9.9.9 from 203.0.113.9 port 5 ssh2", "203.0.113.9"},
      {"sshd[1]: Failed password for invalid user a from 6.6.6.6 port 22 ssh2 from 198.51.100.7 port 6 ssh2",
       "198.51.100.7"},
      {"sshd[1]: Failed password for root from 2001:db8::17 port 7 ssh2", "2001:db8::17"},
      {"sshd[1]: Failed password for root from ::ffff:192.0.2.4 port 8 ssh2", "192.0.2.4"},
      {"sshd[1]: Failed password for root from 192.0.2.5 port 9 ssh2 [preauth] trailing", ""},  // not at the end
      {"sshd[1]: Accepted password for root from 192.0.2.6 port 9 ssh2", ""},
  };
  for (const auto& [line, host] : lines) {
    const std::size_t before = rec.alerts.size();
    engine.line("auth.log", line, bound.scan(line), t0);
    if (host.empty()) {
      EXPECT_EQ(rec.alerts.size(), before) << line;
      continue;
    }
    ASSERT_EQ(rec.alerts.size(), before + 1) << line;
    EXPECT_EQ(rec.alerts.back().group, host) << line;
    EXPECT_EQ(rec.alerts.back().labels.at("address"), host);
    EXPECT_EQ(rec.alerts.back().annotations.at("summary"), "password guessing from " + host + " ()");
  }
}

// The rule over the OpenSSH sample: the same hosts, and the same count per host, as a
// plain reading of the lines (the address after the last " from " of a failed password).
TEST(RuleEngine, RegexRuleOverTheOpenSshSampleFindsEveryHost) {
  const std::string sample = gpufilter::test::read_file(gpufilter::test::corpus_path("loghub/OpenSSH_2k.log"));
  if (sample.empty()) GTEST_SKIP() << "no corpus";
  RuleConfig r = regex_rule("ssh", {kSshRegex});
  r.threshold = ThresholdConfig{1, 0ms, ThresholdConfig::GroupBy::kCapture, "", "host"};
  const Bound bound({r});
  std::map<std::string, int> alerted, expected;
  RuleEngine engine(bound.rules, [&](const Alert& a) { ++alerted[a.group]; });
  const Clock::time_point t0 = Clock::now();
  std::istringstream in(sample);
  for (std::string line; std::getline(in, line);) {
    engine.line("auth.log", line, bound.scan(line), t0);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find("Failed password for ") == std::string::npos || line.size() < 5 ||
        line.compare(line.size() - 5, 5, " ssh2") != 0)
      continue;
    const std::size_t from = line.rfind(" from ");
    const std::size_t port = line.find(" port ", from);
    ++expected[line.substr(from + 6, port - from - 6)];
  }
  EXPECT_GT(expected.size(), 10u);
  EXPECT_EQ(alerted, expected);
}

// time: the window and startsAt follow the log's clock: three failures logged ten minutes
// apart, replayed at once, do not make three in a minute; three logged within a minute do.
TEST(RuleEngine, EventTimeFromACaptureDrivesTheWindow) {
  RuleConfig r = regex_rule("ssh", {"^(?P<ts>\\w{3} [ \\d]\\d \\d\\d:\\d\\d:\\d\\d) .*Failed password .* from <HOST> "});
  r.threshold = ThresholdConfig{3, 1min, ThresholdConfig::GroupBy::kCapture, "", "host"};
  r.event_time = EventTimeConfig{"ts", "%b %d %H:%M:%S"};
  r.cooldown = 1h;
  const Bound bound({r});
  Recorder rec;
  RuleEngine engine(bound.rules, rec.emit());
  const Clock::time_point t0 = Clock::now();
  for (const char* at : {"Dec 10 06:00:00", "Dec 10 06:10:00", "Dec 10 06:20:00"}) {
    const std::string line = std::string(at) + " host sshd[1]: Failed password for root from 10.0.0.1 port 1 ssh2";
    engine.line("auth.log", line, bound.scan(line), t0);
  }
  EXPECT_TRUE(rec.alerts.empty());
  for (const char* at : {"Dec 10 07:00:00", "Dec 10 07:00:20", "Dec 10 07:00:50"}) {
    const std::string line = std::string(at) + " host sshd[1]: Failed password for root from 10.0.0.2 port 1 ssh2";
    engine.line("auth.log", line, bound.scan(line), t0);
  }
  ASSERT_EQ(rec.alerts.size(), 1u);
  EXPECT_EQ(rec.alerts[0].group, "10.0.0.2");
  const std::string starts = rfc3339(rec.alerts[0].starts_at);
  EXPECT_EQ(starts.substr(4), "-12-10T07:00:50.000Z") << starts;
}

// A regex without a factor is asked about every line, including lines without any
// occurrence; an invert regex rule matches the lines its regex does not.
TEST(RuleEngine, RegexWithoutFactorAndInvertRegexRules) {
  RuleConfig digits = regex_rule("digits", {"^[0-9]+$"});
  RuleConfig invert = regex_rule("no-error", {"error [0-9]+"});
  invert.invert = true;
  RuleConfig ere = regex_rule("ere", {"(disk|fan) (full|stopped)"});
  ere.syntax = regex::Syntax::kExtended;
  const Bound bound({digits, invert, ere});
  Recorder rec;
  RuleEngine engine(bound.rules, rec.emit());
  const Clock::time_point t0 = Clock::now();
  for (const std::string line : {"12345", "error 5", "error x", "fan stopped", "disk stopped now"})
    engine.line("s", line, bound.scan(line), t0);
  EXPECT_EQ(engine.matches("digits"), 1u);
  EXPECT_EQ(engine.matches("no-error"), 4u);
  EXPECT_EQ(engine.matches("ere"), 2u);
}

}  // namespace
