#include "gpufilter/fail2ban/strptime.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <ctime>
#include <mutex>
#include <set>
#include <span>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <vector>

namespace gpufilter::fail2ban {
namespace {

struct Field {
  const char* key;
  const char* regex;
  const char* name;
};

// Python 3.11 _strptime.TimeRE (C locale) as fail2ban 1.0.2 changes it; ExY is built below.
const std::vector<Field>& fields() {
  static const std::vector<Field> table = {
      {"ExZ", R"((?P<Z>[A-Z](?:[A-Z]{2,4})?))", "ExZone name"},
      {"Exz", R"((?P<z>(?:[A-Z](?:[A-Z]{2,4})?)?[+-][01]\d(?::?\d{2})?|[A-Z](?:[A-Z]{2,4})?))", "ExZone offset"},
      {"Exd", R"((?P<d>[1-2]\d|0[1-9]|3[0-1]))", "ExDay"},
      {"Exm", R"((?P<m>0[1-9]|1[0-2]))", "ExMonth"},
      {"ExH", R"((?P<H>[0-1]\d|2[0-3]))", "Ex24hour"},
      {"Exk", R"( ?(?P<H>[0-1]?\d|2[0-3]))", "%Exk"},
      {"Exl", R"( ?(?P<I>1[0-2]|\d))", "Ex%l"},
      {"ExM", R"((?P<M>[0-5]\d))", "ExMinute"},
      {"ExS", R"((?P<S>[0-5]\d|6[0-1]))", "ExSecond"},
      {"ExY", "", "ExYear"},
      {"Exy", R"((?P<y>\d{2}))", "ExYear2"},
      {"d", R"((?P<d>[1-2]\d|[0 ]?[1-9]|3[0-1]))", "Day"},
      {"f", R"((?P<f>[0-9]{1,6}))", "Microseconds"},
      {"H", R"((?P<H>[0-1]?\d|2[0-3]))", "24hour"},
      {"I", R"((?P<I>1[0-2]|0[1-9]|[1-9]))", "12hour"},
      {"G", R"((?P<G>\d\d\d\d))", "%G"},
      {"j", R"((?P<j>36[0-6]|3[0-5]\d|[1-2]\d\d|0[1-9]\d|00[1-9]|[1-9]\d|0[1-9]|[1-9]))", "Yearday"},
      {"m", R"((?P<m>0?[1-9]|1[0-2]))", "Month"},
      {"M", R"((?P<M>[0-5]?\d))", "Minute"},
      {"S", R"((?P<S>[0-5]?\d|6[0-1]))", "Second"},
      {"U", R"((?P<U>5[0-3]|[0-4]\d|\d))", "Yearweek"},
      {"w", R"((?P<w>[0-6]))", "Weekday"},
      {"u", R"((?P<u>[1-7]))", "%u"},
      {"V", R"((?P<V>5[0-3]|0[1-9]|[1-4]\d|\d))", "%V"},
      {"y", R"((?P<y>\d\d))", "Year2"},
      {"Y", R"((?P<Y>\d{4}))", "Year"},
      {"z", R"((?P<z>Z|UTC|GMT|[+-][01]\d(?::?\d{2})?))", "Zone offset"},
      {"A", "(?P<A>wednesday|thursday|saturday|tuesday|monday|friday|sunday)", "DAYNAME"},
      {"a", "(?P<a>mon|tue|wed|thu|fri|sat|sun)", "DAY"},
      {"B", "(?P<B>september|february|november|december|january|october|august|march|april|june|july|may)", "MONTH"},
      {"b", "(?P<b>jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)", "MON"},
      {"p", "(?P<p>am|pm)", "AMPM"},
      {"Z", R"((?P<Z>Z|[A-Z]{3,5}))", "Zone name"},
      {"%", "%", "%"},
      {"W", R"((?P<W>5[0-3]|[0-4]\d|\d))", "Yearweek"},
      {"c",
       R"((?P<a>mon|tue|wed|thu|fri|sat|sun)\s+(?P<b>jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)\s+(?P<d>3[0-1]|[1-2]\d|0[1-9]|[1-9]| [1-9])\s+(?P<H>2[0-3]|[0-1]\d|\d):(?P<M>[0-5]\d|\d):(?P<S>6[0-1]|[0-5]\d|\d)\s+(?P<Y>\d\d\d\d))",
       "%c"},
      {"x", R"((?P<m>1[0-2]|0[1-9]|[1-9])/(?P<d>3[0-1]|[1-2]\d|0[1-9]|[1-9]| [1-9])/(?P<y>\d\d))", "%x"},
      {"X", R"((?P<H>2[0-3]|[0-1]\d|\d):(?P<M>[0-5]\d|\d):(?P<S>6[0-1]|[0-5]\d|\d))", "%X"},
      {"k", R"( ?(?P<H>[0-2]?\d))", "%k"},
      {"l", R"( ?(?P<I>1?\d))", "%l"},
  };
  return table;
}

// glibc's mktime and localtime_r read the zone (TZ, /etc/localtime) under a lock of their
// own, which ThreadSanitizer does not see: gpufilterd's filters date lines on several
// threads at once, so these calls take this lock too. They are rare (the callers cache
// per minute and per second).
std::mutex& zone_mutex() {
  static std::mutex m;
  return m;
}
std::time_t locked_mktime(std::tm* t) {
  const std::lock_guard lock(zone_mutex());
  return std::mktime(t);
}
void locked_localtime(std::time_t t, std::tm* out) {
  const std::lock_guard lock(zone_mutex());
  localtime_r(&t, out);
}

// ExY: four-digit years of the centuries fail2ban expects (2000 to three years ahead),
// as _getYearCentRE() builds it from the current year.
std::string year_regex() {
  std::tm tm{};
  locked_localtime(std::time(nullptr), &tm);
  const int year = tm.tm_year + 1900;
  std::set<std::string> cents{std::to_string(year - 1).substr(0, 3), std::to_string(year + 3).substr(0, 3)};
  for (int y = 2000; y < year + 1; y += 3) cents.insert(std::to_string(y).substr(0, 3));
  std::string alt;
  for (const auto& c : cents) alt += (alt.empty() ? "" : "|") + c;
  return R"((?P<Y>(?:)" + alt + R"()\d))";
}

// TZ_ABBR_OFFS: fail2ban's fixed offsets of zone abbreviations, in hours.
double zone_hours(const std::string& abbr, bool& known) {
  static const std::vector<std::pair<double, std::vector<std::string>>> zones = {
      {-12, {"Y"}}, {-11, {"X", "NUT", "SST"}}, {-10, {"W", "CKT", "HAST", "HST", "TAHT", "TKT"}},
      {-9, {"V", "AKST", "GAMT", "GIT", "HADT", "HNY"}}, {-8, {"U", "AKDT", "CIST", "HAY", "HNP", "PST", "PT"}},
      {-7, {"T", "HAP", "HNR", "MST", "PDT"}}, {-6, {"S", "CST", "EAST", "GALT", "HAR", "HNC", "MDT"}},
      {-5, {"R", "CDT", "COT", "EASST", "ECT", "EST", "ET", "HAC", "HNE", "PET"}},
      {-4, {"Q", "AST", "BOT", "CLT", "COST", "EDT", "FKT", "GYT", "HAE", "HNA", "PYT"}},
      {-3, {"P", "ADT", "ART", "BRT", "CLST", "FKST", "GFT", "HAA", "PMST", "PYST", "SRT", "UYT", "WGT"}},
      {-2, {"O", "BRST", "FNT", "PMDT", "UYST", "WGST"}}, {-1, {"N", "AZOT", "CVT", "EGT"}},
      {0, {"Z", "EGST", "GMT", "UTC", "WET", "WT"}}, {1, {"A", "CET", "DFT", "WAT", "WEDT", "WEST"}},
      {2, {"B", "CAT", "CEDT", "CEST", "EET", "SAST", "WAST"}}, {3, {"C", "EAT", "EEDT", "EEST", "IDT", "MSK"}},
      {4, {"D", "AMT", "AZT", "GET", "GST", "KUYT", "MSD", "MUT", "RET", "SAMT", "SCT"}},
      {5, {"E", "AMST", "AQTT", "AZST", "HMT", "MAWT", "MVT", "PKT", "TFT", "TJT", "TMT", "UZT", "YEKT"}},
      {6, {"F", "ALMT", "BIOT", "BTT", "IOT", "KGT", "NOVT", "OMST", "YEKST"}},
      {7, {"G", "CXT", "DAVT", "HOVT", "ICT", "KRAT", "NOVST", "OMSST", "THA", "WIB"}},
      {8, {"H", "ACT", "AWST", "BDT", "BNT", "CAST", "HKT", "IRKT", "KRAST", "MYT", "PHT", "SGT", "ULAT", "WITA", "WST"}},
      {9, {"I", "AWDT", "IRKST", "JST", "KST", "PWT", "TLT", "WDT", "WIT", "YAKT"}},
      {10, {"K", "AEST", "ChST", "PGT", "VLAT", "YAKST", "YAPT"}},
      {11, {"L", "AEDT", "LHDT", "MAGT", "NCT", "PONT", "SBT", "VLAST", "VUT"}},
      {12, {"M", "ANAST", "ANAT", "FJT", "GILT", "MAGST", "MHT", "NZST", "PETST", "PETT", "TVT", "WFT"}},
      {13, {"FJST", "NZDT"}}, {11.5, {"NFT"}}, {10.5, {"ACDT", "LHST"}}, {9.5, {"ACST"}}, {6.5, {"CCT", "MMT"}},
      {5.75, {"NPT"}}, {5.5, {"SLT"}}, {4.5, {"AFT", "IRDT"}}, {3.5, {"IRST"}}, {-2.5, {"HAT", "NDT"}},
      {-3.5, {"HNT", "NST", "NT"}}, {-4.5, {"HLV", "VET"}}, {-9.5, {"MART", "MIT"}},
  };
  known = true;
  if (abbr.empty()) return 0;
  for (const auto& [hours, names] : zones) {
    if (std::find(names.begin(), names.end(), abbr) != names.end()) return hours;
  }
  known = false;
  return 0;
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

// zone2offset(validateTimeZone(z)): FIXED_OFFSET_TZ_RE = ([A-Z](?:[A-Z]{2,4})?)?([+-][01]\d(?::?\d{2})?)?$
std::optional<int> zone_offset_minutes(const std::string& z) {
  std::size_t i = 0;
  while (i < z.size() && i < 5 && std::isupper(static_cast<unsigned char>(z[i]))) ++i;
  if (i == 2) i = 1;  // the abbreviation is 1, 3, 4 or 5 letters
  const std::string abbr = z.substr(0, i), off = z.substr(i);
  bool known = false;
  const double hours = zone_hours(abbr, known);
  if (!known) return std::nullopt;  // Python: KeyError, the line is not dated
  int minutes = static_cast<int>(hours * 60);
  if (off.empty()) return minutes;
  if (off.size() < 3 || (off[0] != '+' && off[0] != '-') || (off[1] != '0' && off[1] != '1') || !all_digits(off.substr(1, 2))) {
    return std::nullopt;
  }
  const int sign = off[0] == '-' ? -1 : 1;
  if (off.size() == 3) return minutes + sign * std::stoi(off.substr(1, 2)) * 60;
  const std::string mm = off[3] == ':' ? off.substr(4) : off.substr(3);
  if (mm.size() != 2 || !all_digits(mm)) return std::nullopt;
  return minutes + sign * (std::stoi(off.substr(1, 2)) * 60 + std::stoi(mm));
}

// Where `v` (any case) stands in `names`, whole or (not `full`) as its first three
// letters; -1 when nowhere.
int name_index(std::string_view v, std::span<const char* const> names, bool full) {
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::string_view name = full ? std::string_view(names[i]) : std::string_view(names[i]).substr(0, 3);
    if (name.size() != v.size()) continue;
    bool same = true;
    for (std::size_t k = 0; k < v.size() && same; ++k)
      same = std::tolower(static_cast<unsigned char>(v[k])) == static_cast<unsigned char>(name[k]);
    if (same) return static_cast<int>(i);
  }
  return -1;
}

int month_index(std::string_view v, bool full) {
  static const char* const names[] = {"january", "february", "march",     "april",   "may",      "june",
                                      "july",    "august",   "september", "october", "november", "december"};
  return name_index(v, names, full) + 1;
}

// Days from 1970-01-01 to a proleptic Gregorian date (H. Hinnant's days_from_civil):
// arithmetic, where glibc's timegm and gmtime_r take the zone's lock even for UTC (on a
// pool of filters dating lines that lock was a tenth of gpufilterd's time).
std::int64_t days_from_civil(std::int64_t y, int m, int d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * static_cast<unsigned>(m + (m > 2 ? -3 : 9)) + 2) / 5 + static_cast<unsigned>(d) - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

// The UTC calendar fields of `seconds` since the epoch (gmtime_r's, without its lock):
// year, month 1-12, day, hour, minute, second and weekday (0 Sunday).
struct Civil {
  std::int64_t year;
  int month, day, hour, minute, second, weekday;
};
Civil civil_from_seconds(std::int64_t seconds) {
  std::int64_t z = seconds >= 0 ? seconds / 86400 : (seconds - 86399) / 86400;
  const auto in_day = static_cast<int>(seconds - z * 86400);
  Civil c{};
  c.hour = in_day / 3600;
  c.minute = in_day / 60 % 60;
  c.second = in_day % 60;
  c.weekday = static_cast<int>(((z % 7) + 11) % 7);  // 1970-01-01 was a Thursday
  z += 719468;
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const auto doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  c.day = static_cast<int>(doy - (153 * mp + 2) / 5 + 1);
  c.month = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
  c.year = static_cast<std::int64_t>(yoe) + era * 400 + (c.month <= 2);
  return c;
}

// A naive datetime as seconds (what timegm gives for these fields).
std::int64_t naive(int year, int month, int day, int hour, int minute, int second) {
  return days_from_civil(year, month, day) * 86400 + std::int64_t{hour} * 3600 + minute * 60 + second;
}

bool valid_date(int year, int month, int day) {
  static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (year < 1 || year > 9999 || month < 1 || month > 12 || day < 1) return false;
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  return day <= days[month - 1] + (month == 2 && leap ? 1 : 0);
}

struct Fields {
  std::optional<int> year, month, day, tz;
  // %j; %U or %W (week_monday: %W) with a weekday (%a, %A or %w; Monday 0).
  std::optional<int> julian, week, weekday;
  bool week_monday = false;
  int hour = 0, minute = 0, second = 0;
  bool bad = false;
};

// %a or %A: Monday 0 as Python's locale_time.a_weekday / f_weekday (C locale).
int weekday_index(std::string_view v, bool full) {
  static const char* const names[] = {"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"};
  return std::max(0, name_index(v, names, full));
}

// std::stoi of a field's text: its digits read here (the date regexes take digits, "%d" a
// leading space too, which stoi reads).
int field_number(std::string_view s) {
  if (s.empty() || s.size() > 9 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::stoi(std::string(s));
  int value = 0;
  for (const char c : s) value = value * 10 + (c - '0');
  return value;
}

// %I with %p: 12 am is 0 h, 1-11 pm are 13-23 h (no %p: am).
int twelve_hour(int hour, std::string_view ampm) {
  std::string p(ampm);
  for (char& c : p) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if ((p.empty() || p == "am") && hour == 12) return 0;
  if (p == "pm" && hour != 12) return hour + 12;
  return hour;
}

Fields read_fields(NamedGroupViews groups) {
  Fields f;
  const auto value = [&](std::string_view key) -> std::optional<std::string_view> {
    for (const auto& [k, v] : groups)
      if (k == key) return v;
    return std::nullopt;
  };
  for (const auto& [key, val] : groups) {
    if (!val || key.size() != 1) continue;
    const std::string_view v = *val;
    switch (key[0]) {
      case 'y': {
        const int y = field_number(v);
        f.year = y <= 2000 ? y + 2000 : y;
        break;
      }
      case 'Y': f.year = field_number(v); break;
      case 'm': f.month = field_number(v); break;
      case 'B':
      case 'b': f.month = month_index(v, key[0] == 'B'); break;
      case 'd': f.day = field_number(v); break;
      case 'H': f.hour = field_number(v); break;
      case 'I': f.hour = twelve_hour(field_number(v), value("p").value_or("")); break;
      case 'M': f.minute = field_number(v); break;
      case 'S': f.second = field_number(v); break;
      case 'A':
      case 'a': f.weekday = weekday_index(v, key[0] == 'A'); break;
      case 'w': f.weekday = field_number(v) == 0 ? 6 : field_number(v) - 1; break;
      case 'j': f.julian = field_number(v); break;
      case 'U':
      case 'W':
        f.week = field_number(v);
        f.week_monday = key[0] == 'W';
        break;
      case 'z':
      case 'Z':
        if (v == "Z" || v == "UTC" || v == "GMT") {
          f.tz = 0;
        } else {
          f.tz = zone_offset_minutes(std::string(v));
          if (!f.tz) f.bad = true;
        }
        break;
      default: break;
    }
  }
  return f;
}

}  // namespace

PatternParts expand_time_fields(const std::string& pattern) {
  PatternParts out;
  for (std::size_t i = 0; i < pattern.size();) {
    if (pattern[i] != '%') {
      out.regex += pattern[i];
      out.name += pattern[i++];
      continue;
    }
    const Field* hit = nullptr;
    for (const Field& f : fields()) {
      if (pattern.compare(i + 1, std::char_traits<char>::length(f.key), f.key) == 0) {
        hit = &f;
        break;
      }
    }
    if (hit == nullptr) throw std::invalid_argument("unknown field or unescaped percent char at " + pattern.substr(i));
    out.regex += std::string_view(hit->key) == "ExY" ? year_regex() : std::string(hit->regex);
    out.name += hit->name;
    i += 1 + std::char_traits<char>::length(hit->key);
  }
  return out;
}

namespace {

// A naive local time as UTC seconds: mktime() with the zone deciding DST. glibc's mktime
// re-reads /etc/localtime (a stat) at every call, under a lock, which was a fifth of a
// filter's time; no zone changes its offset inside a minute, so each minute's start is
// asked once and the seconds added. The minutes asked are kept per thread, in 512 sets of
// two by the minute's number (the older of a set's two replaced): a log's lines share their
// minutes, and every date reader of a gpufilterd with many filters dates the same lines on
// the same pool threads. One slot a minute's number let two minutes 256 apart evict each
// other at every turn: over the OpenSSH sample repeated (64 minutes) one line in 32 asked
// mktime.
double local_seconds(std::int64_t naive_seconds) {
  struct Minute {
    std::int64_t naive = -1;
    std::time_t utc = -1;
  };
  struct Set {
    std::array<Minute, 2> way;
    std::uint8_t older = 0;
  };
  thread_local std::array<Set, 512> known;
  const std::int64_t second = ((naive_seconds % 60) + 60) % 60;
  const std::int64_t minute = naive_seconds - second;
  Set& set = known[static_cast<std::size_t>(minute / 60) & 511];
  for (std::uint8_t w = 0; w < 2; ++w) {
    const Minute& m = set.way[w];
    if (m.utc != -1 && m.naive == minute) {
      set.older = static_cast<std::uint8_t>(1 - w);
      return static_cast<double>(m.utc + second);
    }
  }
  const Civil c = civil_from_seconds(minute);
  std::tm t{};
  t.tm_year = static_cast<int>(c.year - 1900);
  t.tm_mon = c.month - 1;
  t.tm_mday = c.day;
  t.tm_hour = c.hour;
  t.tm_min = c.minute;
  t.tm_isdst = -1;
  const std::time_t utc = locked_mktime(&t);
  if (utc == -1) {  // not representable: ask for the exact time, uncached
    t.tm_sec = static_cast<int>(second);
    return static_cast<double>(locked_mktime(&t));
  }
  set.way[set.older] = Minute{minute, utc};
  set.older = static_cast<std::uint8_t>(1 - set.older);
  return static_cast<double>(utc + second);
}

// Python's _strptime._calc_julian_from_U_or_W: the day of the year of a week's weekday.
int julian_of_week(int year, int week, int weekday, bool week_monday) {
  const std::time_t jan1 = static_cast<std::time_t>(naive(year, 1, 1, 0, 0, 0));
  int first_weekday = (civil_from_seconds(jan1).weekday + 6) % 7;  // Monday 0
  if (!week_monday) {
    first_weekday = (first_weekday + 1) % 7;
    weekday = (weekday + 1) % 7;
  }
  if (week == 0) return 1 + weekday - first_weekday;
  return 1 + (7 - first_weekday) % 7 + 7 * (week - 1) + weekday;
}

// A day of `year` (1: January 1st; past its end or before it, the years around) as its
// year, month and day, as datetime.fromordinal gives them; false outside years 1-9999.
bool date_of_julian(int& year, int& month, int& day, int julian) {
  const std::time_t at = static_cast<std::time_t>(naive(year, 1, 1, 0, 0, 0) + std::int64_t{julian - 1} * 86400);
  const Civil c = civil_from_seconds(at);
  if (c.year < 1 || c.year > 9999) return false;
  year = static_cast<int>(c.year);
  month = c.month;
  day = c.day;
  return true;
}

}  // namespace

std::optional<double> strptime_groups(NamedGroupViews groups, double now) {
  const Fields f = read_fields(groups);
  if (f.bad) return std::nullopt;
  // `now` is the same second for many lines in a row: localtime_r once per second.
  thread_local std::time_t cached_t = -1;
  thread_local std::tm cached{};
  const std::time_t now_t = static_cast<std::time_t>(now);
  if (now_t != cached_t) {
    locked_localtime(now_t, &cached);
    cached_t = now_t;
  }
  const std::tm local = cached;
  const std::int64_t now_naive =
      naive(local.tm_year + 1900, local.tm_mon + 1, local.tm_mday, local.tm_hour, local.tm_min, local.tm_sec);
  int year = f.year.value_or(local.tm_year + 1900);
  int month = f.month.value_or(0), day = f.day.value_or(0);
  bool assume_today = !f.month && !f.day;
  if (!f.month || !f.day) {
    std::optional<int> julian = f.julian;
    if (!julian && f.week && f.weekday) julian = julian_of_week(year, *f.week, *f.weekday, f.week_monday);
    if (julian) {
      if (!date_of_julian(year, month, day, *julian)) return std::nullopt;
      assume_today = false;
    }
  }
  if (assume_today) {
    month = local.tm_mon + 1;
    day = local.tm_mday;
  }
  if (!valid_date(year, month, day)) return std::nullopt;
  // datetime() refuses what the date regexes let through (second 60 and 61, %k's hours
  // past 23): fail2ban then has no date for the line, rather than the next minute or day.
  if (f.hour > 23 || f.minute > 59 || f.second > 59) return std::nullopt;
  std::int64_t result = naive(year, month, day, f.hour, f.minute, f.second);
  if (f.tz) result -= static_cast<std::int64_t>(*f.tz) * 60;
  if (assume_today && result > now_naive) result -= 86400;
  if (!f.year && result > now_naive + 86400) {
    // date_result.replace(year=year-1, month=month, day=day): the time of day stays shifted.
    if (!valid_date(year - 1, month, day)) return std::nullopt;
    const Civil t = civil_from_seconds(result);
    result = naive(year - 1, month, day, t.hour, t.minute, t.second);
  }
  if (f.tz) return static_cast<double>(result);
  return local_seconds(result);
}

}  // namespace gpufilter::fail2ban
