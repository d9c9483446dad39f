// The Hyperscan database that confirms -G/-E lines is built when glibc's confirmations
// have cost about what building it would (RegexOptions::defer_select): by whichever copy
// of the regex crosses that line first, while the other copies go on with glibc and take
// the database on their next line. Their answers are the same throughout, and the same as
// a regex whose database was built at once. Runs under ThreadSanitizer in CI (CONCURRENCY).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gpufilter/regex/line_regex.hpp"

namespace gpufilter::regex {
namespace {

std::vector<std::string> random_lines(std::uint32_t seed, std::size_t count) {
  std::mt19937 rng(seed);
  const std::string alphabet = "ab1x. 2";
  std::vector<std::string> lines;
  for (std::size_t i = 0; i < count; ++i) {
    std::string line(rng() % 40, ' ');
    for (char& c : line) c = alphabet[rng() % alphabet.size()];
    lines.push_back(line);
  }
  return lines;
}

using Answers = std::vector<std::vector<std::uint32_t>>;

Answers answers(LineRegex& r, const std::vector<std::string>& lines, const std::vector<std::uint32_t>& all) {
  Answers out;
  for (const std::string& line : lines) {
    std::vector<std::uint32_t> ids;
    r.selects_any(line, all, &ids);
    out.push_back(ids);
  }
  return out;
}

void expect_copies_agree(Syntax syntax, const std::vector<std::string>& patterns, bool word) {
  RegexOptions eager;
  eager.syntax = syntax;
  eager.word = word;
  eager.defer_select = false;
  RegexOptions deferred = eager;
  deferred.defer_select = true;
  std::vector<std::uint32_t> all;
  for (std::uint32_t i = 0; i < patterns.size(); ++i) all.push_back(i);
  const std::vector<std::string> lines = random_lines(7, 20'000);  // past the build's budget
  auto reference = compile(patterns, eager);
  const Answers expected = answers(*reference, lines, all);

  auto original = compile(patterns, deferred);
  std::vector<std::unique_ptr<LineRegex>> copies;
  for (int t = 0; t < 4; ++t) copies.push_back(original->clone());
  std::vector<Answers> got(copies.size());
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < copies.size(); ++t)
    threads.emplace_back([&, t] { got[t] = answers(*copies[t], lines, all); });
  for (std::thread& t : threads) t.join();
  for (std::size_t t = 0; t < copies.size(); ++t) EXPECT_EQ(got[t], expected) << "copy " << t;
  // A copy made after the build takes the database at once.
  EXPECT_EQ(answers(*original->clone(), lines, all), expected);

  // Copies made on other threads while the original, on its own, crosses the budget and
  // takes the database (as RegexLines makes a worker's lane from lane 0's regex).
  auto owner = compile(patterns, deferred);
  std::vector<std::unique_ptr<LineRegex>> late(4);
  Answers owner_answers;
  std::thread uses([&] { owner_answers = answers(*owner, lines, all); });
  std::vector<std::thread> copying;
  for (std::size_t t = 0; t < late.size(); ++t)
    copying.emplace_back([&, t] {
      for (int k = 0; k < 50; ++k) late[t] = owner->clone();
    });
  uses.join();
  for (std::thread& t : copying) t.join();
  EXPECT_EQ(owner_answers, expected);
  for (const auto& copy : late) EXPECT_EQ(answers(*copy, lines, all), expected);
}

TEST(DeferredSelect, CopiesOnSeveralThreadsAnswerAsTheDatabaseBuiltAtOnce) {
  expect_copies_agree(Syntax::kBasic, {"a.b", "b[0-9]\\{2\\}", "x\\+1", "[ab]*x$", "^1"}, false);
  expect_copies_agree(Syntax::kExtended, {"a.b", "(x|1)2+", "b{2,}", "\\.a"}, false);
  expect_copies_agree(Syntax::kExtended, {"a.b", "x1", "2[ab]"}, true);
}

}  // namespace
}  // namespace gpufilter::regex
