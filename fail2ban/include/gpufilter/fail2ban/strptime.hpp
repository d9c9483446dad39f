// fail2ban's strptime (server/strptime.py): the %-fields of a date pattern as regular
// expressions (Python's _strptime.TimeRE in the C locale with fail2ban's changes and its
// Ex* fields), and the time those fields give, with the year, the day and the time zone
// assumed as fail2ban assumes them.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace gpufilter::fail2ban {

struct PatternParts {
  std::string regex;  // the pattern with each %-field replaced by its group
  std::string name;   // fail2ban's template name (fields named: "Day", "MON", ...)
};
// Throws std::invalid_argument on an unknown %-field (fail2ban: "unescaped percent char").
PatternParts expand_time_fields(const std::string& pattern);

// A date match's named groups in name order, as PyRegex::group_views() gives them.
using NamedGroupViews = std::span<const std::pair<std::string_view, std::optional<std::string_view>>>;

// reGroupDictStrptime(): UTC seconds from the named groups of a date match; `now` is
// MyTime.time(). Naive times are local (the process's TZ). nullopt where Python raises
// ValueError (no such day, an unknown zone form).
std::optional<double> strptime_groups(NamedGroupViews groups, double now);

}  // namespace gpufilter::fail2ban
