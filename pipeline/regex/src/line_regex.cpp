// compile(), the fixed-string rule, grep's diagnostics and word characters.
#include "gpufilter/regex/line_regex.hpp"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cwchar>
#include <cwctype>
#include <iterator>

#include "regex_internal.hpp"

namespace gpufilter::regex {
namespace {

std::string first_message(const std::vector<std::string>& messages) {
  return messages.empty() ? std::string("invalid regular expression") : messages.front();
}

bool ascii_word(unsigned char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// The wide character at line[at, ...), or WEOF for an encoding error.
wint_t decode(std::string_view line, std::size_t at, std::size_t& length) {
  std::mbstate_t state{};
  wchar_t wc = 0;
  const std::size_t n = std::mbrtowc(&wc, line.data() + at, line.size() - at, &state);
  if (n == static_cast<std::size_t>(-1) || n == static_cast<std::size_t>(-2)) {
    length = 1;
    return WEOF;
  }
  length = n == 0 ? 1 : n;
  return static_cast<wint_t>(wc);
}

bool wide_word(wint_t wc) { return wc != WEOF && (wc == L'_' || std::iswalnum(wc)); }

}  // namespace

RegexError::RegexError(std::vector<std::string> messages)
    : Error(first_message(messages)), messages_(std::move(messages)) {}

std::unique_ptr<LineRegex> compile(const std::vector<std::string>& patterns, const RegexOptions& options,
                                   const std::vector<PatternOrigin>& origins) {
  if (options.syntax == Syntax::kPerl) return compile_perl(patterns, options);
  return compile_gnu(patterns, options, origins);
}

std::string with_origin(const std::vector<PatternOrigin>& origins, std::size_t index, const char* message) {
  if (index < origins.size() && origins[index].file && !origins[index].file->empty())
    return *origins[index].file + ":" + std::to_string(origins[index].line) + ": " + message;
  return message;
}

bool possible_backrefs(std::string_view p) {
  if (p.empty()) return false;
  const std::size_t last = p.size() - 1;  // a backslash in the last byte starts nothing
  for (std::size_t i = 0; i < last; ++i) {
    if (p[i] != '\\') continue;
    if (p[i + 1] >= '1' && p[i + 1] <= '9') return true;
    if (p[i + 1] == '\\') ++i;
  }
  return false;
}

namespace {

// gnulib's lonesome_lower as grep 3.8 has it (localeinfo.c): characters whose upper case
// lowers to another character, counted among the counterparts of that upper case.
constexpr wint_t kLonesomeLower[] = {0x00B5, 0x0131, 0x017F, 0x01C5, 0x01C8, 0x01CB, 0x01F2,
                                     0x0345, 0x03C2, 0x03D0, 0x03D1, 0x03D5, 0x03D6, 0x03F0,
                                     0x03F1, 0x03F2, 0x03F5, 0x1E9B, 0x1FBE};

// dfa.c's case_folded_counterparts(c) in the current locale (case_variants()).
std::vector<wint_t> case_folded_counterparts(wint_t c) {
  std::vector<wint_t> folded;
  const wint_t uc = std::towupper(c);
  const wint_t lc = std::towlower(uc);
  if (uc != c) folded.push_back(uc);
  if (lc != uc && lc != c && std::towupper(lc) == uc) folded.push_back(lc);
  for (const wint_t li : kLonesomeLower)
    if (li != lc && li != uc && li != c && std::towupper(li) == uc) folded.push_back(li);
  return folded;
}

}  // namespace

std::optional<std::vector<std::string>> case_variants(std::string_view text, std::size_t at, std::size_t& length) {
  length = 0;
  if (MB_CUR_MAX == 1) return std::nullopt;
  std::mbstate_t state{};
  wchar_t wc = 0;
  const std::size_t n = std::mbrtowc(&wc, text.data() + at, text.size() - at, &state);
  if (n == 0 || n > text.size() - at) return std::vector<std::string>();  // invalid or cut short
  std::vector<std::string> variants{std::string(text.substr(at, n))};
  for (const wint_t f : case_folded_counterparts(static_cast<wint_t>(wc))) {
    char character[MB_LEN_MAX];
    std::mbstate_t out{};
    const std::size_t m = std::wcrtomb(character, static_cast<wchar_t>(f), &out);
    if (m == static_cast<std::size_t>(-1)) return std::nullopt;
    variants.emplace_back(character, m);
  }
  length = n;
  return variants;
}

std::size_t fold_free_length(std::string_view text, std::size_t at) {
  const auto b = static_cast<unsigned char>(text[at]);
  if (b < 0x80) return folds_beyond_ascii(b) ? 0 : 1;
  std::mbstate_t state{};
  wchar_t wc = 0;
  const std::size_t n = std::mbrtowc(&wc, text.data() + at, text.size() - at, &state);
  if (n == 0 || n > text.size() - at) return 0;  // invalid or cut short
  return case_folded_counterparts(static_cast<wint_t>(wc)).empty() ? n : 0;
}

namespace {

bool ascii_letter(char c) noexcept { return ascii_lower(c) >= 'a' && ascii_lower(c) <= 'z'; }

// A character's strings for FoldedVariants::of(): itself first, then its counterparts
// but those the ASCII folding finds already. Empty where it has none.
std::vector<std::string> unfolded_alternatives(std::string_view text, std::size_t at, std::size_t& length) {
  const std::optional<std::vector<std::string>> variants = case_variants(text, at, length);
  if (!variants || variants->empty()) return {};
  std::vector<std::string> kept;
  for (const std::string& v : *variants) {
    const bool folded_twin = v.size() == 1 && ascii_letter(v[0]) && std::any_of(kept.begin(), kept.end(), [&](const std::string& k) {
                               return k.size() == 1 && ascii_lower(k[0]) == ascii_lower(v[0]);
                             });
    if (!folded_twin) kept.push_back(v);
  }
  // The search folds an ASCII letter to its other case: the locale must too.
  const char c = text[at];
  if (length == 1 && ascii_letter(c)) {
    const char other = ascii_lower(c) == c ? static_cast<char>(c - 'a' + 'A') : ascii_lower(c);
    if (std::none_of(variants->begin(), variants->end(), [&](const std::string& v) { return v.size() == 1 && v[0] == other; }))
      return {};
  }
  return kept;
}

}  // namespace

FoldedVariants::FoldedVariants() : ascii_(128) {
  for (int b = 1; b < 128; ++b) {
    const char c = static_cast<char>(b);
    std::size_t length = 0;
    ascii_[b] = unfolded_alternatives(std::string_view(&c, 1), 0, length);
  }
}

std::vector<std::string> FoldedVariants::of(std::string_view text, std::size_t limit) const {
  std::vector<std::string> out{std::string()};
  std::vector<std::string> grown;
  std::vector<std::string> alternatives;
  for (std::size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    std::size_t length = 1;
    const std::vector<std::string>& each =
        b != 0 && b < 128 ? ascii_[b] : (alternatives = unfolded_alternatives(text, i, length));
    if (each.empty() || out.size() * each.size() > limit) return {};
    if (each.size() == 1) {
      for (std::string& o : out) o += each.front();
    } else {
      grown.clear();
      for (const std::string& o : out)
        for (const std::string& a : each) grown.push_back(o + a);
      out.swap(grown);
    }
    i += length;
  }
  return out;
}

// grep.c, try_fgrep_pattern: which bytes make a pattern a regex, and which escapes are
// only the character escaped.
bool as_fixed_strings(const std::vector<std::string>& patterns, Syntax syntax, bool ignore_case, bool utf8,
                      std::vector<std::string>& fixed) {
  if (syntax == Syntax::kPerl) return false;
  if (syntax == Syntax::kFixed) {
    fixed = patterns;
    return true;
  }
  const bool basic = syntax == Syntax::kBasic;
  std::vector<std::string> out;
  out.reserve(patterns.size());
  for (const std::string& p : patterns) {
    std::string s;
    for (std::size_t i = 0; i < p.size(); ++i) {
      unsigned char c = static_cast<unsigned char>(p[i]);
      switch (c) {
        case '$': case '*': case '.': case '[': case '^': return false;
        case '(': case '+': case '?': case '{': case '|':
          if (!basic) return false;
          break;
        case '\\': {
          if (i + 1 >= p.size()) {
            // grep's pattern list ends without a '\n': a backslash that ends the last of
            // several patterns is a literal one; elsewhere a '\n' follows and it fails over.
            if (&p != &patterns.back() || patterns.size() < 2) return false;
            s += '\\';
            continue;
          }
          const char n = p[i + 1];
          if (std::string_view("BSW'<bsw`>123456789").find(n) != std::string_view::npos) return false;
          // BRE's "\)" too: grep passes it on to be refused ("Unmatched ) or \)").
          if (basic && std::string_view("(+?{|)").find(n) != std::string_view::npos) return false;
          c = static_cast<unsigned char>(p[++i]);
          break;
        }
        default: break;
      }
      // In a UTF-8 locale -i folds letters whose variants are other bytes (and 'k', 's',
      // 'i' beyond ASCII): those stay with the regex matcher.
      if (ignore_case && utf8) {
        const std::size_t n = fold_free_length(p, i);
        if (n == 0) return false;
        s.append(p, i, n);
        i += n - 1;
        continue;
      }
      s += static_cast<char>(c);
    }
    out.push_back(std::move(s));
  }
  fixed = std::move(out);
  return true;
}

bool word_after(std::string_view line, std::size_t at, bool utf8) {
  if (at >= line.size()) return false;
  const unsigned char c = static_cast<unsigned char>(line[at]);
  if (!utf8 || c < 0x80) return ascii_word(c);
  std::size_t length = 0;
  return wide_word(decode(line, at, length));
}

bool word_before(std::string_view line, std::size_t at, bool utf8) {
  if (at == 0 || at > line.size()) return false;
  const unsigned char c = static_cast<unsigned char>(line[at - 1]);
  if (!utf8 || c < 0x80) return ascii_word(c);
  // The character that holds byte at - 1, found as grep's mb_goback finds it: decoding
  // forward from a known boundary. That decoding passes over continuation bytes (0x80-0xbf)
  // alone (a character takes them after its first byte, an encoding error takes one byte),
  // so every other byte starts a character, and a continuation byte more than three after
  // one is an encoding error of its own: the walk back stops within three bytes (walking
  // back to an ASCII byte made a long line of CJK letters quadratic: 210 KB, 71 s).
  const auto continuation = [&](std::size_t i) { return (static_cast<unsigned char>(line[i]) & 0xc0) == 0x80; };
  std::size_t p = at - 1;
  while (p > 0 && at - 1 - p < 3 && continuation(p)) --p;
  wint_t wc = WEOF;
  for (;;) {
    std::size_t length = 0;
    wc = decode(line, p, length);
    if (p + length >= at) break;
    p += length;
  }
  return wide_word(wc);
}

std::size_t word_chars_from(std::string_view line, std::size_t at, bool utf8) {
  std::size_t i = at;
  while (i < line.size()) {
    const unsigned char c = static_cast<unsigned char>(line[i]);
    if (!utf8 || c < 0x80) {
      if (!ascii_word(c)) break;
      ++i;
      continue;
    }
    std::size_t length = 0;
    if (!wide_word(decode(line, i, length))) break;
    i += length;
  }
  return i - at;
}

}  // namespace gpufilter::regex
