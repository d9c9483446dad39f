#include "gpufilter/fail2ban/date.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <ctime>
#include <stdexcept>

#include "gpufilter/fail2ban/strptime.hpp"
#include "gpufilter/regex/factors.hpp"

namespace gpufilter::fail2ban {
namespace {

constexpr int kLineBegin = 8, kLineEnd = 4, kWordBegin = 2, kWordEnd = 1;
enum class Bound { kNo, kYes, kStart };  // setRegex's wordBegin: False, True or 'start'

// The regexes fail2ban runs over date patterns (datetemplate.py), compiled once per thread.
struct Meta {
  PyRegex grouped{R"((?<!(?:\(\?))(?<!\\)\((?!\?))"};
  PyRegex group{R"(^((?:\(\?\w+\))?\^?(?:\(\?\w+\))?)(.*?)(\$?)$)"};
  PyRegex global_flags{R"(((?:^|(?!<\\))\(\?[a-z]+\)))"};
  PyRegex no_bounds{R"(^\{UNB\})"};
  PyRegex line_begin_mark{R"(^\{\^LN-BEG\})"};
  PyRegex start_anchor{R"(^\((?:\?:)?\^\|\\b\|\\W\))"};
  PyRegex end_anchor{R"(\(\?=\\b\|\\W\|\$\)$)"};
  PyRegex no_word_begin{R"(^\(*(?:\(\?\w+\))?(?:\^|\(*\*\*|\((?:\?:)?\^))"};
  PyRegex no_word_end{R"((?<!\\)(?:\$\)?|\\b|\\s|\*\*\)*)$)"};
  PyRegex del_word_bounds{R"(^\(*(?:\(\?\w+\))?\(*\*\*|(?<!\\)\*\*\)*$)"};
  PyRegex line_bound_begin{R"(^(?:\(\?\w+\))?(?:\^|\((?:\?:)?\^(?!\|)))"};
  PyRegex line_bound_end{R"((?<![\\\|])(?:\$\)?)$)"};
  PyRegex alpha{R"((?<!\%)\%[aAbBpc])"};
  PyRegex epoch{R"((?i)(?<!\\)\{L?EPOCH\})"};
  PyRegex date{R"((?i)(?<!\\)\{DATE\})"};
};

Meta& meta() {
  static thread_local Meta m;
  return m;
}

std::string remove(const PyRegex& re, const std::string& s, std::size_t count = 0) {
  return py_sub(re, s, [](const PyRegex::Match&) { return std::string(); }, count);
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string unbound_pattern(const std::string& p) {
  const Meta& m = meta();
  return remove(m.end_anchor, remove(m.start_anchor, remove(m.line_begin_mark, remove(m.no_bounds, p))));
}

}  // namespace

// Whether `text` may hold an epoch date: every EPOCH and LEPOCH regex needs ten digits in
// a row. Only ASCII text is judged (\d may match other digits); the rest may. The regex
// tried at every digit of every line made selinux-ssh's date reader the slowest of the
// stock filters' (docs/PERFORMANCE.md).
static bool may_hold_epoch(std::string_view text) noexcept {
  int run = 0;
  for (const char c : text) {
    if (static_cast<unsigned char>(c) >= 0x80) return true;
    run = c >= '0' && c <= '9' ? run + 1 : 0;
    if (run == 10) return true;
  }
  return false;
}

struct DateTemplate {
  enum class Kind { kPattern, kEpoch, kTai64n } kind = Kind::kPattern;
  std::string name;
  std::optional<std::string> pattern;  // DatePatternRegex.pattern
  std::string regex;
  double weight = 1.0;
  int flags = 0;
  int hits = 0;  // template.hits: every successful matchDate
  std::size_t group_index = 1;
  bool long_form = false;
  std::unique_ptr<PyRegex> compiled;
  // Literals one of which every match holds (regex/factors.hpp: the set with the fewest,
  // often one punctuation byte such as '/'), found when compiled; nullopt: none known. A
  // line that holds none is not searched: gpufilterd's detectors meet other logs' lines
  // (every stock filter reads every jail's lines), where most templates cannot match, and
  // a search that finds nothing changes nothing.
  std::optional<std::vector<std::string>> factors;
  mutable PyRegex::GroupViews groups;  // date()'s, kept for its capacity
  // The last date read: lines in a row share their timestamp, so its text (with `now`'s
  // second, which decides the assumed year and day) gives the same time again.
  struct LastDate {
    std::string text;
    std::int64_t now = -1;
    std::optional<double> time;
  };
  mutable LastDate last;

  // DateTemplate.setRegex.
  void set_regex(std::string r, Bound begin, bool end) {
    const Meta& m = meta();
    r.erase(0, r.find_first_not_of(" \t\r\n"));
    r.erase(r.find_last_not_of(" \t\r\n") + 1);
    const PyRegex::Match gf = m.global_flags.search(r);
    const std::string flags_text = gf ? *gf.group(1) : std::string();
    if (gf) r = remove(m.global_flags, r, 1);
    const bool bound_begin = begin != Bound::kNo && !m.no_word_begin.search(r);
    const bool bound_end = end && !m.no_word_end.search(r);
    if (!m.grouped.search(r)) {
      r = py_sub(m.group, r, [](const PyRegex::Match& g) { return *g.group(1) + "(" + *g.group(2) + ")" + *g.group(3); });
    }
    flags = 0;
    if (bound_begin) {
      flags |= begin != Bound::kStart ? kWordBegin : kLineBegin;
      if (begin != Bound::kStart) {
        r = R"((?=^|\b|\W))" + r;
      } else {
        r = R"(^(?:\W{0,2})?)" + r;
        if (name.rfind("{^LN-BEG}", 0) != 0) name = "{^LN-BEG}" + name;
      }
    }
    if (bound_end) {
      flags |= kWordEnd;
      r += R"((?=\b|\W|$))";
    }
    if (!(flags & kLineBegin) && m.line_bound_begin.search(r)) flags |= kLineBegin;
    if (!(flags & kLineEnd) && m.line_bound_end.search(r)) flags |= kLineEnd;
    r = py_sub(m.del_word_bounds, r, [](const PyRegex::Match& g) {
      std::string s = *g.group(0);
      for (std::size_t at; (at = s.find("**")) != std::string::npos;) s.erase(at, 2);
      return s;
    });
    regex = flags_text + r;
  }

  void compile() {
    compiled = std::make_unique<PyRegex>(regex);
    std::string perl = translate_python_regex(regex);
    regex::FactorOptions options;
    options.utf8 = true;
    options.min_length = 1;
    options.fewest = true;
    // A case-blind template ("(?i)" first: %b, %a, %p): its factors compared folded.
    if (perl.rfind("(?i)", 0) == 0) {
      perl.erase(0, 4);
      options.ignore_case = true;
    }
    factors = regex::required_factors(perl, regex::Syntax::kPerl, options);
    if (factors && options.ignore_case) factors = caseless_runs(*factors);
  }

  // A case-blind template's factors as bytes a match holds as they stand: of each factor
  // its longest run of ASCII bytes that are no letters (folding changes letters alone, and
  // 's' and 'k' even match non-ASCII letters; a non-ASCII byte may be part of a letter), so
  // that `^<co ts="` wrapped around the case-blind defaults still keeps a line without `="`
  // from PCRE2. None where a factor has no such run.
  static std::optional<std::vector<std::string>> caseless_runs(const std::vector<std::string>& folded) {
    std::vector<std::string> runs;
    for (const std::string& f : folded) {
      std::size_t best = 0, best_size = 0, start = 0;
      for (std::size_t i = 0; i <= f.size(); ++i) {
        const auto c = i < f.size() ? static_cast<unsigned char>(f[i]) : 0x80;
        if (c < 0x80 && !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) continue;
        if (i - start > best_size) {
          best = start;
          best_size = i - start;
        }
        start = i + 1;
      }
      if (best_size == 0) return std::nullopt;
      runs.push_back(f.substr(best, best_size));
    }
    return runs;
  }

  // Into `m` (its memory reused): whether the template matches.
  bool match(PyRegex::Match& m, std::string_view line, std::size_t pos = 0,
             std::size_t endpos = std::string_view::npos) {
    if (!compiled) compile();
    if (factors && std::none_of(factors->begin(), factors->end(), [&](const std::string& f) {
          return f.size() == 1 ? line.find(f[0]) != std::string_view::npos : line.find(f) != std::string_view::npos;
        })) {
      m.ok = false;
      return false;
    }
    if (kind == Kind::kEpoch) {
      const std::size_t from = std::min(pos, line.size());
      const std::size_t to = std::min(endpos, line.size());
      if (!may_hold_epoch(line.substr(from, to > from ? to - from : 0))) {
        m.ok = false;
        return false;
      }
    }
    if (!compiled->search(m, line, pos, endpos)) return false;
    ++hits;
    return true;
  }

  std::optional<double> date(const PyRegex::Match& m, double now) const {
    if (kind == Kind::kPattern) {
      // Only when every group lies inside the match is the match's text the whole key
      // (read from the spans: the fields by name only when the key is new).
      const auto start = static_cast<std::ptrdiff_t>(m.start()), end = static_cast<std::ptrdiff_t>(m.end());
      const bool inside = std::all_of(m.groups.begin(), m.groups.end(), [&](const PyRegex::Span& g) {
        return !g.set() || (g.start >= start && g.end <= end);
      });
      const std::string_view text = m.subject.substr(m.start(), m.end() - m.start());
      const auto second = static_cast<std::int64_t>(now);
      if (inside && last.now == second && last.text == text) return last.time;
      compiled->group_views(m, groups);
      const std::optional<double> time = strptime_groups(NamedGroupViews(groups), now);
      if (inside) {
        last.text.assign(text);
        last.now = second;
        last.time = time;
      }
      return time;
    }
    const std::string v = m.group(group_index).value_or("");
    if (kind == Kind::kTai64n) return v.size() >= 17 ? std::optional<double>(std::stoll(v.substr(2, 15), nullptr, 16))
                                                     : std::nullopt;
    if (long_form && v.size() >= 13) {
      return (v.size() >= 16 && v.find('.') == std::string::npos) ? std::stod(v) / 1000000 : std::stod(v) / 1000;
    }
    return std::stod(v);
  }
};

namespace {

using Template = std::shared_ptr<DateTemplate>;

// DatePatternRegex(pattern).
Template pattern_template(const std::string& pattern, Bound begin = Bound::kYes, bool end = true) {
  auto t = std::make_shared<DateTemplate>();
  t->pattern = pattern;
  std::string p = pattern;
  const Meta& m = meta();
  if (m.no_bounds.search(p)) {
    p = remove(m.no_bounds, p);
    begin = Bound::kNo;
    end = false;
  }
  if (begin != Bound::kNo && m.line_begin_mark.search(p)) {
    p = remove(m.line_begin_mark, p);
    begin = Bound::kStart;
  }
  PatternParts parts;
  try {
    parts = expand_time_fields(p);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("Failed to set datepattern '" + pattern + "': " + e.what());
  }
  t->name = parts.name;
  if (m.alpha.search(p)) parts.regex = "(?iu)" + parts.regex;
  t->set_regex(parts.regex, begin, end);
  return t;
}

Template epoch_template(bool line_begin_only, const std::optional<std::string>& pattern, bool long_form) {
  auto t = std::make_shared<DateTemplate>();
  t->kind = DateTemplate::Kind::kEpoch;
  t->long_form = long_form;
  t->name = pattern ? *pattern : (long_form ? "LongEpoch" : "Epoch");
  const std::string epoch = long_form ? R"(\d{10,11}(?:\d{3}(?:\.\d{1,6}|\d{3})?)?)" : R"(\d{10,11}\b(?:\.\d{3,6})?)";
  if (pattern) {
    t->group_index = 2;
    t->set_regex("(" + py_sub(meta().epoch, *pattern, [&](const PyRegex::Match&) { return "(" + epoch + ")"; }) + ")",
                 Bound::kYes, true);
  } else if (!line_begin_only) {
    t->set_regex(R"(((?:^|(?P<square>(?<=^\[))|(?P<selinux>(?<=\baudit\())))" + epoch +
                     R"()(?:(?(selinux)(?=:\d+\)))|(?(square)(?=\]))))",
                 Bound::kNo, true);
  } else {
    t->set_regex(R"(((?P<square>(?<=^\[))?)" + epoch + R"()(?(square)(?=\])))", Bound::kStart, true);
  }
  return t;
}

Template tai64n_template(Bound begin) {
  auto t = std::make_shared<DateTemplate>();
  t->kind = DateTemplate::Kind::kTai64n;
  t->name = "TAI64N";
  t->set_regex("@[0-9a-f]{24}", begin, true);
  return t;
}

// _getPatternTemplate(pattern, key).
Template pattern_or_special(const std::string& pattern, std::string key = {}) {
  if (key.empty()) key = pattern.find('%') == std::string::npos ? upper(pattern) : pattern;
  if (key.find("EPOCH") != std::string::npos) {
    if (meta().epoch.search(pattern)) return epoch_template(false, pattern, key.find("LEPOCH") != std::string::npos);
    if (key == "EPOCH" || key == "{^LN-BEG}EPOCH" || key == "^EPOCH") return epoch_template(key != "EPOCH", {}, false);
    if (key == "LEPOCH" || key == "{^LN-BEG}LEPOCH" || key == "^LEPOCH") {
      return epoch_template(key != "LEPOCH", {}, true);
    }
  }
  if (key == "TAI64N" || key == "{^LN-BEG}TAI64N" || key == "^TAI64N") {
    return tai64n_template(key != "TAI64N" ? Bound::kStart : Bound::kNo);
  }
  return pattern_template(pattern);
}

const char* const kDefaultTemplates[] = {
    R"(%ExY(?P<_sep>[-/.])%m(?P=_sep)%d(?:T|  ?)%H:%M:%S(?:[.,]%f)?(?:\s*%z)?)",
    R"((?:%a )?%b %d %k:%M:%S(?:\.%f)?(?: %ExY)?)",
    R"((?:%a )?%b %d %ExY %k:%M:%S(?:\.%f)?)",
    R"(%d(?P<_sep>[-/])%m(?P=_sep)(?:%ExY|%Exy) %k:%M:%S)",
    R"(%d(?P<_sep>[-/])%b(?P=_sep)%ExY[ :]?%H:%M:%S(?:\.%f)?(?: %z)?)",
    R"(%m/%d/%ExY:%H:%M:%S)",
    R"(%m-%d-%ExY %k:%M:%S(?:\.%f)?)",
    R"(EPOCH)",
    R"({^LN-BEG}%H:%M:%S)",
    R"(^<%m/%d/%Exy@%H:%M:%S>)",
    R"(%Exy%Exm%Exd  ?%H:%M:%S)",
    R"(%b %d, %ExY %I:%M:%S %p)",
    R"(^%b-%d-%Exy %k:%M:%S)",
    R"(%ExY%Exm%Exd(?:T|  ?)%ExH%ExM%ExS(?:[.,]%f)?(?:\s*%z)?)",
    R"((?:%Z )?(?:%a )?%b %d %k:%M:%S(?:\.%f)?(?: %ExY)?)",
    R"((?:%z )?(?:%a )?%b %d %k:%M:%S(?:\.%f)?(?: %ExY)?)",
    R"(TAI64N)",
};

// _getAnchoredTemplate(template, wrap).
template <typename Wrap>
Template anchored(const DateTemplate& t, Wrap wrap) {
  if (!t.pattern) return pattern_or_special(wrap(t.name));
  return pattern_or_special(wrap(*t.pattern));
}

// DateDetectorCache: every default template anchored at the line's start (weight 100)
// first, then the defaults themselves.
std::vector<Template> default_templates(bool all) {
  std::vector<Template> plain, first;
  for (const char* p : kDefaultTemplates) plain.push_back(pattern_or_special(p));
  if (!all) return plain;
  for (const Template& t : plain) {
    if (t->name.rfind("{^LN-BEG}", 0) == 0 || t->name.rfind("^", 0) == 0) continue;
    Template a = anchored(*t, [](const std::string& s) { return "{^LN-BEG}" + s; });
    if (a->name != t->name) {
      a->weight = 100.0;
      first.push_back(a);
    }
  }
  first.insert(first.end(), plain.begin(), plain.end());
  return first;
}

// line[from:to], from >= -1 (a view: compared and assigned a few times a line).
std::string_view slice(std::string_view line, std::ptrdiff_t from, std::ptrdiff_t to) {
  if (from < 0) return {};
  const auto n = static_cast<std::ptrdiff_t>(line.size());
  from = std::min(from, n);
  to = std::min(to, n);
  return to > from ? line.substr(static_cast<std::size_t>(from), static_cast<std::size_t>(to - from)) : std::string_view();
}

bool alnum(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)); });
}

}  // namespace

struct DateDetector::Entry {
  Template t;
  int hits = 0;
  double last_used = 0;
  std::size_t distance = 0x7fffffff;
  double weight() const { return hits * t->weight / static_cast<double>(std::max<std::size_t>(1, distance)); }
};

DateDetector::DateDetector() = default;
DateDetector::DateDetector(DateDetector&&) noexcept = default;
DateDetector& DateDetector::operator=(DateDetector&&) noexcept = default;
DateDetector::~DateDetector() = default;

void DateDetector::add(Template t, bool ignore_duplicate) {
  for (const Entry& e : templates_) {
    if (e.t->name == t->name) {
      if (ignore_duplicate) return;
      throw std::invalid_argument("There is already a template with name " + t->name);
    }
  }
  templates_.push_back(Entry{std::move(t)});
}

void DateDetector::add_defaults(int filter_flags, const std::string* pre_match) {
  const bool ignore_duplicate = !templates_.empty();
  for (Template t : default_templates(pre_match == nullptr)) {
    if (filter_flags != 0 && !(t->flags & filter_flags)) continue;
    if (pre_match != nullptr) {
      t = anchored(*t, [&](const std::string& s) {
        return py_sub(meta().date, *pre_match, [&](const PyRegex::Match&) { return unbound_pattern(s); });
      });
    }
    add(std::move(t), ignore_duplicate);
  }
}

void DateDetector::append(const std::string& pattern) {
  const std::string key = pattern.find('%') == std::string::npos ? upper(pattern) : pattern;
  if (key == "{^LN-BEG}" || key == "{DEFAULT}") return add_defaults(key == "{^LN-BEG}" ? kLineBegin : 0, nullptr);
  if (key.find("{DATE}") != std::string::npos) return add_defaults(0, &pattern);
  add(key == "{NONE}" ? pattern_or_special("{UNB}^", key) : pattern_or_special(pattern, key), false);
}

std::size_t DateDetector::reorder(std::size_t num) {
  Entry& entry = templates_[num];
  const double untime = entry.last_used - 300;
  const double weight = entry.weight();
  std::size_t pos = first_unused_ < num ? first_unused_ : num / 2;
  const auto moveable = [&] { return weight > templates_[pos].weight() || untime > templates_[pos].last_used; };
  if (!moveable()) {
    if (pos == num - 1) return num;
    pos = num - 1;
    if (!moveable()) return num;
  }
  Entry moved = std::move(templates_[num]);
  templates_.erase(templates_.begin() + static_cast<std::ptrdiff_t>(num));
  templates_.insert(templates_.begin() + static_cast<std::ptrdiff_t>(pos), std::move(moved));
  while (first_unused_ < templates_.size() && templates_[first_unused_].hits) ++first_unused_;
  return pos;
}

// A template matched: its hits, distance and the date's boundaries (searched first on the
// next line), and its place in the list. Returns its new index.
std::size_t DateDetector::remember(std::size_t i, std::string_view line, std::size_t distance, std::size_t endpos) {
  Entry& entry = templates_[i];
  entry.hits += 1;
  entry.last_used = wall_clock_now();
  entry.distance = distance;
  if (first_unused_ == i) ++first_unused_;
  last_pos_ = distance;
  last_pos_before_ = slice(line, static_cast<std::ptrdiff_t>(distance) - 1, static_cast<std::ptrdiff_t>(distance));
  last_pos_at_ = slice(line, static_cast<std::ptrdiff_t>(distance), static_cast<std::ptrdiff_t>(distance) + 1);
  last_end_ = endpos;
  // line[endpos-1]: Python's index -1 is the last character when the date is empty at 0.
  last_end_before_ = endpos == 0 ? slice(line, static_cast<std::ptrdiff_t>(line.size()) - 1,
                                         static_cast<std::ptrdiff_t>(line.size()))
                                 : slice(line, static_cast<std::ptrdiff_t>(endpos) - 1, static_cast<std::ptrdiff_t>(endpos));
  last_end_at_ = slice(line, static_cast<std::ptrdiff_t>(endpos), static_cast<std::ptrdiff_t>(endpos) + 1);
  if (i != 0 && i != last_index_) i = reorder(i);
  return i;
}

std::optional<DateDetector::Found> DateDetector::find(std::string_view line, double now) {
  if (templates_.empty()) add_defaults(0, nullptr);
  constexpr std::size_t kNone = SIZE_MAX;
  PyRegex::Match& match = match_;
  match.ok = false;
  struct Best {
    PyRegex::Match m;
    std::size_t distance = 0x7fffffff, index = kNone;
  } found;
  std::size_t ignore = kNone, i = last_index_;
  if (i < templates_.size()) {
    DateTemplate& t = *templates_[i].t;
    const auto d = static_cast<std::ptrdiff_t>(last_pos_), e = static_cast<std::ptrdiff_t>(last_end_);
    if (t.flags & (kLineBegin | kLineEnd)) {
      t.match(match, line);
      ignore = i;
    } else if ((slice(line, d - 1, d) == last_pos_before_ || (slice(line, d, d + 1) == last_pos_at_ && !alnum(last_pos_at_))) &&
               (slice(line, e, e + 1) == last_end_at_ || (slice(line, e - 1, e) == last_end_before_ && !alnum(last_end_before_)))) {
      t.match(match, line, last_pos_, last_end_);
    } else {
      t.match(match, line);
      ignore = i;
    }
    if (match && !(templates_.size() == 1 || (t.flags & (kLineBegin | kLineEnd)) ||
                   (match.start() == last_pos_ && match.end() == last_end_))) {
      found = {match, match.start(), i};  // a collision: keep it, and search the others
      match.ok = false;
    }
  }
  if (!match) {
    for (i = 0; i < templates_.size(); ++i) {
      if (i == ignore) continue;
      Entry& entry = templates_[i];
      entry.t->match(match, line);
      if (!match) continue;
      const std::size_t distance = match.start();
      if (i + 1 >= templates_.size() || (entry.t->flags & (kLineBegin | kLineEnd))) break;
      if (distance == 0 && entry.hits && !templates_[i + 1].t->hits) break;
      if (distance > entry.distance || distance > last_pos_) {
        if (distance < found.distance) found = {match, distance, i};
        match.ok = false;
        continue;
      }
      break;
    }
    if (!match && found.index != kNone) {
      match = found.m;
      i = found.index;
    }
  }
  if (!match) return std::nullopt;
  const DateTemplate* t = templates_[i].t.get();  // remember() may reorder the entries, not move the templates
  i = remember(i, line, match.start(), match.end());
  last_index_ = i;
  Found out;
  if (!match.groups[1].set()) return out;  // a template without a group 1 would fail in fail2ban too
  out.start = match.start(1);
  out.end = match.end(1);
  if (out.end > out.start) {
    try {
      out.time = t->date(match, now);
    } catch (const std::exception&) {  // getTime's ValueError: the date is not usable
      out.time = std::nullopt;
    }
  }
  return out;
}

// The coarse clock: a millisecond or so is all the dates and caches need (the assumed year
// and day, recency, expiry), and the precise one, read a few times for every line of
// every date reader, was 4 % of gpufilterd's time with many filters.
double wall_clock_now() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME_COARSE, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace gpufilter::fail2ban
