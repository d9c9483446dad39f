// LineDfa (pipeline/regex/src/line_dfa.hpp): which Hyperscan texts it reads, and, for
// random expressions over a few bytes (classes, groups, alternation, every repeat,
// anchors, a two-byte character in UTF-8) and random blocks of lines, the same lines as
// Hyperscan asked one line at a time (HsSelect without its lines database).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "hs_select.hpp"
#include "line_dfa.hpp"

namespace gpufilter::regex {
namespace {

bool reads(const std::string& text, bool ignore_case = false, bool utf8 = false) {
  return LineDfa::build({text}, ignore_case, utf8) != nullptr;
}

std::vector<std::size_t> selected(const LineDfa& dfa, const std::string& block) {
  std::vector<const char*> starts, ends;
  dfa.select_lines(block, starts, ends);
  std::vector<std::size_t> offsets;
  EXPECT_EQ(starts.size(), ends.size());
  for (std::size_t k = 0; k < starts.size() && k < ends.size(); ++k) {
    offsets.push_back(static_cast<std::size_t>(starts[k] - block.data()));
    // Each end is its line's '\n', or the block's end after a last line without one.
    const std::size_t nl = block.find('\n', offsets.back());
    EXPECT_EQ(static_cast<std::size_t>(ends[k] - block.data()), nl == std::string::npos ? block.size() : nl);
  }
  return offsets;
}

TEST(LineDfa, ReadsWhatDfaViewWrites) {
  for (const char* text : {"[0-9]{4}", "[0-9]+$", "^[A-Z][a-z]+ +[0-9]+", "(?:[a-f0-9]{2}\\x3a){5}[a-f0-9]{2}",
                           "(?:^|[^[:alnum:]_\\n])(?:[0-9]+)(?:[^[:alnum:]_\\n]|$)", "^(?:[a-z]+)$", "a.b",
                           "[^\\x0aa]x", "(?:ab|cd)*e", "a{2,}?b", "x{0,3}y", "\\w\\d[\\w-]", "[]a]", "[^]a]b"})
    EXPECT_TRUE(reads(text)) << text;
  for (const char* text : {"a\\bb", "\\Bx", "a^b", "a$b", "x*^a", "(?:a$)*b", "a\\1", "(?i)a", "(?=a)", "a*+",
                           "a{,3}", "a{x}", "[[=a=]]", "[\\n]", "\\n", "\\s", "\\x{41}", "(a", "a)", "", "a|"})
    EXPECT_FALSE(reads(text)) << text;
  EXPECT_FALSE(reads("^"));  // every line, the empty match: Hyperscan's lines database refuses it too
  EXPECT_TRUE(reads("caf\xc3\xa9+", false, true));
  EXPECT_TRUE(reads("[^a]x.", false, true));
  EXPECT_FALSE(reads("a", true, true));             // -i in UTF-8: Hyperscan's folding there
  EXPECT_FALSE(reads("[[:alpha:]]", false, true));  // the C library's classes in UTF-8
  EXPECT_FALSE(reads("\\w", false, true));
  EXPECT_FALSE(reads("\\xe9", false, true));  // a code point in UTF-8, not a byte
  EXPECT_FALSE(reads("\xa9", false, true));   // a continuation byte alone
  EXPECT_FALSE(reads("[0-9]{5000}"));             // too many positions
  EXPECT_FALSE(reads("(?:a|b)*a(?:a|b){12}"));  // too many states
}

TEST(LineDfa, StopsAtALinesFirstMatchAndFindsTheLastLineWithoutNewline) {
  const auto dfa = LineDfa::build({"[0-9]{2}", "x$"}, false, false);
  ASSERT_NE(dfa, nullptr);
  const std::string block = "a12b34\nno\n\n7 8\nabx\nx\nyx";
  EXPECT_EQ(selected(*dfa, block), (std::vector<std::size_t>{0, 15, 19, 21}));
  EXPECT_EQ(selected(*dfa, "12"), (std::vector<std::size_t>{0}));
  EXPECT_EQ(selected(*dfa, ""), (std::vector<std::size_t>{}));
  const auto folded = LineDfa::build({"^ab"}, true, false);
  ASSERT_NE(folded, nullptr);
  EXPECT_EQ(selected(*folded, "xab\nAB\naB c\n"), (std::vector<std::size_t>{4, 7}));
}

std::string random_expression(std::mt19937& rng, bool utf8, int depth = 0) {
  static const std::vector<std::string> atoms = {"a", "b", "0", "1", " ", "[ab]", "[^a]", ".", "[0-9]", "\\x61",
                                                 "[a-b1]", "\\.", "[[:digit:]]", "\\w"};
  std::string text;
  const int items = 1 + static_cast<int>(rng() % 4);
  for (int i = 0; i < items; ++i) {
    const auto pick = static_cast<unsigned>(rng() % 10);
    if (pick == 0 && depth < 2) {
      text += "(?:" + random_expression(rng, utf8, depth + 1) + "|" + random_expression(rng, utf8, depth + 1) + ")";
    } else if (pick == 1 && utf8) {
      text += "\xc3\xa9";
    } else {
      std::string atom = atoms[rng() % atoms.size()];
      if (utf8 && (atom == "[[:digit:]]" || atom == "\\w")) atom = "[0-9]";
      text += atom;
    }
    static const std::vector<std::string> repeats = {"", "", "", "*", "+", "?", "{2}", "{1,3}", "{2,}", "*?", "{0,2}"};
    text += repeats[rng() % repeats.size()];
  }
  if (depth == 0 && rng() % 5 == 0) text = "^" + text;
  if (depth == 0 && rng() % 5 == 0) text += "$";
  return text;
}

std::string random_block(std::mt19937& rng, bool utf8) {
  static const std::vector<std::string> bytes = {"a", "b", "A", "0", "1", " ", ".", "_", "x"};
  std::string block;
  const int lines = static_cast<int>(rng() % 12);
  for (int l = 0; l < lines; ++l) {
    for (int n = static_cast<int>(rng() % 14); n > 0; --n)
      block += utf8 && rng() % 7 == 0 ? std::string(rng() % 2 ? "\xc3\xa9" : "\xe2\x82\xac") : bytes[rng() % bytes.size()];
    block += '\n';
  }
  if (!block.empty() && rng() % 2 == 0) block.pop_back();
  if (!utf8 && rng() % 4 == 0) block.insert(rng() % (block.size() + 1), "\xe9\xff");
  return block;
}

void agree_with_hyperscan(bool ignore_case, bool utf8, std::uint32_t seed) {
  std::mt19937 rng(seed);
  int built = 0, compared = 0;
  for (int round = 0; round < 400; ++round) {
    std::vector<std::string> texts;
    for (int k = 1 + static_cast<int>(rng() % 3); k > 0; --k) texts.push_back(random_expression(rng, utf8));
    const auto dfa = LineDfa::build(texts, ignore_case, utf8);
    if (dfa == nullptr) continue;
    ++built;
    std::vector<std::uint32_t> ids;
    for (std::uint32_t k = 0; k < texts.size(); ++k) ids.push_back(k);
    HsSelect oracle(texts, ids, ignore_case, utf8);
    if (oracle.accepted().size() != texts.size()) continue;  // a text Hyperscan refuses
    for (int b = 0; b < 20; ++b) {
      const std::string block = random_block(rng, utf8);
      std::vector<std::size_t> expected;
      for (std::size_t begin = 0; begin < block.size();) {
        std::size_t end = block.find('\n', begin);
        if (end == std::string::npos) end = block.size();
        if (oracle.scan(std::string_view(block).substr(begin, end - begin), nullptr)) expected.push_back(begin);
        begin = end + 1;
      }
      std::string all;
      for (const auto& t : texts) all += t + "  ";
      ASSERT_EQ(selected(*dfa, block), expected) << "expressions: " << all << "\nblock: " << block;
      ++compared;
    }
  }
  EXPECT_GT(built, 200);
  EXPECT_GT(compared, 2000);
}

TEST(LineDfa, AgreesWithHyperscanOnRandomExpressions) { agree_with_hyperscan(false, false, 1); }
TEST(LineDfa, AgreesWithHyperscanFoldingCase) { agree_with_hyperscan(true, false, 2); }
TEST(LineDfa, AgreesWithHyperscanInUtf8) { agree_with_hyperscan(false, true, 3); }

}  // namespace
}  // namespace gpufilter::regex
