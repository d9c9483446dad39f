// Filter::Lanes: a batch planned in line order (Filter::plan()) and its queued lines read
// by connection on other threads (Filter::read_lane()), while the next batch is planned,
// give each line the Outcome that reading it alone gives. sshd's four modes over logs in
// which up to 160 connections are open at once (more than fail2ban's cache of 100 holds:
// entries are dropped as it drops them), each connection's lines those of one process of
// the sample logs under a new id; batches of odd sizes, searched ahead or not, on 1 to 5
// lanes.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>
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

// The sample lines grouped by their process (sshd[PID]), replayed as `count` connections
// under new ids, up to `open` of them at once, their lines interleaved at random.
std::vector<std::string> interleaved(const std::vector<std::string>& sample, std::size_t count, std::size_t open,
                                     std::uint32_t seed) {
  const std::regex pid(R"(sshd\[(\d+)\])");
  std::map<std::string, std::vector<std::string>> by_pid;
  std::vector<std::string> plain;  // lines of no process: said between connections
  for (const std::string& l : sample) {
    std::smatch m;
    if (std::regex_search(l, m, pid)) by_pid[m[1].str()].push_back(l);
    else plain.push_back(l);
  }
  std::vector<const std::vector<std::string>*> processes;
  for (const auto& [p, lines] : by_pid) processes.push_back(&lines);
  std::mt19937 rng(seed);
  struct Conn {
    const std::vector<std::string>* lines;
    std::size_t next;
    std::string id;
  };
  std::vector<Conn> live;
  std::vector<std::string> out;
  std::size_t started = 0;
  while (started < count || !live.empty()) {
    while (started < count && live.size() < open && (live.empty() || rng() % 3 != 0)) {
      live.push_back({processes[rng() % processes.size()], 0, std::to_string(30000 + started++)});
    }
    if (!plain.empty() && rng() % 50 == 0) out.push_back(plain[rng() % plain.size()]);
    const std::size_t k = rng() % live.size();
    Conn& c = live[k];
    out.push_back(std::regex_replace((*c.lines)[c.next++], pid, "sshd[" + c.id + "]"));
    if (c.next == c.lines->size()) live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
  }
  return out;
}

// `lines` through two filters alike: one line by line; one a batch at a time, planned
// (searched ahead in three pieces on as many threads for two batches in three), its
// queued lines read by `lane_count` threads while the next batch is planned. Returns how
// many lines differed (each reported) and counts the failures and queued lines.
std::size_t compare(const FilterOptions& options, const std::vector<std::string>& lines, std::size_t lane_count,
                    std::uint32_t seed, std::size_t& failures, std::size_t& queued) {
  Filter alone = Filter::load("sshd", options), laned = Filter::load("sshd", options);
  EXPECT_TRUE(laned.reads_in_lanes());
  std::mt19937 rng(seed);
  struct Batch {
    std::size_t at = 0, n = 0;
    std::vector<Filter::DatedLine> dated;
    std::vector<Filter::Outcome> outcomes;
    std::vector<std::size_t> tickets;  // per line: its number among the queued, or kDone
    std::optional<Filter::Lanes> lanes;
    std::vector<Filter::Outcome*> into;
    std::vector<Filter::Ahead> searched;  // the batch's own: its queued lines replay them
  };
  std::array<Batch, 2> batches;
  for (Batch& b : batches)
    for (int p = 0; p < 3; ++p) b.searched.push_back(laned.ahead());
  std::size_t differ = 0;
  const auto check = [&](Batch& b) {  // after its lanes are read
    for (std::size_t j = 0; j < b.n; ++j) {
      const std::string& line = lines[b.at + j];
      const Filter::Outcome want = alone.line(alone.date_line(line), literal_offsets(alone, line));
      failures += want.failures.size();
      if (text_of(b.outcomes[j]) == text_of(want)) continue;
      if (++differ <= 5) ADD_FAILURE() << "line " << b.at + j << ": " << line << "\n  got  " << text_of(b.outcomes[j])
                                       << "\n  want " << text_of(want);
    }
  };
  std::vector<std::thread> reading;  // the lanes of the batch before
  Batch* before = nullptr;
  std::size_t at = 0;
  for (std::size_t k = 0; at < lines.size() || before != nullptr; ++k) {
    Batch& b = batches[k % 2];
    b.at = at;
    b.n = std::min<std::size_t>(lines.size() - at, 1 + rng() % 300);
    at += b.n;
    b.dated.clear();
    std::vector<std::vector<std::size_t>> found;
    for (std::size_t j = 0; j < b.n; ++j) {
      b.dated.push_back(laned.date_line(lines[b.at + j]));
      found.push_back(literal_offsets(laned, lines[b.at + j]));
    }
    const bool ahead = rng() % 3 != 0;
    const std::size_t piece = (b.n + 2) / 3;
    if (ahead && b.n > 0) {
      std::vector<std::thread> threads;
      for (std::size_t p = 0; p < 3; ++p)
        threads.emplace_back([&, p] {
          b.searched[p].clear();
          for (std::size_t j = p * piece; j < std::min(b.n, (p + 1) * piece); ++j)
            laned.search_ahead(b.dated[j], found[j], j, b.searched[p]);
        });
      for (std::thread& t : threads) t.join();
    }
    if (!b.lanes) b.lanes = laned.lanes(lane_count);
    b.lanes->clear();
    b.outcomes.assign(b.n, {});
    b.tickets.clear();
    for (std::size_t j = 0; j < b.n; ++j)  // planned while the batch before is read in lanes
      b.tickets.push_back(laned.plan(b.dated[j], found[j], ahead ? &b.searched[j / piece] : nullptr, j, *b.lanes, b.outcomes[j]));
    for (std::thread& t : reading) t.join();
    reading.clear();
    if (before != nullptr) check(*before);
    if (b.n == 0) break;
    b.into.assign(b.lanes->queued(), nullptr);
    for (std::size_t j = 0; j < b.n; ++j)
      if (b.tickets[j] != Filter::Lanes::kDone) b.into[b.tickets[j]] = &b.outcomes[j];
    queued += b.lanes->queued();
    for (std::size_t lane = b.lanes->count(); lane-- > 0;)
      reading.emplace_back([&laned, &b, lane] { laned.read_lane(*b.lanes, lane, b.into); });
    before = &b;
  }
  return differ;
}

TEST(Fail2banLanes, ConnectionsReadSideBySideAnswerAsLineByLine) {
  ASSERT_TRUE(fs::is_directory(kLogs)) << kLogs << " is missing: install Debian's fail2ban (README's set-up)";
  std::vector<std::string> sample = read_log_lines(kLogs + "sshd");
  const std::vector<std::string> openssh = read_log_lines(gpufilter::test::corpus_path("loghub/OpenSSH_2k.log"));
  sample.insert(sample.end(), openssh.begin(), openssh.end());
  std::uint32_t seed = 7;
  for (const char* mode : {"normal", "ddos", "extra", "aggressive"}) {
    for (const std::size_t open : {3, 160}) {
      const std::vector<std::string> lines = interleaved(sample, 700, open, seed++);
      FilterOptions options;
      options.now = 1733814000;  // the same assumed year for both
      options.values["mode"] = mode;
      for (const std::size_t lanes : {1, 2, 5}) {
        std::size_t failures = 0, queued = 0;
        EXPECT_EQ(compare(options, lines, lanes, seed++, failures, queued), 0u) << mode << ", " << open << " open, " << lanes << " lanes";
        EXPECT_GT(failures, 300u) << mode;
        EXPECT_GT(queued, lines.size() / 4) << mode;
      }
    }
  }
}

}  // namespace
}  // namespace gpufilter::fail2ban
