// Python `re` patterns run through PCRE2. fail2ban's filters and date templates are
// written for Python 3.11's `re`; translate_python_regex() rewrites the constructs whose
// meaning differs in PCRE2 and throws (std::invalid_argument, with the reason) on those
// that have no exact PCRE2 form. PyRegex is one compiled pattern, searched as Python's
// Pattern.search(string, pos, endpos) is, by any number of threads at once (the match
// data is each thread's).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpufilter::fail2ban {

// Python syntax -> PCRE2 syntax (same matches on valid UTF-8 with PCRE2_UTF|PCRE2_UCP).
std::string translate_python_regex(std::string_view pattern);

class PyRegex {
 public:
  struct Span {
    std::ptrdiff_t start = -1, end = -1;  // -1: the group did not take part
    bool set() const { return start >= 0; }
  };
  // The last search's result: group 0 and every numbered group, over `subject`.
  struct Match {
    std::string_view subject;
    std::vector<Span> groups;
    bool ok = false;
    explicit operator bool() const { return ok; }
    std::size_t start(std::size_t g = 0) const { return static_cast<std::size_t>(groups[g].start); }
    std::size_t end(std::size_t g = 0) const { return static_cast<std::size_t>(groups[g].end); }
    std::optional<std::string> group(std::size_t g) const;
  };

  // Throws std::invalid_argument with PCRE2's or the translator's reason.
  explicit PyRegex(std::string_view python_pattern, bool multiline = false);
  PyRegex(PyRegex&&) noexcept;
  PyRegex& operator=(PyRegex&&) noexcept;
  ~PyRegex();

  // Pattern.search(subject, pos, endpos): the subject ends at endpos, lookbehind sees
  // before pos and `^` does not match at pos unless pos is 0 (or after a newline with
  // MULTILINE).
  Match search(std::string_view subject, std::size_t pos = 0, std::size_t endpos = std::string_view::npos) const;
  // The same into `m`, its memory reused (a filter searches a few dozen times a line).
  bool search(Match& m, std::string_view subject, std::size_t pos = 0,
              std::size_t endpos = std::string_view::npos) const;

  // Searches that PCRE2 stopped at its limits even when raised (match steps, heap), in
  // this process: each answered "not found". Python's re has no limit; those lines may
  // differ from fail2ban's answer, so a front end says how many there were.
  static std::uint64_t limit_failures() noexcept;

  const std::string& pattern() const { return pattern_; }
  // Named groups: name -> group number (Python's groupindex).
  const std::map<std::string, std::size_t>& names() const { return names_; }
  bool has_group(const std::string& name) const { return names_.count(name) != 0; }
  // groupdict() in name order, without a copy: views of the names and of m.subject, unset
  // groups as nullopt.
  using GroupViews = std::vector<std::pair<std::string_view, std::optional<std::string_view>>>;
  void group_views(const Match& m, GroupViews& out) const;
  std::optional<std::string> group(const Match& m, const std::string& name) const;

 private:
  struct Code;
  std::unique_ptr<Code> code_;
  std::string pattern_;
  std::map<std::string, std::size_t> names_;
  std::vector<std::pair<std::string_view, std::size_t>> ordered_;  // names_ as a list, for group_views()
};

// re.sub(pattern, fn, text, count): fn builds each replacement from the match.
std::string py_sub(const PyRegex& re, std::string_view text,
                   const std::function<std::string(const PyRegex::Match&)>& fn, std::size_t count = 0);

// Whether `text` is valid UTF-8; and `text` with each invalid sequence replaced by U+FFFD
// as Python's bytes.decode("utf-8", "replace") does (one per maximal invalid subpart).
bool valid_utf8(std::string_view text);
std::string utf8_replaced(std::string_view text);

}  // namespace gpufilter::fail2ban
