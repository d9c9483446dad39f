// MlfidCache (fail2ban/src/mlfid_cache.hpp) against fail2ban's own Utils.Cache, run by
// Debian's Python from its package with its clock set by the test: random gets, sets and
// unsets over more ids than the cache holds, with time passing so that entries expire,
// the same answer to every get.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "../../fail2ban/src/mlfid_cache.hpp"

namespace gpufilter::fail2ban {
namespace {

namespace fs = std::filesystem;

struct Op {
  char kind;  // 'g'et, 's'et, 'u'nset
  std::string id;
  int value;
  double time;
};

std::vector<Op> random_ops(unsigned seed, std::size_t n, int ids, double max_time) {
  std::mt19937 rng(seed);
  std::vector<Op> ops;
  double now = 1.7e9;
  for (std::size_t i = 0; i < n; ++i) {
    const int r = static_cast<int>(rng() % 100);
    // Mostly within one entry's life, sometimes past it, sometimes at the same instant.
    now += r < 10 ? 0.0 : r < 95 ? static_cast<double>(rng() % 1000) * max_time / 20000 : max_time * 0.6;
    const int k = static_cast<int>(rng() % 10);
    const char kind = k < 4 ? 'g' : k < 9 ? 's' : 'u';
    ops.push_back({kind, "host sshd[" + std::to_string(rng() % static_cast<unsigned>(ids)) + "]: ", static_cast<int>(i), now});
  }
  return ops;
}

// What fail2ban's Utils.Cache answers to each get ("-": nothing).
std::vector<std::string> python_answers(const std::vector<Op>& ops, std::size_t max_count, double max_time) {
  const fs::path dir = fs::temp_directory_path() / ("mlfid_cache_test." + std::to_string(::getpid()));
  fs::create_directories(dir);
  {
    std::ofstream f(dir / "ops.txt");
    f.precision(17);
    for (const Op& op : ops) f << op.kind << '\t' << op.id << '\t' << op.value << '\t' << op.time << '\n';
    std::ofstream py(dir / "run.py");
    py << "import sys, time\n"
          "from fail2ban.server.utils import Utils\n"
          "now = [0.0]\n"
          "time.time = lambda: now[0]\n"
          "c = Utils.Cache(maxCount=" << max_count << ", maxTime=" << max_time << ")\n"
          "for line in open(sys.argv[1]):\n"
          "    kind, k, v, t = line.rstrip('\\n').split('\\t')\n"
          "    now[0] = float(t)\n"
          "    if kind == 'g':\n"
          "        r = c.get(k)\n"
          "        print('-' if r is None else r)\n"
          "    elif kind == 's': c.set(k, v)\n"
          "    else: c.unset(k)\n";
  }
  const std::string command = "/usr/bin/python3 " + (dir / "run.py").string() + " " + (dir / "ops.txt").string();
  std::vector<std::string> out;
  if (FILE* pipe = popen(command.c_str(), "r")) {
    char line[256];
    while (fgets(line, sizeof line, pipe) != nullptr) {
      std::string s(line);
      if (!s.empty() && s.back() == '\n') s.pop_back();
      out.push_back(s);
    }
    pclose(pipe);
  }
  fs::remove_all(dir);
  return out;
}

std::vector<std::string> our_answers(const std::vector<Op>& ops, std::size_t max_count, double max_time) {
  MlfidCache<int> cache(max_count, max_time);
  std::vector<std::string> out;
  for (const Op& op : ops) {
    if (op.kind == 'g') {
      const int* v = cache.get(op.id, op.time);
      out.push_back(v == nullptr ? "-" : std::to_string(*v));
    } else if (op.kind == 's') {
      cache.set(op.id, op.value, op.time);
      EXPECT_LE(cache.size(), max_count);
    } else {
      cache.unset(op.id);
    }
  }
  return out;
}

void expect_as_fail2ban(unsigned seed, std::size_t n, int ids, std::size_t max_count, double max_time) {
  const auto ops = random_ops(seed, n, ids, max_time);
  const auto theirs = python_answers(ops, max_count, max_time);
  ASSERT_FALSE(theirs.empty()) << "python3 with Debian's fail2ban did not run";
  const auto ours = our_answers(ops, max_count, max_time);
  ASSERT_EQ(ours.size(), theirs.size());
  std::size_t hits = 0;
  for (std::size_t i = 0; i < ours.size(); ++i) {
    ASSERT_EQ(ours[i], theirs[i]) << "get #" << i << " (seed " << seed << ")";
    hits += ours[i] != "-";
  }
  EXPECT_GT(hits, 0u);
  EXPECT_LT(hits, ours.size());
}

TEST(MlfidCache, AnswersAsFail2bansCacheWhenFull) { expect_as_fail2ban(1, 20000, 160, 100, 300); }

TEST(MlfidCache, AnswersAsFail2bansCacheWithSmallLimits) {
  for (unsigned seed = 2; seed < 8; ++seed) expect_as_fail2ban(seed, 4000, 12, 8, 30);
}

TEST(MlfidCache, DropsFromTheFrontInTheOrderFirstSet) {
  MlfidCache<int> c(3, 10);
  c.set("a", 1, 0);
  c.set("b", 2, 1);
  c.set("c", 3, 2);
  c.set("a", 4, 3);  // full: "a" is dropped first, then set again at the back
  ASSERT_NE(c.get("a", 3), nullptr);
  EXPECT_EQ(*c.get("a", 3), 4);
  EXPECT_EQ(c.size(), 3u);
  c.set("d", 5, 11.5);  // full: "b" (expired) goes, then "c" (alive, and leaves room)
  EXPECT_EQ(c.get("b", 11.5), nullptr);
  EXPECT_EQ(c.get("c", 11.5), nullptr);
  ASSERT_NE(c.get("a", 11.5), nullptr);
  EXPECT_EQ(*c.get("a", 11.5), 4);
  ASSERT_NE(c.get("d", 11.5), nullptr);
  EXPECT_EQ(c.size(), 2u);
  c.unset("a");
  EXPECT_EQ(c.get("a", 11.5), nullptr);
  EXPECT_EQ(c.get("d", 21.5), nullptr);  // expired: removed by the get
  EXPECT_EQ(c.size(), 0u);
}

}  // namespace
}  // namespace gpufilter::fail2ban
