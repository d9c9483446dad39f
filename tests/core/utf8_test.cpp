// The byte helpers of core/utf8.hpp against plain byte-at-a-time answers, at every length
// and alignment around their eight-byte steps, with high bytes and newlines anywhere.
#include <gtest/gtest.h>

#include <clocale>
#include <random>
#include <string>

#include "gpufilter/core/utf8.hpp"

namespace {

using gpufilter::all_ascii;
using gpufilter::count_byte;
using gpufilter::valid_utf8;

TEST(Bytes, CountAndAsciiAgreeWithAPlainLoop) {
  std::mt19937 rng(3);
  const std::string alphabet = std::string("ab\n\x7f\x80\xff\x0a\x8a", 8);
  for (std::size_t size = 0; size < 70; ++size) {
    for (int trial = 0; trial < 40; ++trial) {
      std::string text(size + 3, 'x');
      for (char& c : text) c = alphabet[rng() % alphabet.size()];
      for (std::size_t offset = 0; offset < 3; ++offset) {
        const std::string_view view(text.data() + offset, size);
        std::size_t newlines = 0;
        bool ascii = true;
        for (char c : view) {
          newlines += c == '\n';
          ascii = ascii && static_cast<unsigned char>(c) < 0x80;
        }
        ASSERT_EQ(count_byte(view, '\n'), newlines) << size << " " << offset;
        ASSERT_EQ(all_ascii(view), ascii) << size << " " << offset;
      }
    }
  }
}

// count_byte() sums sixteen byte-wide lanes every 255 steps: a text of nothing but the
// byte, around and past those sums, must not wrap a lane.
TEST(Bytes, CountOfLongRunsOfTheByteAroundTheLaneSums) {
  for (const std::size_t size : {std::size_t{4079}, std::size_t{4080}, std::size_t{4081}, std::size_t{4096},
                                 std::size_t{8160 + 5}, std::size_t{100003}}) {
    for (std::size_t offset = 0; offset < 3; ++offset) {
      const std::string text(size + offset, '\n');
      EXPECT_EQ(count_byte(std::string_view(text.data() + offset, size), '\n'), size) << size << " " << offset;
      std::string mixed = text;
      for (std::size_t i = 0; i < mixed.size(); i += 7) mixed[i] = '\xff';
      std::size_t want = 0;
      for (std::size_t i = offset; i < mixed.size(); ++i) want += mixed[i] == '\n';
      EXPECT_EQ(count_byte(std::string_view(mixed.data() + offset, size), '\n'), want) << size << " " << offset;
      EXPECT_EQ(count_byte(std::string_view(mixed.data() + offset, size), '\xff'), size - want) << size << " " << offset;
    }
  }
}

TEST(Bytes, ValidUtf8AcrossTheEightByteSteps) {
  ASSERT_NE(std::setlocale(LC_ALL, "C.UTF-8"), nullptr);
  const std::string e = "\xc3\xa9";  // é
  for (std::size_t before = 0; before < 20; ++before) {
    const std::string ascii(before, 'a');
    EXPECT_TRUE(valid_utf8(ascii + e + ascii));
    EXPECT_FALSE(valid_utf8(ascii + "\xc3" + ascii + "zzzzzzzz"));  // a lead byte without its tail
    EXPECT_FALSE(valid_utf8(ascii + "\xa9"));                       // a lone continuation byte
  }
  std::setlocale(LC_ALL, "C");
}

}  // namespace
