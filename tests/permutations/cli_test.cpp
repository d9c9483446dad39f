// The gpupermute program: bad arguments exit 2 with a clear message; --check passes;
// --text; the bytes of a slice equal host generation; --output; --rank.
// GPUPERMUTE_BIN overrides the binary's path (set where the tests run on another machine).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gpufilter/permute/permuter.hpp"
#include "testutil/testutil.hpp"

namespace perm = gpufilter::permute;
using gpufilter::test::run_process;

namespace {

gpufilter::test::ProcessResult gpupermute(std::vector<std::string> args) {
  args.insert(args.begin(), gpufilter::test::gpupermute_binary());
  return run_process(args);
}

std::string host_bytes(const perm::Multiset& set, std::uint64_t offset, std::uint64_t count) {
  std::string out(count * set.size(), '\0');
  perm::generate_host(set, offset, count,
                      std::span(reinterpret_cast<std::uint8_t*>(out.data()), out.size()), 0);
  return out;
}

}  // namespace

TEST(GpupermuteCli, BadArgumentsExit2WithAMessage) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{"21"}, "N = 21 is too large: N! must fit in 64 bits, so N is at most 20"},
      {{"100"}, "N = 100 is too large"},
      {{"0"}, "N must be at least 1"},
      {{"five"}, "N 'five' is not a whole number"},
      {{"-3"}, "unknown option -3"},
      {{"5", "--offset", "120"}, "offset 120 is beyond the last permutation: there are 5! = 120"},
      {{"20", "--offset", "2432902008176640000"}, "offset 2432902008176640000 is beyond the last permutation"},
      {{"5", "--count", "121"}, "count 121 from offset 0 runs past the end: only 120 permutations remain"},
      {{"5", "--offset", "100", "--count", "21"}, "only 20 permutations remain"},
      {{"20", "--offset", "7", "--count", "18446744073709551615"}, "count 18446744073709551615 from offset 7 overflows 64 bits"},
      {{"5", "--count", "18446744073709551616"}, "count '18446744073709551616' is not a number from 0 to 2^64-1"},
      {{"5", "--steps", "5000"}, "steps 5000 is too many"},
      {{"5", "--bogus"}, "unknown option --bogus"},
      {{"5", "--offset"}, "option --offset needs a value"},
      {{}, "give N or --elements"},
      {{"5", "--elements", "abc"}, "give N or --elements, not both"},
      {{"--elements", ""}, "the elements are empty"},
      {{"--elements", "abcdefghijklmnopqrstu"}, "2^64 or more distinct permutations"},
      {{"--elements", "aab", "--offset", "3"}, "offset 3 is beyond the last permutation: there are the 3 permutations"},
      {{"--rank", "0,1,1"}, "not a permutation of the elements: too many of element 1"},
      {{"4", "--rank", "0,1,2"}, "the permutation has 3 elements, not 4"},
      {{"--elements", "aab", "--rank", "abc"}, "no element 'c'"},
      {{"5", "--device", "99:99"}, "no OpenCL device 99:99"},
  };
  for (const auto& [args, message] : cases) {
    const auto r = gpupermute(args);
    std::string joined;
    for (const auto& a : args) joined += " " + a;
    EXPECT_EQ(r.status, 2) << "gpupermute" << joined << "\n" << r.err;
    EXPECT_EQ(r.err.rfind("gpupermute: ", 0), 0u) << "gpupermute" << joined << "\n" << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << "gpupermute" << joined << "\n" << r.err;
    EXPECT_TRUE(r.out.empty()) << "gpupermute" << joined;
  }
}

TEST(GpupermuteCli, CheckPasses) {
  for (const auto& args :
       {std::vector<std::string>{"8", "--check"},
        {"9", "--check", "--steps", "0", "--batch-bytes", "100000"},
        {"20", "--offset", "2432902008176635000", "--check", "--steps", "7"},
        {"13", "--offset", "1000000000", "--count", "100000", "--check"},
        {"--elements", "aabbcc", "--check", "--steps", "3"},
        {"--elements", "mississippi", "--check"}}) {
    const auto r = gpupermute(args);
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("against std::next_permutation: all equal"), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty());  // --check without --output writes nothing
  }
}

TEST(GpupermuteCli, Text) {
  auto r = gpupermute({"3", "--text"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "0 1 2\n0 2 1\n1 0 2\n1 2 0\n2 0 1\n2 1 0\n");
  r = gpupermute({"--elements", "aab", "--text"});
  EXPECT_EQ(r.out, "aab\naba\nbaa\n");
  r = gpupermute({"12", "--text", "--offset", "479001599"});
  EXPECT_EQ(r.out, "11 10 9 8 7 6 5 4 3 2 1 0\n");
  r = gpupermute({"11", "--text", "--offset", "1", "--count", "2"});
  EXPECT_EQ(r.out, "0 1 2 3 4 5 6 7 8 10 9\n0 1 2 3 4 5 6 7 9 8 10\n");
}

TEST(GpupermuteCli, SliceBytesEqualHostGeneration) {
  const auto r = gpupermute({"10", "--offset", "123456", "--count", "10000", "--batch-bytes", "4096"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(r.out == host_bytes(perm::Multiset::range(10), 123456, 10000));
  const auto all = gpupermute({"7", "--steps", "2"});
  EXPECT_TRUE(all.out == host_bytes(perm::Multiset::range(7), 0, 5040));
  const auto ms = gpupermute({"--elements", "aaabbbccd", "--offset", "17", "--count", "1000"});
  EXPECT_TRUE(ms.out == host_bytes(perm::Multiset::of("aaabbbccd"), 17, 1000));
}

TEST(GpupermuteCli, OutputFileWithCheck) {
  char path[] = "/tmp/gpupermute-test-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  const auto r = gpupermute({"9", "--offset", "1000", "--count", "50000", "--output", path, "--check"});
  EXPECT_EQ(r.status, 0) << r.err;
  std::ifstream in(path, std::ios::binary);
  std::stringstream content;
  content << in.rdbuf();
  ::unlink(path);
  EXPECT_TRUE(content.str() == host_bytes(perm::Multiset::range(9), 1000, 50000));
  const auto bad = gpupermute({"3", "--output", "/nonexistent-dir/x"});
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("cannot open /nonexistent-dir/x"), std::string::npos) << bad.err;
}

TEST(GpupermuteCli, Rank) {
  EXPECT_EQ(gpupermute({"--rank", "2,0,1"}).out, "4\n");
  EXPECT_EQ(gpupermute({"--rank", "0 1 2 3"}).out, "0\n");
  EXPECT_EQ(gpupermute({"20", "--rank", "19,18,17,16,15,14,13,12,11,10,9,8,7,6,5,4,3,2,1,0"}).out,
            "2432902008176639999\n");
  EXPECT_EQ(gpupermute({"--elements", "mississippi", "--rank", "ssssppiiiim"}).out, "34645\n");
  EXPECT_EQ(gpupermute({"--elements", "aab", "--rank", "baa"}).out, "2\n");
  // rank(nth(k)) == k through the program: the permutation at an offset, printed as text.
  const auto text = gpupermute({"15", "--text", "--offset", "987654321012", "--count", "1"}).out;
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(gpupermute({"--rank", text.substr(0, text.size() - 1)}).out, "987654321012\n");
}

TEST(GpupermuteCli, Help) {
  const auto r = gpupermute({"--help"});
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("--steps L"), std::string::npos);
}
