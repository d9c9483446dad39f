// PairFind (core/pair_find.hpp) against memmem(): every text length around its 16-byte
// blocks, every alignment, literals of 1 to 20 bytes over small alphabets (so that the two
// bytes compared often agree where the literal does not), occurrences at either end.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

#include "gpufilter/core/pair_find.hpp"

namespace {

using gpufilter::PairFind;

const char* by_memmem(const char* at, const char* end, const std::string& literal) {
  return static_cast<const char*>(memmem(at, static_cast<std::size_t>(end - at), literal.data(), literal.size()));
}

TEST(PairFind, AgreesWithMemmem) {
  std::mt19937 rng(7);
  const std::string alphabets[] = {"ab", "ab \n", std::string("xy\0\xff", 4), "the quick fox"};
  for (const std::string& alphabet : alphabets) {
    for (std::size_t length = 1; length <= 20; ++length) {
      for (int trial = 0; trial < 30; ++trial) {
        std::string literal(length, 'a');
        for (char& c : literal) c = alphabet[rng() % alphabet.size()];
        const PairFind finder(literal);
        for (std::size_t size = 0; size < 70; ++size) {
          std::string text(size + 2, 'a');
          for (char& c : text) c = alphabet[rng() % alphabet.size()];
          // Plant the literal at the start, the end or in between, now and then.
          if (size >= length && trial % 3 == 0) {
            const std::size_t at = trial % 2 == 0 ? size - length : rng() % (size - length + 1);
            text.replace(1 + at, length, literal);
          }
          for (std::size_t offset = 0; offset < 2; ++offset) {
            const char* begin = text.data() + offset;
            const char* end = begin + size;
            ASSERT_EQ(finder.find(begin, end), by_memmem(begin, end, literal))
                << "literal " << literal << " size " << size << " offset " << offset;
          }
        }
      }
    }
  }
}

TEST(PairFind, AnEmptyLiteralIsFoundWhereTheSearchStarts) {
  const std::string text = "abc";
  EXPECT_EQ(PairFind("").find(text.data() + 1, text.data() + 3), text.data() + 1);
  EXPECT_EQ(PairFind("").find(text.data() + 3, text.data() + 3), text.data() + 3);
  EXPECT_EQ(PairFind("c").find(text.data() + 3, text.data() + 3), nullptr);
}

}  // namespace
