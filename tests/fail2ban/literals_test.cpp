// Filter::literals(): a filter that skips the lines without its literals answers exactly
// as one that reads every line. Every stock filter over its own sample log (every line,
// comments included) and over hostile lines whose date splits a literal, two filters side
// by side: one given every line, one given the offsets where a scan would find literals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gpufilter/fail2ban/filter.hpp"
#include "outcome_text.hpp"

namespace gpufilter::fail2ban {
namespace {

namespace fs = std::filesystem;

const std::string kLogs = "/usr/lib/python3/dist-packages/fail2ban/tests/files/logs";
constexpr double kTestNow = 1124013600;  // tests/utils.py TEST_NOW

// Where a scan finds the literals: every start of every literal.
std::vector<std::size_t> found_in(const std::string& line, const std::vector<std::string>& literals) {
  std::vector<std::size_t> at;
  for (const std::string& l : literals)
    for (std::size_t p = line.find(l); p != std::string::npos; p = line.find(l, p + 1)) at.push_back(p);
  return at;
}

std::string describe(const Filter::Outcome& o) {
  std::string s = std::string(o.matched ? "matched" : "-") + (o.ignored() ? " ignored" : "");
  return s + failures_text(o);
}

// Hostile lines for a filter: a date cut into the middle of each literal, before and after
// a plausible tail, and the literal whole after a date in the middle of the line.
std::vector<std::string> hostile_lines(const std::vector<std::string>& literals) {
  std::vector<std::string> out;
  for (const std::string& l : literals) {
    if (out.size() > 200) break;
    const std::size_t half = l.size() / 2;
    for (const char* date : {"2005-08-14 10:00:00 ", "Aug 14 11:59:59 ", "[14/Aug/2005:11:59:59 +0200] "}) {
      out.push_back(l.substr(0, half) + date + l.substr(half) + " from 192.0.2.7 port 22");
      out.push_back("host sshd[1]: " + l.substr(0, half) + date + l.substr(half) + " 192.0.2.8");
      out.push_back("prefix " + std::string(date) + l + " user=x rhost=192.0.2.9");
    }
  }
  return out;
}

// Two filters `name` (one to read every line, one to skip), as the sample logs' tests load
// them: false where the filter is refused (the samples test says why).
bool load_twice(const std::string& name, bool check_all_regex, std::optional<Filter>& every,
                std::optional<Filter>& some) {
  FilterOptions options;
  options.check_all_regex = check_all_regex;
  options.now = kTestNow;
  try {
    every.emplace(Filter::load(name, options));
    some.emplace(Filter::load(name, options));
  } catch (const Fail2banError&) {
    return false;
  }
  return true;
}

TEST(Fail2banLiterals, SkippingLinesWithoutLiteralsChangesNoAnswer) {
  ASSERT_TRUE(fs::is_directory(kLogs)) << kLogs << " is missing: install Debian's fail2ban 1.0.2 (README's set-up)";
  setenv("TZ", "CET-01CEST-02,M3.5.0,M10.5.0", 1);
  tzset();
  int filters = 0, filtered = 0;
  std::size_t lines = 0, skipped = 0;
  for (const auto& e : fs::directory_iterator(kLogs)) {
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file() || !fs::exists("/etc/fail2ban/filter.d/" + name + ".conf")) continue;
    std::optional<Filter> every, some;
    if (!load_twice(name, true, every, some)) continue;
    ++filters;
    if (!some->literals()) continue;
    ++filtered;
    std::vector<std::string> input;
    std::ifstream in(e.path());
    for (std::string line; std::getline(in, line);) {
      while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.pop_back();
      input.push_back(line);
    }
    const std::vector<std::string> hostile = hostile_lines(*some->literals());
    input.insert(input.end(), hostile.begin(), hostile.end());
    for (const std::string& line : input) {
      const std::vector<std::size_t> at = found_in(line, *some->literals());
      ++lines;
      skipped += at.empty() ? 1 : 0;
      const std::string want = describe(every->line(line)), got = describe(some->line(line, at));
      ASSERT_EQ(got, want) << name << ": " << line;
    }
  }
  std::cout << filters << " filters, " << filtered << " with literals; " << lines << " lines, " << skipped
            << " without a literal\n";
  EXPECT_GE(filtered, filters / 2);
}

// A multi-line filter (maxlines > 1) searches its buffer only while a buffered line holds
// a literal. Its sample log with lines that hold none put between its lines, 0 to
// maxlines + 1 of them in turn (so a failure's lines fall inside and outside the window),
// answers as the filter that searches every buffer.
TEST(Fail2banLiterals, MultiLineFiltersSkipOnlyBuffersWithoutLiterals) {
  ASSERT_TRUE(fs::is_directory(kLogs)) << kLogs << " is missing: install Debian's fail2ban 1.0.2 (README's set-up)";
  setenv("TZ", "CET-01CEST-02,M3.5.0,M10.5.0", 1);
  tzset();
  int multi_line = 0;
  std::size_t failures = 0;
  for (const auto& e : fs::directory_iterator(kLogs)) {
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file() || !fs::exists("/etc/fail2ban/filter.d/" + name + ".conf")) continue;
    for (const bool check_all : {true, false}) {
      std::optional<Filter> every, some;
      if (!load_twice(name, check_all, every, some) || some->maxlines() < 2 || !some->literals()) continue;
      multi_line += check_all ? 1 : 0;
      std::vector<std::string> input;
      std::ifstream in(e.path());
      std::size_t k = 0;
      for (std::string line; std::getline(in, line); ++k) {
        while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.pop_back();
        input.push_back(line);
        for (std::size_t n = 0; n < k % (some->maxlines() + 2); ++n)
          input.push_back("Aug 14 11:59:5" + std::to_string(n % 10) + " host daemon[7]: nothing to see " +
                          std::to_string(n));
      }
      for (const std::string& line : input) {
        const Filter::Outcome want = every->line(line);
        failures += want.failures.size();
        ASSERT_EQ(describe(some->line(line, found_in(line, *some->literals()))), describe(want))
            << name << (check_all ? " (every failregex)" : "") << ": " << line;
      }
    }
  }
  std::cout << multi_line << " multi-line filters with literals, " << failures << " failures\n";
  EXPECT_GE(multi_line, 3);
  EXPECT_GT(failures, 10u);
}

// Every stock filter at once, as gpufilterd runs them: one date detection per line for the
// filters with the same date settings, literals as a scan finds them. Each filter's answers
// are those it gives alone, reading every line with its own detector, over sample logs one
// after the other.
TEST(Fail2banLiterals, FiltersSharingOneDateDetectionAnswerAsAlone) {
  ASSERT_TRUE(fs::is_directory(kLogs)) << kLogs << " is missing: install Debian's fail2ban 1.0.2 (README's set-up)";
  setenv("TZ", "CET-01CEST-02,M3.5.0,M10.5.0", 1);
  tzset();
  FilterOptions options;
  options.check_all_regex = true;
  options.now = kTestNow;
  std::vector<Filter> alone, shared;
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator("/etc/fail2ban/filter.d")) {
    const std::string name = e.path().stem().string();
    if (e.path().extension() != ".conf") continue;
    try {
      alone.push_back(Filter::load(name, options));
      shared.push_back(Filter::load(name, options));
      names.push_back(name);
    } catch (const Fail2banError&) {
    }
  }
  std::vector<std::size_t> reader(shared.size());
  std::set<std::string> keys;
  for (std::size_t i = 0; i < shared.size(); ++i) {
    reader[i] = i;
    for (std::size_t j = 0; j < i; ++j)
      if (shared[j].date_key() == shared[i].date_key()) {
        reader[i] = j;
        break;
      }
    keys.insert(shared[i].date_key());
  }
  // Every other sample log (sorted), to keep the test short: 90 filters read each line twice.
  std::vector<fs::path> logs;
  for (const auto& e : fs::directory_iterator(kLogs))
    if (e.is_regular_file()) logs.push_back(e.path());
  std::sort(logs.begin(), logs.end());
  std::size_t lines = 0, failures = 0;
  for (std::size_t k = 0; k < logs.size(); k += 2) {
    std::ifstream in(logs[k]);
    for (std::string line; std::getline(in, line);) {
      while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.pop_back();
      ++lines;
      std::map<std::size_t, Filter::DatedLine> dated;
      for (std::size_t i = 0; i < shared.size(); ++i) {
        if (!dated.count(reader[i])) dated.emplace(reader[i], shared[reader[i]].date_line(line));
        const std::vector<std::size_t> at =
            shared[i].literals() ? found_in(line, *shared[i].literals()) : std::vector<std::size_t>{};
        const Filter::Outcome want = alone[i].line(line);
        failures += want.failures.size();
        ASSERT_EQ(describe(shared[i].line(dated.at(reader[i]), at)), describe(want)) << names[i] << ": " << line;
      }
    }
  }
  std::cout << shared.size() << " filters, " << keys.size() << " date settings; " << lines << " lines, " << failures
            << " failures\n";
  EXPECT_GT(failures, 200u);
}

}  // namespace
}  // namespace gpufilter::fail2ban
