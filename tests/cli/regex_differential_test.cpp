// Differential tests of gpufilter's regular expressions against GNU grep 3.8: random BRE,
// ERE and Perl patterns (valid ones, and some grep rejects), random inputs (CRLF, long lines,
// NUL bytes, multibyte characters, invalid UTF-8) and random options, in the C and C.UTF-8
// locales; then regexes made from the Loghub templates. `grep MATCHER ARGS...` and
// `gpufilter MATCHER ARGS... KNOBS` must agree byte for byte on stdout, on the exit status
// and on stderr (after the program name). Every failure prints its seed and the case;
// GPUFILTER_TEST_SEED=N shifts the seeds of every test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <initializer_list>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "corpus_util.hpp"
#include "differential.hpp"
#include "testutil/testutil.hpp"

namespace gpufilter::test {
namespace {

using Args = std::vector<std::string>;

constexpr int kMaxFailingCases = 8;  // stop a test after this many failing cases

std::uint32_t base_seed(std::uint32_t fallback) {
  if (const char* env = std::getenv("GPUFILTER_TEST_SEED")) return static_cast<std::uint32_t>(std::strtoul(env, nullptr, 10)) + fallback;
  return fallback;
}

enum class Syntax { kBasic, kExtended, kPerl };
enum class Locale { kC, kUtf8 };

const char* matcher_flag(Syntax s) { return s == Syntax::kBasic ? "-G" : s == Syntax::kExtended ? "-E" : "-P"; }
const char* syntax_name(Syntax s) { return s == Syntax::kBasic ? "BRE" : s == Syntax::kExtended ? "ERE" : "PCRE"; }
const char* locale_name(Locale l) { return l == Locale::kC ? "C" : "C.UTF-8"; }
// The environment of both tools: run_process sets LC_ALL=C; this entry replaces it.
std::vector<std::string> locale_env(Locale l) {
  return l == Locale::kC ? std::vector<std::string>{} : std::vector<std::string>{"LC_ALL=C.UTF-8"};
}

// Cases run and cases that differed, printed at the end of each test.
struct Tally {
  int cases = 0;
  int differing = 0;
};

void report_tally(const std::string& what, const Tally& t) {
  std::cout << "[  TALLY   ] " << what << ": " << t.cases << " cases, " << t.differing << " differed" << std::endl;
  ::testing::Test::RecordProperty("cases", t.cases);
  ::testing::Test::RecordProperty("differing", t.differing);
}

// Each case in each locale compared with grep under every knob setting (`note` names a
// differing case), and the tally printed under `title`.
void compare_cases(const std::string& matcher, const std::vector<Args>& cases, const std::string& input,
                   const std::vector<Knobs>& knobs, const std::string& note, const std::string& title,
                   std::initializer_list<Locale> locales) {
  Tally tally;
  for (const Args& args : cases)
    for (const Locale l : locales) {
      ++tally.cases;
      if (!expect_same_with(matcher, args, input, knobs, note, locale_env(l))) ++tally.differing;
    }
  report_tally(title, tally);
}

class Random {
 public:
  explicit Random(std::uint32_t seed) : rng_(seed) {}
  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool chance(double p) { return std::bernoulli_distribution(p)(rng_); }
  template <typename T>
  const T& pick(const std::vector<T>& v) {
    return v[static_cast<std::size_t>(uniform(0, static_cast<int>(v.size()) - 1))];
  }
  std::mt19937& rng() { return rng_; }

 private:
  std::mt19937 rng_;
};

const std::string kEAcute = "\xc3\xa9";      // é
const std::string kEAcuteUpper = "\xc3\x89";  // É
const std::string kSharpS = "\xc3\x9f";       // ß
const std::string kNichi = "\xe6\x97\xa5";    // 日
const std::string kKelvin = "\xe2\x84\xaa";   // KELVIN SIGN, which -i folds with 'k'
const std::string kDotlessI = "\xc4\xb1";     // DOTLESS I, which -i folds with 'i'
const std::string kLongS = "\xc5\xbf";        // LONG S, which -i folds with 's'

// ---------------------------------------------------------------------------------------
// BRE and ERE: a syntax tree rendered in either syntax.

struct Node {
  enum Kind { kLiteral, kAny, kBracket, kAnchor, kEscape, kGroup, kAlternation, kConcat, kRepeat, kBackref, kRaw };
  Kind kind = kLiteral;
  std::string text;       // the literal character, bracket, anchor, escape or raw text
  std::string quantifier;  // kRepeat: "*", "+", "?" or "{M,N}" (ERE spelling)
  std::vector<Node> children;
};

std::string render(const Node& n, bool ere);

// A literal character: escaped where it is special in the syntax.
std::string render_literal(const std::string& c, bool ere) {
  const std::string special = ere ? ".[\\()*+?{|^$" : ".[\\*^$";
  if (c.size() == 1 && special.find(c[0]) != std::string::npos) return "\\" + c;
  return c;
}

std::string render_quantifier(const std::string& q, bool ere) {
  if (ere || q == "*") return q;
  if (q == "+" || q == "?") return "\\" + q;
  return "\\{" + q.substr(1, q.size() - 2) + "\\}";  // "{M,N}" -> "\{M,N\}"
}

std::string render(const Node& n, bool ere) {
  switch (n.kind) {
    case Node::kLiteral: return render_literal(n.text, ere);
    case Node::kAny: return ".";
    case Node::kBracket:
    case Node::kAnchor:
    case Node::kEscape:
    case Node::kRaw:
    case Node::kBackref: return n.text;
    case Node::kGroup: return (ere ? "(" : "\\(") + render(n.children[0], ere) + (ere ? ")" : "\\)");
    case Node::kAlternation: {
      std::string s;
      for (std::size_t i = 0; i < n.children.size(); ++i) s += (i ? (ere ? "|" : "\\|") : "") + render(n.children[i], ere);
      return s;
    }
    case Node::kConcat: {
      std::string s;
      for (const Node& c : n.children) s += render(c, ere);
      return s;
    }
    case Node::kRepeat: return render(n.children[0], ere) + render_quantifier(n.quantifier, ere);
  }
  return {};
}

class GnuRegexGenerator {
 public:
  GnuRegexGenerator(Random& r, bool ere, bool utf8) : r_(r), ere_(ere), utf8_(utf8) {}

  std::string pattern() { return render(alternation(0), ere_); }
  bool has_backref() const { return backrefs_; }

 private:
  Node leaf(Node::Kind kind, std::string text) {
    Node n;
    n.kind = kind;
    n.text = std::move(text);
    return n;
  }

  std::string literal_char() {
    static const std::vector<std::string> plain = {"a", "b", "c", "a", "b", "c", "k", "s", "1", "2", " ", "_", "A", "B", "i"};
    static const std::vector<std::string> special = {".", "*", "{", "}", "+", "?", "|", "(", ")", "^", "$", "-", "["};
    const int x = r_.uniform(0, 99);
    if (utf8_ && x < 10) return r_.pick(std::vector<std::string>{kEAcute, kEAcuteUpper, kSharpS, kNichi, kKelvin});
    if (x < 22) return r_.pick(special);
    return r_.pick(plain);
  }

  std::string bracket() {
    static const std::vector<std::string> classes = {"[:alpha:]", "[:digit:]", "[:space:]", "[:alnum:]",
                                                     "[:upper:]", "[:lower:]", "[:punct:]", "[:blank:]"};
    static const std::vector<std::string> ranges = {"a-c", "b-c", "0-9", "a-a", "A-Z", " -_"};
    static const std::vector<std::string> singles = {"a", "b", "c", "k", ".", "*", "-", "^", "_", " ", "\\", "1", "$", "[", "{"};
    std::string s = "[";
    if (r_.chance(0.3)) s += '^';
    if (r_.chance(0.12)) s += ']';  // []a] and [^]a]
    const int n = r_.uniform(1, 3);
    for (int i = 0; i < n; ++i) {
      const int x = r_.uniform(0, 99);
      if (x < 25) s += r_.pick(classes);
      else if (x < 45) s += r_.pick(ranges);
      else if (x < 50) s += r_.pick(std::vector<std::string>{"[=a=]", "[.-.]", "[.a.]"});
      else if (x < 58 && utf8_) s += r_.pick(std::vector<std::string>{kEAcute, kSharpS, kKelvin, "a-" + kEAcute});
      else {
        std::string c = r_.pick(singles);
        if (c == "^" && s.size() <= 2) c = "_";  // not the negation
        s += c;
      }
    }
    if (s.back() == '[') s += 'a';  // "[[" + "]" would open a class
    return s + "]";
  }

  Node atom(int depth) {
    const int x = r_.uniform(0, 99);
    if (x < 40) return leaf(Node::kLiteral, literal_char());
    if (x < 50) return leaf(Node::kAny, ".");
    if (x < 62) return leaf(Node::kBracket, bracket());
    if (x < 71)
      return leaf(Node::kEscape, r_.pick(std::vector<std::string>{"\\<", "\\>", "\\b", "\\B", "\\w", "\\W", "\\s",
                                                                 "\\S", "\\w", "\\s", "\\`", "\\'"}));
    if (x < 77) return leaf(Node::kAnchor, r_.chance(0.5) ? "^" : "$");
    if (x < 83 && !closed_.empty()) {
      backrefs_ = true;
      return leaf(Node::kBackref, "\\" + std::to_string(r_.pick(closed_)));
    }
    if (depth < 3) {
      const int number = ++groups_;
      Node g;
      g.kind = Node::kGroup;
      g.children.push_back(alternation(depth + 1));
      if (number <= 9) closed_.push_back(number);
      return g;
    }
    return leaf(Node::kLiteral, literal_char());
  }

  std::string quantifier() {
    const int x = r_.uniform(0, 99);
    if (x < 30) return "*";
    if (x < 48) return "+";
    if (x < 64) return "?";
    const int m = r_.uniform(0, 3);
    const int n = m + r_.uniform(0, 2);
    switch (r_.uniform(0, 3)) {
      case 0: return "{" + std::to_string(m) + "}";
      case 1: return "{" + std::to_string(m) + "," + std::to_string(n) + "}";
      case 2: return "{," + std::to_string(n) + "}";
      default: return "{" + std::to_string(m) + ",}";
    }
  }

  Node concat(int depth) {
    Node c;
    c.kind = Node::kConcat;
    // A repetition where grep's DFA takes it for one at the start of an expression (ERE:
    // a warning; BRE: a literal '*').
    if (r_.chance(0.03)) c.children.push_back(leaf(Node::kRaw, ere_ ? r_.pick(std::vector<std::string>{"*", "+", "?", "{1}", "{1,2}"}) : "*"));
    const int n = r_.uniform(1, 4);
    for (int i = 0; i < n; ++i) {
      Node a = atom(depth);
      if (r_.chance(0.3)) {
        Node rep;
        rep.kind = Node::kRepeat;
        rep.quantifier = quantifier();
        rep.children.push_back(std::move(a));
        a = std::move(rep);
        if (r_.chance(0.08)) {  // a repeated repetition: a** or a*\{2\}
          Node again;
          again.kind = Node::kRepeat;
          again.quantifier = r_.chance(0.5) ? "*" : quantifier();
          again.children.push_back(std::move(a));
          a = std::move(again);
        }
      }
      c.children.push_back(std::move(a));
    }
    return c;
  }

  Node alternation(int depth) {
    Node alt;
    alt.kind = Node::kAlternation;
    alt.children.push_back(concat(depth));
    while (r_.chance(0.25) && alt.children.size() < 4) alt.children.push_back(r_.chance(0.05) ? Node{Node::kConcat, {}, {}, {}} : concat(depth));
    return alt;
  }

  Random& r_;
  bool ere_;
  bool utf8_;
  int groups_ = 0;
  std::vector<int> closed_;
  bool backrefs_ = false;
};

// Patterns grep rejects (exit 2 and its message), or where its DFA parser warns or reads
// them its own way.
const std::vector<std::string>& odd_basic_patterns() {
  static const std::vector<std::string> p = {
      "a\\)", "\\(a", "\\(a\\|b", "a[b", "[b-a]", "a\\", "a\\{2,1\\}", "a\\{1", "a\\{1,2", "\\(a\\)\\2",
      "[[:foo:]]", "[[.ab.]]", "[[=a", "x\\{99999\\}", "[:space:]", "[:alpha:]x", "a\\{,\\}", "\\{1\\}a",
      "a\\{1a\\}", "*a", "^*b", "\\(*a\\)", "a\\|*b", "\\(^a\\)", "a\\{1\\}\\{2\\}", "[a", "[]", "[^]", "\\(\\)",
      "a\\|\\|b", "\\1", "\\(a\\)\\|\\1", "[[:alpha:]-z]", "[z-a]", "a\\{32768\\}",
      "b\\b*c", "b\\>\\{2\\}", "b$*", "{", "{a", "a\\{1,2\\}\\{3\\}",
      // dfa.c reads '$' before a bare ')' or '|' that more follows as an anchor, glibc as '$'.
      "$|*", "$)*", "a$)", "a$|", "a$|b", "$|",
      // Stacked repetitions, collapsed into one before glibc sees them.
      "\\(**\\)", "^**b", "a**\\+", "a\\{2\\}**", "a\\?\\?b", "a\\+\\+", "[*]**", "\\***", "a\\|**b",
      "\\(a\\)\\+\\?*", "b\\>**", "x\\?\\+\\?",
      // A bad interval after an anchor: glibc reads a literal '{', grep's DFA refuses it.
      "1\\<\\{", "a\\B\\{1", "\\(1\\>\\{\\)", "\\<\\{", "a\\`\\{"};
  return p;
}

const std::vector<std::string>& odd_extended_patterns() {
  static const std::vector<std::string> p = {
      "a)", "(a", "(a|b", "a[b", "[b-a]", "a\\", "a{2,1}", "{1}a", "a{1", "a{1,2", "(a)\\2", "((a)", "[[:foo:]]",
      "x{99999}", "[:space:]", "()", "a||b", "(|a)", "a{,}", "*a", "+a", "?a", "a|*b", "a|+b", "(*a)", "^*",
      "a{1}{2}", "a+*?", "a**", "{1,2}a", "x|{1}", "a{1a}", "a{,2}b", "[a", "[]", "\\1", "(a)|\\1", "a{32768}",
      "(^a)", "a($)b", "[[:alpha:]-z]", "(a{1)",
      "b$?", "^*b", "^{,1}b", "a\\`?b", "b\\b{2}", "?*a", "**a", "*{1}a", "{", "{a", "{)", "{)|",
      // Stacked repetitions, collapsed into one before glibc sees them.
      "a++", "a??b", "a?+", "(a)*+", "\\+++", "[+]+?", "a{2}**", "(**a)", "a|**b", ")++", "\\(++", "b\\>++",
      "x?+?b", "m++/+++++)" + std::string(10, '+') + "^.*++++"};
  return p;
}

// ---------------------------------------------------------------------------------------
// Perl: a smaller generator, written straight as text.

class PerlGenerator {
 public:
  PerlGenerator(Random& r, bool utf8) : r_(r), utf8_(utf8) {}

  std::string pattern() {
    std::string p = alternation(0);
    if (r_.chance(0.05)) p = "(?i)" + p;
    return p;
  }

 private:
  std::string atom(int depth) {
    static const std::vector<std::string> literals = {"a", "b", "c", "a", "b", "k", "1", " ", "_", "\\.", "-", "A"};
    static const std::vector<std::string> classes = {"[abc]", "[^a]", "[a-c1]", "[\\d_]", "[^\\s]", "[.*]", "[\\w-]",
                                                     "[[:alpha:]]", "[^[:digit:]b]"};
    const int x = r_.uniform(0, 99);
    if (x < 35) return utf8_ && r_.chance(0.12) ? r_.pick(std::vector<std::string>{kEAcute, kSharpS, kNichi, kKelvin})
                                                : r_.pick(literals);
    if (x < 43) return ".";
    if (x < 52) return r_.pick(classes);
    if (x < 64) return r_.pick(std::vector<std::string>{"\\d", "\\w", "\\s", "\\D", "\\W", "\\S", "\\b", "\\B"});
    if (x < 70) return r_.chance(0.5) ? "^" : "$";
    if (x < 74 && !closed_.empty()) return "\\" + std::to_string(r_.pick(closed_));
    if (depth >= 3) return "a";
    const int kind = r_.uniform(0, 9);
    if (kind < 4) {
      const int number = ++groups_;
      std::string g = "(" + alternation(depth + 1) + ")";
      closed_.push_back(number);
      return g;
    }
    if (kind < 6) return "(?:" + alternation(depth + 1) + ")";
    if (kind < 8) return (r_.chance(0.5) ? "(?=" : "(?!") + alternation(depth + 1) + ")";
    return (r_.chance(0.5) ? "(?<=" : "(?<!") + r_.pick(std::vector<std::string>{"a", "b", "ab", "\\d", "[ac]"}) + ")";
  }

  std::string quantifier() {
    std::string q;
    const int x = r_.uniform(0, 99);
    if (x < 30) q = "*";
    else if (x < 50) q = "+";
    else if (x < 65) q = "?";
    else {
      const int m = r_.uniform(0, 3);
      q = r_.chance(0.5) ? "{" + std::to_string(m) + "}" : "{" + std::to_string(m) + "," + std::to_string(m + r_.uniform(0, 2)) + "}";
    }
    if (r_.chance(0.25)) q += "?";  // lazy
    else if (r_.chance(0.05)) q += "+";  // possessive
    return q;
  }

  std::string alternation(int depth) {
    std::string s;
    do {
      if (!s.empty()) s += "|";
      const int n = r_.uniform(1, 4);
      for (int i = 0; i < n; ++i) {
        const std::string a = atom(depth);
        s += a;
        if (r_.chance(0.3) && a != "^" && a != "$" && a.rfind("(?<", 0) != 0) s += quantifier();
      }
    } while (r_.chance(0.2) && s.size() < 60);
    return s;
  }

  Random& r_;
  bool utf8_;
  int groups_ = 0;
  std::vector<int> closed_;
};

const std::vector<std::string>& odd_perl_patterns() {
  static const std::vector<std::string> p = {
      "(a", "a)", "[a", "a{2,1}", "*a", "(?<=a+)b", "a\\", "(?P<n", "a**", "(?<n>a)\\k<m>", "\\1", "[b-a]",
      "(?z)", "a{1", "\\p{Foo}", "[[:foo:]]", "(?<=a|bc)d", "x{99999}", "\\c", "(?", "a++b", "(a)(?1)", "\\x{110000}"};
  return p;
}

// ---------------------------------------------------------------------------------------
// Inputs.

std::string random_line(Random& r, bool utf8, bool long_line, bool bad_byte) {
  static const std::vector<std::string> ascii = {"a", "b", "c", "a", "b", "c", "k", "s", "1", "2", " ", " ",
                                                 ".", "_", "-", "*", "{", "}", "(", "|", "\t", "A", "K", "i"};
  const std::vector<std::string> multibyte = {kEAcute, kEAcuteUpper, kSharpS, kNichi, kKelvin, kDotlessI, kLongS};
  const int length = long_line ? r.uniform(4000, 6000) : r.chance(0.15) ? 0 : r.chance(0.6) ? r.uniform(1, 8) : r.uniform(1, 40);
  const bool upper = r.chance(0.1);
  const double mb = utf8 ? 0.15 : 0.04;  // the C locale sees those bytes too
  std::string s;
  while (static_cast<int>(s.size()) < length) {
    std::string c = r.chance(mb) ? r.pick(multibyte) : r.pick(ascii);
    if (upper && c.size() == 1 && c[0] >= 'a' && c[0] <= 'z') c[0] = static_cast<char>(c[0] - 'a' + 'A');
    s += c;
  }
  if (bad_byte && r.chance(0.3)) s.insert(static_cast<std::size_t>(r.uniform(0, static_cast<int>(s.size()))), "\xff");
  if (r.chance(0.1)) s += '\r';
  return s;
}

struct InputShape {
  bool long_lines = false;
  bool bad_bytes = false;  // 0xff here and there
  bool nul = false;
  int max_lines = 14;
};

InputShape random_shape(Random& r, bool short_lines_only) {
  InputShape shape;
  shape.long_lines = !short_lines_only && r.chance(0.05);
  shape.bad_bytes = r.chance(0.05);
  shape.nul = r.chance(0.05);
  return shape;
}

std::string random_input(Random& r, bool utf8, const InputShape& shape) {
  const int lines = r.uniform(0, shape.max_lines);
  const int long_at = shape.long_lines ? r.uniform(0, std::max(0, lines - 1)) : -1;
  std::string s;
  for (int i = 0; i < lines; ++i) {
    s += random_line(r, utf8, i == long_at, shape.bad_bytes);
    s += '\n';
  }
  if (!s.empty() && r.chance(0.2)) s.pop_back();  // no final newline
  if (shape.nul && !s.empty()) s[static_cast<std::size_t>(r.uniform(0, static_cast<int>(s.size()) - 1))] = '\0';
  return s;
}

// ---------------------------------------------------------------------------------------
// Options.

// Random grep options (an option and its argument stay together when shuffled); env gets
// GREP_COLORS settings now and then.
Args random_options(Random& r, std::vector<std::string>& env) {
  std::vector<Args> groups;
  auto maybe = [&](double p, Args a) {
    if (r.chance(p)) groups.push_back(std::move(a));
  };
  maybe(0.25, {"-i"});
  maybe(0.2, {"-w"});
  maybe(0.1, {"-x"});
  maybe(0.15, {"-v"});
  maybe(0.1, {"-c"});
  maybe(0.3, {"-o"});
  maybe(0.25, {"-n"});
  maybe(0.12, {"-b"});
  maybe(0.03, {"-l"});
  maybe(0.03, {"-L"});
  maybe(0.02, {"-q"});
  maybe(0.04, {"-s"});
  maybe(0.05, {"-a"});
  maybe(0.03, {"-I"});
  if (r.chance(0.1)) groups.push_back({"-m", std::to_string(r.uniform(0, 3))});
  if (r.chance(0.15)) {
    const std::string n = std::to_string(r.uniform(0, 2));
    switch (r.uniform(0, 3)) {
      case 0: groups.push_back({"-A", n}); break;
      case 1: groups.push_back({"-B" + n}); break;
      case 2: groups.push_back({"-C", n}); break;
      default: groups.push_back({"-" + n}); break;
    }
  }
  if (r.chance(0.15)) {
    groups.push_back({"--color=always"});
    if (r.chance(0.3)) env.push_back(r.chance(0.5) ? "GREP_COLORS=mt=01;32:fn=34" : "GREP_COLORS=sl=1:cx=2:rv");
  }
  std::shuffle(groups.begin(), groups.end(), r.rng());
  Args flags;
  for (const Args& g : groups) flags.insert(flags.end(), g.begin(), g.end());
  return flags;
}

// One knob set drawn at random (chunks not so small that a run takes long; the OpenCL
// engine a third of the time) and the default.
std::vector<Knobs> case_knobs(Random& r, std::size_t input_size) {
  const int min_chunk = std::max<int>(1, static_cast<int>(input_size / 200));
  std::vector<Knobs> knobs;
  for (Knobs k : random_knobs(r.rng(), 1, 96)) {
    if (!k.chunk.empty() && std::stoi(k.chunk) < min_chunk) k.chunk = std::to_string(min_chunk + std::stoi(k.chunk));
    knobs.push_back(k);
  }
  knobs.push_back({"", "", ""});
  return knobs;
}

// ---------------------------------------------------------------------------------------
// Random cases.

struct Limits {
  int cases = 150;
  double odd_patterns = 0.07;  // the share of patterns drawn from the odd_*_patterns lists
  // -z: the input's '\n' become the NULs that end records, and some spaces '\n', an
  // ordinary byte inside a record ('.', [^x], \s, ^ and $ must treat it as grep -z does).
  bool null_data = false;
  // Patterns and input of ASCII alone, run in the UTF-8 locale: glibc reads such lines
  // with each pattern's C-locale twin (gnu_regex.cpp's GnuPattern).
  bool ascii_text = false;
};

std::string random_pattern(Random& r, Syntax syntax, bool utf8, bool& backref) {
  if (syntax == Syntax::kPerl) {
    if (r.chance(0.07)) return r.pick(odd_perl_patterns());
    return PerlGenerator(r, utf8).pattern();
  }
  const bool ere = syntax == Syntax::kExtended;
  if (r.chance(0.07)) {
    std::string odd = r.pick(ere ? odd_extended_patterns() : odd_basic_patterns());
    if (r.chance(0.3)) odd = GnuRegexGenerator(r, ere, utf8).pattern() + odd;
    return odd;
  }
  GnuRegexGenerator g(r, ere, utf8);
  std::string p = g.pattern();
  backref = backref || g.has_backref();
  return p;
}

// The patterns as arguments: one operand, -e per pattern, one -e with newlines, or a -f
// file (2 to 5 lines, its path in grep's messages).
Args pattern_args(Random& r, const std::vector<std::string>& patterns, const TempDir& dir, std::string& note) {
  std::string joined;
  for (std::size_t i = 0; i < patterns.size(); ++i) joined += (i ? "\n" : "") + patterns[i];
  const int how = patterns.size() == 1 ? (r.chance(0.6) ? 3 : 2) : r.uniform(0, 2);
  if (how == 0) {
    std::string file = joined;
    if (r.chance(0.85)) file += '\n';
    note += ", -f contents \"" + escape(file, 500) + "\"";
    return {"-f", dir.write("patterns", file)};
  }
  if (how == 1) {
    Args a;
    for (const auto& p : patterns) a.insert(a.end(), {"-e", p});
    return a;
  }
  if (how == 2 || joined.empty() || joined[0] == '-') return {"-e", joined};
  return {joined};
}

// Builds one random case and checks it; returns false on a difference.
bool run_case(std::uint32_t seed, Syntax syntax, Locale locale, const TempDir& dir, const Limits& limits) {
  Random r(seed);
  const bool null_data = limits.null_data;
  const bool utf8 = locale == Locale::kUtf8 && !limits.ascii_text;
  std::vector<std::string> patterns;
  bool backref = false;
  const int count = r.chance(0.8) ? 1 : r.uniform(2, syntax == Syntax::kPerl ? 2 : 5);
  for (int i = 0; i < count; ++i) patterns.push_back(random_pattern(r, syntax, utf8, backref));
  std::vector<std::string> env = locale_env(locale);
  Args args = random_options(r, env);
  if (null_data) {
    args.insert(args.begin(), "-z");
    // gpufilter refuses a fixed string holding a NUL with -z (docs/grep-compatibility.md).
    for (std::string& p : patterns) p.erase(std::remove(p.begin(), p.end(), '\0'), p.end());
  }
  std::string note = "seed " + std::to_string(seed) + " (" + syntax_name(syntax) + ", LC_ALL=" + locale_name(locale) + ")";
  const Args pattern = pattern_args(r, patterns, dir, note);
  args.insert(args.end(), pattern.begin(), pattern.end());

  // Back-references make glibc's matcher slow on long lines: short lines only there.
  const InputShape shape = random_shape(r, backref);
  std::string input = random_input(r, utf8, shape);
  if (null_data) {
    for (char& c : input) {
      if (c == '\n') c = '\0';
      else if (c == ' ' && r.chance(0.3)) c = '\n';
    }
  }
  std::string stdin_input;
  note += ", input \"" + escape(input, 700) + "\"";
  const int where = r.uniform(0, 99);
  if (where < 55) {
    args.push_back(dir.write("input", input));
  } else if (where < 80) {
    stdin_input = input;
  } else {  // two inputs, with or without their names
    std::string other = random_input(r, utf8, InputShape{});
    if (null_data) std::replace(other.begin(), other.end(), '\n', '\0');
    args.push_back(dir.write("input", input));
    if (r.chance(0.5)) {
      args.push_back(dir.write("input2", other));
      note += ", input2 \"" + escape(other, 300) + "\"";
    } else {
      args.push_back("-");
      stdin_input = other;
    }
    if (r.chance(0.4)) args.insert(args.begin(), r.chance(0.5) ? "-h" : "-H");
  }
  if (where >= 55 && where < 80 && r.chance(0.3)) args.insert(args.begin(), "-H");
  const std::vector<Knobs> knobs = case_knobs(r, input.size() + stdin_input.size());
  // Small inputs seldom pay for Hyperscan's selection database: half the cases build it
  // at once, so that its answers are compared too.
  if (r.chance(0.5)) env.push_back("GPUFILTER_REGEX_SELECT=eager");
  return expect_same_with(matcher_flag(syntax), args, stdin_input, knobs, note, env);
}

void run_cases(std::uint32_t seed_base, Syntax syntax, Locale locale, const Limits& limits) {
  TempDir dir;
  Tally tally;
  int failing = 0;
  for (int i = 0; i < case_count(limits.cases); ++i) {
    const std::uint32_t seed = base_seed(seed_base) * 1000u + static_cast<std::uint32_t>(i);
    ++tally.cases;
    if (!run_case(seed, syntax, locale, dir, limits)) {
      ++tally.differing;
      if (++failing >= kMaxFailingCases) {
        ADD_FAILURE() << "stopping after " << failing << " failing cases (of " << (i + 1) << ")";
        break;
      }
    }
  }
  report_tally(std::string(syntax_name(syntax)) + " LC_ALL=" + locale_name(locale) + (limits.ascii_text ? ", ASCII" : ""),
               tally);
}

TEST(RegexRandom, BasicC) { run_cases(101, Syntax::kBasic, Locale::kC, Limits{}); }
TEST(RegexRandom, BasicUtf8) { run_cases(103, Syntax::kBasic, Locale::kUtf8, Limits{}); }
TEST(RegexRandom, ExtendedC) { run_cases(107, Syntax::kExtended, Locale::kC, Limits{}); }
TEST(RegexRandom, ExtendedUtf8) { run_cases(109, Syntax::kExtended, Locale::kUtf8, Limits{}); }
TEST(RegexRandom, PerlC) { run_cases(113, Syntax::kPerl, Locale::kC, Limits{}); }
TEST(RegexRandom, PerlUtf8) { run_cases(127, Syntax::kPerl, Locale::kUtf8, Limits{}); }
TEST(RegexRandom, AsciiTextInUtf8) {
  Limits l;
  l.cases = 100;
  l.ascii_text = true;
  run_cases(151, Syntax::kBasic, Locale::kUtf8, l);
  run_cases(157, Syntax::kExtended, Locale::kUtf8, l);
}
// -z (--null-data): NUL-terminated records that hold '\n'.
TEST(RegexRandom, NullData) {
  Limits l;
  l.cases = 40;
  l.null_data = true;
  run_cases(131, Syntax::kBasic, Locale::kC, l);
  run_cases(137, Syntax::kExtended, Locale::kUtf8, l);
  run_cases(139, Syntax::kPerl, Locale::kC, l);
  run_cases(149, Syntax::kBasic, Locale::kUtf8, l);
}

// ---------------------------------------------------------------------------------------
// Every odd pattern once, in both locales, on a small input: grep's errors (exit 2, its
// message, FILE:LINE: from a -f file), its warnings, and how its parser reads the rest.

void run_odd_patterns(Syntax syntax, const std::vector<std::string>& patterns) {
  TempDir dir;
  Tally tally;
  const std::string input = "a\nb\nab\naa\n(a)\na{1}\n{1}a\n*a\na)\n[:space:]\nx\n\n{\n{a\nbc\nb c\n";
  for (std::size_t i = 0; i < patterns.size(); ++i) {
    const Locale locale = i % 2 == 0 ? Locale::kC : Locale::kUtf8;
    const Knobs knob = i % 3 == 0 ? Knobs{"5", "2", "gpu"} : Knobs{"7", "1", "cpu"};
    const std::string note = std::string(syntax_name(syntax)) + " pattern \"" + escape(patterns[i]) + "\"";
    Args args = i % 4 == 1 ? Args{"-f", dir.write("patterns", "a\n" + patterns[i] + "\n")} : Args{"-e", patterns[i]};
    if (i % 5 == 2) args.insert(args.begin(), "-o");
    if (i % 5 == 3) args.insert(args.begin(), "-x");  // grep wraps the pattern for -x and -w
    if (i % 5 == 4) args.insert(args.begin(), "-w");
    std::vector<std::string> env = locale_env(locale);
    if (i % 7 < 4) env.push_back("GPUFILTER_REGEX_SELECT=eager");  // Hyperscan's reading too
    ++tally.cases;
    if (!expect_same_with(matcher_flag(syntax), args, input, {knob}, note, env)) ++tally.differing;
  }
  report_tally(std::string("odd ") + syntax_name(syntax) + " patterns", tally);
}

TEST(RegexOddPatterns, Basic) { run_odd_patterns(Syntax::kBasic, odd_basic_patterns()); }
TEST(RegexOddPatterns, Extended) { run_odd_patterns(Syntax::kExtended, odd_extended_patterns()); }
TEST(RegexOddPatterns, Perl) {
  run_odd_patterns(Syntax::kPerl, odd_perl_patterns());
  // grep -P takes one pattern: two -e, a newline in one, or a -f file of two lines.
  TempDir dir;
  const std::string two = dir.write("two", "a\nb\n");
  for (const Args& args : std::vector<Args>{{"-e", "a", "-e", "b"}, {"a\nb"}, {"-f", two}, {"-e", "a", "-f", two}})
    expect_same_with("-P", args, "a\nb\n", {{"", "", "cpu"}}, "grep -P with several patterns");
  // -x and -w: -x's form replaces -w's wrapper, so only -x shapes what compiles.
  for (const char* pattern : {"(*UCP)a", "a)(?:b", "a|a b", "(*UTF)a\\b"})
    for (const Args& args : std::vector<Args>{{"-x", "-w", "-e", pattern}, {"-w", "-e", pattern}, {"-c", "-x", "-e", pattern}})
      expect_same_with("-P", args, "a\nb\nab\na b\n", {{"", "", "cpu"}}, "grep -P with -x and -w");
}

// "\a" under -i: grep's DFA selects "a" and "A" with it, glibc's regex (its -o spans, and
// the lines of a list with a back-reference) neither. Found by an outside-style fuzzer.
TEST(RegexOddPatterns, EscapedLowercaseLetterUnderIgnoreCase) {
  const std::string input = "aB0\nab0\nAB0\nxab0\nQ\n";
  Tally tally;
  for (const Syntax s : {Syntax::kBasic, Syntax::kExtended}) {
    const std::string group = s == Syntax::kBasic ? "\\(\\a\\)B." : "(\\a)B.";
    const std::string backref = s == Syntax::kBasic ? "\\(x\\)\\1" : "(x)\\1";
    const std::vector<Args> cases = {{"-i", "\\ab."},           {"-i", "-o", "\\aB."},    {"-i", "-n", "\\<\\a"},
                                     {"-i", "-c", group},       {"-i", "-w", "\\ab0"},     {"-i", "-x", "\\aB0"},
                                     {"-i", "-e", "\\ab.", "-e", backref},                 {"-i", "-c", "\\q"},
                                     {"-i", "-o", "-e", "\\ab", "-e", "Q"},               {"\\ab."},
                                     {"-i", "-o", "\\a"},       {"-i", "-o", "-e", "\\a", "-e", "\\a"}};
    for (std::size_t i = 0; i < cases.size(); ++i) {
      const Locale l = i % 2 == 0 ? Locale::kC : Locale::kUtf8;
      std::vector<std::string> env = locale_env(l);
      if (i % 3 == 0) env.push_back("GPUFILTER_REGEX_SELECT=eager");
      ++tally.cases;
      if (!expect_same_with(matcher_flag(s), cases[i], input, {{"3", "2", "cpu"}}, "escaped letter under -i", env))
        ++tally.differing;
    }
  }
  report_tally("escaped letters under -i", tally);
}

// glibc's regex, which matches back-references here as in grep, recurses without end on
// some of them under a repetition; grep 3.8 catches the overflow (gnulib's c-stack), says
// "stack overflow" and exits 2. So does gpufilter now, on whichever thread met it: it died
// of SIGSEGV. Found by the random differential (seed 2002, BRE in UTF-8).
TEST(RegexOddPatterns, EndlessBackReferenceRecursionIsAStackOverflow) {
#if defined(GPUFILTER_SANITIZED) && defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer reports the overflow itself (no handler of ours is installed under it)";
#endif
  const std::string input = "* \n-}\xc3\xa9 |\nKIB KB \nb\xe6\x97\xa5}\xe2\x84\xaa\n|1*}(\naab\n";
  Tally tally;
  const std::vector<Args> cases = {{"-c", "b*[[:alnum:]_]\\($\\)\\1\\{,3\\}\\+"},
                                   {"\\(\\)\\1\\{,3\\}\\+"},
                                   {"-o", "\\(a*\\)\\1\\{2,3\\}\\+"},
                                   {"-n", "a\\(\\)\\1*\\+"}};  // no overflow: matched
  for (const Locale l : {Locale::kC, Locale::kUtf8})
    for (const Args& args : cases) {
      ++tally.cases;
      if (!expect_same_with("-G", args, input, {{"", "", "cpu"}, {"5", "2", "gpu"}, {}}, "endless back-reference",
                            locale_env(l)))
        ++tally.differing;
    }
  report_tally("endless back-references", tally);
}

// dfa.c drops an atom repeated at most zero times, with what it would have left to
// regex: "\\a[[=b=]]{0}" is the DFA's to decide (its "\\a" the letter under -i), not
// regex's (whose "\\a" matches nothing there).
TEST(RegexOddPatterns, AtomsRepeatedZeroTimesAreDropped) {
  const std::string input = "a1A2-b-0.90A\n_2A_.- aa2\n19 0\nb\n";
  const std::vector<std::pair<std::string, Args>> cases = {
      {"-E", {"-i", "\\a[[=b=]]{0}"}},    {"-E", {"-i", "-c", "\\a([[=b=]]x){0,0}"}}, {"-G", {"-i", "\\a\\([[=b=]]\\)\\{0\\}"}},
      {"-E", {"-i", "\\a[[=b=]]{,0}"}},   {"-E", {"-i", "\\a[[=b=]]{1}"}},           {"-E", {"-i", "-o", "\\a[[.b.]]{0}2"}},
      {"-G", {"-e", "a\\)"}},             {"-E", {"-i", "-w", ".*\\a(|(b[[=a=]])*){,0}\\S"}},
      // Intervals read as numbers: {00} is {0}, {01} and {0,01} at most once.
      {"-E", {"-i", "\\a[[=b=]]{00}"}},   {"-G", {"-i", "-o", "\\a[[=b=]]\\{0,00\\}2"}}, {"-E", {"-n", "(^a){01}"}},
      {"-G", {"-c", "\\(^a\\)\\{0,01\\}"}}, {"-E", {"-o", "(^1){01}9"}}};
  for (const Locale l : {Locale::kC, Locale::kUtf8})
    for (const auto& [matcher, args] : cases)
      expect_same_with(matcher, args, input, {{"3", "2", "cpu"}}, "an atom repeated zero times", locale_env(l));
}

// grep's -w walk (regex decides in UTF-8) is one of the joined backref-free patterns, and
// a shorter match at a place is asked of a string cut there: an end anchor or a word
// assertion of one pattern holds at the cut once another has brought the walk there.
TEST(RegexOddPatterns, WordWalkOfJoinedPatternsWithAnchors) {
  const std::string input = "-b kab2a\n-b\nb k\nab\nx-yb z\n\xc3\xa9-b c\n";
  const std::vector<Args> cases = {{"-w", "-e", "[[:space:]ia-z]*\\W", "-e", "[[:print:]_]\\'"},
                                   {"-w", "-e", "[a-z]*\\W", "-e", "b\\>"},
                                   {"-w", "-c", "-e", "[a-z]*\\W", "-e", "b\\b"},
                                   {"-w", "-o", "-e", "[a-z]*\\W", "-e", "b$"},
                                   {"-w", "-n", "-e", "y[a-z]*\\W", "-e", "[a-z]\\B"}};
  compare_cases("-E", cases, input, {{"3", "2", "cpu"}}, "-w walk of joined patterns", "-w walk of joined patterns",
                {Locale::kUtf8, Locale::kC});
}

// An ERE ')' that closes nothing closes grep's -w/-x wrapper around the whole list; where
// grep's regex decides the lines (-w in UTF-8, \w there, a back-reference) the wrapped
// list's DFA superset still passes them first ("{)|" under -w needs a '{' or a ')').
TEST(RegexOddPatterns, StrayCloseBeforeGrepsRegexDecides) {
  const std::string input = "c}\n*s \r\n\n|2k\na) b)\nx))\n{\n a{\n(\n)\n c(a\nbx\na)\n1ax{bc\n\xc3\xa9)\n";
  const std::vector<Args> cases = {{"-w", "-e", "{)|"},          {"-w", "-e", "x)|"},
                                   {"-w", "-e", "a)b|c"},        {"-w", "-e", "b.)", "-e", "a"},
                                   {"-w", "-i", "-e", "-x)", "-e", "b."}, {"-x", "-e", "a|cb", "-e", ")-{\\w", "-e", "))"},
                                   {"-w", "-o", "-e", "(a)\\1|)", "-e", "b"}, {"-w", "-c", "-e", "))+", "-e", ".+"}};
  compare_cases("-E", cases, input, {{"3", "2", "cpu"}, {"64", "1", "gpu"}}, "stray ')' under -w/-x",
                "stray ')' under -w/-x", {Locale::kUtf8, Locale::kC});
}

// Under -i in UTF-8 dfa.c still reads a bracket of characters, [:digit:] and digit ranges
// itself (with each character's folded counterparts), so a leading ERE '{1}' repeats
// nothing there (the DFA's reading) rather than being regex's literal "{1}".
TEST(RegexOddPatterns, BracketsUnderIgnoreCaseInUtf8) {
  const std::string input = "k\nK\n\xe2\x84\xaa\n\xc5\xbf\ns\n\xc4\xb1\ni\n\xc3\xa9\n\xc3\x89\n5\n{1}k\nxky\n-\n";
  const std::vector<std::string> patterns = {"{1}[[:digit:]]", "{1}[k5]", "{1}[\xc3\xa9]", "{1}[-.s]", "[k]", "[s]",
                                             "[i]",            "x[k]y",  "{1}[A-C5]",    "{1}[[:alpha:]]", "[0-9]s"};
  Tally tally;
  for (std::size_t i = 0; i < patterns.size(); ++i) {
    for (const Args& extra : std::vector<Args>{{}, {"-o"}, {"-x"}, {"-c", "-v"}}) {
      Args args = {"-i"};
      args.insert(args.end(), extra.begin(), extra.end());
      args.push_back(patterns[i]);
      std::vector<std::string> env = locale_env(Locale::kUtf8);
      if (i % 3 == 0) env.push_back("GPUFILTER_REGEX_SELECT=eager");
      ++tally.cases;
      if (!expect_same_with("-E", args, input, {{"3", "2", "cpu"}}, "bracket under -i in UTF-8", env)) ++tally.differing;
    }
  }
  report_tally("brackets under -i in UTF-8", tally);
}

// Under -i in UTF-8, 'k' and U+212A fold within ASCII or not at all to grep
// (case_folded_counterparts has no U+212A for 'k'), so two such fixed strings are
// grep's fixed-string matcher's, whose -w walk meets the empty pattern inside a multibyte
// character; 's' (U+017F) keeps them with its regex matcher.
TEST(RegexOddPatterns, FixedStringsThatFoldWithinAsciiUnderIgnoreCase) {
  const std::string input = "9\xf0\x9f\x98\x80" "2\n\nk\nK\n" + kKelvin + "\nx" + kKelvin + "y\nxky\n\xc5\xbf\nS\n";
  const std::vector<Args> cases = {{"-i", "-w", "-e", "K", "-e", ""},         {"-i", "-w", "-e", kKelvin, "-e", ""},
                                   {"-i", "-w", "-x", "-o", "-e", "", "-e", "k"}, {"-i", "-w", "-c", "-e", "", "-e", "k"},
                                   {"-i", "-e", "k", "-e", "x"},                {"-i", "-w", "-e", "s", "-e", ""},
                                   {"-i", "-o", "-e", "xky", "-e", kKelvin},    {"-i", "-c", "-e", "k", "-e", "s"}};
  Tally tally;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    ++tally.cases;
    if (!expect_same_with("-G", cases[i], input, {{"3", "2", "cpu"}}, "fixed strings under -i in UTF-8",
                          locale_env(Locale::kUtf8)))
      ++tally.differing;
  }
  report_tally("fixed strings folding within ASCII", tally);
}

// An equivalence class or a collating symbol hands the whole list to grep's regex in the
// C locale too (dfa.c's known_bracket_exp), and so does a back-reference; -w is then
// regex's walk of shorter and later matches, which Hyperscan's wrapper does not read.
TEST(RegexOddPatterns, ListsThatGrepsRegexDecides) {
  const std::string input = "A\n 2_\n.9\n b\n_ 0 \nab\nB_-.Abb .1\n\n-1\n-2\n_b..bA\n";
  const std::vector<std::pair<std::string, Args>> cases = {
      {"-G", {"-i", "-e", "\\a", "-e", "[[=b=]]"}},   {"-G", {"-i", "-e", "\\a", "-e", "[[.b.]]"}},
      {"-G", {"-w", "-e", "[^[=e=]]\\?"}},            {"-G", {"-w", "-e", "[^e]\\?", "-e", "\\(x\\)\\1"}},
      {"-G", {"-w", "-e", "[^[.a.][:digit:]]\\(\\)\\|"}}, {"-E", {"-w", "-e", "([[=a=][:blank:]]*)"}},
      {"-E", {"-w", "-e", "|[^[:lower:][=b=][:digit:]]"}}, {"-G", {"-w", "-e", "", "-e", "[^[=a=]]"}},
      {"-E", {"-w", "-o", "-e", "|[[=a=][:punct:]]"}},    {"-G", {"-w", "-c", "-e", "[[.-.][:alpha:]]\\{,\\}"}},
      // A '{' that starts a branch: regex's repetition of nothing once the list's superset
      // passes the line, as a pattern regex decides lets every line pass.
      {"-E", {"-e", "{", "-e", "[[=e=]]"}},                {"-E", {"-n", "-e", "{[[:upper:]]", "-e", "[[=b=]]"}},
      {"-E", {"-c", "-e", "[[.a.]]", "-e", "{"}},          {"-E", {"-e", "[[:lower:]]", "-e", "{"}},
      {"-E", {"-v", "-e", "\\<", "-e", "{"}}};
  Tally tally;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    std::vector<std::string> env = locale_env(i >= 10 && i % 2 == 1 ? Locale::kUtf8 : Locale::kC);
    if (i % 2 == 0) env.push_back("GPUFILTER_REGEX_SELECT=eager");
    ++tally.cases;
    if (!expect_same_with(cases[i].first, cases[i].second, input, {{"3", "2", "cpu"}}, "a list regex decides", env))
      ++tally.differing;
  }
  report_tally("lists grep's regex decides", tally);
}

// In UTF-8, -i with a range leaves the line to grep's regex, which folds the range's ends
// first; on ASCII lines Hyperscan answers in its place where the two readings agree (the
// range holds no letter, or its ends are letters of one case), glibc where they do not.
TEST(RegexOddPatterns, CaselessRangesOnAsciiLinesInUtf8) {
  std::string input;
  for (int c = 0x21; c < 0x7f; ++c) input += std::string(1, static_cast<char>(c)) + "\n";
  input += "user Bob\nUSER x\nuser 9\nsa\n";
  const std::vector<std::string> patterns = {"[a-z]",      "[A-Z]",     "[0-9]",  "[0-c]",  "[@-Z]",
                                             "[Z-a]",      "[a-{]",     "[!-/]",  "[^a-f]", "user [a-z]+",
                                             "[b-dX-Z]+", "[[:upper:]]", "\\<[a-c]",
                                             // ranges between non-letters that span letters
                                             "[ -_]",     "[!-~]",     "[^ -_]", "s[1-_]"};
  Tally tally;
  for (std::size_t i = 0; i < patterns.size(); ++i) {
    for (const Args& extra : std::vector<Args>{{}, {"-o"}, {"-c", "-v"}, {"-w"}}) {
      Args args = {"-i"};
      args.insert(args.end(), extra.begin(), extra.end());
      args.insert(args.end(), {"-e", patterns[i]});
      std::vector<std::string> env = locale_env(Locale::kUtf8);
      env.push_back("GPUFILTER_REGEX_SELECT=eager");
      ++tally.cases;
      if (!expect_same_with("-E", args, input, {{"3", "2", "cpu"}, {"64", "1", "cpu"}}, "caseless range in UTF-8", env))
        ++tally.differing;
    }
  }
  report_tally("caseless ranges on ASCII lines in UTF-8", tally);
}

// Under -i, in the C locale and on ASCII lines in UTF-8, a pattern whose letters can be
// spelled as brackets of both cases is read so, without glibc's RE_ICASE (and with its
// fastmap); the others keep RE_ICASE. Both give grep's answers, -o's parts included.
TEST(RegexOddPatterns, CaselessPatternsWithTheirLettersSpelledOut) {
  const std::string input =
      "Error: disk FULL\nwarn x1\nERRor_2 [a] {b}\nAbc aBC abc\n  kK sS\nuser=Bob id=0x1F\nQ_q-z\n\nxA-b]\n";
  const std::vector<std::string> patterns = {
      "error|warn",     "[aA]b+c",       "[^bB]c",      "[0-9]+[a-f]*", "\\w+=[^ ]+", "\\bab",
      "[[:alpha:]]{3}", "[[:upper:]]b",  "(a)\\1",     "[]a]",         "[^]A]b",     "\\Bb",
      "x[A-b]",         "[[:digit:]S]s", "q.Q",         "[ -_]{2}",     "^[a-z]+ ?$", "id=0X1f"};
  Tally tally;
  for (const std::string& p : patterns)
    for (const Args& extra : std::vector<Args>{{"-o"}, {"-c"}, {"-w", "-o"}, {"-x"}, {"--color=always"}})
      for (const Locale l : {Locale::kC, Locale::kUtf8}) {
        Args args = {"-i"};
        args.insert(args.end(), extra.begin(), extra.end());
        args.insert(args.end(), {"-e", p});
        ++tally.cases;
        if (!expect_same_with("-E", args, input, {{"3", "2", "cpu"}, {"", "", "gpu"}}, "caseless, letters spelled out",
                              locale_env(l)))
          ++tally.differing;
      }
  report_tally("caseless patterns, letters spelled out", tally);
}

// Under -i in the C locale grep's DFA folds a bracket's bytes one by one, where glibc's
// regex folds a range's ends first ("[A-b]" holds '_' for the DFA, not for regex).
TEST(RegexOddPatterns, CaselessBracketsAsTheDfaReadsThem) {
  const std::string input = "_\n[\n^\nb\nB\n]\n-\nx\n\\\n`\n";
  Tally tally;
  const std::vector<std::string> brackets = {"[[:lower:][:blank:]A-b]", "[[:upper:]A-b]", "[^A-b]", "[]a-]",
                                             "[^]^-]", "[^^]", "[^[:lower:]]", "[xA-b]"};
  for (std::size_t i = 0; i < brackets.size(); ++i) {
    for (const Args& extra : std::vector<Args>{{"-i"}, {"-i", "-o"}, {"-i", "-w", "-n"}, {"-i", "-c", "-v"}}) {
      Args args = extra;
      args.insert(args.end(), {"-e", brackets[i] + (i % 2 == 0 ? "" : "x*")});
      std::vector<std::string> env = locale_env(Locale::kC);
      if (i % 3 == 0) env.push_back("GPUFILTER_REGEX_SELECT=eager");
      ++tally.cases;
      if (!expect_same_with(i % 2 == 0 ? "-G" : "-E", args, input, {{"3", "2", "cpu"}}, "caseless bracket", env))
        ++tally.differing;
    }
  }
  // Where grep's regex decides the list, a range is read with its ends folded first.
  for (const Args& args : std::vector<Args>{{"-i", "-e", "[A-b0b]\\W", "-e", "\\(x\\)\\1"},
                                            {"-i", "-c", "-e", "[^A-b]x*", "-e", "[[=q=]]"},
                                            {"-i", "-e", "[[=a=]A-b]"}, {"-i", "-n", "-e", "[[.a.]A-b]"}}) {
    ++tally.cases;
    if (!expect_same_with("-G", args, input + "_  0\nb- \n", {{"3", "2", "cpu"}}, "caseless range in a regex list",
                          locale_env(Locale::kC)))
      ++tally.differing;
  }
  report_tally("caseless brackets", tally);
}

// -x -w -o with an empty pattern prints an empty line's newline as its match, and -T's
// tab goes before it, as before any match that is not empty.
TEST(RegexOddPatterns, InitialTabBeforeAMatchedNewline) {
  TempDir dir;
  const std::string empty_line = dir.write("one", "\n");
  const std::string none = dir.write("none", "");
  for (const Args& args : std::vector<Args>{{"-x", "-w", "-o", "-T", "-e", "", empty_line, none},
                                            {"-x", "-w", "-o", "-n", "-T", "-e", "", empty_line},
                                            {"-x", "-w", "-o", "-b", "-T", "--color=always", "-e", "", empty_line}})
    expect_same_with("-G", args, "", {{"3", "2", "cpu"}}, "-T before a matched newline");
}

// ---------------------------------------------------------------------------------------
// Invalid UTF-8 in the C.UTF-8 locale: grep prints "binary file matches" instead of a
// selected line that holds an encoding error (the file is not binary in the C locale).

// -i in a UTF-8 locale: Hyperscan reads each letter with grep's counterparts spelled out
// ('s' as s, S and U+017F; 'i' as i, I and U+0131; 'é' as é and É; U+212A is no
// counterpart of 'k' there), and ASCII blocks and lines through the C locale's reading;
// the factors are ORs of the same counterparts. Before, every line beyond ASCII went to
// glibc (0.65 s against grep's 0.05 on a log of such lines). Lines of letters whose folds
// differ, ASCII runs longer than a block, every option that reads the selection.
TEST(RegexUtf8, IgnoreCaseReadsEachLetterAsGrepsDfa) {
  const std::vector<std::string> words = {"session", "SeSSion", "\xc5\xbf" "ession", "kernel", "\xe2\x84\xaa" "ernel",
                                          "caf\xc3\xa9", "CAF\xc3\x89", "\xc4\xb1" "d", "\xc4\xb0" "d", "\xcf\x83", "\xce\xa3",
                                          "\xcf\x82", "stra\xc3\x9f" "e", "STRASSE", "\xc2\xb5", "\xce\x9c", "ab", "x", "42"};
  std::string input;
  unsigned seed = 11;
  const auto next = [&seed] { return seed = seed * 1103515245u + 12345u, (seed >> 16) & 0x7fff; };
  for (int line = 0; line < 40000; ++line) {
    if (line % 5000 < 1700) {  // ASCII alone for more than a 64 KiB block
      input += "plain ascii line " + std::to_string(line) + (line % 7 == 0 ? " Session\n" : " kern\n");
      continue;
    }
    for (unsigned n = next() % 6; n > 0; --n) input += words[next() % words.size()] + (next() % 3 ? " " : "");
    input += '\n';
  }
  const std::vector<std::string> patterns = {"session", "kernel", "caf.", "\xc3\xa9", "\xcf\x83", "id",
                                             "strasse", "\xc2\xb5", "ab|k", "[0-9]s", "^s.*n$", "e+l"};
  const std::vector<Args> options = {{"-c"}, {"-n"}, {"-c", "-v"}, {"-c", "-x"}, {"-o"}, {"-c", "-w"}};
  Tally tally;
  for (std::size_t i = 0; i < patterns.size(); ++i) {
    const Args& args = options[i % options.size()];
    std::vector<std::string> env = locale_env(Locale::kUtf8);
    if (i % 2 == 0) env.push_back("GPUFILTER_REGEX_SELECT=eager");
    ++tally.cases;
    if (!expect_same_with("-E", Args{"-i"} + args + Args{"-e", patterns[i]}, input, {{"", "", "cpu"}},
                          "-i in UTF-8", env))
      ++tally.differing;
  }
  report_tally("-i in UTF-8 over many lines", tally);
}

TEST(RegexEncodingErrors, InvalidUtf8Lines) {
  const std::string input = "a\nab\xff\n\xff\nb\xc3\n\xc3\xa9 a\n\xe6\x97\n";
  const std::vector<Args> cases = {{"a"}, {"-v", "a"}, {"-c", "a"}, {"-o", "a"}, {"-a", "a"}, {"b"}, {"-n", "."},
                                   {"-x", ".*"}, {"-l", "b"}, {"-I", "a"}, {"-w", "a"}, {"-i", "A"}};
  Tally tally;
  for (const Syntax s : {Syntax::kBasic, Syntax::kExtended, Syntax::kPerl}) {
    for (std::size_t i = 0; i < cases.size(); ++i) {
      if ((i + static_cast<std::size_t>(s)) % 2 != 0) continue;  // half of them per syntax
      for (const Locale l : {Locale::kC, Locale::kUtf8}) {
        ++tally.cases;
        if (!expect_same_with(matcher_flag(s), cases[i], input, {{"3", "2", "cpu"}}, "invalid UTF-8", locale_env(l)))
          ++tally.differing;
      }
    }
  }
  report_tally("invalid UTF-8 lines", tally);
}

// A surrogate's encoding (ED A0 80) and forms past U+10FFFF (F4 90 80 80, F8 88 80 80 80):
// glibc's regex reads them as characters, grep's DFA as bytes that '.' and brackets never
// match ("a.b" selects no "a\xed\xa0\x80b"; -o, found by grep's regex once the DFA has
// passed the line, reads them as glibc does). Found by a differential fuzzer over large
// inputs (`.{3}` counted three lines more than grep).
TEST(RegexEncodingErrors, SurrogatesAndFormsPastTheLastCodePoint) {
  std::string input;
  for (const std::string odd : {"\xed\xa0\x80", "\xed\xbf\xbf", "\xf4\x90\x80\x80", "\xf5\x80\x80\x80",
                                "\xf8\x88\x80\x80\x80", "\xfc\x84\x80\x80\x80\x80", "\xed\x9f\xbf", "\xf4\x8f\xbf\xbf"})
    input += "a" + odd + "b\nxa" + odd + "by a\xc3\xa9" "b\n" + odd + "\n\xc3\xa9 " + odd + " 1\n";
  const std::vector<Args> cases = {{"-a", "-c", "a.b"},   {"-a", "-c", "^.*$"},   {"-a", "-n", "a[^x]b"},
                                   {"-a", "-c", "a..b"},  {"-a", "-o", "a.b"},    {"-a", "-c", "."},
                                   {"-a", "-c", "^.$"},   {"-a", "-o", "[^a]"},   {"-c", "a.*b"},
                                   {"-a", "-c", "-v", "[[:alpha:]]"}, {"-a", "-x", "-c", ".*"},
                                   {"-a", "-i", "-c", "A.B"}};
  Tally tally;
  for (const Syntax s : {Syntax::kBasic, Syntax::kExtended}) {
    for (const Args& args : cases) {
      for (const Locale l : {Locale::kC, Locale::kUtf8}) {
        ++tally.cases;
        if (!expect_same_with(matcher_flag(s), args, input, {{"3", "2", "cpu"}}, "surrogates and forms past U+10FFFF",
                              locale_env(l)))
          ++tally.differing;
      }
    }
  }
  report_tally("surrogates and forms past U+10FFFF", tally);
}

// Where grep's regex decides (\W in UTF-8), it asks one regex of the backref-free patterns
// joined; on a line that is not valid UTF-8 glibc answers that one otherwise than each
// pattern alone when one needs its multibyte reading: -i -e A -e '\W' selects nothing.
TEST(RegexEncodingErrors, JoinedPatternsOnInvalidLines) {
  const std::string input = "\xc4\xb1" "a0\xc0\xaf\xf0\x9f\n\xc4\xb1" "a0 b\n" "xa\xc0 b\n\xc4\xb1" "Ab \xf0\x9f\n";
  const std::vector<Args> cases = {{"-i", "-e", "A", "-e", "\\W"},       {"-i", "-c", "-e", "A", "-e", "\\s"},
                                   {"-i", "-o", "-a", "-e", "A", "-e", "\\W"}, {"-i", "-w", "-e", "a", "-e", "\\W"},
                                   {"-i", "-e", "A", "-e", "[[:alpha:]]b"},  {"-i", "-o", "-a", "-e", "b", "-e", "\\s"},
                                   {"-e", "a", "-e", "\\W"},               {"-i", "-x", "-a", "-e", "A", "-e", "\\W"}};
  Tally tally;
  for (const Syntax s : {Syntax::kBasic, Syntax::kExtended}) {
    for (const Args& args : cases) {
      ++tally.cases;
      if (!expect_same_with(matcher_flag(s), args, input, {{"3", "2", "cpu"}}, "joined patterns, invalid UTF-8",
                            locale_env(Locale::kUtf8)))
        ++tally.differing;
    }
  }
  report_tally("joined patterns on invalid UTF-8 lines", tally);
}

// The joined regex is asked only of lines grep's DFA superset passes: a '{' starting an
// ERE branch is a literal to the superset and a repetition of nothing to glibc, so -E -e q
// -e '{\>' selected "9\xffbA(B" (no '{') through the joined regex. Found by an outside-style
// fuzzer (seed 90210).
TEST(RegexEncodingErrors, JoinedPatternsPassTheSupersetFirst) {
  const std::string input = "9\xff" "bA(B\r\n9\xff" "bA{B\nx1c(\xc3\x89\n\xc3\x89{ c\n";
  const std::vector<Args> cases = {{"-e", "q", "-e", "{\\>"},        {"-a", "-e", "{", "-e", "{\\>"},
                                   {"-c", "-e", "q", "-e", "{B\\>"},  {"-w", "-a", "-e", "q", "-e", "{\\>"},
                                   {"-o", "-a", "-e", "q", "-e", "{\\>"}, {"-a", "-n", "-e", "q", "-e", "{b"},
                                   {"-w", "-c", "-e", "q", "-e", "\\W{"}};
  Tally tally;
  for (const Args& args : cases) {
    ++tally.cases;
    if (!expect_same_with("-E", args, input, {{"3", "2", "cpu"}}, "joined patterns and the superset",
                          locale_env(Locale::kUtf8)))
      ++tally.differing;
  }
  report_tally("joined patterns and the superset", tally);
}

// PCRE2 cannot decide a line ((*UTF) on invalid UTF-8 in the C locale: error -23; a
// pattern past the backtracking limit): grep prints every line before it and dies with
// "FILE: internal PCRE error: -23" (even under -s), searching no further file. gpufilter
// went on to the next files, dropped the lines its workers had decided in that piece of a
// large file, and did not name the file.
TEST(RegexEncodingErrors, PerlMatchErrorsEndTheRunAfterTheLinesBeforeThem) {
  TempDir dir;
  const std::string bad = dir.write("bad", "ax\nbx\n\xff x\ncx\n");
  const std::string good = dir.write("good", "x\n");
  std::string lines;
  for (int i = 0; i < 400000; ++i) lines += "ax " + std::to_string(i) + "\n";
  // 7 MB: a farm thread searches it, or with -j1 the pipeline, whose workers decide pieces.
  const std::string large = dir.write("large", lines + "\xff x\n" + lines);
  const std::string backtrack = dir.write("backtrack", "ab\n" + std::string(40, 'a') + "c\nab\n");
  const std::vector<Args> cases = {{"(*UTF)x", good, bad, good}, {"-s", "(*UTF)x", bad, good}, {"-c", "(*UTF)x", bad},
                                   {"-n", "(*UTF)x", good, large, good}, {"-j1", "(*UTF)x", large, good},
                                   {"(a+)+$", backtrack, good}};
  for (const Args& a : cases) {
    Args grep_args = a;
    if (grep_args[0] == "-j1") grep_args.erase(grep_args.begin());
    const ProcessResult g = run_process(Args{grep_binary(), "-P"} + grep_args, {}, locale_env(Locale::kC));
    const ProcessResult r = run_process(Args{gpufilter_binary(), "-P"} + a, {}, locale_env(Locale::kC));
    EXPECT_EQ(g.status, 2) << describe_args(a);
    EXPECT_EQ(r.status, g.status) << describe_args(a);
    EXPECT_TRUE(r.out == g.out) << describe_args(a) << "\n" << first_difference(g.out, r.out);
    EXPECT_EQ(r.err.substr(r.err.find(": ")), g.err.substr(g.err.find(": "))) << describe_args(a);
  }
}

// A collating symbol that starts a range: "[[.a.]-c]" is a..c (read as {a, -, c} before).
TEST(RegexOddPatterns, CollatingSymbolsAsRangeEnds) {
  const std::string input = "a\nb\nc\n-\n.\nz\nA\n";
  for (const Locale locale : {Locale::kC, Locale::kUtf8})
    for (const char* pattern : {"[[.a.]-c]", "[[.-.]-z]", "[x[.a.]-c]", "[^[.a.]-c]", "[[.a.]-]", "[a-[.c.]]"})
      for (const Args& flags : {Args{"-n"}, Args{"-o"}, Args{"-i", "-c"}, Args{"-v", "-c"}})
        for (const char* matcher : {"-G", "-E"})
          expect_same_with(matcher, flags + Args{pattern}, input, {{"", "", "cpu"}, {"5", "", "cpu"}}, "",
                           locale_env(locale));
}

// Under -i in UTF-8 grep's fixed-string matcher takes the patterns whose characters fold
// within ASCII or not at all ("😀", "a😀", the empty one; fgrep_icase_available) and folds
// ASCII letters byte by byte: "-F -w -i -e ''" selects "a😀b" as "-F -w -e ''" does (its
// walk finds an empty match inside the emoji), where glibc's case-folding search did not.
TEST(RegexOddPatterns, CaselessCharactersKeepGrepsFixedMatcherUnderDashI) {
  const std::string input = "a\xf0\x9f\x98\x80" "b\nab\n\n x\nAB\nxAby\nx ab y\n\xc3\x80" "B ab\n\xc3\xa9t \xe2\x84\xaa\n"
                            "b\xc3\xa9\n\xc3\xa9" "b c\n\xce\xa3 \xcf\x82\n";
  for (const Args& patterns : {Args{"-e", ""}, Args{"-e", "", "-e", "x"}, Args{"-e", "", "-e", "\xf0\x9f\x98\x80"},
                               Args{"-e", "a\xf0\x9f\x98\x80", "-e", ""}, Args{"-e", "\xf0\x9f\x98\x80" "b"},
                               Args{"-e", "aB", "-e", "y"}, Args{"-e", "\xc3\xa9"}, Args{"-e", "k"}})
    for (const Args& flags : {Args{"-F", "-w", "-i"}, Args{"-F", "-i", "-o"}, Args{"-F", "-w", "-i", "-o"},
                              Args{"-F", "-x", "-i"}, Args{"-G", "-w", "-i", "-c"}, Args{"-F", "-w", "-i", "--color=always"}})
      expect_same_with(flags[0], Args(flags.begin() + 1, flags.end()) + patterns, input, {{"", "", "cpu"}}, "",
                       locale_env(Locale::kUtf8));
}

// A pattern Hyperscan cannot read exactly goes to glibc, whose time grows with the square
// of a long line on some ("\\([^[:space:]]\\+\\)\\{1,3\\}.y" in UTF-8: minutes on 70 KB of
// 'x'): a line of 1 KiB or more meets the pattern's superset in Hyperscan first, as grep's
// DFA superset passes it first. The answers stay grep's, on long lines of few characters
// (so that the patterns match often), with the constructs the superset reads as ".*" or
// nothing: UTF-8 brackets, \w \s, back-references, word assertions.
TEST(RegexLongLines, TheSupersetGateKeepsGrepsAnswers) {
  std::mt19937 random(20261130);
  const std::vector<std::string> alphabet = {"a", "b", "x", "y", " ", "\xc3\xa9", "-", "_", "1"};
  std::string input;
  for (int k = 0; k < 40; ++k) {
    std::vector<std::string> some;
    for (int j = 0; j < 3; ++j) some.push_back(alphabet[random() % alphabet.size()]);
    const std::size_t length = 1000 + random() % 3000;
    for (std::size_t n = 0; n < length; ++n) input += some[random() % some.size()];
    input += '\n';
  }
  input += std::string(70000, 'x') + "\n" + std::string(5000, 'x') + "zy\n";
  const std::vector<Args> cases = {
      {"-G", "\\([^[:space:]]\\+\\)\\{1,3\\}.y"}, {"-E", "[^\xc3\xa9]+b\\>"}, {"-E", "\\w+ \\W[\xc3\xa9]"},
      {"-G", "\\(a\\)\\1b\\|x\\(y\\)\\2"},  {"-E", "\\<[[:alpha:]]+-1"}, {"-E", "(\\S\\s){3}_"},
      {"-E", "-x", "[^-]*"},   {"-G", "-c", "\\(b\\).*\\1a"},
      {"-E", "-o", "[^a ]{2}_1"},                {"-E", "-v", "\\bx+\\Bb"}};
  for (const Locale locale : {Locale::kC, Locale::kUtf8})
    for (const Args& a : cases)
      expect_same_with(a[0], Args(a.begin() + 1, a.end()), input, {{"", "", "cpu"}}, "", locale_env(locale));
}

// -o and --color walked by Hyperscan with start of match (HsSpans): the leftmost match,
// the longest there, also where a later end has an earlier start ("b|abbbc"), across
// patterns, with -i, and on lines beyond ASCII in UTF-8 (glibc walks those).
TEST(RegexOnlyMatching, HyperscansWalkFindsGrepsParts) {
  const std::string input =
      "abbbc abc\nxabcabcab\naaa bbb ab\n1.2.3.4.5 10.0.0.1\nfoo@bar.com, a.b@c\n\xc3\xa9" "abc \xc3\xa9\xc3\xa9 "
      "abc\nAbC aBc\n";
  const std::vector<Args> cases = {
      {"-o", "-e", "b|abbbc"},        {"-o", "-e", "a|ab|abc"},     {"-o", "-e", "b", "-e", "abbbc"},
      {"-o", "-e", "(a|b)+c"},        {"-o", "-e", "[a-c]{2}"},     {"-o", "-e", "[0-9]+(\\.[0-9]+){3}"},
      {"-o", "-b", "-e", "\\w+@\\w+"}, {"--color=always", "-e", "b+|ab"}, {"-o", "-i", "-e", "abc|b"},
      {"-o", "-e", "c.|.a"},          {"-o", "-n", "-e", "[^ ]+ "}, {"-o", "-e", "(ab|a)(bc|c)?"}};
  compare_cases("-E", cases, input, {{"3", "2", "cpu"}, {"", "", "gpu"}}, "Hyperscan's -o walk", "Hyperscan's -o walk",
                {Locale::kC, Locale::kUtf8});
}

// -o and --color parts of lines decided on the workers (pieces of 128 KiB and more) are
// found there too: the same parts, in the same order, as grep's, line by line.
TEST(RegexLongInputs, PartsFoundWhereLinesAreDecided) {
  std::mt19937 random(20261207);
  const std::vector<std::string> words = {"error", "Warn", "conn", "x1", "\xc3\xa9t\xc3\xa9", "from", "user_7", "--"};
  std::string input;
  while (input.size() < (std::size_t{3} << 20)) {
    const int n = static_cast<int>(random() % 12);
    for (int k = 0; k < n; ++k) {
      if (random() % 5 == 0)
        input += std::to_string(random() % 300) + "." + std::to_string(random() % 300) + "." +
                 std::to_string(random() % 256) + "." + std::to_string(random() % 256);
      else input += words[random() % words.size()];
      input += random() % 7 == 0 ? "\t" : " ";
    }
    input += random() % 50 == 0 ? "\r\n" : "\n";
  }
  const std::vector<Args> cases = {{"-E", "-o", "[0-9]+\\.[0-9]+\\.[0-9]+\\.[0-9]+"},
                                   {"-E", "-o", "-b", "-w", "[a-z]+[0-9_]*"},
                                   {"-E", "--color=always", "-i", "erro?r|warn"},
                                   {"-E", "-o", "-n", "-m", "2000", "(\\w+ ){2}from"},
                                   {"-G", "-o", "-i", "t\\(\xc3\xa9\\)\\?"},
                                   {"-P", "-o", "\\d+\\.\\d+(?=\\.)"},
                                   {"-E", "-o", "-A1", "x1 [^ ]+"}};
  Tally tally;
  for (const Locale locale : {Locale::kC, Locale::kUtf8})
    for (const Args& a : cases) {
      ++tally.cases;
      if (!expect_same_with(a[0], Args(a.begin() + 1, a.end()), input,
                            {{"", "", "cpu"}, {"262144", "3", "cpu"}, {"", "", "gpu"}}, "parts of long inputs",
                            locale_env(locale)))
        ++tally.differing;
    }
  report_tally("parts of long inputs", tally);
}

// glibc's regex answers a repeated group holding \< or \> unlike grep's DFA (on "check
// pass; user unknown" it finds "(\<[a-z]+\> ?){3}"), and unlike itself inside grep
// ("(..\>.)+" on "11-b--"; "(\<..)+" selects it in UTF-8, grep does not): refused, with
// the ways around. '?' on such a group is answered as grep answers it (a repeated \b beside
// text is refused as anchors are: RepeatedGroupsWithAnchorsBesideTextAreRefused).
TEST(RegexOddPatterns, RepeatedGroupsWithWordEdgesAreRefused) {
  TempDir dir;
  const std::string input = dir.write("in", "check pass; user unknown\nthree short words\nab cd\n11-b--\n");
  for (const char* pattern : {"(\\<[a-z]+\\> ?){3}", "(x(\\<y)){2}", "(\\<[a-z]+ ?){1,3}:", "(..\\>.)+",
                              "(\\<..)*", "(\\<[a-z]+\\> ?)+"}) {
    const ProcessResult r = run_process({gpufilter_binary(), "-E", pattern, input});
    EXPECT_EQ(r.status, 2) << pattern;
    EXPECT_EQ(r.out, "") << pattern;
    EXPECT_NE(r.err.find("of a group that holds \\< or \\>"), std::string::npos) << r.err;
  }
  const ProcessResult bre = run_process({gpufilter_binary(), "\\(a\\>\\)\\+", input});
  EXPECT_EQ(bre.status, 2);
  for (const char* pattern : {"(\\<[a-z]+\\> ?)?x", "(\\<..)?-", "(\\<[a-z]+\\> ?)(\\<[a-z]+\\> ?)"})
    for (const Locale locale : {Locale::kC, Locale::kUtf8})
      expect_same_with("-E", {"-n", "-o", pattern, input}, {}, {{"", "", "cpu"}}, "", locale_env(locale));
}

// glibc lets an anchor in a later repetition of a group match where it should not
// ("\(^ \)\{2\}" finds two spaces at the start of "  b"), and its answer depends on how
// far past the line grep's buffer reaches: a branch holding an anchor beside other text,
// repeated, is refused. A branch that is the anchor alone ("(^| )+", "(b|$)+") and '?' are
// answered as grep answers them.
TEST(RegexOddPatterns, RepeatedGroupsWithAnchorsBesideTextAreRefused) {
  TempDir dir;
  const std::string input = dir.write("in", "  b\nab\n a\nxa\nb a,b\n");
  for (const Args& a : std::vector<Args>{{"-E", "(^a)+"},          {"-E", "-o", "(^.)+b"},  {"-G", "\\(^ \\)\\{1,2\\}"},
                                         {"-G", "\\([a-z]$\\)\\{2\\}"}, {"-E", "(x(^a))*y"}, {"-E", "(a|b\\`)+"},
                                         {"-E", "-w", "((^a))+"},    {"-E", "-e", "b", "-e", "(.$)+"}}) {
    Args argv = {gpufilter_binary()};
    argv.insert(argv.end(), a.begin(), a.end());
    argv.push_back(input);
    const ProcessResult r = run_process(argv);
    EXPECT_EQ(r.status, 2) << a.back();
    EXPECT_EQ(r.out, "") << a.back();
    EXPECT_NE(r.err.find("beside other text in a repeated group"), std::string::npos) << r.err;
  }
  for (const char* pattern : {"(^| )+a", "(^|,)*b", "(b|$)+", "(^a)?", "(^a){1}b", "(^a){0,1}", "^(a )+"}) {
    EXPECT_NE(run_process({gpufilter_binary(), "-E", pattern, input}).status, 2) << pattern;
    for (const Locale locale : {Locale::kC, Locale::kUtf8})
      expect_same_with("-E", {"-n", "-o", pattern, input}, {}, {{"", "", "cpu"}}, "", locale_env(locale));
  }
}

// grep grows PCRE2's JIT stack (from 32 KiB, doubled) when a match needs more, and so the
// answers of patterns that recurse along a long line: '(.)*$' on 1,500 characters ran out
// of the default stack ("exhausted PCRE JIT stack", exit 2) where grep selects the line.
TEST(RegexOddPatterns, PerlJitStackGrowsAsGreps) {
  TempDir dir;
  const std::string lines = dir.write("lines", std::string(1500, 'a') + "\n" + std::string(200000, 'b') + "\nab\n");
  for (const Locale locale : {Locale::kC, Locale::kUtf8})
    for (const Args& a : {Args{"-c", "(.)*$", lines}, Args{"-c", "(a|b)*$", lines}, Args{"-w", "-c", "(.)*", lines},
                          Args{"-o", "-b", "(ab|b)+$", lines}})
      expect_same_with("-P", a, {}, {{"", "", "cpu"}}, "", locale_env(locale));
}

// grep does not print a line with an encoding error, and its "last output" stays before
// it: the next group is not adjacent ("--"), trailing context stalls on such a line, and
// after a selected one it runs from the last output on (the input's first lines when
// nothing was printed; grep reads an unterminated last line in a buffer of its own, which
// forgets a last output it does not reach). Random inputs with such lines under every
// context option.
TEST(RegexEncodingErrors, ContextAroundLinesGrepDoesNotPrint) {
  const std::vector<std::string> lines = {"a", "b\xff", "c", "ab", "\xc3\xa9 b", "a\xc3", "", "d a", "\xff a", "bb"};
  const std::vector<Args> options = {{"-A1"}, {"-A2"}, {"-B1"}, {"-C1"}, {"-A1", "-m2"}, {"-A3", "-m1"},
                                     {"-v", "-A1"}, {"-n", "-B2", "-A1"}, {"-o", "-A1"}, {"-c", "-A1"}};
  const std::vector<Args> patterns = {{"-F", "a"}, {"-G", "b"}, {"-E", "a|d"}, {"-F", "-e", "a", "-e", "bb"}};
  std::mt19937 rng(41);
  Tally tally;
  for (int n = 0; n < 80; ++n) {
    std::string input;
    const std::size_t count = 3 + rng() % 10;
    for (std::size_t k = 0; k < count; ++k) input += lines[rng() % lines.size()] + "\n";
    if (rng() % 3 == 0) input.pop_back();  // an unterminated last line: a read buffer of its own in grep
    const Args& pattern = patterns[rng() % patterns.size()];
    Args args = options[rng() % options.size()];
    args.insert(args.end(), pattern.begin() + 1, pattern.end());
    ++tally.cases;
    if (!expect_same_with(pattern[0], args, input, {{"", "", "cpu"}, {"5", "2", "gpu"}}, "lines grep does not print",
                          locale_env(Locale::kUtf8)))
      ++tally.differing;
  }
  report_tally("context around lines grep does not print", tally);
}

// ---------------------------------------------------------------------------------------
// -w with several patterns where grep's regex matcher decides (a UTF-8 locale): grep walks
// one regex of all the patterns, whose longest match at a place can hide the empty match
// of a pattern that alone would be selected there ("ß?" beside "\W" on "\t2\tß").

// An ERE '{' that starts a branch is a literal to grep's DFA and a repetition of nothing
// to its regex. Where regex decides a line (a back-reference; in UTF-8 most brackets, \s,
// \W), dfa.c's superset (those read as ".*") has passed it first: '{"id":[0-9]+' selects
// only lines with the '{' (found by fuzzing: gpufilter asked glibc alone, '"id":5' too).
TEST(RegexOddPatterns, BraceStartingABranchWhereRegexDecides) {
  const std::string input = "\"id\":5\n{\"id\":5\nbx\n{ax\nz\nx\nb b\na b\nx@y\n{ab}\n{\n1,2}a\n\xc3\xa9\n";
  const std::vector<Args> cases = {
      {"-e", "{\"id\":[0-9]+"}, {"-e", "{\"id\":[a-z0-9]+"}, {"-e", "{a|b[x-z]"}, {"-e", "[ ]|{"},
      {"-e", "\\W|{1}"},        {"-c", "-e", "{\\w+}"},        {"-x", "-e", "{[a-z]+}"}, {"-o", "-e", "{\"id\":[0-9]"},
      {"-e", "x|{[a-z]"},          {"-e", "\\s|{"},               {"-e", "(b)\\1|{"},     {"-e", "{\\<a|b"},
      {"-e", "{[0-9]+}|z"},        {"-v", "-e", "{[[:alpha:]]"},  {"-n", "-e", "(\\s|{,2})a"},
      // An interval that repeats nothing, beside brackets dfa.c reads or leaves to regex.
      {"-e", "{1,2}[a-z]"},        {"-e", "{1,2}[0-9]"},          {"-e", "{1}[\xc3\xa9]"}, {"-e", "{1,2}[^x]"}};
  compare_cases("-E", cases, input, {{"3", "2", "cpu"}, {"", "", "gpu"}}, "a '{' starting a branch",
                "'{' starting a branch", {Locale::kC, Locale::kUtf8});
}

TEST(RegexWordPatterns, SeveralPatternsAreWalkedAsOneRegex) {
  const std::string input = "\t2\t\xc3\x9f\xc3\x84\xc3\x84\n-xa\nfoo bar\n\t2\xff\t\xc3\x9f\n x\ta\nab\n\n";
  const std::vector<Args> cases = {
      {"-E", "-w", "-e", "\xc3\x9f?", "-e", "\\W"},   {"-E", "-w", "-c", "-e", "(-x)?", "-e", "-"},
      {"-E", "-w", "-v", "-e", "x*", "-e", "\\W"},      {"-G", "-w", "-e", "a\\?", "-e", "[[:space:]]"},
      {"-E", "-w", "-e", "foo", "-e", "b?"},              {"-E", "-w", "-n", "-e", "(ab)?", "-e", "a"},
      {"-G", "-w", "-e", "x*", "-e", "\\(a\\)\\1"}, {"-E", "-w", "-o", "-e", "\xc3\x9f?", "-e", "\\W"}};
  Tally tally;
  for (const Args& args : cases) {
    for (const Locale l : {Locale::kC, Locale::kUtf8}) {
      ++tally.cases;
      if (!expect_same_with(args[0], Args(args.begin() + 1, args.end()), input, {{"3", "2", "cpu"}, {"", "", "gpu"}},
                            "-w with several patterns", locale_env(l)))
        ++tally.differing;
    }
  }
  report_tally("-w with several patterns", tally);
  // Literals that grep searches with its fixed-string matcher (-F, or -G with two or more):
  // a match that fails the word test is retried shorter from its own start ("b " then
  // "b"), also after a first match on the line.
  const std::vector<Args> fixed = {{"-F", "-w", "-o", "-e", "b ", "-e", "b"},
                                   {"-G", "-w", "-o", "-e", "a", "-e", "s ", "-e", "s"},
                                   {"-F", "-w", "--color=always", "-e", "b ", "-e", "b"},
                                   {"-F", "-w", "-o", "-b", "-e", "s b", "-e", "s", "-e", "b -"}};
  for (const Args& args : fixed)
    for (const Locale l : {Locale::kC, Locale::kUtf8})
      expect_same_with(args[0], Args(args.begin() + 1, args.end()), "b b b\na s b\ns b -s\n", {{"", "", "cpu"}},
                       "-w -o with fixed strings", locale_env(l));
}

// In UTF-8 grep decides every -w line with its regex's walk of shorter and later matches;
// on a line of ASCII alone gpufilter asks Hyperscan the C locale's wrapper instead, for
// patterns that match a character or more with no anchor or word assertion. Patterns
// around those limits (empty matches, anchors, \w, several patterns at once), lines of
// ASCII beside lines with multibyte letters next to the words, in pieces small and large.
TEST(RegexWordPatterns, AsciiLinesInUtf8AsTheWalkFindsThem) {
  std::string input;
  const std::vector<std::string> lines = {"12 ab 3_4 x-1 -12- 7a 8",   "a1 22\t33,44.5 ",  "_9 9_ 99",
                                          "caf\xc3\xa9 12 \xc3\xa9" "12 12\xc3\xa9 1", "ab-ab abab b a-", "",
                                          "x 1.2.3 1. .1 a.b -ab", "-1a", "\xc3\xa9 ab\xc3\xa9 \xe2\x82\xac" "7 ab"};
  for (int round = 0; round < 3000; ++round) input += lines[static_cast<std::size_t>(round * 7 % 9)] + "\n";
  const std::vector<Args> cases = {
      {"-E", "-c", "-w", "-e", "[0-9]+"},          {"-E", "-n", "-w", "-e", "[0-9]+(\\.[0-9]+)*"},
      {"-E", "-c", "-w", "-e", "a|b|ab"},          {"-E", "-c", "-w", "-e", "(ab)+|-[0-9]"},
      {"-G", "-c", "-w", "-e", "[0-9][0-9]*"},     {"-G", "-c", "-w", "-e", "-\\?[0-9]"},
      {"-E", "-c", "-w", "-e", "[0-9]*"},          {"-E", "-c", "-w", "-e", "-?[0-9]*", "-e", "a"},
      {"-E", "-c", "-w", "-e", "-?[0-9]*"},        {"-E", "-n", "-w", "-e", "-?a*"},
      {"-E", "-c", "-w", "-e", "[0-9]+$"},         {"-E", "-c", "-w", "-e", "^[0-9a]+"},
      {"-E", "-c", "-w", "-e", "b\\>", "-e", "a"}, {"-E", "-c", "-w", "-e", "\\w+"},
      {"-E", "-c", "-v", "-w", "-e", "9|x"},       {"-E", "-c", "-w", "-e", "1|12", "-e", "[0-9]{2}"}};
  Tally tally;
  for (const Args& args : cases) {
    ++tally.cases;
    if (!expect_same_with(args[0], Args(args.begin() + 1, args.end()), input,
                          {{"", "", "cpu"}, {"64K", "2", "cpu"}, {"5", "2", "cpu"}}, "-w in UTF-8 on ASCII lines",
                          locale_env(Locale::kUtf8)))
      ++tally.differing;
  }
  report_tally("-w in UTF-8 on ASCII lines", tally);
}

// With -z a record may hold '\n', and glibc lets an anchor match next to a '\n' it has
// consumed where grep's DFA does not; under -w grep's wrapper consumes the character
// before the pattern, so any anchor is such an inner one: refused, not answered wrongly
// (grep -zwc '^\.' counts no "x\n. y"; glibc's reading counted it).
TEST(RegexNullData, AnAnchorUnderWordIsRefused) {
  for (const char* pattern : {"^\\.", "a$", "x\\|^y"}) {
    const ProcessResult r = run_process({gpufilter_binary(), "-z", "-w", "-c", pattern}, std::string("x\n. y\0", 7),
                                        {"LC_ALL=C"});
    EXPECT_EQ(r.status, 2) << pattern;
    EXPECT_NE(r.err.find("inside an expression is not supported with -z"), std::string::npos) << r.err;
  }
  for (const Args& args : std::vector<Args>{{"-z", "-c", "^\\."}, {"-z", "-x", "-c", "^x"}, {"-z", "-w", "-c", "y"}})
    expect_same_with("-G", args, std::string("x\n. y\0x\0", 9), {{"", "", "cpu"}}, "-z without -w", {"LC_ALL=C"});
}

// With -z an anchor inside a pattern ("a.^b", "x|^y", "a$.") holds at a record's ends only
// where grep's DFA decides the records, though glibc's matcher, which grep's -o and
// --color parts still come from, lets it match beside a '\n' it consumed ("a.^b|zz" on
// "a\nbzz" selects the record for "zz" and -o prints "a\nb" too).
TEST(RegexNullData, AnInnerAnchorSelectsAsGrepsDfa) {
  const std::string records("a\nb\0x\ny\0xa\nb\0a\nbzz\0b\n\0\na\0a\n\vb\0\0ab\n", 34);
  // The matcher, the pattern, and whether it is answered in UTF-8 too (there regex
  // decides \W and a negated bracket: refused, which expect_same_with() accepts).
  struct Case {
    const char* matcher;
    const char* pattern;
    bool in_utf8;
  };
  const std::vector<Case> patterns = {
      {"-E", "a.^b", true},      {"-E", "x|^b", true},           {"-E", "a$.", true},      {"-E", "a$|x", true},
      {"-E", "(^|x)a", true},    {"-E", "x(^y)", true},          {"-E", "a.^b|zz", true},  {"-E", ".$.^.", true},
      {"-E", "[^a]^b|y$", false}, {"-E", "(a|^)b", true},        {"-G", "a.^b", true},     {"-G", "x\\|^y", true},
      {"-G", "\\(^\\|x\\)a", true}, {"-G", "a\\($\\).", true}, {"-E", "\\W^b|a\\s$", false}};
  const std::vector<Args> options = {{"-c"}, {"-o"}, {"-v"}, {"-x"}, {"--color=always"}, {"-b", "-o"}, {"-n"}};
  for (const Locale l : {Locale::kC, Locale::kUtf8})
    for (const Case& c : patterns) {
      for (const Args& o : options)
        expect_same_with(c.matcher, o + Args{"-z", "-e", c.pattern}, records, {{"", "", "cpu"}}, "-z, an inner anchor",
                         locale_env(l));
      if (l == Locale::kC || c.in_utf8) {  // answered, not refused
        EXPECT_NE(run_gpufilter({c.matcher, "-z", "-c", "-e", c.pattern}, records, {}, locale_env(l)).status, 2)
            << c.pattern;
      }
    }
  // Two patterns, one anchored inside.
  expect_same_with("-E", {"-z", "-c", "-e", "q", "-e", "a.^b"}, records, {{"", "", "cpu"}}, "-z, two patterns",
                   {"LC_ALL=C"});
  // Where grep's regex decides (a back-reference; in UTF-8 a word assertion or a bracket it
  // leaves to regex; a '\v' in a pattern), grep mixes both readings: refused.
  for (const auto& [pattern, locale] : std::vector<std::pair<std::string, Locale>>{
           {"(a)\\1.^b", Locale::kC}, {"\\<a.^b", Locale::kUtf8}, {"[[:alpha:]]$.", Locale::kUtf8},
           {"\v.^b", Locale::kC}}) {
    const ProcessResult r = run_process({gpufilter_binary(), "-E", "-z", "-c", pattern}, records, locale_env(locale));
    EXPECT_EQ(r.status, 2) << pattern;
    EXPECT_NE(r.err.find("inside an expression is not supported with -z"), std::string::npos) << r.err;
  }
}

// ---------------------------------------------------------------------------------------
// The Loghub logs, with regexes made from their EventTemplate column.

bool corpus_present() { return std::ifstream(corpus_path("loghub/OpenSSH_2k.log")).good(); }

// A template as a regex: "<*>" becomes `gap`, by default ".*" (ERE) or "[^ ]*" (BRE);
// metacharacters are escaped.
std::string template_regex(const std::string& templ, bool ere, const char* gap = nullptr) {
  const std::string special = ere ? ".[]\\()*+?{}|^$" : ".[]\\*^$";
  std::string out;
  for (std::size_t i = 0; i < templ.size(); ++i) {
    if (templ.compare(i, 3, "<*>") == 0) {
      out += gap != nullptr ? gap : ere ? ".*" : "[^ ]*";
      i += 2;
    } else {
      if (special.find(templ[i]) != std::string::npos) out += '\\';
      out += templ[i];
    }
  }
  return out;
}

std::vector<std::string> event_templates(const std::string& csv, std::mt19937& rng, std::size_t count) {
  const auto rows = parse_csv(csv);
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (std::size_t i = 1; i < rows.size(); ++i)
    if (!rows[i].empty() && !rows[i].back().empty() && seen.insert(rows[i].back()).second) out.push_back(rows[i].back());
  std::shuffle(out.begin(), out.end(), rng);
  if (out.size() > count) out.resize(count);
  return out;
}

class LoghubRegex : public ::testing::TestWithParam<std::string> {};

TEST_P(LoghubRegex, TemplatesAsRegexes) {
  if (!corpus_present()) GTEST_SKIP() << "no corpus at " << corpus_path("loghub");
  const std::string& name = GetParam();
  const std::string log = corpus_path("loghub/" + name + "_2k.log");
  std::seed_seq seq(name.begin(), name.end());
  std::mt19937 rng(seq);
  rng.discard(base_seed(0));
  const std::vector<std::string> templates = event_templates(read_file(log + "_structured.csv"), rng, 30);
  ASSERT_FALSE(templates.empty()) << log;
  std::vector<std::string> ere, bre;
  for (const auto& t : templates) {
    ere.push_back(template_regex(t, true));
    bre.push_back(template_regex(t, false));
  }
  TempDir dir;
  const std::string ere_file = dir.write("ere", pattern_file(ere));
  const std::string bre_file = dir.write("bre", pattern_file(bre));
  const std::string note = name + " log, templates \"" + escape(pattern_file(templates), 3000) + "\"";
  const std::size_t salt = name.size() + static_cast<std::size_t>(name[0]);
  const std::vector<Knobs> knobs = {salt % 2 == 0 ? Knobs{"4093", "2", "gpu"} : Knobs{"1000", "3", "gpu"}, {"", "", ""}};
  const std::vector<Knobs> host = {salt % 2 == 0 ? Knobs{"333", "1", "cpu"} : Knobs{"64K", "2", "cpu"}};
  const Locale locale = salt % 3 == 0 ? Locale::kUtf8 : Locale::kC;
  const auto env = locale_env(locale);
  Tally tally;
  auto check = [&](const char* m, const Args& args, const std::vector<Knobs>& k) {
    ++tally.cases;
    if (!expect_same_with(m, args, {}, k, note + ", LC_ALL=" + locale_name(locale), env)) ++tally.differing;
  };
  check("-E", {"-c", "-f", ere_file, log}, knobs);
  check("-G", {"-c", "-f", bre_file, log}, host);
  check("-E", {"-c", "-v", "-i", "-f", ere_file, log}, host);
  check("-G", {"-c", "-w", "-f", bre_file, log}, host);
  for (std::size_t i = 0; i < 3 && i < templates.size(); ++i) {
    check("-E", {"-o", "-n", "-e", ere[i], log}, host);
    check("-G", {"-n", "-b", "-e", bre[i], log}, host);
    check("-E", {"-c", "-x", "-e", ".*" + ere[i] + ".*", log}, host);
  }
  report_tally(name + " templates (" + locale_name(locale) + ")", tally);
}

INSTANTIATE_TEST_SUITE_P(Loghub, LoghubRegex, ::testing::ValuesIn(loghub_logs()),
                         [](const ::testing::TestParamInfo<std::string>& param_info) { return param_info.param; });

// Sets of 64 patterns or more, each with a factor, are decided through a Hyperscan
// database per group of patterns, built as lines need them or all at once on many lines
// (gnu_regex.cpp, HsGroups), or, for literals joined by ".*", by finding the literals in
// turn (LiteralChains): every template of six logs at once (223; a quarter of the ERE ones
// with "[^ ]*" for "<*>", so that one set takes both ways), over those logs with some lines
// cut or changed so that no template matches them.
TEST(LoghubRegexGroups, ManyTemplatesAtOnce) {
  if (!corpus_present()) GTEST_SKIP() << "no corpus at " << corpus_path("loghub");
  std::mt19937 rng(base_seed(0) + 23);
  std::vector<std::string> ere, bre;
  std::string input;
  for (const char* name : {"OpenSSH", "HDFS", "Zookeeper", "Linux", "Apache", "Proxifier"}) {
    const std::string log = corpus_path(std::string("loghub/") + name + "_2k.log");
    for (const auto& t : event_templates(read_file(log + "_structured.csv"), rng, 1000)) {
      ere.push_back(template_regex(t, true, ere.size() % 4 == 0 ? "[^ ]*" : nullptr));
      bre.push_back(template_regex(t, false));
    }
    std::string text = read_file(log);
    for (std::size_t at = 0; at < text.size(); at = text.find('\n', at) + 1) {
      if (text.find('\n', at) == std::string::npos) break;
      const std::size_t length = text.find('\n', at) - at;
      if (length > 8 && rng() % 4 == 0) text[at + rng() % length] = rng() % 2 ? '#' : 'Q';
    }
    input += text;
    if (input.back() != '\n') input += '\n';
  }
  ASSERT_GE(ere.size(), 64u);
  TempDir dir;
  const std::string ere_file = dir.write("ere", pattern_file(ere));
  const std::string bre_file = dir.write("bre", pattern_file(bre));
  const std::string log = dir.write("logs", input);
  // Whole chunks decided ahead on the host engine's workers, and small ones on the device.
  const std::vector<Knobs> knobs = {{"", "", "cpu"}, {"4093", "2", "gpu"}};
  Tally tally;
  SweepShare share;
  for (const Locale locale : {Locale::kC, Locale::kUtf8}) {
    for (const char* select : {"", "GPUFILTER_REGEX_SELECT=eager"}) {
      auto env = locale_env(locale);
      if (*select != '\0') env.push_back(select);
      const std::string note = std::string("223 templates, LC_ALL=") + locale_name(locale) + " " + select;
      auto check = [&](const char* m, const Args& args) {
        if (!share.take()) return;
        ++tally.cases;
        if (!expect_same_with(m, args, {}, knobs, note, env)) ++tally.differing;
      };
      check("-E", {"-n", "-f", ere_file, log});
      check("-G", {"-c", "-v", "-f", bre_file, log});
      if (*select != '\0') continue;  // the eager build: the same groups, built at once
      check("-E", {"-c", "-i", "-f", ere_file, log});
      check("-G", {"-c", "-w", "-f", bre_file, log});
      check("-E", {"-c", "-x", "-f", ere_file, log});
      check("-E", {"-o", "-b", "-m", "500", "-f", ere_file, log});
    }
  }
  report_tally("223 templates as groups", tally);
}

}  // namespace
}  // namespace gpufilter::test
