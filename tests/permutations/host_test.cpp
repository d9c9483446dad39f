// The host side of gpufilter::permute: factorials and multinomials, nth() against
// std::next_permutation, rank() as nth()'s inverse, slice checks, host generation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gpufilter/permute/permuter.hpp"

namespace perm = gpufilter::permute;

namespace {

std::vector<std::uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }

// Every permutation of `set` by std::next_permutation from the sorted one.
std::vector<std::vector<std::uint8_t>> all_by_std(const perm::Multiset& set) {
  std::vector<std::vector<std::uint8_t>> out;
  auto p = set.sorted();
  do out.push_back(p);
  while (std::next_permutation(p.begin(), p.end()));
  return out;
}

std::string error_of(auto&& f) {
  try {
    f();
  } catch (const perm::ArgumentError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(PermuteHost, Factorials) {
  EXPECT_EQ(perm::factorial(0), 1u);
  EXPECT_EQ(perm::factorial(1), 1u);
  EXPECT_EQ(perm::factorial(11), 39916800u);
  EXPECT_EQ(perm::factorial(12), 479001600u);
  EXPECT_EQ(perm::factorial(20), 2432902008176640000u);
  EXPECT_THROW(perm::factorial(21), perm::ArgumentError);
}

TEST(PermuteHost, Multinomials) {
  const std::vector<std::uint8_t> aabbc{2, 2, 1}, ones20(20, 1), ones21(21, 1), halves{32, 32}, one{7};
  EXPECT_EQ(perm::multinomial(aabbc), 30u);
  EXPECT_EQ(perm::multinomial(ones20), perm::factorial(20));
  EXPECT_EQ(perm::multinomial(ones21), std::nullopt);
  EXPECT_EQ(perm::multinomial(halves), 1832624140942590534u);  // C(64, 32)
  EXPECT_EQ(perm::multinomial(one), 1u);
  EXPECT_EQ(perm::Multiset::of("mississippi").permutations(), 34650u);
}

TEST(PermuteHost, SetLimits) {
  EXPECT_NE(error_of([] { perm::Multiset::range(21); }).find("at most 20"), std::string::npos);
  EXPECT_THROW(perm::Multiset::range(0), perm::ArgumentError);
  EXPECT_THROW(perm::Multiset::of(""), perm::ArgumentError);
  EXPECT_THROW(perm::Multiset::of(std::string(65, 'a')), perm::ArgumentError);
  EXPECT_THROW(perm::Multiset::of("abcdefghijklmnopqrstu"), perm::ArgumentError);  // 21! >= 2^64
  EXPECT_EQ(perm::Multiset::of(std::string(64, 'a')).permutations(), 1u);
  EXPECT_EQ(perm::Multiset::of("abcdefghijklmnopqrst").permutations(), perm::factorial(20));
  const auto r = perm::Multiset::range(5);
  EXPECT_TRUE(r.is_range());
  EXPECT_TRUE(r.distinct());
  EXPECT_FALSE(perm::Multiset::of("aab").distinct());
  EXPECT_FALSE(perm::Multiset::of("abc").is_range());
}

TEST(PermuteHost, NthFollowsNextPermutationForSmallN) {
  for (unsigned n = 1; n <= 8; ++n) {
    const auto set = perm::Multiset::range(n);
    const auto expected = all_by_std(set);
    ASSERT_EQ(expected.size(), set.permutations());
    for (std::uint64_t k = 0; k < expected.size(); ++k) {
      ASSERT_EQ(perm::nth(set, k), expected[k]) << "N=" << n << " k=" << k;
      ASSERT_EQ(perm::rank(set, expected[k]), k) << "N=" << n << " k=" << k;
    }
  }
}

TEST(PermuteHost, NthFollowsNextPermutationForMultisets) {
  for (const std::string& s : std::vector<std::string>{"aabbc", "aaaa", "a", "aab", "abb", "aaabbbccd", "mississippi",
                                                     "zzyyxx", "ba", std::string("\x00\xff\x00\x80", 4)}) {
    const auto set = perm::Multiset::of(s);
    const auto expected = all_by_std(set);
    ASSERT_EQ(expected.size(), set.permutations()) << s;
    for (std::uint64_t k = 0; k < expected.size(); ++k) {
      ASSERT_EQ(perm::nth(set, k), expected[k]) << s << " k=" << k;
      ASSERT_EQ(perm::rank(set, expected[k]), k) << s << " k=" << k;
    }
  }
}

TEST(PermuteHost, RankInvertsNthAtN20) {
  const auto set = perm::Multiset::range(20);
  std::mt19937_64 rng(7);
  std::vector<std::uint64_t> ks{0, 1, 2, set.permutations() - 2, set.permutations() - 1};
  for (int i = 0; i < 2000; ++i) ks.push_back(rng() % set.permutations());
  for (const auto k : ks) ASSERT_EQ(perm::rank(set, perm::nth(set, k)), k) << k;
  // The last permutation is the reverse order.
  auto last = set.sorted();
  std::reverse(last.begin(), last.end());
  EXPECT_EQ(perm::nth(set, set.permutations() - 1), last);
  // nth(k + 1) is std::next_permutation of nth(k), at random places.
  for (int i = 0; i < 500; ++i) {
    const std::uint64_t k = rng() % (set.permutations() - 1);
    auto p = perm::nth(set, k);
    std::next_permutation(p.begin(), p.end());
    ASSERT_EQ(p, perm::nth(set, k + 1)) << k;
  }
}

TEST(PermuteHost, RankInvertsNthForLargeMultisets) {
  std::mt19937_64 rng(11);
  for (const std::string& s : std::vector<std::string>{std::string(60, 'a') + "bcde",
                                                     std::string(32, 'x') + std::string(32, 'y'),
                                                     "aaaaabbbbbcccccdddddeeeee"}) {
    const auto set = perm::Multiset::of(s);
    for (int i = 0; i < 300; ++i) {
      const std::uint64_t k = rng() % set.permutations();
      ASSERT_EQ(perm::rank(set, perm::nth(set, k)), k) << s << " k=" << k;
    }
    auto last = set.sorted();
    std::reverse(last.begin(), last.end());
    EXPECT_EQ(perm::nth(set, set.permutations() - 1), last) << s;
  }
}

TEST(PermuteHost, RankRejectsWhatIsNoPermutation) {
  const auto set = perm::Multiset::range(4);
  EXPECT_THROW(perm::rank(set, std::vector<std::uint8_t>{0, 1, 2}), perm::ArgumentError);
  EXPECT_THROW(perm::rank(set, std::vector<std::uint8_t>{0, 1, 2, 2}), perm::ArgumentError);
  EXPECT_THROW(perm::rank(set, std::vector<std::uint8_t>{0, 1, 2, 4}), perm::ArgumentError);
  const auto ms = perm::Multiset::of("aab");
  EXPECT_NE(error_of([&] { perm::rank(ms, bytes("abb")); }).find("too many of element 'b'"), std::string::npos);
  EXPECT_NE(error_of([&] { perm::rank(ms, bytes("abc")); }).find("no element 'c'"), std::string::npos);
  EXPECT_THROW(perm::nth(set, 24), perm::ArgumentError);
}

TEST(PermuteHost, SliceChecks) {
  const auto set = perm::Multiset::range(5);
  EXPECT_EQ(perm::make_slice(set, 0, std::nullopt).count, 120u);
  EXPECT_EQ(perm::make_slice(set, 100, std::nullopt).count, 20u);
  EXPECT_EQ(perm::make_slice(set, 100, 20).count, 20u);
  EXPECT_EQ(perm::make_slice(set, 119, 0).count, 0u);
  EXPECT_NE(error_of([&] { perm::make_slice(set, 120, std::nullopt); }).find("offset 120 is beyond"),
            std::string::npos);
  EXPECT_NE(error_of([&] { perm::make_slice(set, 100, 21); }).find("only 20 permutations remain"),
            std::string::npos);
  EXPECT_NE(error_of([&] { perm::make_slice(set, 3, UINT64_MAX); }).find("overflows"), std::string::npos);
}

TEST(PermuteHost, ThreadedHostGenerationEqualsOneThread) {
  for (const auto& [set, offset, count] :
       std::vector<std::tuple<perm::Multiset, std::uint64_t, std::uint64_t>>{
           {perm::Multiset::range(8), 0, 40320},
           {perm::Multiset::range(20), perm::factorial(20) - 5000, 5000},
           {perm::Multiset::of("mississippi"), 17, 30000}}) {
    std::vector<std::uint8_t> one(count * set.size()), many(count * set.size());
    perm::generate_host(set, offset, count, one, 1);
    perm::generate_host(set, offset, count, many, 7);
    EXPECT_EQ(one, many);
    EXPECT_EQ(std::vector<std::uint8_t>(one.begin(), one.begin() + set.size()), perm::nth(set, offset));
    EXPECT_EQ(std::vector<std::uint8_t>(one.end() - set.size(), one.end()), perm::nth(set, offset + count - 1));
  }
}
