// How far glibc's regex compiler would expand a POSIX pattern, estimated before it runs.
//
// glibc (GNU grep's matcher too) copies a repeated subexpression once per repetition: x+
// becomes x x*, x{m,n} n copies with the last n-m nested as options, and stacked or nested
// repetitions multiply: "m" and 38 '+' asked for 2^38 nodes and exhausted memory (grep -E
// 'm+++++++++++++++++++++++++' took 6.4 GB before it was stopped), "a{1,32767}" 7 GB, the
// nested options costing the square of their number. too_wide() walks the pattern once,
// as glibc parses it (groups, brackets, escapes, intervals), multiplies the sizes the
// same way, and names the pattern when the copies or the options' square pass limits no
// realistic pattern reaches (a{1,4000} and sixteen stacked '+' are taken), or when
// repetitions of what can match the empty string nest deeper than kMaxNullableRepeatDepth.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace gpufilter::regex {

inline constexpr double kMaxExpandedNodes = 1u << 17;     // copies of atoms in all
inline constexpr double kMaxNestedOptions = 1u << 24;     // the square of nested options, summed
// Repetitions nested over what can match the empty string ("(a*)++", "x***"): glibc's
// epsilon closures take exponential time in their depth, more with an anchor in the
// pattern and most with one inside the operand. Measured here: "(a*)" and 8 '+' 0.2 s,
// 10 '+' 4.5 s; "^()++++$" 0.08 s, "^()+++++" 78 s, "^()+*+++" past 10 s; "(^|$)*++"
// 0.15 s, "(^|$)*+++" more than ten minutes.
inline constexpr int kMaxNullableRepeatDepth = 8;
inline constexpr int kMaxNullableRepeatDepthAnchored = 4;      // an anchor in the pattern
inline constexpr int kMaxNullableRepeatDepthOverAnchors = 2;   // an anchor in the operand
// An operand of more copies than this that can match the empty string is not repeated
// again: "0*{3309}" alone compiles in 0.2 s, "0*{3309}+" ran past a minute.
inline constexpr double kMaxNullableOperandNodes = 1024;
// Nor one whose nested options (their square, as Level::options counts them) pass this,
// without a bound: "(0*){1,40}+" compiles in 0.2 s, "(0*){1,80}+" 2.4 s, "0*{,309}+"
// more than half a minute (grep 3.8: 9 s); "(a?){,1000}" and "(a?){,60}{2}" stay cheap.
inline constexpr double kMaxNullableOperandOptions = 8192;
// Nor copied so often that its nested options times the square of its copies pass this
// ("(0*){1,30}{20}": 3.4 s and 1.4 GB under -x; "(a?){,60}{2}" stays cheap).
inline constexpr double kMaxNullableCopiedOptions = 1u << 18;
inline constexpr double kMinCopiedOptions = 1024;  // below, copies alone count ("(a?){,1000}": 0.3 s)
// A repetition that can match the empty string is at most this many copies of atoms:
// "(a*){5000}" took 9 s and 2.4 GB, "(a*){10000}" 49 s and 9 GB (under -x, release
// build; glibc's epsilon closures grow with their square); "0*{3309}" 0.65 s and 275 MB.
inline constexpr double kMaxNullableNodes = 4096;
// Copies of what can itself match the empty string, at most this many atoms: under -x
// "(a?){,1000}" took 60 s and 5.4 GB, "((a?){,10}){100}" 11 s and 6.3 GB.
inline constexpr double kMaxNullableCopiesNodes = 1024;
// ...and their nested options (their square, as counted) at most this: "(a?){,340}" took
// 3.5 s, "(x?y?z?){,100}" 0.3 s.
inline constexpr double kMaxNullableCopiesOptions = 1u << 17;
// Loops over groups that can match the empty string ("()*", "(a*)+"), one after another
// behind an anchor with nothing between that must match a character: glibc duplicates the
// anchor's constraint along every path through them, in time exponential in their number.
// Measured here (release): "^()*{16}" 0.27 s, "^()*{16,}" 0.82 s, "^()*{20,}" 14 s and
// more than a minute at 40 (regex_fuzz found it under -x, whose wrapper adds the '^');
// grep 3.8 the same ("^()*{16,}" 0.19 s). Without the anchor they cost nothing.
inline constexpr double kMaxAnchoredNullableLoops = 16;
// Copies of an optional group that can match the empty string before a loop over it
// ("()?{14,}": 0.06 s in glibc's compile, doubling with each copy).
inline constexpr double kMaxCopiesOfOptionalEmpty = 14;
// The same copies, bounded, in a pattern that holds an anchor ("^()?{100}": 0.2 s).
inline constexpr double kMaxAnchoredCopiesOfOptionalEmpty = 100;
// A loop over copies of optional copies of what can match empty: the log of the ways to
// expand them ("0*{,9}{5}*", 5 log 10: 0.9 s; "0*{,2}{20}*", 20 log 3, past minutes).
inline constexpr double kMaxLogWaysUnderLoop = 12;

// The pattern with each run of stacked repetition operators after an operand made one:
// "x++" is "x+", "x??" "x?", any other mix of '*', '+' and '?' "x*" (in a BRE '*', "\+"
// and "\?"). The language is the same, and so is every leftmost-longest match; glibc
// copies the operand once per operator, so "m++/+++++)" and a dozen more '+' took seconds
// (grep 3.8 too) where the collapsed text takes microseconds. Only for patterns without
// back-references, whose groups' registers no one reads. Conservative: a run after an
// anchor, an interval or the start of a group is kept as written.
// With `after_backrefs_only` (a pattern with back-references) only the runs after a
// back-reference, which sets no register: "\\1++" took grep 3.8 and glibc 6 s and 800 MB
// on an empty line when the group can match empty ("(|ba)\\1++", fuzzed).
std::string collapse_repeats(std::string_view pattern, bool extended, bool after_backrefs_only = false);

// nullopt, or why the pattern is refused. `extended`: ERE (-E), else BRE (-G).
std::optional<std::string> too_wide(std::string_view pattern, bool extended);

}  // namespace gpufilter::regex
