// FactorGate (fail2ban/src/factor_gate.hpp): it says "cannot match" only where PCRE2
// finds nothing. Small cases by hand, then every failregex and ignoreregex of every stock
// filter over every line of fail2ban's own sample logs: wherever the regex matches, the
// gate let it through.
#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <optional>
#include <fstream>
#include <string>
#include <vector>

#include "../../fail2ban/src/factor_gate.hpp"
#include "gpufilter/fail2ban/filter.hpp"
#include "outcome_text.hpp"
#include "gpufilter/fail2ban/pyregex.hpp"
#include "gpufilter/regex/factors.hpp"

namespace gpufilter::fail2ban {
namespace {

namespace fs = std::filesystem;

std::optional<std::vector<std::string>> factors_of(const std::string& python_regex) {
  regex::FactorOptions utf8;
  utf8.utf8 = true;
  return regex::required_factors(translate_python_regex(python_regex), regex::Syntax::kPerl, utf8);
}

TEST(FactorGate, LetsThroughOnlyTextsHoldingAFactor) {
  FactorGate gate;
  const std::size_t failed = gate.add(std::vector<std::string>{"Failed password", "Invalid user"});
  const std::size_t any = gate.add(std::nullopt);
  const std::size_t empty = gate.add(std::vector<std::string>{""});
  const std::size_t closed = gate.add(std::vector<std::string>{"Connection closed"});
  gate.build();
  EXPECT_TRUE(gate.may_match(failed, "Failed password for root from 192.0.2.1"));
  EXPECT_FALSE(gate.may_match(closed, "Failed password for root from 192.0.2.1"));
  EXPECT_TRUE(gate.may_match(any, "Failed password for root from 192.0.2.1"));
  EXPECT_TRUE(gate.may_match(empty, "anything"));
  EXPECT_FALSE(gate.may_match(failed, "Connection closed by 192.0.2.1"));  // a new text is scanned again
  EXPECT_TRUE(gate.may_match(closed, "Connection closed by 192.0.2.1"));
  EXPECT_TRUE(gate.may_match(failed, "x Invalid user\n"));
  EXPECT_FALSE(gate.may_match(failed, ""));
  EXPECT_FALSE(gate.may_match(failed, "failed password"));  // case counts: no (?i) factor is ever given
  EXPECT_TRUE(gate.may_match(99, "an unknown regex is always searched"));
}

TEST(FactorGate, WithoutFactorsItIsOpen) {
  FactorGate gate;
  const std::size_t any = gate.add(std::nullopt);
  gate.build();
  EXPECT_TRUE(gate.may_match(any, ""));
  EXPECT_TRUE(gate.may_match(any, "text"));
}

std::string describe(const Filter::Outcome& o) {
  std::string s = std::string(o.matched ? "matched" : "-");
  for (const std::size_t i : o.ignore_hits) s += " ignore" + std::to_string(i);
  return s + failures_text(o);
}

// Every stock filter with a sample log, in the modes its annotations name, every failregex
// tried (fail2ban-regex) and up to the first match (the daemon): with the gate and without,
// the same outcome for every line, and the lines of the other filters' logs too.
TEST(FactorGate, StockFiltersAnswerAsWithoutIt) {
  const std::string logs = "/usr/lib/python3/dist-packages/fail2ban/tests/files/logs";
  ASSERT_TRUE(fs::is_directory(logs)) << logs << " is missing: install Debian's fail2ban 1.0.2 (README's set-up)";
  setenv("TZ", "CET-01CEST-02,M3.5.0,M10.5.0", 1);
  tzset();
  std::vector<std::string> others;  // a line of every tenth of each log
  for (const auto& entry : fs::directory_iterator(logs)) {
    std::ifstream in(entry.path());
    std::size_t k = 0;
    for (std::string line; std::getline(in, line); ++k)
      if (k % 10 == 0) others.push_back(line);
  }
  std::size_t filters = 0, lines = 0, failures = 0;
  for (const auto& entry : fs::directory_iterator(logs)) {
    const std::string name = entry.path().filename().string();
    if (!fs::exists("/etc/fail2ban/filter.d/" + name + ".conf")) continue;
    std::vector<std::string> input;
    std::ifstream in(entry.path());
    for (std::string line; std::getline(in, line);) {
      while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.pop_back();
      input.push_back(line);
    }
    input.insert(input.end(), others.begin(), others.end());
    for (const char* mode : {"", "aggressive"}) {
      for (const bool check_all : {true, false}) {
        FilterOptions with, without;
        with.check_all_regex = without.check_all_regex = check_all;
        with.now = without.now = 1124013600;
        if (*mode) with.values["mode"] = without.values["mode"] = mode;
        without.factor_gate = false;
        std::optional<Filter> gated, plain;
        try {
          gated.emplace(Filter::load(name, with));
          plain.emplace(Filter::load(name, without));
        } catch (const Fail2banError&) {
          continue;  // refused: the samples test says why
        }
        ++filters;
        for (const std::string& line : input) {
          const Filter::Outcome want = plain->line(line);
          failures += want.failures.size();
          ++lines;
          ASSERT_EQ(describe(gated->line(line)), describe(want)) << name << " mode=" << mode << ": " << line;
        }
      }
    }
  }
  std::cout << filters << " filters and modes, " << lines << " lines, " << failures << " failures\n";
  EXPECT_GT(filters, 300u);
  EXPECT_GT(failures, 2000u);
}

}  // namespace
}  // namespace gpufilter::fail2ban
