// DateSearches (fail2ban/date.hpp): the date readers of every stock filter (one per
// datepattern), dating a batch's lines side by side on several threads and sharing their
// template searches, find in every line the date each finds alone: the same span and time.
// Over the OpenSSH sample, fail2ban's own sample logs of filters with their own
// datepatterns, and lines made to meet the edges (no date, invalid UTF-8, dates of other
// forms in a row).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "gpufilter/fail2ban/filter.hpp"
#include "testutil/testutil.hpp"

namespace gpufilter::fail2ban {
namespace {

namespace fs = std::filesystem;

const std::string kLogs = "/usr/lib/python3/dist-packages/fail2ban/tests/files/logs/";

void add_lines(const std::string& path, std::vector<std::string>& lines) {
  std::ifstream in(path);
  for (std::string l; std::getline(in, l);) {
    if (!l.empty() && l.back() == '\r') l.pop_back();
    if (l.rfind('#', 0) != 0) lines.push_back(l);
  }
}

std::string text_of(const Filter::DatedLine& d) {
  if (!d.date) return "none";
  return std::to_string(d.date->start) + "-" + std::to_string(d.date->end) + ":" +
         (d.date->time ? std::to_string(*d.date->time) : "no time");
}

TEST(DateSearches, SharedReadersDateEveryLineAsAlone) {
  ASSERT_TRUE(fs::is_directory(kLogs)) << kLogs << " is missing: install Debian's fail2ban (README's set-up)";
  FilterOptions options;
  options.now = 1733814000;  // the same assumed year for every reader
  std::vector<std::string> lines;
  add_lines(gpufilter::test::corpus_path("loghub/OpenSSH_2k.log"), lines);
  std::map<std::string, std::string> readers;  // date_key -> a filter with it
  for (const auto& entry : fs::directory_iterator("/etc/fail2ban/filter.d")) {
    if (entry.path().extension() != ".conf") continue;
    const std::string name = entry.path().stem().string();
    try {
      const Filter f = Filter::load(name, options);
      if (readers.emplace(f.date_key(), name).second && !f.date_key().empty() && fs::exists(kLogs + name))
        add_lines(kLogs + name, lines);
    } catch (const std::exception&) {
      continue;  // refused, or a fragment such as common.conf
    }
  }
  ASSERT_GT(readers.size(), 15u);
  for (int round = 0; round < 3; ++round) {
    for (const char* edge : {"no date at all", "Dec 10 06:55:46 LabSZ sshd[1]: \xff\xfe invalid", "",
                             "2024-12-10 06:55:46 a line", "Dec 10 06:55:46 another"})
      lines.emplace_back(edge);
  }
  std::vector<Filter> alone, shared;
  for (const auto& [key, name] : readers) {
    alone.push_back(Filter::load(name, options));
    shared.push_back(Filter::load(name, options));
  }
  DateSearches searches;
  std::size_t differ = 0, dated = 0;
  constexpr std::size_t kBatch = 257, kThreads = 4;
  for (std::size_t at = 0; at < lines.size(); at += kBatch) {
    const std::size_t n = std::min(kBatch, lines.size() - at);
    searches.reset(n);
    std::vector<std::vector<Filter::DatedLine>> got(shared.size());
    std::vector<std::thread> threads;
    for (std::size_t t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (std::size_t r = t; r < shared.size(); r += kThreads)
          for (std::size_t j = 0; j < n; ++j) {
            const DateSearches::Reading reading(searches, j, lines[at + j]);
            got[r].push_back(shared[r].date_line(lines[at + j]));
          }
      });
    }
    for (std::thread& t : threads) t.join();
    for (std::size_t r = 0; r < shared.size(); ++r) {
      for (std::size_t j = 0; j < n; ++j) {
        const std::string want = text_of(alone[r].date_line(lines[at + j]));
        dated += want != "none";
        if (text_of(got[r][j]) == want) continue;
        if (++differ <= 5)
          ADD_FAILURE() << "reader " << r << " line " << at + j << ": " << lines[at + j] << "\n  got  "
                        << text_of(got[r][j]) << "\n  want " << want;
      }
    }
  }
  EXPECT_EQ(differ, 0u);
  EXPECT_GT(dated, 20000u);
}

}  // namespace
}  // namespace gpufilter::fail2ban
