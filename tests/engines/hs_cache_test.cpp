// gpufilter::hs_cache: a database loaded from the cache answers as the compiled one, and
// anything wrong with the cache (a damaged or cut file, another set's file, a folder
// others may write, the cache turned off) is a miss that compiles as without it.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gpufilter/hs_cache/compile_cache.hpp"
#include "gpufilter/hyperscan/hs_database.hpp"
#include "gpufilter/patterns/pattern_table.hpp"
#include "testutil/testutil.hpp"

namespace {

namespace fs = std::filesystem;
namespace hs_cache = gpufilter::hs_cache;

// A set of patterns as the callers give it.
struct Set {
  std::vector<std::string> texts;
  std::vector<unsigned> flags, ids;
  std::vector<std::size_t> lengths;  // empty: regexes
  bool literal = false;

  hs_database_t* compile(std::chrono::nanoseconds store_after = std::chrono::nanoseconds(0)) const {
    std::vector<const char*> pointers;
    for (const std::string& t : texts) pointers.push_back(t.c_str());
    hs_database_t* db = nullptr;
    hs_compile_error_t* error = nullptr;
    hs_cache::Request request{pointers, lengths, flags, ids};
    request.store_after = store_after;
    const hs_error_t rc = hs_cache::compile(request, &db, &error);
    EXPECT_EQ(rc, HS_SUCCESS);
    hs_free_compile_error(error);
    return db;
  }
};

Set regexes(std::vector<std::string> texts, unsigned flag = 0) {
  Set s;
  s.texts = std::move(texts);
  for (unsigned k = 0; k < s.texts.size(); ++k) {
    s.flags.push_back(flag);
    s.ids.push_back(k);
  }
  return s;
}

int on_match(unsigned id, unsigned long long, unsigned long long to, unsigned, void* context) {
  static_cast<std::vector<std::pair<unsigned, unsigned long long>>*>(context)->emplace_back(id, to);
  return 0;
}

std::vector<std::pair<unsigned, unsigned long long>> matches(hs_database_t* db, const std::string& text) {
  hs_scratch_t* scratch = nullptr;
  EXPECT_EQ(hs_alloc_scratch(db, &scratch), HS_SUCCESS);
  std::vector<std::pair<unsigned, unsigned long long>> out;
  EXPECT_EQ(hs_scan(db, text.data(), static_cast<unsigned>(text.size()), 0, scratch, on_match, &out), HS_SUCCESS);
  hs_free_scratch(scratch);
  hs_free_database(db);
  return out;
}

std::vector<fs::path> cached_files(const std::string& dir) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) files.push_back(entry.path());
  return files;
}

class HsCache : public ::testing::Test {
 protected:
  void SetUp() override { ::setenv("GPUFILTER_CACHE_DIR", dir_.path().c_str(), 1); }
  void TearDown() override { ::unsetenv("GPUFILTER_CACHE_DIR"); }
  gpufilter::test::TempDir dir_;
};

const std::string kText = "user=root uid=0 euid=0 took 12.5 ms\nGET /index.html 10.0.0.1:8080 UID=7\n";

TEST_F(HsCache, ALoadedDatabaseAnswersAsTheCompiledOne) {
  const Set set = regexes({"uid=[0-9]+ euid=[0-9]+", "took [0-9]+(\\.[0-9]+)? ?(ms|s)", "([0-9]{1,3}\\.){3}[0-9]{1,3}:[0-9]{2,5}"});
  const auto first = matches(set.compile(), kText);
  ASSERT_EQ(cached_files(dir_.path()).size(), 1u);
  const fs::path file = cached_files(dir_.path())[0];
  // Prove the second answer comes from the file: break the file, then restore it.
  const std::string bytes = gpufilter::test::read_file(file.string());
  EXPECT_EQ(matches(set.compile(), kText), first);
  EXPECT_FALSE(first.empty());
  EXPECT_TRUE(gpufilter::test::read_file(file.string()) == bytes);  // a hit rewrites nothing

  // Literals with NUL bytes and ids out of order, and the caseless flag: entries of their own.
  Set literals;
  literals.texts = {std::string("a\0b", 3), "UID", "euid"};
  literals.lengths = {3, 3, 4};
  literals.flags = {0, HS_FLAG_CASELESS, 0};
  literals.ids = {7, 3, 5};
  const std::string text = kText + std::string("xa\0b", 4);
  const auto lit = matches(literals.compile(), text);
  EXPECT_EQ(matches(literals.compile(), text), lit);
  EXPECT_EQ(lit.size(), 5u);  // a\0b, uid, euid's uid, UID, euid
  const auto plain = matches(regexes({"uid=[0-9]+"}).compile(), kText);
  EXPECT_EQ(matches(regexes({"uid=[0-9]+"}, HS_FLAG_CASELESS).compile(), kText).size(), plain.size() + 1);  // UID=7
  EXPECT_EQ(cached_files(dir_.path()).size(), 4u);
}

TEST_F(HsCache, ADamagedOrCutFileIsAMiss) {
  const Set set = regexes({"session (opened|closed) for user [a-z_][a-z0-9_-]*", "uid=[0-9]+"});
  const auto expected = matches(set.compile(), kText);
  const fs::path file = cached_files(dir_.path())[0];
  const std::string good = gpufilter::test::read_file(file.string());
  for (const std::size_t at : {std::size_t{3}, std::size_t{20}, good.size() / 2, good.size() - 5}) {
    std::string bad = good;
    bad[at] = static_cast<char>(bad[at] ^ 0x5a);
    std::ofstream(file, std::ios::binary | std::ios::trunc) << bad;
    EXPECT_EQ(matches(set.compile(), kText), expected) << "byte " << at;
    EXPECT_TRUE(gpufilter::test::read_file(file.string()) == good) << "byte " << at << ": stored again after the miss";
  }
  for (const std::size_t size : {std::size_t{0}, std::size_t{10}, good.size() - 1}) {
    std::ofstream(file, std::ios::binary | std::ios::trunc) << good.substr(0, size);
    EXPECT_EQ(matches(set.compile(), kText), expected) << "cut to " << size;
  }
}

// What the engine policy asks before it takes a CPU OpenCL device for a large set
// (choose_engine): whether the host engine's compile would be a load.
TEST_F(HsCache, HsDatabaseSaysWhetherItsTableIsStored) {
  gpufilter::PatternSet patterns;
  for (int i = 0; i < 20000; ++i) patterns.add("literal-" + std::to_string(i * 7919) + "-x");
  const gpufilter::PatternTable table(patterns, gpufilter::MatchOptions{});
  const gpufilter::PatternTable caseless(patterns, gpufilter::MatchOptions{.ignore_case = true});
  EXPECT_FALSE(gpufilter::HsDatabase::stored(table));
  { const gpufilter::HsDatabase compiled(table); }
  EXPECT_TRUE(gpufilter::HsDatabase::stored(table));
  EXPECT_FALSE(gpufilter::HsDatabase::stored(caseless));  // another compile
  const gpufilter::PatternTable empty(gpufilter::PatternSet{}, gpufilter::MatchOptions{});
  EXPECT_FALSE(gpufilter::HsDatabase::stored(empty));
  ::setenv("GPUFILTER_CACHE_DIR", "", 1);  // the cache off: nothing is stored
  EXPECT_FALSE(gpufilter::HsDatabase::stored(table));
}

TEST_F(HsCache, AQuickCompileIsNotStored) {
  const Set set = regexes({"euid"});
  matches(set.compile(std::chrono::hours(1)), kText);
  EXPECT_TRUE(cached_files(dir_.path()).empty());
}

TEST_F(HsCache, AFolderOthersMayWriteOrNoneTurnsItOff) {
  ::chmod(dir_.path().c_str(), 0777);
  EXPECT_FALSE(hs_cache::directory());
  const Set set = regexes({"uid=[0-9]+ euid=[0-9]+"});
  EXPECT_EQ(matches(set.compile(), kText).size(), 1u);
  EXPECT_TRUE(cached_files(dir_.path()).empty());
  ::chmod(dir_.path().c_str(), 0700);
  ::setenv("GPUFILTER_CACHE_DIR", "", 1);
  EXPECT_FALSE(hs_cache::directory());
  EXPECT_EQ(matches(set.compile(), kText).size(), 1u);
  EXPECT_TRUE(cached_files(dir_.path()).empty());
  const std::string missing = dir_.path() + "/a/b";
  ::setenv("GPUFILTER_CACHE_DIR", missing.c_str(), 1);
  EXPECT_EQ(hs_cache::directory(), fs::path(missing));  // created
}

TEST_F(HsCache, TheFolderKeepsTheNewestFiles) {
  for (std::size_t k = 0; k < hs_cache::kMaxFiles + 6; ++k) {
    const Set set = regexes({"uid=" + std::to_string(k)});
    matches(set.compile(), kText);
  }
  EXPECT_EQ(cached_files(dir_.path()).size(), hs_cache::kMaxFiles);
}

}  // namespace
