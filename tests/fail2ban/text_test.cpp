// The text helpers fail2ban's reading rests on, against independent answers: valid_utf8()
// (which skips ASCII eight bytes at a time) against utf8_replaced() (which decodes every
// sequence), strptime_groups()'s numbers against std::stoi's reading, and date templates
// that skip lines without their factors.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gpufilter/fail2ban/date.hpp"
#include "gpufilter/fail2ban/filter.hpp"
#include "gpufilter/fail2ban/pyregex.hpp"
#include "gpufilter/fail2ban/strptime.hpp"

namespace gpufilter::fail2ban {
namespace {

TEST(Fail2banText, ValidUtf8AgreesWithTheDecoderAroundEveryAsciiRun) {
  const std::vector<std::string> pieces = {"a", "0123456", "01234567", "012345678", "\xc3\xa9", "\xe2\x82\xac",
                                           "\xf0\x9f\x98\x80", "\xff", "\xc3", "\xe2\x82", "\x80", "\xed\xa0\x80",
                                           "\xc0\xaf", "\xf4\x90\x80\x80", ""};
  std::mt19937 rng(23);
  for (int n = 0; n < 20000; ++n) {
    std::string text;
    const int parts = static_cast<int>(rng() % 6);
    for (int k = 0; k < parts; ++k) text += pieces[rng() % pieces.size()];
    EXPECT_EQ(valid_utf8(text), utf8_replaced(text) == text) << testing::PrintToString(text);
  }
}

TEST(Fail2banText, DateFieldsReadAsStoiReadsThem) {
  using Groups = std::vector<std::pair<std::string_view, std::optional<std::string_view>>>;
  const double now = 1764400000;  // 2025-11-29
  const auto at = [&](std::string_view day, std::string_view hour) {
    const Groups g = {{"H", hour}, {"M", "07"}, {"S", "09"}, {"Y", "2025"}, {"d", day}, {"m", "03"}, {"z", "+0000"}};
    return strptime_groups(NamedGroupViews(g), now);
  };
  ASSERT_TRUE(at("05", "01"));
  EXPECT_EQ(*at("05", "01"), 1741136829.0);  // 2025-03-05 01:07:09 UTC
  EXPECT_EQ(at(" 5", "01"), at("05", "01"));  // "%d" takes a leading space
  EXPECT_EQ(at("5", "1"), at("05", "01"));
}

// A naive time is local: mktime's answer for its minute, plus its seconds, kept per thread
// in sets of two. Minutes that share a set (512 minutes apart), met in turn and across a
// zone's DST changes, each get what mktime gives for them alone, whether remembered or not.
TEST(Fail2banText, LocalTimesAreMktimesWhateverTheOrder) {
  using Groups = std::vector<std::pair<std::string_view, std::optional<std::string_view>>>;
  setenv("TZ", "CET-01CEST-02,M3.5.0,M10.5.0", 1);
  tzset();
  const double now = 1798761600;  // 2027-01-01
  std::vector<std::int64_t> naive;  // 2026, local: three around each change, then minutes 512 apart
  for (const std::int64_t change : {1774746000LL, 1792890000LL})  // 2026-03-29 01:00, 10-25 01:00
    for (int k = -3; k <= 3; ++k) naive.push_back(change + k * 512 * 60 + 17 * 60);
  std::vector<std::int64_t> order;  // each pair twice (two ways hold them), and all in turn (evicted)
  for (std::size_t i = 0; i + 1 < naive.size(); ++i) order.insert(order.end(), {naive[i], naive[i + 1], naive[i], naive[i + 1]});
  order.insert(order.end(), naive.begin(), naive.end());
  for (int round = 0; round < 3; ++round) {
    for (const std::int64_t n : order) {
      std::tm c{};
      const std::time_t as_utc = static_cast<std::time_t>(n);
      gmtime_r(&as_utc, &c);
      if (c.tm_hour == 1 || c.tm_hour == 2) continue;  // the hour skipped (02) or met twice (01): mktime guesses
      char text[6][16];
      std::snprintf(text[0], 16, "%04d", c.tm_year + 1900);
      std::snprintf(text[1], 16, "%02d", c.tm_mon + 1);
      std::snprintf(text[2], 16, "%02d", c.tm_mday);
      std::snprintf(text[3], 16, "%02d", c.tm_hour);
      std::snprintf(text[4], 16, "%02d", c.tm_min);
      std::snprintf(text[5], 16, "%02d", 40 + round);
      const Groups g = {{"H", text[3]}, {"M", text[4]}, {"S", text[5]}, {"Y", text[0]}, {"d", text[2]}, {"m", text[1]}};
      std::tm t = c;
      t.tm_sec = 40 + round;
      t.tm_isdst = -1;
      const std::time_t want = std::mktime(&t);
      const auto have = strptime_groups(NamedGroupViews(g), now);
      ASSERT_TRUE(have);
      EXPECT_EQ(*have, static_cast<double>(want)) << text[0] << "-" << text[1] << "-" << text[2] << " " << text[3] << ":" << text[4];
    }
  }
  setenv("TZ", "UTC0", 1);
  tzset();
}

// %j, and %U or %W with a weekday (%w, %a), make the day when there is no month and day, as
// fail2ban's reGroupDictStrptime does (Python's _calc_julian_from_U_or_W and
// datetime.fromordinal; the expected values are Python's). They were ignored: today's date.
TEST(Fail2banText, DayOfYearAndWeekFieldsMakeTheDate) {
  using Groups = std::vector<std::pair<std::string_view, std::optional<std::string_view>>>;
  const double now = 1764400000;  // 2025-11-29
  const auto at = [&](Groups g) {
    g.push_back({"z", "+0000"});
    return strptime_groups(NamedGroupViews(g), now);
  };
  EXPECT_EQ(at({{"j", "1"}, {"Y", "2026"}}), 1767225600.0);
  EXPECT_EQ(at({{"j", "333"}, {"Y", "2026"}}), 1795910400.0);
  EXPECT_EQ(at({{"j", "366"}, {"Y", "2026"}}), 1798761600.0);  // past the year's end: 2027-01-01
  EXPECT_EQ(at({{"Y", "2026"}, {"U", "47"}, {"w", "0"}}), 1795305600.0);   // Sunday 2026-11-22
  EXPECT_EQ(at({{"Y", "2026"}, {"W", "47"}, {"w", "1"}}), 1795392000.0);   // Monday 2026-11-23
  EXPECT_EQ(at({{"Y", "2026"}, {"U", "00"}, {"w", "3"}}), 1767139200.0);   // week 0: 2025-12-31
  EXPECT_EQ(at({{"Y", "2025"}, {"W", "0"}, {"a", "mon"}}), 1735516800.0);  // 2024-12-30
  // A week without a weekday is worthless (fail2ban: today, assumed).
  EXPECT_EQ(at({{"Y", "2026"}, {"U", "47"}, {"H", "01"}}), at({{"Y", "2026"}, {"H", "01"}}));
}

// A template searches only lines holding one of its factors (openhab's: '/'); lines of
// other logs in between change nothing, and case-blind templates ((?i), the default
// syslog one) still find their dates, whatever the case of the month.
TEST(Fail2banText, DateTemplatesSkipLinesWithoutTheirFactors) {
  constexpr double kNow = 1733814000;  // 2024-12-10
  setenv("TZ", "UTC0", 1);  // the syslog date is local time
  tzset();
  DateDetector openhab;
  openhab.append("%d/%b[^/]*/%Y:%H:%M:%S %z");
  DateDetector syslog;  // the default templates
  const std::string foreign = "Dec 10 06:55:46 LabSZ sshd[24200]: Invalid user admin from 10.0.0.1 port 22";
  const std::string access = "10.0.0.2 - - [10/Dec/2024:06:55:47 +0000] \"GET /index.html HTTP/1.1\" 200";
  for (int round = 0; round < 3; ++round) {
    EXPECT_FALSE(openhab.find(foreign, kNow));
    const auto found = openhab.find(access, kNow);
    ASSERT_TRUE(found && found->time);
    EXPECT_EQ(*found->time, 1733813747.0);
    EXPECT_EQ(access.substr(found->start, found->end - found->start), "10/Dec/2024:06:55:47 +0000");
  }
  for (const std::string line : {"Dec 10 06:55:46 host sshd[1]: x", "dec 10 06:55:46 host sshd[1]: x",
                                 "DEC 10 06:55:46 host sshd[1]: x"}) {
    const auto found = syslog.find(line, kNow);
    ASSERT_TRUE(found && found->time) << line;
    EXPECT_EQ(*found->time, 1733813746.0) << line;
  }
  // A datepattern's text around the case-blind defaults (oracleims': `^<co ts="{DATE}"`):
  // the run `="` of its factor gates them; its letters match in any case, as fail2ban's.
  DateDetector wrapped;
  wrapped.append("^<co ts=\"{DATE}\"\\s+");
  for (int round = 0; round < 2; ++round) {
    EXPECT_FALSE(wrapped.find(foreign, kNow));
    for (const std::string line : {"<co ts=\"Dec 10 06:55:46\" x", "<CO TS=\"dec 10 06:55:46\" x"}) {
      const auto found = wrapped.find(line, kNow);
      ASSERT_TRUE(found && found->time) << line;
      EXPECT_EQ(*found->time, 1733813746.0) << line;
    }
    EXPECT_FALSE(wrapped.find("<co ts=Dec 10 06:55:46 x", kNow));
  }
}

// Fields::set(): several keys at once, merged in one pass, as operator[] one by one.
TEST(Fail2banText, FieldsSetAsOneByOne) {
  std::mt19937 rng(5);
  const std::vector<std::string> names = {"a", "alt_user", "failregex", "fid", "host", "ip", "ip4", "mlfid", "user", "zz"};
  for (int round = 0; round < 2000; ++round) {
    Fields base;
    for (const std::string& n : names)
      if (rng() % 2) base[n] = n + "=" + std::to_string(rng() % 10);
    std::vector<Fields::value_type> more;
    for (const std::string& n : names)
      if (rng() % 3 == 0) more.emplace_back(n, "new" + std::to_string(rng() % 10));
    Fields want = base, got = base;
    for (const auto& [k, v] : more) want[k] = v;
    got.set(more);
    ASSERT_EQ(got, want) << "round " << round;
  }
}

}  // namespace
}  // namespace gpufilter::fail2ban
