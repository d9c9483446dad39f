// Filter::search_ahead(): a batch's lines searched in pieces on other threads, then read by
// the filter in order, give each line the Outcome that reading it alone gives. Every stock
// filter that searches ahead, over its own sample log, the OpenSSH sample and lines made
// to meet the edges (a date inside the line, none, invalid UTF-8, a literal before the
// date, a forged user); up to the first regex that matches with a scan's literals (the
// daemon's rules), and every regex without (--test-filter, as fail2ban-regex).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "gpufilter/fail2ban/filter.hpp"
#include "outcome_text.hpp"
#include "testutil/testutil.hpp"

namespace gpufilter::fail2ban {
namespace {

namespace fs = std::filesystem;

const std::string& kLogs = kSampleLogs;

std::vector<std::string> edge_lines() {
  return {
      "Dec 10 06:55:46 LabSZ sshd[24200]: Invalid user admin from 10.0.0.1",
      "sshd[24200]: Invalid user admin from 10.0.0.2 Dec 10 06:55:47",  // the date after the text
      "Invalid user webmaster from 10.0.0.3",                          // no date
      "Dec 10 06:55:48 LabSZ sshd[24201]: Invalid user \xff\xfe from 10.0.0.4",
      "Dec 10 06:55:49 LabSZ sshd[24202]: Failed password for invalid user x from 1.2.3.4 from 10.0.0.5 port 22 ssh2",
      "Dec 10 06:55:50 LabSZ sshd[24203]: Failed password for root from 10.0.0.6 port 22 ssh2",
      "Dec 10 06:55:50 LabSZ sshd[24203]: Received disconnect from 10.0.0.6 port 22:11: Bye [preauth]",
      "Dec 10 06:55:51 LabSZ sshd[24204]: pam_unix(sshd:auth): authentication failure; logname= uid=0 euid=0 tty=ssh "
      "ruser= rhost=10.0.0.7  user=root",
      "Dec 10 06:55:52 LabSZ sshd[24204]: " + std::string(5000, 'x') + " from 10.0.0.8",
      "",
      "Dec 99 99:99:99 LabSZ sshd[24205]: Invalid user y from 10.0.0.9",  // a date that is no time
  };
}

// `lines` through two filters alike, one line by line, one a batch at a time searched
// ahead in `pieces` pieces on as many threads; `scanned`: given where the literals lie (as
// gpufilterd's rules are), else without (--test-filter). Returns how many lines differed
// (each reported) and counts the failures found.
std::size_t compare(const std::string& name, const FilterOptions& options, const std::vector<std::string>& lines,
                    std::size_t batch, std::size_t pieces, std::size_t& failures, bool scanned = true) {
  Filter alone = Filter::load(name, options), ahead = Filter::load(name, options);
  std::vector<Filter::Ahead> searched;
  for (std::size_t p = 0; p < pieces; ++p) searched.push_back(ahead.ahead());
  std::size_t differ = 0;
  for (std::size_t at = 0; at < lines.size(); at += batch) {
    const std::size_t n = std::min(batch, lines.size() - at), piece = (n + pieces - 1) / pieces;
    std::vector<Filter::DatedLine> dated;
    std::vector<std::vector<std::size_t>> found;
    for (std::size_t j = 0; j < n; ++j) {
      dated.push_back(ahead.date_line(lines[at + j]));
      found.push_back(literal_offsets(ahead, lines[at + j]));
    }
    std::vector<std::thread> threads;
    for (std::size_t p = 0; p < pieces; ++p) {
      threads.emplace_back([&, p] {
        searched[p].clear();
        for (std::size_t j = p * piece; j < std::min(n, (p + 1) * piece); ++j) {
          if (scanned) ahead.search_ahead(dated[j], found[j], j, searched[p]);
          else ahead.search_ahead(dated[j], j, searched[p]);
        }
      });
    }
    for (std::thread& t : threads) t.join();
    for (std::size_t j = 0; j < n; ++j) {
      const std::string& line = lines[at + j];
      const Filter::Outcome want =
          scanned ? alone.line(alone.date_line(line), literal_offsets(alone, line)) : alone.line(line);
      const Filter::Outcome got =
          scanned ? ahead.line(dated[j], found[j], searched[j / piece], j) : ahead.line(dated[j], searched[j / piece], j);
      failures += want.failures.size();
      if (text_of(got) == text_of(want)) continue;
      if (++differ <= 5) ADD_FAILURE() << name << " line " << at + j << ": " << line << "\n  got  " << text_of(got)
                                       << "\n  want " << text_of(want);
    }
  }
  return differ;
}

TEST(Fail2banAhead, EveryStockFilterAnswersAsLineByLine) {
  ASSERT_TRUE(fs::is_directory(kLogs)) << kLogs << " is missing: install Debian's fail2ban (README's set-up)";
  const std::vector<std::string> openssh = read_log_lines(gpufilter::test::corpus_path("loghub/OpenSSH_2k.log"));
  std::size_t filters = 0, failures = 0;
  gpufilter::test::SweepShare share;
  for (const auto& entry : fs::directory_iterator("/etc/fail2ban/filter.d")) {
    if (entry.path().extension() != ".conf" || !share.take()) continue;
    const std::string name = entry.path().stem().string();
    FilterOptions options;
    options.now = 1733814000;  // 2024-12-10: the same assumed year for both
    std::optional<Filter> probe;
    try {
      probe.emplace(Filter::load(name, options));
    } catch (const std::exception&) {
      continue;  // refused (or a fragment such as common.conf): tested elsewhere
    }
    if (!probe->searches_ahead()) continue;
    std::vector<std::string> lines = read_log_lines(kLogs + name);
    lines.insert(lines.end(), openssh.begin(), openssh.end());
    for (int round = 0; round < 3; ++round) {
      const std::vector<std::string> edges = edge_lines();
      lines.insert(lines.end(), edges.begin(), edges.end());
    }
    EXPECT_EQ(compare(name, options, lines, 257, 3, failures), 0u) << name;
    // fail2ban-regex's way (every regex tried), without a scan: --test-filter.
    FilterOptions all = options;
    all.check_all_regex = true;
    EXPECT_EQ(compare(name, all, lines, 257, 3, failures, false), 0u) << name << ", every regex";
    ++filters;
  }
  const bool whole = gpufilter::test::whole_sweeps();
  EXPECT_GT(filters, whole ? 60u : 15u) << filters;
  EXPECT_GT(failures, whole ? 1500u : 300u);
}

// Options that change the regexes (sshd's modes), and pieces of five lines.
TEST(Fail2banAhead, ModesAndSmallPieces) {
  const std::vector<std::string> sshd = read_log_lines(kLogs + "sshd");
  std::vector<std::string> lines = read_log_lines(gpufilter::test::corpus_path("loghub/OpenSSH_2k.log"));
  lines.insert(lines.end(), sshd.begin(), sshd.end());
  const std::vector<std::string> edges = edge_lines();
  lines.insert(lines.end(), edges.begin(), edges.end());
  for (const char* mode : {"normal", "ddos", "extra", "aggressive"}) {
    FilterOptions options;
    options.now = 1733814000;
    options.values["mode"] = mode;
    std::size_t failures = 0;
    EXPECT_EQ(compare("sshd", options, lines, 35, 7, failures), 0u) << mode;
    EXPECT_GT(failures, 500u) << mode;
    options.check_all_regex = true;
    EXPECT_EQ(compare("sshd", options, lines, 35, 7, failures, false), 0u) << mode << ", every regex";
  }
}

}  // namespace
}  // namespace gpufilter::fail2ban
