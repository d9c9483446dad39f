// gpufilterd's alert outputs against real receivers: alert_json() and rfc3339() parsed
// back with nlohmann::json field by field (quotes, control bytes, invalid UTF-8); JSON
// lines appended to a real file; the Alertmanager v2 payload (labels, annotations,
// startsAt/endsAt, generatorURL, the line cut at 1024 bytes), its batching and its
// periodic re-send of active alerts until they resolve; the webhook body and bearer token;
// keep-alive and reconnection; retry with backoff on 500/429, a receiver that comes up
// late, a 4xx that is not retried; the bounded queue dropping its oldest alerts; publish()
// not waiting for a hung receiver; drain() and the destructor keeping their deadlines.
// Every HTTP exchange goes through HttpReceiver, a Beast server on 127.0.0.1.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpufilter/daemon/alert.hpp"
#include "gpufilter/daemon/outputs.hpp"
#include "gpufilter/core/errors.hpp"
#include "http_receiver.hpp"
#include "testutil/running_gpufilter.hpp"
#include "testutil/testutil.hpp"

namespace gpufilter::daemon {
namespace {

using Json = nlohmann::json;
using Steady = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;
using test::HttpReceiver;
using test::ReceivedRequest;

// ---------------------------------------------------------------------------------------
// The harness

SystemClock::time_point at(int y, unsigned mo, unsigned d, int h, int mi, int s, int ms) {
  using namespace std::chrono;
  return sys_days{year{y} / month{mo} / day{d}} + hours(h) + minutes(mi) + seconds(s) + milliseconds(ms);
}

SystemClock::time_point parse_rfc3339(const std::string& text) {
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0, ms = 0;
  char zone = 0;
  const int got = std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%3d%c", &y, &mo, &d, &h, &mi, &s, &ms, &zone);
  EXPECT_EQ(got, 8) << text;
  EXPECT_EQ(zone, 'Z') << text;
  return at(y, static_cast<unsigned>(mo), static_cast<unsigned>(d), h, mi, s, ms);
}

Alert make_alert(const std::string& rule, Alert::State state = Alert::State::kFiring) {
  Alert a;
  a.state = state;
  a.rule = rule;
  a.severity = "critical";
  a.group = "auth.log";
  a.labels = {{"alertname", rule}, {"severity", "critical"}, {"group", "auth.log"}, {"team", "ops"}};
  a.annotations = {{"summary", "too many failures for " + rule}};
  a.source = "/var/log/auth.log";
  a.line = "Failed password for root from 10.0.0.1";
  a.matches = 7;
  a.suppressed = 2;
  a.starts_at = at(2026, 11, 21, 9, 58, 4, 123);
  if (state == Alert::State::kResolved) a.ends_at = at(2026, 11, 21, 10, 3, 4, 456);
  a.fingerprint = "fp-" + rule;
  return a;
}

QueueConfig quick_queue(std::size_t capacity = 10000) {
  QueueConfig q;
  q.capacity = capacity;
  q.initial_backoff = milliseconds(20);
  q.max_backoff = milliseconds(100);
  return q;
}

// A port on 127.0.0.1 that nothing listens on (a receiver bound it, then let it go).
std::uint16_t free_port() {
  HttpReceiver probe;
  const std::uint16_t port = probe.port();
  probe.stop();
  return port;
}

bool eventually(const std::function<bool()>& done, milliseconds timeout = milliseconds(10000)) {
  const auto deadline = Steady::now() + timeout;
  while (!done()) {
    if (Steady::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(2));
  }
  return true;
}

// Waits for the end of a failed attempt that starts after this call or was under way at it,
// so that no attempt begun before the receiver came up can still succeed.
bool next_failure(const AlertOutput& out) {
  const std::uint64_t before = out.stats().failures;
  return eventually([&] { return out.stats().failures > before; });
}

std::unique_ptr<AlertOutput> webhook(const std::string& url, QueueConfig queue = quick_queue(),
                                     const std::string& token = "") {
  WebhookConfig c;
  c.url = url;
  c.bearer_token = token;
  c.timeout = milliseconds(5000);
  c.queue = queue;
  return make_webhook_output("hook", c);
}

std::unique_ptr<AlertOutput> alertmanager(const std::string& url, milliseconds resend = milliseconds(60000),
                                          QueueConfig queue = quick_queue()) {
  AlertmanagerConfig c;
  c.url = url;
  c.resend_interval = resend;
  c.timeout = milliseconds(5000);
  c.generator_url = "http://gpufilterd.example:9464/";
  c.queue = queue;
  return make_alertmanager_output("am", c);
}

// The alertnames in an Alertmanager request, in order.
std::vector<std::string> alertnames(const ReceivedRequest& r) {
  std::vector<std::string> out;
  for (const Json& a : Json::parse(r.body)) out.push_back(a["labels"]["alertname"].get<std::string>());
  return out;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// The JSON object for `name` in an Alertmanager request body.
Json find_alert(const ReceivedRequest& r, const std::string& name) {
  for (const Json& a : Json::parse(r.body)) {
    if (a["labels"]["alertname"] == name) return a;
  }
  return Json();
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          (name + "-" + std::to_string(::getpid()) + "-" + std::to_string(Steady::now().time_since_epoch().count())))
      .string();
}

// ---------------------------------------------------------------------------------------
// alert_json, json_quote, rfc3339

TEST(Rfc3339, UtcWithMilliseconds) {
  EXPECT_EQ(rfc3339(SystemClock::time_point{}), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(rfc3339(at(2026, 11, 21, 9, 58, 4, 123)), "2026-11-21T09:58:04.123Z");
  // Sub-millisecond parts are cut, not rounded (a time never moves into the next second).
  EXPECT_EQ(rfc3339(at(2024, 2, 29, 23, 59, 59, 999) + std::chrono::microseconds(999)), "2024-02-29T23:59:59.999Z");
  EXPECT_EQ(rfc3339(SystemClock::time_point{} - milliseconds(1)), "1969-12-31T23:59:59.999Z");
  const auto now = SystemClock::now();
  const std::string text = rfc3339(now);
  EXPECT_EQ(text.size(), 24u) << text;
  const auto back = parse_rfc3339(text);
  EXPECT_LE(back, now);
  EXPECT_GT(back + milliseconds(1), now);
}

TEST(AlertJson, EveryFieldParsesBack) {
  Alert a = make_alert("ssh-bruteforce");
  a.group = "10.0.0.1";
  a.labels["quote\"key"] = "back\\slash";
  a.annotations["runbook"] = "https://wiki/ssh?x=1&y=\"2\"";
  a.source = "tcp://127.0.0.1:5140";
  // Quotes, a backslash, control bytes, valid multi-byte UTF-8 and invalid bytes.
  a.line = std::string("say \"hi\"\\ tab\there\x01\x1f nul") + '\0' + "end é€😀 bad\xff\xfe cut\xe2\x82";
  a.matches = 18446744073709551615ull;
  a.suppressed = 0;
  const std::string text = alert_json(a);
  EXPECT_EQ(text.find('\n'), std::string::npos);
  const Json j = Json::parse(text);  // throws on invalid JSON or invalid UTF-8
  EXPECT_EQ(j.size(), 12u) << text;  // no ends_at while firing
  EXPECT_EQ(j["state"], "firing");
  EXPECT_EQ(j["rule"], "ssh-bruteforce");
  EXPECT_EQ(j["severity"], "critical");
  EXPECT_EQ(j["group"], "10.0.0.1");
  EXPECT_EQ(j["labels"], Json(a.labels));
  EXPECT_EQ(j["annotations"], Json(a.annotations));
  EXPECT_EQ(j["source"], "tcp://127.0.0.1:5140");
  const std::string expected_line = std::string("say \"hi\"\\ tab\there\x01\x1f nul") + '\0' +
                                    "end é€😀 bad\xEF\xBF\xBD\xEF\xBF\xBD cut\xEF\xBF\xBD\xEF\xBF\xBD";
  EXPECT_EQ(j["line"].get<std::string>(), expected_line);
  EXPECT_TRUE(j["matches"].is_number_unsigned());
  EXPECT_EQ(j["matches"].get<std::uint64_t>(), 18446744073709551615ull);
  EXPECT_EQ(j["suppressed"].get<std::uint64_t>(), 0u);
  EXPECT_EQ(j["starts_at"], "2026-11-21T09:58:04.123Z");
  EXPECT_FALSE(j.contains("ends_at"));
  EXPECT_EQ(j["fingerprint"], "fp-ssh-bruteforce");
  // The documented order of the fields, for people reading the lines.
  const std::vector<std::string> order = {"state", "rule", "severity", "group", "labels", "annotations", "source",
                                          "line", "matches", "suppressed", "starts_at", "fingerprint"};
  std::size_t last = 0;
  for (const std::string& key : order) {
    const std::size_t pos = text.find("\"" + key + "\":");
    ASSERT_NE(pos, std::string::npos) << key;
    EXPECT_GE(pos, last) << key;
    last = pos;
  }
}

TEST(AlertJson, ResolvedCarriesEndsAt) {
  const Alert a = make_alert("disk-full", Alert::State::kResolved);
  const Json j = Json::parse(alert_json(a));
  EXPECT_EQ(j.size(), 13u);
  EXPECT_EQ(j["state"], "resolved");
  EXPECT_EQ(j["starts_at"], "2026-11-21T09:58:04.123Z");
  EXPECT_EQ(j["ends_at"], "2026-11-21T10:03:04.456Z");
}

TEST(JsonQuote, EscapesAndReplacesInvalidUtf8) {
  const auto decoded = [](const std::string& raw) { return Json::parse(json_quote(raw)).get<std::string>(); };
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(json_quote(""), "\"\"");
  EXPECT_EQ(json_quote("a\"b\\c/d"), "\"a\\\"b\\\\c/d\"");
  EXPECT_EQ(json_quote("\n\r\t\b\f\x01\x1f"), "\"\\n\\r\\t\\b\\f\\u0001\\u001f\"");
  EXPECT_EQ(decoded("\x7f"), "\x7f");
  EXPECT_EQ(decoded("é€😀"), "é€😀");                          // valid: kept as is
  EXPECT_EQ(decoded("\xff"), fffd);                            // never valid
  EXPECT_EQ(decoded("\xc0\xaf"), fffd + fffd);                 // overlong '/'
  EXPECT_EQ(decoded("\xed\xa0\x80"), fffd + fffd + fffd);      // a UTF-16 surrogate
  EXPECT_EQ(decoded("\xf4\x90\x80\x80"), fffd + fffd + fffd + fffd);  // past U+10FFFF
  EXPECT_EQ(decoded("ok\xe2\x82"), "ok" + fffd + fffd);        // cut short at the end
  EXPECT_EQ(decoded("\x80x"), fffd + "x");                     // a lone continuation byte
}

// ---------------------------------------------------------------------------------------
// JSON lines

TEST(JsonlOutput, AppendsOneParsableLinePerAlert) {
  const std::string path = temp_path("gpufilterd-jsonl");
  { std::ofstream(path) << "{\"existing\":true}\n"; }
  constexpr int kAlerts = 200;
  {
    auto out = make_jsonl_output("", path, quick_queue());
    EXPECT_EQ(out->name(), "jsonl");
    for (int i = 0; i < kAlerts; ++i) {
      Alert a = make_alert("rule-" + std::to_string(i));
      a.line = "line " + std::to_string(i) + " with \"quotes\" and \xff";
      out->publish(a);
    }
    EXPECT_TRUE(out->drain(milliseconds(10000)));
    const OutputStats s = out->stats();
    EXPECT_EQ(s.published, static_cast<std::uint64_t>(kAlerts));
    EXPECT_EQ(s.delivered, static_cast<std::uint64_t>(kAlerts));
    EXPECT_EQ(s.failures, 0u);
    EXPECT_EQ(s.dropped, 0u);
    EXPECT_EQ(s.queued, 0u);
  }
  std::ifstream in(path);
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  EXPECT_EQ(line, "{\"existing\":true}");  // appended, not truncated
  int n = 0;
  while (std::getline(in, line)) {
    const Json j = Json::parse(line);
    EXPECT_EQ(j["rule"], "rule-" + std::to_string(n));
    EXPECT_EQ(j["line"], "line " + std::to_string(n) + " with \"quotes\" and \xEF\xBF\xBD");
    ++n;
  }
  EXPECT_EQ(n, kAlerts);
  std::filesystem::remove(path);
}

// logrotate's default (rename, then a new file) and a removed file: the next alert goes to
// a file at the configured path again, each line exactly once, none lost.
TEST(JsonlOutput, FollowsTheFileWhenItIsRotatedOrRemoved) {
  const std::string path = temp_path("gpufilterd-rotated");
  const auto lines_of = [](const std::string& file) {
    std::vector<std::string> rules;
    std::ifstream in(file);
    for (std::string line; std::getline(in, line);) rules.push_back(Json::parse(line)["rule"].get<std::string>());
    return rules;
  };
  auto out = make_jsonl_output("", path, quick_queue());
  const auto publish = [&](const std::string& rule) {
    out->publish(make_alert(rule));
    const std::uint64_t target = out->stats().published;
    ASSERT_TRUE(eventually([&] { return out->stats().delivered >= target; }));
  };
  publish("a");
  publish("b");
  std::filesystem::rename(path, path + ".1");  // logrotate: rename, then create
  publish("c");
  std::filesystem::remove(path);               // removed by hand
  publish("d");
  publish("e");
  EXPECT_TRUE(out->drain(milliseconds(5000)));
  EXPECT_EQ(lines_of(path + ".1"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(lines_of(path), (std::vector<std::string>{"d", "e"}));
  EXPECT_EQ(out->stats().failures, 0u);
  std::filesystem::remove(path);
  std::filesystem::remove(path + ".1");
}

TEST(JsonlOutput, UnopenableFileIsAConfigErrorNamingIt) {
  const std::string path = "/nonexistent-gpufilterd-dir/alerts.jsonl";
  try {
    make_jsonl_output("file", path);
    FAIL() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

// A write that fails (a full disk) is retried, and why is kept for the log line and the
// metrics (it was empty: `error=""`).
TEST(JsonlOutput, AFailedWriteSaysWhy) {
  auto out = make_jsonl_output("full", "/dev/full", quick_queue());
  out->publish(make_alert("A"));
  ASSERT_TRUE(eventually([&] { return out->stats().failures >= 1; }));
  EXPECT_EQ(out->stats().last_error, "/dev/full: No space left on device");
}

// ---------------------------------------------------------------------------------------
// URLs

// User information is hidden wherever it could end (a password may hold '/', '#', '@'); a
// URL without it, or without an authority, is printed as written.
TEST(OutputUrl, RedactHidesUserInformation) {
  EXPECT_EQ(redact_url("http://ops:S3cret@host:9093"), "http://ops:***@host:9093");
  EXPECT_EQ(redact_url("http://TOKEN@host/x"), "http://***@host/x");
  EXPECT_EQ(redact_url("http://ops:a/b#c@d@host/p?q=e@f"), "http://ops:***@host/p?q=e@f");
  EXPECT_EQ(redact_url("tcp://u:p@127.0.0.1:5140"), "tcp://u:***@127.0.0.1:5140");
  EXPECT_EQ(redact_url("http://host:9093/p?mail=a@b"), "http://host:9093/p?mail=a@b");
  EXPECT_EQ(redact_url("unix:/run/a@b.sock"), "unix:/run/a@b.sock");
}

TEST(OutputUrl, OnlyHttpOrHttpsWithAHostIsAccepted) {
  for (const std::string bad : {"https://", "ftp://127.0.0.1/", "127.0.0.1:9093", "http://",
                                "http://:9093/", "http://host:0/", "http://host:65536/", "http://host:12ab/",
                                "http://host:/", "http://user:pw@host/", "http://ho st/", "http://[::1/", ""}) {
    SCOPED_TRACE(bad);
    try {
      webhook(bad);
      ADD_FAILURE() << "webhook accepted it";
    } catch (const ConfigError& e) {
      // Quoted with any password hidden (redact_url).
      EXPECT_NE(std::string(e.what()).find("URL \"" + redact_url(bad) + "\": "), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find(":pw@"), std::string::npos) << e.what();
    }
    EXPECT_THROW(alertmanager(bad), ConfigError);
  }
  // Accepted (nothing is published, so nothing is sent).
  EXPECT_NO_THROW(webhook("http://127.0.0.1"));
  EXPECT_NO_THROW(webhook("HTTP://localhost:8080/hook?x=1#frag"));
  EXPECT_NO_THROW(alertmanager("http://[::1]:9093/"));
  EXPECT_NO_THROW(webhook("https://127.0.0.1:9093/hook"));  // TLS, the system's CAs
  EXPECT_NO_THROW(alertmanager("HTTPS://[::1]/"));
  EXPECT_EQ(webhook("http://127.0.0.1")->name(), "hook");
  EXPECT_EQ(make_webhook_output("", WebhookConfig{"http://127.0.0.1/", "", milliseconds(100), {}, {}, {}})->name(), "webhook");
}

// ---------------------------------------------------------------------------------------
// Alertmanager

TEST(AlertmanagerOutput, PostsTheV2Payload) {
  HttpReceiver receiver;
  auto out = alertmanager(receiver.url() + "/am/", milliseconds(60000));
  Alert firing = make_alert("ssh-bruteforce");
  // 1023 bytes, then a 2-byte character across the 1024-byte limit: the cut keeps it whole.
  firing.line = std::string(1023, 'a') + "é" + std::string(2000, 'b');
  const auto before = SystemClock::now();
  out->publish(firing);
  ASSERT_TRUE(receiver.wait_for_count(1, seconds(10)));
  const auto after = SystemClock::now();

  ReceivedRequest r = receiver.requests()[0];
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.target, "/am/api/v2/alerts");
  EXPECT_EQ(r.header("Content-Type"), "application/json");
  EXPECT_EQ(r.header("User-Agent"), "gpufilterd");
  EXPECT_EQ(r.header("Host"), "127.0.0.1:" + std::to_string(receiver.port()));
  EXPECT_FALSE(r.has_header("Authorization"));
  Json body = Json::parse(r.body);
  ASSERT_TRUE(body.is_array());
  ASSERT_EQ(body.size(), 1u);
  Json a = body[0];
  EXPECT_EQ(a.size(), 5u) << a.dump();
  EXPECT_EQ(a["labels"], Json(firing.labels));
  EXPECT_EQ(a["annotations"]["summary"], "too many failures for ssh-bruteforce");
  EXPECT_EQ(a["annotations"]["source"], "/var/log/auth.log");
  EXPECT_EQ(a["annotations"]["line"], std::string(1023, 'a'));
  EXPECT_EQ(a["annotations"]["matches"], "7");
  EXPECT_EQ(a["annotations"]["suppressed"], "2");
  EXPECT_EQ(a["annotations"].size(), 5u);
  EXPECT_EQ(a["startsAt"], "2026-11-21T09:58:04.123Z");
  // Firing: endsAt = now + 4 x resend_interval, so that Alertmanager resolves it by itself
  // if gpufilterd stops re-sending.
  const auto ends = parse_rfc3339(a["endsAt"].get<std::string>());
  EXPECT_GE(ends + milliseconds(1), before + 4 * milliseconds(60000));
  EXPECT_LE(ends, after + 4 * milliseconds(60000));
  EXPECT_EQ(a["generatorURL"], "http://gpufilterd.example:9464/");

  Alert resolved = make_alert("ssh-bruteforce", Alert::State::kResolved);
  resolved.line = std::string(3000, 'x');
  out->publish(resolved);
  ASSERT_TRUE(receiver.wait_for_count(2, seconds(10)));
  r = receiver.requests()[1];
  body = Json::parse(r.body);
  ASSERT_EQ(body.size(), 1u);
  a = body[0];
  EXPECT_EQ(a["endsAt"], "2026-11-21T10:03:04.456Z");  // resolved: its own end
  EXPECT_EQ(a["annotations"]["line"], std::string(1024, 'x'));
  EXPECT_TRUE(out->drain(seconds(5)));
  EXPECT_EQ(out->stats().delivered, 2u);
  EXPECT_EQ(out->stats().failures, 0u);
}

TEST(AlertmanagerOutput, BatchesWhatQueuedWhileTheReceiverWasDown) {
  const std::uint16_t port = free_port();
  auto out = alertmanager("http://127.0.0.1:" + std::to_string(port));
  for (int i = 0; i < 100; ++i) out->publish(make_alert("rule-" + std::to_string(i)));
  ASSERT_TRUE(next_failure(*out));
  HttpReceiver receiver(port);
  ASSERT_TRUE(eventually([&] { return out->stats().delivered == 100; }));
  const auto requests = receiver.requests();
  ASSERT_EQ(requests.size(), 2u);  // 64 + 36: at most 64 alerts per POST
  std::vector<std::string> names = alertnames(requests[0]);
  EXPECT_EQ(names.size(), 64u);
  const std::vector<std::string> second = alertnames(requests[1]);
  EXPECT_EQ(second.size(), 36u);
  names.insert(names.end(), second.begin(), second.end());
  for (int i = 0; i < 100; ++i) EXPECT_EQ(names[static_cast<std::size_t>(i)], "rule-" + std::to_string(i));
  EXPECT_EQ(out->stats().dropped, 0u);
}

TEST(AlertmanagerOutput, ResendsActiveAlertsUntilResolved) {
  HttpReceiver receiver;
  const milliseconds resend(200);
  auto out = alertmanager(receiver.url(), resend);
  out->publish(make_alert("A"));
  out->publish(make_alert("B"));
  // The first POSTs deliver the queue (A and B together, or one each); after them come
  // the periodic re-sends, each with both alerts in one POST.
  const auto both = [](const ReceivedRequest& r) {
    const auto names = alertnames(r);
    return names.size() == 2 && contains(names, "A") && contains(names, "B");
  };
  const auto resends_in = [&](const std::vector<ReceivedRequest>& rs) {
    std::vector<ReceivedRequest> found;
    std::size_t i = 0;
    while (i < rs.size() && !contains(alertnames(rs[i]), "B")) ++i;
    for (++i; i < rs.size(); ++i) {
      if (both(rs[i])) found.push_back(rs[i]);
    }
    return found;
  };
  ASSERT_TRUE(receiver.wait_for([&](const std::vector<ReceivedRequest>& rs) { return resends_in(rs).size() >= 3; },
                                seconds(10)));
  const std::vector<ReceivedRequest> resends = resends_in(receiver.requests());
  for (std::size_t i = 1; i < resends.size(); ++i) {
    EXPECT_GE(resends[i].received - resends[i - 1].received, resend - milliseconds(50));  // arrival jitter
    // A fresh endsAt each time.
    EXPECT_GT(parse_rfc3339(find_alert(resends[i], "A")["endsAt"]),
              parse_rfc3339(find_alert(resends[i - 1], "A")["endsAt"]));
  }

  out->publish(make_alert("A", Alert::State::kResolved));
  const auto resolved_a = [](const ReceivedRequest& r) {
    const Json a = find_alert(r, "A");
    return !a.is_null() && a["endsAt"] == "2026-11-21T10:03:04.456Z";
  };
  ASSERT_TRUE(receiver.wait_for(
      [&](const std::vector<ReceivedRequest>& v) { return std::any_of(v.begin(), v.end(), resolved_a); },
      seconds(10)));
  const std::size_t a_resolved_at = receiver.count();
  std::this_thread::sleep_for(resend * 4);
  const std::vector<ReceivedRequest> rs = receiver.requests();
  std::size_t after = 0;
  for (std::size_t i = a_resolved_at; i < rs.size(); ++i) {
    const auto names = alertnames(rs[i]);
    EXPECT_FALSE(contains(names, "A")) << rs[i].body;  // resolved: never sent again
    EXPECT_TRUE(contains(names, "B"));
    ++after;
  }
  EXPECT_GE(after, 2u);  // B still active and re-sent

  out->publish(make_alert("B", Alert::State::kResolved));
  ASSERT_TRUE(receiver.wait_for(
      [&](const std::vector<ReceivedRequest>& v) {
        const Json b = find_alert(v.back(), "B");
        return !b.is_null() && b["endsAt"] == "2026-11-21T10:03:04.456Z";
      },
      seconds(10)));
  const std::size_t quiet_from = receiver.count();
  std::this_thread::sleep_for(resend * 4);
  EXPECT_EQ(receiver.count(), quiet_from);  // nothing active, nothing re-sent
  EXPECT_EQ(out->stats().failures, 0u);
}

TEST(AlertmanagerOutput, AFiringAlertDroppedByTheFullQueueIsStillResent) {
  const std::uint16_t port = free_port();
  auto out = alertmanager("http://127.0.0.1:" + std::to_string(port), milliseconds(200), quick_queue(1));
  out->publish(make_alert("A"));
  out->publish(make_alert("B"));  // the queue holds one: A is dropped
  ASSERT_TRUE(next_failure(*out));
  HttpReceiver receiver(port);
  ASSERT_TRUE(receiver.wait_for(
      [](const std::vector<ReceivedRequest>& v) {
        return std::any_of(v.begin(), v.end(), [](const ReceivedRequest& r) { return contains(alertnames(r), "A"); });
      },
      seconds(10)));
  EXPECT_EQ(out->stats().dropped, 1u);
}

TEST(AlertmanagerOutput, A4xxDropsTheBatchWithoutRetrying) {
  HttpReceiver receiver;
  receiver.set_status(400);
  auto out = alertmanager(receiver.url(), milliseconds(60000));
  out->publish(make_alert("A"));
  ASSERT_TRUE(eventually([&] { return out->stats().queued == 0; }));
  std::this_thread::sleep_for(milliseconds(300));  // many backoffs' worth
  EXPECT_EQ(receiver.count(), 1u);
  EXPECT_EQ(out->stats().failures, 1u);
  EXPECT_EQ(out->stats().delivered, 0u);
  EXPECT_EQ(out->stats().rejected, 1u);  // the lost alert is counted, not only the attempt
}

TEST(AlertmanagerOutput, TooManyRequestsIsRetried) {
  HttpReceiver receiver;
  receiver.fail_next(2, 429);
  auto out = alertmanager(receiver.url());
  out->publish(make_alert("A"));
  ASSERT_TRUE(eventually([&] { return out->stats().delivered == 1; }));
  EXPECT_EQ(out->stats().failures, 2u);
  EXPECT_EQ(receiver.count(), 3u);
}

// ---------------------------------------------------------------------------------------
// Webhook

TEST(WebhookOutput, PostsTheAlertJsonWithTheBearerToken) {
  HttpReceiver receiver;
  auto out = webhook(receiver.url() + "/hooks/gpufilter?team=ops", quick_queue(), "s3cret-token");
  Alert a = make_alert("ssh-bruteforce");
  a.line = "bad \xff byte";
  out->publish(a);
  ASSERT_TRUE(receiver.wait_for_count(1, seconds(10)));
  const ReceivedRequest r = receiver.requests()[0];
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.target, "/hooks/gpufilter?team=ops");
  EXPECT_EQ(r.header("authorization"), "Bearer s3cret-token");
  EXPECT_EQ(r.header("content-type"), "application/json");
  EXPECT_EQ(r.header("user-agent"), "gpufilterd");
  EXPECT_EQ(r.header("host"), "127.0.0.1:" + std::to_string(receiver.port()));
  EXPECT_EQ(r.body, alert_json(a));
  EXPECT_EQ(Json::parse(r.body)["line"], "bad \xEF\xBF\xBD byte");

  auto anonymous = webhook(receiver.url() + "/open");
  anonymous->publish(a);
  ASSERT_TRUE(receiver.wait_for_count(2, seconds(10)));
  EXPECT_FALSE(receiver.requests()[1].has_header("Authorization"));
  EXPECT_EQ(receiver.requests()[1].target, "/open");
}

TEST(WebhookOutput, KeepsTheConnectionAliveAndHonoursClose) {
  HttpReceiver receiver;
  auto out = webhook(receiver.url() + "/hook");
  for (int i = 0; i < 5; ++i) {
    out->publish(make_alert("keep-" + std::to_string(i)));
    ASSERT_TRUE(receiver.wait_for_count(static_cast<std::size_t>(i) + 1, seconds(10)));
  }
  receiver.set_keep_alive(false);
  for (int i = 0; i < 3; ++i) {
    out->publish(make_alert("close-" + std::to_string(i)));
    ASSERT_TRUE(receiver.wait_for_count(static_cast<std::size_t>(i) + 6, seconds(10)));
  }
  const auto rs = receiver.requests();
  for (int i = 1; i < 6; ++i) EXPECT_EQ(rs[static_cast<std::size_t>(i)].connection, rs[0].connection);
  // The 5th answer said "Connection: close": every request from then on has its own.
  EXPECT_NE(rs[6].connection, rs[5].connection);
  EXPECT_NE(rs[7].connection, rs[6].connection);
  ASSERT_TRUE(eventually([&] { return out->stats().delivered == 8; }));
  EXPECT_EQ(out->stats().failures, 0u);
}

TEST(WebhookOutput, AConnectionTheReceiverClosedIsReplacedWithoutAFailure) {
  auto first = std::make_unique<HttpReceiver>();
  const std::uint16_t port = first->port();
  auto out = webhook(first->url() + "/hook");
  out->publish(make_alert("before"));
  ASSERT_TRUE(first->wait_for_count(1, seconds(10)));
  ASSERT_TRUE(eventually([&] { return out->stats().delivered == 1; }));
  first->stop();  // closes the kept-alive connection under the output
  HttpReceiver second(port);
  out->publish(make_alert("after"));
  ASSERT_TRUE(second.wait_for_count(1, seconds(10)));
  EXPECT_EQ(Json::parse(second.requests()[0].body)["rule"], "after");
  ASSERT_TRUE(eventually([&] { return out->stats().delivered == 2; }));
  EXPECT_EQ(out->stats().failures, 0u);
}

// ---------------------------------------------------------------------------------------
// Retries

TEST(Retry, FailedRequestsAreRetriedWithDoublingBackoff) {
  HttpReceiver receiver;
  receiver.fail_next(3, 500);
  QueueConfig q;
  q.initial_backoff = milliseconds(50);
  q.max_backoff = milliseconds(1000);
  auto out = webhook(receiver.url() + "/hook", q);
  out->publish(make_alert("flaky"));
  ASSERT_TRUE(receiver.wait_for_count(4, seconds(10)));
  ASSERT_TRUE(eventually([&] { return out->stats().delivered == 1; }));
  const auto rs = receiver.requests();
  EXPECT_EQ(rs.size(), 4u);
  EXPECT_EQ(rs[0].status, 500u);
  EXPECT_EQ(rs[1].status, 500u);
  EXPECT_EQ(rs[2].status, 500u);
  EXPECT_EQ(rs[3].status, 200u);
  for (const ReceivedRequest& r : rs) EXPECT_EQ(r.body, rs[0].body);  // the same alert each time
  // The waits double: 50, 100, 200 ms (lower bounds: a busy machine only adds).
  EXPECT_GE(rs[1].received - rs[0].received, milliseconds(50));
  EXPECT_GE(rs[2].received - rs[1].received, milliseconds(100));
  EXPECT_GE(rs[3].received - rs[2].received, milliseconds(200));
  const OutputStats s = out->stats();
  EXPECT_EQ(s.failures, 3u);
  EXPECT_EQ(s.delivered, 1u);
  EXPECT_EQ(s.queued, 0u);
}

TEST(Retry, AReceiverThatComesUpLaterGetsTheAlert) {
  const std::uint16_t port = free_port();
  auto out = webhook("http://127.0.0.1:" + std::to_string(port) + "/late");
  out->publish(make_alert("early"));
  ASSERT_TRUE(eventually([&] { return out->stats().failures >= 2; }));  // connection refused
  HttpReceiver receiver(port);
  ASSERT_TRUE(receiver.wait_for_count(1, seconds(10)));
  EXPECT_EQ(Json::parse(receiver.requests()[0].body)["rule"], "early");
  ASSERT_TRUE(eventually([&] { return out->stats().delivered == 1; }));
  EXPECT_EQ(out->stats().queued, 0u);
}

TEST(Retry, A4xxIsNotRetried) {
  HttpReceiver receiver;
  receiver.fail_next(1, 404);
  auto out = webhook(receiver.url() + "/hook");
  out->publish(make_alert("refused"));
  out->publish(make_alert("accepted"));
  ASSERT_TRUE(receiver.wait_for_count(2, seconds(10)));
  ASSERT_TRUE(eventually([&] { return out->stats().queued == 0; }));
  std::this_thread::sleep_for(milliseconds(300));
  const auto rs = receiver.requests();
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(Json::parse(rs[0].body)["rule"], "refused");
  EXPECT_EQ(rs[0].status, 404u);
  EXPECT_EQ(Json::parse(rs[1].body)["rule"], "accepted");
  EXPECT_EQ(out->stats().failures, 1u);
  EXPECT_EQ(out->stats().delivered, 1u);
  EXPECT_EQ(out->stats().rejected, 1u);
  EXPECT_EQ(out->stats().dropped, 0u);
}

// ---------------------------------------------------------------------------------------
// The queue

TEST(Queue, AFullQueueDropsTheOldest) {
  const std::uint16_t port = free_port();
  auto out = webhook("http://127.0.0.1:" + std::to_string(port) + "/hook", quick_queue(5));
  for (int i = 0; i < 20; ++i) out->publish(make_alert("rule-" + std::to_string(i)));
  ASSERT_TRUE(next_failure(*out));
  HttpReceiver receiver(port);
  EXPECT_TRUE(out->drain(seconds(10)));
  const OutputStats s = out->stats();
  EXPECT_EQ(s.published, 20u);
  EXPECT_EQ(s.dropped, 15u);
  EXPECT_EQ(s.delivered, 5u);
  EXPECT_EQ(s.queued, 0u);
  const auto rs = receiver.requests();
  ASSERT_EQ(rs.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(Json::parse(rs[static_cast<std::size_t>(i)].body)["rule"], "rule-" + std::to_string(15 + i));
  }
}

TEST(Queue, ASlowReceiverLosesOnlyWhatIsCountedDropped) {
  HttpReceiver receiver;
  receiver.set_delay(milliseconds(300));
  auto out = webhook(receiver.url() + "/hook", quick_queue(5));
  for (int i = 0; i < 20; ++i) out->publish(make_alert("rule-" + std::to_string(i)));
  EXPECT_TRUE(out->drain(seconds(20)));
  const OutputStats s = out->stats();
  // An alert pushed out while its request was on the wire counts as delivered when that
  // request succeeds: every alert is delivered or dropped, never both.
  EXPECT_EQ(s.delivered + s.dropped, 20u);
  EXPECT_GE(s.dropped, 14u);
  const auto rs = receiver.requests();
  EXPECT_EQ(rs.size(), s.delivered);
  ASSERT_GE(rs.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(Json::parse(rs[rs.size() - 5 + static_cast<std::size_t>(i)].body)["rule"],
              "rule-" + std::to_string(15 + i));
  }
}

// The webhook down for "minutes", compressed: with a 1-4 ms backoff, hundreds of retry
// cycles against a receiver answering 503 while alerts keep coming, one every ~200 us.
// The queue never holds more than its capacity; every alert pushed out is counted as
// dropped, exactly (docs/ALERTS.md: each published alert ends up delivered, dropped or
// refused, never two); each failed attempt is one 503 request; and once the receiver
// recovers, the newest `capacity` alerts arrive in order, each once.
TEST(Queue, AWebhookDownForMinutesStaysBoundedAndDeliversTheNewestInOrder) {
  constexpr std::size_t kCapacity = 100;
  constexpr int kAlerts = 3000;
  constexpr std::uint64_t kCycles = 400;  // failed attempts before the receiver recovers
  HttpReceiver receiver;
  receiver.set_status(503);
  QueueConfig q;
  q.capacity = kCapacity;
  q.initial_backoff = milliseconds(1);
  q.max_backoff = milliseconds(4);
  auto out = webhook(receiver.url() + "/hook", q);
  std::atomic<bool> publishing{true};
  std::thread publisher([&] {
    for (int i = 0; i < kAlerts; ++i) {
      out->publish(make_alert("rule-" + std::to_string(i)));
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    publishing = false;
  });
  std::size_t most_queued = 0;
  std::uint64_t samples = 0;
  const auto deadline = Steady::now() + seconds(60);
  while ((publishing.load() || out->stats().failures < kCycles) && Steady::now() < deadline) {
    const OutputStats s = out->stats();
    most_queued = std::max<std::size_t>(most_queued, s.queued);
    ASSERT_LE(s.queued, kCapacity);
    // Nothing is lost unaccounted: every alert is queued (on the wire included) or
    // dropped, but for at most one pushed out of the request on the wire, which is counted
    // when that attempt ends.
    ASSERT_EQ(s.delivered, 0u);
    ASSERT_GE(s.queued + s.dropped + 1, s.published);
    ++samples;
    std::this_thread::sleep_for(milliseconds(1));
  }
  publisher.join();
  ASSERT_GE(out->stats().failures, kCycles);
  EXPECT_EQ(most_queued, kCapacity);
  // The attempt on the wire when publishing stopped ends, counting what it displaced.
  ASSERT_TRUE(eventually([&] { return out->stats().dropped == kAlerts - kCapacity; })) << out->stats().dropped;
  const std::uint64_t failures = out->stats().failures;
  receiver.set_status(200);
  ASSERT_TRUE(out->drain(seconds(20)));
  const OutputStats s = out->stats();
  EXPECT_EQ(s.published, static_cast<std::uint64_t>(kAlerts));
  EXPECT_EQ(s.delivered, kCapacity);
  EXPECT_EQ(s.dropped, kAlerts - kCapacity);
  EXPECT_EQ(s.queued, 0u);
  EXPECT_LE(s.failures - failures, 1u);  // at most the attempt under way when it recovered
  std::vector<std::string> delivered;
  std::uint64_t refused = 0;
  for (const ReceivedRequest& r : receiver.requests()) {
    if (r.status == 503) {
      ++refused;
    } else {
      EXPECT_EQ(r.status, 200u);
      delivered.push_back(Json::parse(r.body)["rule"].get<std::string>());
    }
  }
  EXPECT_EQ(refused, s.failures);  // each failure is one request answered 503, no more
  ASSERT_EQ(delivered.size(), kCapacity);
  for (std::size_t i = 0; i < kCapacity; ++i) {
    EXPECT_EQ(delivered[i], "rule-" + std::to_string(kAlerts - kCapacity + i));
  }
  std::printf("webhook down: %llu failed attempts (%llu queue samples), %d published, %llu dropped, %llu delivered\n",
              static_cast<unsigned long long>(s.failures), static_cast<unsigned long long>(samples), kAlerts,
              static_cast<unsigned long long>(s.dropped), static_cast<unsigned long long>(s.delivered));
}

TEST(Queue, PublishNeverWaitsForTheNetwork) {
  HttpReceiver receiver;
  receiver.set_delay(seconds(5));  // hung
  WebhookConfig c;
  c.url = receiver.url() + "/hook";
  c.timeout = seconds(10);
  c.queue = quick_queue();
  auto out = make_webhook_output("hung", c);
  out->publish(make_alert("first"));
  ASSERT_TRUE(receiver.wait_for_count(1, seconds(10)));  // the delivery thread now waits
  const Alert a = make_alert("more");
  const auto start = Steady::now();
  for (int i = 0; i < 1000; ++i) out->publish(a);
  const auto took = Steady::now() - start;
  // Typically ~1 ms; the bound only has to be far below the receiver's 5 s.
  EXPECT_LT(took, milliseconds(100)) << std::chrono::duration_cast<std::chrono::microseconds>(took).count() << " us";
  EXPECT_EQ(out->stats().queued, 1001u);
  // drain() cuts the hung request at its own deadline, not the request's 10 s timeout.
  const auto drain_start = Steady::now();
  EXPECT_FALSE(out->drain(milliseconds(200)));
  EXPECT_LT(Steady::now() - drain_start, milliseconds(2000));
  EXPECT_EQ(out->stats().queued, 1001u);
}

// ---------------------------------------------------------------------------------------
// drain() and the destructor

TEST(Drain, DeliversEverythingQueued) {
  HttpReceiver receiver;
  auto out = webhook(receiver.url() + "/hook");
  for (int i = 0; i < 50; ++i) out->publish(make_alert("rule-" + std::to_string(i)));
  EXPECT_TRUE(out->drain(seconds(10)));
  EXPECT_EQ(receiver.count(), 50u);
  EXPECT_EQ(out->stats().delivered, 50u);
  // After drain the thread is gone: a second drain only reports.
  EXPECT_TRUE(out->drain(milliseconds(0)));
}

TEST(Drain, ADeadReceiverReturnsFalseWithinTheTimeout) {
  const std::uint16_t port = free_port();
  QueueConfig q;
  q.initial_backoff = milliseconds(30);
  q.max_backoff = milliseconds(60);
  auto out = webhook("http://127.0.0.1:" + std::to_string(port) + "/hook", q);
  out->publish(make_alert("stuck"));
  const auto start = Steady::now();
  EXPECT_FALSE(out->drain(milliseconds(300)));
  const auto took = Steady::now() - start;
  EXPECT_GE(took, milliseconds(299));  // it kept trying until the deadline ...
  EXPECT_LT(took, milliseconds(1500));  // ... and not much longer
  EXPECT_GE(out->stats().failures, 3u);
  EXPECT_EQ(out->stats().queued, 1u);
}

TEST(Drain, NeverSleepsPastTheDeadline) {
  const std::uint16_t port = free_port();
  QueueConfig q;
  q.initial_backoff = seconds(30);
  q.max_backoff = seconds(30);
  auto out = webhook("http://127.0.0.1:" + std::to_string(port) + "/hook", q);
  out->publish(make_alert("stuck"));
  ASSERT_TRUE(eventually([&] { return out->stats().failures == 1; }));  // now in a 30 s backoff
  const auto start = Steady::now();
  EXPECT_FALSE(out->drain(milliseconds(100)));
  EXPECT_LT(Steady::now() - start, milliseconds(1500));
}

TEST(Destructor, StopsAtOnceWithAlertsPendingOrARequestHung) {
  {
    const std::uint16_t port = free_port();
    QueueConfig q;
    q.initial_backoff = seconds(30);
    auto out = webhook("http://127.0.0.1:" + std::to_string(port) + "/hook", q);
    out->publish(make_alert("pending"));
    ASSERT_TRUE(eventually([&] { return out->stats().failures == 1; }));
    const auto start = Steady::now();
    out.reset();
    EXPECT_LT(Steady::now() - start, milliseconds(1000));
  }
  {
    HttpReceiver receiver;
    receiver.set_delay(seconds(10));
    auto out = webhook(receiver.url() + "/hook");
    out->publish(make_alert("hung"));
    ASSERT_TRUE(receiver.wait_for_count(1, seconds(10)));
    const auto start = Steady::now();
    out.reset();
    EXPECT_LT(Steady::now() - start, milliseconds(1000));
  }
}

// A receiver that answers every request with "Content-Length: 2000000000" and then sends
// body bytes for as long as the connection is open. The answer is refused at its header
// (the body limit) every time, retries included: Beast read such a body whole after a
// failed first request, holding what came (170 MB/s, until the request's deadline).
TEST(WebhookOutput, AnEndlessResponseBodyIsRefusedAtItsHeaderEveryTime) {
  std::uint16_t port = 0;
  const int listener = test::tcp_listen_loopback(16, port);
  ASSERT_GE(listener, 0);
  std::atomic<bool> stop{false};
  std::thread server([&] {
    const std::string body(65536, 'z');
    while (!stop) {
      const int c = ::accept(listener, nullptr, nullptr);
      if (c < 0) return;
      std::string request;
      char buffer[4096];
      while (request.find("\r\n\r\n") == std::string::npos) {
        const ssize_t n = ::recv(c, buffer, sizeof buffer, 0);
        if (n <= 0) break;
        request.append(buffer, static_cast<std::size_t>(n));
      }
      const std::string head = "HTTP/1.1 200 OK\r\nContent-Length: 2000000000\r\n\r\n";
      bool open = ::send(c, head.data(), head.size(), MSG_NOSIGNAL) > 0;
      for (int sent = 0; open && !stop && sent < 4096; ++sent)  // 256 MiB at most
        open = ::send(c, body.data(), body.size(), MSG_NOSIGNAL) > 0;
      ::close(c);
    }
  });
  const long before = test::memory_in_use_kib();
  std::atomic<long> peak{before};
  std::atomic<bool> sampling{true};
  std::thread sampler([&] {
    while (sampling) {
      peak = std::max(peak.load(), test::memory_in_use_kib());
      std::this_thread::sleep_for(milliseconds(5));
    }
  });
  auto out = webhook("http://127.0.0.1:" + std::to_string(port) + "/hook", quick_queue());
  const auto first = Steady::now();
  out->publish(make_alert("endless"));
  const bool retried = eventually([&] { return out->stats().failures >= 3; }, seconds(20));
  const auto refused_in = Steady::now() - first;
  sampling = false;
  sampler.join();
  const long growth = peak - before;
  const auto start = Steady::now();
  out.reset();
  const auto took = Steady::now() - start;
  stop = true;
  ::shutdown(listener, SHUT_RDWR);
  ::close(listener);
  server.join();
  EXPECT_TRUE(retried);
  EXPECT_LT(growth, 64 * 1024) << growth << " KiB more at the peak";
  EXPECT_LT(refused_in, milliseconds(3000));  // not at the request's 5 s deadline
  EXPECT_LT(took, milliseconds(2000));
}

// ---------------------------------------------------------------------------------------
// https:// outputs against a real TLS receiver, with the CA and certificates test::pki()
// makes with the openssl command: the receiver's certificate names localhost (a DNS name
// only), a client certificate for mutual TLS, and a second CA that signed nothing of ours.

using test::pki;

test::ReceiverTls server_tls(bool require_client = false) {
  return {pki().server_cert, pki().server_key, require_client ? pki().ca : ""};
}

std::unique_ptr<AlertOutput> tls_webhook(const std::string& url, const TlsConfig& tls) {
  WebhookConfig c;
  c.url = url;
  c.bearer_token = "tls-token";
  c.timeout = milliseconds(5000);
  c.queue = quick_queue();
  c.tls = tls;
  return make_webhook_output("hook", c);
}

std::string localhost_url(const HttpReceiver& r, const std::string& path) {
  return "https://localhost:" + std::to_string(r.port()) + path;
}

TEST(TlsOutput, WebhookAndAlertmanagerOverHttpsWithTheirCa) {
  if (pki().ca.empty()) GTEST_SKIP() << "no openssl command";
  HttpReceiver receiver(0, server_tls());
  EXPECT_EQ(receiver.url().rfind("https://", 0), 0u);
  auto hook = tls_webhook(localhost_url(receiver, "/hook"), TlsConfig{pki().ca, "", "", true});
  hook->publish(make_alert("tls"));
  ASSERT_TRUE(receiver.wait_for_count(1, milliseconds(10000))) << hook->stats().last_error;
  const ReceivedRequest r = receiver.requests().front();
  EXPECT_EQ(r.target, "/hook");
  EXPECT_EQ(r.header("authorization"), "Bearer tls-token");
  EXPECT_EQ(Json::parse(r.body)["rule"], "tls");
  AlertmanagerConfig am;
  am.url = localhost_url(receiver, "");
  am.queue = quick_queue();
  am.tls.ca_file = pki().ca;
  auto out = make_alertmanager_output("am", am);
  out->publish(make_alert("am-tls"));
  ASSERT_TRUE(receiver.wait_for_count(2, milliseconds(10000))) << out->stats().last_error;
  EXPECT_EQ(receiver.requests()[1].target, "/api/v2/alerts");
  EXPECT_TRUE(out->drain(milliseconds(2000)));
  EXPECT_EQ(receiver.failed_handshakes(), 0u);
}

// A receiver whose chain no trusted CA signed, or whose name is not the URL's host, gets
// nothing: each attempt fails at the handshake, is counted, retried, and says why.
TEST(TlsOutput, AnUntrustedOrMisnamedReceiverGetsNothing) {
  if (pki().ca.empty()) GTEST_SKIP() << "no openssl command";
  HttpReceiver receiver(0, server_tls());
  const std::string by_ip = "https://127.0.0.1:" + std::to_string(receiver.port()) + "/hook";
  const std::vector<std::pair<std::string, TlsConfig>> refused = {
      {localhost_url(receiver, "/hook"), TlsConfig{pki().other_ca, "", "", true}},  // another CA
      {localhost_url(receiver, "/hook"), TlsConfig{}},                             // the system's CAs
      {by_ip, TlsConfig{pki().ca, "", "", true}},                                  // 127.0.0.1 is not localhost
  };
  for (const auto& [url, tls] : refused) {
    SCOPED_TRACE(url + " ca_file=" + tls.ca_file);
    auto out = tls_webhook(url, tls);
    out->publish(make_alert("refused"));
    ASSERT_TRUE(eventually([&] { return out->stats().failures >= 2; }));
    EXPECT_EQ(receiver.count(), 0u);
    EXPECT_NE(out->stats().last_error.find("TLS handshake with "), std::string::npos) << out->stats().last_error;
    EXPECT_NE(out->stats().last_error.find("certificate verify failed"), std::string::npos)
        << out->stats().last_error;
  }
  // The name check off (verify_hostname: false): the chain alone is checked, and passes.
  auto out = tls_webhook(by_ip, TlsConfig{pki().ca, "", "", false});
  out->publish(make_alert("unnamed"));
  ASSERT_TRUE(receiver.wait_for_count(1, milliseconds(10000))) << out->stats().last_error;
}

// Mutual TLS: a receiver that requires a client certificate refuses the output without
// one and accepts it with cert_file and key_file.
TEST(TlsOutput, MutualTlsPresentsTheClientCertificate) {
  if (pki().ca.empty()) GTEST_SKIP() << "no openssl command";
  HttpReceiver receiver(0, server_tls(/*require_client=*/true));
  auto without = tls_webhook(localhost_url(receiver, "/hook"), TlsConfig{pki().ca, "", "", true});
  without->publish(make_alert("no-cert"));
  ASSERT_TRUE(eventually([&] { return without->stats().failures >= 1 && receiver.failed_handshakes() >= 1; }));
  EXPECT_EQ(receiver.count(), 0u);
  auto with = tls_webhook(localhost_url(receiver, "/hook"), TlsConfig{pki().ca, pki().client_cert, pki().client_key, true});
  with->publish(make_alert("cert"));
  ASSERT_TRUE(receiver.wait_for_count(1, milliseconds(10000))) << with->stats().last_error;
  EXPECT_EQ(Json::parse(receiver.requests().front().body)["rule"], "cert");
}

TEST(TlsOutput, UnusableFilesAreConfigErrorsNamingThem) {
  if (pki().ca.empty()) GTEST_SKIP() << "no openssl command";
  const std::string url = "https://localhost:1/hook";
  const auto error_of = [&](const TlsConfig& tls) -> std::string {
    try {
      tls_webhook(url, tls);
      return "";
    } catch (const ConfigError& e) {
      return e.what();
    }
  };
  EXPECT_NE(error_of({pki().dir + "/nope.pem", "", "", true}).find("tls: ca_file " + pki().dir + "/nope.pem: No such file"),
            std::string::npos);
  EXPECT_NE(error_of({pki().dir + "/server.ext", "", "", true}).find("not PEM CA certificates"), std::string::npos)
      << error_of({pki().dir + "/server.ext", "", "", true});
  EXPECT_NE(error_of({pki().ca, pki().client_cert, "", true}).find("cert_file and key_file go together"),
            std::string::npos);
  EXPECT_NE(error_of({pki().ca, pki().client_cert, pki().server_key, true}).find("is not the key of cert_file"),
            std::string::npos) << error_of({pki().ca, pki().client_cert, pki().server_key, true});
  EXPECT_EQ(error_of({pki().ca, pki().client_cert, pki().client_key, true}), "");
}

// ---------------------------------------------------------------------------------------
// The test receiver's own client (used by the ops tests)

TEST(HttpReceiverHelper, ClientAndServerAgree) {
  HttpReceiver receiver;
  receiver.fail_next(1, 503);
  const test::HttpResponse failed = test::http_request("PUT", receiver.url() + "/x?y=1", "body", {{"X-Test", "1"}});
  EXPECT_EQ(failed.status, 503u) << failed.error;
  const test::HttpResponse ok = test::http_request("GET", receiver.url() + "/metrics");
  EXPECT_EQ(ok.status, 200u) << ok.error;
  EXPECT_EQ(ok.body, "ok\n");
  EXPECT_EQ(ok.header("connection"), "close");
  const auto rs = receiver.requests();
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[0].method, "PUT");
  EXPECT_EQ(rs[0].target, "/x?y=1");
  EXPECT_EQ(rs[0].body, "body");
  EXPECT_EQ(rs[0].header("x-test"), "1");
  EXPECT_NE(rs[0].connection, rs[1].connection);
  receiver.stop();
  const test::HttpResponse down = test::http_request("GET", receiver.url() + "/", "", {}, milliseconds(2000));
  EXPECT_EQ(down.status, 0u);
  EXPECT_NE(down.error, "");
}

}  // namespace
}  // namespace gpufilter::daemon
