// gpufilterd --test-filter beside the real fail2ban-regex (Debian's fail2ban 1.0.2): the
// summary's line counts and hits per failregex, and the address of every failure (-o ip -r
// against --out ip, as sorted counts), on fail2ban's own sample logs and on the OpenSSH
// Loghub log; then the mistakes a user makes, each exit status 2 with a message.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "testutil/testutil.hpp"

namespace gpufilter::test {
namespace {

namespace fs = std::filesystem;

const std::string kSamples = "/usr/lib/python3/dist-packages/fail2ban/tests/files/logs/";
const std::string kRegexTool = "/usr/bin/fail2ban-regex";

// The lines both tools agree on printing: "Failregex: 68 total" (and Ignoreregex), "|  4)
// [521]" (hits of a failregex or ignoreregex, by number) and "Lines: ...".
std::string summary(const std::string& text) {
  static const std::regex line_re(R"(^\|\s*[0-9]+\) \[[0-9]+\]|^Lines: .*|^(Fail|Ignore)regex: [0-9]+ total)");
  std::string out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, line_re)) continue;
    std::string s = m.str();
    s.erase(std::unique(s.begin(), s.end(), [](char a, char b) { return a == ' ' && b == ' '; }), s.end());
    out += s + "\n";
  }
  return out;
}

// From "Lines: " on, but the time taken: the counts and the lists of lines.
std::string lines_part(const std::string& text) {
  std::string out;
  std::istringstream in(text.substr(std::min(text.size(), text.find("\nLines: ") + 1)));
  for (std::string line; std::getline(in, line);)
    if (line.rfind("[processed in ", 0) != 0) out += line + "\n";
  return out;
}

std::map<std::string, int> counts(const std::string& text) {
  std::map<std::string, int> c;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) ++c[line];
  return c;
}

struct Case {
  std::string filter;
  std::string log;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.filter << " on " << c.log; }

class TestFilterCli : public ::testing::TestWithParam<Case> {};

// The summary, and the address and user of every failure, against fail2ban-regex's.
void compare(const Case& c) {
  ASSERT_TRUE(fs::exists(kRegexTool)) << kRegexTool << " is missing: install Debian's fail2ban (README's set-up)";
  ASSERT_TRUE(fs::exists(c.log)) << c.log;
  const std::string conf = "/etc/fail2ban/filter.d/" + c.filter + ".conf";
  const ProcessResult theirs = run_process({kRegexTool, "-r", c.log, conf});
  ASSERT_EQ(theirs.status, 0) << theirs.err;
  const ProcessResult ours = run_process({gpufilterd_binary(), "--test-filter", c.filter, c.log});
  ASSERT_EQ(ours.status, 0) << ours.err;
  EXPECT_EQ(summary(ours.out), summary(theirs.out));
  EXPECT_NE(summary(ours.out).find("Lines: "), std::string::npos) << ours.out;
  EXPECT_EQ(lines_part(ours.out), lines_part(theirs.out));
  for (const char* all : {"--print-all-matched", "--print-all-missed", "--print-no-ignored"}) {
    const ProcessResult t = run_process({kRegexTool, "-r", all, c.log, conf});
    const ProcessResult o = run_process({gpufilterd_binary(), "--test-filter", c.filter, c.log, all});
    EXPECT_EQ(lines_part(o.out), lines_part(t.out)) << all;
  }

  const ProcessResult their_ips = run_process({kRegexTool, "-r", "-o", "ip", c.log, conf});
  const ProcessResult our_ips = run_process({gpufilterd_binary(), "--test-filter", c.filter, c.log, "--out", "ip"});
  ASSERT_EQ(our_ips.status, 0) << our_ips.err;
  EXPECT_EQ(counts(our_ips.out), counts(their_ips.out));
  const ProcessResult their_users = run_process({kRegexTool, "-r", "-o", "user", c.log, conf});
  const ProcessResult our_users = run_process({gpufilterd_binary(), "--test-filter", c.filter, c.log, "--out", "user"});
  EXPECT_EQ(counts(our_users.out), counts(their_users.out));
  // -o msg: each failure's matches as fail2ban keeps them (a multi-line failure's lines, a
  // connection's earlier lines), in order and byte for byte.
  const ProcessResult their_msgs = run_process({kRegexTool, "-r", "-o", "msg", c.log, conf});
  const ProcessResult our_msgs = run_process({gpufilterd_binary(), "--test-filter", c.filter, c.log, "--out", "msg"});
  ASSERT_EQ(our_msgs.status, 0) << our_msgs.err;
  EXPECT_EQ(our_msgs.out, their_msgs.out);
}

TEST_P(TestFilterCli, SameAsFail2banRegex) { compare(GetParam()); }

// fail2ban-regex -r -o ip THEIRS... against gpufilterd --test-filter OURS... --out ip: the
// same addresses as often; `theirs_ok`: fail2ban-regex's own exit status is checked too.
struct IpRun {
  std::vector<std::string> theirs, ours;
};
void compare_ips(const IpRun& run, bool theirs_ok = false) {
  std::vector<std::string> theirs{kRegexTool, "-r", "-o", "ip"};
  theirs.insert(theirs.end(), run.theirs.begin(), run.theirs.end());
  std::vector<std::string> ours{gpufilterd_binary(), "--test-filter"};
  ours.insert(ours.end(), run.ours.begin(), run.ours.end());
  ours.insert(ours.end(), {"--out", "ip"});
  const ProcessResult t = run_process(theirs), o = run_process(ours);
  if (theirs_ok) {
    EXPECT_EQ(t.status, 0) << t.err;
  }
  EXPECT_EQ(o.status, 0) << o.err;
  EXPECT_EQ(counts(o.out), counts(t.out)) << run.ours[0] << "\n" << o.err;
  EXPECT_FALSE(o.out.empty()) << run.ours[0];
}

// What an attacker writes into an auth log: user names holding " from ADDRESS", bytes
// that are not UTF-8 (fail2ban matches them as U+FFFD), NUL bytes, 100 KB lines.
TEST(TestFilterCliHostile, ForgedAndMalformedLinesGetFail2bansAnswers) {
  char dir[] = "/tmp/gpufilter-f2b-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string log = std::string(dir) + "/hostile.log";
  std::string text;
  for (int i = 0; i < 40; ++i) {
    const std::string head = "Dec 10 06:55:" + std::string(i < 10 ? "0" : "") + std::to_string(i) + " LabSZ sshd[" +
                             std::to_string(24000 + i) + "]: ";
    const std::string n = std::to_string(i);
    text += head + "Failed password for invalid user x from 1.2.3.4 from 10.0.0." + n + " port 22 ssh2\n";
    text += head + "Invalid user  from 10.1.0." + n + " from 1.2.3.4\n";
    text += head + "Failed password for r\xff\xfeo\xe2\x82ot from 10.2.0." + n + " port 22 ssh2\n";
    text += head + "Failed password for root from 10.3.0." + n + " port 22 ssh2 " + std::string(100000, 'A') + "\n";
    text += head + "Failed password for ro" + std::string(1, '\0') + "ot from 10.4.0." + n + " port 22 ssh2\n";
  }
  std::ofstream(log, std::ios::binary) << text;
  compare({"sshd", log});
  std::filesystem::remove_all(dir);
}

// fail2ban-regex -o KEY prints that key of each failure's dict (Python's None where it has
// none): fid, ip4, ip6, dns, mlfid, port, host, an F- group's name.
TEST(TestFilterCliOptions, AnyKeyOfTheFailureAsFail2banRegexPrintsIt) {
  for (const char* filter : {"sshd", "postfix", "guacamole"}) {
    const std::string log = kSamples + filter;
    for (const char* key : {"fid", "ip4", "ip6", "dns", "mlfid", "port", "host", "F-USER", "nofail", "content"}) {
      const ProcessResult theirs = run_process({kRegexTool, "-r", "-o", key, log, filter});
      const ProcessResult ours = run_process({gpufilterd_binary(), "--test-filter", filter, log, "-o", key});
      EXPECT_EQ(ours.status, 0) << ours.err;
      EXPECT_EQ(ours.out, theirs.out) << filter << " -o " << key;
    }
  }
}

// A line without a date shortly after one with a date takes that date's text in fail2ban's
// tuple ("", the last date's text, the line), which -o msg prints joined; the dates must be
// within a minute of the clock. Found by an outside-style fuzzer (-o msg had printed only
// the line read, not fail2ban's matches).
TEST(TestFilterCliHostile, MatchesPrintedAsFail2banKeepsThem) {
  char dir[] = "/tmp/gpufilter-f2b-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::localtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%b %e %H:%M:%S", &tm);
  const std::string head = std::string(stamp) + " host sshd[";
  const std::string sshd = std::string(dir) + "/auth.log";
  std::ofstream(sshd, std::ios::binary)
      << head << "1]: Invalid user ab\xff" "cd from 10.10.1.2 port 55555\n"
      << "sshd[2]: Invalid user zz from 10.10.1.3 port 1\n"
      << head << "3]: Connection from 10.10.1.4 port 2 on 10.0.0.1 port 22\n"
      << head << "3]: Failed password for root from 10.10.1.4 port 2 ssh2\n"
      << "sshd[3]: Failed password for root from 10.10.1.4 port 2 ssh2\n";
  const std::string guac = std::string(dir) + "/catalina.log";
  std::ofstream(guac, std::ios::binary)
      << "apr 16, 2013 8:32:13 AM org.slf4j.impl.JCLLoggerAdapter warn\n"
      << "WARNING: Authentication attempt from 192.0.2.0 for user \"null\" failed.\n"
      << "WARNING: Authentication attempt from 192.0.2.1 for user \"a\xc3\" failed.\n";
  for (const auto& [filter, log] : std::vector<std::pair<std::string, std::string>>{
           {"sshd", sshd}, {"sshd[mode=aggressive]", sshd}, {"guacamole", guac}}) {
    const ProcessResult theirs = run_process({kRegexTool, "-r", "-o", "msg", log, filter});
    const ProcessResult ours = run_process({gpufilterd_binary(), "--test-filter", filter, log, "-o", "msg"});
    EXPECT_EQ(ours.status, 0) << ours.err;
    EXPECT_EQ(ours.out, theirs.out) << filter;
    EXPECT_FALSE(ours.out.empty()) << filter;
  }
  // A multi-line match takes its earlier lines out of the missed list by their joined
  // tuple: with a reused date's text before a dateless line none is found, and equal texts
  // of different dates are not confused ("apr 16" twice at 8:32:28, once at 8:32:13).
  char catalina[32];
  std::strftime(catalina, sizeof catalina, "%b %d, %Y %I:%M:%S %p", &tm);
  catalina[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(catalina[0])));
  const std::string warn = " org.slf4j.impl.JCLLoggerAdapter warn\n";
  const std::string attempt = "WARNING: Authentication attempt from ";
  const std::string recent = std::string(dir) + "/recent.log";
  std::ofstream(recent, std::ios::binary)
      << catalina << warn << attempt << "192.0.2.0 for user \"x\" failed.\n" << attempt << "1.2.3 for user \"x\" failed.\n"
      << attempt << "192.0.2.1 for user \"x\" failed.\n" << catalina << warn << attempt << "1.2.3 for user \"y\" failed.\n"
      << attempt << "192.0.2.1 for user \"x\" failed.\n"
      << "apr 16, 2013 8:32:28 AM" << warn << attempt << "999.1.1.1 for user \"p\" failed.\n"
      << "apr 16, 2013 8:32:28 AM" << warn << "apr 16, 2013 8:32:13 AM" << warn << attempt
      << "192.0.2.9 for user \"p\" failed.\n";
  for (const char* list : {"--print-all-missed", "--print-all-matched", "--print-no-ignored"}) {
    const ProcessResult theirs = run_process({kRegexTool, "-r", list, recent, "guacamole"});
    const ProcessResult ours = run_process({gpufilterd_binary(), "--test-filter", "guacamole", recent, list});
    EXPECT_EQ(ours.status, 0) << ours.err;
    EXPECT_EQ(lines_part(ours.out), lines_part(theirs.out)) << list;
  }
  std::filesystem::remove_all(dir);
}

// A skipped line of a multi-line match that holds a line break of Python's str.splitlines()
// (\r, \v, \x1c, U+2028, ...) stays matched in fail2ban: the <SKIPLINES> group's text split
// there is not found among the buffered lines, so it is not given back to the buffer.
TEST(TestFilterCliHostile, SkippedLinesSplitAsPythonSplitsThem) {
  char dir[] = "/tmp/gpufilter-f2b-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string log = std::string(dir) + "/mongodb.log";
  std::string text;
  int n = 0;
  for (const std::string brk : {"\r", "\v", "\f", "\x1c", "\x1d", "\x1e", "\xc2\x85", "\xe2\x80\xa8", "\xe2\x80\xa9", "\r\n"}) {
    const std::string head = "2016-11-20T00:24:00.110+0100 [conn" + std::to_string(++n) + "] ";
    text += head + "Failed to authenticate root@admin with mechanism MONGODB-CR: AuthenticationFailed\n";
    text += head + "Failed to authenticate ro" + brk + "ot@admin with mechanism MONGODB-CR: AuthenticationFailed\n";
    text += head + "end connection 192.0.2." + std::to_string(n) + ":53276 (0 connections now open)\n";
    text += head + "end connection 192.0.2~." + std::to_string(n) + ":53276 (0 connections now open)\n";
  }
  std::ofstream(log, std::ios::binary) << text;
  compare({"mongodb-auth", log});
  fs::remove_all(dir);
}

// fail2ban's sample lines, each followed by three copies with a few random edits (tokens
// an attacker writes, line breaks Python knows, bytes that are not UTF-8, spans cut or
// doubled, case flipped), through several filters: fail2ban-regex's addresses, each as
// often. GPUFILTER_TEST_SEED=N changes the edits; a failure names the seed and the log.
TEST(TestFilterCliHostile, EditedSampleLinesGetFail2bansAddresses) {
  std::uint32_t seed = 23;
  if (const char* env = std::getenv("GPUFILTER_TEST_SEED")) seed += static_cast<std::uint32_t>(std::strtoul(env, nullptr, 10));
  std::mt19937 rng(seed);
  static const std::vector<std::string> tokens{
      " ", ":", "[", "]", "1", "a", ".", "\xc3\xa9", "\xff", "\t", "from ", " from 10.0.0.9 ", "(", ")", "=",
      "'", "\"", "user ", "::1", "\\", "<", ">", "\r", "\v", "\x1c", "\xe2\x80\xa8", "\xc2\x85", "port 22",
      "fe80::1", "1.2.3.4", "example.com", "-", "@", "/", std::string(1, '\0'), "\xe2\x82"};
  const auto edited = [&](std::string line) {
    for (int edits = 1 + static_cast<int>(rng() % 3); edits > 0; --edits) {
      const std::size_t lo = rng() % 5 != 0 ? std::min<std::size_t>(line.size(), 16) : 0;
      const std::size_t at = lo + rng() % (line.size() - lo + 1);
      switch (rng() % 4) {
        case 0: line.insert(at, tokens[rng() % tokens.size()]); break;
        case 1: line.erase(at, 1 + rng() % 6); break;
        case 2: line.insert(at, line.substr(at, 1 + rng() % 12)); break;
        default:
          if (at < line.size()) line[at] = static_cast<char>(std::isupper(static_cast<unsigned char>(line[at])) ? std::tolower(line[at]) : std::toupper(line[at]));
      }
    }
    std::replace(line.begin(), line.end(), '\n', ' ');
    return line;
  };
  char dir[] = "/tmp/gpufilter-f2b-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  for (const char* filter : {"sshd", "mongodb-auth", "ejabberd-auth", "postfix", "dovecot", "apache-auth", "nginx-http-auth",
                             "courier-smtp", "exim", "named-refused", "pam-generic", "asterisk"}) {
    std::ifstream in(kSamples + filter, std::ios::binary);
    std::string text;
    for (std::string line; std::getline(in, line);) {
      if (line.empty() || line[0] == '#') continue;
      text += line + "\n";
      for (int copy = 0; copy < 3; ++copy) text += edited(line) + "\n";
    }
    const std::string log = std::string(dir) + "/" + filter + ".log";
    std::ofstream(log, std::ios::binary) << text;
    SCOPED_TRACE(std::string(filter) + ", seed " + std::to_string(seed) + ", log kept in " + dir);
    const std::string conf = std::string("/etc/fail2ban/filter.d/") + filter + ".conf";
    compare_ips({{log, conf}, {filter, log}});
    EXPECT_EQ(lines_part(run_process({gpufilterd_binary(), "--test-filter", filter, log}).out),
              lines_part(run_process({kRegexTool, "-r", log, conf}).out));
    if (::testing::Test::HasFailure()) return;
  }
  fs::remove_all(dir);
}

// fail2ban-regex LOG REGEX [IGNOREREGEX]: a FILTER that names no filter (fail2ban-regex's
// test: not `[\w/_\-.]+` with options) is a failregex, and a third argument an ignoreregex
// beside the filter's own: the same summary, addresses and users.
TEST(TestFilterCliRegexLines, RegexesGivenAsFail2banRegexTakesThem) {
  const std::string log = corpus_path("loghub/OpenSSH_2k.log");
  const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> runs{
      {{"Failed password for .* from <HOST>"}, {"Failed password for .* from <HOST>"}},
      {{"^.*sshd\\[\\d+\\]: Invalid user <F-USER>\\S+</F-USER> from <HOST>\\s*$", "admin"},
       {"^.*sshd\\[\\d+\\]: Invalid user <F-USER>\\S+</F-USER> from <HOST>\\s*$", "admin"}},
      {{"/etc/fail2ban/filter.d/sshd.conf", "for root "}, {"sshd", "for root "}},
      {{"/etc/fail2ban/filter.d/sshd.conf[mode=aggressive]", "user"}, {"sshd[mode=aggressive]", "user"}},
  };
  for (const auto& [theirs_args, ours_args] : runs) {
    SCOPED_TRACE(ours_args[0]);
    for (const char* out : {"", "ip", "user"}) {
      std::vector<std::string> theirs{kRegexTool, "-r"}, ours{gpufilterd_binary(), "--test-filter", ours_args[0], log};
      if (*out != '\0') theirs.insert(theirs.end(), {"-o", out});
      theirs.push_back(log);
      theirs.insert(theirs.end(), theirs_args.begin(), theirs_args.end());
      ours.insert(ours.end(), ours_args.begin() + 1, ours_args.end());
      if (*out != '\0') ours.insert(ours.end(), {"--out", out});
      const ProcessResult t = run_process(theirs), o = run_process(ours);
      ASSERT_EQ(t.status, 0) << t.err;
      ASSERT_EQ(o.status, 0) << o.err;
      if (*out == '\0') {
        EXPECT_EQ(summary(o.out), summary(t.out));
        EXPECT_NE(summary(o.out).find("Lines: "), std::string::npos) << o.out;
      } else {
        EXPECT_EQ(counts(o.out), counts(t.out)) << out;
      }
    }
  }
  // -d (--datepattern) and -L (--maxlines) over the filter's, as fail2ban-regex's.
  TempDir dir;
  const std::string dated = dir.path() + "/dated.log";
  std::ofstream(dated) << "2026/12/03-08:00:01 login failure from 10.0.0.1\n2026/12/03-08:00:02 login failure from 10.0.0.2\n"
                          "2026/12/03-08:00:03 login failure\n2026/12/03-08:00:04 from 10.0.0.3\n";
  for (const std::vector<std::string>& options : std::vector<std::vector<std::string>>{
           {}, {"-d", "^%Y/%m/%d-%H:%M:%S"}, {"--datepattern", "{^LN-BEG}%Y/%m/%d-%H:%M:%S", "-L", "2"}}) {
    std::vector<std::string> theirs{kRegexTool, "-r"}, ours{gpufilterd_binary(), "--test-filter", "^ login failure(?: |\\n.* )from <HOST>$", dated};
    theirs.insert(theirs.end(), options.begin(), options.end());
    ours.insert(ours.end(), options.begin(), options.end());
    theirs.insert(theirs.end(), {dated, "^ login failure(?: |\\n.* )from <HOST>$"});
    const ProcessResult t = run_process(theirs), o = run_process(ours);
    EXPECT_EQ(o.status, 0) << o.err;
    EXPECT_EQ(summary(o.out), summary(t.out)) << (options.empty() ? "" : options[0]);
    EXPECT_EQ(lines_part(o.out), lines_part(t.out));
  }
  EXPECT_EQ(run_process({gpufilterd_binary(), "--test-filter", "sshd", dated, "-L", "0"}).status, 2);
  // The log's text itself in place of a file, one line or several.
  for (const std::string text : {"Dec 10 06:55:46 h sshd[24200]: Invalid user webmaster from 173.234.31.186",
                                 "Dec 10 06:55:46 h sshd[1]: Invalid user a from 10.0.0.1\nDec 10 06:55:47 h sshd[1]: "
                                 "Failed password for root from 10.0.0.2 port 22 ssh2\nDec 10 06:55:48 h sshd[1]: x"}) {
    const ProcessResult t = run_process({kRegexTool, "-r", text, "sshd"}), o = run_process({gpufilterd_binary(), "--test-filter", "sshd", text});
    EXPECT_EQ(o.status, 0) << o.err;
    EXPECT_EQ(summary(o.out), summary(t.out));
    const ProcessResult ti = run_process({kRegexTool, "-r", "-o", "ip", text, "sshd"}),
                        oi = run_process({gpufilterd_binary(), "--test-filter", "sshd", text, "--out", "ip"});
    EXPECT_EQ(counts(oi.out), counts(ti.out));
    EXPECT_FALSE(oi.out.empty());
  }
  // A failregex without a host, and one that does not compile: refused as fail2ban-regex
  // refuses them, exit status 2.
  for (const auto& [regex, reason] : std::vector<std::pair<std::string, std::string>>{
           {"no host here", "No failure-id group in 'no host here'"}, {"Failed (\\d <HOST>", "missing closing parenthesis"}}) {
    const ProcessResult o = run_process({gpufilterd_binary(), "--test-filter", regex, log});
    EXPECT_EQ(o.status, 2) << regex;
    EXPECT_NE(o.err.find(reason), std::string::npos) << o.err;
  }
}

// A quoted filter option holds commas (fail2ban's extractOptions): the zone "a,b".
TEST(TestFilterCliOptions, AQuotedOptionValueKeepsItsCommas) {
  char dir[] = "/tmp/gpufilter-f2b-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string log = std::string(dir) + "/limit.log";
  std::ofstream(log, std::ios::binary)
      << "2015/10/29 20:01:04 [error] 1#0: *9 limiting requests, excess: 1.8 by zone \"a,b\", client: 1.2.3.6, "
         "server: e, request: \"POST / HTTP/1.0\", host: \"e\"\n";
  const ProcessResult r = run_process(
      {gpufilterd_binary(), "--test-filter", "nginx-limit-req[ngx_limit_req_zones=\"a,b\"]", log, "--out", "ip"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "1.2.3.6\n");
  std::filesystem::remove_all(dir);
}

// Times the date regexes let through but Python's datetime refuses (second 60, hour 24
// and past): fail2ban has no date for such a line, and where the last date is recent it
// reuses that one and leaves the text uncut (then the failregex misses the line).
TEST(TestFilterCliHostile, TimesDatetimeRefusesLeaveTheLineUndated) {
  char dir[] = "/tmp/gpufilter-f2b-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string log = std::string(dir) + "/times.log";
  const std::time_t soon = std::time(nullptr) + 3600;
  std::tm t{};
  ::gmtime_r(&soon, &t);
  char minute[32];
  std::strftime(minute, sizeof minute, "%Y-%m-%d %H:%M", &t);
  const std::string tail = " host sshd[1]: Failed password for root from 192.0.2.";
  std::string text;
  text += std::string(minute) + ":00" + tail + "1 port 22 ssh2\n";
  text += std::string(minute) + ":60" + tail + "2 port 22 ssh2\n";  // after a recent date: missed
  text += "Nov 29 10:00:60" + tail + "3 port 22 ssh2\n";
  text += "Dec 31 24:10:00" + tail + "4 port 22 ssh2\n";
  text += "Nov 29 25:00:00" + tail + "5 port 22 ssh2\n";
  text += "Nov 31 10:00:00" + tail + "6 port 22 ssh2\n";
  std::ofstream(log, std::ios::binary) << text;
  compare({"sshd", log});
  std::filesystem::remove_all(dir);
}

// How fail2ban-regex names a filter and reads a log and a filter file, each beside the
// real tool: a path outside filter.d (read alone), "sshd.conf", a config folder that is
// filter.d itself; ::ffff: addresses in hex; Python's \s holding \x1c-\x1f; a last line
// ending in a lone '\r'; a backtracking failregex past PCRE2's default limits.
TEST(TestFilterCliHostile, FilterPathsAndLinesAsFail2banRegexReadsThem) {
  char dir[] = "/tmp/gpufilter-f2b-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string d = dir;
  fs::create_directories(d + "/p/filter.d");
  fs::create_directories(d + "/p/mine");
  std::ofstream(d + "/p/mine/f.conf") << "[Definition]\nfailregex = ^ fail <HOST>$\n";
  std::ofstream(d + "/p/filter.d/f.conf") << "[Definition]\nfailregex = ^ other <HOST>$\n";
  std::ofstream(d + "/p/filter.d/redos.conf") << "[Definition]\nfailregex = ^\\s*(?:(?:a|a)*b|a*c) from <HOST>$\n";
  const std::string flog = d + "/f.log";
  std::ofstream(flog) << "Nov 29 10:00:01 fail 1.1.1.1\nNov 29 10:00:02 other 2.2.2.2\n"
                      << "Nov 29 10:00:03 " << std::string(24, 'a') << "c from 3.3.3.3\n";
  const std::string slog = d + "/s.log";
  const std::string head = "Nov 29 10:00:01 host sshd[1]: Failed password for root from ";
  std::ofstream(slog, std::ios::binary) << head << "::ffff:102:304 port 22 ssh2\n"
                                        << head << "0:0:0:0:0:ffff:7f00:1 port 22 ssh2\n"
                                        << "Nov 29 10:00:01 host sshd[1]:\x1c" "Failed password for root from 5.5.5.5 port 22 ssh2\n"
                                        << head << "6.6.6.6 port 22 ssh2\r";
  const std::vector<IpRun> runs = {
      {{flog, d + "/p/mine/f.conf"}, {d + "/p/mine/f.conf", flog}},
      {{flog, d + "/p/filter.d/f.conf"}, {d + "/p/filter.d/f.conf", flog}},
      {{"-c", d + "/p", flog, "redos"}, {"redos", flog, "--fail2ban-dir", d + "/p"}},
      {{"-c", "/etc/fail2ban/filter.d", slog, "sshd.conf"}, {"sshd.conf", slog, "--fail2ban-dir", "/etc/fail2ban/filter.d"}},
  };
  for (const IpRun& run : runs) compare_ips(run);
  fs::remove_all(d);
}

// Found by an outside-style differential run: Python's \S inside a class leaves \x1c-\x1f
// out ([\S.] in named-refused), fail2ban-regex ignores a filter's own usedns
// (sshd[usedns=no] still takes a name), and a filter of [INCLUDES] alone (apache-common)
// is read as a filter of nothing.
TEST(TestFilterCliHostile, ClassesOptionsAndEmptyFiltersAsFail2banRegexReadsThem) {
  char dir[] = "/tmp/gpufilter-f2b-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string d = dir;
  fs::create_directories(d + "/p/filter.d");
  std::ofstream(d + "/p/filter.d/cls.conf")
      << "[Definition]\nfailregex = ^ fail[\\S]from <HOST>$\n            ^ gap[^\\S\\n]+from <HOST>$\n"
      << "            ^ any[\\S.]+ <HOST>$\n            ^ not[^\\S]<HOST>$\n";
  const std::string clog = d + "/c.log";
  std::ofstream(clog, std::ios::binary) << "Nov 29 10:00:01 fail\x1c" "from 1.1.1.1\nNov 29 10:00:02 failxfrom 1.1.1.2\n"
                                        << "Nov 29 10:00:03 gap\x1d" "from 1.1.1.3\nNov 29 10:00:04 gap from 1.1.1.4\n"
                                        << "Nov 29 10:00:05 anyab.\x1e 1.1.1.5\nNov 29 10:00:06 anyab. 1.1.1.6\n"
                                        << "Nov 29 10:00:07 not\x1f" "1.1.1.7\nNov 29 10:00:08 not\t1.1.1.8\n";
  const std::string nlog = d + "/n.log";
  std::ofstream(nlog, std::ios::binary)
      << "Jul 24 14:17:13 raid5 named[3935]: client 148.160.29.6#33081 (a\x1c" "b): query (cache) 'x.de/NS/IN' denied\n"
      << "Jul 24 14:17:14 raid5 named[3935]: client 148.160.29.7#33081 (ab): query (cache) 'x.de/NS/IN' denied\n";
  const std::string slog = d + "/s.log";
  std::ofstream(slog) << "Nov 29 10:00:00 h sshd[1]: Failed password for root from example.com port 22 ssh2\n"
                      << "Nov 29 10:00:01 h sshd[1]: Failed password for root from 192.0.2.9 port 22 ssh2\n";
  const std::vector<IpRun> runs = {
      {{"-c", d + "/p", clog, "cls"}, {"cls", clog, "--fail2ban-dir", d + "/p"}},
      {{nlog, "/etc/fail2ban/filter.d/named-refused.conf"}, {"named-refused", nlog}},
      {{slog, "sshd[usedns=no]"}, {"sshd[usedns=no]", slog}},
  };
  for (const IpRun& run : runs) compare_ips(run, true);
  const ProcessResult t = run_process({kRegexTool, "-r", slog, "/etc/fail2ban/filter.d/apache-common.conf"});
  const ProcessResult o = run_process({gpufilterd_binary(), "--test-filter", "apache-common", slog});
  EXPECT_EQ(o.status, 0) << o.err;
  EXPECT_EQ(summary(o.out), summary(t.out));
  EXPECT_NE(summary(o.out).find("0 matched"), std::string::npos) << o.out;
  fs::remove_all(d);
}

// A filter fail2ban refuses is refused: an option given twice, an escape Python does not
// know; a folder given as the log is an error.
TEST(TestFilterCliErrors, FiltersFail2banRefusesAreRefused) {
  char dir[] = "/tmp/gpufilter-f2b-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string d = dir;
  fs::create_directories(d + "/filter.d");
  std::ofstream(d + "/filter.d/dup.conf") << "[Definition]\nfailregex = ^ fail <HOST>$\nFailRegex = ^ x <HOST>$\n";
  std::ofstream(d + "/filter.d/pl.conf") << "[Definition]\nfailregex = ^ \\p{L}+ <HOST>$\n";
  std::ofstream(d + "/filter.d/rng.conf") << "[Definition]\nfailregex = ^ [a\\S-z]+ <HOST>$\n";
  const std::string log = d + "/f.log";
  std::ofstream(log) << "Nov 29 10:00:01 fail 1.1.1.1\n";
  const std::vector<std::pair<std::vector<std::string>, std::string>> refused{
      {{"dup", log}, "dup.conf:3: option 'failregex' in section 'Definition' already exists"},
      {{"pl", log}, "bad escape \\p"},
      {{"rng", log}, "bad character range with \\S"},
      {{"sshd", d}, ": Is a directory"},
  };
  for (const auto& [args, reason] : refused) {
    std::vector<std::string> argv{gpufilterd_binary(), "--test-filter"};
    argv.insert(argv.end(), args.begin(), args.end());
    if (args[0] != "sshd") argv.insert(argv.end(), {"--fail2ban-dir", d});
    const ProcessResult r = run_process(argv);
    EXPECT_EQ(r.status, 2) << args[0];
    EXPECT_NE(r.err.find(reason), std::string::npos) << r.err;
    const ProcessResult theirs = run_process({kRegexTool, "-c", d, log, args[0]});
    if (args[0] != "sshd") {
      EXPECT_NE(theirs.status, 0) << args[0];  // fail2ban-regex refuses it too
    }
  }
  fs::remove_all(d);
}

std::vector<Case> cases() {
  std::vector<Case> v;
  for (const char* f : {"sshd", "postfix", "dovecot", "vsftpd", "nginx-http-auth", "apache-auth", "named-refused",
                        "courier-smtp", "exim", "proftpd", "pam-generic", "recidive", "mongodb-auth", "ejabberd-auth",
                        "slapd", "guacamole"})
    v.push_back({f, kSamples + f});
  v.push_back({"sshd", corpus_path("loghub/OpenSSH_2k.log")});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Logs, TestFilterCli, ::testing::ValuesIn(cases()), [](const auto& test) {
  std::string name = test.param.filter + (test.param.log.find("loghub") != std::string::npos ? "_loghub" : "");
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
});

// Each mistake: exit status 2 and a message naming what is wrong; nothing on stdout.
TEST(TestFilterCliErrors, MistakesAreExitStatusTwoWithAReason) {
  const std::string log = kSamples + "sshd";
  const std::vector<std::pair<std::vector<std::string>, std::string>> mistakes{
      {{"--test-filter", "no-such-filter", log}, "no-such-filter"},
      {{"--test-filter", "sshd", "/nonexistent/auth.log"}, "/nonexistent/auth.log: No such file or directory"},
      {{"--test-filter", "sshd"}, "takes a filter and a log"},
      {{"--test-filter", "sshd", log, "--out", "users"}, "--out: 'users' is not supported"},
      {{"--test-filter", "sshd", log, "-o", "<ip> <F-USER>"}, "--out: '<ip> <F-USER>' is not supported"},
      {{"--test-filter", "sshd", log, "--fail2ban-dir", "/nonexistent"}, "/nonexistent"},
      // fail2ban-regex's "Wrong filter name or options" for each of these.
      {{"--test-filter", "sshd[mode]", log}, "expected option, wrong syntax at 0: mode"},
      {{"--test-filter", "sshd[mode = aggressive]", log}, "expected option, wrong syntax at 0"},
      {{"--test-filter", "sshd[mode=\"aggr\\\"essive\"]", log}, "unexpected syntax after option mode"},
      {{"--test-filter", "sshd", log, "--usedns", "yes"}, "unrecognized option '--usedns'"},
      {{"--test-filter", "sshd", log, "--raw=1"}, "option '--raw' takes no value or is unknown"},
      {{"--test-filter", "sshd", log, "-o"}, "option '--out' requires an argument"},
  };
  for (const auto& [args, reason] : mistakes) {
    std::vector<std::string> argv{gpufilterd_binary()};
    argv.insert(argv.end(), args.begin(), args.end());
    const ProcessResult r = run_process(argv);
    EXPECT_EQ(r.status, 2) << args[1] << " " << r.err;
    EXPECT_NE(r.err.find(reason), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
  }
}

// fail2ban-regex's own spellings, so that its command line carries over: -o for --out,
// --out=ip, -r (no lookups: what this command always does), and its order of LOG and
// FILTER.
TEST(TestFilterCliOptions, Fail2banRegexSpellingsAreTaken) {
  const std::string log = kSamples + "sshd";
  const ProcessResult want = run_process({gpufilterd_binary(), "--test-filter", "sshd", log, "--out", "ip"});
  ASSERT_EQ(want.status, 0) << want.err;
  ASSERT_NE(want.out, "");
  for (const std::vector<std::string>& spelling : std::vector<std::vector<std::string>>{
           {"-o", "ip", "sshd", log}, {"sshd", log, "--out=ip"}, {"-r", "sshd", "-o", "ip", log}, {"--raw", "sshd", log, "-o", "ip"},
           // fail2ban-regex's order, LOG FILTER, with a name or a filter file.
           {"-r", "-o", "ip", log, "sshd"}, {"-o", "ip", log, "/etc/fail2ban/filter.d/sshd.conf"},
           {"-c", "/etc/fail2ban", "sshd", log, "-o", "ip"}, {"--config=/etc/fail2ban", "sshd", log, "-o", "ip"},
           // After --, an ignoreregex may begin with '-' (this one matches no line).
           {"-o", "ip", "--", "sshd", log, "-never-in-the-log-"}}) {
    std::vector<std::string> argv{gpufilterd_binary(), "--test-filter"};
    argv.insert(argv.end(), spelling.begin(), spelling.end());
    const ProcessResult r = run_process(argv);
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, want.out) << spelling[0];
  }
}

// --out json: one object per failure, the line number and the failregex's number beside
// the address; a host name is reported as it stands (no lookup).
TEST(TestFilterCliErrors, JsonOutputNamesLineAndFailregex) {
  const ProcessResult r = run_process(
      {gpufilterd_binary(), "--test-filter", "sshd", "-", "--out", "json"},
      "Dec 10 06:55:46 host sshd[24200]: Invalid user webmaster from 173.234.31.186\n"
      "Dec 10 06:55:48 host sshd[24201]: Failed password for root from attacker.example port 22 ssh2\n");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find(R"("line":1)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(R"("ip":"173.234.31.186")"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(R"("user":"webmaster")"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(R"("id":"attacker.example")"), std::string::npos) << r.out;
}

// A log of many batches (the command reads 1,024 lines at a time, searched ahead in
// pieces on every core): the summary, every address in fail2ban-regex's order, and each
// failure's line number (counted as fail2ban-regex counts them: comments and empty lines
// skipped) with the line's own text.
TEST(TestFilterCliHostile, ManyBatchesKeepTheLinesOrderAndNumbers) {
  TempDir dir;
  const std::string log = dir.path() + "/auth.log";
  std::vector<std::string> counted;  // the lines the tools count, in order
  {
    std::ofstream out(log, std::ios::binary);
    std::istringstream in(read_file(corpus_path("loghub/OpenSSH_2k.log")));
    std::vector<std::string> sample;
    for (std::string line; std::getline(in, line);) sample.push_back(line);
    for (int round = 0; round < 3; ++round) {
      for (std::size_t i = 0; i < sample.size(); ++i) {
        if (i % 97 == 0) out << "# a comment\n\n";
        out << sample[i] << (i % 89 == 0 ? "\r\n" : "\n");
        counted.push_back(sample[i]);
      }
    }
  }
  const std::string conf = "/etc/fail2ban/filter.d/sshd.conf";
  const ProcessResult theirs = run_process({kRegexTool, "-r", log, conf});
  const ProcessResult ours = run_process({gpufilterd_binary(), "--test-filter", "sshd", log});
  ASSERT_EQ(ours.status, 0) << ours.err;
  EXPECT_EQ(summary(ours.out), summary(theirs.out));
  const ProcessResult their_ips = run_process({kRegexTool, "-r", "-o", "ip", log, conf});
  const ProcessResult our_ips = run_process({gpufilterd_binary(), "--test-filter", "sshd", log, "--out", "ip"});
  EXPECT_EQ(our_ips.out, their_ips.out);  // the same order, not only the same counts
  EXPECT_GT(std::count(our_ips.out.begin(), our_ips.out.end(), '\n'), 1500);
  // The log on standard input ("-"), read in blocks, not a character at a time: the same.
  const ProcessResult piped = run_process({gpufilterd_binary(), "--test-filter", "sshd", "-", "--out", "ip"}, read_file(log));
  ASSERT_EQ(piped.status, 0) << piped.err;
  EXPECT_EQ(piped.out, their_ips.out);
  const ProcessResult json = run_process({gpufilterd_binary(), "--test-filter", "sshd", log, "--out", "json"});
  ASSERT_EQ(json.status, 0) << json.err;
  std::istringstream lines(json.out);
  std::size_t failures = 0, last = 0;
  static const std::regex number(R"re("line":([0-9]+))re"), msg(R"re("msg":"((?:[^"\\]|\\.)*)")re");
  for (std::string line; std::getline(lines, line); ++failures) {
    std::smatch n, m;
    ASSERT_TRUE(std::regex_search(line, n, number) && std::regex_search(line, m, msg)) << line;
    const std::size_t at = std::stoul(n[1].str());
    ASSERT_GE(at, last);
    ASSERT_TRUE(at >= 1 && at <= counted.size()) << line;
    std::string text = counted[at - 1];
    while (!text.empty() && text.back() == '\r') text.pop_back();
    if (text.find_first_of("\"\\") == std::string::npos) {
      EXPECT_EQ(m[1].str(), text) << line;
    }
    last = at;
  }
  EXPECT_GT(failures, 1500u);
}

}  // namespace
}  // namespace gpufilter::test
