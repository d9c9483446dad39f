// gpufilterd --test-filter beside the real fail2ban-regex (Debian's fail2ban 1.0.2): the
// summary's line counts and hits per failregex, and the address of every failure (-o ip -r
// against --out ip, as sorted counts), on fail2ban's own sample logs and on the OpenSSH
// Loghub log; then the mistakes a user makes, each exit status 2 with a message.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
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

// The lines both tools agree on printing: "|  4) [521]" (hits of a failregex, by number)
// and "Lines: ...".
std::string summary(const std::string& text) {
  static const std::regex line_re(R"(^\|\s*[0-9]+\) \[[0-9]+\]|^Lines: .*)");
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

class TestFilterCli : public ::testing::TestWithParam<Case> {};

TEST_P(TestFilterCli, SameAsFail2banRegex) {
  const Case& c = GetParam();
  ASSERT_TRUE(fs::exists(kRegexTool)) << kRegexTool << " is missing: install Debian's fail2ban (README's set-up)";
  ASSERT_TRUE(fs::exists(c.log)) << c.log;
  const std::string conf = "/etc/fail2ban/filter.d/" + c.filter + ".conf";
  const ProcessResult theirs = run_process({kRegexTool, "-r", c.log, conf});
  ASSERT_EQ(theirs.status, 0) << theirs.err;
  const ProcessResult ours = run_process({GPUFILTERD_BINARY, "--test-filter", c.filter, c.log});
  ASSERT_EQ(ours.status, 0) << ours.err;
  EXPECT_EQ(summary(ours.out), summary(theirs.out));
  EXPECT_NE(summary(ours.out).find("Lines: "), std::string::npos) << ours.out;

  const ProcessResult their_ips = run_process({kRegexTool, "-r", "-o", "ip", c.log, conf});
  const ProcessResult our_ips = run_process({GPUFILTERD_BINARY, "--test-filter", c.filter, c.log, "--out", "ip"});
  ASSERT_EQ(our_ips.status, 0) << our_ips.err;
  EXPECT_EQ(counts(our_ips.out), counts(their_ips.out));
}

std::vector<Case> cases() {
  std::vector<Case> v;
  for (const char* f : {"sshd", "postfix", "dovecot", "vsftpd", "nginx-http-auth", "apache-auth", "named-refused",
                        "courier-smtp", "exim", "proftpd", "pam-generic", "recidive"})
    v.push_back({f, kSamples + f});
  v.push_back({"sshd", std::string(GPUFILTER_CORPUS_DIR) + "/loghub/OpenSSH_2k.log"});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Logs, TestFilterCli, ::testing::ValuesIn(cases()), [](const auto& info) {
  std::string name = info.param.filter + (info.param.log.find("loghub") != std::string::npos ? "_loghub" : "");
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
});

// Each mistake: exit status 2 and a message naming what is wrong; nothing on stdout.
TEST(TestFilterCliErrors, MistakesAreExitStatusTwoWithAReason) {
  const std::string log = kSamples + "sshd";
  const std::vector<std::pair<std::vector<std::string>, std::string>> mistakes{
      {{"--test-filter", "no-such-filter", log}, "no-such-filter"},
      {{"--test-filter", "sshd", "/nonexistent/auth.log"}, "/nonexistent/auth.log: cannot be read"},
      {{"--test-filter", "sshd"}, "takes a filter and a log"},
      {{"--test-filter", "sshd", log, "--out", "host"}, "'host' is none of ip, id, user, msg, json"},
      {{"--test-filter", "sshd", log, "--fail2ban-dir", "/nonexistent"}, "/nonexistent"},
  };
  for (const auto& [args, reason] : mistakes) {
    std::vector<std::string> argv{GPUFILTERD_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    const ProcessResult r = run_process(argv);
    EXPECT_EQ(r.status, 2) << args[1] << " " << r.err;
    EXPECT_NE(r.err.find(reason), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
  }
}

// --out json: one object per failure, the line number and the failregex's number beside
// the address; a host name is reported as it stands (no lookup).
TEST(TestFilterCliErrors, JsonOutputNamesLineAndFailregex) {
  const ProcessResult r = run_process(
      {GPUFILTERD_BINARY, "--test-filter", "sshd", "-", "--out", "json"},
      "Dec 10 06:55:46 host sshd[24200]: Invalid user webmaster from 173.234.31.186\n"
      "Dec 10 06:55:48 host sshd[24201]: Failed password for root from attacker.example port 22 ssh2\n");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find(R"("line":1)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(R"("ip":"173.234.31.186")"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(R"("user":"webmaster")"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(R"("id":"attacker.example")"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace gpufilter::test
