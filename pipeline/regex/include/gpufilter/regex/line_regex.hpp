// LineRegex: one run's regular expressions, matched one line at a time exactly as GNU
// grep 3.8 matches them. -G and -E go through glibc's GNU regex API with grep's syntax
// bits (the same regex code grep itself uses), -P through PCRE2 with grep's options; the
// -w, -x and -o/--color rules follow grep's dfasearch.c (EGexecute) and pcresearch.c
// (Pexecute), quirks included, so every answer is grep's.
//
// It knows nothing of chunks, factors or engines: the caller decides which lines and which
// patterns are worth asking about (regex/factors.hpp finds the literals that make a line a
// candidate). Not thread-safe: one per thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpufilter/core/errors.hpp"
#include "gpufilter/regex/syntax.hpp"

namespace gpufilter::regex {

struct RegexOptions {
  Syntax syntax = Syntax::kBasic;  // kBasic, kExtended or kPerl
  bool ignore_case = false;        // -i
  bool word = false;               // -w
  bool whole_line = false;         // -x (wins over -w)
  bool utf8 = false;               // the locale's character set is UTF-8 (else bytes)
  // -z: a line (record) ends in NUL and may hold '\n', an ordinary character then: '^'
  // and '$' match at the record's ends only, and '.' and [^...] match '\n'.
  bool null_data = false;
  // -G/-E: the Hyperscan database that confirms lines for many patterns at once is built
  // once glibc's confirmations have cost about what building it would (a millisecond an
  // expression), not before the first line: a small input or rare matches never pay for
  // it. false: built at once (tests, to keep both paths in use on small inputs).
  bool defer_select = true;
  // -G/-E/-F patterns that are fixed strings which grep itself searches with its
  // fixed-string matcher (kwsearch.c's Fexecute: -F, or two or more such patterns), here
  // through glibc because a UTF-8 -w or -i needs characters. Its -w walk differs from the
  // regex matcher's: a shorter match at the same place may be the empty pattern's, and
  // the -o walk does not look at the byte before where a search starts.
  bool fixed_matcher = false;
};

// Where a pattern came from, for grep's "FILE:LINE: " before a compile error of a pattern
// read with -f (empty file: -e or the PATTERNS operand, no prefix).
struct PatternOrigin {
  std::shared_ptr<const std::string> file;  // one copy for a file's patterns (a million, with -f)
  std::size_t line = 0;
};

// Patterns that do not compile: one message per bad pattern, as grep prints them (after
// "gpufilter: "), in the order given. grep reports them all, then exits 2.
class RegexError : public Error {
 public:
  explicit RegexError(std::vector<std::string> messages);
  const std::vector<std::string>& messages() const noexcept { return messages_; }

 private:
  std::vector<std::string> messages_;
};

// A match in a line: line[begin, begin + length). `newline`: grep's match takes the line's
// '\n' as well (only -x -w with -G/-E), so -o prints it and --color colours it.
struct Found {
  std::size_t begin = 0;
  std::size_t length = 0;
  bool newline = false;
};

class LineRegex {
 public:
  virtual ~LineRegex() = default;
  // The patterns, in the order given (duplicates are kept: ids stay the caller's).
  virtual std::size_t size() const noexcept = 0;
  // Does pattern `i` select `line` (no '\n' in it), under -w and -x as grep decides it?
  virtual bool selects(std::size_t i, std::string_view line) = 0;
  // Does one of the patterns `candidates` (ascending) select `line`? With `ids`, every
  // candidate that does is added to it, ascending; without, the first one answers.
  virtual bool selects_any(std::string_view line, std::span<const std::uint32_t> candidates,
                           std::vector<std::uint32_t>* ids) {
    bool any = false;
    for (std::uint32_t i : candidates) {
      if (!selects(i, line)) continue;
      any = true;
      if (ids == nullptr) return true;
      ids->push_back(i);
    }
    return any;
  }
  // grep's next match for -o and --color: the leftmost, then longest, match over all
  // patterns that starts at or after `from`, judged as grep's matcher judges it when it
  // is asked for a match from `from` on (-w included). `only`: the patterns worth trying
  // (the others cannot match this line); empty span: all.
  virtual bool find(std::string_view line, std::size_t from, std::span<const std::uint32_t> only, Found& out) = 0;
  // selects() reads the whole list at once, not one pattern (an ERE ')' that closes nothing
  // closes grep's -w/-x wrapper around the list): ask it of every line, any `i`.
  virtual bool whole_list() const noexcept { return false; }
  // The caller will often ask about exactly these patterns (ascending; those it asks about
  // every line): an implementation may prepare a faster way to answer for them alone.
  virtual void expect_candidates(std::span<const std::uint32_t> ids) { (void)ids; }
  // Before anything is asked: how many patterns have no factor (every line is a candidate
  // for those); the others are asked only about lines that hold one of their factors.
  virtual void factors_known(std::size_t without_factor) { (void)without_factor; }
  // Many whole lines at once (a piece cut at '\n'; its end is a line's end), asked about
  // every pattern. prepare_lines() makes it ready, on the thread that owns this object and
  // before the copies that are to share it are made; false: this regex cannot (then
  // select_lines() is never asked). select_lines() appends the first byte of each line
  // some pattern selects, ascending, and to `line_ends` its end (its '\n', or the piece's
  // end), or returns false for this piece (ask line by line) and appends nothing.
  virtual bool prepare_lines() { return false; }
  virtual bool select_lines(std::string_view piece, std::vector<const char*>& line_starts,
                            std::vector<const char*>& line_ends) {
    (void)piece;
    (void)line_starts;
    (void)line_ends;
    return false;
  }
  // A copy for another thread.
  virtual std::unique_ptr<LineRegex> clone() const = 0;
};

// Compiles `patterns` (one per element, none holding '\n') as grep would. Throws
// RegexError with grep's messages when some do not compile; `origins` (same size as
// `patterns`, or empty) names the -f file and line of each.
std::unique_ptr<LineRegex> compile(const std::vector<std::string>& patterns, const RegexOptions& options,
                                   const std::vector<PatternOrigin>& origins = {});

// grep's rule for turning -G/-E patterns into fixed strings (grep.c, try_fgrep_pattern):
// with two or more distinct patterns, when none uses any operator, grep matches them as
// -F would. With one, grep keeps its regex matcher, which for a pattern without operators
// matches as -F does once the pattern compiles (the caller compiles it first). Fills
// `fixed` and returns true, or false when some pattern is a real regex.
// `ignore_case` with `utf8`: a pattern with a character -i folds beyond ASCII stays a
// regex (its case variants are other bytes; fold_free_length()).
bool as_fixed_strings(const std::vector<std::string>& patterns, Syntax syntax, bool ignore_case, bool utf8,
                      std::vector<std::string>& fixed);

// grep's fgrep_icase_charlen in a UTF-8 locale (the current one): the length of the
// character at text[at] when -i folds it within ASCII or not at all ('a', 'k', '-', '😀',
// U+212A), 0 when dfa.c's case_folded_counterparts gives it one of other bytes ('é'; 's'
// and 'i', whose counterparts include U+017F and U+0131) or it is not a whole valid character.
std::size_t fold_free_length(std::string_view text, std::size_t at);

// Under -i in a UTF-8 locale (the current one when made), the byte strings grep's regex
// matcher finds for a fixed string, for a search that folds ASCII letters itself: each
// character's case_folded_counterparts beyond ASCII spelled out ('s' gives U+017F, 'i'
// U+0131, 'é' 'É').
class FoldedVariants {
 public:
  FoldedVariants();
  // `text` itself first. Empty where a character is not whole and valid, where an ASCII
  // letter's other case is not among its counterparts (the search's folding would then
  // find too much), or where there would be more than `limit` strings.
  std::vector<std::string> of(std::string_view text, std::size_t limit) const;

 private:
  std::vector<std::vector<std::string>> ascii_;  // by ASCII byte, its strings
};

// GNU grep's test for a pattern that may hold a back-reference (dfasearch.c).
bool possible_backrefs(std::string_view pattern);

// grep's word constituents around a position (searchutils.c, wordchar_prev/next): in a
// UTF-8 locale a multibyte letter or digit counts (an encoding error does not); in the C
// locale ASCII alnum and '_'. word_chars_from(): how many bytes of word characters begin
// at `at` (wordchars_size), which grep's fixed-string -w skips after a failed match.
bool word_before(std::string_view line, std::size_t at, bool utf8);
bool word_after(std::string_view line, std::size_t at, bool utf8);
std::size_t word_chars_from(std::string_view line, std::size_t at, bool utf8);

}  // namespace gpufilter::regex

namespace gpufilter::regex {
// grep 3.8's warnings for -G/-E patterns that compiled ("warning: * at start of
// expression"), in order, for the front end to print before it searches.
std::vector<std::string> warnings(const std::vector<std::string>& patterns, Syntax syntax);
}  // namespace gpufilter::regex
