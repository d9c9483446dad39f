#include "patterns_mode.hpp"

#include <langinfo.h>

#include <algorithm>
#include <clocale>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string_view>

#include "gpufilter/core/utf8.hpp"
#include "gpufilter/core/workers.hpp"
#include "gpufilter/patterns/pattern_table.hpp"

namespace gpufilter::cli {
namespace {

// A fixed string as a BRE that matches exactly it.
std::string escaped(const std::string& literal) {
  std::string out;
  for (char c : literal) {
    if (std::strchr("\\[.*^$", c) != nullptr && c != '\0') out += '\\';
    out += c;
  }
  return out;
}

// Whether -i may fold a character of `pattern` beyond ASCII, as grep's
// fgrep_icase_available asks in the locale ('é', 'k'; not '😀', whose bytes grep's
// fixed-string matcher compares as they are).
bool may_fold_beyond_ascii(const std::string& pattern) {
  for (std::size_t i = 0; i < pattern.size();) {
    const std::size_t n = regex::fold_free_length(pattern, i);
    if (n == 0) return true;
    i += n;
  }
  return false;
}

// -F -w in a UTF-8 locale stays on the literal path where grep's fixed-string matcher
// (Fexecute) decides it: the Searcher reads multibyte word characters there
// (SearchOptions::utf8). Not for the empty pattern, a pattern that is not valid UTF-8
// (grep's regex matcher decides then), or one -G/-E pattern (EGexecute's -w walk).
bool fixed_matcher_words(const Options& o) {
  const auto& patterns = o.patterns.patterns();
  return !(o.fixed_from_regex && one_distinct_pattern(o)) &&
         std::none_of(patterns.begin(), patterns.end(), [](const std::string& p) { return p.empty() || !valid_utf8(p); });
}

// -F in a UTF-8 locale where bytes are not characters: -w must see multibyte letters as
// word characters (the Searcher does, fixed_matcher_words()), and -i must fold non-ASCII
// letters (and 'k', 's', which fold to U+212A and U+017F, and 'i', which folds to U+0131).
// The regex path does both, as grep does.
// In a capture (read in the C locale, main.cpp): a pattern may hold a newline byte (-X,
// --escapes), which a regex read line by line never sees, so such a set stays bytes; and the
// empty pattern under -w selects by grep's rule for lines (an empty match with no word
// character on either side), which the fixed path, knowing whole records and flows only,
// does not apply.
bool fixed_needs_characters(const Options& o, bool utf8) {
  const auto& patterns = o.patterns.patterns();
  if (std::any_of(patterns.begin(), patterns.end(), [](const std::string& p) { return p.find('\n') != std::string::npos; }))
    return false;
  const bool capture = o.captures();
  if (capture && o.word && !o.whole_line &&
      std::any_of(patterns.begin(), patterns.end(), [](const std::string& p) { return p.empty(); }))
    return true;
  if (!utf8) return false;
  if (o.word && !fixed_matcher_words(o)) return true;
  if (!o.ignore_case) return false;
  return std::any_of(patterns.begin(), patterns.end(), may_fold_beyond_ascii);
}

// Whether grep 3.8 searches these fixed strings (distinct) with its fixed-string matcher
// in a UTF-8 locale: -F does, unless a pattern is not valid UTF-8 or -i folds one of its
// characters beyond ASCII (grep.c: contains_encoding_error, fgrep_icase_available; a
// non-ASCII character under -i is taken as folding); -G and -E do for two or more, on the
// same conditions (try_fgrep_pattern).
bool grep_searches_fixed(regex::Syntax given, const std::vector<std::string>& fixed, bool ignore_case) {
  if (given != regex::Syntax::kFixed && fixed.size() < 2) return false;
  for (const std::string& f : fixed) {
    if (!valid_utf8(f)) return false;
    if (ignore_case && may_fold_beyond_ascii(f)) return false;
  }
  return true;
}

// "\a" under -i: where grep searches with its regex matcher (one distinct -G/-E pattern;
// see grep_searches_fixed()) it reads an escaped lowercase letter otherwise than the
// letter (no -o span: dfa_view.cpp), so such a list stays a regex, as written.
bool escape_read_otherwise(const std::vector<std::string>& patterns, regex::Syntax given,
                           const std::vector<std::string>& fixed, bool ignore_case) {
  if (!ignore_case || given == regex::Syntax::kFixed || grep_searches_fixed(given, fixed, ignore_case)) return false;
  return std::any_of(patterns.begin(), patterns.end(), [](const std::string& p) {
    for (std::size_t i = 0; i + 1 < p.size(); ++i) {
      if (p[i] != '\\') continue;
      if (p[i + 1] >= 'a' && p[i + 1] <= 'z') return true;
      ++i;  // the escaped byte
    }
    return false;
  });
}

// grep drops repeated patterns before it compiles them (so a bad one is reported once, and
// "-P -e x -e x" is one pattern); the first keeps its place and its origin.
std::vector<std::string> distinct(const Options& o, std::vector<regex::PatternOrigin>& origins) {
  std::vector<std::string> kept;
  for (std::size_t i : first_of_each(o.patterns.patterns())) {
    kept.push_back(o.patterns[i]);
    origins.push_back(i < o.origins.size() ? o.origins[i] : regex::PatternOrigin{});
  }
  return kept;
}

// Letters, digits, spaces and punctuation that no syntax (-G, -E) reads as anything but
// itself, alone or after any other of them: such a pattern compiles without error.
bool plain_bytes_only(const std::string& pattern) {
  return std::all_of(pattern.begin(), pattern.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && std::strchr(" _-:/,;=@#%&'\"!<>~", c) != nullptr);
  });
}

// The other case variants of fixed[i] for each i of `firsts`, in order, with the index of
// each; false where a pattern has none or a piece of the list more than eight a pattern.
// A million patterns are spelled out on every core, in pieces of 65,536 at least.
bool variants_in_pieces(const std::vector<std::string>& fixed, const std::vector<std::size_t>& firsts,
                        std::vector<std::string>& extra, std::vector<std::uint32_t>& extra_of) {
  struct Piece {
    std::vector<std::string> extra;
    std::vector<std::uint32_t> of;
    bool ok = true;
  };
  WorkerPool pool(WorkerPool::default_threads());  // its threads start only for a list of two pieces
  std::vector<Piece> done(pool.width());
  const regex::FoldedVariants variants;
  const std::size_t used = pool.split(firsts.size(), 65536, [&](std::size_t k, std::size_t begin, std::size_t end) {
    const std::size_t budget = 8 * (end - begin) + 1024;
    Piece& piece = done[k];
    for (std::size_t j = begin; j < end && piece.ok; ++j) {
      std::vector<std::string> each = variants.of(fixed[firsts[j]], budget - piece.extra.size() + 1);
      piece.ok = !each.empty();
      for (std::size_t v = 1; v < each.size(); ++v) {
        piece.extra.push_back(std::move(each[v]));
        piece.of.push_back(static_cast<std::uint32_t>(firsts[j]));
      }
    }
  });
  for (std::size_t k = 0; k < used; ++k) {
    if (!done[k].ok) return false;
    extra.insert(extra.end(), std::make_move_iterator(done[k].extra.begin()), std::make_move_iterator(done[k].extra.end()));
    extra_of.insert(extra_of.end(), done[k].of.begin(), done[k].of.end());
  }
  return true;
}

// -i in a UTF-8 locale folds 's' to U+017F, 'i' to U+0131 and 'é' to 'É' (dfa.c's
// case_folded_counterparts), so grep searches such fixed strings with its regex matcher.
// Without -w and -z that matcher finds exactly each string's case variants (with -x too,
// but for the -o/--color parts of a context line that is not whole: the Searcher's
// parts_without_whole_line, set for such a list). The literal path takes those (the engines
// fold ASCII themselves), each pattern's other variants after the patterns as given
// (Options::variant_of), for the first of those that fold alike ('S' and 's'). `fixed` is every given pattern as a fixed string. False, with nothing
// changed, where a pattern is empty or not valid UTF-8, or where the variants would be
// more than eight a pattern (a pattern's 2^n for n letters 's' and 'i'; variants_in_pieces()):
// grep's regex matcher is emulated then (RegexLines).
bool take_case_variants(Options& o, std::vector<std::string> fixed, bool utf8) {
  if (!utf8 || !o.ignore_case || o.word || o.null_data || o.captures()) return false;
  if (std::any_of(fixed.begin(), fixed.end(), [](const std::string& f) { return f.empty(); })) return false;
  std::vector<std::string> folded = fixed;
  for (std::string& f : folded)
    for (char& c : f) c = static_cast<char>(fold_byte(static_cast<unsigned char>(c), true));
  std::vector<std::string> extra;
  std::vector<std::uint32_t> extra_of;
  if (!variants_in_pieces(fixed, first_of_each(folded), extra, extra_of)) return false;
  PatternSet literals;
  for (const std::string& f : fixed) literals.add(f);
  for (const std::string& e : extra) literals.add(e);
  o.fixed_from_regex = o.syntax != regex::Syntax::kFixed;
  o.syntax = regex::Syntax::kFixed;
  o.patterns = std::move(literals);
  o.variant_of = std::move(extra_of);
  return true;
}

}  // namespace

bool one_distinct_pattern(const Options& o) {
  const std::vector<std::string>& given = o.patterns.patterns();
  return !given.empty() &&
         std::all_of(given.begin(), given.end(), [&](const std::string& p) { return p == given.front(); });
}

bool utf8_locale() {
  const char* codeset = ::nl_langinfo(CODESET);
  return MB_CUR_MAX > 1 && codeset != nullptr && std::strcmp(codeset, "UTF-8") == 0;
}

std::unique_ptr<RegexLines> regex_lines_for(Options& o, bool utf8,
                                            const std::function<void(const std::string&)>& warn) {
  regex::RegexOptions options;
  options.syntax = o.syntax;
  options.ignore_case = o.ignore_case;
  options.word = o.word;
  options.whole_line = o.whole_line;
  options.utf8 = utf8;
  options.null_data = o.null_data;
  // A test knob: GPUFILTER_REGEX_SELECT=eager builds the selection database at once.
  if (const char* knob = std::getenv("GPUFILTER_REGEX_SELECT"); knob != nullptr && std::strcmp(knob, "eager") == 0)
    options.defer_select = false;
  // Fixed strings that need no characters stay as given: the literal path (nothing to
  // rebuild; a million patterns are copied four times below otherwise).
  if (o.syntax == regex::Syntax::kFixed && !fixed_needs_characters(o, utf8)) return nullptr;
  if (o.syntax == regex::Syntax::kFixed && take_case_variants(o, o.patterns.patterns(), utf8)) return nullptr;
  std::vector<regex::PatternOrigin> origins;
  std::vector<std::string> patterns = distinct(o, origins);
  const regex::Syntax given_syntax = o.syntax;
  if (o.syntax != regex::Syntax::kPerl) {
    // One pattern stays with grep's regex matcher: its errors are regex's (none for one
    // made of plain bytes alone, the common `gpufilter WORD`).
    if (patterns.size() == 1 && o.syntax != regex::Syntax::kFixed && !plain_bytes_only(patterns[0]))
      regex::compile(patterns, options, origins);
    std::vector<std::string> fixed;
    if (regex::as_fixed_strings(patterns, o.syntax, o.ignore_case, utf8, fixed) &&
        !escape_read_otherwise(patterns, given_syntax, fixed, o.ignore_case)) {
      // The literal path keeps every pattern as given (--pattern-counts lists each).
      std::vector<std::string> all;
      regex::as_fixed_strings(o.patterns.patterns(), o.syntax, o.ignore_case, utf8, all);
      PatternSet literals;
      for (const std::string& f : all) literals.add(f);
      o.patterns = std::move(literals);
      o.fixed_from_regex = given_syntax != regex::Syntax::kFixed;
      o.syntax = regex::Syntax::kFixed;
      if (!fixed_needs_characters(o, utf8)) return nullptr;
      options.fixed_matcher = grep_searches_fixed(given_syntax, fixed, o.ignore_case);
      // Fexecute: -x wins over -w whole (no newline taken, no word rule).
      if (options.fixed_matcher && options.whole_line) options.word = false;
      patterns.clear();
      for (const std::string& f : fixed) patterns.push_back(escaped(f));
      options.syntax = regex::Syntax::kBasic;
    } else if (std::vector<std::string> plain;
               o.ignore_case && utf8 && regex::as_fixed_strings(patterns, o.syntax, false, utf8, plain) &&
               !escape_read_otherwise(patterns, given_syntax, plain, true)) {
      // Without operators but for -i's folding beyond ASCII: as -F -i (grep's regex matcher
      // either way), every given pattern as a fixed string.
      regex::as_fixed_strings(o.patterns.patterns(), o.syntax, false, utf8, plain);
      if (take_case_variants(o, std::move(plain), utf8)) return nullptr;
    }
  }
  auto compiled = regex::compile(patterns, options, origins);
  for (const std::string& w : regex::warnings(patterns, options.syntax)) warn(w);
  PatternSet kept;
  for (const std::string& p : patterns) kept.add(p);
  o.patterns = std::move(kept);  // the ids of --json are the regexes' indices
  o.origins = std::move(origins);
  return std::make_unique<RegexLines>(std::move(compiled), patterns, options.syntax, o.ignore_case, utf8);
}

}  // namespace gpufilter::cli
