// LiteralChains (pipeline/regex/src/literal_chains.hpp): which Hyperscan texts are read as
// literals joined by ".*", and, for random chains and lines, the same answer as PCRE2
// matching the same text (its syntax is Hyperscan's here; no line holds a '\n').
#define PCRE2_CODE_UNIT_WIDTH 8
#include <gtest/gtest.h>
#include <pcre2.h>

#include <clocale>
#include <random>
#include <string>
#include <vector>

#include "literal_chains.hpp"

namespace gpufilter::regex {
namespace {

// valid_utf8() reads the C library's locale, as gpufilter sets it from the environment.
struct Utf8Locale {
  Utf8Locale() { std::setlocale(LC_CTYPE, "C.UTF-8"); }
  ~Utf8Locale() { std::setlocale(LC_CTYPE, "C"); }
};

std::vector<std::string> literals_of(const std::string& text, bool utf8 = false) {
  const Utf8Locale locale;
  std::vector<std::string> literals;
  if (!LiteralChains::parse(text, utf8, literals)) return {"<not a chain>"};
  return literals;
}

TEST(LiteralChains, ReadsLiteralsJoinedByDotStar) {
  using V = std::vector<std::string>;
  EXPECT_EQ(literals_of("acquire lock\\x3d.*\\x2c flags\\x3d"), (V{"acquire lock=", ", flags="}));
  EXPECT_EQ(literals_of("a.*.*b"), (V{"a", "b"}));
  EXPECT_EQ(literals_of(".*x.*"), (V{"x"}));
  EXPECT_EQ(literals_of(".*"), V{});
  EXPECT_EQ(literals_of("a\\.b\\{\\ c"), (V{"a.b{ c"}));
  EXPECT_EQ(literals_of("caf\xc3\xa9.*x", true), (V{"caf\xc3\xa9", "x"}));
  const V refused{"<not a chain>"};
  for (const char* text : {"a.b", "a.*?b", "a.*+b", "a.**b", "a.*{2}", "^a", "a$", "a|b", "(?:a)", "[a]", "a+",
                           "a?", "a*", "\\d", "\\w", "\\n", "\\x80", "\\x{41}", "\\Qa\\E", "a\\", "\\x4"})
    EXPECT_EQ(literals_of(text), refused) << text;
  EXPECT_EQ(literals_of("\xe9.*x", true), refused);  // not UTF-8: Hyperscan's reading differs
}

struct Pcre2 {
  pcre2_code* code = nullptr;
  pcre2_match_data* data = nullptr;
  Pcre2(const std::string& text, bool caseless, bool utf8) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(text.c_str()), text.size(),
                         (caseless ? PCRE2_CASELESS : 0u) | (utf8 ? PCRE2_UTF : 0u), &error, &offset, nullptr);
    data = code != nullptr ? pcre2_match_data_create_from_pattern(code, nullptr) : nullptr;
  }
  ~Pcre2() {
    pcre2_match_data_free(data);
    pcre2_code_free(code);
  }
  bool matches(const std::string& line) const {
    return pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(line.data()), line.size(), 0, 0, data, nullptr) >= 0;
  }
};

// Random chains of short literals over a few letters (both cases, a sign, a two-byte
// character), random lines from the same letters: LiteralChains and PCRE2 agree.
void agree_with_pcre2(bool ignore_case, bool utf8, std::uint32_t seed) {
  std::mt19937 rng(seed);
  const Utf8Locale locale;
  const std::vector<std::string> atoms = {"a", "b", "A", "B", "=", "\xc3\xa9", "\\x3d", "\\."};
  const std::vector<std::string> line_atoms = {"a", "b", "A", "B", "=", "\xc3\xa9", ".", " "};
  std::vector<std::string> texts;
  std::vector<std::uint32_t> ids;
  for (std::uint32_t i = 0; i < 300; ++i) {
    std::string text;
    const int literals = 1 + static_cast<int>(rng() % 3);
    for (int l = 0; l < literals; ++l) {
      if (l > 0 || rng() % 4 == 0) text += ".*";
      for (int n = 1 + static_cast<int>(rng() % 3); n > 0; --n) text += atoms[rng() % atoms.size()];
    }
    if (rng() % 4 == 0) text += ".*";
    texts.push_back(text);
    ids.push_back(i);
  }
  std::vector<std::string> rest;
  std::vector<std::uint32_t> rest_ids;
  const LiteralChains chains(texts, ids, ignore_case, utf8, rest, rest_ids);
  ASSERT_TRUE(rest.empty());
  std::size_t selected = 0;
  std::string folded;
  for (int k = 0; k < 300; ++k) {
    std::string line;
    for (int n = static_cast<int>(rng() % 12); n > 0; --n) line += line_atoms[rng() % line_atoms.size()];
    if (ignore_case) LiteralChains::fold(line, folded);
    const std::string& asked = ignore_case ? folded : line;
    for (std::uint32_t i = 0; i < texts.size(); ++i) {
      const Pcre2 oracle(texts[i], ignore_case, utf8);
      ASSERT_NE(oracle.code, nullptr) << texts[i];
      const bool expected = oracle.matches(line);
      selected += expected ? 1 : 0;
      ASSERT_EQ(chains.matches(i, asked), expected) << "text \"" << texts[i] << "\", line \"" << line << "\"";
    }
  }
  EXPECT_GT(selected, 1000u);  // not only lines that nothing selects
}

TEST(LiteralChains, AgreeWithPcre2) { agree_with_pcre2(false, false, 1); }
TEST(LiteralChains, AgreeWithPcre2Caseless) { agree_with_pcre2(true, false, 2); }
TEST(LiteralChains, AgreeWithPcre2InUtf8) { agree_with_pcre2(false, true, 3); }

}  // namespace
}  // namespace gpufilter::regex
