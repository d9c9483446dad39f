#include "expansion.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <vector>

namespace gpufilter::regex {
namespace {

// A run of units that can match the empty string (kMaxAnchoredNullableLoops): its loops
// over groups that can too, whether it holds an anchor, and the loops after its first one.
struct Run {
  double loops = 0;
  bool anchored = false;
  double after_anchor = 0;
};

// `a` then `b`.
Run then(const Run& a, const Run& b) {
  return {a.loops + b.loops, a.anchored || b.anchored, a.anchored ? a.after_anchor + b.loops : b.after_anchor};
}

// Either path, as the costlier of the two.
Run either(const Run& a, const Run& b) {
  return {std::max(a.loops, b.loops), a.anchored || b.anchored, std::max(a.after_anchor, b.after_anchor)};
}

// A unit's part in the run it is in: the path through it where it can match empty, and
// the run its end leaves after its last character.
struct Unit {
  bool nullable = false;
  Run through;
  Run trailing;
  bool group = false;  // the operand of a loop adds one where it is a group: "()*", "(a*)+"
  Run after(const Run& before) const { return nullable ? either(then(before, through), trailing) : trailing; }
  // The unit copied `copies` times, looping back where `loop`.
  void repeat(double copies, bool loop) {
    if (!nullable) return;
    const double added = loop && group ? 1 : 0;
    const double more = copies - 1 + (loop ? 1 : 0);  // a loop comes back through every copy
    through = {through.loops * copies + added, through.anchored,
               through.anchored ? through.after_anchor + through.loops * more + added : 0};
  }
};

// The size of what is parsed so far at one group level, and of its last unit (what a
// quantifier repeats).
struct Level {
  double nodes = 0;    // copies of atoms
  double options = 0;  // the square of nested options, summed
  double last_nodes = 0;
  double last_options = 0;
  // Repetitions of what can match the empty string, nested: glibc's epsilon closures grow
  // exponentially in their depth ("(^|$)*+++" ran for more than ten minutes).
  // Those over an anchor also separately: they cost the most.
  int height = 0;               // the deepest at this level
  int last_height = 0;          // of the last unit
  int anchored_height = 0;      // the same, over operands that hold an anchor
  int last_anchored_height = 0;
  bool anchor = false;          // an anchor at this level or inside it
  bool last_anchor = false;     // in the last unit
  bool last_nullable = true;    // the last unit can match empty (true: there is none yet)
  bool last_optional_empty = false;  // the last unit is a group that can match empty, made optional ("()?", "(a|)?")
  // Optional copies of what can match the empty string, copied again: the log of how many
  // ways glibc's expansion of the last unit has ("0*{,2}{20}": 20 log 3), and the most at
  // this level (a group carries it out).
  double last_ways = 0;
  double ways = 0;
  bool has_last = false;        // a unit to repeat (not at the start of an alternative)
  int solid_units = 0;          // units of the current alternative that cannot match empty
  bool nullable_alt = false;    // an earlier alternative can match empty
  // The run of units since the last that must match a character; a group's first units
  // continue the run before it.
  Run start;                    // the run where this group begins
  Run own;                      // the current alternative's, without `start`
  Run before_last;              // `own` before the last unit
  Unit last_unit;
  Unit ended;                   // the finished alternatives, as one unit
  Run run() const { return solid_units == 0 ? then(start, own) : own; }
};

class Estimate {
 public:
  explicit Estimate(bool extended) : levels_(1), extended_(extended) {}

  void atom() { add(1, 0, false, {}, Unit{}); }
  void anchor() {  // ^ $ \< \> \b \B: a position, empty
    anchored_ = true;
    add(0, 0, true, {0, 0, true}, Unit{true, {0, true, 0}, {}, false});
  }
  void open() {
    const Run run = levels_.back().run();
    levels_.emplace_back();
    levels_.back().start = run;
  }
  void close() {
    if (levels_.size() == 1) return atom();  // an unmatched ')' is a literal (ERE)
    end_alternative();
    Level inner = levels_.back();
    levels_.pop_back();
    inner.ended.group = true;
    add(inner.nodes + 1, inner.options, inner.nullable_alt,
        {inner.height, inner.anchored_height, inner.anchor, inner.ways}, inner.ended);
  }
  void alternative() {  // '|', '\|' or a newline between patterns
    end_alternative();
    Level& l = levels_.back();
    l.solid_units = 0;
    l.has_last = false;
    l.own = {};
  }
  // The last unit repeated at least `low` and at most `high` times (high < 0: no bound).
  // With no unit before it glibc skips the operator (ERE) or reads it as a character (BRE).
  void repeat(double low, double high) {
    Level& l = levels_.back();
    if (!l.has_last) {
      if (!extended_) atom();
      return;
    }
    // A large operand that can match the empty string, repeated again ("0*{3309}+", fuzzed):
    // glibc's epsilon closures over its copies ran past a minute (grep 3.8's too).
    if (l.last_nullable && l.last_nodes > kMaxNullableOperandNodes && (high < 0 || high > 1)) wide_nullable_ = true;
    // Its nested options starred or plussed ("0*{,309}+", fuzzed): more than half a minute
    // here, grep 3.8 nine seconds; or copied many times ("(0*){1,30}{20}", 1.4 GB).
    if (l.last_nullable && l.last_options > kMaxNullableOperandOptions && high < 0) wide_nullable_ = true;
    const bool operand_nullable = l.last_nullable;
    // Copies of an optional group that can match the empty string, then a loop over one
    // more ("()?{20,}", "(a?)?{16,}"; fuzzed): glibc's time doubles with each copy, and
    // grep 3.8's with it (3 s at 20, past minutes at 309).
    if (high < 0 && low > kMaxCopiesOfOptionalEmpty && l.last_optional_empty) wide_nullable_ = true;
    if (l.last_optional_empty) optional_empty_copies_ = std::max(optional_empty_copies_, high < 0 ? low + 1 : high);
    // A loop over copies of optional copies of what can match empty ("0*{,2}{20}*",
    // "(0*){,4}{10}*"; fuzzed): glibc's time grows with the ways to expand them, and grep
    // 3.8's with it (past minutes); "0*{,9}{5}*" takes 0.9 s.
    if (high < 0 && l.last_nullable && l.last_ways > kMaxLogWaysUnderLoop) wide_nullable_ = true;
    if (l.last_nullable) {
      const double copied = high < 0 ? low + 1 : std::max(high, 1.0);
      const double optional_copies = high < 0 ? 0 : std::max(high - low, 0.0);
      l.last_ways = l.last_ways * copied + (optional_copies > 0 ? std::log(optional_copies + 1) : 0);
      l.ways = std::max(l.ways, l.last_ways);
    }
    const bool optional_empty = low == 0 && high == 1 && l.last_unit.group && l.last_nullable;

    const double again = high < 0 ? 2 : high;
    if (l.last_nullable && again > 1 && l.last_options >= kMinCopiedOptions &&
        l.last_options * again * again > kMaxNullableCopiedOptions)
      wide_nullable_ = true;
    // x{m,} is m copies and a starred one; x{m,n} n copies, the last n - m optional.
    const double copies = high < 0 ? low + 1 : std::max(high, 1.0);
    const double optional = high < 0 ? 0 : std::max(high - low, 0.0);
    const double nodes = l.last_nodes * copies + 1;
    const double options = l.last_options * copies + optional * optional * std::max(l.last_nodes, 1.0);
    l.nodes += nodes - l.last_nodes;
    l.options += options - l.last_options;
    l.last_nodes = nodes;
    l.last_options = options;
    if (l.last_nullable) {
      l.last_height += 1;
      if (l.last_anchor) l.last_anchored_height += 1;
    }
    l.height = std::max(l.height, l.last_height);
    l.anchored_height = std::max(l.anchored_height, l.last_anchored_height);
    Unit& unit = l.last_unit;
    unit.repeat(copies, high < 0);
    if (!unit.nullable && low == 0) {
      unit.nullable = true;  // skipped
      unit.through = {};
    }
    unit.group = false;
    l.own = unit.after(l.before_last);
    if (!l.last_nullable && low == 0) {
      l.last_nullable = true;
      --l.solid_units;
    }
    l.last_optional_empty = l.last_optional_empty || optional_empty;
    // Checked where loops are added: an anchor after them costs nothing ("()*{160,}$").
    if (l.run().after_anchor > kMaxAnchoredNullableLoops) wide_nullable_ = true;
    // Many copies that can all match the empty string: glibc's epsilon closures grow with
    // the square of their number ("(a*){5000}" 2.4 GB, "0*{,309}{10}" past a minute).
    // (One copy is no copies: "(w0001|...|w0900)?" or a large group starred is cheap.)
    if (copies > 1 && l.last_nullable && nodes > (operand_nullable ? kMaxNullableCopiesNodes : kMaxNullableNodes))
      wide_nullable_ = true;
    if (copies > 1 && operand_nullable && options > kMaxNullableCopiesOptions) wide_nullable_ = true;
  }
  bool too_wide() const {
    double nodes = 0, options = 0;
    for (const Level& l : levels_) {
      nodes += l.nodes;
      options += l.options;
    }
    return nodes > kMaxExpandedNodes || options > kMaxNestedOptions;
  }
  bool too_deep() const {
    int height = 0, anchored = 0;
    for (const Level& l : levels_) {
      height = std::max(height, l.height);
      anchored = std::max(anchored, l.anchored_height);
    }
    // With an anchor in the pattern, bounded copies too ("^()?{200}": 3 s; {309} took more
    // than 4 GB, in grep 3.8 as well).
    if (anchored_ && optional_empty_copies_ > kMaxAnchoredCopiesOfOptionalEmpty) return true;
    return wide_nullable_ || anchored > kMaxNullableRepeatDepthOverAnchors ||
           height > (anchored_ ? kMaxNullableRepeatDepthAnchored : kMaxNullableRepeatDepth);
  }

 private:
  struct Depth {
    int height = 0, anchored_height = 0;
    bool anchor = false;
    double ways = 0;
  };
  // The current alternative, finished: its run where the group ends, as a unit's.
  void end_alternative() {
    Level& l = levels_.back();
    Unit& e = l.ended;
    if (l.solid_units == 0) {
      l.nullable_alt = true;
      e.nullable = true;
      e.through = either(e.through, l.own);
    } else {
      e.trailing = either(e.trailing, l.own);
    }
  }
  void add(double nodes, double options, bool nullable, Depth d, const Unit& unit) {
    Level& l = levels_.back();
    l.before_last = l.own;
    l.last_unit = unit;
    l.own = unit.after(l.own);
    l.nodes += nodes;
    l.options += options;
    l.last_nodes = nodes;
    l.last_options = options;
    l.last_nullable = nullable;
    l.last_optional_empty = false;
    l.last_ways = d.ways;
    l.ways = std::max(l.ways, d.ways);
    l.last_height = d.height;
    l.last_anchored_height = d.anchored_height;
    l.last_anchor = d.anchor;
    l.height = std::max(l.height, d.height);
    l.anchored_height = std::max(l.anchored_height, d.anchored_height);
    l.anchor = l.anchor || d.anchor;
    l.has_last = true;
    if (!nullable) ++l.solid_units;
  }
  std::vector<Level> levels_;
  bool extended_;
  bool anchored_ = false;  // an anchor anywhere in the pattern
  bool wide_nullable_ = false;  // a large operand that can match empty, repeated
  double optional_empty_copies_ = 0;  // the most copies of an optional group that can match empty
};

// A bracket expression from p[i] == '['; the index just past it (p.size() if unclosed).
std::size_t past_bracket(std::string_view p, std::size_t i) {
  ++i;
  if (i < p.size() && p[i] == '^') ++i;
  if (i < p.size() && p[i] == ']') ++i;
  while (i < p.size() && p[i] != ']') {
    if (p[i] == '[' && i + 1 < p.size() && (p[i + 1] == ':' || p[i + 1] == '=' || p[i + 1] == '.')) {
      const char close[] = {p[i + 1], ']'};
      const std::size_t end = p.find(std::string_view(close, 2), i + 2);
      if (end == std::string_view::npos) return p.size();
      i = end + 2;
      continue;
    }
    ++i;
  }
  return i < p.size() ? i + 1 : p.size();
}

// An interval's body from p[i] (just past '{' or "\{") up to `close`: low and high (-1:
// none), and the index past it; nullopt when it is no interval (ERE: a literal '{').
constexpr double kDupMax = 32767;  // RE_DUP_MAX

struct Interval {
  double low = 0;
  double high = -1;
  std::size_t end = 0;
};
std::optional<Interval> interval(std::string_view p, std::size_t i, std::string_view close) {
  Interval out;
  const auto number = [&](double& value) {
    const std::size_t start = i;
    double v = 0;
    while (i < p.size() && std::isdigit(static_cast<unsigned char>(p[i]))) v = std::min(v * 10 + (p[i++] - '0'), 1e9);
    if (i > start) value = v;
    return i > start;
  };
  const bool has_low = number(out.low);
  if (i < p.size() && p[i] == ',') {
    ++i;
    if (!number(out.high)) out.high = -1;
  } else {
    if (!has_low) return std::nullopt;
    out.high = out.low;
  }
  if (p.substr(i, close.size()) != close) return std::nullopt;
  out.end = i + close.size();
  // Past RE_DUP_MAX glibc refuses the interval itself, with its own message: leave it that.
  if (out.low > kDupMax || out.high > kDupMax) out.low = out.high = 1;
  return out;
}

}  // namespace

// Whether out[at] is escaped: an odd number of backslashes before it.
bool escaped_at(const std::string& out, std::size_t at) {
  std::size_t backslashes = 0;
  while (at > backslashes && out[at - backslashes - 1] == '\\') ++backslashes;
  return backslashes % 2 == 1;
}

std::string collapse_repeats(std::string_view p, bool extended, bool after_backrefs_only) {
  std::string out;
  out.reserve(p.size());
  bool operand = false;  // the last token ends something a repetition applies to
  bool backref = false;  // ...and it is a back-reference
  // The run of operators since the operand: how many of each.
  int plus = 0, question = 0, star = 0;
  const auto flush = [&] {
    if (plus + question + star == 0) return;
    const char* op = (star == 0 && question == 0) ? (extended ? "+" : "\\+")
                     : (star == 0 && plus == 0)   ? (extended ? "?" : "\\?")
                                                  : "*";
    out += op;
    plus = question = star = 0;
  };
  for (std::size_t i = 0; i < p.size();) {
    const char c = p[i];
    const bool escaped = c == '\\' && i + 1 < p.size();
    const char n = escaped ? p[i + 1] : '\0';
    const bool is_star = !escaped && c == '*';
    const bool is_plus = extended ? !escaped && c == '+' : escaped && n == '+';
    const bool is_question = extended ? !escaped && c == '?' : escaped && n == '?';
    if (operand && (backref || !after_backrefs_only) && (is_star || is_plus || is_question)) {
      star += is_star;
      plus += is_plus;
      question += is_question;
      i += escaped ? 2 : 1;
      continue;
    }
    flush();
    // A run of '|' is one empty alternative however long ("a||||b" is "a||b").
    const bool bar = extended ? !escaped && c == '|' : escaped && n == '|';
    const std::size_t bar_size = extended ? 1 : 2;
    if (bar && out.size() >= 2 * bar_size &&
        out.compare(out.size() - 2 * bar_size, 2 * bar_size, extended ? "||" : "\\|\\|") == 0 &&
        (extended ? !escaped_at(out, out.size() - 2) : !escaped_at(out, out.size() - 4))) {
      i += bar_size;
      operand = false;
      continue;
    }
    std::size_t end = i + 1;
    backref = escaped && n >= '1' && n <= '9';
    if (c == '[') {
      end = past_bracket(p, i);
      operand = true;
    } else if (escaped) {
      end = i + 2;
      // \( \| \{ \} open, separate or bound (BRE); \< \> \b \B \` \' are positions.
      const bool structural = !extended && (n == '(' || n == '|' || n == '{' || n == '}');
      const bool position = n == '<' || n == '>' || n == 'b' || n == 'B' || n == '`' || n == '\'';
      operand = !structural && !position;
    } else if (c == '\\') {
      operand = false;  // a trailing backslash: glibc's error, kept
    } else if (extended && c == '{') {
      // An interval, kept whole; else a literal '{' (RE_INVALID_INTERVAL_ORD), an operand.
      const std::optional<Interval> r = interval(p, i + 1, "}");
      if (r) end = r->end;
      operand = !r;
    } else if (extended) {
      operand = !(c == '(' || c == '|' || c == '^' || c == '$' || c == '*' || c == '+' || c == '?');
    } else {
      // A BRE '*' with no operand before it is a literal, and an operand itself.
      operand = c != '^' && c != '$' && c != '\n';
    }
    out.append(p.substr(i, end - i));
    i = end;
  }
  flush();
  return out;
}

std::optional<std::string> too_wide(std::string_view p, bool extended) {
  Estimate e(extended);
  for (std::size_t i = 0; i < p.size();) {
    const char c = p[i];
    if (c == '[') {
      i = past_bracket(p, i);
      e.atom();
      continue;
    }
    if (c == '\\' && i + 1 < p.size()) {
      const char n = p[i + 1];
      i += 2;
      if (!extended && n == '(') e.open();
      else if (!extended && n == ')') e.close();
      else if (!extended && n == '|') e.alternative();
      else if (n == '<' || n == '>' || n == 'b' || n == 'B' || n == '`' || n == '\'') e.anchor();
      else if (!extended && n == '+') e.repeat(1, -1);
      else if (!extended && n == '?') e.repeat(0, 1);
      else if (!extended && n == '{') {
        if (const std::optional<Interval> r = interval(p, i, "\\}")) {
          e.repeat(r->low, r->high);
          i = r->end;
        }
      } else if (extended || n != '|') {
        e.atom();
      }
    } else {
      ++i;
      if (c == '*') e.repeat(0, -1);
      else if (extended && c == '+') e.repeat(1, -1);
      else if (extended && c == '?') e.repeat(0, 1);
      else if (extended && c == '(') e.open();
      else if (extended && c == ')') e.close();
      else if (extended && c == '{') {
        if (const std::optional<Interval> r = interval(p, i, "}")) {
          e.repeat(r->low, r->high);
          i = r->end;
        } else {
          e.atom();
        }
      } else if ((extended && c == '|') || c == '\n') {
        e.alternative();
      } else if (c == '^' || c == '$') {
        e.anchor();
      } else {
        e.atom();
      }
    }
    if (e.too_deep())
      return "the expression nests repetitions of what can match the empty string too "
             "deep for the regex matcher, which takes exponential time to compile them; nest fewer "
             "repetitions";
    if (e.too_wide())
      return "the expression repeats too much for the regex matcher (more than " +
             std::to_string(static_cast<long>(kMaxExpandedNodes)) +
             " copies, or options nested too deep, once its repetitions are expanded); repeat less, "
             "or nest fewer repetitions";
  }
  return std::nullopt;
}

}  // namespace gpufilter::regex
