// fail2ban's date detection (server/datedetector.py, datetemplate.py): the default
// templates in their order (each also anchored at the line's start, tried first), the
// `datepattern` forms ({^LN-BEG}, {DEFAULT}, {DATE}, {NONE}, {UNB}, EPOCH, LEPOCH, TAI64N,
// %-patterns), and the detector's habit of trying the last template that matched first
// and moving templates that match often up the list.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpufilter/fail2ban/pyregex.hpp"

namespace gpufilter::fail2ban {

struct DateTemplate;

// The wall clock, seconds since the epoch (MyTime.time() when no time is set).
double wall_clock_now() noexcept;

class DateDetector {
 public:
  DateDetector();
  DateDetector(DateDetector&&) noexcept;
  DateDetector& operator=(DateDetector&&) noexcept;
  ~DateDetector();

  // DateDetector.appendTemplate(pattern) for one line of a `datepattern` value. Throws
  // std::invalid_argument on a bad pattern or a duplicate template.
  void append(const std::string& pattern);
  // What a line's date is: the span cut out of the line (group 1 of the template) and the
  // time, UTC seconds (nullopt where the text does not give a valid time).
  struct Found {
    std::size_t start = 0, end = 0;
    std::optional<double> time;
  };
  // matchTime + getTime; `now` is MyTime.time() (the year and the day are assumed from it).
  std::optional<Found> find(std::string_view line, double now);

 private:
  struct Entry;
  void add_defaults(int filter_flags, const std::string* pre_match);
  void add(std::shared_ptr<DateTemplate> t, bool ignore_duplicate);
  std::size_t reorder(std::size_t num);
  std::size_t remember(std::size_t i, std::string_view line, std::size_t distance, std::size_t endpos);
  std::vector<Entry> templates_;
  std::size_t last_index_ = SIZE_MAX;
  std::size_t first_unused_ = 0;
  std::size_t last_pos_ = 1, last_end_ = SIZE_MAX;
  std::string last_pos_before_, last_pos_at_, last_end_before_, last_end_at_;
  PyRegex::Match match_;  // find()'s, its memory reused from line to line
};

}  // namespace gpufilter::fail2ban
