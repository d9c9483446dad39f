// The systemd journal as fail2ban's systemd backend reads it (issue 23, jails' `backend =
// systemd`): real journal files made by systemd-journal-remote from the export format, read
// by the real journalctl. journal_line() against fail2ban's formatJournalEntry() (its cases
// written out here), `gpufilterd --test-filter FILTER systemd-journal[journalfiles=...]`
// against `fail2ban-regex` on the same file (the addresses of every failure, and the
// summary's Lines:), a `backend = systemd` jail's alerts, a `journal:` source, and what is
// refused. Skipped where systemd-journal-remote or journalctl is missing (the README's
// set-up installs both; fail2ban-regex's side also needs python3-systemd).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gpufilter/sources/journal_reader.hpp"
#include "testutil/testutil.hpp"

namespace {

using namespace gpufilter;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

const std::string kRemote = "/lib/systemd/systemd-journal-remote";
const std::string kJournalctl = "/usr/bin/journalctl";
const std::string kRegexTool = "/usr/bin/fail2ban-regex";

using Entry = std::vector<std::pair<std::string, std::string>>;

// One entry of the journal export format: FIELD=value lines, a binary-safe form for a value
// holding a newline, an empty line at the end.
std::string exported(const Entry& e) {
  std::string out;
  for (const auto& [k, v] : e) {
    if (v.find('\n') == std::string::npos) {
      out += k + "=" + v + "\n";
      continue;
    }
    out += k + "\n";
    const std::uint64_t n = v.size();
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
    out += v + "\n";
  }
  return out + "\n";
}

struct Folder {
  std::string dir;
  Folder() {
    char pattern[] = "/tmp/gpufilterd-journal-XXXXXX";
    dir = ::mkdtemp(pattern);
    ::chmod(dir.c_str(), 0755);
  }
  ~Folder() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

void write_text(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
  ::chmod(path.c_str(), 0644);
}

// A journal file of `entries` (systemd-journal-remote writes it; journalctl reads it).
std::string make_journal(const Folder& f, const std::string& name, const std::vector<Entry>& entries) {
  std::string input;
  for (const Entry& e : entries) input += exported(e);
  const std::string path = f.dir + "/" + name + ".journal";
  const auto r = test::run_process({kRemote, "--output=" + path, "-"}, input);
  EXPECT_EQ(r.status, 0) << r.err;
  return path;
}

// SIGTERM to a running gpufilterd: its exit status (128 + the signal that ended it).
int stop(const test::SpawnedProcess& child) {
  ::kill(child.pid, SIGTERM);
  int status = 0;
  ::waitpid(child.pid, &status, 0);
  ::close(child.out);
  ::close(child.err);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool journal_tools() { return fs::exists(kRemote) && fs::exists(kJournalctl); }

// An sshd entry: the message, at `t` microseconds, from PID `pid` on host `host`.
Entry sshd(const std::string& message, std::int64_t t, int pid = 4242, const std::string& host = "web1") {
  return {{"__REALTIME_TIMESTAMP", std::to_string(t)},
          {"__MONOTONIC_TIMESTAMP", std::to_string(t - 1700000000000000LL)},
          {"_BOOT_ID", "0123456789abcdef0123456789abcdef"},
          {"_HOSTNAME", host},
          {"SYSLOG_IDENTIFIER", "sshd"},
          {"_COMM", "sshd"},
          {"_PID", std::to_string(pid)},
          {"_SYSTEMD_UNIT", "sshd.service"},
          {"PRIORITY", "6"},
          {"MESSAGE", message}};
}

// formatJournalEntry()'s cases (fail2ban 1.0.2, server/filtersystemd.py), written out.
TEST(Journal, LinesAsFail2banFormatsEntries) {
  const auto line = [](const nlohmann::json& j) { return journal_line(j.dump()); };
  EXPECT_EQ(line({{"_HOSTNAME", "h"}, {"SYSLOG_IDENTIFIER", "sshd"}, {"_PID", "12"}, {"MESSAGE", "hi"}}).text,
            "h sshd[12]: hi");
  // SYSLOG_PID before _PID, _COMM where there is no identifier, no host, no PID.
  EXPECT_EQ(line({{"_COMM", "cron"}, {"SYSLOG_PID", "7"}, {"_PID", "8"}, {"MESSAGE", "x"}}).text, "cron[7]: x");
  EXPECT_EQ(line({{"SYSLOG_IDENTIFIER", "su"}, {"MESSAGE", "m"}}).text, "su: m");
  EXPECT_EQ(line({{"MESSAGE", "bare"}}).text, "bare");
  EXPECT_EQ(line({{"_HOSTNAME", "h"}}).text, "h ");
  // A PID python's int() does not read stays bytes; 0 is no PID ("if v:").
  EXPECT_EQ(line({{"SYSLOG_IDENTIFIER", "a"}, {"SYSLOG_PID", "x1"}, {"MESSAGE", "m"}}).text, "a[b'x1']: m");
  EXPECT_EQ(line({{"SYSLOG_IDENTIFIER", "a"}, {"_PID", "0"}, {"MESSAGE", "m"}}).text, "a: m");
  // Newlines as "\n"; a value that is not UTF-8 (journalctl: an array of bytes); several
  // MESSAGE values joined by a space.
  EXPECT_EQ(line({{"SYSLOG_IDENTIFIER", "a"}, {"MESSAGE", "one\ntwo"}}).text, "a: one\\ntwo");
  EXPECT_EQ(line({{"MESSAGE", {104, 0xff, 105}}}).text, "h\xffi");
  EXPECT_EQ(line({{"MESSAGE", {"a", "b"}}}).text, "a b");
  // The kernel's lines carry their monotonic time.
  EXPECT_EQ(line({{"SYSLOG_IDENTIFIER", "kernel"}, {"__MONOTONIC_TIMESTAMP", "1500000"}, {"MESSAGE", "m"}}).text,
            "kernel: [    1.500000] m");
  EXPECT_EQ(line({{"SYSLOG_IDENTIFIER", "kernel"}, {"_SOURCE_MONOTONIC_TIMESTAMP", "2000001"},
                  {"__MONOTONIC_TIMESTAMP", "9"}, {"MESSAGE", "m"}}).text,
            "kernel: [    2.000001] m");
  // The time: the source's when given, else the journal's.
  EXPECT_DOUBLE_EQ(line({{"__REALTIME_TIMESTAMP", "1764800000250000"}}).time, 1764800000.25);
  EXPECT_DOUBLE_EQ(line({{"__REALTIME_TIMESTAMP", "1764800000250000"}, {"_SOURCE_REALTIME_TIMESTAMP", "1764800001000000"}}).time,
                   1764800001.0);
  EXPECT_THROW(journal_line("[1]"), std::invalid_argument);
  EXPECT_THROW(journal_line("{"), std::invalid_argument);
}

TEST(Journal, JournalctlArguments) {
  JournalConfig c;
  c.files = {"/j/a.journal"};
  c.matches = {"_SYSTEMD_UNIT=sshd.service", "+", "_COMM=sshd"};
  c.since = 1764800000.5;
  EXPECT_EQ(journalctl_argv(c),
            (std::vector<std::string>{"journalctl", "--output=json", "--all", "--no-pager", "--quiet", "--follow",
                                      "--no-tail", "--file=/j/a.journal", "--since=@1764800000.500000", "--",
                                      "_SYSTEMD_UNIT=sshd.service", "+", "_COMM=sshd"}));
  JournalConfig now;  // following from now: none of the entries stored
  now.system_only = true;
  EXPECT_EQ(journalctl_argv(now), (std::vector<std::string>{"journalctl", "--output=json", "--all", "--no-pager",
                                                            "--quiet", "--follow", "--lines=0", "--system"}));
}

// The OpenSSH sample's messages as sshd entries (a second apart, per-copy PIDs), forged
// user names among them, and entries of other units that the filter's journalmatch leaves
// out.
std::vector<Entry> sample_entries(std::int64_t start_us, std::size_t limit = 2000) {
  std::ifstream in(test::corpus_path("loghub/OpenSSH_2k.log"), std::ios::binary);
  std::vector<Entry> out;
  std::int64_t t = start_us;
  for (std::string l; std::getline(in, l) && out.size() < limit;) {
    while (!l.empty() && l.back() == '\r') l.pop_back();
    const std::size_t colon = l.find("]: ");
    const std::size_t bracket = l.find("sshd[");
    if (colon == std::string::npos || bracket == std::string::npos) continue;
    const int pid = std::stoi(l.substr(bracket + 5, colon - bracket - 5));
    // A host name where fail2ban-regex looks its address up (and finds none here, without
    // DNS): gpufilterd never looks up and reports the name (docs/DAEMON.md).
    if (std::regex_search(l, std::regex("rhost=\\S*[a-zA-Z]"))) continue;
    out.push_back(sshd(l.substr(colon + 3), t += 1'000'000, pid));
    if (out.size() % 97 == 0)
      out.push_back(sshd("Invalid user from 10.9.9.9 from 198.51.100.7 port 22", t += 1'000'000, 77));
    if (out.size() % 89 == 0) {
      Entry other = sshd("Failed password for root from 203.0.113.5 port 22 ssh2", t += 1'000'000, 78);
      for (auto& [k, v] : other)
        if (k == "_SYSTEMD_UNIT") v = "other.service";
        else if (k == "SYSLOG_IDENTIFIER" || k == "_COMM") v = "other";
      out.push_back(other);
    }
  }
  return out;
}

std::vector<std::string> sorted_lines(const std::string& text) {
  std::vector<std::string> v;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) v.push_back(l);
  std::sort(v.begin(), v.end());
  return v;
}

// From "Lines:" on, without the time it took.
std::string from_lines(const std::string& text) {
  const std::size_t at = text.find("\nLines: ");
  if (at == std::string::npos) return "";
  std::string out;
  std::istringstream in(text.substr(at + 1));
  for (std::string l; std::getline(in, l);)
    if (!l.starts_with("[processed in")) out += l + "\n";
  return out;
}

// --test-filter on a journal, beside fail2ban-regex on the same journal file.
TEST(Journal, TestFilterReadsTheJournalAsFail2banRegex) {
  if (!journal_tools()) GTEST_SKIP() << "systemd-journal-remote or journalctl is not installed";
  Folder f;
  const std::string file = make_journal(f, "auth", sample_entries(1764800000000000LL));
  const std::string log = "systemd-journal[journalfiles=" + file + "]";
  for (const char* filter : {"sshd", "sshd[mode=aggressive]"}) {
    const auto ours = test::run_process({test::gpufilterd_binary(), "--test-filter", filter, log, "--out", "ip"});
    ASSERT_EQ(ours.status, 0) << ours.err;
    const std::vector<std::string> lists = {"--print-all-matched", "--print-all-missed", "--print-all-ignored"};
    std::vector<std::string> argv = {test::gpufilterd_binary(), "--test-filter", filter, log};
    argv.insert(argv.end(), lists.begin(), lists.end());
    const auto summary = test::run_process(argv);
    ASSERT_EQ(summary.status, 0) << summary.err;
    EXPECT_GT(sorted_lines(ours.out).size(), 300u) << filter;
    // -o msg: each failure's lines as fail2ban's journal tuple joins them, after the
    // entry's time and a space.
    const auto msgs = test::run_process({test::gpufilterd_binary(), "--test-filter", filter, log, "--out", "msg"});
    ASSERT_EQ(msgs.status, 0) << msgs.err;
    static const std::regex timed(R"(^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{6})?[+-][0-9]{2}:[0-9]{2} \S)");
    EXPECT_GE(sorted_lines(msgs.out).size(), sorted_lines(ours.out).size()) << filter;
    for (const std::string& m : sorted_lines(msgs.out)) EXPECT_TRUE(std::regex_search(m, timed)) << m;
    for (const std::string& ip : sorted_lines(ours.out)) {
      EXPECT_NE(ip, "203.0.113.5") << filter << ": an entry of other.service, which journalmatch leaves out";
      EXPECT_NE(ip, "10.9.9.9") << filter << ": the forged address";
    }
    const bool oracle = fs::exists(kRegexTool) &&
                        test::run_process({"/usr/bin/python3", "-c", "import systemd.journal"}).status == 0;
    if (!oracle) continue;
    const auto theirs = test::run_process({kRegexTool, "-o", "ip", log, filter});
    ASSERT_EQ(theirs.status, 0) << theirs.err;
    EXPECT_EQ(sorted_lines(ours.out), sorted_lines(theirs.out)) << filter;
    // The summary and every line listed, each after its time (local, with its offset).
    argv = {kRegexTool};
    argv.insert(argv.end(), lists.begin(), lists.end());
    argv.insert(argv.end(), {log, filter});
    const auto their_summary = test::run_process(argv);
    EXPECT_FALSE(from_lines(summary.out).empty());
    EXPECT_EQ(from_lines(summary.out), from_lines(their_summary.out)) << filter;
    const auto their_msgs = test::run_process({kRegexTool, "-o", "msg", log, filter});
    EXPECT_EQ(msgs.out, their_msgs.out) << filter;
  }
  // -m/--journalmatch over the filter's: the forged entries' PID alone.
  const auto other = test::run_process({test::gpufilterd_binary(), "--test-filter", "sshd", log, "-m", "_PID=77",
                                        "--out", "ip"});
  ASSERT_EQ(other.status, 0) << other.err;
  EXPECT_FALSE(other.out.empty());
  for (const std::string& ip : sorted_lines(other.out)) EXPECT_EQ(ip, "198.51.100.7");
  if (fs::exists(kRegexTool) && test::run_process({"/usr/bin/python3", "-c", "import systemd.journal"}).status == 0) {
    const auto theirs = test::run_process({kRegexTool, "-o", "ip", "-m", "_PID=77", log, "sshd"});
    EXPECT_EQ(sorted_lines(other.out), sorted_lines(theirs.out));
  }
}

// The number of failures of each address (--test-filter --out ip).
std::map<std::string, int> failures_by_host(const std::string& out) {
  std::map<std::string, int> n;
  for (const std::string& ip : sorted_lines(out)) ++n[ip];
  return n;
}

// A `backend = systemd` jail reading a journal file from its start: an alert for every
// address with maxretry failures, at the journal's time; then the same jail without
// from_start, which begins findtime before now and so finds none of these old entries.
TEST(Journal, ASystemdJailAlertsOnTheJournalsClock) {
  if (!journal_tools()) GTEST_SKIP() << "systemd-journal-remote or journalctl is not installed";
  Folder f;
  fs::copy("/etc/fail2ban/filter.d", f.dir + "/filter.d", fs::copy_options::recursive);
  for (const char* conf : {"jail.conf", "paths-common.conf", "paths-debian.conf"})
    fs::copy_file(std::string("/etc/fail2ban/") + conf, f.dir + "/" + conf);
  // Failures an hour apart do not add up within findtime (10 minutes); three close ones do.
  std::vector<Entry> entries;
  const std::int64_t t0 = 1764800000000000LL;
  for (int i = 0; i < 3; ++i) entries.push_back(sshd("Failed password for root from 192.0.2.1 port 22 ssh2", t0 + i * 3'600'000'000LL, 10 + i));
  for (int i = 0; i < 3; ++i) entries.push_back(sshd("Failed password for root from 192.0.2.2 port 22 ssh2", t0 + 4 * 3'600'000'000LL + i * 1'000'000, 20 + i));
  const std::string file = make_journal(f, "auth", entries);
  write_text(f.dir + "/jail.local", "[sshd]\nenabled = true\nbackend = systemd[journalfiles=" + file + "]\nmaxretry = 3\n"
                                    // fail2ban adds each line as a match of its own, ORed
                                    "journalmatch = _SYSTEMD_UNIT=sshd.service\n  _COMM=\"no such\"\n");
  for (const bool from_start : {true, false}) {
    std::error_code ec;
    fs::remove(f.dir + "/alerts.jsonl", ec);
    write_text(f.dir + "/g.yaml", "fail2ban_dir: " + f.dir + "\nfail2ban: {jails: " + f.dir + ", from_start: " +
                                      (from_start ? "true" : "false") + "}\nengine: cpu\nserver: 127.0.0.1:0\n"
                                      "outputs: [{type: jsonl, path: " + f.dir + "/alerts.jsonl}]\n");
    const auto check = test::run_process({test::gpufilterd_binary(), "--check", "--config", f.dir + "/g.yaml"});
    ASSERT_EQ(check.status, 0) << check.err;
    const auto child = test::spawn_process({test::gpufilterd_binary(), "--config", f.dir + "/g.yaml"});
    ::close(child.in);
    std::vector<nlohmann::json> alerts;
    for (const auto deadline = std::chrono::steady_clock::now() + (from_start ? 10s : 2s);
         std::chrono::steady_clock::now() < deadline && alerts.empty();) {
      std::this_thread::sleep_for(100ms);
      std::ifstream in(f.dir + "/alerts.jsonl");
      for (std::string l; std::getline(in, l);)
        if (!l.empty()) alerts.push_back(nlohmann::json::parse(l));
    }
    std::this_thread::sleep_for(300ms);  // and no more come
    EXPECT_EQ(stop(child), 0);
    alerts.clear();
    std::ifstream in(f.dir + "/alerts.jsonl");
    for (std::string l; std::getline(in, l);)
      if (!l.empty()) alerts.push_back(nlohmann::json::parse(l));
    if (!from_start) {
      EXPECT_TRUE(alerts.empty()) << alerts.front().dump();
      continue;
    }
    ASSERT_EQ(alerts.size(), 1u);
    EXPECT_EQ(alerts[0]["group"], "192.0.2.2");
    EXPECT_EQ(alerts[0]["source"], "journal:sshd");
    EXPECT_EQ(alerts[0]["labels"]["jail"], "sshd");
    EXPECT_EQ(alerts[0]["labels"]["user"], "root");
    EXPECT_EQ(alerts[0]["line"], "web1 sshd[22]: Failed password for root from 192.0.2.2 port 22 ssh2");
    EXPECT_EQ(alerts[0]["starts_at"], "2025-12-04T02:13:22.000Z");  // the journal's time of the third
  }
}

// A `journal:` source beside a rule of literals and a fail2ban rule: each entry is the
// line fail2ban makes of it; not following, the daemon ends with journalctl's output.
TEST(Journal, AJournalSourceEndsWithItsEntriesWhenNotFollowing) {
  if (!journal_tools()) GTEST_SKIP() << "systemd-journal-remote or journalctl is not installed";
  Folder f;
  const std::vector<Entry> entries = sample_entries(1764800000000000LL, 400);
  const std::string file = make_journal(f, "auth", entries);
  write_text(f.dir + "/g.yaml", "sources: [{journal: {files: [" + file + "], follow: false, from_start: true, "
                                "matches: \"_SYSTEMD_UNIT=sshd.service + _COMM=sshd\"}}]\nengine: cpu\n"
                                "server: 127.0.0.1:0\nrules:\n"
                                "  - {name: ssh, fail2ban_filter: sshd, threshold: {count: 1, group_by: {capture: host}}, cooldown: 1d}\n"
                                "  - {name: other, patterns: [\"other[\"]}\n"
                                "outputs: [{type: jsonl, path: " + f.dir + "/alerts.jsonl}]\n");
  const auto r = test::run_process({test::gpufilterd_binary(), "--config", f.dir + "/g.yaml"});
  ASSERT_EQ(r.status, 0) << r.err;
  std::set<std::string> hosts;
  std::ifstream in(f.dir + "/alerts.jsonl");
  for (std::string l; std::getline(in, l);) {
    const auto a = nlohmann::json::parse(l);
    EXPECT_EQ(a["rule"], "ssh") << l;  // other.service's entries are not read
    EXPECT_TRUE(a["line"].get<std::string>().starts_with("web1 sshd[")) << l;
    hosts.insert(a["group"].get<std::string>());
  }
  const auto ours = test::run_process({test::gpufilterd_binary(), "--test-filter", "sshd",
                                       "systemd-journal[journalfiles=" + file + "]", "--out", "ip"});
  ASSERT_EQ(ours.status, 0) << ours.err;
  const std::map<std::string, int> want = failures_by_host(ours.out);
  std::set<std::string> want_hosts;
  for (const auto& [h, n] : want) want_hosts.insert(h);
  EXPECT_EQ(hosts, want_hosts);
}

// Following a journal folder: entries written after the start (a new journal file, as
// journald's rotation makes one) reach the rules while the daemon runs, within seconds.
TEST(Journal, AFollowedJournalDeliversNewEntries) {
  if (!journal_tools()) GTEST_SKIP() << "systemd-journal-remote or journalctl is not installed";
  Folder f;
  fs::create_directories(f.dir + "/journal");
  const auto now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::system_clock::now().time_since_epoch()).count();
  (void)make_journal(f, "journal/a", {sshd("Failed password for root from 192.0.2.9 port 22 ssh2", now_us - 5'000'000, 50)});
  write_text(f.dir + "/g.yaml", "sources: [{journal: {directory: " + f.dir + "/journal, since: 1m}}]\nengine: cpu\n"
                                "server: 127.0.0.1:0\nrules:\n"
                                "  - {name: ssh, fail2ban_filter: sshd, threshold: {count: 2, window: 10m, group_by: {capture: host}}, cooldown: 1d}\n"
                                "outputs: [{type: jsonl, path: " + f.dir + "/alerts.jsonl}]\n");
  const auto child = test::spawn_process({test::gpufilterd_binary(), "--config", f.dir + "/g.yaml"});
  ::close(child.in);
  std::this_thread::sleep_for(1s);
  (void)make_journal(f, "journal/b", {sshd("Failed password for root from 192.0.2.9 port 22 ssh2", now_us - 1'000'000, 51)});
  std::string alerts;
  for (const auto deadline = std::chrono::steady_clock::now() + 15s;
       std::chrono::steady_clock::now() < deadline && alerts.empty(); std::this_thread::sleep_for(50ms)) {
    std::ifstream in(f.dir + "/alerts.jsonl");
    alerts.assign(std::istreambuf_iterator<char>(in), {});
  }
  EXPECT_EQ(stop(child), 0);
  EXPECT_NE(alerts.find("\"group\":\"192.0.2.9\""), std::string::npos) << alerts;
  EXPECT_NE(alerts.find("sshd[51]"), std::string::npos) << alerts;  // the entry written while it ran
}

// What cannot be read is refused with exit status 2 and says why.
TEST(Journal, WhatCannotBeReadIsRefused) {
  if (!journal_tools()) GTEST_SKIP() << "systemd-journal-remote or journalctl is not installed";
  Folder f;
  write_text(f.dir + "/not-a-journal", "hello\n");
  const auto bad = test::run_process({test::gpufilterd_binary(), "--test-filter", "sshd",
                                      "systemd-journal[journalfiles=" + f.dir + "/not-a-journal]"});
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("journalctl exited with status 1"), std::string::npos) << bad.err;
  const auto none = test::run_process({test::gpufilterd_binary(), "--test-filter", "sshd",
                                       "systemd-journal[journalfiles=" + f.dir + "/none-*.journal]"});
  EXPECT_EQ(none.status, 2);
  EXPECT_NE(none.err.find("no journal file matches"), std::string::npos) << none.err;
  const auto option = test::run_process({test::gpufilterd_binary(), "--test-filter", "sshd", "systemd-journal[bogus=1]"});
  EXPECT_EQ(option.status, 2);
  EXPECT_NE(option.err.find("bogus"), std::string::npos) << option.err;
  write_text(f.dir + "/g.yaml", "sources: [{journal: {matches: [nonsense]}}]\nrules: [{name: a, patterns: [x]}]\n");
  const auto config = test::run_process({test::gpufilterd_binary(), "--check", "--config", f.dir + "/g.yaml"});
  EXPECT_EQ(config.status, 2);
  EXPECT_NE(config.err.find("is not FIELD=VALUE"), std::string::npos) << config.err;
  // journalctl failing under a running daemon: said, and the daemon ends with its source.
  write_text(f.dir + "/h.yaml", "sources: [{journal: {files: [" + f.dir + "/not-a-journal], follow: false}}]\n"
                                "rules: [{name: a, patterns: [x]}]\nserver: 127.0.0.1:0\nengine: cpu\n");
  const auto run = test::run_process({test::gpufilterd_binary(), "--config", f.dir + "/h.yaml"});
  EXPECT_NE(run.err.find("journalctl exited with status 1"), std::string::npos) << run.err;
}

}  // namespace
