// fail2ban's jails in gpufilterd (issue 23): jail.conf, jail.d/, jail.local read as
// fail2ban 1.0.2 reads them (order, [INCLUDES], [DEFAULT], interpolation, the filter's
// options, logpath globs, time abbreviations, ignoreip), the real /etc/fail2ban, and jails
// over a replayed log with its own timestamps: bans (alerts) exactly where fail2ban's
// FailManager and BanManager ban (checked against fail2ban's own classes when its Python
// package is installed), ignoreip hosts never alerted, labels. Hostile jails (a filter with
// a missing include, an invalid failregex, a journal that is not there) are refused by --check with
// exit status 2, naming the jail and the file, and a reload to them keeps the old rules.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "gpufilter/core/errors.hpp"
#include "gpufilter/daemon/config.hpp"
#include "gpufilter/daemon/rules.hpp"
#include "gpufilter/fail2ban/jails.hpp"
#include "testutil/reference_matcher.hpp"
#include "testutil/testutil.hpp"

namespace {

using namespace gpufilter;
using namespace gpufilter::daemon;
using namespace std::chrono_literals;
namespace fs = std::filesystem;
using Clock = RuleEngine::Clock;

void write_text(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
  ::chmod(path.c_str(), 0644);
}

// A fail2ban configuration folder of our own: Debian's filter.d/ copied, our jail files.
struct Fail2banDir {
  std::string dir;
  Fail2banDir() {
    char pattern[] = "/tmp/gpufilterd-jails-XXXXXX";
    dir = ::mkdtemp(pattern);
    ::chmod(dir.c_str(), 0755);
    fs::copy("/etc/fail2ban/filter.d", dir + "/filter.d", fs::copy_options::recursive);
    fs::create_directories(dir + "/logs");
  }
  ~Fail2banDir() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

TEST(Jails, ReadInFail2bansOrderWithIncludesDefaultsAndOverrides) {
  Fail2banDir f;
  write_text(f.dir + "/paths.conf", "[DEFAULT]\nmy_log = " + f.dir + "/logs/auth.log\n");
  write_text(f.dir + "/jail.conf",
             "[INCLUDES]\nbefore = paths.conf\n\n"
             "[DEFAULT]\nbantime = 10m\nfindtime = 10m\nmaxretry = 5\nbackend = auto\nusedns = warn\n"
             "ignoreip = 127.0.0.1/8 ::1\nenabled = false\nmode = normal\nfilter = %(__name__)s[mode=%(mode)s]\n\n"
             "[sshd]\nlogpath = %(my_log)s\n\n"
             "[nginx-http-auth]\nlogpath = /nonexistent/error.log\n\n"
             "[recidive]\nenabled = true\nlogpath = /var/log/fail2ban.log\nbantime = 1w\n");
  write_text(f.dir + "/jail.d/a.conf", "[sshd]\nenabled = true\nmaxretry = 3\n");
  write_text(f.dir + "/jail.local", "[DEFAULT]\nbantime = 1h\n\n[sshd]\nfindtime = 1h 30m\nmode = ddos\n"
                                    "\n[recidive]\nenabled = no\n");
  // jail.d/*.local comes last: its mode wins over jail.local's.
  write_text(f.dir + "/jail.d/z.local", "[sshd]\nmode = aggressive\nignoreip = 10.0.0.0/8, gw.example\n"
                                        "logpath = %(my_log)s\n          " + f.dir + "/logs/auth-*.log tail\n");
  const std::vector<fail2ban::Jail> jails = fail2ban::read_jails(f.dir);
  ASSERT_EQ(jails.size(), 1u);
  const fail2ban::Jail& j = jails[0];
  EXPECT_EQ(j.name, "sshd");
  EXPECT_EQ(j.filter, "sshd");
  EXPECT_EQ(j.filter_options, (std::map<std::string, std::string>{{"mode", "aggressive"}}));
  EXPECT_EQ(j.maxretry, 3);
  EXPECT_EQ(j.findtime, 5400);
  EXPECT_EQ(j.bantime, 3600);
  EXPECT_EQ(j.backend, "auto");
  EXPECT_EQ(j.ignoreip, (std::vector<std::string>{"10.0.0.0/8", "gw.example"}));
  EXPECT_EQ(j.logpaths, (std::vector<std::string>{f.dir + "/logs/auth.log", f.dir + "/logs/auth-*.log"}));
  EXPECT_TRUE(j.tail);
  EXPECT_NE(j.where.find("a.conf:2"), std::string::npos) << j.where;
  // `only`: named jails whether enabled or not; an unknown name is an error.
  const auto only = fail2ban::read_jails(f.dir, {"nginx-http-auth"});
  ASSERT_EQ(only.size(), 1u);
  EXPECT_EQ(only[0].filter, "nginx-http-auth");
  EXPECT_EQ(only[0].maxretry, 5);
  EXPECT_THROW(fail2ban::read_jails(f.dir, {"nosuch"}), fail2ban::Fail2banError);
}

TEST(Jails, TimesAsMyTimeStr2secondsReadsThem) {
  // MyTime.str2seconds's answers (fail2ban 1.0.2).
  const std::vector<std::pair<std::string, double>> cases = {
      {"10m", 600}, {"1h", 3600}, {"600", 600}, {"1d", 86400}, {"-1", -1}, {"1h 30m", 5400}, {"1h30m", 5400},
      {"2w", 1209600}, {"1mo", 2629800}, {"1y", 31557600}, {"90s", 90}, {"1.5h", 5400}, {"1hour+30min", 5400}};
  for (const auto& [text, seconds] : cases) {
    const auto v = fail2ban::str2seconds(text);
    ASSERT_TRUE(v.has_value()) << text;
    EXPECT_DOUBLE_EQ(*v, seconds) << text;
  }
  for (const char* bad : {"", "5x", "ten", "1h+", "10ms"}) EXPECT_FALSE(fail2ban::str2seconds(bad)) << bad;
}

TEST(Jails, IgnoreipAddressesNetworksAndNames) {
  const std::vector<std::string> list = {"127.0.0.1/8", "::1", "10.0.0.0/255.0.0.0", "2001:db8::/32", "gw.example",
                                         "192.0.2.7"};
  for (const char* in : {"127.5.5.5", "::1", "10.1.2.3", "::ffff:10.1.2.3", "2001:db8:1::5", "gw.example", "192.0.2.7"})
    EXPECT_TRUE(fail2ban::ignored(list, in)) << in;
  for (const char* out : {"128.0.0.1", "::2", "11.1.2.3", "2001:db9::1", "other.example", "192.0.2.8"})
    EXPECT_FALSE(fail2ban::ignored(list, out)) << out;
}

// ignoreself (fail2ban's default): the host's own addresses, from a hosts file's lines
// naming localhost, this host or its other names (its fully qualified one); never DNS.
TEST(Jails, IgnoreselfIgnoresTheHostsOwnAddresses) {
  Fail2banDir f;
  char host[256] = {};
  ASSERT_EQ(::gethostname(host, sizeof host - 1), 0);
  const std::string self = host;
  write_text(f.dir + "/hosts", "127.0.0.1 localhost\n::0001 localhost ip6-localhost  # the loopback\n"
                               "127.0.1.1 " + self + ".example.org " + self + "\n10.9.8.7 " + self +
                               ".example.org\n192.0.2.9 other\n# 192.0.2.10 localhost\n10.9.8.7 " + self + "\n");
  EXPECT_EQ(fail2ban::self_addresses(f.dir + "/hosts"),
            (std::vector<std::string>{"127.0.0.1", "::1", "127.0.1.1", "10.9.8.7"}));
  write_text(f.dir + "/hosts-bare", "192.0.2.9 other\n");
  EXPECT_EQ(fail2ban::self_addresses(f.dir + "/hosts-bare"), std::vector<std::string>{"127.0.0.1"});
  // fail2ban's own answer on this machine, where /etc/hosts names this host (else fail2ban
  // asks DNS, which gpufilterd never does).
  const bool named = gpufilter::test::command_output("grep -qw '" + self + "' /etc/hosts && echo yes") == "yes\n";
  if (named && ::system("/usr/bin/python3 -c 'import fail2ban.server.ipdns' 2>/dev/null") == 0) {
    const auto r = gpufilter::test::run_process(
        {"/usr/bin/python3", "-c",
         "from fail2ban.server.ipdns import DNSUtils\nprint(' '.join(sorted(str(i) for i in DNSUtils.getSelfIPs())))"});
    std::vector<std::string> mine = fail2ban::self_addresses();
    std::sort(mine.begin(), mine.end());
    std::string joined;
    for (const std::string& a : mine) joined += (joined.empty() ? "" : " ") + a;
    EXPECT_EQ(joined + "\n", r.out) << r.err;
  }
  // On by default, off when the jail says so, refused when it is no boolean; the rule's
  // ignored hosts carry the addresses.
  write_text(f.dir + "/logs/auth.log", "");
  const std::string jail = "[sshd]\nenabled = true\nfilter = sshd\nlogpath = " + f.dir + "/logs/auth.log\n";
  write_text(f.dir + "/jail.conf", jail);
  EXPECT_TRUE(fail2ban::read_jails(f.dir).at(0).ignoreself);
  const std::string yaml = "fail2ban: {jails: " + f.dir + "}\nengine: cpu\n";
  DaemonConfig on = parse_config(yaml, f.dir + "/g.yaml");
  ASSERT_EQ(on.rules.size(), 1u);
  EXPECT_TRUE(fail2ban::ignored(on.rules[0].ignore_hosts, "127.0.0.1"));
  write_text(f.dir + "/jail.local", "[sshd]\nignoreself = false\n");
  EXPECT_FALSE(fail2ban::read_jails(f.dir).at(0).ignoreself);
  DaemonConfig off = parse_config(yaml, f.dir + "/g.yaml");
  EXPECT_FALSE(fail2ban::ignored(off.rules.at(0).ignore_hosts, "127.0.0.1"));
  write_text(f.dir + "/jail.local", "[sshd]\nignoreself = maybe\n");
  EXPECT_THROW(fail2ban::read_jails(f.dir), fail2ban::Fail2banError);
}

// Debian's own configuration: jail.d/defaults-debian.conf enables sshd.
TEST(Jails, TheInstalledConfiguration) {
  if (!fs::exists("/etc/fail2ban/jail.conf")) GTEST_SKIP() << "no /etc/fail2ban";
  const auto jails = fail2ban::read_jails("/etc/fail2ban");
  ASSERT_FALSE(jails.empty());
  const auto sshd = std::find_if(jails.begin(), jails.end(), [](const auto& j) { return j.name == "sshd"; });
  ASSERT_NE(sshd, jails.end());
  EXPECT_EQ(sshd->filter, "sshd");
  EXPECT_EQ(sshd->filter_options.at("mode"), "normal");
  EXPECT_EQ(sshd->maxretry, 5);
  EXPECT_EQ(sshd->findtime, 600);
  EXPECT_EQ(sshd->bantime, 600);
  ASSERT_FALSE(sshd->logpaths.empty());
  // As a gpufilterd configuration: loads, or names the jail and the missing log file.
  const std::string yaml = "fail2ban: {only: [sshd]}\n";
  try {
    const DaemonConfig c = parse_config(yaml, "/tmp/g.yaml");
    ASSERT_EQ(c.rules.size(), 1u);
    EXPECT_TRUE(c.rules[0].threshold.fail2ban);
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("jail [sshd]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(sshd->logpaths[0]), std::string::npos) << e.what();
  }
}

// A replayed auth log: failures at chosen log times (seconds after a base), in order.
struct Failure {
  std::string ip;
  int at;  // seconds after the base
};

std::string sshd_line(const Failure& f) {
  const std::time_t t = 1704880800 + f.at;  // 2024-01-10 10:00:00 UTC
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S", &tm);
  return std::string(date) + " myhost sshd[4242]: Failed password for root from " + f.ip + " port 22 ssh2";
}

// Hand-computed from failmanager.py, ticket.py and banmanager.py (maxretry 3, findtime
// 10m, bantime 10m): A banned at 4m; three more at 6-10m reach maxretry while banned (no
// alert, the ban prolonged to 20m), three at 15-17m again (prolonged to 27m, where a
// cooldown of 10m from the first alert would have fired), three at 28-30m a new ban. B's
// three over 15m never ban. C's three at 0, 5 and 12m ban at 12m: fail2ban scales the
// count of a host whose first failure is older than findtime (round(2 / 12 * 10) + 1 = 3)
// where a sliding window would hold 2. D is in ignoreip.
std::vector<Failure> replayed() {
  std::vector<Failure> v;
  for (int m : {0, 2, 4, 6, 8, 10, 15, 16, 17, 28, 29, 30}) v.push_back({"192.0.2.1", m * 60});
  for (int m : {60, 67, 75}) v.push_back({"192.0.2.2", m * 60});
  for (int m : {120, 125, 132}) v.push_back({"192.0.2.3", m * 60});
  for (int s = 0; s < 10; ++s) v.push_back({"10.1.2.3", 200 * 60 + s});
  std::stable_sort(v.begin(), v.end(), [](const Failure& a, const Failure& b) { return a.at < b.at; });
  return v;
}
const std::vector<std::pair<std::string, int>> kWantBans = {
    {"192.0.2.1", 4 * 60}, {"192.0.2.1", 30 * 60}, {"192.0.2.3", 132 * 60}};
// bantime = -1: a host is alerted once.
const std::vector<std::pair<std::string, int>> kWantForever = {{"192.0.2.1", 4 * 60}, {"192.0.2.3", 132 * 60}};

// fail2ban's own FailManager and BanManager over the same failures, live (MyTime = the
// log's time; cleanup at each failure, as the backends' service does every few seconds).
std::vector<std::pair<std::string, int>> fail2bans_bans(const std::vector<Failure>& failures, int bantime) {
  std::string input;
  for (const Failure& f : failures)  // ignoreip is the filter's (Filter.inIgnoreIPList), before the FailManager
    if (!f.ip.starts_with("10.")) input += f.ip + " " + std::to_string(f.at) + "\n";
  const std::string script =
      "import sys\n"
      "from fail2ban.server.mytime import MyTime\n"
      "from fail2ban.server.failmanager import FailManager\n"
      "from fail2ban.server.banmanager import BanManager\n"
      "from fail2ban.server.ticket import FailTicket, BanTicket\n"
      "fm = FailManager(); fm.setMaxRetry(3); fm.setMaxTime(600)\n"
      "bm = BanManager(); bm.setBanTime(" + std::to_string(bantime) + ")\n"
      "for line in sys.stdin:\n"
      "  ip, t = line.split(); t = 1000000 + int(t)\n"
      "  MyTime.setTime(t); bm.unBanList(t); fm.cleanup(t)\n"
      "  if fm.addFailure(FailTicket(ip, t)) >= 3:\n"
      "    ticket = fm.toBan(ip)\n"
      "    if bm.addBanTicket(BanTicket.wrap(ticket)): print(ip, t - 1000000)\n";
  const auto r = gpufilter::test::run_process({"/usr/bin/python3", "-c", script}, input);
  EXPECT_EQ(r.status, 0) << r.err;
  std::vector<std::pair<std::string, int>> bans;
  std::istringstream out(r.out);
  for (std::string ip; out >> ip;) {
    int t = 0;
    out >> t;
    bans.emplace_back(ip, t);
  }
  return bans;
}

TEST(Jails, TheExpectedBansAreFail2bansOwn) {
  if (::system("/usr/bin/python3 -c 'import fail2ban.server.failmanager' 2>/dev/null") != 0)
    GTEST_SKIP() << "fail2ban's Python package is not installed";
  EXPECT_EQ(fail2bans_bans(replayed(), 600), kWantBans);
  EXPECT_EQ(fail2bans_bans(replayed(), -1), kWantForever);
}

// Two jails over one log, as a gpufilterd configuration: the bans above, on the log's clock.
std::string jail_files(const Fail2banDir& f) {
  write_text(f.dir + "/jail.conf",
             "[DEFAULT]\nmaxretry = 3\nfindtime = 10m\nbantime = 10m\nignoreip = 127.0.0.1/8 ::1 10.0.0.0/8\n"
             "backend = auto\nenabled = false\n\n"
             "[sshd]\nenabled = true\nfilter = sshd\nlogpath = " + f.dir + "/logs/auth*.log\n\n"
             "[sshd-forever]\nenabled = true\nfilter = sshd[mode=normal]\nbantime = -1\nlogpath = " + f.dir +
             "/logs/auth.log\n");
  std::string log;
  for (const Failure& fl : replayed()) log += sshd_line(fl) + "\n";
  write_text(f.dir + "/logs/auth.log", log);
  return "fail2ban: {jails: " + f.dir + ", from_start: true}\nengine: cpu\nserver: 127.0.0.1:0\n";
}

TEST(Jails, BanWhereFail2banBansOnTheLogsClock) {
  Fail2banDir f;
  const DaemonConfig c = parse_config(jail_files(f), f.dir + "/g.yaml");
  ASSERT_EQ(c.rules.size(), 2u);
  ASSERT_EQ(c.sources.size(), 1u);  // one read for both jails
  EXPECT_EQ(c.sources[0].paths, std::vector<std::string>{f.dir + "/logs/auth.log"});
  auto rules = std::make_shared<RuleSet>(c.rules);
  PatternTable table(rules->patterns(), rules->match_options());
  rules->bind(table);
  std::vector<Alert> alerts;
  RuleEngine engine(rules, [&](const Alert& a) { alerts.push_back(a); });
  for (const Failure& fl : replayed()) {
    const std::string line = sshd_line(fl);
    engine.line(f.dir + "/logs/auth.log", line, gpufilter::reference_occurrences(rules->patterns(), table, line),
                Clock::now());
    engine.line("/var/log/other.log", line, gpufilter::reference_occurrences(rules->patterns(), table, line),
                Clock::now());  // not a jail's file: not read by the jails
  }
  std::map<std::string, std::vector<std::pair<std::string, int>>> got;
  for (const Alert& a : alerts) {
    const auto at = std::chrono::duration_cast<std::chrono::seconds>(a.starts_at.time_since_epoch()).count();
    got[a.rule].emplace_back(a.group, static_cast<int>(at - 1704880800));
    EXPECT_EQ(a.labels.at("jail"), a.rule);
    EXPECT_EQ(a.labels.at("filter"), "sshd");
    EXPECT_EQ(a.labels.at("user"), "root");
  }
  EXPECT_EQ(got["sshd"], kWantBans);
  EXPECT_EQ(got["sshd-forever"], kWantForever);
  EXPECT_EQ(alerts.front().matches, 3u);
}

// The daemon itself, following the jail's file from its start.
TEST(Jails, GpufilterdFollowsTheJailsFilesAndAlerts) {
  Fail2banDir f;
  const std::string yaml = jail_files(f) + "outputs: [{type: jsonl, path: " + f.dir + "/alerts.jsonl}]\n";
  write_text(f.dir + "/g.yaml", yaml);
  const auto child = gpufilter::test::spawn_process({test::gpufilterd_binary(), "--config", f.dir + "/g.yaml"});
  ::close(child.in);
  std::vector<nlohmann::json> alerts;
  for (const auto deadline = std::chrono::steady_clock::now() + 8s; std::chrono::steady_clock::now() < deadline;) {
    alerts.clear();
    std::ifstream in(f.dir + "/alerts.jsonl");
    for (std::string l; std::getline(in, l);)
      if (!l.empty()) alerts.push_back(nlohmann::json::parse(l));
    if (alerts.size() >= kWantBans.size() + kWantForever.size()) break;
    std::this_thread::sleep_for(50ms);
  }
  std::this_thread::sleep_for(300ms);  // and no more come
  ::kill(child.pid, SIGTERM);
  int status = 0;
  ::waitpid(child.pid, &status, 0);
  ::close(child.out);
  ::close(child.err);
  alerts.clear();
  std::ifstream in(f.dir + "/alerts.jsonl");
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) alerts.push_back(nlohmann::json::parse(l));
  std::map<std::string, std::vector<std::string>> got;
  for (const auto& a : alerts) {
    ASSERT_EQ(a["labels"]["user"], "root") << a.dump();
    ASSERT_EQ(a["labels"]["filter"], "sshd") << a.dump();
    got[a["labels"]["jail"].get<std::string>()].push_back(a["group"].get<std::string>());
  }
  const auto groups = [](const std::vector<std::pair<std::string, int>>& bans) {
    std::vector<std::string> v;
    for (const auto& [ip, at] : bans) v.push_back(ip);
    return v;
  };
  EXPECT_EQ(got["sshd"], groups(kWantBans));
  EXPECT_EQ(got["sshd-forever"], groups(kWantForever));
}

// --check refuses a hostile jail with exit status 2, naming the jail and the file.
TEST(Jails, HostileJailsAreRefusedByCheck) {
  Fail2banDir f;
  write_text(f.dir + "/logs/auth.log", "");
  write_text(f.dir + "/filter.d/missing-include.conf",
             "[INCLUDES]\nbefore = no-such-common.conf\n\n[Definition]\nfailregex = ^%(__prefix_line)sFailed from <HOST>$\n");
  write_text(f.dir + "/filter.d/bad-regex.conf", "[Definition]\nfailregex = ^Failed (password from <HOST>$\n");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"filter = missing-include", "no-such-common.conf, which does not exist"},
      {"filter = bad-regex", "bad-regex.conf"},
      {"filter = no-such-filter", "no-such-filter"},
      {"filter = sshd\nbackend = systemd[journalfiles=" + f.dir + "/logs/none-*.journal]", "no journal file matches"},
      {"filter = sshd\nbackend = systemd[journalflags=2]", "journalflags 2"},
      {"filter = sshd\nlogpath = " + f.dir + "/logs/none-*.log", "none-*.log"},
      {"filter = sshd\nfindtime = ten minutes", "findtime"},
  };
  for (const auto& [jail, what] : cases) {
    // An option given twice in a section is refused on its own (as configparser does).
    const std::string logpath = jail.find("logpath") == std::string::npos ? "logpath = " + f.dir + "/logs/auth.log\n" : "";
    write_text(f.dir + "/jail.conf", "[bad]\nenabled = true\n" + logpath + jail + "\n");
    write_text(f.dir + "/g.yaml", "fail2ban: {jails: " + f.dir + "}\nengine: cpu\n");
    const auto r = gpufilter::test::run_process({test::gpufilterd_binary(), "--check", "--config", f.dir + "/g.yaml"});
    EXPECT_EQ(r.status, 2) << jail << "\n" << r.err;
    EXPECT_NE(r.err.find("jail [bad]"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(what), std::string::npos) << r.err;
  }
}

// A child's standard error as it comes: wait_for() reads until it holds `want` after byte
// `from` (false after `limit`).
struct ErrReader {
  int fd;
  std::string text;
  bool wait_for(const std::string& want, std::size_t from = 0, std::chrono::seconds limit = 20s) {
    for (const auto deadline = std::chrono::steady_clock::now() + limit; std::chrono::steady_clock::now() < deadline;) {
      char buf[4096];
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 50) > 0) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n > 0) text.append(buf, static_cast<std::size_t>(n));
      }
      if (text.find(want, from) != std::string::npos) return true;
    }
    return false;
  }
};

// Several jails read a log through the filters' pipeline (RuleConsumer's batches); a
// reload that replaces one jail and changes another's maxretry takes effect for the lines
// after it: the pipeline reads the new set of filters, not the one it began with.
TEST(Jails, AReloadReplacingJailsIsWhatTheNextLinesMeet) {
  Fail2banDir f;
  const std::string log = f.dir + "/logs/auth.log";
  write_text(f.dir + "/jail.conf", "[sshd]\nenabled = true\nmaxretry = 3\nfilter = sshd\nlogpath = " + log +
                                       "\n[pam]\nenabled = true\nfilter = pam-generic\nlogpath = " + log + "\n");
  write_text(log, "");
  write_text(f.dir + "/g.yaml", "fail2ban: {jails: " + f.dir + "}\nengine: cpu\nserver: 127.0.0.1:0\noutputs: "
                                "[{type: jsonl, path: " + f.dir + "/alerts.jsonl}]\n");
  const auto child = gpufilter::test::spawn_process({test::gpufilterd_binary(), "--config", f.dir + "/g.yaml"});
  ::close(child.in);
  ErrReader err{child.err, {}};
  const auto alerts_for = [&](const std::string& host) {
    std::ifstream in(f.dir + "/alerts.jsonl");
    std::size_t n = 0;
    for (std::string line; std::getline(in, line);) n += line.find("\"group\":\"" + host + "\"") != std::string::npos;
    return n;
  };
  const auto wait_alert = [&](const std::string& host) {
    for (const auto deadline = std::chrono::steady_clock::now() + 20s; std::chrono::steady_clock::now() < deadline;) {
      if (alerts_for(host) > 0) return true;
      std::this_thread::sleep_for(50ms);
    }
    return false;
  };
  ASSERT_TRUE(err.wait_for("gpufilterd started")) << err.text;
  {
    std::ofstream out(log, std::ios::app);
    for (int i = 0; i < 3; ++i) out << sshd_line({"192.0.2.1", i}) << "\n";
  }
  ASSERT_TRUE(wait_alert("192.0.2.1")) << err.text;
  // sshd now bans at the second failure, and pam-generic gives way to a second sshd jail.
  write_text(f.dir + "/jail.local", "[sshd]\nmaxretry = 2\n[pam]\nenabled = false\n[sshd2]\nenabled = true\n"
                                    "filter = sshd\nmaxretry = 5\nlogpath = " + log + "\n");
  const std::size_t before = err.text.size();
  ::kill(child.pid, SIGHUP);
  ASSERT_TRUE(err.wait_for("config reloaded", before)) << err.text;
  {
    std::ofstream out(log, std::ios::app);
    for (int i = 0; i < 2; ++i) out << sshd_line({"192.0.2.2", 100 + i}) << "\n";
  }
  ASSERT_TRUE(wait_alert("192.0.2.2")) << err.text;
  std::this_thread::sleep_for(300ms);
  std::ifstream in(f.dir + "/alerts.jsonl");
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(alerts_for("192.0.2.2"), 1u) << all;  // sshd's, at its new maxretry; sshd2 waits for five
  EXPECT_NE(all.find("\"rule\":\"sshd\""), std::string::npos) << all;
  EXPECT_EQ(all.find("\"rule\":\"sshd2\""), std::string::npos) << all;
  ::kill(child.pid, SIGTERM);
  int status = 0;
  ::waitpid(child.pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << "\n" << err.text;
  ::close(child.out);
  ::close(child.err);
}

// A reload to a broken jail is rejected: the running jails keep alerting.
TEST(Jails, AReloadToABrokenJailKeepsTheRunningRules) {
  Fail2banDir f;
  write_text(f.dir + "/jail.conf", "[sshd]\nenabled = true\nmaxretry = 2\nfilter = sshd\nlogpath = " + f.dir +
                                       "/logs/auth.log\n");
  write_text(f.dir + "/logs/auth.log", "");
  write_text(f.dir + "/filter.d/bad-regex.conf", "[Definition]\nfailregex = ^Failed (password from <HOST>$\n");
  write_text(f.dir + "/g.yaml", "fail2ban: {jails: " + f.dir + "}\nengine: cpu\nserver: 127.0.0.1:0\noutputs: "
                                "[{type: jsonl, path: " + f.dir + "/alerts.jsonl}]\n");
  const auto child = gpufilter::test::spawn_process({test::gpufilterd_binary(), "--config", f.dir + "/g.yaml"});
  ::close(child.in);
  ErrReader err{child.err, {}};
  ASSERT_TRUE(err.wait_for("gpufilterd started", 0, 8s)) << err.text;
  write_text(f.dir + "/jail.local", "[bad]\nenabled = true\nfilter = bad-regex\nlogpath = " + f.dir + "/logs/auth.log\n");
  ::kill(child.pid, SIGHUP);
  ASSERT_TRUE(err.wait_for("reload rejected", 0, 8s)) << err.text;
  EXPECT_NE(err.text.find("jail [bad]"), std::string::npos) << err.text;
  std::ofstream(f.dir + "/logs/auth.log", std::ios::app) << sshd_line({"192.0.2.9", 0}) << "\n"
                                                        << sshd_line({"192.0.2.9", 10}) << "\n";
  bool alerted = false;
  for (const auto deadline = std::chrono::steady_clock::now() + 8s; !alerted && std::chrono::steady_clock::now() < deadline;) {
    std::ifstream in(f.dir + "/alerts.jsonl");
    std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    alerted = all.find("192.0.2.9") != std::string::npos;
    if (!alerted) std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(alerted) << err.text;
  ::kill(child.pid, SIGTERM);
  int status = 0;
  ::waitpid(child.pid, &status, 0);
  ::close(child.out);
  ::close(child.err);
}

}  // namespace
