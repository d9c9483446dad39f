// Random differential cases: seeded inputs, pattern sets and flag combinations, each run
// through grep -F and through gpufilter with random chunk sizes and slot counts. Every
// failure prints its seed; GPUFILTER_TEST_SEED=N changes the base seed of every test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "differential.hpp"

namespace gpufilter::test {
namespace {

using Args = std::vector<std::string>;

constexpr int kMaxFailingCases = 6;  // stop a test after this many failing cases

std::uint32_t base_seed(std::uint32_t fallback) {
  if (const char* env = std::getenv("GPUFILTER_TEST_SEED")) return static_cast<std::uint32_t>(std::strtoul(env, nullptr, 10)) + fallback;
  return fallback;
}

enum class Shape { kSmallAlphabet, kWideBytes, kWords, kLongLines };

const char* shape_name(Shape s) {
  switch (s) {
    case Shape::kSmallAlphabet: return "small alphabet";
    case Shape::kWideBytes: return "wide bytes";
    case Shape::kWords: return "words";
    case Shape::kLongLines: return "long lines";
  }
  return "?";
}

struct Limits {
  int cases = 60;
  std::size_t max_input = 2000;
  int min_patterns = 1;
  int max_patterns = 200;
  int max_pattern_length = 300;
  int knob_runs = 2;  // random knob sets per case, besides the default
  bool long_patterns = false;  // half of the patterns 1 to max_pattern_length bytes long
  // Always -w, mostly with -o or --color, often -x: with max_patterns = 1 (given once or
  // twice) the cases GNU grep runs through its regex matcher, whose -o/--color differs.
  bool word_spans = false;
  // -z: records end in NUL; the input's '\n' become NULs and some spaces '\n' (ordinary
  // bytes then, inside records and inside patterns' substrings).
  bool null_data = false;
};

class Generator {
 public:
  Generator(std::uint32_t seed, Shape shape, const Limits& limits) : rng_(seed), shape_(shape), limits_(limits) {}

  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool chance(double p) { return std::bernoulli_distribution(p)(rng_); }
  std::mt19937& rng() { return rng_; }

  char byte_for_shape() {
    switch (shape_) {
      case Shape::kSmallAlphabet: {
        static const char kChars[] = "aaaabbb  \n";
        return kChars[uniform(0, 9)];
      }
      case Shape::kWideBytes: {
        const int r = uniform(0, 99);
        if (r < 4) return '\n';
        if (r < 7) return '\r';
        if (r < 17) return static_cast<char>(uniform(0x80, 0xff));
        if (r < 22) return "aAbB"[uniform(0, 3)];
        return static_cast<char>(uniform(0x20, 0x7e));
      }
      case Shape::kLongLines: {
        if (uniform(0, 699) == 0) return '\n';
        return "abc"[uniform(0, 2)];
      }
      case Shape::kWords: break;
    }
    return 'x';
  }

  std::string input(std::size_t max_size) {
    std::string s;
    const std::size_t size = static_cast<std::size_t>(uniform(0, static_cast<int>(max_size)));
    if (shape_ == Shape::kWords) {
      static const std::vector<std::string> vocabulary = {
          "foo", "bar", "Foo", "FOO", "foobar", "ba", "o", "x_y", "foo-bar", "42", "\xe9t\xe9", "baz", "fOo", "_",
          "barfoo", "f", "oof", "\xc9TAT"};
      static const std::vector<std::string> separators = {" ", " ", "  ", ".", "-", "\t", "\n", "\n", ",", ""};
      const bool crlf = chance(0.3);
      while (s.size() < size) {
        s += vocabulary[static_cast<std::size_t>(uniform(0, static_cast<int>(vocabulary.size()) - 1))];
        std::string sep = separators[static_cast<std::size_t>(uniform(0, static_cast<int>(separators.size()) - 1))];
        if (sep == "\n" && crlf) sep = "\r\n";
        s += sep;
      }
    } else {
      for (std::size_t i = 0; i < size; ++i) s.push_back(byte_for_shape());
    }
    if (shape_ == Shape::kWideBytes && !s.empty() && chance(0.1))  // a binary file
      s[static_cast<std::size_t>(uniform(0, static_cast<int>(s.size()) - 1))] = '\0';
    if (!s.empty() && chance(0.7) && s.back() != '\n') s.push_back('\n');
    if (!s.empty() && chance(0.1)) s.pop_back();
    return s;
  }

  int pattern_length() {
    const int r = uniform(0, 99);
    const int cap = limits_.max_pattern_length;
    if (limits_.long_patterns && r < 50) return uniform(1, cap);
    if (r < 60) return std::min(cap, uniform(1, 4));
    if (r < 90) return std::min(cap, uniform(1, 12));
    return uniform(1, cap);
  }

  std::string random_pattern() {
    std::string p;
    const int n = pattern_length();
    while (static_cast<int>(p.size()) < n) {
      const char c = byte_for_shape();
      if (c != '\n') p.push_back(c);
    }
    if (shape_ == Shape::kWords) {
      static const std::vector<std::string> pieces = {"foo", "bar", "o", "ba", "FOO", "x_y", " ", "-", "42", "oo", "\xe9"};
      p = pieces[static_cast<std::size_t>(uniform(0, static_cast<int>(pieces.size()) - 1))];
      if (chance(0.3)) p += pieces[static_cast<std::size_t>(uniform(0, static_cast<int>(pieces.size()) - 1))];
    }
    return p;
  }

  std::string substring_pattern(const std::string& in) {
    if (in.empty()) return random_pattern();
    const std::size_t start = static_cast<std::size_t>(uniform(0, static_cast<int>(in.size()) - 1));
    std::string p = in.substr(start, static_cast<std::size_t>(pattern_length()));
    p = p.substr(0, p.find('\n'));
    if (p.empty()) return random_pattern();
    if (chance(0.2)) {  // change the case of some letters
      for (char& c : p) {
        if (c >= 'a' && c <= 'z' && chance(0.5)) c = static_cast<char>(c - 'a' + 'A');
        else if (c >= 'A' && c <= 'Z' && chance(0.5)) c = static_cast<char>(c - 'A' + 'a');
      }
    }
    return p;
  }

  std::vector<std::string> patterns(const std::string& in) {
    int n;
    const int r = uniform(0, 99);
    if (r < 60) n = uniform(1, 3);
    else if (r < 85) n = uniform(4, 20);
    else n = uniform(21, 200);
    n = std::clamp(n, limits_.min_patterns, limits_.max_patterns);
    if (limits_.min_patterns > 200) n = uniform(limits_.min_patterns, limits_.max_patterns);
    std::vector<std::string> ps;
    for (int i = 0; i < n; ++i) {
      const int kind = uniform(0, 99);
      if (kind < 2) ps.emplace_back();
      else if (kind < 55) ps.push_back(substring_pattern(in));
      else ps.push_back(random_pattern());
    }
    return ps;
  }

 private:
  std::mt19937 rng_;
  Shape shape_;
  Limits limits_;
};

// The random options of a case (an option with its argument stays together when shuffled),
// and GREP_COLORS settings into env.
Args random_flags(Generator& g, Shape shape, const Limits& limits, std::vector<std::string>& env) {
  std::vector<Args> groups;
  auto maybe = [&](double p, std::initializer_list<const char*> f) {
    if (g.chance(p)) groups.emplace_back(f.begin(), f.end());
  };
  maybe(0.25, {"-i"});
  maybe(0.15, {"-v"});
  const bool spans = limits.word_spans;
  maybe(spans ? 1.0 : shape == Shape::kWords ? 0.4 : 0.15, {"-w"});
  maybe(spans ? 0.25 : 0.08, {"-x"});
  maybe(spans ? 0.5 : 0.2, {"-o"});
  maybe(0.25, {"-n"});
  maybe(0.15, {"-b"});
  maybe(0.1, {"-c"});
  maybe(0.04, {"-l"});
  maybe(0.04, {"-L"});
  maybe(0.03, {"-q"});
  maybe(0.05, {"-s"});
  maybe(0.05, {"-a"});
  maybe(0.05, {"--line-buffered"});
  maybe(0.05, {"-F"});
  bool negative_max = false;
  if (g.chance(0.12)) {
    static const char* kMax[] = {"0", "1", "2", "3", "-1"};
    const int pick = g.uniform(0, 4);
    negative_max = pick == 4;
    groups.push_back({"-m", kMax[pick]});
  }
  // grep 3.8 with -v and a negative -m selects nothing yet prints context from the start of
  // its buffer: an artefact gpufilter does not copy (docs/grep-compatibility.md).
  const bool inverted = std::any_of(groups.begin(), groups.end(), [](const Args& a) { return a[0] == "-v"; });
  if (g.chance(0.2) && !(negative_max && inverted)) {
    const std::string n = std::to_string(g.uniform(0, 3));
    switch (g.uniform(0, 3)) {
      case 0: groups.push_back({"-A", n}); break;
      case 1: groups.push_back({"-B" + n}); break;
      case 2: groups.push_back({"--context=" + n}); break;
      default: groups.push_back({"-" + n}); break;
    }
    if (g.chance(0.2)) groups.push_back({"--group-separator=<>"});
    else if (g.chance(0.1)) groups.push_back({"--no-group-separator"});
  }
  if (g.chance(spans ? 0.5 : 0.12)) {
    groups.push_back({"--color=always"});
    static const char* kColors[] = {"GREP_COLORS=mt=01;32:fn=34", "GREP_COLORS=sl=1:cx=2", "GREP_COLORS=rv",
                                    "GREP_COLORS=sl=1:cx=2:rv:ne"};
    if (g.chance(0.5)) env.emplace_back(kColors[g.uniform(0, 3)]);
  }
  std::shuffle(groups.begin(), groups.end(), g.rng());
  Args flags;
  for (const Args& group : groups) flags.insert(flags.end(), group.begin(), group.end());
  return flags;
}

// Builds one random case and checks it; returns false on a difference.
bool run_case(std::uint32_t seed, Shape shape, const Limits& limits, const TempDir& dir) {
  Generator g(seed, shape, limits);
  std::string input = g.input(limits.max_input);
  if (limits.null_data) {
    for (char& c : input) {
      if (c == '\n') c = '\0';
      else if (c == ' ' && g.chance(0.3)) c = '\n';
    }
  }
  std::vector<std::string> patterns = g.patterns(input);
  // No pattern holds a NUL with -z (gpufilter refuses one: docs/grep-compatibility.md).
  if (limits.null_data)
    for (std::string& p : patterns) p.erase(std::remove(p.begin(), p.end(), '\0'), p.end());
  // grep counts distinct patterns: one given twice is still one.
  if (limits.word_spans && patterns.size() == 1 && g.chance(0.2)) patterns.push_back(patterns[0]);

  std::vector<std::string> env;
  Args flags = random_flags(g, shape, limits, env);
  if (limits.null_data) flags.insert(flags.begin() + g.uniform(0, static_cast<int>(flags.size())), "-z");

  // Patterns: a -f file, several -e, one -e or the operand joined by newlines.
  Args pattern_args;
  std::string joined;
  for (std::size_t i = 0; i < patterns.size(); ++i) joined += (i ? "\n" : "") + patterns[i];
  std::string pattern_note;
  const int how = patterns.size() > 4 ? 0 : g.uniform(0, 3);
  if (how == 0) {
    std::string file = joined;
    if (g.chance(0.8)) file += '\n';
    pattern_args = {"-f", dir.write("patterns", file)};
    pattern_note = "-f contents \"" + escape(file, 500) + "\"";
  } else if (how == 1) {
    for (const auto& p : patterns) {
      pattern_args.push_back("-e");
      pattern_args.push_back(p);
    }
  } else if (how == 2 || joined.empty() || joined[0] == '-') {
    pattern_args = {"-e", joined};
  } else {
    pattern_args = {joined};
  }

  // Inputs: a file, standard input, or two inputs (a second file, '-', a missing file).
  Args files;
  std::string stdin_input;
  std::string input_note = "input \"" + escape(input, 700) + "\"";
  const int where = g.uniform(0, 99);
  if (where < 65) {
    files.push_back(dir.write("input", input));
  } else if (where < 82) {
    stdin_input = input;
    if (g.chance(0.3)) flags.push_back("--label=LBL");
  } else {
    files.push_back(dir.write("input", input));
    const int second = g.uniform(0, 2);
    if (second == 0) {
      const std::string other = g.input(limits.max_input / 2);
      files.push_back(dir.write("input2", other));
      input_note += ", input2 \"" + escape(other, 300) + "\"";
    } else if (second == 1) {
      files.push_back("-");
      stdin_input = g.input(limits.max_input / 2);
    } else {
      files.push_back(dir.path() + "/missing");
    }
    if (g.chance(0.5)) std::swap(files[0], files[1]);
  }

  // Knobs: random chunk sizes (not so small that a run takes long) and the default.
  const int min_chunk = std::max<int>(1, static_cast<int>((input.size() + stdin_input.size()) / 150));
  std::vector<Knobs> knobs;
  for (const Knobs& k : random_knobs(g.rng(), limits.knob_runs, 300)) {
    Knobs fixed = k;
    if (!fixed.chunk.empty() && std::stoi(fixed.chunk) < min_chunk) fixed.chunk = std::to_string(min_chunk + std::stoi(fixed.chunk));
    knobs.push_back(fixed);
  }
  knobs.push_back({"", "", ""});

  Args args = flags;
  args.insert(args.end(), pattern_args.begin(), pattern_args.end());
  args.insert(args.end(), files.begin(), files.end());
  const std::string note = "seed " + std::to_string(seed) + " (" + shape_name(shape) + "), " +
                           std::to_string(patterns.size()) + " patterns" +
                           (pattern_note.empty() ? "" : ", " + pattern_note) + ", " + input_note;
  return expect_same(args, stdin_input, knobs, note, env);
}

void run_cases(std::uint32_t seed_base, Shape shape, const Limits& limits) {
  TempDir dir;
  int failing = 0;
  for (int i = 0; i < case_count(limits.cases); ++i) {
    const std::uint32_t seed = base_seed(seed_base) * 1000u + static_cast<std::uint32_t>(i);
    if (!run_case(seed, shape, limits, dir) && ++failing >= kMaxFailingCases) {
      ADD_FAILURE() << "stopping after " << failing << " failing cases (of " << (i + 1) << ")";
      return;
    }
  }
}

TEST(GrepRandom, SmallAlphabet) {
  Limits l;
  l.cases = 90;
  l.max_input = 1500;
  run_cases(11, Shape::kSmallAlphabet, l);
}

TEST(GrepRandom, WideBytesAndCarriageReturns) {
  Limits l;
  l.cases = 80;
  l.max_input = 2500;
  run_cases(23, Shape::kWideBytes, l);
}

TEST(GrepRandom, WordsCaseAndCrlf) {
  Limits l;
  l.cases = 90;
  l.max_input = 1500;
  run_cases(37, Shape::kWords, l);
}

// -w with one distinct pattern (GNU grep's regex matcher) against -w with two.
TEST(GrepRandom, OnePatternWords) {
  Limits l;
  l.cases = 60;
  l.max_input = 600;
  l.max_patterns = 1;
  l.word_spans = true;
  run_cases(43, Shape::kSmallAlphabet, l);
  l.max_patterns = 2;
  run_cases(47, Shape::kWords, l);
}

// -z: NUL-terminated records holding '\n', on both engines and small chunks.
TEST(GrepRandom, NullData) {
  Limits l;
  l.cases = 60;
  l.max_input = 1500;
  l.null_data = true;
  run_cases(73, Shape::kSmallAlphabet, l);
  l.cases = 40;
  run_cases(79, Shape::kWords, l);
  run_cases(89, Shape::kWideBytes, l);
  l.cases = 30;
  l.max_input = 4000;
  run_cases(83, Shape::kLongLines, l);
}

TEST(GrepRandom, LinesLongerThanChunks) {
  Limits l;
  l.cases = 50;
  l.max_input = 4000;
  run_cases(41, Shape::kLongLines, l);
}

// 1,000 to 10,000 patterns of 1 to 300 bytes, through a -f file.
TEST(GrepRandom, ManyPatterns) {
  Limits l;
  l.cases = 8;
  l.max_input = 4000;
  l.min_patterns = 1000;
  l.max_patterns = 10000;
  l.knob_runs = 1;
  l.long_patterns = true;
  run_cases(53, Shape::kWideBytes, l);
  l.cases = 4;
  run_cases(59, Shape::kSmallAlphabet, l);
}

// Inputs of 100 KB to 1 MB.
TEST(GrepRandom, LargeInputs) {
  TempDir dir;
  for (std::uint32_t i = 0; i < 2; ++i) {
    const std::uint32_t seed = base_seed(67) * 1000u + i;
    Limits l;
    Generator g(seed, Shape::kWords, l);
    std::string input;
    const std::size_t size = i == 0 ? 150000 : 1000000;
    while (input.size() < size) input += g.input(4000);
    std::vector<std::string> patterns;
    for (int k = 0; k < (i == 0 ? 30 : 300); ++k) patterns.push_back(g.substring_pattern(input));
    patterns.push_back("neverthere");
    const std::string path = dir.write("large", input);
    const std::string pf = dir.write("patterns", pattern_file(patterns));
    const std::string note = "seed " + std::to_string(seed) + ", " + std::to_string(input.size()) + " bytes";
    if (i == 0) {
      expect_same({"-n", "-f", pf, path}, {}, large_knobs(), note);
      expect_same({"-o", "-b", "-i", "-f", pf, path}, {}, large_knobs(), note);
      expect_same({"-w", "-c", "-f", pf, path}, {}, large_knobs(), note);
      expect_same({"-v", "-C1", "-f", pf}, input, large_knobs(), note);
    } else {
      expect_same({"-c", "-f", pf, path}, {}, large_knobs(), note);
      expect_same({"-n", "-i", "-w", "-f", pf, path}, {}, large_knobs(), note);
    }
  }
  // One line of 300 KB, longer than grep's buffer and than most chunks.
  std::mt19937 rng(base_seed(71));
  std::string line;
  while (line.size() < 300000) line += "abc"[std::uniform_int_distribution<int>(0, 2)(rng)];
  line.replace(1000, 6, "needle");
  line.replace(150000, 6, "needle");
  line.replace(line.size() - 6, 6, "needle");
  const std::string path = dir.write("one_line", "before\n" + line + "\nafter needle");
  for (Args args : std::vector<Args>{{"-c"}, {"-o", "-b"}, {"-n", "-e", "after"}}) {
    args.insert(args.end(), {"-e", "needle", "-e", "cabcab", path});
    expect_same(args, {}, large_knobs(), "a 300 KB line");
  }
}

}  // namespace
}  // namespace gpufilter::test
