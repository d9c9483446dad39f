// Filter::line against the real fail2ban-regex (`-o ip -r`: one address per failure, no
// name resolved) on logs generated from fail2ban's own samples: the same addresses, each
// as many times.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "gpufilter/fail2ban/filter.hpp"

namespace gpufilter::fail2ban {
namespace {

namespace fs = std::filesystem;
const std::string kLogs = "/usr/lib/python3/dist-packages/fail2ban/tests/files/logs";
const std::string kRegexTool = "/usr/bin/fail2ban-regex";
constexpr std::size_t kLines = 2000;

// The sample's log lines (no comments), repeated with their IPv4 addresses moved to a new
// /16 per round so that every round bans other hosts.
std::vector<std::string> generated_log(const std::string& name) {
  std::vector<std::string> samples;
  std::ifstream in(kLogs + "/" + name);
  for (std::string l; std::getline(in, l);) {
    if (!l.empty() && l[0] != '#') samples.push_back(l);
  }
  static const std::regex ip4(R"(\b(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})\b)");
  std::vector<std::string> out;
  for (int round = 0; out.size() < kLines && !samples.empty(); ++round) {
    for (const auto& s : samples) {
      if (out.size() >= kLines) break;
      out.push_back(std::regex_replace(s, ip4, "10." + std::to_string(round % 250) + ".$3.$4"));
    }
  }
  return out;
}

std::map<std::string, int> run_fail2ban_regex(const std::string& log, const std::string& filter) {
  const std::string command = kRegexTool + " -r -o ip " + log + " " + filter + " 2>/dev/null";
  std::map<std::string, int> counts;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return counts;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, pipe) != nullptr) {
    std::string line(buf);
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    if (!line.empty()) ++counts[line];
  }
  pclose(pipe);
  return counts;
}

std::map<std::string, int> run_library(const std::vector<std::string>& lines, const std::string& filter) {
  FilterOptions options;  // fail2ban-regex -o: first matching failregex only, pending ignored
  Filter f = Filter::load(filter, options);
  std::map<std::string, int> counts;
  for (const auto& l : lines) {
    const Filter::Outcome o = f.line(l);
    if (o.ignored()) continue;
    for (const auto& failure : o.failures) ++counts[failure.fields.count("ip") ? failure.fields.at("ip") : failure.id];
  }
  return counts;
}

class RegexCompare : public ::testing::TestWithParam<std::string> {};

TEST_P(RegexCompare, SameHostsAndCounts) {
  ASSERT_TRUE(fs::exists(kRegexTool)) << kRegexTool << " is missing: install Debian's fail2ban 1.0.2";
  const std::string name = GetParam();
  const auto lines = generated_log(name);
  ASSERT_FALSE(lines.empty());
  const std::string log = (fs::temp_directory_path() / ("gpufilter-f2b-" + name + ".log")).string();
  {
    std::ofstream out(log);
    for (const auto& l : lines) out << l << "\n";
  }
  const std::string filter = "/etc/fail2ban/filter.d/" + name + ".conf";
  const auto want = run_fail2ban_regex(log, filter);
  const auto got = run_library(lines, filter);
  fs::remove(log);
  int total = 0;
  for (const auto& [h, n] : want) total += n;
  std::cout << name << ": fail2ban-regex " << want.size() << " hosts, " << total << " failures; library "
            << got.size() << " hosts\n";
  EXPECT_FALSE(want.empty());
  EXPECT_EQ(got, want);
}

INSTANTIATE_TEST_SUITE_P(Filters, RegexCompare,
                         ::testing::Values("sshd", "apache-auth", "nginx-http-auth", "postfix"));

}  // namespace
}  // namespace gpufilter::fail2ban
