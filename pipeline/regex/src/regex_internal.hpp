// What the GNU and Perl matchers share inside gpufilter::regex.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpufilter/regex/line_regex.hpp"

namespace gpufilter::regex {

std::unique_ptr<LineRegex> compile_gnu(const std::vector<std::string>& patterns, const RegexOptions& options,
                                       const std::vector<PatternOrigin>& origins);
std::unique_ptr<LineRegex> compile_perl(const std::vector<std::string>& patterns, const RegexOptions& options);

// "FILE:LINE: message" for a pattern read with -f, else the message.
std::string with_origin(const std::vector<PatternOrigin>& origins, std::size_t index, const char* message);

// What grep's DFA parser says of a -G/-E pattern that glibc's regex accepted: the one
// error it adds ("character class syntax is [[:space:]], not [:space:]"), or nothing.
std::optional<std::string> dfa_only_error(std::string_view pattern, Syntax syntax);

// grep's word constituents around a position (searchutils.c, wordchar_prev/next): in a
// UTF-8 locale a multibyte letter or digit counts; in the C locale ASCII alnum and '_'.
bool word_before(std::string_view line, std::size_t at, bool utf8);
bool word_after(std::string_view line, std::size_t at, bool utf8);

}  // namespace gpufilter::regex
