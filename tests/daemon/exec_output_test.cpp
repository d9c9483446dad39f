// The exec output (fail2ban-style actions) with real processes: small /bin/sh scripts
// that write down what they were given. Arguments filled exactly (the child writes its
// argv NUL-separated), a hostile value staying one literal argument that no shell runs,
// the child's clean start (environment, directory, signals, descriptors), a timeout that
// ends the whole process group and is retried, a command failing twice then delivered
// once, the concurrency bound, per-group order (an unban never overtakes its ban; a
// retrying group holds back only itself), the bounded queue dropping its oldest alerts,
// drain() waiting and then killing, and never a zombie left; the configuration's errors.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gpufilter/core/errors.hpp"
#include "gpufilter/daemon/alert.hpp"
#include "gpufilter/daemon/config.hpp"
#include "gpufilter/daemon/outputs.hpp"

namespace gpufilter::daemon {
namespace {

using Steady = std::chrono::steady_clock;
using std::chrono::milliseconds;
using namespace std::chrono_literals;

bool eventually(const std::function<bool()>& done, milliseconds timeout = 8000ms) {
  const auto deadline = Steady::now() + timeout;
  while (!done()) {
    if (Steady::now() >= deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> lines_of(const std::string& path) {
  std::vector<std::string> lines;
  std::istringstream in(read_file(path));
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  return lines;
}

std::vector<std::string> split_nul(const std::string& text) {
  std::vector<std::string> parts;
  std::size_t begin = 0;
  for (std::size_t end; (end = text.find('\0', begin)) != std::string::npos; begin = end + 1)
    parts.push_back(text.substr(begin, end - begin));
  return parts;
}

// A process that is gone: no such pid, or a zombie that is not ours (the orphan of a
// killed group waits for init).
bool gone(pid_t pid) {
  const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  if (stat.empty()) return true;
  const std::size_t paren = stat.rfind(')');
  return paren != std::string::npos && stat.size() > paren + 2 && stat[paren + 2] == 'Z';
}

// This process has no child left: every command was reaped.
bool no_children() { return ::waitpid(-1, nullptr, WNOHANG) == -1 && errno == ECHILD; }

Alert alert(const std::string& rule, const std::string& group, Alert::State state = Alert::State::kFiring) {
  Alert a;
  a.state = state;
  a.rule = rule;
  a.severity = "warning";
  a.group = group;
  a.labels = {{"alertname", rule}, {"severity", "warning"}, {"group", group}};
  a.matches = 5;
  a.starts_at = SystemClock::time_point(std::chrono::seconds(1'790'000'000));
  a.fingerprint = "fp-" + rule + "-" + group;
  return a;
}

class ExecOutputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/gpufilter-exec-XXXXXX";
    dir_ = ::mkdtemp(pattern);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A /bin/sh script in the test's directory (mode 0755; the directory is ours, 0700).
  std::string script(const std::string& name, const std::string& body) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << "#!/bin/sh\n" << body;
    ::chmod(path.c_str(), 0755);
    return path;
  }
  // Writes its arguments after the first, NUL-separated, to the file the first names
  // (whole: through a rename, so that a reader never sees half).
  std::string argv_dumper() {
    return script("dump", "out=$1; shift\nprintf '%s\\0' \"$@\" > \"$out.tmp\" && mv \"$out.tmp\" \"$out\"\n");
  }
  ExecOutputConfig config(std::vector<std::string> fire, std::vector<std::string> resolve = {}) {
    ExecOutputConfig c;
    c.fire = std::move(fire);
    c.resolve = std::move(resolve);
    c.timeout = 5s;
    c.queue.initial_backoff = 50ms;
    c.queue.max_backoff = 200ms;
    return c;
  }

  std::string dir_;
};

TEST_F(ExecOutputTest, ArgumentsAreFilledExactly) {
  const std::string dump = argv_dumper();
  auto out = make_exec_output(
      "ban", config({dump, dir_ + "/fired", "<ip>", "<name>", "<failures>", "<time>", "<group>", "<state>", "<user>",
                     "<F-USER>", "{{team}}", "set-<name>-<family>", "<unknown> <ip", "a{{nolabel}}b", "<<ip>>", ""},
                    {dump, dir_ + "/resolved", "<state>", "<ip>", "<family>"}));
  Alert a = alert("sshd", "203.0.113.7");
  a.labels["user"] = "root";
  a.labels["team"] = "ops";
  out->publish(a);
  Alert b = alert("sshd", "2001:db8::1", Alert::State::kResolved);
  out->publish(b);
  ASSERT_TRUE(eventually([&] { return out->stats().delivered == 2; })) << out->stats().last_error;
  const std::vector<std::string> fired{"203.0.113.7", "sshd", "5",          "1790000000",        "203.0.113.7",
                                       "firing",      "root", "root",       "ops",               "set-sshd-inet4",
                                       "<unknown> <ip", "ab", "<203.0.113.7>", ""};
  EXPECT_EQ(split_nul(read_file(dir_ + "/fired")), fired);
  EXPECT_EQ(split_nul(read_file(dir_ + "/resolved")), (std::vector<std::string>{"resolved", "2001:db8::1", "inet6"}));
  EXPECT_TRUE(out->drain(2s));
  const OutputStats s = out->stats();
  EXPECT_EQ(s.published, 2u);
  EXPECT_EQ(s.delivered, 2u);
  EXPECT_EQ(s.failures, 0u);
  EXPECT_EQ(s.queued, 0u);
  EXPECT_EQ(s.settled, 2u);
  EXPECT_TRUE(no_children());
}

// The label `ip` wins over the group; without a resolve command a resolved alert is done.
TEST_F(ExecOutputTest, TheIpLabelWinsAndAResolveWithoutCommandIsDone) {
  auto out = make_exec_output("ban", config({argv_dumper(), dir_ + "/fired", "<ip>", "<group>"}));
  Alert a = alert("ssh", "root");
  a.labels["ip"] = "198.51.100.4";
  out->publish(a);
  out->publish(alert("ssh", "root", Alert::State::kResolved));
  ASSERT_TRUE(out->drain(5s));
  EXPECT_EQ(split_nul(read_file(dir_ + "/fired")), (std::vector<std::string>{"198.51.100.4", "root"}));
  EXPECT_EQ(out->stats().delivered, 2u);
  EXPECT_EQ(out->stats().settled, 2u);
}

// `$(touch ...); rm -rf ...` as a group: one literal argument, and nothing runs it. As
// <ip> it is no address, so a command that names <ip> is not run at all (rejected).
TEST_F(ExecOutputTest, AHostileValueStaysOneLiteralArgument) {
  const std::string victim = dir_ + "/victim";
  std::ofstream(victim) << "keep";
  const std::string hostile = "$(touch " + dir_ + "/pwned); rm -rf " + victim + "; `touch " + dir_ + "/pwned2` *";
  auto out = make_exec_output("ban", config({argv_dumper(), dir_ + "/fired", "<group>", "x <group> y", "{{group}}"}));
  out->publish(alert("ssh", hostile));
  ASSERT_TRUE(out->drain(5s));
  EXPECT_EQ(split_nul(read_file(dir_ + "/fired")), (std::vector<std::string>{hostile, "x " + hostile + " y", hostile}));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/pwned"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/pwned2"));
  EXPECT_EQ(read_file(victim), "keep");

  auto by_ip = make_exec_output("ban-ip", config({argv_dumper(), dir_ + "/by-ip", "<ip>"}));
  by_ip->publish(alert("ssh", hostile));
  by_ip->publish(alert("ssh", "(other)"));
  by_ip->publish(alert("ssh", "10.0.0.9"));
  ASSERT_TRUE(by_ip->drain(5s));
  const OutputStats s = by_ip->stats();
  EXPECT_EQ(s.rejected, 2u);
  EXPECT_EQ(s.delivered, 1u);
  EXPECT_EQ(s.settled, 3u);
  EXPECT_NE(s.last_error.find("(fire): not run: <ip> \"(other)\" is not an IP address"), std::string::npos)
      << s.last_error;
  EXPECT_EQ(split_nul(read_file(dir_ + "/by-ip")), (std::vector<std::string>{"10.0.0.9"}));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/pwned"));
}

// gpufilterd blocks SIGTERM and SIGHUP in every thread and ignores SIGPIPE; a command
// inherits neither, nor the environment, nor a descriptor opened without O_CLOEXEC.
TEST_F(ExecOutputTest, ACommandStartsClean) {
  sigset_t block;
  sigset_t old;
  sigemptyset(&block);
  sigaddset(&block, SIGTERM);
  sigaddset(&block, SIGHUP);
  ::pthread_sigmask(SIG_BLOCK, &block, &old);  // the output's thread inherits it
  const auto old_pipe = ::signal(SIGPIPE, SIG_IGN);
  ::setenv("GPUFILTER_EXEC_TEST_SECRET", "hunter2", 1);
  const int leaked = ::open("/dev/null", O_RDONLY);  // no O_CLOEXEC
  const std::string probe = script(
      "probe", "tr '\\0' '\\n' < /proc/$$/environ > \"$1/env\"\n"
               "pwd > \"$1/pwd\"\n"
               "if [ -e /proc/$$/fd/$2 ]; then echo open; else echo closed; fi > \"$1/fd\"\n"
               "cut -d' ' -f5 /proc/$$/stat > \"$1/pgid\"; echo $$ > \"$1/pid\"\n"
               "read line; echo \"stdin:$line:$?\" > \"$1/stdin\"\n");
  auto out = make_exec_output("probe", config({probe, dir_, std::to_string(leaked)}));
  // No shell for the signals: dash sets its own mask. cp copies its own status.
  auto copy = make_exec_output("copy", config({"/bin/cp", "/proc/self/status", dir_ + "/signals"}));
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  out->publish(alert("r", "10.0.0.1"));
  copy->publish(alert("r", "10.0.0.1"));
  ASSERT_TRUE(out->drain(5s)) << out->stats().last_error;
  ASSERT_TRUE(copy->drain(5s)) << copy->stats().last_error;
  ::close(leaked);
  ::signal(SIGPIPE, old_pipe);
  ::unsetenv("GPUFILTER_EXEC_TEST_SECRET");
  EXPECT_EQ(read_file(dir_ + "/env"), "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n");
  EXPECT_EQ(read_file(dir_ + "/pwd"), "/\n");
  EXPECT_EQ(read_file(dir_ + "/fd"), "closed\n");
  EXPECT_EQ(read_file(dir_ + "/pgid"), read_file(dir_ + "/pid"));  // its own process group
  EXPECT_EQ(read_file(dir_ + "/stdin"), "stdin::1\n");              // /dev/null: at its end at once
  const std::string signals = read_file(dir_ + "/signals");
  EXPECT_NE(signals.find("SigBlk:\t0000000000000000"), std::string::npos) << signals;
  const std::size_t ign = signals.find("SigIgn:\t");
  ASSERT_NE(ign, std::string::npos) << signals;
  const unsigned long long ignored = std::stoull(signals.substr(ign + 8, 16), nullptr, 16);
  EXPECT_EQ(ignored & (1ull << (SIGPIPE - 1)), 0u) << signals;
}

// A command past its timeout gets SIGTERM with its whole group (a background child too),
// is counted as a failure ("timed out after 300ms") and is run again after the backoff.
TEST_F(ExecOutputTest, ATimeoutEndsTheProcessGroupAndIsRetried) {
  const std::string hang = script("hang", "echo $$ >> \"$1/pids\"\nsleep 100 &\necho $! >> \"$1/pids\"\nwait\n");
  ExecOutputConfig c = config({hang, dir_});
  c.timeout = 300ms;
  auto out = make_exec_output("hang", c);
  out->publish(alert("r", "10.0.0.1"));
  ASSERT_TRUE(eventually([&] { return lines_of(dir_ + "/pids").size() >= 4; }));  // two attempts started
  const OutputStats s = out->stats();
  EXPECT_GE(s.failures, 1u);
  EXPECT_EQ(s.delivered, 0u);
  EXPECT_EQ(s.last_error, hang + " (fire): timed out after 300ms");
  const std::vector<std::string> first = lines_of(dir_ + "/pids");
  for (std::size_t i = 0; i < 2; ++i)  // the first attempt: the shell and its background sleep
    EXPECT_TRUE(eventually([&] { return gone(std::stoi(first[i])); }, 2s)) << first[i];
  out.reset();  // the destructor kills the running attempt too
  for (const std::string& pid : lines_of(dir_ + "/pids")) EXPECT_TRUE(eventually([&] { return gone(std::stoi(pid)); }, 2s)) << pid;
  EXPECT_TRUE(no_children());
}

// A command that ignores SIGTERM is killed a second later; its status says timed out.
TEST_F(ExecOutputTest, ACommandIgnoringSigtermIsKilled) {
  const std::string stubborn = script("stubborn", "trap '' TERM\necho $$ > \"$1/pid\"\nwhile :; do sleep 0.05; done\n");
  ExecOutputConfig c = config({stubborn, dir_});
  c.timeout = 200ms;
  c.queue.initial_backoff = 5s;  // one attempt in this test
  auto out = make_exec_output("stubborn", c);
  const auto start = Steady::now();
  out->publish(alert("r", "10.0.0.1"));
  ASSERT_TRUE(eventually([&] { return out->stats().failures == 1; }, 5s));
  EXPECT_GE(Steady::now() - start, 1100ms);  // 200 ms, then SIGTERM ignored for 1 s
  EXPECT_EQ(out->stats().last_error, stubborn + " (fire): timed out after 200ms");
  EXPECT_TRUE(gone(std::stoi(read_file(dir_ + "/pid"))));
  out.reset();
  EXPECT_TRUE(no_children());
}

// Fails twice (exit status 3, a message on stderr), then succeeds: delivered once, and
// the failures say why.
TEST_F(ExecOutputTest, ACommandFailingTwiceIsRetriedAndDeliveredOnce) {
  const std::string flaky = script("flaky",
                                   "n=$(cat \"$1/count\" 2>/dev/null || echo 0); n=$((n+1)); echo $n > \"$1/count\"\n"
                                   "if [ $n -lt 3 ]; then echo 'noise on stdout'; echo \"  attempt $n failed\" >&2; "
                                   "echo 'second line' >&2; exit 3; fi\n"
                                   "echo \"$2\" >> \"$1/done\"\n");
  auto out = make_exec_output("flaky", config({flaky, dir_, "<ip>"}));
  out->publish(alert("r", "192.0.2.1"));
  ASSERT_TRUE(eventually([&] { return out->stats().delivered == 1; })) << out->stats().last_error;
  const OutputStats s = out->stats();
  EXPECT_EQ(s.failures, 2u);
  EXPECT_EQ(s.last_error, flaky + " (fire): exit status 3: attempt 2 failed");
  EXPECT_EQ(lines_of(dir_ + "/done"), std::vector<std::string>{"192.0.2.1"});
  EXPECT_EQ(read_file(dir_ + "/count"), "3\n");
  EXPECT_TRUE(out->drain(1s));
}

// A child that writes far more than the pipe holds never blocks: its output is read and
// dropped; a signal is reported as such.
TEST_F(ExecOutputTest, AChattyCommandNeverBlocksAndASignalIsNamed) {
  const std::string chatty =
      script("chatty", "head -c 3000000 /dev/zero | tr '\\0' x\nhead -c 3000000 /dev/zero | tr '\\0' y >&2\n"
                       "if [ \"$1\" = die ]; then kill -9 $$; fi\n");
  auto out = make_exec_output("chatty", config({chatty, "<group>"}));
  out->publish(alert("r", "ok"));
  out->publish(alert("r", "die"));
  ASSERT_TRUE(eventually([&] { return out->stats().delivered == 1 && out->stats().failures >= 1; }))
      << out->stats().last_error;
  EXPECT_EQ(out->stats().last_error, chatty + " (fire): killed by signal 9");
}

// Twelve alerts of twelve groups, concurrency 3: at most three commands at once (and
// more than one: they do run side by side).
TEST_F(ExecOutputTest, AtMostConcurrencyCommandsRunAtOnce) {
  const std::string timed = script("timed", "s=$(date +%s%N); sleep 0.2; e=$(date +%s%N); echo \"$s $e\" >> \"$1/times\"\n");
  ExecOutputConfig c = config({timed, dir_});
  c.concurrency = 3;
  auto out = make_exec_output("timed", c);
  for (int i = 0; i < 12; ++i) out->publish(alert("r", "10.0.0." + std::to_string(i)));
  ASSERT_TRUE(out->drain(8s));
  std::vector<std::pair<long long, int>> events;
  for (const std::string& line : lines_of(dir_ + "/times")) {
    std::istringstream in(line);
    long long s = 0, e = 0;
    in >> s >> e;
    events.emplace_back(s, 1);
    events.emplace_back(e, -1);
  }
  ASSERT_EQ(events.size(), 24u);
  std::sort(events.begin(), events.end());  // an end before a start at the same instant
  int running = 0, most = 0;
  for (const auto& [t, d] : events) most = std::max(most, running += d);
  EXPECT_LE(most, 3);
  EXPECT_GE(most, 2);
  EXPECT_EQ(out->stats().delivered, 12u);
}

// With concurrency 4: group A's slow ban and its unban run in that order; group B's pair
// does not wait for A's. Group C's ban fails once and waits for its retry: its unban waits
// behind it, group D's pair does not.
TEST_F(ExecOutputTest, OneGroupsCommandsRunInOrderAndHoldBackOnlyThatGroup) {
  const std::string act = script("act",
                                 "echo \"start $2 $3\" >> \"$1/log\"\n"
                                 "if [ \"$2 $3\" = 'firing A' ]; then sleep 1; fi\n"
                                 "if [ \"$2 $3\" = 'firing C' ] && [ ! -e \"$1/c-failed\" ]; then touch \"$1/c-failed\"; "
                                 "echo \"fail $2 $3\" >> \"$1/log\"; exit 1; fi\n"
                                 "echo \"end $2 $3\" >> \"$1/log\"\n");
  ExecOutputConfig c = config({act, dir_, "<state>", "<group>"}, {act, dir_, "<state>", "<group>"});
  c.concurrency = 4;
  c.queue.initial_backoff = 800ms;
  auto out = make_exec_output("act", c);
  for (const char* g : {"A", "C"}) {
    out->publish(alert("r", g));
    out->publish(alert("r", g, Alert::State::kResolved));
  }
  ASSERT_TRUE(eventually([&] { return lines_of(dir_ + "/log").size() >= 3; }));  // A, C started; C failed
  for (const char* g : {"B", "D"}) {
    out->publish(alert("r", g));
    out->publish(alert("r", g, Alert::State::kResolved));
  }
  ASSERT_TRUE(out->drain(8s)) << out->stats().last_error;
  const std::vector<std::string> log = lines_of(dir_ + "/log");
  const auto at = [&](const std::string& line) {
    return std::find(log.begin(), log.end(), line) - log.begin();
  };
  for (const char* g : {"A", "B", "C", "D"}) {
    const std::string group = g;
    EXPECT_LT(at("end firing " + group), at("start resolved " + group)) << group;
    EXPECT_LT(at("start resolved " + group), static_cast<long>(log.size())) << group;
  }
  EXPECT_LT(at("end resolved B"), at("end firing A"));   // not held back by A's slow ban
  EXPECT_LT(at("end resolved D"), at("end firing C"));   // nor by C's retry
  EXPECT_LT(at("fail firing C"), at("end firing C"));
  EXPECT_EQ(out->stats().delivered, 8u);
  EXPECT_EQ(out->stats().failures, 1u);
}

// Capacity 3, one command at a time, the first one held: of five more alerts the two
// oldest waiting ones are dropped and counted; the rest run in order.
TEST_F(ExecOutputTest, AFullQueueDropsItsOldestAndCountsThem) {
  const std::string gated = script("gated",
                                   "echo \"$2\" >> \"$1/started\"\n"
                                   "while [ ! -e \"$1/go\" ]; do sleep 0.02; done\necho \"$2\" >> \"$1/ran\"\n");
  ExecOutputConfig c = config({gated, dir_, "<group>"});
  c.concurrency = 1;
  c.queue.capacity = 3;
  auto out = make_exec_output("gated", c);
  out->publish(alert("r", "g1"));
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(dir_ + "/started"); }));
  for (int i = 2; i <= 6; ++i) out->publish(alert("r", "g" + std::to_string(i)));
  OutputStats s = out->stats();
  EXPECT_EQ(s.published, 6u);
  EXPECT_EQ(s.dropped, 2u);
  EXPECT_EQ(s.queued, 4u);  // three waiting, one running
  EXPECT_EQ(s.capacity, 3u);
  EXPECT_EQ(s.settled, 0u);  // the first is still running
  std::ofstream(dir_ + "/go") << "";
  ASSERT_TRUE(out->drain(8s));
  EXPECT_EQ(lines_of(dir_ + "/ran"), (std::vector<std::string>{"g1", "g4", "g5", "g6"}));
  s = out->stats();
  EXPECT_EQ(s.delivered, 4u);
  EXPECT_EQ(s.settled, 6u);
}

// drain() waits for running commands; past its deadline it kills them (and their
// groups), reaps them, and says that alerts were left.
TEST_F(ExecOutputTest, DrainWaitsThenKillsAndLeavesNoZombie) {
  const std::string slow = script("slow", "sleep 0.3\necho \"$1\" >> \"$2/done\"\n");
  auto waited = make_exec_output("slow", config({slow, "<group>", dir_}));
  waited->publish(alert("r", "a"));
  waited->publish(alert("r", "b"));
  EXPECT_TRUE(waited->drain(5s));
  EXPECT_EQ(lines_of(dir_ + "/done").size(), 2u);
  EXPECT_TRUE(no_children());

  const std::string hang = script("hang", "sleep 100 &\necho $! > \"$1/bg\"\nwait\n");
  auto killed = make_exec_output("hang", config({hang, dir_}));
  killed->publish(alert("r", "a"));
  ASSERT_TRUE(eventually([&] { return !read_file(dir_ + "/bg").empty(); }));
  const auto start = Steady::now();
  EXPECT_FALSE(killed->drain(300ms));
  EXPECT_LT(Steady::now() - start, 2s);
  const OutputStats s = killed->stats();
  EXPECT_EQ(s.queued, 1u);
  EXPECT_EQ(s.delivered, 0u);
  EXPECT_NE(s.last_error.find("killed: the drain deadline passed"), std::string::npos) << s.last_error;
  EXPECT_TRUE(no_children());
  EXPECT_TRUE(eventually([&] { return gone(std::stoi(read_file(dir_ + "/bg"))); }, 2s));
  killed->publish(alert("r", "b"));  // after the drain: queued, never run, never blocking
  EXPECT_EQ(killed->stats().queued, 2u);
}

// ---------------------------------------------------------------------------------------
// The configuration

std::string error_of(const std::string& yaml) {
  try {
    (void)parse_config(yaml, "c.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

std::string with_output(const std::string& output) {
  return "sources: [{stdin: true}]\nrules:\n  - {name: r, patterns: [x]}\noutputs:\n" + output;
}

TEST_F(ExecOutputTest, TheConfigurationTakesAnExecOutput) {
  const DaemonConfig c = parse_config(
      with_output("  - type: exec\n    name: nft-ban\n    fire: [true, add, \"{ <ip> }\"]\n    resolve: [/bin/sh, -c, x]\n"
                  "    timeout: 3s\n    concurrency: 2\n    queue: 50\n    retry_backoff: 1s\n"),
      "c.yaml");
  ASSERT_EQ(c.outputs.size(), 1u);
  const OutputConfig& o = c.outputs[0];
  EXPECT_EQ(o.kind, OutputConfig::Kind::kExec);
  EXPECT_EQ(o.name, "nft-ban");
  ASSERT_EQ(o.fire.size(), 3u);
  EXPECT_TRUE(o.fire[0].starts_with("/") && o.fire[0].ends_with("/true")) << o.fire[0];  // found in PATH
  EXPECT_EQ(o.fire[2], "{ <ip> }");
  EXPECT_EQ(o.resolve, (std::vector<std::string>{"/bin/sh", "-c", "x"}));
  EXPECT_EQ(o.timeout, milliseconds(3000));
  EXPECT_EQ(o.concurrency, 2u);
  EXPECT_EQ(o.queue, 50u);
  EXPECT_EQ(o.retry_backoff, milliseconds(1000));
  const DaemonConfig d = parse_config(with_output("  - {type: exec, fire: [/bin/true]}\n"), "c.yaml");
  EXPECT_EQ(d.outputs[0].name, "exec");
  EXPECT_EQ(d.outputs[0].timeout, milliseconds(10000));
  EXPECT_EQ(d.outputs[0].concurrency, 4u);
  EXPECT_TRUE(d.outputs[0].resolve.empty());
  // A relative path with a '/' is the configuration's directory's.
  const std::string local = script("ban.sh", "exit 0\n");
  const DaemonConfig e = parse_config(with_output("  - {type: exec, fire: [./ban.sh]}\n"), dir_ + "/c.yaml");
  EXPECT_EQ(e.outputs[0].fire[0], local);
}

TEST_F(ExecOutputTest, ConfigurationMistakesNameTheKey) {
  const std::string writable = script("writable.sh", "exit 0\n");
  ::chmod(writable.c_str(), 0777);
  const std::string plain = dir_ + "/plain";
  std::ofstream(plain) << "not a program";
  ::chmod(plain.c_str(), 0644);
  const std::vector<std::pair<std::string, std::string>> cases{
      {"  - {type: exec}\n", "c.yaml:5: outputs[0]: an exec output needs fire"},
      {"  - {type: exec, fire: []}\n", "c.yaml:5: outputs[0].fire: names no command"},
      {"  - {type: exec, fire: /bin/true}\n", "c.yaml:5: outputs[0].fire: expected a list: the program, then its arguments"},
      {"  - {type: exec, fire: [/nonexistent/ban]}\n",
       "c.yaml:5: outputs[0].fire[0]: command /nonexistent/ban: No such file or directory"},
      {"  - {type: exec, fire: [no-such-command-gpufilter]}\n",
       "c.yaml:5: outputs[0].fire[0]: command \"no-such-command-gpufilter\" is not found in PATH"},
      {"  - {type: exec, fire: [/bin/true], resolve: [" + plain + "]}\n",
       "c.yaml:5: outputs[0].resolve[0]: command " + plain + ": not executable"},
      {"  - {type: exec, fire: [" + writable + "]}\n",
       "c.yaml:5: outputs[0].fire[0]: command " + writable + ": refused: group or others may write it"},
      {"  - {type: exec, fire: [/tmp]}\n", "c.yaml:5: outputs[0].fire[0]: command /tmp: not a regular file"},
      {"  - {type: exec, fire: [\"/usr/sbin/<name>\"]}\n", "c.yaml:5: outputs[0].fire[0]: the program itself cannot hold a tag"},
      {"  - {type: exec, fire: [/bin/true], timeout: 5x}\n", "c.yaml:5: outputs[0].timeout: \"5x\" is not a duration"},
      {"  - {type: exec, fire: [/bin/true], timeout: 0s}\n", "c.yaml:5: outputs[0].timeout: must be at least 1ms"},
      {"  - {type: exec, fire: [/bin/true], concurrency: 0}\n", "c.yaml:5: outputs[0].concurrency: 0 is out of range"},
      {"  - {type: exec, fire: [/bin/true], url: http://x/}\n", "c.yaml:5: outputs[0].url: unknown key"},
      {"  - {type: exec, fire: [/bin/true, [a]]}\n", "c.yaml:5: outputs[0].fire[1]: expected a single value"},
      {"  - {type: nope}\n", "is not jsonl, alertmanager, webhook, kafka or exec"},
  };
  for (const auto& [yaml, expected] : cases) {
    const std::string e = error_of(with_output(yaml));
    EXPECT_NE(e.find(expected), std::string::npos) << yaml << "\n" << e;
  }
  // The library checks the same (make_exec_output without a configuration file).
  EXPECT_THROW((void)make_exec_output("x", ExecOutputConfig{}), ConfigError);
  ExecOutputConfig relative;
  relative.fire = {"true"};
  EXPECT_THROW((void)make_exec_output("x", relative), ConfigError);
}

}  // namespace
}  // namespace gpufilter::daemon
