// CaptureRegex: one regular expression whose named groups give values from the line it
// matched, for rules that take something out of a log line (gpufilterd's group_by, its
// labels and annotations, the event time). Perl syntax goes through PCRE2 and names its
// groups (?P<name>...) or (?<name>...); basic and extended syntax are grep's (LineRegex)
// and have no names. Not thread-safe: one per thread.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gpufilter/regex/line_regex.hpp"
#include "gpufilter/regex/syntax.hpp"

namespace gpufilter::regex {

// fail2ban's <HOST>: an IPv4 address (also as ::ffff:a.b.c.d) or an IPv6 address, as the
// named group "host". Perl syntax.
inline constexpr std::string_view kHostTag = "<HOST>";
std::string host_group();
// `pattern` with every <HOST> replaced by host_group() (a second one is a duplicate name,
// which PCRE2 refuses).
std::string with_host_tags(std::string_view pattern);

class CaptureRegex {
 public:
  // Throws RegexError (PCRE2's or grep's message). `word`: grep's -w for the syntax.
  CaptureRegex(const std::string& pattern, Syntax syntax, bool ignore_case, bool word);
  ~CaptureRegex();
  CaptureRegex(const CaptureRegex&) = delete;
  CaptureRegex& operator=(const CaptureRegex&) = delete;

  // The named groups, in the order of their numbers.
  const std::vector<std::string>& names() const noexcept { return names_; }
  // Does it match `line` (no '\n' in it)? With `values`, one per names() entry: what the
  // group took in the leftmost match (empty when it took no part).
  bool match(std::string_view line, std::vector<std::string>* values);

 private:
  struct Perl;
  std::unique_ptr<Perl> perl_;         // perl syntax
  std::unique_ptr<LineRegex> grep_;    // basic and extended
  std::vector<std::string> names_;
};

}  // namespace gpufilter::regex
