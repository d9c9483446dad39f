// Required factors of a regular expression (factors.hpp). A lexer per syntax turns the
// pattern into a few token kinds (a character, a "break" that matches something not fixed,
// groups, alternation, quantifiers); one parser then computes, for every group and branch,
// the exact strings it can match (when few) and the best OR-set of literals it requires.
//
// Safety rule throughout: a token whose reading is in doubt becomes a break (it adds no
// requirement and ends the literal run), a quantifier in doubt is taken as one that may
// repeat zero times (it drops the atom before it), and a construct whose extent is in doubt
// (where it ends, or whether its text is literal) gives up on the whole pattern. Each of
// these only loses factors; none can claim a literal that some match avoids.
#include "gpufilter/regex/factors.hpp"

#include "regex_internal.hpp"

#include <algorithm>
#include <cstdint>
#include <utility>

namespace gpufilter::regex {
namespace {

using Set = std::vector<std::string>;

// An exact set past kMaxExact strings is cut (the run so far stays a candidate); an OR-set
// past kMaxFactors literals is no answer; nesting past kMaxDepth gives up (stack depth).
constexpr std::size_t kMaxExact = 32;
constexpr std::size_t kMaxFactors = 64;
constexpr std::size_t kMaxDepth = 256;
// More interval digits than glibc or PCRE2 accept (RE_DUP_MAX 0x7fff, PCRE2 65535).
constexpr std::size_t kMaxIntervalDigits = 5;

// What a piece of the pattern (an atom, a branch, a group) tells about its matches.
struct Info {
  std::optional<Set> exact;  // the piece matches exactly one of these strings
  std::optional<Set> best;   // every match contains one of these (all >= min_length)
};

// How often a quantified atom occurs: exactly once, at least once, or maybe never.
enum class Quant { kOnce, kRepeated, kOptional };

// kAssert opens a lookaround group: zero-width, its content read and dropped. kCond opens a
// conditional group, which matches one of its branches or, with one branch, maybe nothing.
enum class Tok { kAtom, kBreak, kOpen, kAssert, kCond, kClose, kAlt, kQuant, kEnd, kGiveUp };

struct Token {
  Tok kind = Tok::kEnd;
  std::string bytes;           // kAtom: the bytes of one character
  Quant quant = Quant::kOnce;  // kQuant
  Set variants;                // kAtom, if not empty: the character is one of these (its case counterparts)
};

Token make(Tok kind) { return Token{kind, {}, Quant::kOnce, {}}; }
Token quantifier(Quant quant) { return Token{Tok::kQuant, {}, quant, {}}; }


std::string folded(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = ascii_lower(c);
  return out;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alnum(char c) { return is_digit(c) || (ascii_lower(c) >= 'a' && ascii_lower(c) <= 'z'); }
bool is_high(char c) { return static_cast<unsigned char>(c) >= 0x80; }

// Under -i a literal byte must fold the way the scan folds: ASCII only. Bytes >= 0x80 fold
// in other ways (UTF-8 letters; Latin-1 letters in a single-byte locale), and in UTF-8 's'
// and 'i' also match U+017F and U+0131, and under -P 'k' U+212A (folds_beyond_ascii_any_syntax).
bool folds_in_ascii(char c, const FactorOptions& options) {
  if (!options.ignore_case) return true;
  return !is_high(c) && !(options.utf8 && folds_beyond_ascii_any_syntax(static_cast<unsigned char>(c)));
}

// Sorted, without duplicates (compared folded when the scan folds: "AB" and "ab" are one).
void normalize(Set& set, bool ignore_case) {
  auto key = [ignore_case](const std::string& s) { return ignore_case ? folded(s) : s; };
  std::sort(set.begin(), set.end(), [&](const std::string& a, const std::string& b) { return key(a) < key(b); });
  const auto same = [&](const std::string& a, const std::string& b) { return key(a) == key(b); };
  set.erase(std::unique(set.begin(), set.end(), same), set.end());
}

std::size_t shortest(const Set& set) {
  std::size_t n = SIZE_MAX;
  for (const auto& s : set) n = std::min(n, s.size());
  return n;
}

// The better OR-set filters more: its shortest literal is longer, or on a tie it has fewer
// (with `fewest`: it has fewer literals, or on a tie its shortest is longer).
bool better(const Set& a, const Set& b, bool fewest) {
  const std::size_t la = shortest(a), lb = shortest(b);
  if (fewest && a.size() != b.size()) return a.size() < b.size();
  return la != lb ? la > lb : a.size() < b.size();
}

// The pieces of one branch, in order. Consecutive pieces with exact sets glue into a run
// (their product); a piece without one, or one that may repeat, ends the run. Every run and
// every required piece's own answer is a candidate; the best candidate is the answer.
class Sequence {
 public:
  explicit Sequence(const FactorOptions& options) : options_(options) {}

  void add(const Info& piece, Quant quant) {
    if (quant == Quant::kOptional || !piece.exact) {
      cut();
      if (quant != Quant::kOptional && piece.best) offer(*piece.best);
      return;
    }
    extend(*piece.exact);
    if (piece.best) offer(*piece.best);
    // x+ is x x* x... as a string x1..xn, n >= 1: x1 ends the run before, xn starts the next.
    if (quant == Quant::kRepeated) {
      cut();
      run_ = *piece.exact;
    }
  }

  Info finish() && {
    Info info;
    if (whole_) info.exact = run_;
    cut();
    info.best = std::move(best_);
    return info;
  }

 private:
  void extend(const Set& next) {
    if (run_.size() * next.size() > kMaxExact) {
      cut();
      run_ = next;
      return;
    }
    Set product;
    for (const auto& a : run_)
      for (const auto& b : next) product.push_back(a + b);
    normalize(product, options_.ignore_case);
    run_ = std::move(product);
  }

  void cut() {
    offer(run_);
    run_ = Set{std::string()};
    whole_ = false;
  }

  void offer(const Set& set) {
    if (set.empty() || set.size() > kMaxFactors) return;
    if (shortest(set) < std::max<std::size_t>(options_.min_length, 1)) return;
    if (!best_ || better(set, *best_, options_.fewest)) best_ = set;
  }

  const FactorOptions& options_;
  Set run_{std::string()};
  bool whole_ = true;  // no cut yet: run_ is every string the branch matches
  std::optional<Set> best_;
};

// An alternation: exact if every branch is (the union), required if every branch has an
// answer (the union of the answers).
Info merge(std::vector<Info>& branches, bool ignore_case) {
  if (branches.size() == 1) return std::move(branches.front());
  Info out;
  Set exact, best;
  bool all_exact = true, all_best = true;
  for (const auto& b : branches) {
    if (b.exact) exact.insert(exact.end(), b.exact->begin(), b.exact->end());
    else all_exact = false;
    if (b.best) best.insert(best.end(), b.best->begin(), b.best->end());
    else all_best = false;
  }
  normalize(exact, ignore_case);
  normalize(best, ignore_case);
  if (all_exact && exact.size() <= kMaxExact) out.exact = std::move(exact);
  if (all_best && best.size() <= kMaxFactors) out.best = std::move(best);
  return out;
}

// The common part of the lexers: the pattern, the position, and reading one character.
class Lexer {
 public:
  Lexer(std::string_view pattern, const FactorOptions& options) : p_(pattern), options_(options) {}
  virtual ~Lexer() = default;
  virtual Token next() = 0;

 protected:
  // One character at pos_: a byte, or a byte >= 0x80 with the continuation bytes after it
  // (a superset of a UTF-8 character, so a quantifier after it drops at least that char).
  // A break where the scan's ASCII folding would miss a case variant.
  Token character() {
    const std::size_t start = pos_++;
    if (is_high(p_[start]))
      while (pos_ < p_.size() && (static_cast<unsigned char>(p_[pos_]) & 0xC0) == 0x80) ++pos_;
    std::string bytes(p_.substr(start, pos_ - start));
    if (foldable(bytes)) return Token{Tok::kAtom, std::move(bytes), Quant::kOnce, {}};
    // Under -i in a UTF-8 locale (-G, -E), grep's DFA reads the character as itself or one
    // of its case counterparts, which the scan's ASCII folding does not reach ('s' also
    // matches U+017F): an OR of them.
    std::size_t length = 0;
    std::optional<Set> variants = counterparts_ ? case_variants(bytes, 0, length) : std::nullopt;
    if (variants && length == bytes.size())
      return Token{Tok::kAtom, std::move(bytes), Quant::kOnce, std::move(*variants)};
    return make(Tok::kBreak);
  }

  Token literal(char c) {
    std::string bytes(1, c);
    return foldable(bytes) ? Token{Tok::kAtom, std::move(bytes), Quant::kOnce, {}} : make(Tok::kBreak);
  }

  bool foldable(std::string_view bytes) const {
    return std::all_of(bytes.begin(), bytes.end(), [this](char c) { return folds_in_ascii(c, options_); });
  }

  // Digits at pos_ (at most kMaxIntervalDigits; more gives up via the nullopt).
  std::optional<std::string_view> digits() {
    const std::size_t start = pos_;
    while (pos_ < p_.size() && is_digit(p_[pos_])) ++pos_;
    if (pos_ - start > kMaxIntervalDigits) return std::nullopt;
    return p_.substr(start, pos_ - start);
  }

  std::string_view p_;
  const FactorOptions& options_;
  std::size_t pos_ = 0;
  std::size_t depth_ = 0;  // open groups, to tell an ERE's unmatched ')' (a literal)
  bool counterparts_ = false;  // character() gives a letter's case variants (case_variants())
};

// GNU BRE (RE_SYNTAX_GREP) and ERE (RE_SYNTAX_EGREP) as glibc's regcomp reads them.
class PosixLexer final : public Lexer {
 public:
  PosixLexer(std::string_view pattern, const FactorOptions& options, bool extended)
      : Lexer(pattern, options), extended_(extended) {
    counterparts_ = options.ignore_case && options.utf8;  // grep's DFA reads its counterparts
  }

  Token next() override {
    if (pos_ >= p_.size()) return make(Tok::kEnd);
    const char c = p_[pos_];
    if (c == '\\') return escape();
    ++pos_;
    // '^' and '$' are anchors or (in a BRE, mid-pattern) literals: a break is right either
    // way. '*' is a literal at a BRE's start or after an anchor, and ignored at an ERE's
    // start; taking it as a quantifier everywhere only drops what is before it.
    if (c == '.' || c == '^' || c == '$') return make(Tok::kBreak);
    if (c == '[') return bracket();
    if (c == '*') return quantifier(Quant::kOptional);
    if (extended_) {
      switch (c) {
        case '+': return quantifier(Quant::kRepeated);
        case '?': return quantifier(Quant::kOptional);
        case '{': return ere_interval();
        case '|': return make(Tok::kAlt);
        case '(': ++depth_; return make(Tok::kOpen);
        case ')':
          if (depth_ == 0) return make(Tok::kBreak);  // RE_UNMATCHED_RIGHT_PAREN_ORD: a literal
          --depth_;
          return make(Tok::kClose);
        case '}': return make(Tok::kBreak);  // a literal; not worth being sure
        default: break;
      }
    }
    --pos_;
    return character();
  }

 private:
  Token escape() {
    if (++pos_ >= p_.size()) return make(Tok::kGiveUp);
    if (is_high(p_[pos_])) {
      character();  // an escaped multibyte character: not worth being sure what it is
      return make(Tok::kBreak);
    }
    const char c = p_[pos_++];
    if (!extended_) {
      switch (c) {
        case '(': ++depth_; return make(Tok::kOpen);
        case ')':
          if (depth_ == 0) return make(Tok::kGiveUp);
          --depth_;
          return make(Tok::kClose);
        case '|': return make(Tok::kAlt);
        case '{': return bre_interval();
        case '}': return make(Tok::kBreak);
        case '+': return quantifier(Quant::kRepeated);
        case '?': return quantifier(Quant::kOptional);
        default: break;
      }
    }
    switch (c) {
      // Back-references (and "\0", to be safe), GNU anchors and character classes.
      case '0': case '1': case '2': case '3': case '4': case '5': case '6': case '7': case '8': case '9':
      case '<': case '>': case 'b': case 'B': case '`': case '\'': case 'w': case 'W': case 's': case 'S':
        return make(Tok::kBreak);
      default: return literal(c);
    }
  }

  // A bracket expression, pos_ just past '['. Backslashes are literal inside; "[:", "[="
  // and "[." open a name that ends at the matching ":]", "=]" or ".]"; a ']' first is literal.
  Token bracket() {
    std::size_t i = pos_;
    if (i < p_.size() && p_[i] == '^') ++i;
    if (i < p_.size() && p_[i] == ']') ++i;
    while (i < p_.size()) {
      const char c = p_[i];
      if (c == ']') {
        pos_ = i + 1;
        return make(Tok::kBreak);
      }
      if (c == '[' && i + 1 < p_.size() && (p_[i + 1] == ':' || p_[i + 1] == '=' || p_[i + 1] == '.')) {
        const char close[] = {p_[i + 1], ']'};
        const std::size_t end = p_.find(std::string_view(close, 2), i + 2);
        if (end == std::string_view::npos) return make(Tok::kGiveUp);
        i = end + 2;
        continue;
      }
      ++i;
    }
    return make(Tok::kGiveUp);
  }

  // "\{m,n\}" with pos_ past "\{". RE_SYNTAX_GREP rejects a malformed interval, so one that
  // compiled but does not read plainly here (glibc takes "\," as a comma) gives up.
  Token bre_interval() {
    const std::optional<Quant> quant = interval("\\}");
    return quant ? quantifier(*quant) : make(Tok::kGiveUp);
  }

  // "{m,n}" with pos_ past '{'. Malformed (a character other than digits and commas before
  // the '}', or no '}'), glibc takes '{' as a literal (RE_INVALID_INTERVAL_ORD) and reads on
  // after it. Unsure otherwise: glibc reads "\," as a comma, and "{0000001}" as "{1}".
  Token ere_interval() {
    const std::size_t start = pos_;
    if (const std::optional<Quant> quant = interval("}")) return quantifier(*quant);
    pos_ = start;
    const std::size_t close = p_.find('}', start);
    const std::string_view body = p_.substr(start, close == std::string_view::npos ? close : close - start);
    if (body.find('\\') != std::string_view::npos) return make(Tok::kGiveUp);
    if (close != std::string_view::npos && body.find_first_not_of("0123456789,") == std::string_view::npos)
      return make(Tok::kGiveUp);
    return quantifier(Quant::kOptional);  // the literal '{' as a break that also drops the atom before
  }

  // The digits [',' digits] and `close` of an interval; the quantifier it makes.
  std::optional<Quant> interval(std::string_view close) {
    const std::optional<std::string_view> low = digits();
    if (!low) return std::nullopt;
    bool comma = false;
    if (pos_ < p_.size() && p_[pos_] == ',') {
      comma = true;
      ++pos_;
      if (!digits()) return std::nullopt;
    }
    if (p_.substr(pos_, close.size()) != close || (low->empty() && !comma)) return std::nullopt;
    pos_ += close.size();
    const bool at_least_one = !low->empty() && low->find_first_not_of('0') != std::string_view::npos;
    return at_least_one ? Quant::kRepeated : Quant::kOptional;
  }

  bool extended_;
};

// PCRE2 as grep -P compiles it (no extended mode, no options set by the pattern). Anything
// beyond plain literals, escapes, classes, groups, alternation and quantifiers gives up.
class PerlLexer final : public Lexer {
 public:
  using Lexer::Lexer;

  Token next() override {
    if (pos_ >= p_.size()) return make(Tok::kEnd);
    if (quoting_) {
      if (p_.substr(pos_, 2) != "\\E") return character();
      quoting_ = false;
      pos_ += 2;
      return next();
    }
    const char c = p_[pos_];
    switch (c) {
      case '\\': return escape();
      case '[': return klass();
      case '(': return group();
      case '{': return brace();
      default: break;
    }
    ++pos_;
    switch (c) {
      case '.': case '^': case '$': return make(Tok::kBreak);
      case '|': return make(Tok::kAlt);
      case ')':
        if (depth_ == 0) return make(Tok::kGiveUp);
        --depth_;
        return make(Tok::kClose);
      case '*': case '?': return suffixed(Quant::kOptional);
      case '+': return suffixed(Quant::kRepeated);
      default: --pos_; return character();
    }
  }

 private:
  // A quantifier's lazy '?' or possessive '+' suffix changes which match, not what matches.
  Token suffixed(Quant quant) {
    if (pos_ < p_.size() && (p_[pos_] == '?' || p_[pos_] == '+')) ++pos_;
    return quantifier(quant);
  }

  Token escape() {
    if (++pos_ >= p_.size()) return make(Tok::kGiveUp);
    const char c = p_[pos_];
    if (is_high(c)) {
      character();
      return make(Tok::kBreak);
    }
    ++pos_;
    if (!is_alnum(c)) return literal(c);
    switch (c) {
      case 'Q': quoting_ = true; return next();
      // Character types, anchors and single control characters: each one position or none.
      case 'd': case 'D': case 'w': case 'W': case 's': case 'S': case 'h': case 'H': case 'v': case 'V':
      case 'R': case 'X': case 'C': case 'b': case 'B': case 'A': case 'z': case 'Z': case 'G':
      case 'a': case 'e': case 'f': case 'n': case 'r': case 't':
        return make(Tok::kBreak);
      case 'N': return pos_ < p_.size() && p_[pos_] == '{' ? make(Tok::kGiveUp) : make(Tok::kBreak);
      default: return make(Tok::kGiveUp);  // \x \o \p \g \k \K \c \E digits ... : not read here
    }
  }

  // A character class from pos_ at '['. Backslash escapes inside (and \Q..\E quotes); a ']'
  // first is literal; "[:name:]" the way PCRE2's check_posix_syntax finds it.
  Token klass() {
    std::size_t i = pos_ + 1;
    if (i < p_.size() && p_[i] == '^') ++i;
    if (i < p_.size() && p_[i] == ']') ++i;
    while (i < p_.size()) {
      const char c = p_[i];
      if (c == ']') {
        pos_ = i + 1;
        return make(Tok::kBreak);
      }
      if (c == '\\') {
        if (p_.substr(i, 2) == "\\Q") {
          const std::size_t end = p_.find("\\E", i + 2);
          if (end == std::string_view::npos) return make(Tok::kGiveUp);
          i = end + 2;
        } else {
          i += p_.substr(i, 2) == "\\c" ? 3 : 2;  // \c takes the next character, even ']'
        }
        continue;
      }
      i = c == '[' ? posix_class_end(i) : i + 1;
    }
    return make(Tok::kGiveUp);
  }

  // Past "[:name:]" (or "[.x.]", "[=x=]") at i, or just past the '[' when it is not one.
  std::size_t posix_class_end(std::size_t i) const {
    if (i + 1 >= p_.size() || (p_[i + 1] != ':' && p_[i + 1] != '.' && p_[i + 1] != '=')) return i + 1;
    const char term = p_[i + 1];
    for (std::size_t j = i + 2; j + 1 < p_.size(); ++j) {
      if (p_[j] == '\\' && (p_[j + 1] == ']' || p_[j + 1] == '\\')) {
        ++j;
      } else if ((p_[j] == '[' && p_[j + 1] == term) || p_[j] == ']') {
        return i + 1;
      } else if (p_[j] == term && p_[j + 1] == ']') {
        return j + 2;
      }
    }
    return i + 1;
  }

  // A group from pos_ at '('. Capturing, "(?:", atomic "(?>", branch reset "(?|" and named
  // groups match what their content matches. A lookaround ("(?=", "(?!", "(?<=", "(?<!")
  // matches the empty string: dropping it only widens what the pattern matches, so its
  // neighbours stay adjacent (fail2ban's <HOST> holds "(?<=:)"). A conditional group
  // "(?(1)...|...)", "(?(<name>)...)" is read as its branches, all of them optional; one
  // whose condition is an assertion or a callout ("(?(?") gives up. "(?P=name)" is a
  // back-reference: a break. Any other "(?" or "(*" gives up.
  Token group() {
    const std::string_view rest = p_.substr(pos_ + 1);
    std::size_t skip = 1;
    if (rest.starts_with('*')) return make(Tok::kGiveUp);
    if (rest.starts_with("?P=")) {  // a back-reference by name: something not fixed
      const std::size_t end = rest.find(')');
      if (end == std::string_view::npos) return make(Tok::kGiveUp);
      pos_ += end + 2;
      return make(Tok::kBreak);
    }
    if (rest.starts_with("?(")) {
      const std::size_t end = rest.find(')', 2);
      if (rest.starts_with("?(?") || end == std::string_view::npos) return make(Tok::kGiveUp);
      pos_ += end + 2;
      ++depth_;
      return make(Tok::kCond);
    }
    if (rest.starts_with("?=") || rest.starts_with("?!") || rest.starts_with("?<=") || rest.starts_with("?<!")) {
      pos_ += rest[1] == '<' ? 4 : 3;
      ++depth_;
      return make(Tok::kAssert);
    }
    if (rest.starts_with('?')) {
      if (rest.starts_with("?:") || rest.starts_with("?>") || rest.starts_with("?|")) {
        skip = 3;
      } else {
        const std::size_t name = rest.starts_with("?P<") ? 3 : rest.starts_with("?<") || rest.starts_with("?'") ? 2 : 0;
        if (name == 0 || name >= rest.size() || !(is_alnum(rest[name]) || rest[name] == '_') || is_digit(rest[name]))
          return make(Tok::kGiveUp);
        const std::size_t end = rest.find(rest[name - 1] == '\'' ? '\'' : '>', name);
        if (end == std::string_view::npos) return make(Tok::kGiveUp);
        skip = end + 2;
      }
    }
    pos_ += skip;
    ++depth_;
    return make(Tok::kOpen);
  }

  // '{' at pos_: a quantifier "{n}", "{n,}", "{n,m}"; a literal when no digit, comma or space
  // follows; otherwise (forms PCRE2 versions read differently: "{,n}", "{ 1 }") give up.
  Token brace() {
    ++pos_;
    const char after = pos_ < p_.size() ? p_[pos_] : '\0';
    if (!is_digit(after) && after != ',' && after != ' ' && after != '\t') return literal('{');
    const std::optional<std::string_view> low = digits();
    if (!low || low->empty()) return make(Tok::kGiveUp);
    if (pos_ < p_.size() && p_[pos_] == ',') {
      ++pos_;
      if (!digits()) return make(Tok::kGiveUp);
    }
    if (pos_ >= p_.size() || p_[pos_] != '}') return make(Tok::kGiveUp);
    ++pos_;
    return suffixed(low->find_first_not_of('0') != std::string_view::npos ? Quant::kRepeated : Quant::kOptional);
  }

  bool quoting_ = false;  // inside \Q...\E
};

Quant combine(Quant a, Quant b) {
  if (a == Quant::kOptional || b == Quant::kOptional) return Quant::kOptional;
  return a == Quant::kRepeated || b == Quant::kRepeated ? Quant::kRepeated : Quant::kOnce;
}

// Recursive descent over a lexer's tokens; nullopt gives up on the whole pattern.
class Parser {
 public:
  Parser(Lexer& lexer, const FactorOptions& options) : lexer_(lexer), options_(options) { advance(); }

  std::optional<Info> pattern() {
    std::optional<Info> info = alternation(0);
    if (!info || token_.kind != Tok::kEnd) return std::nullopt;
    return info;
  }

 private:
  void advance() { token_ = lexer_.next(); }

  std::optional<Info> alternation(std::size_t depth) {
    std::vector<Info> branches;
    for (;;) {
      std::optional<Info> branch = concatenation(depth);
      if (!branch) return std::nullopt;
      branches.push_back(std::move(*branch));
      if (token_.kind != Tok::kAlt) break;
      advance();
    }
    return merge(branches, options_.ignore_case);
  }

  std::optional<Info> concatenation(std::size_t depth) {
    Sequence sequence(options_);
    bool maybe_absent = false;  // the atom is a conditional group
    for (;;) {
      Info atom;
      switch (token_.kind) {
        case Tok::kAlt: case Tok::kClose: case Tok::kEnd: return std::move(sequence).finish();
        case Tok::kGiveUp: return std::nullopt;
        case Tok::kAtom: atom.exact = token_.variants.empty() ? Set{token_.bytes} : token_.variants; break;
        case Tok::kBreak: case Tok::kQuant: break;  // a quantifier with nothing before: a break
        case Tok::kOpen: case Tok::kAssert: case Tok::kCond: {
          if (depth >= kMaxDepth) return std::nullopt;
          const Tok kind = token_.kind;
          advance();
          std::optional<Info> inner = alternation(depth + 1);
          if (!inner || token_.kind != Tok::kClose) return std::nullopt;
          atom = kind == Tok::kAssert ? Info{Set{std::string()}, std::nullopt} : std::move(*inner);
          maybe_absent = kind == Tok::kCond;
          break;
        }
      }
      Quant quant = token_.kind == Tok::kQuant || maybe_absent ? Quant::kOptional : Quant::kOnce;
      maybe_absent = false;
      advance();
      while (token_.kind == Tok::kQuant) {
        quant = combine(quant, token_.quant);
        advance();
      }
      sequence.add(atom, quant);
    }
  }

  Lexer& lexer_;
  const FactorOptions& options_;
  Token token_;
};

// -F: the pattern is its own factor, cut where -i folding is not ASCII's (the longest piece).
std::optional<Set> fixed_factor(std::string_view pattern, const FactorOptions& options) {
  std::string_view best;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= pattern.size(); ++i) {
    if (i < pattern.size() && folds_in_ascii(pattern[i], options)) continue;
    if (i - start > best.size()) best = pattern.substr(start, i - start);
    start = i + 1;
  }
  if (best.empty() || best.size() < options.min_length) return std::nullopt;
  return Set{std::string(best)};
}

}  // namespace

std::optional<std::vector<std::string>> required_factors(std::string_view pattern, Syntax syntax,
                                                         const FactorOptions& options) {
  if (syntax == Syntax::kFixed) return fixed_factor(pattern, options);
  // A newline separates patterns (RE_NEWLINE_ALT); the caller splits them first.
  if (pattern.find('\n') != std::string_view::npos) return std::nullopt;
  std::optional<Info> info;
  if (syntax == Syntax::kPerl) {
    PerlLexer lexer(pattern, options);
    info = Parser(lexer, options).pattern();
  } else {
    PosixLexer lexer(pattern, options, syntax == Syntax::kExtended);
    info = Parser(lexer, options).pattern();
  }
  if (!info || !info->best) return std::nullopt;
  return std::move(info->best);
}

}  // namespace gpufilter::regex
