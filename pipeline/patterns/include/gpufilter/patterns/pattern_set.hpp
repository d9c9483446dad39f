// PatternSet: the literals given with -e, -f or as the PATTERNS operand, in the order
// given, split on newlines the way grep splits them.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace gpufilter {

// The index of the first of each distinct pattern, in the order given (a flat hash set:
// a million patterns in a fraction of the time of a std::set or std::unordered_set).
std::vector<std::size_t> first_of_each(const std::vector<std::string>& patterns);

// How many distinct patterns there are: first_of_each().size(), a large list counted on
// every core (one table whose slots the threads claim by compare-and-swap).
std::size_t distinct_count(const std::vector<std::string>& patterns);

class PatternSet {
 public:
  // Adds one -e argument or PATTERNS operand: newline-separated patterns
  // ("a\nb" is two patterns; "" is one empty pattern, which matches every line).
  void add_list(std::string_view text);

  // Adds the contents of one -f file: one pattern per line; an empty file adds none;
  // "\n" adds one empty pattern; NUL bytes are ordinary pattern bytes.
  void add_file_contents(std::string_view contents);

  // Adds exactly one pattern (must not contain '\n').
  void add(std::string_view pattern);

  std::size_t size() const noexcept { return patterns_.size(); }
  bool empty() const noexcept { return patterns_.empty(); }
  const std::string& operator[](std::size_t i) const { return patterns_[i]; }
  const std::vector<std::string>& patterns() const noexcept { return patterns_; }

  bool has_empty_pattern() const noexcept { return has_empty_; }
  std::size_t max_length() const noexcept { return max_length_; }

 private:
  std::vector<std::string> patterns_;
  bool has_empty_ = false;
  std::size_t max_length_ = 0;
};

}  // namespace gpufilter
