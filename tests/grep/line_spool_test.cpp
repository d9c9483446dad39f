// LineSpool: in memory up to its limit, then an unlinked temporary file mapped for reading.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <random>
#include <string>

#include "gpufilter/core/errors.hpp"
#include "gpufilter/grep/line_spool.hpp"

namespace {

using gpufilter::LineSpool;
using namespace std::string_literals;

std::string random_bytes(std::mt19937& rng, std::size_t n) {
  std::uniform_int_distribution<int> byte(0, 255);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(byte(rng));
  return s;
}

TEST(LineSpool, StartsEmpty) {
  LineSpool spool(16);
  EXPECT_EQ(spool.size(), 0u);
  EXPECT_TRUE(spool.view().empty());
  spool.append("x", 0);
  EXPECT_EQ(spool.size(), 0u);
}

TEST(LineSpool, SmallLimitSpillsToFileAndKeepsEveryByte) {
  std::mt19937 rng(5);
  for (std::size_t limit : {0u, 1u, 16u, 100u}) {
    LineSpool spool(limit);
    for (int round = 0; round < 3; ++round) {  // reused after clear(), both paths
      std::string expected;
      std::uniform_int_distribution<std::size_t> piece(0, 40);
      for (int i = 0; i < 60; ++i) {
        std::string p = random_bytes(rng, piece(rng));
        if (i % 7 == 0) p += "\0\0x\0"s;
        spool.append(p.data(), p.size());
        expected += p;
        ASSERT_EQ(spool.size(), expected.size()) << "limit " << limit;
        if (i % 5 == 0) {
          ASSERT_EQ(spool.view(), expected) << "limit " << limit << " piece " << i;
        }
      }
      ASSERT_EQ(spool.view(), expected) << "limit " << limit;
      ASSERT_EQ(spool.view(), expected) << "second view, limit " << limit;
      spool.clear();
      EXPECT_EQ(spool.size(), 0u);
      EXPECT_TRUE(spool.view().empty());
    }
  }
}

TEST(LineSpool, ExactlyAtLimitStaysCorrect) {
  LineSpool spool(16);
  const std::string a(16, 'a');
  spool.append(a.data(), a.size());
  EXPECT_EQ(spool.view(), a);
  spool.append("\0", 1);
  EXPECT_EQ(spool.view(), a + "\0"s);
  spool.append("tail", 4);
  EXPECT_EQ(spool.view(), a + "\0tail"s);
  EXPECT_EQ(spool.size(), 21u);
}

TEST(LineSpool, SeveralMegabytesWithOneMegabyteLimit) {
  std::mt19937 rng(11);
  LineSpool spool(std::size_t{1} << 20);
  std::string expected;
  std::uniform_int_distribution<std::size_t> piece(1, 300000);
  while (expected.size() < (std::size_t{6} << 20)) {
    const std::string p = random_bytes(rng, piece(rng));
    spool.append(p.data(), p.size());
    expected += p;
  }
  EXPECT_EQ(spool.size(), expected.size());
  const std::string_view v = spool.view();
  ASSERT_EQ(v.size(), expected.size());
  EXPECT_TRUE(v == expected);
  spool.clear();
  EXPECT_EQ(spool.size(), 0u);
  EXPECT_TRUE(spool.view().empty());
  spool.append("again", 5);
  EXPECT_EQ(spool.view(), "again");
}

TEST(LineSpool, UnwritableTemporaryDirectoryThrows) {
  const char* old = std::getenv("TMPDIR");
  const std::optional<std::string> saved = old ? std::optional<std::string>(old) : std::nullopt;
  ::setenv("TMPDIR", "/nonexistent-gpufilter-test-dir", 1);
  {
    LineSpool spool(4);
    spool.append("abcd", 4);  // fits in memory
    EXPECT_THROW(spool.append("e", 1), gpufilter::Error);
  }
  if (saved) ::setenv("TMPDIR", saved->c_str(), 1);
  else ::unsetenv("TMPDIR");
}

}  // namespace
