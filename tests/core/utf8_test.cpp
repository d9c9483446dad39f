// The byte helpers of core/utf8.hpp against plain byte-at-a-time answers, at every length
// and alignment around their eight-byte steps, with high bytes and newlines anywhere.
#include <gtest/gtest.h>

#include <climits>
#include <clocale>
#include <cwchar>
#include <random>
#include <string>
#include <vector>

#include "gpufilter/core/utf8.hpp"

namespace {

using gpufilter::all_ascii;
using gpufilter::count_byte;
using gpufilter::first_beyond_ascii;
using gpufilter::valid_utf8;
using gpufilter::well_formed_utf8_prefix;

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
        const std::size_t beyond = first_beyond_ascii(view);
        ASSERT_EQ(beyond == view.size(), ascii) << size << " " << offset;
        ASSERT_TRUE(all_ascii(view.substr(0, beyond)));
        if (beyond < view.size()) {
          ASSERT_GE(static_cast<unsigned char>(view[beyond]), 0x80);
        }
      }
    }
  }
  // Long ASCII runs with one byte above 0x7f anywhere (first_beyond_ascii()'s steps of 64
  // and 16, and the tail), or none.
  for (std::size_t size = 0; size < 300; ++size)
    for (std::size_t at = 0; at <= size; ++at) {
      std::string text(size, 'a');
      if (at < size) text[at] = static_cast<char>(0x80 | (at & 0x7f));
      ASSERT_EQ(first_beyond_ascii(text), at) << size;
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

// well_formed_utf8_prefix() takes only what glibc's reading takes (the regex path trusts
// Hyperscan's UTF-8 mode with it), stops only at a sequence glibc refuses or one of the
// forms RFC 3629 leaves out (overlong, surrogate, past U+10FFFF), and takes every
// character glibc writes.
TEST(Bytes, WellFormedUtf8PrefixIsWhatGlibcReads) {
  ASSERT_NE(std::setlocale(LC_ALL, "C.UTF-8"), nullptr);
  std::mt19937 rng(5);
  const std::vector<std::string> pieces = {"a", "\n", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xc3", "\xa9",
                                           "\xc0\xaf", "\xe0\x80\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xf5",
                                           "\xff", "\xef\xbf\xbd", std::string(40, 'x')};
  for (int trial = 0; trial < 20000; ++trial) {
    std::string text;
    for (int k = static_cast<int>(rng() % 8); k > 0; --k) text += pieces[rng() % pieces.size()];
    const std::size_t prefix = well_formed_utf8_prefix(text);
    ASSERT_TRUE(valid_utf8(std::string_view(text).substr(0, prefix))) << trial;
    if (prefix == text.size()) continue;
    const auto c = static_cast<unsigned char>(text[prefix]);
    ASSERT_GE(c, 0x80) << trial;
    // Where glibc takes the character that follows, it is one RFC 3629 leaves out.
    std::mbstate_t state{};
    wchar_t wc = 0;
    const std::size_t n = std::mbrtowc(&wc, text.data() + prefix, text.size() - prefix, &state);
    if (n != static_cast<std::size_t>(-1) && n != static_cast<std::size_t>(-2)) {
      ASSERT_TRUE((wc >= 0xd800 && wc <= 0xdfff) || wc > 0x10ffff) << trial << " " << static_cast<long>(wc);
    }
  }
  // Every character from U+0080 to U+10FFFF as glibc writes it, surrogates aside.
  for (char32_t cp = 0x80; cp <= 0x10ffff; cp += (cp < 0x10000 ? 1 : 97)) {
    if (cp >= 0xd800 && cp <= 0xdfff) continue;
    char bytes[MB_LEN_MAX];
    std::mbstate_t state{};
    const std::size_t n = std::wcrtomb(bytes, static_cast<wchar_t>(cp), &state);
    ASSERT_NE(n, static_cast<std::size_t>(-1)) << static_cast<long>(cp);
    const std::string character(bytes, n);
    ASSERT_EQ(well_formed_utf8_prefix(character), n) << static_cast<long>(cp);
  }
  std::setlocale(LC_ALL, "C");
}

}  // namespace
