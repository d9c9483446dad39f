// gpufilterd end to end, with real parts: the daemon as a child process, lines through a
// followed file and a TCP socket, a real HTTP receiver standing in for Alertmanager and a
// webhook, the real /metrics page, reloads (SIGHUP and POST /-/reload) under load with
// sequence-numbered lines, an invalid reload, and a restart that resumes from state.
// Security defaults: every socket it listens on is loopback unless an address is given
// (read from /proc), the reload endpoint is off unless enabled, files others may write
// (or swap, through their directory) are refused, and tokens (from a file or the environment) never reach the log, the
// metrics, the alerts or --check, even while deliveries fail. Faults: a webhook down for
// hundreds of retry cycles while alerts keep firing; the OpenCL device failing mid-run.
// Captures: `pcap:` files per packet and per TCP flow against tshark's payloads and
// followed streams, a truncated file, capture mistakes as config errors, and a live
// capture on loopback (when it may capture).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gpufilter/core/errors.hpp"
#include "gpufilter/sources/pcap_reader.hpp"
#include "http_receiver.hpp"
#include "testutil/running_gpufilter.hpp"
#include "testutil/testutil.hpp"

namespace gpufilter::test {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

std::string temp_dir() {
  char pattern[] = "/tmp/gpufilterd-e2e-XXXXXX";
  return ::mkdtemp(pattern);
}

// Mode 0644 whatever the umask: gpufilterd refuses configuration files others may write.
void write_text(const std::string& path, const std::string& text, mode_t mode = 0644) {
  std::ofstream(path, std::ios::binary) << text;
  EXPECT_EQ(::chmod(path.c_str(), mode), 0) << path;
}

void append_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::app) << text;
}

std::vector<json> read_jsonl(const std::string& path) {
  std::vector<json> v;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) v.push_back(json::parse(line));
  return v;
}

// gpufilterd with its stderr (the log) collected as it comes; killed if a test leaves it.
class Daemon {
 public:
  // `closed_stdin`: started with descriptor 0 closed (`<&-`), through a shell that execs it.
  explicit Daemon(const std::string& config, const std::vector<std::string>& env = {}, bool closed_stdin = false) {
    const SpawnedProcess child =
        closed_stdin ? spawn_process({"/bin/sh", "-c", "exec \"$0\" --config \"$1\" <&-", gpufilterd_binary(), config}, env)
                     : spawn_process({gpufilterd_binary(), "--config", config}, env);
    pid_ = child.pid;
    ::close(child.in);
    reader_ = std::thread([this, out = child.out, err = child.err] { collect(out, err); });
  }
  ~Daemon() {
    if (!exited_) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
    reader_.join();
  }
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  std::string log() const {
    std::lock_guard lock(mutex_);
    return err_;
  }
  bool wait_log(const std::string& text, std::chrono::milliseconds limit) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, limit, [&] { return err_.find(text) != std::string::npos; });
  }
  // "127.0.0.1:PORT" of the operations endpoint, from the start-up log line.
  std::string server() {
    EXPECT_TRUE(wait_log("gpufilterd started", 60s)) << log();
    const std::smatch m = search(R"(server=(127\.0\.0\.1:\d+))");
    return m.size() > 1 ? m[1].str() : std::string();
  }
  std::string listening() {
    EXPECT_TRUE(wait_log("msg=listening", 60s)) << log();
    const std::smatch m = search(R"(url=(tcp://127\.0\.0\.1:\d+))");
    return m.size() > 1 ? m[1].str() : std::string();
  }
  void signal(int number) { ::kill(pid_, number); }
  pid_t pid() const { return pid_; }
  std::optional<int> wait_exit(std::chrono::milliseconds limit) {
    const auto deadline = Clock::now() + limit;
    for (;;) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      if (Clock::now() >= deadline) return std::nullopt;
      std::this_thread::sleep_for(5ms);
    }
  }

 private:
  std::smatch search(const std::string& pattern) {
    std::lock_guard lock(mutex_);
    copy_ = err_;
    std::smatch m;
    std::regex_search(copy_, m, std::regex(pattern));
    return m;
  }
  void collect(int out, int err) {
    char buffer[65536];
    bool out_open = true, err_open = true;
    while (out_open || err_open) {
      pollfd fds[2];
      int n = 0;
      if (out_open) fds[n++] = {out, POLLIN, 0};
      if (err_open) fds[n++] = {err, POLLIN, 0};
      if (::poll(fds, static_cast<nfds_t>(n), -1) < 0) continue;
      for (int i = 0; i < n; ++i) {
        if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
        const ssize_t got = ::read(fds[i].fd, buffer, sizeof buffer);
        std::lock_guard lock(mutex_);
        if (got <= 0) (fds[i].fd == out ? out_open : err_open) = false;
        else if (fds[i].fd == err) err_.append(buffer, static_cast<std::size_t>(got));
        changed_.notify_all();
      }
    }
    ::close(out);
    ::close(err);
  }

  pid_t pid_ = -1;
  bool exited_ = false;
  std::thread reader_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::string err_;
  std::string copy_;
};

// The value of one series on a /metrics page ("name{labels}" exactly as rendered).
std::optional<double> metric(const std::string& page, const std::string& series) {
  std::istringstream in(page);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return std::nullopt;
}

// Every line of the /metrics page is a comment or "name{labels} value" with a number.
void expect_well_formed(const std::string& page) {
  std::istringstream in(page);
  std::string line;
  const std::regex sample(R"(^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})? -?[0-9.eE+-]+(Inf)?$)");
  std::size_t samples = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    EXPECT_TRUE(std::regex_match(line, sample)) << "not a sample line: " << line;
    ++samples;
  }
  EXPECT_GT(samples, 10u);
}

class Gpufilterd : public ::testing::Test {
 protected:
  void SetUp() override {
    ::signal(SIGPIPE, SIG_IGN);
    dir_ = temp_dir();
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  std::string dir_;
};

// The OpenSSH sample through a followed file: Alertmanager (a real HTTP receiver) gets
// the brute-force alert of the address with the most failed passwords, with the v2
// schema; /metrics counts every line; SIGTERM ends it with exit status 0.
TEST_F(Gpufilterd, OpenSshSampleReachesAlertmanager) {
  HttpReceiver alertmanager;
  const std::string log = dir_ + "/auth.log";
  write_text(log, "");
  write_text(dir_ + "/gpufilterd.yaml", R"(
sources:
  - follow: auth.log
rules:
  - name: ssh-bruteforce
    patterns: ["Failed password for", "Invalid user"]
    threshold: {count: 5, window: 1m, group_by: {field_after: "from "}}
    severity: warning
    labels: {team: security}
    annotations: {summary: "SSH password guessing"}
outputs:
  - type: alertmanager
    url: )" + alertmanager.url() + R"(
    resend_interval: 1h
  - type: jsonl
    path: alerts.jsonl
server: 127.0.0.1:0
)");
  Daemon daemon(dir_ + "/gpufilterd.yaml");
  const std::string server = daemon.server();
  ASSERT_FALSE(server.empty());
  std::string sample = read_file(corpus_path("loghub/OpenSSH_2k.log"));
  if (!sample.empty() && sample.back() != '\n') sample += '\n';  // a follower waits for a line's end
  append_text(log, sample);
  const bool got = alertmanager.wait_for(
      [](const std::vector<ReceivedRequest>& requests) {
        for (const ReceivedRequest& r : requests)
          if (r.body.find("183.62.140.253") != std::string::npos) return true;
        return false;
      },
      60s);
  ASSERT_TRUE(got) << daemon.log();
  for (const ReceivedRequest& r : alertmanager.requests()) {
    if (r.body.find("183.62.140.253") == std::string::npos) continue;
    EXPECT_EQ(r.method, "POST");
    EXPECT_EQ(r.target, "/api/v2/alerts");
    EXPECT_EQ(r.header("content-type"), "application/json");
    const json alerts = json::parse(r.body);
    ASSERT_TRUE(alerts.is_array());
    bool found = false;
    for (const json& a : alerts) {
      if (a.at("labels").value("group", "") != "183.62.140.253") continue;
      found = true;
      EXPECT_EQ(a.at("labels").at("alertname"), "ssh-bruteforce");
      EXPECT_EQ(a.at("labels").at("severity"), "warning");
      EXPECT_EQ(a.at("labels").at("team"), "security");
      EXPECT_EQ(a.at("annotations").at("summary"), "SSH password guessing");
      EXPECT_NE(a.at("annotations").at("line").get<std::string>().find("from 183.62.140.253"), std::string::npos);
      EXPECT_TRUE(a.contains("startsAt") && a.contains("endsAt") && a.contains("generatorURL"));
      std::printf("Alertmanager received: %s\n", a.dump().c_str());
    }
    EXPECT_TRUE(found);
    break;
  }
  // Every line scanned: the page counts the sample's 2,000 lines for the followed file.
  const std::string series = "gpufilterd_lines_scanned_total{source=\"" + log + "\"}";
  std::string page;
  const auto deadline = Clock::now() + 10s;
  while (Clock::now() < deadline) {
    page = http_request("GET", "http://" + server + "/metrics").body;
    if (metric(page, series) == 2000) break;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(metric(page, series), 2000.0) << page;
  expect_well_formed(page);
  const double alerts = metric(page, "gpufilterd_alerts_total{rule=\"ssh-bruteforce\",state=\"firing\"}").value_or(0);
  EXPECT_GT(alerts, 5.0);
  EXPECT_GT(metric(page, "gpufilterd_rule_matches_total{rule=\"ssh-bruteforce\"}").value_or(0), alerts);
  EXPECT_EQ(http_request("GET", "http://" + server + "/healthz").status, 200u);
  EXPECT_EQ(http_request("GET", "http://" + server + "/readyz").status, 200u);
  std::printf("metrics page (excerpt):\n");
  std::istringstream lines(page);
  for (std::string l; std::getline(lines, l);)
    if (l.find("gpufilterd_lines_scanned") != std::string::npos || l.find("gpufilterd_alerts_total") != std::string::npos ||
        l.find("gpufilterd_output_delivered") != std::string::npos || l.find("gpufilterd_device_info") != std::string::npos)
      std::printf("  %s\n", l.c_str());
  daemon.signal(SIGTERM);
  const std::optional<int> status = daemon.wait_exit(30s);
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(*status, 0) << daemon.log();
  // The JSON-lines output holds the same alerts.
  const std::vector<json> written = read_jsonl(dir_ + "/alerts.jsonl");
  EXPECT_EQ(static_cast<double>(written.size()), alerts);
}

// A TCP source and a real 600 ms window: two matches, a pause past the window, two more:
// no alert; three within the window: one, to the webhook with its bearer token, after the
// receiver failed the first two attempts (retried); the cooldown then suppresses the rest.
TEST_F(Gpufilterd, SocketThresholdWindowWebhookRetries) {
  HttpReceiver webhook;
  webhook.fail_next(2, 503);
  write_text(dir_ + "/gpufilterd.yaml", R"(
sources:
  - listen: tcp://127.0.0.1:0
rules:
  - name: oom
    patterns: [Out of memory]
    threshold: {count: 3, window: 600ms}
    cooldown: 1h
    severity: critical
outputs:
  - type: webhook
    url: )" + webhook.url() + R"(/hook
    bearer_token_env: TEST_HOOK_TOKEN
server: 127.0.0.1:0
)");
  ::setenv("TEST_HOOK_TOKEN", "s3cret", 1);
  Daemon daemon(dir_ + "/gpufilterd.yaml");
  const std::string server = daemon.server();
  const int fd = tcp_connect(daemon.listening());
  EXPECT_TRUE(write_all(fd, "Out of memory 1\nfine\nOut of memory 2\n"));
  std::this_thread::sleep_for(900ms);
  EXPECT_TRUE(write_all(fd, "Out of memory 3\nOut of memory 4\n"));
  std::this_thread::sleep_for(900ms);
  EXPECT_EQ(webhook.count(), 0u) << "no three matches within 600 ms yet";
  EXPECT_TRUE(write_all(fd, "Out of memory 5\nOut of memory 6\nOut of memory 7\nOut of memory 8\nOut of memory 9\n"));
  ASSERT_TRUE(webhook.wait_for_count(3, 20s)) << daemon.log();  // 2 failures, then delivered
  std::this_thread::sleep_for(300ms);
  const std::vector<ReceivedRequest> requests = webhook.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[0].status, 503u);
  EXPECT_EQ(requests[2].status, 200u);
  EXPECT_EQ(requests[2].target, "/hook");
  EXPECT_EQ(requests[2].header("authorization"), "Bearer s3cret");
  const json alert = json::parse(requests[2].body);
  EXPECT_EQ(alert.at("rule"), "oom");
  EXPECT_EQ(alert.at("state"), "firing");
  EXPECT_EQ(alert.at("matches"), 3);
  EXPECT_EQ(alert.at("source").get<std::string>().rfind("tcp://127.0.0.1:", 0), 0u);
  // Output counters reach the page once a second.
  std::string page;
  const auto deadline = Clock::now() + 10s;
  do {
    page = http_request("GET", "http://" + server + "/metrics").body;
    // The receiver has answered the third request; the output counts the delivery once it
    // has read that answer, which may be after the next push to the page.
    if (metric(page, "gpufilterd_output_failures_total{output=\"webhook\"}").value_or(0) >= 2.0 &&
        metric(page, "gpufilterd_output_delivered_total{output=\"webhook\"}").value_or(0) >= 1.0)
      break;
    std::this_thread::sleep_for(100ms);
  } while (Clock::now() < deadline);
  EXPECT_EQ(metric(page, "gpufilterd_alerts_total{rule=\"oom\",state=\"firing\"}"), 1.0);
  EXPECT_EQ(metric(page, "gpufilterd_output_failures_total{output=\"webhook\"}"), 2.0);
  EXPECT_EQ(metric(page, "gpufilterd_output_delivered_total{output=\"webhook\"}"), 1.0);
  ::close(fd);
  daemon.signal(SIGINT);
  const std::optional<int> status = daemon.wait_exit(30s);
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(*status, 0);
}

// An https:// webhook with mutual TLS, from the configuration to the receiver: the CA,
// the client certificate and key given as tls: files; the alert arrives over TLS.
TEST_F(Gpufilterd, HttpsWebhookWithMutualTls) {
  if (gpufilter::test::pki().ca.empty()) GTEST_SKIP() << "no openssl command";
  const auto& pki = gpufilter::test::pki();
  HttpReceiver webhook(0, gpufilter::test::ReceiverTls{pki.server_cert, pki.server_key, pki.ca});
  write_text(dir_ + "/gpufilterd.yaml", R"(
sources:
  - listen: tcp://127.0.0.1:0
rules:
  - name: oom
    patterns: [Out of memory]
outputs:
  - type: webhook
    url: https://localhost:)" + std::to_string(webhook.port()) + R"(/hook
    tls:
      ca_file: )" + pki.ca + R"(
      cert_file: )" + pki.client_cert + R"(
      key_file: )" + pki.client_key + R"(
server: 127.0.0.1:0
)");
  Daemon daemon(dir_ + "/gpufilterd.yaml");
  const int fd = tcp_connect(daemon.listening());
  EXPECT_TRUE(write_all(fd, "fine\nOut of memory: killed 42\n"));
  ASSERT_TRUE(webhook.wait_for_count(1, 20s)) << daemon.log();
  EXPECT_EQ(json::parse(webhook.requests().front().body).at("rule"), "oom");
  EXPECT_EQ(webhook.failed_handshakes(), 0u);
  ::close(fd);
  daemon.signal(SIGINT);
  const std::optional<int> status = daemon.wait_exit(30s);
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(*status, 0) << daemon.log();
}

// alert_state: a restart in the middle of an alert storm does not alert again. A storm
// rule fires once, gpufilterd stops (SIGTERM) and starts again: the storm goes on with no
// second alert (its cooldown and firing state came back), and a slower rule's window
// holds the matches from before the restart. After a kill -9 (the state saved within a
// second) the same holds. Without alert_state, the control, the storm alerts again.
TEST_F(Gpufilterd, AlertStateSurvivesARestartInAStorm) {
  const auto configure = [&](bool keep) {
    write_text(dir_ + "/gpufilterd.yaml", std::string(R"(
sources:
  - listen: tcp://127.0.0.1:0
rules:
  - name: storm
    patterns: [Out of memory]
    threshold: {count: 3, window: 1h}
    cooldown: 1h
    resolve_after: 1h
  - name: slow
    patterns: [disk full]
    threshold: {count: 4, window: 1h}
  - name: mark
    patterns: [MARK]
    cooldown: 0s
outputs:
  - type: jsonl
    path: alerts.jsonl
server: 127.0.0.1:0
)") + (keep ? "alert_state: alerts.state\n" : ""));
  };
  const auto firing = [&](const std::string& rule) {
    int n = 0;
    for (const json& a : read_jsonl(dir_ + "/alerts.jsonl")) n += a.at("rule") == rule && a.at("state") == "firing";
    return n;
  };
  // Sends `lines` and a marker, and waits until the marker's alert is written: every line
  // before it was through the rules by then.
  const auto run = [&](Daemon& daemon, const std::string& lines, const std::string& marker) {
    const int fd = tcp_connect(daemon.listening());
    EXPECT_TRUE(write_all(fd, lines + "MARK " + marker + "\n"));
    const auto deadline = Clock::now() + 20s;
    bool seen = false;
    while (!seen && Clock::now() < deadline) {
      for (const json& a : read_jsonl(dir_ + "/alerts.jsonl"))
        seen = seen || (a.at("rule") == "mark" && a.at("line").get<std::string>().find(marker) != std::string::npos);
      if (!seen) std::this_thread::sleep_for(20ms);
    }
    EXPECT_TRUE(seen) << marker << ": " << daemon.log();
    ::close(fd);
  };
  std::string storm;
  for (int i = 0; i < 20; ++i) storm += "Out of memory: killed " + std::to_string(i) + "\n";
  configure(true);
  {
    Daemon daemon(dir_ + "/gpufilterd.yaml");
    run(daemon, storm + "disk full 1\ndisk full 2\n", "first");
    EXPECT_EQ(firing("storm"), 1);
    EXPECT_EQ(firing("slow"), 0);
    daemon.signal(SIGTERM);
    ASSERT_EQ(daemon.wait_exit(30s).value_or(-1), 0) << daemon.log();
  }
  {
    Daemon daemon(dir_ + "/gpufilterd.yaml");
    ASSERT_TRUE(daemon.wait_log("alert state restored", 10s)) << daemon.log();
    run(daemon, storm + "disk full 3\ndisk full 4\n", "second");
    EXPECT_EQ(firing("storm"), 1) << "the restart alerted again";
    EXPECT_EQ(firing("slow"), 1) << "the window lost its matches from before the restart";
    std::this_thread::sleep_for(1500ms);  // the periodic save
    daemon.signal(SIGKILL);
    (void)daemon.wait_exit(30s);
  }
  {
    Daemon daemon(dir_ + "/gpufilterd.yaml");
    run(daemon, storm, "third");
    EXPECT_EQ(firing("storm"), 1) << "kill -9, then the restart alerted again";
    daemon.signal(SIGTERM);
    ASSERT_EQ(daemon.wait_exit(30s).value_or(-1), 0) << daemon.log();
  }
  configure(false);  // the control: without the state, the storm alerts anew
  {
    Daemon daemon(dir_ + "/gpufilterd.yaml");
    run(daemon, storm, "fourth");
    EXPECT_EQ(firing("storm"), 2);
    daemon.signal(SIGTERM);
    ASSERT_EQ(daemon.wait_exit(30s).value_or(-1), 0) << daemon.log();
  }
  const std::string saved = read_file(dir_ + "/alerts.state");
  EXPECT_NE(saved.find("\"gpufilterd-alert-state 1\""), std::string::npos) << saved;
}

// A state file that cannot be read is logged and the rules start afresh; gpufilterd runs.
TEST_F(Gpufilterd, AnUnreadableAlertStateStartsAfresh) {
  write_text(dir_ + "/alerts.state", "{not json");
  ::chmod((dir_ + "/alerts.state").c_str(), 0600);
  write_text(dir_ + "/gpufilterd.yaml", R"(
sources:
  - listen: tcp://127.0.0.1:0
rules:
  - name: oom
    patterns: [Out of memory]
outputs:
  - type: jsonl
    path: alerts.jsonl
alert_state: alerts.state
server: 127.0.0.1:0
)");
  Daemon daemon(dir_ + "/gpufilterd.yaml");
  ASSERT_TRUE(daemon.wait_log("alert state not restored", 10s)) << daemon.log();
  const int fd = tcp_connect(daemon.listening());
  EXPECT_TRUE(write_all(fd, "Out of memory\n"));
  const auto deadline = Clock::now() + 20s;
  while (read_jsonl(dir_ + "/alerts.jsonl").empty() && Clock::now() < deadline) std::this_thread::sleep_for(20ms);
  EXPECT_EQ(read_jsonl(dir_ + "/alerts.jsonl").size(), 1u);
  ::close(fd);
  daemon.signal(SIGTERM);
  ASSERT_EQ(daemon.wait_exit(30s).value_or(-1), 0) << daemon.log();
  EXPECT_NE(read_file(dir_ + "/alerts.state").find("gpufilterd-alert-state"), std::string::npos);
}

// Parses "seq=N" out of alert lines: the sequence numbers each alert line carried.
std::map<long, int> sequence_counts(const std::vector<json>& alerts, const std::string& rule) {
  std::map<long, int> seen;
  for (const json& a : alerts) {
    if (a.at("rule") != rule || a.at("state") != "firing") continue;
    const std::string line = a.at("line");
    const std::size_t at = line.find("seq=");
    if (at != std::string::npos) ++seen[std::stol(line.substr(at + 4))];
  }
  return seen;
}

// Reload under load: a writer appends sequence-numbered lines to a followed file at full
// speed while the rules are reloaded ten times (SIGHUP and POST /-/reload, a rule added
// and removed each time). The rule "every" alerts on every line: each sequence number
// must come out exactly once (none lost, none scanned twice), and the added rule alerts
// only while it is loaded.
void reload_under_load(const std::string& dir_, const std::string& engine, int reloads) {
  SCOPED_TRACE("engine " + engine);
  const std::string log = dir_ + "/app.log";
  write_text(log, "");
  const std::string base = R"(
sources:
  - follow: app.log
rules:
  - name: every
    patterns: ["seq="]
    cooldown: 0s
outputs:
  - type: jsonl
    path: alerts.jsonl
    queue: 1000000
server: 127.0.0.1:0
reload_endpoint: true
engine: )" + engine + R"(
)";
  const std::string extra = R"(
  - name: extra
    patterns: ["seq="]
    cooldown: 0s
)";
  write_text(dir_ + "/gpufilterd.yaml", base);
  Daemon daemon(dir_ + "/gpufilterd.yaml");
  const std::string server = daemon.server();
  ASSERT_FALSE(server.empty());
  std::atomic<bool> writing{true};
  std::atomic<long> written{0};
  std::thread writer([&] {
    std::ofstream out(log, std::ios::binary | std::ios::app);
    long n = 0;
    // A bounded number of lines: a sanitizer build on a loaded machine scans (and alerts
    // on) far fewer a second than are written, and an unbounded backlog delays the reloads
    // (and took two minutes of CI's AddressSanitizer job at 400,000).
#if defined(GPUFILTER_SANITIZED)
    constexpr long kMaxLines = 100000;
#else
    constexpr long kMaxLines = 400000;
#endif
    while ((writing.load() || n < 20000) && n < kMaxLines) {
      out << "line seq=" << n++ << " payload\n";
      if (n % 50 == 0) {
        out.flush();
        std::this_thread::sleep_for(1ms);
      }
      written = n;
    }
    out.flush();
    written = n;
  });
  int reloads_ok = 0;
  for (int i = 0; i < reloads; ++i) {
    std::this_thread::sleep_for(150ms);
    write_text(dir_ + "/gpufilterd.yaml", i % 2 == 0 ? base.substr(0, base.find("outputs:")) + extra.substr(1) +
                                                           base.substr(base.find("outputs:"))
                                                     : base);
    if (i % 2 == 0) {
      const HttpResponse r = http_request("POST", "http://" + server + "/-/reload");
      EXPECT_EQ(r.status, 200u) << r.body << r.error;
      reloads_ok += r.status == 200;
    } else {
      const std::string before = daemon.log();
      const std::size_t count = std::count(before.begin(), before.end(), '\n');
      daemon.signal(SIGHUP);
      const auto deadline = Clock::now() + 30s;
      while (Clock::now() < deadline) {
        const std::string now = daemon.log();
        if (static_cast<std::size_t>(std::count(now.begin(), now.end(), '\n')) > count + 1 &&
            now.find("config reloaded", before.size()) != std::string::npos)
          break;
        std::this_thread::sleep_for(10ms);
      }
      reloads_ok += daemon.log().find("config reloaded", before.size()) != std::string::npos;
    }
  }
  writing = false;
  writer.join();
  const long total = written.load();
  // Wait until every line has been scanned, then stop.
  const std::string series = "gpufilterd_lines_scanned_total{source=\"" + log + "\"}";
  const auto deadline = Clock::now() + 60s;
  while (Clock::now() < deadline && metric(http_request("GET", "http://" + server + "/metrics").body, series) != total)
    std::this_thread::sleep_for(100ms);
  const std::string page = http_request("GET", "http://" + server + "/metrics").body;
  EXPECT_EQ(metric(page, series), static_cast<double>(total));
  EXPECT_EQ(metric(page, "gpufilterd_config_reloads_total{result=\"success\"}"), static_cast<double>(reloads));
  daemon.signal(SIGTERM);
  const std::optional<int> status = daemon.wait_exit(60s);
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(*status, 0) << daemon.log();
  EXPECT_EQ(reloads_ok, reloads);
  const std::vector<json> alerts = read_jsonl(dir_ + "/alerts.jsonl");
  const std::map<long, int> every = sequence_counts(alerts, "every");
  long missing = 0, doubled = 0;
  for (long s = 0; s < total; ++s) {
    const auto it = every.find(s);
    if (it == every.end()) ++missing;
    else if (it->second > 1) ++doubled;
  }
  const std::map<long, int> extra_seen = sequence_counts(alerts, "extra");
  std::printf("reload under load, engine %s: %ld lines written, %d reloads (%d succeeded), %zu lines alerted by \"every\", "
              "%ld missing, %ld doubled; \"extra\" alerted %zu lines while loaded\n",
              engine.c_str(), total, reloads, reloads_ok, every.size(), missing, doubled, extra_seen.size());
  EXPECT_EQ(missing, 0);
  EXPECT_EQ(doubled, 0);
  EXPECT_EQ(static_cast<long>(every.size()), total);
  EXPECT_GT(extra_seen.size(), 0u);
  EXPECT_LT(static_cast<long>(extra_seen.size()), total);
  for (const auto& [s, n] : extra_seen) EXPECT_EQ(n, 1) << "extra alerted seq " << s << " twice";
}

TEST_F(Gpufilterd, ReloadUnderLoadLosesAndDoublesNothing) {
  // The host engine, and the OpenCL device (PoCL here, the GPU on the GPU machine).
  // Each reload onto the OpenCL device builds its kernel again, seconds apiece with PoCL
  // under a sanitizer: four of them there (two by HTTP, two by SIGHUP), ten on the host.
  for (const std::string engine : {"cpu", "gpu"}) {
    const std::string dir = dir_ + "/" + engine;
    ::mkdir(dir.c_str(), 0755);
    reload_under_load(dir, engine, engine == "cpu" ? 10 : 4);
  }
}

// An invalid reload changes nothing: the reason in the log and in the 500 answer, the
// metric at 0, and the old rules still alert.
TEST_F(Gpufilterd, InvalidReloadKeepsTheRunningRules) {
  const std::string log = dir_ + "/app.log";
  write_text(log, "");
  const std::string good = R"(
sources:
  - follow: app.log
rules:
  - name: errors
    patterns: [ERROR]
    cooldown: 0s
outputs:
  - type: jsonl
    path: alerts.jsonl
server: 127.0.0.1:0
reload_endpoint: true
)";
  write_text(dir_ + "/gpufilterd.yaml", good);
  Daemon daemon(dir_ + "/gpufilterd.yaml");
  const std::string server = daemon.server();
  std::string bad = good;
  bad.insert(bad.find("outputs:"), "  - name: broken\n    patterns: [x]\n    threshold: {window: soon}\n");
  write_text(dir_ + "/gpufilterd.yaml", bad);
  const HttpResponse r = http_request("POST", "http://" + server + "/-/reload");
  EXPECT_EQ(r.status, 500u);
  EXPECT_NE(r.body.find("\"soon\" is not a duration"), std::string::npos) << r.body;
  daemon.signal(SIGHUP);
  EXPECT_TRUE(daemon.wait_log("reload rejected", 10s));
  EXPECT_NE(daemon.log().find("threshold.window"), std::string::npos);
  std::this_thread::sleep_for(100ms);  // the SIGHUP reload's counter is set after its log line
  const std::string page = http_request("GET", "http://" + server + "/metrics").body;
  EXPECT_EQ(metric(page, "gpufilterd_config_last_reload_successful"), 0.0);
  EXPECT_GE(metric(page, "gpufilterd_config_reloads_total{result=\"failure\"}").value_or(0), 2.0);
  append_text(log, "an ERROR after the failed reload\n");
  const auto deadline = Clock::now() + 20s;
  while (Clock::now() < deadline && read_jsonl(dir_ + "/alerts.jsonl").empty()) std::this_thread::sleep_for(50ms);
  const std::vector<json> alerts = read_jsonl(dir_ + "/alerts.jsonl");
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].at("rule"), "errors");
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait_exit(30s), 0);
}

// A log of Java stack traces among ordinary lines: `trace` is 1 + frames lines, a
// "Caused by:" in the middle of the long ones; every third trace is the pool's.
std::string stack_trace_log(int traces, int& pool_traces, std::vector<int>& pool_lines) {
  std::string log;
  for (int i = 0; i < traces; ++i) {
    log += "2026-11-28 10:00:" + std::to_string(i % 60) + " INFO request " + std::to_string(i) + " ok\n";
    const bool pool = i % 3 == 0;
    const int frames = 1 + (i * 7) % 30;
    log += "2026-11-28 10:00:" + std::to_string(i % 60) + " ERROR request " + std::to_string(i) + " failed\n";
    log += pool ? "java.lang.IllegalStateException: pool exhausted\n" : "java.io.IOException: broken pipe\n";
    for (int f = 0; f < frames; ++f) {
      if (f == 10) log += "Caused by: java.net.SocketTimeoutException: connect timed out\n";
      log += "\tat com.acme.Frame" + std::to_string(f) + ".call(Frame.java:" + std::to_string(f + 1) + ")\n";
    }
    if (pool) {
      ++pool_traces;
      pool_lines.push_back(2 + frames + (frames > 10 ? 1 : 0));
    }
  }
  return log;
}

std::string multiline_config(const std::string& source) {
  return "sources:\n" + source +
         "    multiline: {start: '^\\d{4}-\\d\\d-\\d\\d ', timeout: 300ms}\n"
         "rules:\n"
         "  - name: pool-exhausted\n"
         "    regex: 'IllegalStateException: pool exhausted\\n\\tat (?P<frame>[\\w.]+)'\n"
         "    labels: {first_frame: \"{{frame}}\"}\n"
         "    cooldown: 0s\n"
         "outputs:\n  - {type: jsonl, path: \"-\"}\n"
         "server: 127.0.0.1:0\n";
}

// multiline: joins each stack trace into one record: the rule fires once per trace, its
// alert holding the whole trace, from standard input and from a followed file whose last
// trace only the timeout ends.
TEST_F(Gpufilterd, AStackTraceRuleFiresOncePerTrace) {
  int pool_traces = 0;
  std::vector<int> pool_lines;
  const std::string log = stack_trace_log(300, pool_traces, pool_lines);
  write_text(dir_ + "/stdin.yaml", multiline_config("  - stdin: true\n"));
  const ProcessResult r = run_process({gpufilterd_binary(), "--config", dir_ + "/stdin.yaml"}, log);
  ASSERT_EQ(r.status, 0) << r.err;
  std::vector<int> lines;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) {
    const json a = json::parse(line);
    const std::string text = a.at("line").get<std::string>();
    lines.push_back(static_cast<int>(std::count(text.begin(), text.end(), '\n')) + 1);
    EXPECT_EQ(a.at("labels").at("first_frame"), "com.acme.Frame0.call");
  }
  EXPECT_EQ(static_cast<int>(lines.size()), pool_traces);
  EXPECT_EQ(lines, pool_lines);

  // A followed file: the last trace has no line after it; the timeout hands it on.
  write_text(dir_ + "/app.log", "");
  write_text(dir_ + "/follow.yaml", multiline_config("  - follow: " + dir_ + "/app.log\n"));
  const SpawnedProcess child = spawn_process({gpufilterd_binary(), "--config", dir_ + "/follow.yaml"});
  ::close(child.in);
  std::this_thread::sleep_for(1s);  // it follows from the end: start before writing
  int expected = 0;
  std::vector<int> expected_lines;
  append_text(dir_ + "/app.log", stack_trace_log(4, expected, expected_lines));  // 0 and 3 are the pool's
  std::string out;
  char buffer[65536];
  const auto deadline = Clock::now() + 30s;
  while (std::count(out.begin(), out.end(), '\n') < expected && Clock::now() < deadline) {
    pollfd p{child.out, POLLIN, 0};
    if (::poll(&p, 1, 100) > 0) {
      const ssize_t n = ::read(child.out, buffer, sizeof buffer);
      if (n > 0) out.append(buffer, static_cast<std::size_t>(n));
    }
  }
  ::kill(child.pid, SIGTERM);
  int status = 0;
  ::waitpid(child.pid, &status, 0);
  ::close(child.out);
  ::close(child.err);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), expected) << out;
}

// format: json: rules match a field's value and take labels from fields; a line that is
// no JSON object is counted and still matched as text; with multiline, a pretty-printed
// object spread over lines is one record.
TEST_F(Gpufilterd, JsonRecordsLetRulesMatchAFieldAndLabelFromFields) {
  write_text(dir_ + "/json.yaml",
             "sources:\n  - stdin: true\n    format: json\n    multiline: {start: '^\\{', timeout: 200ms}\n"
             "rules:\n"
             "  - name: declined\n    field: message\n    regex: 'declined \\((?P<reason>\\w+)\\)'\n"
             "    labels: {service: \"{{json.service}}\", reason: \"{{reason}}\", status: \"{{json.http.status}}\"}\n"
             "    cooldown: 0s\n"
             "  - name: text\n    patterns: [plain text line]\n    cooldown: 0s\n"
             "outputs:\n  - {type: jsonl, path: \"-\"}\nserver: 127.0.0.1:0\n");
  const std::string input =
      "{\"service\":\"checkout\",\"message\":\"card declined (fraud)\",\"http\":{\"status\":402}}\n"
      "{\"service\":\"cart\",\"message\":\"fine\",\"note\":\"declined (not the message)\"}\n"
      "{\n  \"service\": \"billing\",\n  \"message\": \"card declined (expired)\"\n}\n"
      "{ a plain text line that only looks like JSON\n";
  const ProcessResult r = run_process({gpufilterd_binary(), "--config", dir_ + "/json.yaml"}, input);
  ASSERT_EQ(r.status, 0) << r.err;
  std::vector<json> alerts;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) alerts.push_back(json::parse(line));
  ASSERT_EQ(alerts.size(), 3u) << r.out;
  EXPECT_EQ(alerts[0].at("labels").at("service"), "checkout");
  EXPECT_EQ(alerts[0].at("labels").at("reason"), "fraud");
  EXPECT_EQ(alerts[0].at("labels").at("status"), "402");
  EXPECT_EQ(alerts[1].at("labels").at("service"), "billing");
  EXPECT_EQ(alerts[1].at("labels").at("reason"), "expired");
  EXPECT_EQ(alerts[2].at("rule"), "text");
}

// A restart resumes from the state file: lines written while the daemon was down are
// read, and none is alerted twice.
TEST_F(Gpufilterd, RestartResumesFromState) {
  const std::string log = dir_ + "/app.log";
  write_text(log, "");
  write_text(dir_ + "/gpufilterd.yaml", R"(
sources:
  - follow: app.log
    state: follow.state
rules:
  - name: every
    patterns: ["seq="]
    cooldown: 0s
outputs:
  - type: jsonl
    path: alerts.jsonl
server: 127.0.0.1:0
)");
  std::string first, second, third;
  for (int i = 0; i < 1000; ++i) first += "seq=" + std::to_string(i) + "\n";
  for (int i = 1000; i < 2000; ++i) second += "seq=" + std::to_string(i) + "\n";
  for (int i = 2000; i < 3000; ++i) third += "seq=" + std::to_string(i) + "\n";
  {
    Daemon daemon(dir_ + "/gpufilterd.yaml");
    daemon.server();
    append_text(log, first);
    const auto deadline = Clock::now() + 20s;
    while (Clock::now() < deadline && read_jsonl(dir_ + "/alerts.jsonl").size() < 1000) std::this_thread::sleep_for(50ms);
    daemon.signal(SIGTERM);
    ASSERT_EQ(daemon.wait_exit(30s), 0);
  }
  append_text(log, second);  // while it is down
  {
    Daemon daemon(dir_ + "/gpufilterd.yaml");
    daemon.server();
    append_text(log, third);
    const auto deadline = Clock::now() + 20s;
    while (Clock::now() < deadline && read_jsonl(dir_ + "/alerts.jsonl").size() < 3000) std::this_thread::sleep_for(50ms);
    daemon.signal(SIGTERM);
    ASSERT_EQ(daemon.wait_exit(30s), 0);
  }
  const std::map<long, int> seen = sequence_counts(read_jsonl(dir_ + "/alerts.jsonl"), "every");
  EXPECT_EQ(seen.size(), 3000u);
  for (const auto& [s, n] : seen) ASSERT_EQ(n, 1) << "seq " << s;
}

TEST_F(Gpufilterd, BadConfigExitsTwoNamingTheKey) {
  write_text(dir_ + "/bad.yaml", "sources: [{stdin: true}]\nrules:\n  - name: a\n    patterns: [x]\n    sevrity: high\n");
  const ProcessResult r = run_process({gpufilterd_binary(), "--config", dir_ + "/bad.yaml"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("bad.yaml:5: rules[0].sevrity: unknown key"), std::string::npos) << r.err;
  const ProcessResult check = run_process({gpufilterd_binary(), "--config", dir_ + "/bad.yaml", "--check"});
  EXPECT_EQ(check.status, 2);
  const ProcessResult missing = run_process({gpufilterd_binary()});
  EXPECT_EQ(missing.status, 2);
}

// --check refuses everything the start refuses, with the same reason: both run the one
// validation (load_config). Before, the start refused output URLs, alert paths and the
// server address when it built them, and --check passed them; duplicate keys passed both,
// and aliases expanded without a bound.
TEST_F(Gpufilterd, CheckRefusesWhatTheStartRefusesWithTheSameReason) {
  write_text(dir_ + "/blocker", "a file\n");
  // stdin alone: a start that (wrongly) went on would end at the input's end, not hang.
  const std::string head = "sources: [{stdin: true}]\nserver: 127.0.0.1:0\nengine: cpu\n";
  const std::string rule = "rules: [{name: a, patterns: [x]}]\n";
  const auto output = [&](const std::string& url) {
    return head + rule + "outputs: [{type: webhook, url: \"" + url + "\"}]\n";
  };
  const std::vector<std::string> bad = {
      head + rule + "rules: [{name: b, patterns: [y]}]\n",
      head + "rules:\n  - name: a\n    patterns: [x]\n    patterns: [y]\n",
      head + "rules:\n  - name: a\n    name: b\n    patterns: [x]\n",
      head + "rules:\n  - name: a\n    patterns: [x]\n    invert: true\n    invert: false\n",
      head + rule + "server: 127.0.0.1:0\n",
      output("ftp://127.0.0.1/"), output("http://127.0.0.1:99999/"), output("http://127.0.0.1:-1/"),
      output("http://127.0.0.1:80abc/"), output("http://:80/"), output("http://[::1:9/x"),
      output("http://127.0.0.1/a b"), output("http://127.0.0.1/\\r\\nX: y"), output("https://:9093/"),
      head + rule + "outputs: [{type: webhook, url: \"https://127.0.0.1/\", tls: {ca_file: missing.pem}}]\n",
      head + rule + "outputs: [{type: alertmanager, url: \"ftp://127.0.0.1:9093\"}]\n",
      head + rule + "outputs: [{type: jsonl, path: blocker/alerts.jsonl}]\n",
      "sources: [{follow: a.log, state: blocker/x.state}]\nengine: cpu\n" + rule,
      "sources: [{stdin: true}]\nengine: cpu\nserver: \"127.0.0.1:99999\"\n" + rule,
      head + rule + "x: &x [a, *x]\n",  // an alias inside its own anchor: a cycle
      // Aliases that expand without a bound: 2,000 of a 100 KB string (201 MB to check,
      // before), and 10 levels of lists of 10 aliases (10^10 scalars).
      [&] {
        std::string yaml = head + rule + "big: &big " + std::string(100'000, 'x') + "\nmany:\n";
        for (int i = 0; i < 2000; ++i) yaml += "  - *big\n";
        return yaml;
      }(),
      [&] {
        std::string yaml = head + rule + "l0: &l0 [lol]\n";
        for (int level = 1; level <= 10; ++level) {
          const std::string name = std::to_string(level), prev = std::to_string(level - 1);
          yaml.append("l").append(name).append(": &l").append(name).append(" [*l").append(prev);
          for (int i = 1; i < 10; ++i) yaml.append(", *l").append(prev);
          yaml += "]\n";
        }
        return yaml;
      }(),
  };
  const std::string config = dir_ + "/gpufilterd.yaml";
  // The log's logfmt value of a message: quoted, with \ and " escaped.
  const auto logfmt = [](const std::string& text) {
    std::string out = "error=\"";
    for (const char c : text) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    return out + "\"";
  };
  for (const std::string& yaml : bad) {
    write_text(config, yaml);
    const ProcessResult check = run_process({gpufilterd_binary(), "--config", config, "--check"});
    EXPECT_EQ(check.status, 2) << yaml << check.out;
    const std::string prefix = "gpufilterd: ";
    ASSERT_TRUE(check.err.starts_with(prefix) && check.err.ends_with("\n")) << yaml << check.err;
    const std::string reason = check.err.substr(prefix.size(), check.err.size() - prefix.size() - 1);
    EXPECT_EQ(reason.find('\n'), std::string::npos) << reason;  // one line, whatever the URL held
    const ProcessResult start = run_process({gpufilterd_binary(), "--config", config}, "");
    EXPECT_EQ(start.status, 2) << yaml << start.err;
    EXPECT_NE(start.err.find(logfmt(reason)), std::string::npos) << yaml << "--check: " << reason << "\nstart: "
                                                                   << start.err;
  }
  write_text(config, head + rule + "outputs: [{type: webhook, url: \"http://127.0.0.1:9/x?y\"}, "
                                   "{type: jsonl, path: new/dir/alerts.jsonl}]\n");
  const ProcessResult good = run_process({gpufilterd_binary(), "--config", config, "--check"});
  EXPECT_EQ(good.status, 0) << good.err;
}

// --config without its file (last, "--config=", or an empty one) says so, rather than that
// --config is an unknown argument; a second --config is refused rather than replacing the
// first. Exit status 2 each time, and nothing starts.
TEST_F(Gpufilterd, ConfigOptionWithoutAFileSaysItNeedsOne) {
  write_text(dir_ + "/good.yaml", "sources: [{stdin: true}]\nrules: [{name: a, patterns: [x]}]\n");
  const std::string good = dir_ + "/good.yaml";
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--config"}, "option '--config' requires an argument"},
      {{"--check", "--config"}, "option '--config' requires an argument"},
      {{"--config="}, "option '--config' requires an argument"},
      {{"--config", ""}, "option '--config' requires an argument"},
      {{"--config=", "--check"}, "option '--config' requires an argument"},
      {{"--config", good, "--config", good, "--check"}, "option '--config' given twice"},
      {{"--check"}, "option '--config' is required"},
  };
  for (const auto& [args, expected] : cases) {
    std::vector<std::string> argv{gpufilterd_binary()};
    argv.insert(argv.end(), args.begin(), args.end());
    const ProcessResult r = run_process(argv);
    EXPECT_EQ(r.status, 2) << args.size() << " arguments: " << r.err;
    EXPECT_NE(r.err.find(expected), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("unknown argument"), std::string::npos) << r.err;
  }
  EXPECT_EQ(run_process({gpufilterd_binary(), "--config=" + good, "--check"}).status, 0);
}

// With descriptor 0 closed, the signal pipe used to become standard input: a "stdin:
// true" source read the bytes meant for the control thread, and SIGTERM was lost.
TEST_F(Gpufilterd, ClosedStandardInputLeavesSigtermWorking) {
  write_text(dir_ + "/gpufilterd.yaml", R"(
sources:
  - stdin: true
rules:
  - name: every
    patterns: ["seq="]
outputs:
  - type: jsonl
    path: alerts.jsonl
server: 127.0.0.1:0
)");
  Daemon daemon(dir_ + "/gpufilterd.yaml", {}, true);
  daemon.server();
  std::this_thread::sleep_for(200ms);  // the stdin source has met its closed input
  daemon.signal(SIGTERM);
  const std::optional<int> status = daemon.wait_exit(20s);
  ASSERT_TRUE(status.has_value()) << "SIGTERM did not end it: " << daemon.log();
  EXPECT_NE(*status, 128 + SIGKILL) << daemon.log();
}

// The bundled example runs as written: the OpenSSH sample on standard input gives one
// brute-force alert per attacking address, then gpufilterd exits 0 at the input's end.
TEST_F(Gpufilterd, DemoExampleRunsAsWritten) {
  const std::string sample = read_file(corpus_path("loghub/OpenSSH_2k.log"));
  const ProcessResult r =
      run_process({gpufilterd_binary(), "--config", source_dir() + "/examples/daemon/demo.yaml"},
                  sample);
  EXPECT_EQ(r.status, 0) << r.err;
  std::set<std::string> groups;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) {
    const json a = json::parse(line);
    if (a.at("rule") == "ssh-bruteforce") groups.insert(a.at("group").get<std::string>());
  }
  EXPECT_TRUE(groups.count("183.62.140.253")) << r.out;
  EXPECT_GE(groups.size(), 5u);
  // The full example's webhook takes its token from the environment: --check reads it as
  // the start would, and refuses the file without it.
  const std::string full = source_dir() + "/examples/daemon/gpufilterd.yaml";
  const ProcessResult check =
      run_process({"/usr/bin/env", "GPUFILTERD_WEBHOOK_TOKEN=t0ken", gpufilterd_binary(), "--config", full, "--check"});
  EXPECT_EQ(check.status, 0) << check.err;
  const ProcessResult unset =
      run_process({"/usr/bin/env", "-u", "GPUFILTERD_WEBHOOK_TOKEN", gpufilterd_binary(), "--config", full, "--check"});
  EXPECT_EQ(unset.status, 2);
  EXPECT_NE(unset.err.find("bearer_token_env GPUFILTERD_WEBHOOK_TOKEN is not set (or empty)"), std::string::npos)
      << unset.err;
}

// ---------------------------------------------------------------------------------------
// Security defaults

// A socket of the daemon's, from /proc/net.
struct Socket {
  std::string proto;    // tcp, tcp6, udp, udp6
  std::string address;  // "127.0.0.1", "::1"
  unsigned port = 0;
};

// "0100007F" -> "127.0.0.1": /proc/net prints each 32-bit word of the address as the
// number it is in host byte order, so copying the words back gives the address's bytes.
std::string decode_address(const std::string& hex) {
  unsigned char bytes[16] = {};
  const std::size_t words = hex.size() / 8;
  for (std::size_t w = 0; w < words && w < 4; ++w) {
    const auto word = static_cast<std::uint32_t>(std::stoul(hex.substr(w * 8, 8), nullptr, 16));
    std::memcpy(bytes + 4 * w, &word, 4);
  }
  char text[INET6_ADDRSTRLEN] = {};
  ::inet_ntop(words == 1 ? AF_INET : AF_INET6, bytes, text, sizeof text);
  return text;
}

bool is_loopback(const std::string& address) {
  return address.starts_with("127.") || address == "::1" || address.starts_with("::ffff:127.");
}

// Every TCP socket in LISTEN state and every UDP socket that process `pid` holds.
std::vector<Socket> listening_sockets(pid_t pid) {
  std::set<std::string> inodes;
  const std::string fds = "/proc/" + std::to_string(pid) + "/fd";
  for (const auto& entry : std::filesystem::directory_iterator(fds)) {
    char target[256];
    const ssize_t n = ::readlink(entry.path().c_str(), target, sizeof target - 1);
    if (n <= 0) continue;
    const std::string link(target, static_cast<std::size_t>(n));
    if (link.starts_with("socket:[")) inodes.insert(link.substr(8, link.size() - 9));
  }
  std::vector<Socket> out;
  for (const std::string proto : {"tcp", "tcp6", "udp", "udp6"}) {
    std::ifstream in("/proc/net/" + proto);
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
      fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode;
      if (inodes.count(inode) == 0) continue;
      if (proto.starts_with("tcp") && state != "0A") continue;  // 0A: LISTEN
      const std::size_t colon = local.find(':');
      out.push_back(Socket{proto, decode_address(local.substr(0, colon)),
                           static_cast<unsigned>(std::stoul(local.substr(colon + 1), nullptr, 16))});
    }
  }
  return out;
}

// Polls the /metrics page until `done(page)` or the deadline; returns the last page.
std::string poll_metrics(const std::string& server, const std::function<bool(const std::string&)>& done,
                         std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  std::string page = http_request("GET", "http://" + server + "/metrics").body;
  while (!done(page) && Clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
    page = http_request("GET", "http://" + server + "/metrics").body;
  }
  return page;
}

// A source or an operations endpoint without a host listens on loopback only: every
// listening socket the daemon holds, read from /proc, is 127.0.0.1, and they work.
TEST_F(Gpufilterd, ListenersAreLoopbackUnlessAnAddressIsGiven) {
  write_text(dir_ + "/gpufilterd.yaml", R"(
sources:
  - listen: tcp://:0
  - listen: udp://:0
rules:
  - name: errors
    patterns: [ERROR]
    cooldown: 0s
outputs:
  - type: jsonl
    path: alerts.jsonl
server: ":0"
engine: cpu
)");
  Daemon daemon(dir_ + "/gpufilterd.yaml");
  const std::string server = daemon.server();  // the pattern wants 127.0.0.1
  ASSERT_FALSE(server.empty()) << daemon.log();
  const std::string tcp = daemon.listening();
  ASSERT_FALSE(tcp.empty()) << daemon.log();
  EXPECT_TRUE(std::regex_search(daemon.log(), std::regex(R"(url=udp://127\.0\.0\.1:[1-9]\d*)"))) << daemon.log();
  std::size_t tcp_listeners = 0, udp_sockets = 0;
  for (const Socket& socket : listening_sockets(daemon.pid())) {
    EXPECT_TRUE(is_loopback(socket.address)) << socket.proto << " " << socket.address << ":" << socket.port;
    ++(socket.proto.starts_with("tcp") ? tcp_listeners : udp_sockets);
  }
  EXPECT_EQ(tcp_listeners, 2u);  // the operations endpoint and the TCP source
  EXPECT_EQ(udp_sockets, 1u);
  EXPECT_EQ(http_request("GET", "http://" + server + "/healthz").status, 200u);
  const int fd = tcp_connect(tcp);
  EXPECT_TRUE(write_all(fd, "an ERROR over tcp\n"));
  ::close(fd);
  const auto deadline = Clock::now() + 20s;
  while (Clock::now() < deadline && read_jsonl(dir_ + "/alerts.jsonl").empty()) std::this_thread::sleep_for(20ms);
  EXPECT_EQ(read_jsonl(dir_ + "/alerts.jsonl").size(), 1u);
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait_exit(30s), 0) << daemon.log();
}

// Without a server key the endpoint is 127.0.0.1:9464. The port is fixed, so it may be
// taken here: then the daemon must say so and exit 2 (it never falls back elsewhere).
TEST_F(Gpufilterd, WithoutAServerKeyTheEndpointIsLoopback9464) {
  write_text(dir_ + "/gpufilterd.yaml", R"(
sources:
  - listen: tcp://127.0.0.1:0
rules:
  - name: errors
    patterns: [ERROR]
outputs:
  - type: jsonl
    path: alerts.jsonl
engine: cpu
)");
  bool free = false;
  {
    const int probe = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    ::setsockopt(probe, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(9464);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    free = ::bind(probe, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(probe);
  }
  Daemon daemon(dir_ + "/gpufilterd.yaml");
  if (!free) {
    EXPECT_EQ(daemon.wait_exit(30s), 2) << daemon.log();
    EXPECT_NE(daemon.log().find("127.0.0.1:9464"), std::string::npos) << daemon.log();
    return;
  }
  EXPECT_EQ(daemon.server(), "127.0.0.1:9464") << daemon.log();
  bool found = false;
  for (const Socket& socket : listening_sockets(daemon.pid())) {
    EXPECT_TRUE(is_loopback(socket.address)) << socket.proto << " " << socket.address << ":" << socket.port;
    found = found || (socket.port == 9464 && socket.address == "127.0.0.1");
  }
  EXPECT_TRUE(found);
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait_exit(30s), 0) << daemon.log();
}

// The operations endpoint is read-only unless reload_endpoint: true: POST /-/reload is
// refused (403) and reloads nothing, other methods are 405, and SIGHUP still reloads.
TEST_F(Gpufilterd, TheReloadEndpointIsOffUnlessEnabled) {
  const std::string log = dir_ + "/app.log";
  write_text(log, "");
  write_text(dir_ + "/gpufilterd.yaml", R"(
sources:
  - follow: app.log
rules:
  - name: errors
    patterns: [ERROR]
outputs:
  - type: jsonl
    path: alerts.jsonl
server: 127.0.0.1:0
engine: cpu
)");
  Daemon daemon(dir_ + "/gpufilterd.yaml");
  const std::string server = daemon.server();
  ASSERT_FALSE(server.empty());
  EXPECT_NE(daemon.log().find("reload_endpoint=disabled"), std::string::npos) << daemon.log();
  const HttpResponse refused = http_request("POST", "http://" + server + "/-/reload");
  EXPECT_EQ(refused.status, 403u) << refused.error;
  EXPECT_EQ(refused.body, "reload over HTTP is disabled (reload_endpoint: true enables it; SIGHUP always reloads)\n");
  for (const std::string method : {"PUT", "DELETE", "PATCH"}) {
    EXPECT_EQ(http_request(method, "http://" + server + "/metrics").status, 405u) << method;
    EXPECT_EQ(http_request(method, "http://" + server + "/-/reload").status, 405u) << method;
  }
  const std::string page = http_request("GET", "http://" + server + "/metrics").body;
  EXPECT_EQ(metric(page, "gpufilterd_config_reloads_total{result=\"success\"}").value_or(0), 0.0);
  EXPECT_EQ(metric(page, "gpufilterd_config_reloads_total{result=\"failure\"}").value_or(0), 0.0);
  EXPECT_EQ(daemon.log().find("config reloaded"), std::string::npos);
  daemon.signal(SIGHUP);
  EXPECT_TRUE(daemon.wait_log("config reloaded", 30s)) << daemon.log();
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait_exit(30s), 0) << daemon.log();
}

// Files others could have changed, or swapped through their directory, are refused at
// start and by --check (exit 2, naming the file and the fix), like ssh's StrictModes.
TEST_F(Gpufilterd, FilesOthersMayWriteAreRefused) {
  const std::string config = dir_ + "/gpufilterd.yaml";
  const std::string yaml = "sources: [{listen: tcp://127.0.0.1:0}]\nrules:\n  - name: a\n    patterns_file: p.txt\n"
                           "server: 127.0.0.1:0\nengine: cpu\n";
  write_text(dir_ + "/p.txt", "ERROR\n");
  write_text(config, yaml, 0664);
  const std::string expected = config + ": refused: group or others may write it (mode 0664); fix: chmod go-w " + config;
  for (const bool check : {false, true}) {
    std::vector<std::string> argv = {gpufilterd_binary(), "--config", config};
    if (check) argv.push_back("--check");
    const ProcessResult r = run_process(argv);
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_NE(r.err.find(expected), std::string::npos) << r.err;
  }
  ::chmod(config.c_str(), 0644);
  EXPECT_EQ(run_process({gpufilterd_binary(), "--config", config, "--check"}).status, 0);
  ::chmod((dir_ + "/p.txt").c_str(), 0666);
  const ProcessResult patterns = run_process({gpufilterd_binary(), "--config", config, "--check"});
  EXPECT_EQ(patterns.status, 2);
  EXPECT_NE(patterns.err.find("gpufilterd.yaml:4: rules[0].patterns_file: " + dir_ +
                              "/p.txt: refused: group or others may write it (mode 0666); fix: chmod go-w " + dir_ +
                              "/p.txt"),
            std::string::npos)
      << patterns.err;
  ::chmod((dir_ + "/p.txt").c_str(), 0644);
  // The files are private, but their directory is not: anyone could swap them.
  ASSERT_EQ(::chmod(dir_.c_str(), 0777), 0);
  const ProcessResult open_dir = run_process({gpufilterd_binary(), "--config", config, "--check"});
  EXPECT_EQ(open_dir.status, 2);
  EXPECT_NE(open_dir.err.find(config + ": refused: the directory " + dir_ +
                              " is not safe: group or others may write it (mode 0777) and it has no sticky bit; "
                              "fix: chmod go-w " + dir_),
            std::string::npos)
      << open_dir.err;
  ASSERT_EQ(::chmod(dir_.c_str(), 01777), 0);  // sticky, as /tmp: only an entry's owner may swap it
  EXPECT_EQ(run_process({gpufilterd_binary(), "--config", config, "--check"}).status, 0);
  ASSERT_EQ(::chmod(dir_.c_str(), 0700), 0);
  if (::geteuid() == 0) {  // only root can give a file to another user
    ASSERT_EQ(::chown(config.c_str(), 65534, 65534), 0);
    const ProcessResult owned = run_process({gpufilterd_binary(), "--config", config});
    EXPECT_EQ(owned.status, 2);
    EXPECT_NE(owned.err.find(config + ": refused: it is owned by uid 65534"), std::string::npos) << owned.err;
  }
}

// The configuration of TokensNeverReachLogsMetricsAlertsOrCheck: a webhook that fails 3 times then
// takes its token from a file, one that refuses (401) with its token from the environment, one
// nobody listens on, and an alerts file.
std::string token_leak_config(const HttpReceiver& good, const HttpReceiver& refusing, std::uint16_t dead_port) {
  return R"(
sources:
  - listen: tcp://127.0.0.1:0
rules:
  - name: leak-check
    patterns: [ALERT]
    cooldown: 0s
outputs:
  - type: webhook
    name: good
    url: )" + good.url() + R"(/hook
    bearer_token_file: hook.token
    retry_backoff: 10ms
    retry_max_backoff: 50ms
  - type: webhook
    name: refusing
    url: )" + refusing.url() + R"(/hook
    bearer_token_env: GPUFILTERD_TEST_SECRET
  - type: webhook
    name: dead
    url: http://127.0.0.1:)" + std::to_string(dead_port) + R"(/hook
    bearer_token_file: hook.token
    retry_backoff: 10ms
    retry_max_backoff: 50ms
  - type: jsonl
    path: alerts.jsonl
server: 127.0.0.1:0
engine: cpu
drain_timeout: 1s
)";
}

// Tokens come from a file (mode 0600) or the environment and go into the Authorization
// header only. While deliveries fail (503, 401, nobody listening), across a reload that
// rotates the token file and one that finds it exposed, no token appears in the log, the
// metrics, the alerts file, the reload's answer or --check's output.
TEST_F(Gpufilterd, TokensNeverReachLogsMetricsAlertsOrCheck) {
  const std::string tag = std::to_string(::getpid()) + "x" + std::to_string(Clock::now().time_since_epoch().count());
  const std::string file_token = "FileTok" + tag;
  const std::string rotated_token = "RotTok" + tag;
  const std::string env_token = "EnvTok" + tag;
  const std::vector<std::string> secrets = {file_token, rotated_token, env_token};
  HttpReceiver good;
  good.fail_next(3, 503);
  HttpReceiver refusing;
  refusing.set_status(401);
  std::uint16_t dead_port = 0;
  {
    HttpReceiver probe;
    dead_port = probe.port();
  }
  const std::string token_file = dir_ + "/hook.token";
  write_text(token_file, file_token + "\n", 0600);
  const std::string config = dir_ + "/gpufilterd.yaml";
  write_text(config, token_leak_config(good, refusing, dead_port));
  const std::vector<std::string> env = {"GPUFILTERD_TEST_SECRET=" + env_token};
  const auto expect_no_secret = [&](const std::string& text, const std::string& where) {
    for (const std::string& secret : secrets) EXPECT_EQ(text.find(secret), std::string::npos) << where << ": " << text;
  };
  const auto last_authorization = [](const HttpReceiver& receiver) { return receiver.requests().back().header("authorization"); };
  Daemon daemon(config, env);
  const std::string server = daemon.server();
  ASSERT_FALSE(server.empty()) << daemon.log();
  const int fd = tcp_connect(daemon.listening());
  EXPECT_TRUE(write_all(fd, "ALERT one\n"));
  ASSERT_TRUE(good.wait_for_count(4, 20s)) << daemon.log();  // 3 x 503, then 200
  for (const ReceivedRequest& r : good.requests()) EXPECT_EQ(r.header("authorization"), "Bearer " + file_token);
  ASSERT_TRUE(refusing.wait_for_count(1, 20s));
  EXPECT_EQ(refusing.requests()[0].header("authorization"), "Bearer " + env_token);
  // Failures are logged (once a second at most per output): the log names the outputs.
  EXPECT_TRUE(daemon.wait_log("output=dead", 20s)) << daemon.log();
  EXPECT_TRUE(daemon.wait_log("output=refusing", 20s)) << daemon.log();

  // A rotated token file is read at the reload and used from the next request on.
  write_text(token_file, rotated_token + "\n", 0600);
  daemon.signal(SIGHUP);
  ASSERT_TRUE(daemon.wait_log("config reloaded", 30s)) << daemon.log();
  std::size_t seen = good.count();
  EXPECT_TRUE(write_all(fd, "ALERT two\n"));
  ASSERT_TRUE(good.wait_for_count(seen + 1, 20s));
  EXPECT_EQ(last_authorization(good), "Bearer " + rotated_token);
  // An exposed token file fails the reload; the token in use stays.
  ASSERT_EQ(::chmod(token_file.c_str(), 0644), 0);
  daemon.signal(SIGHUP);
  ASSERT_TRUE(daemon.wait_log("reload rejected", 30s)) << daemon.log();
  EXPECT_NE(daemon.log().find("hook.token: refused: group or others may read or write this secret (mode 0644); "
                              "fix: chmod 600 "),
            std::string::npos)
      << daemon.log();
  seen = good.count();
  EXPECT_TRUE(write_all(fd, "ALERT three\n"));
  ASSERT_TRUE(good.wait_for_count(seen + 1, 20s));
  EXPECT_EQ(last_authorization(good), "Bearer " + rotated_token);
  ::close(fd);

  const std::string page = poll_metrics(
      server,
      [](const std::string& p) {
        return metric(p, "gpufilterd_output_delivered_total{output=\"good\"}").value_or(0) >= 3 &&
               metric(p, "gpufilterd_output_failures_total{output=\"dead\"}").value_or(0) >= 3;
      },
      20s);
  EXPECT_GE(metric(page, "gpufilterd_output_failures_total{output=\"refusing\"}").value_or(0), 1.0) << page;
  EXPECT_GE(metric(page, "gpufilterd_output_failures_total{output=\"dead\"}").value_or(0), 3.0) << page;
  expect_no_secret(page, "/metrics");
  for (const std::string target : {"/healthz", "/readyz", "/nothing"}) {
    expect_no_secret(http_request("GET", "http://" + server + target).body, target);
  }
  // --check, refusing the exposed file and accepting the private one.
  const ProcessResult exposed = run_process({gpufilterd_binary(), "--config", config, "--check"}, "", env);
  EXPECT_EQ(exposed.status, 2);
  EXPECT_NE(exposed.err.find("hook.token: refused"), std::string::npos) << exposed.err;
  expect_no_secret(exposed.out + exposed.err, "--check (exposed)");
  ASSERT_EQ(::chmod(token_file.c_str(), 0600), 0);
  const ProcessResult checked = run_process({gpufilterd_binary(), "--config", config, "--check"}, "", env);
  EXPECT_EQ(checked.status, 0) << checked.err;
  expect_no_secret(checked.out + checked.err, "--check");

  daemon.signal(SIGTERM);
  // The dead output's alerts are lost at the drain's end: exit 3, and a log line without the token.
  EXPECT_EQ(daemon.wait_exit(30s), 3) << daemon.log();
  expect_no_secret(daemon.log(), "the log");
  EXPECT_NE(daemon.log().find("alerts lost: drain_timeout passed with alerts queued"), std::string::npos);
  const std::string alerts = read_file(dir_ + "/alerts.jsonl");
  EXPECT_EQ(read_jsonl(dir_ + "/alerts.jsonl").size(), 3u);
  expect_no_secret(alerts, "alerts.jsonl");
  for (const ReceivedRequest& r : good.requests()) expect_no_secret(r.body + r.target, "a webhook body");

  // A token written into the configuration is refused, and not quoted.
  write_text(config, "sources: [{listen: tcp://127.0.0.1:0}]\nrules: [{name: a, patterns: [x]}]\noutputs:\n"
                     "  - type: webhook\n    url: http://127.0.0.1:9/\n    bearer_token: " + file_token + "\n");
  for (const bool check : {false, true}) {
    std::vector<std::string> argv = {gpufilterd_binary(), "--config", config};
    if (check) argv.push_back("--check");
    const ProcessResult inline_token = run_process(argv);
    EXPECT_EQ(inline_token.status, 2);
    EXPECT_NE(inline_token.err.find("outputs[0].bearer_token: secrets are not accepted in the configuration file"),
              std::string::npos)
        << inline_token.err;
    expect_no_secret(inline_token.out + inline_token.err, "an inline token");
  }
}

// A password in a URL (an output's, a listen address's, generator_url) is refused, and the
// refusal shows the URL with the password hidden: in --check's output, in a start that
// fails, and in the log of a running daemon whose reload is refused.
TEST_F(Gpufilterd, UrlPasswordsNeverReachMessagesOrLogs) {
  const std::string secret = "S3cret";
  const std::string head = "sources: [{listen: tcp://127.0.0.1:0}]\nrules: [{name: a, patterns: [x]}]\n"
                           "server: 127.0.0.1:0\nengine: cpu\n";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"outputs: [{type: alertmanager, url: \"http://ops:S3cret@127.0.0.1:9093\"}]\n", "http://ops:***@127.0.0.1:9093"},
      {"outputs: [{type: webhook, url: \"http://ops:S3cret@127.0.0.1:9/hook\"}]\n", "http://ops:***@127.0.0.1:9/hook"},
      {"outputs: [{type: webhook, url: \"http://ops:S3#cret@127.0.0.1:9/\"}]\n", "http://ops:***@127.0.0.1:9/"},
      {"outputs: [{type: webhook, url: \"http://ops:a/S3cret@127.0.0.1:9/\"}]\n", "http://ops:***@127.0.0.1:9/"},
      {"outputs: [{type: webhook, url: \"https://S3cret@127.0.0.1:9/\"}]\n", "https://***@127.0.0.1:9/"},
      {"generator_url: \"http://ops:S3cret@example.com/\"\n", "http://ops:***@example.com/"},
  };
  const std::string config = dir_ + "/gpufilterd.yaml";
  const std::vector<std::string> listen_bad = {"sources: [{listen: \"tcp://ops:S3cret@127.0.0.1:5140\"}]\n"
                                               "rules: [{name: a, patterns: [x]}]\n"};
  // stdin alone: a start that (wrongly) went on would end at the input's end, not hang.
  const std::string stdin_head = "sources: [{stdin: true}]\nrules: [{name: a, patterns: [x]}]\nengine: cpu\n";
  for (const auto& [tail, shown] : bad) {
    write_text(config, stdin_head + tail);
    for (const bool check : {true, false}) {
      std::vector<std::string> argv = {gpufilterd_binary(), "--config", config};
      if (check) argv.push_back("--check");
      const ProcessResult r = run_process(argv, "");
      if (!check) {
        EXPECT_EQ(r.status, 2) << tail;
        EXPECT_NE(r.err.find(shown), std::string::npos) << r.err;
      }
      EXPECT_EQ((r.out + r.err).find(secret), std::string::npos) << (check ? "--check: " : "start: ") << r.out << r.err;
    }
  }
  write_text(config, listen_bad[0]);
  for (const bool check : {true, false}) {
    std::vector<std::string> argv = {gpufilterd_binary(), "--config", config};
    if (check) argv.push_back("--check");
    const ProcessResult r = run_process(argv);
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.err.find("tcp://ops:***@127.0.0.1:5140"), std::string::npos) << r.err;
    EXPECT_EQ((r.out + r.err).find(secret), std::string::npos) << r.err;
  }
  // A daemon that started: a reload to a URL with a password is refused, and its log and
  // metrics do not hold the password.
  write_text(config, head);
  Daemon daemon(config);
  const std::string server = daemon.server();
  ASSERT_FALSE(server.empty()) << daemon.log();
  write_text(config, head + bad[5].first);
  daemon.signal(SIGHUP);
  ASSERT_TRUE(daemon.wait_log("reload rejected", 30s)) << daemon.log();
  EXPECT_NE(daemon.log().find("ops:***@"), std::string::npos) << daemon.log();
  const std::string page = http_request("GET", "http://" + server + "/metrics").body;
  EXPECT_EQ(page.find(secret), std::string::npos) << page;
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait_exit(30s), 0) << daemon.log();
  EXPECT_EQ(daemon.log().find(secret), std::string::npos) << daemon.log();
}

// ---------------------------------------------------------------------------------------
// Faults

// The OpenCL device fails mid-run (GPUFILTER_INJECT_DEVICE_FAULT makes its second finish
// throw a real cl::Error): the engine rescans the chunks it had on the host and goes on
// there, so every line is scanned once and every marker alerts once, and the daemon says
// so in its log and in gpufilterd_device_faults_total.
TEST_F(Gpufilterd, DeviceFailingMidRunLosesNoLineAndSaysSo) {
  constexpr int kWaves = 6;
  constexpr int kLinesPerWave = 3000;  // about 180 KB: well above the host-scan threshold
  constexpr int kMarkEvery = 100;
  const std::string log = dir_ + "/app.log";
  write_text(log, "");
  write_text(dir_ + "/gpufilterd.yaml", R"(
sources:
  - follow: app.log
rules:
  - name: mark
    patterns: [MARK]
    cooldown: 0s
    resolve_after: 1000d
outputs:
  - type: jsonl
    path: alerts.jsonl
    queue: 100000
server: 127.0.0.1:0
engine: gpu
)");
  Daemon daemon(dir_ + "/gpufilterd.yaml", {"GPUFILTER_INJECT_DEVICE_FAULT=finish:2"});
  const std::string server = daemon.server();
  ASSERT_FALSE(server.empty()) << daemon.log();
  EXPECT_EQ(metric(http_request("GET", "http://" + server + "/metrics").body, "gpufilterd_device_faults_total"), 0.0);
  const std::string series = "gpufilterd_lines_scanned_total{source=\"" + log + "\"}";
  int markers = 0;
  for (int wave = 0; wave < kWaves; ++wave) {
    std::string lines;
    for (int i = 0; i < kLinesPerWave; ++i) {
      const int seq = wave * kLinesPerWave + i;
      if (seq % kMarkEvery == 0) {
        lines += "MARK seq=" + std::to_string(seq) + "\n";
        ++markers;
      } else {
        lines += "an ordinary line of the application log, number " + std::to_string(seq) + "\n";
      }
    }
    append_text(log, lines);
    // One wave at a time, so that each is its own device chunk.
    poll_metrics(server, [&](const std::string& p) { return metric(p, series) == (wave + 1) * kLinesPerWave; }, 60s);
  }
  const std::string page = poll_metrics(
      server, [&](const std::string& p) { return metric(p, series) == kWaves * kLinesPerWave; }, 60s);
  EXPECT_EQ(metric(page, series), kWaves * kLinesPerWave) << daemon.log();
  EXPECT_EQ(metric(page, "gpufilterd_device_faults_total"), 1.0) << daemon.log();
  EXPECT_EQ(metric(page, "gpufilterd_alerts_total{rule=\"mark\",state=\"firing\"}"), markers);
  EXPECT_TRUE(daemon.wait_log("OpenCL device failed; scanning on the host", 10s)) << daemon.log();
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait_exit(30s), 0) << daemon.log();
  std::set<long> seen;
  for (const json& alert : read_jsonl(dir_ + "/alerts.jsonl")) {
    const std::string line = alert.at("line");
    EXPECT_TRUE(seen.insert(std::stol(line.substr(line.find("seq=") + 4))).second) << "twice: " << line;
  }
  EXPECT_EQ(seen.size(), static_cast<std::size_t>(markers));
  for (int seq = 0; seq < kWaves * kLinesPerWave; seq += kMarkEvery) EXPECT_TRUE(seen.count(seq)) << "lost: " << seq;
}

// The webhook down for "minutes", compressed with a 1-4 ms backoff: hundreds of retry
// cycles against 503 while 2,000 lines fire an alert each. The queue (50) never holds
// more; exactly the 1,950 alerts pushed out of it are counted as dropped; each failure
// is one 503; and once the receiver is back the newest 50 arrive in order, once each.
TEST_F(Gpufilterd, AWebhookDownForHundredsOfRetriesStaysBoundedAndRecoversInOrder) {
  constexpr int kLines = 2000;
  constexpr int kQueue = 50;
  constexpr double kCycles = 300;
  HttpReceiver hook;
  hook.set_status(503);
  write_text(dir_ + "/gpufilterd.yaml", R"(
sources:
  - listen: tcp://127.0.0.1:0
rules:
  - name: mark
    patterns: [MARK]
    cooldown: 0s
outputs:
  - type: webhook
    url: )" + hook.url() + R"(/hook
    queue: )" + std::to_string(kQueue) + R"(
    retry_backoff: 1ms
    retry_max_backoff: 4ms
    timeout: 5s
server: 127.0.0.1:0
engine: cpu
drain_timeout: 5s
)");
  Daemon daemon(dir_ + "/gpufilterd.yaml");
  const std::string server = daemon.server();
  ASSERT_FALSE(server.empty()) << daemon.log();
  const std::string depth = "gpufilterd_output_queue_depth{output=\"webhook\"}";
  const std::string published = "gpufilterd_output_published_total{output=\"webhook\"}";
  const std::string dropped = "gpufilterd_output_dropped_total{output=\"webhook\",reason=\"queue_full\"}";
  const std::string failures = "gpufilterd_output_failures_total{output=\"webhook\"}";
  const std::string delivered = "gpufilterd_output_delivered_total{output=\"webhook\"}";
  double most_queued = 0;
  const auto watch = [&](const std::string& page) {
    const double queued = metric(page, depth).value_or(0);
    most_queued = std::max(most_queued, queued);
    EXPECT_LE(queued, kQueue);
  };
  const int fd = tcp_connect(daemon.listening());
  for (int wave = 0; wave < 20; ++wave) {
    std::string lines;
    for (int i = wave * 100; i < (wave + 1) * 100; ++i) lines += "MARK seq=" + std::to_string(i) + "\n";
    EXPECT_TRUE(write_all(fd, lines));
    watch(http_request("GET", "http://" + server + "/metrics").body);
    std::this_thread::sleep_for(50ms);
  }
  // The outage lasts until every alert was published and hundreds of attempts failed.
  std::string page = poll_metrics(
      server,
      [&](const std::string& p) {
        watch(p);
        return metric(p, published) == kLines && metric(p, failures).value_or(0) >= kCycles &&
               metric(p, dropped) == kLines - kQueue;
      },
      60s);
  ASSERT_EQ(metric(page, published), kLines) << daemon.log();
  ASSERT_GE(metric(page, failures).value_or(0), kCycles);
  EXPECT_EQ(metric(page, dropped), kLines - kQueue);
  EXPECT_EQ(metric(page, depth), kQueue);
  EXPECT_EQ(metric(page, delivered), 0.0);
  EXPECT_EQ(most_queued, kQueue);
  EXPECT_NE(daemon.log().find("output is failing"), std::string::npos);

  hook.set_status(200);
  page = poll_metrics(server, [&](const std::string& p) { return metric(p, delivered) == kQueue; }, 30s);
  EXPECT_EQ(metric(page, delivered), kQueue) << daemon.log();
  EXPECT_EQ(metric(page, dropped), kLines - kQueue);
  EXPECT_EQ(metric(page, depth), 0.0);
  ::close(fd);
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait_exit(30s), 0) << daemon.log();

  std::vector<long> sequence;
  double refused = 0;
  for (const ReceivedRequest& r : hook.requests()) {
    if (r.status == 503) {
      ++refused;
      continue;
    }
    EXPECT_EQ(r.status, 200u);
    const std::string line = json::parse(r.body).at("line");
    sequence.push_back(std::stol(line.substr(line.find("seq=") + 4)));
  }
  EXPECT_EQ(refused, metric(page, failures).value_or(-1));  // each failure is one 503, no more
  ASSERT_EQ(sequence.size(), static_cast<std::size_t>(kQueue));
  for (int i = 0; i < kQueue; ++i) EXPECT_EQ(sequence[static_cast<std::size_t>(i)], kLines - kQueue + i);
  std::printf("webhook down: %.0f failed attempts, %d alerts, %.0f dropped, %zu delivered in order\n", refused, kLines,
              metric(page, dropped).value_or(0), sequence.size());
}

// gpufilterd creates no directory: an alert file or a state file under a missing directory
// is refused at start (exit 2) with the path named, and nothing is created (a mistyped
// path once made a directory at the filesystem root). Existing directories still work.
TEST_F(Gpufilterd, AFileUnderAMissingDirectoryIsRefusedAndNothingIsCreated) {
  write_text(dir_ + "/auth.log", "");
  const auto config = [&](const std::string& state, const std::string& alerts) {
    write_text(dir_ + "/gpufilterd.yaml", R"(
sources:
  - follow: auth.log
    state: )" + state + R"(
rules:
  - name: r
    patterns: ["x"]
outputs:
  - type: jsonl
    path: )" + alerts + R"(
engine: cpu
server: "127.0.0.1:0"
)");
  };
  const struct {
    std::string state, alerts, named, missing;
  } cases[] = {
      {"follow.state", "missing/deeper/alerts.jsonl", dir_ + "/missing/deeper/alerts.jsonl", dir_ + "/missing"},
      {"nostate/follow.state", "alerts.jsonl", dir_ + "/nostate/follow.state", dir_ + "/nostate"},
  };
  for (const auto& c : cases) {
    config(c.state, c.alerts);
    Daemon daemon(dir_ + "/gpufilterd.yaml");
    EXPECT_EQ(daemon.wait_exit(30s), 2) << daemon.log();
    EXPECT_NE(daemon.log().find(c.named + ": refused: the directory"), std::string::npos) << daemon.log();
    EXPECT_FALSE(std::filesystem::exists(c.missing)) << c.missing;
  }
  // The same files in directories that exist: it starts, and stops with status 0.
  config("follow.state", "alerts.jsonl");
  Daemon daemon(dir_ + "/gpufilterd.yaml");
  EXPECT_FALSE(daemon.server().empty());
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait_exit(30s), 0) << daemon.log();
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/alerts.jsonl"));
}

// SIGTERM while the webhook never answers and drain_timeout is short: the alerts still
// queued are lost with the process, so the exit status says so (3, not 0) and the log
// names their number (gpufilterd_output_dropped_total{reason="shutdown"} counts them too).
TEST_F(Gpufilterd, ADrainThatTimesOutExitsNonZeroAndCountsTheLostAlerts) {
  HttpReceiver webhook;
  webhook.set_delay(3600s);  // hung: reads the request, never answers
  write_text(dir_ + "/auth.log", "");
  write_text(dir_ + "/gpufilterd.yaml", R"(
sources:
  - follow: auth.log
rules:
  - name: oom
    patterns: [Out of memory]
    cooldown: 0s
outputs:
  - type: webhook
    url: )" + webhook.url() + R"(/hook
    bearer_token_env: TEST_HOOK_TOKEN
    timeout: 60s
server: 127.0.0.1:0
engine: cpu
drain_timeout: 300ms
)");
  Daemon daemon(dir_ + "/gpufilterd.yaml", {"TEST_HOOK_TOKEN=t0ken"});
  ASSERT_FALSE(daemon.server().empty()) << daemon.log();
  append_text(dir_ + "/auth.log", "Out of memory 1\nOut of memory 2\nOut of memory 3\n");
  ASSERT_TRUE(webhook.wait_for_count(1, 20s)) << daemon.log();  // the first one is on the wire
  daemon.signal(SIGTERM);
  EXPECT_EQ(daemon.wait_exit(30s), 3) << daemon.log();
  EXPECT_NE(daemon.log().find("alerts lost: drain_timeout passed with alerts queued"), std::string::npos)
      << daemon.log();
  EXPECT_NE(daemon.log().find("output=webhook dropped=3"), std::string::npos) << daemon.log();
}

}  // namespace
}  // namespace gpufilter::test

namespace gpufilter::test {
namespace {

// A regex rule end to end: the OpenSSH sample and forged lines on standard input, the SSH
// rule of docs/DAEMON.md (fail2ban's <HOST>, anchored at the end, grouped by the host
// capture, the address in a label). Every address that failed a password alerts, with
// its own address; the addresses the forged user names carry never do.
TEST_F(Gpufilterd, RegexRuleWithHostCaptureOverTheOpenSshSample) {
  std::string input = read_file(corpus_path("loghub/OpenSSH_2k.log"));
  if (input.empty()) GTEST_SKIP() << "no corpus";
  input += "Dec 10 11:00:00 LabSZ sshd[1]: Failed password for invalid user x from 10.66.66.66 from 203.0.113.50 port 5 ssh2\n";
  input += "Dec 10 11:00:01 LabSZ sshd[1]: Failed password for invalid user y from 10.77.77.77 port 22 ssh2 from 203.0.113.51 port 6 ssh2\n";
  write_text(dir_ + "/gpufilterd.yaml", R"(
sources: [{stdin: true}]
engine: cpu
server: 127.0.0.1:0
rules:
  - name: ssh-password
    regex: 'Failed password for .* from <HOST> port \d+ ssh2\s*$'
    threshold: {count: 1, group_by: {capture: host}}
    cooldown: 1h
    labels: {address: "{{host}}"}
outputs:
  - type: jsonl
    path: alerts.jsonl
)");
  const ProcessResult r = run_process({gpufilterd_binary(), "--config", dir_ + "/gpufilterd.yaml"}, input);
  ASSERT_EQ(r.status, 0) << r.err;
  std::set<std::string> groups;
  for (const json& a : read_jsonl(dir_ + "/alerts.jsonl")) {
    if (a.value("state", "") != "firing") continue;
    const std::string group = a.at("labels").at("group");
    EXPECT_EQ(a.at("labels").at("address"), group);
    groups.insert(group);
  }
  EXPECT_TRUE(groups.count("183.62.140.253")) << groups.size();
  EXPECT_TRUE(groups.count("203.0.113.50"));
  EXPECT_TRUE(groups.count("203.0.113.51"));
  EXPECT_FALSE(groups.count("10.66.66.66"));
  EXPECT_FALSE(groups.count("10.77.77.77"));
  std::printf("%zu addresses alerted\n", groups.size());
}

// A fail2ban jail end to end: the stock sshd filter (read from /etc/fail2ban), maxretry 3
// as the rule's threshold, and an exec output (fail2ban's actionban) whose command gets
// the offending address, the jail's name, the failures and the user as arguments. The
// address below the threshold is not banned; standard input's end drains the output.
TEST_F(Gpufilterd, AFail2banRuleBansTheOffendingAddressThroughAnExecOutput) {
  if (!std::filesystem::exists("/etc/fail2ban/filter.d/sshd.conf")) GTEST_SKIP() << "no fail2ban";
  write_text(dir_ + "/ban", "#!/bin/sh\nprintf '%s\\0' \"$@\" >> \"$0.log\"\n", 0755);
  write_text(dir_ + "/gpufilterd.yaml", R"(
sources: [{stdin: true}]
engine: cpu
server: 127.0.0.1:0
rules:
  - name: sshd
    fail2ban_filter: sshd
    threshold: {count: 3, window: 10m, group_by: {capture: host}}
    cooldown: 10m
    labels: {user: "{{user}}"}
outputs:
  - type: exec
    name: ban
    fire: [./ban, ban, <ip>, <name>, <failures>, <F-USER>]
    timeout: 5s
)");
  std::string input;
  for (int i = 0; i < 4; ++i)
    input += "Dec 10 11:00:0" + std::to_string(i) + " LabSZ sshd[2420" + std::to_string(i) +
             "]: Failed password for root from 203.0.113.7 port 5000" + std::to_string(i) + " ssh2\n";
  for (int i = 0; i < 2; ++i)
    input += "Dec 10 11:00:1" + std::to_string(i) + " LabSZ sshd[2430" + std::to_string(i) +
             "]: Failed password for admin from 198.51.100.9 port 4000" + std::to_string(i) + " ssh2\n";
  const ProcessResult r = run_process({gpufilterd_binary(), "--config", dir_ + "/gpufilterd.yaml"}, input);
  ASSERT_EQ(r.status, 0) << r.err;
  std::string expected;
  for (const char* arg : {"ban", "203.0.113.7", "sshd", "3", "root"}) expected += std::string(arg) + '\0';
  EXPECT_EQ(read_file(dir_ + "/ban.log"), expected) << r.err;
}

// examples/daemon/fail2ban-nft.yaml passes --check where nft is installed; elsewhere
// --check refuses it for nft alone, and passes with another program in nft's place.
TEST_F(Gpufilterd, TheFail2banNftExampleChecks) {
  if (!std::filesystem::exists("/etc/fail2ban/filter.d/sshd.conf")) GTEST_SKIP() << "no fail2ban";
  const std::string example = source_dir() + "/examples/daemon/fail2ban-nft.yaml";
  const ProcessResult check = run_process({gpufilterd_binary(), "--config", example, "--check"});
  if (std::filesystem::exists("/usr/sbin/nft")) {
    EXPECT_EQ(check.status, 0) << check.err;
  } else {
    EXPECT_EQ(check.status, 2);
    EXPECT_NE(check.err.find("outputs[0].fire[0]: command /usr/sbin/nft: No such file or directory"),
              std::string::npos) << check.err;
  }
  std::string text = read_file(example);
  for (std::size_t at; (at = text.find("/usr/sbin/nft")) != std::string::npos;) text.replace(at, 13, "/bin/true");
  write_text(dir_ + "/fail2ban-nft.yaml", text);
  const ProcessResult replaced = run_process({gpufilterd_binary(), "--config", dir_ + "/fail2ban-nft.yaml", "--check"});
  EXPECT_EQ(replaced.status, 0) << replaced.err;
}

// ---------------------------------------------------------------------------------------
// Captures: `pcap:` and `interface:` sources. The oracle is tshark: its own decoder gives
// each frame's TCP and UDP payload, and its `-z follow,tcp,raw` each flow direction's
// bytes; what gpufilterd should alert is the lines of those that hold each pattern.

std::string unhex(const std::string& hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

// The lines of `text` ('\n'-cut; an unterminated last piece is a line) holding `pattern`.
int lines_holding(const std::string& text, const std::string& pattern) {
  int n = 0;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    if (std::string_view(text).substr(at, end - at).find(pattern) != std::string_view::npos) ++n;
    at = end + 1;
  }
  return n;
}

// Each TCP or UDP packet's payload, by tshark (`field`: "tcp.payload -e udp.payload", or one).
// ICMP errors are left out: tshark decodes the segment they quote as TCP or UDP too.
std::vector<std::string> tshark_payloads(const std::string& path, const std::string& field = "tcp.payload -e udp.payload") {
  std::istringstream out(command_output("tshark -n -r " + shell_quote(path) +
                                        " -Y 'not icmp and not icmpv6' -T fields -e " + field));
  std::vector<std::string> payloads;
  for (std::string line; std::getline(out, line);) {
    std::string hex;
    for (const char c : line)
      if (c != '\t' && c != ':' && c != ',') hex += c;
    payloads.push_back(unhex(hex));
  }
  return payloads;
}

// Each TCP flow direction of `path` as tshark follows it: (client -> server name, bytes).
std::vector<std::pair<std::string, std::string>> tshark_flows(const std::string& path) {
  std::set<int> ids;
  std::istringstream list(command_output("tshark -n -r " + shell_quote(path) + " -T fields -e tcp.stream"));
  for (std::string line; std::getline(list, line);)
    if (!line.empty()) ids.insert(std::stoi(line));
  std::string command = "tshark -n -r " + shell_quote(path) + " -q";
  for (const int id : ids) command += " -z follow,tcp,raw," + std::to_string(id);
  std::istringstream out(command_output(command));
  std::vector<std::pair<std::string, std::string>> flows;
  std::string node[2];
  for (std::string line; std::getline(out, line);) {
    if (line.starts_with("Node 0: ")) node[0] = line.substr(8);
    if (line.starts_with("Node 1: ")) {
      node[1] = line.substr(8);
      flows.emplace_back(node[0] + " -> " + node[1], "");
      flows.emplace_back(node[1] + " -> " + node[0], "");
    }
    if (flows.empty() || line.empty()) continue;
    if (line[0] == '\t') flows.back().second += unhex(line.substr(1));
    else if (line.find_first_not_of("0123456789abcdef") == std::string::npos) flows[flows.size() - 2].second += unhex(line);
  }
  return flows;
}

// A configuration with one rule per pattern (r0, r1, ...: every matching line alerts) and
// the alerts in alerts.jsonl.
std::string capture_config(const std::string& sources, const std::vector<std::string>& patterns) {
  std::string yaml = "sources:\n" + sources + "engine: cpu\nserver: 127.0.0.1:0\noutputs:\n"
                     "  - type: jsonl\n    path: alerts.jsonl\n    queue: 1000000\nrules:\n";
  for (std::size_t i = 0; i < patterns.size(); ++i)
    yaml += "  - name: r" + std::to_string(i) + "\n    patterns: [" + json(patterns[i]).dump() + "]\n    cooldown: 0s\n";
  return yaml;
}

// (source, rule) -> firing alerts.
using AlertCounts = std::map<std::pair<std::string, std::string>, int>;
AlertCounts alert_counts(const std::vector<json>& alerts) {
  AlertCounts counts;
  for (const json& a : alerts)
    if (a.at("state") == "firing") ++counts[{a.at("source").get<std::string>(), a.at("rule").get<std::string>()}];
  return counts;
}

const std::vector<std::string> kCaptures = {"smtp.pcap", "http.cap", "v6-http.cap", "http_redirects.pcapng",
                                            "dns.cap", "telnet-raw.pcap"};
// "r0", "r1", ...: the rules capture_config() makes. (Appended, not "r" + to_string(r):
// GCC 12 warns, wrongly, of an overlapping memcpy in that inlined insert, -Wrestrict.)
std::string rule_name(std::size_t r) {
  std::string name = "r";
  name += std::to_string(r);
  return name;
}

const std::vector<std::string> kCapturePatterns = {"MAIL FROM", "RCPT TO", "GET /", "Host:", "HTTP/1.1 30",
                                                   "Content-Type", "google", "fake", "/sbin/ping", "<"};

// Per packet: every capture is one stream, each packet's payload its own lines. The alerts
// of each rule and capture are the lines of tshark's payloads that hold the pattern; all
// six files are the only sources, so the run ends when they are read (exit 0). The BPF
// filter keeps TCP and UDP: other packets (ICMP errors quote the segment they answer) are
// matched as the decoder gives them, which tshark's payload fields do not say.
TEST_F(Gpufilterd, CapturePerPacketLinesAreTsharksPayloadLines) {
  GPUFILTER_REQUIRE_TSHARK();
  std::string sources;
  AlertCounts expected;
  for (const std::string& file : kCaptures) {
    const std::string path = corpus_path("pcap/" + file);
    sources += "  - pcap: " + path + "\n    bpf: tcp or udp\n";
    const std::vector<std::string> payloads = tshark_payloads(path);
    ASSERT_FALSE(payloads.empty()) << path;
    for (std::size_t r = 0; r < kCapturePatterns.size(); ++r) {
      int n = 0;
      for (const std::string& p : payloads) n += lines_holding(p, kCapturePatterns[r]);
      if (n > 0) expected[{"pcap:" + path, rule_name(r)}] = n;
    }
  }
  write_text(dir_ + "/gpufilterd.yaml", capture_config(sources, kCapturePatterns));
  const ProcessResult r = run_process({gpufilterd_binary(), "--config", dir_ + "/gpufilterd.yaml"});
  ASSERT_EQ(r.status, 0) << r.err;
  const AlertCounts got = alert_counts(read_jsonl(dir_ + "/alerts.jsonl"));
  EXPECT_EQ(got, expected);
  // A word typed one character per packet is in no packet.
  EXPECT_EQ(expected.count({"pcap:" + corpus_path("pcap/telnet-raw.pcap"), "r7"}), 0u);
  EXPECT_EQ(expected.at({"pcap:" + corpus_path("pcap/smtp.pcap"), "r0"}), 1);
  std::size_t alerts = 0;
  for (const auto& [key, n] : got) alerts += static_cast<std::size_t>(n);
  std::printf("%zu alerts over %zu (capture, rule) pairs, as tshark's payloads say\n", alerts, got.size());
}

// Per flow (stream: true): each TCP flow direction is a stream of its own, named by its
// ends, reassembled, so a word typed one character per packet (telnet) is found; its
// alerts are the lines of tshark's followed streams that hold the pattern. UDP stays per
// packet (DNS) in the capture's stream.
TEST_F(Gpufilterd, CapturePerFlowLinesAreTsharksFollowedStreams) {
  GPUFILTER_REQUIRE_TSHARK();
  std::string sources;
  AlertCounts expected;
  for (const std::string& file : kCaptures) {
    const std::string path = corpus_path("pcap/" + file);
    sources += "  - pcap: " + path + "\n    bpf: tcp or udp\n    stream: true\n";
    const std::vector<std::pair<std::string, std::string>> flows = tshark_flows(path);
    const std::vector<std::string> datagrams = tshark_payloads(path, "udp.payload");
    for (std::size_t r = 0; r < kCapturePatterns.size(); ++r) {
      const std::string rule = rule_name(r);
      for (const auto& [name, bytes] : flows) {
        const int n = lines_holding(bytes, kCapturePatterns[r]);
        if (n > 0) expected[{"pcap:" + path + " " + name, rule}] += n;
      }
      int n = 0;
      for (const std::string& p : datagrams) n += lines_holding(p, kCapturePatterns[r]);
      if (n > 0) expected[{"pcap:" + path, rule}] = n;
    }
  }
  write_text(dir_ + "/gpufilterd.yaml", capture_config(sources, kCapturePatterns));
  const ProcessResult r = run_process({gpufilterd_binary(), "--config", dir_ + "/gpufilterd.yaml"});
  ASSERT_EQ(r.status, 0) << r.err;
  const AlertCounts got = alert_counts(read_jsonl(dir_ + "/alerts.jsonl"));
  EXPECT_EQ(got, expected);
  const std::string telnet = "pcap:" + corpus_path("pcap/telnet-raw.pcap");
  EXPECT_EQ(got.count({telnet + " 192.168.0.2:1254 -> 192.168.0.1:23", "r7"}), 1u) << "the typed login";
  EXPECT_EQ(got.count({telnet + " 192.168.0.1:23 -> 192.168.0.2:1254", "r8"}), 1u) << "the echoed command";
  std::printf("%zu (flow direction, rule) pairs alerted, as tshark's followed streams say\n", got.size());
}

// A truncated capture: the packets before the cut are read and alert, the log names the
// file and the place, the source ends (and with it the run, exit 0). Beside a socket, a
// capture file that has been read simply stops: the daemon runs on until SIGTERM, and
// /metrics counts its packets, its flow, and its flows' lines under the capture's name.
TEST_F(Gpufilterd, ATruncatedCaptureKeepsWhatCameBeforeAndAFinishedOneBesideASocketStops) {
  const std::string smtp = read_file(corpus_path("pcap/smtp.pcap"));
  ASSERT_GT(smtp.size(), 1000u);
  write_text(dir_ + "/cut.pcap", smtp.substr(0, smtp.size() - 100));
  write_text(dir_ + "/gpufilterd.yaml", capture_config("  - pcap: cut.pcap\n", {"MAIL FROM", "RCPT TO"}));
  const ProcessResult r = run_process({gpufilterd_binary(), "--config", dir_ + "/gpufilterd.yaml"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("level=warn"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(dir_ + "/cut.pcap: truncated capture at byte "), std::string::npos) << r.err;
  const AlertCounts cut = alert_counts(read_jsonl(dir_ + "/alerts.jsonl"));
  EXPECT_EQ(cut.size(), 2u) << r.err;

  std::filesystem::remove(dir_ + "/alerts.jsonl");
  const std::string path = corpus_path("pcap/smtp.pcap");
  std::size_t packets = 0;
  RawPacket raw;
  for (const auto reader = PcapReader::open_file(path); reader->next(raw);) ++packets;
  write_text(dir_ + "/gpufilterd.yaml",
             capture_config("  - pcap: " + path + "\n    stream: true\n  - listen: tcp://127.0.0.1:0\n", {"MAIL FROM"}));
  Daemon daemon(dir_ + "/gpufilterd.yaml");
  const std::string server = daemon.server();
  const auto deadline = Clock::now() + 20s;
  while (read_jsonl(dir_ + "/alerts.jsonl").empty() && Clock::now() < deadline) std::this_thread::sleep_for(20ms);
  EXPECT_EQ(read_jsonl(dir_ + "/alerts.jsonl").size(), 1u) << daemon.log();
  EXPECT_FALSE(daemon.wait_exit(500ms).has_value()) << "ended with the capture: " << daemon.log();
  // The capture's counters, and its flows' lines under the capture's own name.
  const std::string lines = "gpufilterd_lines_scanned_total{source=\"pcap:" + path + "\"}";
  const std::string page = poll_metrics(
      server,
      [&](const std::string& p) {
        return metric(p, "gpufilterd_source_packets_total") == static_cast<double>(packets) &&
               metric(p, lines).value_or(0) > 0;
      },
      10s);
  EXPECT_EQ(metric(page, "gpufilterd_source_packets_total"), static_cast<double>(packets)) << page;
  EXPECT_EQ(metric(page, "gpufilterd_source_tcp_flows_total"), 1.0);
  EXPECT_EQ(metric(page, "gpufilterd_source_tcp_gaps_total"), 0.0);
  EXPECT_GT(metric(page, lines).value_or(0), 100.0) << page;
  EXPECT_EQ(page.find(" -> "), std::string::npos) << "a flow's name as a label: " << page;
  daemon.signal(SIGTERM);
  const std::optional<int> status = daemon.wait_exit(20s);
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(*status, 0) << daemon.log();
}

// A missing capture file and a BPF filter libpcap rejects are configuration errors, named
// with the file, the line and the key, by --check and by the start alike (exit status 2).
TEST_F(Gpufilterd, CaptureMistakesAreConfigErrorsWithFileAndLine) {
  const std::string smtp = corpus_path("pcap/smtp.pcap");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"  - pcap: missing.pcap\n", "gpufilterd.yaml:2: sources[0].pcap: " + dir_ + "/missing.pcap: No such file"},
      {"  - pcap: " + smtp + "\n    bpf: tcp prot 25\n", "gpufilterd.yaml:3: sources[0].bpf: tcp prot 25: "},
      {"  - interface: lo\n    bpf: \"host nonsense..\"\n", "gpufilterd.yaml:3: sources[0].bpf: host nonsense..: "},
  };
  for (const auto& [sources, expected] : cases) {
    write_text(dir_ + "/gpufilterd.yaml", capture_config(sources, {"x"}));
    const ProcessResult check = run_process({gpufilterd_binary(), "--config", dir_ + "/gpufilterd.yaml", "--check"});
    EXPECT_EQ(check.status, 2) << sources;
    EXPECT_NE(check.err.find(expected), std::string::npos) << check.err;
    const ProcessResult start = run_process({gpufilterd_binary(), "--config", dir_ + "/gpufilterd.yaml"});
    EXPECT_EQ(start.status, 2) << sources;
    EXPECT_NE(start.err.find(expected), std::string::npos) << start.err;
  }
}

// A live capture on the loopback interface (skipped without CAP_NET_RAW): a word written
// in two segments of a TCP connection is found per flow; at SIGTERM the capture ends at
// once (libpcap's wait is broken) and the flow's unterminated last line is still scanned.
TEST_F(Gpufilterd, LiveCaptureOnLoopbackFindsSplitWordsAndStopsAtOnce) {
  try {
    (void)PcapReader::open_live("lo");
  } catch (const Error& e) {
    GTEST_SKIP() << "cannot capture on lo: " << e.what();
  }
  std::uint16_t port_number = 0;
  const int server = gpufilter::test::tcp_listen_loopback(1, port_number);
  ASSERT_GE(server, 0);
  const std::string port = std::to_string(port_number);
  write_text(dir_ + "/gpufilterd.yaml",
             capture_config("  - interface: lo\n    bpf: tcp port " + port + "\n    stream: true\n", {"LIVEWORD"}));
  Daemon daemon(dir_ + "/gpufilterd.yaml");
  daemon.server();  // the capture is open once the daemon says it started
  const int client = tcp_connect("tcp://127.0.0.1:" + port);
  const int accepted = ::accept4(server, nullptr, nullptr, SOCK_CLOEXEC);
  ASSERT_GE(accepted, 0);
  const int one = 1;
  ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  EXPECT_TRUE(write_all(client, "first LIVE"));
  std::this_thread::sleep_for(50ms);
  EXPECT_TRUE(write_all(client, "WORD line\nlast LIVEWORD, unterminated"));
  const auto deadline = Clock::now() + 20s;
  while (read_jsonl(dir_ + "/alerts.jsonl").empty() && Clock::now() < deadline) std::this_thread::sleep_for(20ms);
  std::vector<json> alerts = read_jsonl(dir_ + "/alerts.jsonl");
  ASSERT_EQ(alerts.size(), 1u) << daemon.log();
  EXPECT_EQ(alerts[0].at("line"), "first LIVEWORD line");
  EXPECT_EQ(alerts[0].at("source").get<std::string>().rfind("interface:lo 127.0.0.1:", 0), 0u);
  const auto stopping = Clock::now();
  daemon.signal(SIGTERM);
  const std::optional<int> status = daemon.wait_exit(20s);
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(*status, 0) << daemon.log();
  EXPECT_LT(Clock::now() - stopping, 5s);
  alerts = read_jsonl(dir_ + "/alerts.jsonl");
  ASSERT_EQ(alerts.size(), 2u) << daemon.log();
  EXPECT_EQ(alerts[1].at("line"), "last LIVEWORD, unterminated");
  ::close(client);
  ::close(accepted);
  ::close(server);
}

}  // namespace
}  // namespace gpufilter::test
