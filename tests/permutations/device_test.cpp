// GpuPermuter on the default OpenCL device (PoCL in CI) against host generation with
// std::next_permutation: N = 1..9 in full, every steps/work-group shape of the kernel's
// store paths, batches of a few bytes, random slices at N = 20 (up to the last
// permutation), multisets, and the device-resident enqueue().
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gpufilter/permute/permuter.hpp"
#include "testutil/testutil.hpp"

namespace perm = gpufilter::permute;

namespace {

std::vector<std::uint8_t> host(const perm::Multiset& set, std::uint64_t offset, std::uint64_t count) {
  std::vector<std::uint8_t> out(count * set.size());
  perm::generate_host(set, offset, count, out, 0);
  return out;
}

std::vector<std::uint8_t> device(perm::GpuPermuter& permuter, std::uint64_t offset, std::uint64_t count) {
  std::vector<std::uint8_t> out(count * permuter.set().size());
  permuter.generate(offset, count, out);
  return out;
}

// The index of the first differing permutation, for messages.
std::string first_difference(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b, unsigned n,
                             std::uint64_t offset) {
  if (a.size() != b.size()) return "sizes " + std::to_string(a.size()) + " and " + std::to_string(b.size());
  const auto m = std::mismatch(a.begin(), a.end(), b.begin());
  if (m.first == a.end()) return "equal";
  return "first difference at permutation " + std::to_string(offset + (m.first - a.begin()) / n);
}

}  // namespace

TEST(PermuteDevice, FullSetsForNUpTo9) {
  GPUFILTER_OPEN_DEVICE(dev);
  for (unsigned n = 1; n <= 9; ++n) {
    const auto set = perm::Multiset::range(n);
    perm::GpuPermuter permuter(*dev, set);
    const auto total = set.permutations();
    const auto expected = host(set, 0, total);
    const auto actual = device(permuter, 0, total);
    ASSERT_TRUE(actual == expected) << "N=" << n << ": " << first_difference(expected, actual, n, 0);
  }
}

// Steps 0 (decomposition only) to 100; (steps + 1) * N a multiple of 4 or not (word or
// byte stores into local memory); work-groups whose output is not 16-byte aligned; a
// batch of a few hundred bytes, so the double buffering turns over many times.
TEST(PermuteDevice, StepsWorkGroupsAndSmallBatches) {
  GPUFILTER_OPEN_DEVICE(dev);
  const auto set = perm::Multiset::range(7);
  const auto expected = host(set, 0, set.permutations());
  for (const unsigned steps : {0u, 1u, 2u, 3u, 4u, 7u, 15u, 100u}) {
    for (const std::size_t group : {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{64}}) {
      for (const std::size_t batch : {std::size_t{0}, std::size_t{700}}) {
        perm::GpuPermuter permuter(*dev, set, perm::GpuOptions{.steps = steps, .batch_bytes = batch, .work_group = group});
        const auto actual = device(permuter, 0, set.permutations());
        ASSERT_TRUE(actual == expected) << "steps=" << steps << " group=" << group << " batch=" << batch << ": "
                                        << first_difference(expected, actual, 7, 0);
      }
    }
  }
}

TEST(PermuteDevice, RandomSlicesAtN20) {
  GPUFILTER_OPEN_DEVICE(dev);
  const auto set = perm::Multiset::range(20);
  const std::uint64_t total = set.permutations();
  perm::GpuPermuter permuter(*dev, set, perm::GpuOptions{.batch_bytes = 64 << 10});
  std::mt19937_64 rng(20);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> slices{
      {0, 5000}, {total - 1, 1}, {total - 5000, 5000}, {total - 12345, 12345}, {total / 2 - 777, 1554}};
  for (int i = 0; i < 20; ++i) {
    const std::uint64_t count = 1 + rng() % 20000;
    slices.emplace_back(rng() % (total - count + 1), count);
  }
  for (const auto& [offset, count] : slices) {
    const auto expected = host(set, offset, count);
    const auto actual = device(permuter, offset, count);
    ASSERT_TRUE(actual == expected) << "offset=" << offset << " count=" << count << ": "
                                    << first_difference(expected, actual, 20, offset);
  }
}

TEST(PermuteDevice, Multisets) {
  GPUFILTER_OPEN_DEVICE(dev);
  std::mt19937 rng(3);
  std::vector<std::string> sets{"aabbc", "aaaa", "a", "aab", "abb", "ba", "aaabbbccd", "mississippi",
                                "aaaaaaaaaabbbbbbbbbbcccccccccc", std::string("\x00\xff\x00\x80\x80", 5)};
  for (int i = 0; i < 8; ++i) {  // random multisets of 6 to 11 elements over 1 to 4 letters
    std::string s(6 + rng() % 6, 'a');
    const unsigned letters = 1 + rng() % 4;
    for (auto& c : s) c = static_cast<char>('a' + rng() % letters);
    sets.push_back(s);
  }
  for (const auto& s : sets) {
    const auto set = perm::Multiset::of(s);
    const std::uint64_t total = set.permutations();
    for (const unsigned steps : {0u, 3u, 15u}) {
      perm::GpuPermuter permuter(*dev, set, perm::GpuOptions{.steps = steps, .batch_bytes = 1 << 16});
      const std::uint64_t count = std::min<std::uint64_t>(total, 200000);
      const std::uint64_t offset = (total - count) / 3;
      const auto expected = host(set, offset, count);
      const auto actual = device(permuter, offset, count);
      ASSERT_TRUE(actual == expected) << "'" << s << "' steps=" << steps << ": "
                                      << first_difference(expected, actual, set.size(), offset);
    }
  }
}

// 64 elements with 2^64 > permutations: slices at the start, the middle and the end.
TEST(PermuteDevice, LongMultisets) {
  GPUFILTER_OPEN_DEVICE(dev);
  for (const std::string& s : std::vector<std::string>{std::string(60, 'a') + "bcde",
                                                     std::string(32, 'x') + std::string(32, 'y'),
                                                     std::string("abcdefghijklmnopq") + "aaa"}) {
    const auto set = perm::Multiset::of(s);
    perm::GpuPermuter permuter(*dev, set, perm::GpuOptions{.batch_bytes = 1 << 16});
    const std::uint64_t total = set.permutations(), count = std::min<std::uint64_t>(total, 3000);
    for (const std::uint64_t offset : {std::uint64_t{0}, (total - count) / 2, total - count}) {
      const auto expected = host(set, offset, count);
      const auto actual = device(permuter, offset, count);
      ASSERT_TRUE(actual == expected) << "'" << s << "' offset=" << offset << ": "
                                      << first_difference(expected, actual, set.size(), offset);
    }
  }
}

TEST(PermuteDevice, BatchesArriveInOrderAndSinkErrorsPropagate) {
  GPUFILTER_OPEN_DEVICE(dev);
  const auto set = perm::Multiset::range(6);
  perm::GpuPermuter permuter(*dev, set, perm::GpuOptions{.batch_bytes = 60});  // 10 permutations a batch
  EXPECT_EQ(permuter.batch_permutations(), 10u);
  std::vector<std::uint64_t> firsts;
  permuter.generate(5, 101, [&](std::uint64_t first, std::span<const std::uint8_t> bytes) {
    firsts.push_back(first);
    EXPECT_EQ(bytes.size(), std::min<std::uint64_t>(10, 106 - first) * 6);
  });
  std::vector<std::uint64_t> expected;
  for (std::uint64_t f = 5; f < 106; f += 10) expected.push_back(f);
  EXPECT_EQ(firsts, expected);

  int calls = 0;
  EXPECT_THROW(permuter.generate(0, 720,
                                 [&](std::uint64_t, std::span<const std::uint8_t>) {
                                   if (++calls == 3) throw std::runtime_error("sink failed");
                                 }),
               std::runtime_error);
  EXPECT_EQ(calls, 3);
  // Usable afterwards.
  EXPECT_EQ(device(permuter, 0, 720), host(set, 0, 720));
  EXPECT_THROW(permuter.generate(700, 21, [](std::uint64_t, std::span<const std::uint8_t>) {}), perm::ArgumentError);
}

TEST(PermuteDevice, EnqueueKeepsTheOutputOnTheDevice) {
  GPUFILTER_OPEN_DEVICE(dev);
  const auto set = perm::Multiset::range(10);
  perm::GpuPermuter permuter(*dev, set, perm::GpuOptions{.profiling = true});
  const std::uint64_t offset = 1000003, count = 250000;
  cl::Buffer out(permuter.context(), CL_MEM_READ_WRITE, count * set.size());
  cl::Event done = permuter.enqueue(out, offset, count);
  done.wait();
  EXPECT_GT(done.getProfilingInfo<CL_PROFILING_COMMAND_END>(), done.getProfilingInfo<CL_PROFILING_COMMAND_START>());
  std::vector<std::uint8_t> actual(count * set.size());
  permuter.kernel_queue().enqueueReadBuffer(out, CL_TRUE, 0, actual.size(), actual.data());
  EXPECT_TRUE(actual == host(set, offset, count)) << first_difference(host(set, offset, count), actual, 10, offset);
}
