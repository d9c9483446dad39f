#include "gpufilter/fail2ban/filter.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <filesystem>
#include <list>
#include <set>
#include <span>
#include <stdexcept>
#include <type_traits>
#include <unordered_map>
#include <string_view>
#include <utility>
#include <vector>

#include "gpufilter/fail2ban/date.hpp"
#include "gpufilter/fail2ban/pyregex.hpp"
#include "gpufilter/fail2ban/reader.hpp"
#include "gpufilter/fail2ban/tags.hpp"
#include "gpufilter/regex/factors.hpp"
#include "factor_gate.hpp"
#include "mlfid_cache.hpp"

namespace gpufilter::fail2ban {
namespace {

// (before the date, the date: left empty unless Impl::keeps_dates(), after it)
using TupleLine = std::array<std::string, 3>;
using Lines = std::vector<TupleLine>;
// The names of a filter's groups (every regex's, their alt_ targets, and the keys fail2ban
// adds), numbered in name order once the filter is loaded: a line's groups are looked up
// by number, not by comparing names (a dozen look-ups a line).
class GroupNames {
 public:
  using Id = std::uint16_t;
  void add(std::string_view name) { names_.emplace_back(name); }
  void freeze() {
    std::sort(names_.begin(), names_.end());
    names_.erase(std::unique(names_.begin(), names_.end()), names_.end());
  }
  Id id(std::string_view name) const {
    return static_cast<Id>(std::lower_bound(names_.begin(), names_.end(), name) - names_.begin());
  }
  const std::string& name(Id id) const { return names_[id]; }

 private:
  std::vector<std::string> names_;
};
using GroupId = GroupNames::Id;

// The numbers of the keys the filter's own steps read.
struct Keys {
  GroupId content, mlfid, nofail, mlfgained, mlfforget, user, fid, ip4, ip6, dns, cidr;
  static constexpr const char* kNames[] = {"content", "mlfid", "nofail", "mlfgained", "mlfforget", "user",
                                           "fid",     "ip4",   "ip6",    "dns",       "cidr"};
  explicit Keys(const GroupNames& n = {})
      : content(n.id("content")), mlfid(n.id("mlfid")), nofail(n.id("nofail")), mlfgained(n.id("mlfgained")),
        mlfforget(n.id("mlfforget")), user(n.id("user")), fid(n.id("fid")), ip4(n.id("ip4")), ip6(n.id("ip6")),
        dns(n.id("dns")), cidr(n.id("cidr")) {}
};

// A match's named groups (Python's groupdict()) by number, in name order as a dict of them
// would be iterated here: a filter has a few dozen, so a sorted vector (one allocation,
// not one map node per group per line). Their values are strings (Groups: a failure's
// data, kept) or views of the text searched (GroupViews: a line's matches, read before
// that text changes, and copied only into the failures kept).
template <typename V>
class BasicGroups {
 public:
  using Entry = std::pair<GroupId, std::optional<V>>;
  BasicGroups() = default;
  // The groups of a match: `numbers` holds (name's id, group number), sorted by id.
  BasicGroups(std::span<const std::pair<GroupId, std::size_t>> numbers, const PyRegex::Match& m) { assign(numbers, m); }
  void assign(std::span<const std::pair<GroupId, std::size_t>> numbers, const PyRegex::Match& m) {
    entries_.clear();  // its memory reused
    entries_.reserve(numbers.size());
    for (const auto& [id, number] : numbers) {
      if (number < m.groups.size() && m.groups[number].set())
        entries_.emplace_back(id, V(m.subject.substr(m.start(number), m.end(number) - m.start(number))));
      else
        entries_.emplace_back(id, std::nullopt);
    }
  }
  // Owned copies of views.
  template <typename U>
  explicit BasicGroups(const BasicGroups<U>& other) {
    entries_.reserve(other.entries_.size());
    for (const auto& [id, value] : other.entries_) entries_.emplace_back(id, value ? std::optional<V>(V(*value)) : std::nullopt);
  }
  auto begin() const { return entries_.begin(); }
  auto end() const { return entries_.end(); }
  void clear() { entries_.clear(); }
  typename std::vector<Entry>::const_iterator find(GroupId key) const {
    const auto it = lower(key);
    return it != entries_.end() && it->first == key ? it : entries_.end();
  }
  // The entry of `key`, added unset when missing (may move the others: no reference to
  // one entry is kept across another's insertion).
  std::optional<V>& operator[](GroupId key) {
    auto it = entries_.begin() + (lower(key) - entries_.cbegin());
    if (it == entries_.end() || it->first != key) it = entries_.insert(it, Entry(key, std::nullopt));
    return it->second;
  }
  void erase(GroupId key) {
    const auto it = find(key);
    if (it != entries_.end()) entries_.erase(it);
  }
  // erase() for every reader here (an unset entry is no value: not truthy, not copied, not
  // handed out), the entry kept: a failure's groups keep their shape from line to line,
  // and its next update assigns in place instead of merging two vectors.
  void unset(GroupId key) {
    const auto it = find(key);
    if (it != entries_.end()) entries_[static_cast<std::size_t>(it - entries_.begin())].second.reset();
  }
  // Views moved to the text at `to` from the text at `from` they were views of.
  void rebase(const char* from, const char* to) requires std::is_same_v<V, std::string_view> {
    for (auto& [id, value] : entries_)
      if (value) value = std::string_view(to + (value->data() - from), value->size());
  }
  // Python's dict.update(other), or with `set_only` only other's set entries. Where this
  // holds every key of other's (a connection's failure updated by its next line: the
  // same regex's groups), the values are assigned in place, in their strings' memory;
  // else one merge of the two sorted vectors, not an insertion per key.
  template <typename U>
  void update(const BasicGroups<U>& other, bool set_only = false) {
    auto a = entries_.begin();
    bool in_place = true;
    for (const auto& b : other.entries_) {
      while (a != entries_.end() && a->first < b.first) ++a;
      if (a == entries_.end() || a->first != b.first) {
        in_place = in_place && set_only && !b.second;  // an unset entry of other's changes nothing
        if (!in_place) break;
      }
    }
    if (in_place) {
      a = entries_.begin();
      for (const auto& b : other.entries_) {
        if (set_only && !b.second) continue;
        while (a->first < b.first) ++a;
        a->second = b.second;
      }
      return;
    }
    thread_local std::vector<Entry> merged;  // its memory reused, swapped with entries_
    merged.clear();
    merged.reserve(entries_.size() + other.entries_.size());
    a = entries_.begin();
    for (const auto& b : other.entries_) {
      for (; a != entries_.end() && a->first < b.first; ++a) merged.push_back(std::move(*a));
      const bool same = a != entries_.end() && a->first == b.first;
      if (set_only && !b.second) {
        if (same) merged.push_back(std::move(*a++));
        continue;
      }
      if (same) ++a;
      merged.emplace_back(b.first, b.second ? std::optional<V>(V(*b.second)) : std::nullopt);
    }
    for (; a != entries_.end(); ++a) merged.push_back(std::move(*a));
    entries_.swap(merged);
  }

 private:
  template <typename>
  friend class BasicGroups;
  typename std::vector<Entry>::const_iterator lower(GroupId key) const {
    return std::lower_bound(entries_.begin(), entries_.end(), key, [](const Entry& e, GroupId k) { return e.first < k; });
  }
  std::vector<Entry> entries_;
};
using Groups = BasicGroups<std::string>;
using GroupViews = BasicGroups<std::string_view>;

std::string joined(const TupleLine& t) { return t[0] + t[2]; }
// The line as read (fail2ban's "".join(tupleLine)), the date in its place.
std::string whole(const TupleLine& t) { return t[0] + t[1] + t[2]; }

// Regex._tupleLinesBuf, into `buf` (its memory reused).
void fill_lines_buffer(const Lines& lines, std::string& buf) {
  std::size_t size = lines.size();
  for (const TupleLine& t : lines) size += t[0].size() + t[2].size();
  buf.clear();
  buf.reserve(size);
  for (std::size_t i = 0; i < lines.size(); ++i) (buf += i ? "\n" : "").append(lines[i][0]).append(lines[i][2]);
  buf += '\n';
}

std::string lines_buffer(const Lines& lines) {
  std::string buf;
  fill_lines_buffer(lines, buf);
  return buf;
}

template <typename V>
bool truthy(const BasicGroups<V>& g, GroupId key) {
  const auto it = g.find(key);
  return it != g.end() && it->second && !it->second->empty();
}

template <typename V>
std::optional<V> get(const BasicGroups<V>& g, GroupId key) {
  const auto it = g.find(key);
  return it == g.end() ? std::nullopt : it->second;
}

// get() without the copy: the value, null where the key is missing or unset. Valid until
// `g` changes.
template <typename V>
const V* value_of(const BasicGroups<V>& g, GroupId key) {
  const auto it = g.find(key);
  return it == g.end() || !it->second ? nullptr : &*it->second;
}

// Python's g.pop(key, None): the value moved out, the key erased.
template <typename V>
std::optional<V> pop(BasicGroups<V>& g, GroupId key) {
  const auto it = g.find(key);
  if (it == g.end()) return std::nullopt;
  std::optional<V> value = std::move(g[key]);  // found: no insertion
  g.erase(key);
  return value;
}

// Four decimal parts 0-255 without a leading zero: the text inet_ntop makes of it.
bool canonical_ipv4(std::string_view ip) {
  int parts = 0;
  for (std::size_t at = 0; at <= ip.size(); ++at, ++parts) {
    const std::size_t dot = std::min(ip.find('.', at), ip.size());
    const std::string_view part = ip.substr(at, dot - at);
    if (part.empty() || part.size() > 3 || (part.size() > 1 && part[0] == '0')) return false;
    int value = 0;
    for (const char c : part) {
      if (c < '0' || c > '9') return false;
      value = value * 10 + (c - '0');
    }
    if (value > 255) return false;
    at = dot;
  }
  return parts == 4;
}

// IPAddr(ip, cidr) as fail2ban prints it: inet_ntop of the parsed address, "/plen" when a
// <CIDR> narrowed it; text that does not parse stays as it is.
std::string address_text(const std::string& ip, bool v6, const std::string* cidr) {
  if (!v6 && (!cidr || cidr->empty()) && canonical_ipv4(ip)) return ip;
  unsigned char bytes[16] = {};
  const int family = v6 ? AF_INET6 : AF_INET;
  if (inet_pton(family, ip.c_str(), bytes) != 1) return ip;
  // An IPv4-mapped IPv6 address in any spelling (::ffff:102:304) is its IPv4 address, as
  // fail2ban's IPAddr converts it.
  static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (v6 && (!cidr || cidr->empty()) && std::equal(mapped, mapped + 12, bytes)) {
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, bytes + 12, text, sizeof text);
    return text;
  }
  const int bits = v6 ? 128 : 32;
  int plen = bits;
  if (cidr && !cidr->empty()) plen = std::min(bits, std::stoi(*cidr));
  for (int b = plen; b < bits; ++b) bytes[b / 8] = static_cast<unsigned char>(bytes[b / 8] & ~(0x80 >> (b % 8)));
  char text[INET6_ADDRSTRLEN] = {};
  inet_ntop(family, bytes, text, sizeof text);
  return std::string(text) + (plen < bits && plen > 0 ? "/" + std::to_string(plen) : "");
}

// One failure's data as fail2ban's `fail` dict: groups, then the keys fail2ban adds.
struct FailData {
  Groups g;
  std::optional<std::set<std::string, std::less<>>> users;  // found by view
  // `users` as the Failures hand it out, made again only when a user was added (the set
  // only grows): a connection's failures share one copy, where a copy each cost a fifth
  // of --test-filter sshd's time over a long log.
  std::shared_ptr<const std::vector<std::string>> users_given;
  // How many lines fail2ban keeps as the failure's matches (only their number is reported),
  // and with FilterOptions::keep_matches the lines themselves.
  std::optional<std::size_t> matches, nofail_matches;
  std::vector<std::string> match_lines, nofail_match_lines;
  bool mlfpending = false;
};
using FailPtr = std::shared_ptr<FailData>;

// A compiled failregex/ignoreregex/prefregex and what its last search found.
struct Rx {
  std::string text;
  PyRegex re;
  std::vector<std::pair<std::string, std::string>> alt;  // alt_NAME[_n] group -> NAME
  // Set by the filter once every regex is known (GroupNames): (name's id, group number)
  // sorted by id, and `alt` by id.
  std::vector<std::pair<GroupId, std::size_t>> groups;
  std::vector<std::pair<GroupId, GroupId>> alt_ids;
  // Its required factors (regex/factors.hpp), read from the PCRE2 form that matches
  // (Syntax::kPerl, UTF-8); nullopt: none known.
  std::optional<std::vector<std::string>> factors;
  std::size_t gate = 0;  // its number in the filter's FactorGate
  Rx(std::string t, bool multiline) : text(std::move(t)), re(text, multiline) {
    regex::FactorOptions utf8;
    utf8.utf8 = true;
    factors = regex::required_factors(translate_python_regex(text), regex::Syntax::kPerl, utf8);
    for (const auto& [k, n] : re.names()) {
      if (k.rfind("tuple_", 0) == 0) throw std::invalid_argument("tuple_ groups are not supported");
      if (k.rfind("alt_", 0) != 0 || k.size() <= 4) continue;
      std::string name = k.substr(4);
      const std::size_t us = name.rfind('_');
      if (us != std::string::npos && us + 1 < name.size() &&
          std::all_of(name.begin() + static_cast<std::ptrdiff_t>(us) + 1, name.end(), ::isdigit)) {
        name.resize(us);
      }
      std::transform(name.begin(), name.end(), name.begin(), ::tolower);
      alt.emplace_back(k, name == "id" ? "fid" : name == "port" ? "fport" : name);
    }
  }
};

struct Hit {
  GroupViews groups;  // of the text searched
  std::size_t matched = 0;  // how many buffered lines the match covered
  Lines covered;            // those lines, where more than one was buffered
  Lines unmatched;          // the others, which stay buffered
};

// Into `g`: the match's groups, each alt_NAME group's value given to NAME where unset.
void groups_with_alt(const Rx& rx, const PyRegex::Match& m, GroupViews& g) {
  g.assign(rx.groups, m);
  for (const auto& [k, n] : rx.alt_ids) {
    const std::string_view* v = value_of(g, k);
    if (v == nullptr || v->empty() || truthy(g, n)) continue;
    const std::string_view value = *v;  // g[n] may move the entries
    g[n] = value;
  }
}

// Python's str.splitlines() of UTF-8 text: a line ends at \n, \r, \r\n, \v, \f, \x1c-\x1e,
// U+0085, U+2028 or U+2029, so that a skipped line holding one of them (a forged \r in a
// user name) is not found among the buffered lines, as in fail2ban.
std::vector<std::string> split_lines(std::string_view text) {
  std::vector<std::string> out;
  std::size_t begin = 0;
  std::size_t at = 0;
  while (at < text.size()) {
    const auto c = static_cast<unsigned char>(text[at]);
    std::size_t width = 0;  // of the line break at `at`, 0 where there is none
    if (c == '\n' || c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1e)) width = 1;
    else if (c == '\r') width = at + 1 < text.size() && text[at + 1] == '\n' ? 2 : 1;
    else if (c == 0xc2 && at + 1 < text.size() && static_cast<unsigned char>(text[at + 1]) == 0x85) width = 2;
    else if (c == 0xe2 && (text.substr(at + 1, 2) == "\x80\xa8" || text.substr(at + 1, 2) == "\x80\xa9")) width = 3;
    if (width == 0) {
      ++at;
      continue;
    }
    out.emplace_back(text.substr(begin, at - begin));
    at += width;
    begin = at;
  }
  if (begin < text.size()) out.emplace_back(text.substr(begin));
  return out;
}

std::vector<std::string> skipped_lines(const Rx& rx, const PyRegex::Match& m) {
  std::string skipped;
  for (int n = 0; rx.re.has_group("skiplines" + std::to_string(n)); ++n) {
    if (auto v = rx.re.group(m, "skiplines" + std::to_string(n))) skipped += *v;
  }
  return split_lines(skipped);
}

// Regex.search(buf, orgLines): whether it matched, and into `hit` (its memory reused) the
// match and which buffered lines it covered. The gate answers for PCRE2 where buf holds
// none of the regex's factors.
bool search_pcre2(const Rx& rx, const std::string& buf, const Lines& org, Hit& hit);
inline bool search(const Rx& rx, const std::string& buf, const Lines& org, FactorGate& gate, Hit& hit) {
  return gate.may_match(rx.gate, buf) && search_pcre2(rx, buf, org, hit);
}

// Into `hit`: the Hit of `rx`'s match `m` in `buf`.
void hit_of(const Rx& rx, const PyRegex::Match& m, const std::string& buf, const Lines& org, Hit& hit) {
  groups_with_alt(rx, m, hit.groups);
  hit.matched = org.size();
  hit.covered.clear();
  hit.unmatched.clear();
  if (org.size() <= 1) return;
  const std::size_t before = buf.rfind('\n', m.start());
  const std::size_t line_start = before == std::string::npos ? 0 : before + 1;
  const std::size_t after = buf.find('\n', m.end() == 0 ? buf.size() - 1 : m.end() - 1);
  const std::size_t line_end = after == std::string::npos ? buf.size() : after + 1;
  const auto count1 = static_cast<std::size_t>(std::count(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(line_start), '\n'));
  const auto count2 = static_cast<std::size_t>(std::count(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(line_end), '\n'));
  Lines& matched = hit.covered;
  matched.assign(org.begin() + static_cast<std::ptrdiff_t>(std::min(count1, org.size())),
                 org.begin() + static_cast<std::ptrdiff_t>(std::min(count2, org.size())));
  hit.unmatched.assign(org.begin(), org.begin() + static_cast<std::ptrdiff_t>(std::min(count1, org.size())));
  std::size_t n = 0;
  for (const std::string& skipped : skipped_lines(rx, m)) {
    for (std::size_t k = n; k < matched.size(); ++k) {
      if (joined(matched[k]) == skipped) {
        hit.unmatched.push_back(matched[k]);
        matched.erase(matched.begin() + static_cast<std::ptrdiff_t>(k));
        n = k;
        break;
      }
    }
  }
  hit.matched = matched.size();
  if (count2 < org.size()) hit.unmatched.insert(hit.unmatched.end(), org.begin() + static_cast<std::ptrdiff_t>(count2), org.end());
}

// Regex.getMatchedTupleLines(): the lines `hit` covered, as read, onto `into`.
void add_matched(const Lines& org, const Hit& hit, std::vector<std::string>& into) {
  for (const TupleLine& t : org.size() > 1 ? hit.covered : org) into.push_back(whole(t));
}

bool search_pcre2(const Rx& rx, const std::string& buf, const Lines& org, Hit& hit) {
  thread_local PyRegex::Match m;  // read before the next search, its memory reused
  if (!rx.re.search(m, buf)) return false;
  hit_of(rx, m, buf, org, hit);
  return true;
}

// Whether a line whose date is [start, end) may hold one of a filter's literals where its
// regexes look (after the date, or anywhere where something precedes it): `found`, the
// offsets a scan found them at (null: no scan to go by).
bool may_hold_literal(const std::span<const std::size_t>* found, std::size_t start, std::size_t end) {
  return found == nullptr || start != 0 ||
         std::any_of(found->begin(), found->end(), [&](std::size_t at) { return at >= end; });
}

// A search made ahead (Filter::search_ahead()): the regex, the length of the text searched
// and where it matched: `count` spans from `first` of the searches' spans, the match's
// groups (none: no match). Spans, not a Hit: its strings, made on one thread and freed on
// another, cost more than making them where they are read.
struct Searched {
  const Rx* rx = nullptr;
  std::size_t size = 0;
  std::size_t first = 0, count = 0;
};

// A line's searches made ahead, [first, end) of them, the spans they point into, and the
// date's span [start, stop) the line's text was cut at (empty: none made).
struct Replay {
  const Searched* first = nullptr;
  const Searched* end = nullptr;
  const PyRegex::Span* spans = nullptr;
  std::size_t start = 0, stop = 0;
};



}  // namespace

const std::string& Fields::at(std::string_view key) const {
  const auto it = find(key);
  if (it == end()) throw std::out_of_range("no field " + std::string(key));
  return it->second;
}

void Fields::emplace(std::string_view key, std::string value) {
  if (entries_.empty() || entries_.back().first < key) {  // names come in order: appended
    entries_.emplace_back(std::string(key), std::move(value));
    return;
  }
  const auto it = lower(key);
  if (it != entries_.end() && it->first == key) return;
  entries_.emplace(it, std::string(key), std::move(value));
}

std::string& Fields::operator[](std::string_view key) {
  auto it = entries_.begin() + (lower(key) - entries_.cbegin());
  if (it == entries_.end() || it->first != key) it = entries_.emplace(it, std::string(key), std::string());
  return it->second;
}

// What reading a line in lane order decided of fail2ban's connection cache, where a filter
// reads a batch in lanes (Filter::Lanes): the failure the line merges into, whether the
// cache held it already, and the lane (by connection id) that merges it.
struct Merge {
  FailPtr cur;
  bool cached = false;
  std::size_t lane_key = 0;
};

void Fields::set(std::span<value_type> more) {
  std::size_t added = 0;
  for (value_type& m : more) {
    const auto it = entries_.begin() + (lower(m.first) - entries_.cbegin());
    if (it != entries_.end() && it->first == m.first) {
      it->second = std::move(m.second);
      m.first.clear();  // done: not merged below
    } else {
      ++added;
    }
  }
  if (added == 0) return;
  std::size_t old = entries_.size(), w = old + added, j = more.size();  // from the back
  entries_.resize(w);
  while (j > 0) {
    value_type& m = more[j - 1];
    if (m.first.empty()) {  // assigned in place above
      --j;
      continue;
    }
    if (old > 0 && entries_[old - 1].first > m.first) {
      entries_[--w] = std::move(entries_[--old]);
    } else {
      entries_[--w] = std::move(m);
      --j;
    }
  }
}

struct Filter::Impl {
  FilterOptions options;
  std::optional<Rx> pref;
  std::vector<Rx> fail, ignore;
  std::vector<std::string> fail_text, ignore_text;
  std::size_t maxlines = 1;
  DateDetector dates;
  std::string date_key;  // the datepattern lines appended to `dates`
  double last_date = 0;  // 0: none yet (Python's falsy __lastDate)
  std::string last_time_text;  // its text (fail2ban's __lastTimeText), where keeps_dates()
  std::string_view known_text;  // the line being read's DatedLine::known_text
  // Whether a line's tuple holds its date's text: for the matches kept, and in a multi-line
  // filter's buffer, whose lines fail2ban-regex compares as whole tuples.
  bool keeps_dates() const noexcept { return options.keep_matches || (options.keep_dates && maxlines > 1); }
  MlfidCache<FailPtr> mlfid{100, 5 * 60};  // fail2ban's Utils.Cache(maxCount=100, maxTime=5*60)
  bool mlfid_used = false;                 // fail2ban's `if self.__mlfidCache`
  GroupNames names;  // of every group, once the regexes are compiled
  Keys key;
  std::optional<std::vector<std::string>> literals;
  FactorGate gate;  // the regexes' factors, for search()
  // Reading a line: its working memory, reused from line to line. The filter's own
  // (`main`), and each lane's where a batch is read in lanes (Filter::Lanes).
  struct Scratch {
    // fail2ban's line buffer (multi-line: kept from line to line; one line: the line).
    Lines buffer;
    // Multi-line (maxlines > 1): per buffered line, whether it may hold one of `literals`
    // (false only where a scan said it holds none). Lines put back by a match count as true.
    std::vector<bool> marks;
    // The line as a tuple, the buffer as it was when the line came (the lines a match
    // covers are counted in it), and the text searched.
    TupleLine tuple;
    Lines org;
    std::string buf;
    std::string mlfid_id;  // the failure's <F-MLFID>, while it is merged
    // find_failure()'s: the prefregex's groups (views of pre_text, a copy of the text it
    // matched), and a failregex match's with them (views).
    GroupViews pre_groups, line_groups;
    std::string pre_text;
    Outcome* out = nullptr;
    // The searches made ahead of the line being read, [replay, replay_end) not yet taken
    // up, and the date's span they assumed.
    const Searched* replay = nullptr;
    const Searched* replay_end = nullptr;
    const PyRegex::Span* replay_spans = nullptr;
    std::size_t replay_start = 0, replay_stop = 0;
    PyRegex::Match replayed;  // a match searched ahead, its memory reused
    void take(const Replay& r) {  // the next line's, to take up
      replay = r.first;
      replay_end = r.end;
      replay_spans = r.spans;
      replay_start = r.start;
      replay_stop = r.stop;
    }
    // searched()'s, their memory reused: the prefregex's, a failregex's, an ignoreregex's.
    Hit pref_hit, fail_hit, ignore_hit;
    FactorGate* gate = nullptr;  // the filter's, or the lane's own copy
    // Lanes: read in line order, a line stops where it would merge a connection's failure,
    // the cache's part decided into `planned`; a lane then reads it again, merging as
    // `decided` says, the cache untouched.
    std::optional<Merge>* planned = nullptr;
    const Merge* decided = nullptr;
  };
  // What a line was given to read with (its searches made ahead, the lanes' parts),
  // dropped when it is read, whichever way it returns.
  struct Reading {
    Scratch& s;
    ~Reading() {
      s.take({});
      s.planned = nullptr;
      s.decided = nullptr;
    }
  };
  Scratch main;
  Impl() { main.gate = &gate; }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  double now() const { return options.now ? *options.now : wall_clock_now(); }
  // Where process() cuts a line, decided in line order (the last date is the filter's):
  // the date's span [start, end) (both 0 where the last date is reused), the line's date,
  // and whether a scan's literals lie where the regexes look.
  struct Cut {
    std::size_t start = 0, end = 0;
    bool reuse = false;
    bool known = false;  // the time was given with the line (its text: known_text)
    std::optional<double> date;
    bool holds_literal = true;
    bool scanned = false;  // literals_at was given: holds_literal is a scan's answer
  };
  Cut cut(std::string_view line, std::optional<double> known, const std::span<const std::size_t>* literals_at,
          const std::optional<DateDetector::Found>* given_date, std::optional<double> given_now);
  Outcome process(std::string_view line, std::optional<double> known, const std::span<const std::size_t>* literals_at = nullptr,
                  const std::optional<DateDetector::Found>* given_date = nullptr,
                  std::optional<double> given_now = std::nullopt);
  // The line, cut, read with `s` into `result`.
  void read(Scratch& s, std::string_view line, const Cut& c, Outcome& result);
  void number_groups();
  void find_literals();
  void build_gate();
  void find_failure(Scratch& s, std::optional<double> date, std::optional<bool> holds_literal);
  // search() of `rx` in `text` into `hit`, the next search made ahead where it is the same one.
  bool searched(Scratch& s, const Rx& rx, const std::string& text, const Lines& org, Hit& hit) const {
    if (s.replay != s.replay_end) {
      const Searched& r = *s.replay;
      if (r.rx == &rx && r.size == text.size()) {
        ++s.replay;
        if (r.count == 0) return false;
        s.replayed.subject = text;
        s.replayed.groups.assign(s.replay_spans + r.first, s.replay_spans + r.first + r.count);
        s.replayed.ok = true;
        hit_of(rx, s.replayed, text, org, hit);
        return true;
      }
      s.replay = s.replay_end;  // another way than the one taken ahead: searched from here on
    }
    return search(rx, text, org, *s.gate, hit);
  }
  // Whether the searches made ahead of the line (taken up as they stand: the same date's
  // span) show that find_failure() finds nothing in it: no ignoreregex tried first, the
  // prefregex (if any) matched and gave its content, and then no failregex matched. A
  // one-line filter's buffer is the line alone, so nothing else changes: such a line
  // (a fifth of the OpenSSH sample's with sshd) is not read again.
  bool replay_finds_nothing(const Scratch& sc) const {
    if (sc.replay == sc.replay_end || (!ignore.empty() && ignore.size() + 2 < fail.size())) return false;
    const Searched* s = sc.replay;
    const std::size_t n = static_cast<std::size_t>(sc.replay_end - sc.replay);
    std::size_t first = 0;
    if (pref) {
      if (s[0].rx != &*pref || s[0].count == 0) return false;
      first = 1;
    }
    if (n != first + fail.size()) return false;
    for (std::size_t i = 0; i < fail.size(); ++i)
      if (s[first + i].rx != &fail[i] || s[first + i].count != 0) return false;
    return true;
  }
  // What find_failure() will search first in a line, searched ahead into `a` (below).
  void search_first(Filter::Ahead::Impl& a) const;
  void replaced_buffer(Scratch& s) const {
    if (maxlines > 1) s.marks.assign(s.buffer.size(), true);  // one line: no marks are kept
  }
  // `buf` made the buffer's text again, in its own memory: the gate, which knows a text
  // by its address, is told.
  void refill_buf(Scratch& s) const {
    fill_lines_buffer(s.buffer, s.buf);
    s.gate->forget();
  }
  std::optional<std::size_t> ignore_line(Scratch& s, const std::string& all_buf, const Lines& all, const Hit* failed);
  FailPtr merge_failure(Scratch& s, const std::string& id, GroupViews& found, const Hit& hit);
  Merge plan_merge(const std::string& id, const FailPtr& cached, bool forget);
  std::optional<std::pair<std::string, bool>> replayed_merge(Scratch& s, std::string_view line, const Cut& c) const;
  enum class Next { kGoOn, kSkip, kReturn };
  Next emit(Scratch& s, std::size_t index, FailPtr data, bool has_mlfid, std::optional<double> date);
  void apply(const FilterDefinition& def);
};

std::optional<std::size_t> Filter::Impl::ignore_line(Scratch& s, const std::string& all_buf, const Lines& all,
                                                     const Hit* failed) {
  // Multi-line: only the lines the failregex covered (all of them where only one was buffered).
  const bool covered = failed != nullptr && maxlines > 1;
  const Lines& lines = covered && all.size() > 1 ? failed->covered : all;
  const std::string covered_buf = covered ? lines_buffer(lines) : std::string();
  if (covered) s.gate->forget();  // a new text, perhaps where an earlier one was
  const std::string& text = covered ? covered_buf : all_buf;
  std::optional<std::size_t> found;
  for (std::size_t i = 0; i < ignore.size(); ++i) {
    if (!searched(s, ignore[i], text, lines, s.ignore_hit)) continue;
    found = i;
    s.out->ignore_hits.push_back(i);
    if ((!options.check_all_regex || maxlines > 1) && failed != nullptr) {
      s.buffer = failed->unmatched;
      replaced_buffer(s);
    }
    if (!options.check_all_regex) break;
  }
  return found;
}

// merge_failure()'s part in fail2ban's cache, for lanes: the failure of connection `id`
// (`cached`: the cache's, read as merge_failure() reads it), the entry forgotten or made.
Merge Filter::Impl::plan_merge(const std::string& id, const FailPtr& cached, bool forget) {
  Merge m;
  m.cached = cached != nullptr;
  m.cur = cached ? cached : std::make_shared<FailData>();
  m.lane_key = std::hash<std::string>{}(id);
  if (cached && forget) mlfid.unset(id);
  if (!cached && !forget) {
    mlfid_used = true;
    mlfid.set(id, m.cur, wall_clock_now());
  }
  return m;
}

// plan()'s shortcut. A one-line filter without ignoreregexes, its line cut where the
// searches made ahead assumed: where those show the prefregex (if any) matched and then a
// failregex, find_failure() takes them up to that failregex's match, and its failure
// merges into connection `id`, the value of <F-MLFID> in the failregex's groups, or else
// in the prefregex's (found = pre; found.update(failregex's)); alt_ groups naming it are
// none (reads_in_lanes()). Their spans are of the texts find_failure() searches: the
// tuple's ("before\nafter" + "\n"), and the prefregex's content + "\n" where it gave one.
std::optional<std::pair<std::string, bool>> Filter::Impl::replayed_merge(Scratch& s, std::string_view line,
                                                                         const Cut& c) const {
  if (!ignore.empty() || s.replay == s.replay_end || c.start != s.replay_start || c.end != s.replay_stop)
    return std::nullopt;
  const Searched* r = s.replay;
  const std::size_t n = static_cast<std::size_t>(s.replay_end - s.replay);
  std::size_t at = 0;
  if (pref) {
    if (r[0].rx != &*pref || r[0].count == 0) return std::nullopt;
    at = 1;
  }
  if (n <= at || n - at > fail.size()) return std::nullopt;
  const std::size_t k = n - at - 1;  // the failregex that matched: the last search
  if (r[n - 1].rx != &fail[k] || r[n - 1].count == 0) return std::nullopt;
  for (std::size_t i = at; i + 1 < n; ++i)
    if (r[i].rx != &fail[i - at] || r[i].count != 0) return std::nullopt;
  // The texts searched.
  std::string& buf = s.buf;
  if (c.reuse) {
    buf.assign(line);
  } else {
    buf.assign(line.substr(0, c.start));
    buf.append(line.substr(c.end));
  }
  buf += '\n';
  const auto span_of = [&](const Rx& rx, const Searched& rec, GroupId id) -> const PyRegex::Span* {
    const auto g = std::lower_bound(rx.groups.begin(), rx.groups.end(), std::make_pair(id, std::size_t{0}));
    if (g == rx.groups.end() || g->first != id) return nullptr;
    static const PyRegex::Span unset;
    return g->second < rec.count ? &s.replay_spans[rec.first + g->second] : &unset;
  };
  std::string_view fail_text = buf;
  if (pref) {
    const PyRegex::Span* content = span_of(*pref, r[0], key.content);
    if (content != nullptr && content->set() && content->end > content->start) {
      s.pre_text.assign(buf, static_cast<std::size_t>(content->start), static_cast<std::size_t>(content->end - content->start));
      s.pre_text += '\n';
      fail_text = s.pre_text;
    }
  }
  // A group's value: the failregex's entry where it has one (set or not), else the prefregex's.
  const auto value = [&](GroupId id) -> std::optional<std::string_view> {
    const PyRegex::Span* v = span_of(fail[k], r[n - 1], id);
    std::string_view text = fail_text;
    if (v == nullptr && pref) {
      v = span_of(*pref, r[0], id);
      text = buf;
    }
    if (v == nullptr || !v->set()) return std::nullopt;
    return text.substr(static_cast<std::size_t>(v->start), static_cast<std::size_t>(v->end - v->start));
  };
  const std::optional<std::string_view> id = value(key.mlfid);
  if (!id) return std::nullopt;  // no connection: find_failure() decides
  const std::optional<std::string_view> forget = value(key.mlfforget);
  return std::make_pair(std::string(*id), forget && !forget->empty());
}

// `found`: the line's groups (the prefregex's and the failregex's), changed as fail2ban
// changes its `fail` dict; copied where they become a failure of their own.
FailPtr Filter::Impl::merge_failure(Scratch& s, const std::string& id, GroupViews& found, const Hit& hit) {
  FailPtr cached = nullptr;
  if (s.decided != nullptr) {  // a lane: the cache's part was decided in line order
    if (s.decided->cached) cached = s.decided->cur;
  } else if (mlfid_used) {
    if (const FailPtr* in_cache = mlfid.get(id, wall_clock_now())) cached = *in_cache;  // fail2ban reads time.time()
  }
  if (s.planned != nullptr) {  // in line order for lanes: the cache's part alone, as below
    *s.planned = plan_merge(id, cached, truthy(found, key.mlfforget));
    return nullptr;
  }
  std::optional<std::set<std::string, std::less<>>>* users = nullptr;
  int flags = 0;
  const auto update_users = [](FailData& f, const std::string_view* user) {
    if (user != nullptr && !user->empty()) {
      if (!f.users || f.users->empty()) f.users.emplace();
      if (f.users->find(*user) == f.users->end()) f.users->emplace(*user);
    }
    return &f.users;
  };
  if (truthy(found, key.mlfgained)) {
    flags |= 8 | 1;
    if (!truthy(found, key.nofail)) found[key.nofail] = get(found, key.mlfgained);
  } else if (truthy(found, key.nofail)) {
    flags |= 1;
  }
  if (truthy(found, key.mlfforget)) flags |= 2;
  found.erase(key.mlfforget);
  FailPtr cur;
  if (cached) {
    users = update_users(*cached, value_of(found, key.user));
    if (truthy(cached->g, key.nofail)) flags |= 4;
    if (truthy(cached->g, key.mlfgained)) flags |= 4;
    cached->g.unset(key.nofail);  // kept unset: the merge below then assigns in place
    cached->g.unset(key.mlfgained);
    if (flags & 8) cached->mlfpending = false;
    if ((flags & 4) == 0 && !cached->mlfpending) {
      cached->matches.reset();
      cached->match_lines.clear();
    }
    cached->g.update(found, true);  // in the cached strings' memory
    cur = cached;
    if ((flags & 2) && s.decided == nullptr) mlfid.unset(id);
  } else {
    cur = s.decided != nullptr ? s.decided->cur : std::make_shared<FailData>();
    cur->g = Groups(found);
    if (!(flags & 2)) {
      users = update_users(*cur, value_of(found, key.user));
      if (s.decided == nullptr) {
        mlfid_used = true;
        mlfid.set(id, cur, wall_clock_now());
      }
    }
  }
  const bool pending = cur->mlfpending;
  cur->mlfpending = false;
  if (pending || (users != nullptr && *users && users->value().size() > 1)) {
    cur->g.unset(key.nofail);
    cur->g.unset(key.mlfgained);
    flags &= ~(8 | 1);
  }
  if ((flags & 1) == 0) {
    std::size_t m = cur->nofail_matches.value_or(0) + cur->matches.value_or(0);
    cur->nofail_matches.reset();
    if ((flags & 8) == 0) m += hit.matched;
    cur->matches = m;
    if (options.keep_matches) {  // fail2ban's list: the nofail matches, the matches, the line's
      std::vector<std::string> lines = std::exchange(cur->nofail_match_lines, {});
      lines.insert(lines.end(), cur->match_lines.begin(), cur->match_lines.end());
      if ((flags & 8) == 0) add_matched(s.org, hit, lines);
      cur->match_lines = std::move(lines);
    }
  } else if ((flags & 3) == 1) {
    cur->nofail_matches = cur->nofail_matches.value_or(0) + hit.matched;
    if (options.keep_matches) add_matched(s.org, hit, cur->nofail_match_lines);
  }
  return cur;
}

// The failure id and the Failure handed out; kSkip: on to the next failregex (fail2ban's
// getFailID() raised), kReturn: findFailure returns at once.
Filter::Impl::Next Filter::Impl::emit(Scratch& s, std::size_t index, FailPtr data, bool has_mlfid,
                                      std::optional<double> date) {
  const std::string* fid = value_of(data->g, key.fid);
  std::optional<std::string> ip;
  const std::string* v4 = value_of(data->g, key.ip4);
  const std::string* v6 = v4 != nullptr ? nullptr : value_of(data->g, key.ip6);
  const std::string* dns = v4 != nullptr || v6 != nullptr ? nullptr : value_of(data->g, key.dns);
  if (v4 != nullptr) {
    ip = address_text(*v4, false, value_of(data->g, key.cidr));
  } else if (v6 != nullptr) {
    ip = address_text(*v6, true, value_of(data->g, key.cidr));
  } else if (dns != nullptr) {
    ip = *dns;
  } else {
    if (fid == nullptr && !has_mlfid) return Next::kSkip;  // getFailID() raises: fail2ban logs it and goes on
    if (fid != nullptr) ip = *fid;
  }
  if (!ip) {
    data->mlfpending = true;
    if (!options.check_all_regex && options.ignore_pending) return Next::kReturn;
  }
  Failure& f = s.out->failures.emplace_back();  // made in place
  f.fields.reserve(data->g.end() - data->g.begin() + 1);
  if (!ip) {
    f.pending = true;
  } else {
    if (v4 != nullptr || v6 != nullptr || dns != nullptr) f.host = *ip;
    if (fid == nullptr || *fid == *ip) {
      f.id = std::move(*ip);
    } else {
      f.fields["ip"] = std::move(*ip);
      f.id = *fid;
    }
  }
  f.failregex = index;
  f.time = date;
  f.nofail = truthy(data->g, key.nofail);
  for (const auto& [id, v] : data->g) {
    if (v) f.fields.emplace(names.name(id), *v);
  }
  if (data->users) {
    if (data->users_given == nullptr || data->users_given->size() != data->users->size())
      data->users_given = std::make_shared<const std::vector<std::string>>(data->users->begin(), data->users->end());
    f.users = data->users_given;
  }
  f.attempts = data->matches.value_or(0);
  if (options.keep_matches) f.matches = data->match_lines;
  if (const std::string* user = value_of(data->g, key.user)) f.user = *user;
  return Next::kGoOn;
}

// The line is `tuple`. `holds_literal`: whether a scan found one of `literals` in it
// (nullopt: no scan).
void Filter::Impl::find_failure(Scratch& s, std::optional<double> date, std::optional<bool> holds_literal) {
  if (maxlines > 1) {
    s.buffer.push_back(s.tuple);
    s.marks.push_back(holds_literal.value_or(true));
    if (s.buffer.size() > maxlines) {
      const auto cut = static_cast<std::ptrdiff_t>(s.buffer.size() - maxlines);
      s.buffer.erase(s.buffer.begin(), s.buffer.begin() + cut);
      s.marks.erase(s.marks.begin(), s.marks.begin() + cut);
    }
    // None of the buffered lines holds a literal: neither the regexes tried first (the
    // prefregex, or the failregexes, and the ignoreregexes tried before them) can match,
    // and a search that finds nothing changes nothing but the buffer.
    if (holds_literal && std::none_of(s.marks.begin(), s.marks.end(), [](bool m) { return m; })) return;
  } else {
    if (replay_finds_nothing(s)) return;
    s.buffer.resize(1);
    s.buffer[0].swap(s.tuple);
  }
  // One line: only how many lines the buffer held is read of `org` (a match covers them
  // all), not their text.
  if (maxlines > 1) s.org = s.buffer;
  else if (options.keep_matches) s.org.assign(1, s.buffer[0]);  // the line, before a prefregex's content replaces it
  else s.org.resize(1);
  refill_buf(s);
  bool stale = false;  // buf is no longer the buffer's text
  if (!ignore.empty() && ignore.size() + 2 < fail.size() && ignore_line(s, s.buf, s.org, nullptr)) return;
  GroupViews& pre = s.pre_groups;
  pre.clear();
  if (pref) {
    if (!searched(s, *pref, s.buf, s.org, s.pref_hit)) return;
    pre = s.pref_hit.groups;  // into pre's memory
    const std::optional<std::string_view> content = pop(pre, key.content);
    if (content && !content->empty()) {
      s.buffer.resize(1);
      s.buffer[0][0].clear();
      s.buffer[0][1].clear();  // the date, where keeps_dates() (read())
      s.buffer[0][2].assign(*content);
      replaced_buffer(s);
      stale = true;
    }
    // The prefregex's groups outlive this text of buf (refill_buf()): views of a copy.
    s.pre_text.assign(s.buf);
    pre.rebase(s.buf.data(), s.pre_text.data());
  }
  for (std::size_t i = 0; i < fail.size(); ++i) {
    if (stale) refill_buf(s);
    stale = false;
    if (!searched(s, fail[i], s.buf, s.org, s.fail_hit)) continue;
    const Hit& hit = s.fail_hit;
    s.out->matched = true;
    if (!ignore.empty() && ignore_line(s, s.buf, s.org, &hit)) {
      stale = true;
      if (!options.check_all_regex) break;
      continue;
    }
    if (!options.check_all_regex || maxlines > 1) {
      s.buffer = hit.unmatched;
      replaced_buffer(s);
      stale = true;
    }
    // The line's groups: views of buf (as yet unchanged) and of the prefregex's text.
    GroupViews& found = s.line_groups;
    found = pre;
    found.update(hit.groups);
    const std::string_view* mlfid_value = value_of(found, key.mlfid);
    const bool has_mlfid = mlfid_value != nullptr;
    FailPtr data;
    if (has_mlfid) {
      s.mlfid_id.assign(*mlfid_value);  // `found` changes in the merge
      data = merge_failure(s, s.mlfid_id, found, hit);
      if (data == nullptr) return;  // read in line order for lanes: a lane goes on from here
      if (truthy(data->g, key.nofail) && !options.check_all_regex) return;
    } else {
      data = std::make_shared<FailData>();
      data->g = Groups(found);
      data->matches = hit.matched;
      if (options.keep_matches) add_matched(s.org, hit, data->match_lines);
    }
    // fail2ban copies the dict here (check_all_regex) so that later lines do not change what
    // it returned; a Failure is a copy already.
    const Next next = emit(s, i, data, has_mlfid, date);
    if (next == Next::kReturn) return;
    if (next == Next::kSkip) continue;
    if (!options.check_all_regex) break;
  }
}

Filter::Impl::Cut Filter::Impl::cut(std::string_view line, std::optional<double> known,
                                    const std::span<const std::size_t>* literals_at,
                                    const std::optional<DateDetector::Found>* given_date,
                                    std::optional<double> given_now) {
  Cut c;
  const double t_now = given_now ? *given_now : now();
  const auto recent = [&] { return last_date != 0 && last_date > t_now - 60; };
  // The line as fail2ban's tuple: [0, start) before the date, [start, end) the date, the
  // rest after it; `reuse`: ("", the last date's text, the whole line). The date's text
  // is not kept (tuple[1] stays empty): fail2ban shows it only in the lines it prints,
  // and the regexes see [0] and [2].
  if (known) {
    c.date = known;
    c.known = true;
    last_date = *known;
    if (keeps_dates()) last_time_text.assign(known_text);
  } else if (const auto found = given_date != nullptr ? *given_date : dates.find(line, t_now)) {
    c.start = found->start;
    c.end = found->end;
    if (c.end > c.start) {
      c.date = found->time;
      if (c.date) last_date = *c.date;
      if (c.date && keeps_dates()) last_time_text.assign(line.substr(c.start, c.end - c.start));
    } else if (recent()) {
      c.reuse = true;
      c.date = last_date;
    } else {
      c.date = t_now;
    }
  }
  if (!c.date && recent()) {  // no date: the last one, if recent
    c.reuse = true;
    c.date = last_date;
  }
  if (c.reuse) c.start = c.end = 0;
  // The regexes see the text around the date. With nothing before the date, that is the
  // line from `end`, where a literal must then lie; a date inside the line could join a
  // literal's halves, and such a line is searched. A multi-line filter buffers the line
  // all the same (find_failure()).
  c.holds_literal = may_hold_literal(literals_at, c.start, c.end);
  c.scanned = literals_at != nullptr;
  return c;
}

Filter::Outcome Filter::Impl::process(std::string_view line, std::optional<double> known,
                                      const std::span<const std::size_t>* literals_at,
                                      const std::optional<DateDetector::Found>* given_date,
                                      std::optional<double> given_now) {
  Outcome result;
  const Cut c = cut(line, known, literals_at, given_date, given_now);
  if (!c.holds_literal && maxlines == 1) return result;
  read(main, line, c, result);
  return result;
}

void Filter::Impl::read(Scratch& s, std::string_view line, const Cut& c, Outcome& result) {
  if (c.start != s.replay_start || c.end != s.replay_stop) s.replay = s.replay_end;  // searched ahead as another text
  if (c.reuse) {
    s.tuple[0].clear();
    s.tuple[2] = line;
  } else {
    s.tuple[0] = line.substr(0, c.start);
    s.tuple[2] = line.substr(c.end);
  }
  // fail2ban's tuple of a line whose last date is reused: ("", that date's text, the line).
  if (keeps_dates())
    s.tuple[1] = c.reuse ? std::string_view(last_time_text) : c.known ? known_text : line.substr(c.start, c.end - c.start);
  s.out = &result;
  find_failure(s, c.date, c.scanned ? std::optional<bool>(c.holds_literal) : std::nullopt);
  s.out = nullptr;
}

namespace {

void add_regex(std::vector<Rx>& list, std::vector<std::string>& texts, const std::string& value, bool multiline,
               const std::string& usedns, const std::string& file, const char* what) {
  const std::string resolved = resolve_tags(value, usedns);
  if (resolved.find_first_not_of(" \t\r\n") == std::string::npos) throw Fail2banError(file, 0, "Cannot add empty regex");
  try {
    list.emplace_back(resolved, multiline);
  } catch (const std::invalid_argument& e) {
    throw Fail2banError(file, 0, std::string("cannot use ") + what + " '" + value + "': " + e.what());
  }
  texts.push_back(resolved);
}

bool has_failure_id(const PyRegex& re) {
  for (const char* g : {"fid", "ip4", "ip6", "dns", "mlfid"}) {
    if (re.has_group(g)) return true;
  }
  return false;
}

}  // namespace

// The filter's [Definition] applied in the order fail2ban's stream applies it: maxlines and
// prefregex first (a failregex is compiled multi-line when maxlines > 1), then the rest.
void Filter::Impl::apply(const FilterDefinition& def) {
  Impl& impl = *this;
  const std::string usedns = options.filter_usedns ? def.usedns.value_or("warn") : "warn";
  if (def.maxlines) {
    if (*def.maxlines <= 0) throw Fail2banError(def.file, 0, "maxlines must be integer greater than zero");
    impl.maxlines = static_cast<std::size_t>(*def.maxlines);
  }
  if (def.prefregex && !def.prefregex->empty()) {
    std::vector<Rx> one;
    std::vector<std::string> unused;
    add_regex(one, unused, *def.prefregex, false, usedns, def.file, "prefregex");
    impl.pref.emplace(std::move(one.front()));
  }
  for (const std::string& r : def.failregex) {
    add_regex(impl.fail, impl.fail_text, r, impl.maxlines > 1, usedns, def.file, "failregex");
    if (!has_failure_id(impl.fail.back().re) && !(impl.pref && has_failure_id(impl.pref->re))) {
      throw Fail2banError(def.file, 0, "No failure-id group in '" + impl.fail_text.back() + "'");
    }
  }
  for (const std::string& r : def.ignoreregex) add_regex(impl.ignore, impl.ignore_text, r, false, usedns, def.file, "ignoreregex");
  if (def.datepattern) {
    std::string rest = *def.datepattern;
    for (std::size_t at = 0; at <= rest.size();) {
      std::size_t nl = rest.find('\n', at);
      if (nl == std::string::npos) nl = rest.size();
      std::string p = rest.substr(at, nl - at);
      p.erase(0, p.find_first_not_of(" \t\r\n\f\v"));
      p.erase(p.find_last_not_of(" \t\r\n\f\v") + 1);
      at = nl + 1;
      if (p.empty()) continue;
      try {
        impl.dates.append(p);
        impl.date_key += p + "\n";
      } catch (const std::invalid_argument& e) {
        throw Fail2banError(def.file, 0, std::string("datepattern: ") + e.what());
      }
    }
  }
  number_groups();
  find_literals();
  if (options.factor_gate) build_gate();
}

// Every group name numbered (GroupNames), and each regex's groups by number.
void Filter::Impl::number_groups() {
  std::vector<Rx*> all;
  if (pref) all.push_back(&*pref);
  for (Rx& rx : fail) all.push_back(&rx);
  for (Rx& rx : ignore) all.push_back(&rx);
  for (const char* k : Keys::kNames) names.add(k);
  for (const Rx* rx : all) {
    for (const auto& [name, number] : rx->re.names()) names.add(name);
    for (const auto& [group, target] : rx->alt) names.add(target);
  }
  names.freeze();
  key = Keys(names);
  for (Rx* rx : all) {
    rx->groups.clear();
    for (const auto& [name, number] : rx->re.names()) rx->groups.emplace_back(names.id(name), number);
    std::sort(rx->groups.begin(), rx->groups.end());
    rx->alt_ids.clear();
    for (const auto& [group, target] : rx->alt) rx->alt_ids.emplace_back(names.id(group), names.id(target));
  }
}

// Filter::literals(): the required factors of the regexes a line meets first, read from
// the PCRE2 form that matches (Syntax::kPerl, UTF-8). Multi-line (maxlines > 1): the
// buffer meets the prefregex first where there is one (its match replaces the buffer, so
// it alone decides whether anything changes), and a factor that spans lines is
// represented by its longest piece within one line.
void Filter::Impl::find_literals() {
  std::vector<const Rx*> regexes;
  if (maxlines > 1 && pref) {
    regexes.push_back(&*pref);
  } else {
    for (const Rx& rx : fail) regexes.push_back(&rx);
  }
  if (!ignore.empty() && ignore.size() + 2 < fail.size())  // find_failure() tries these first
    for (const Rx& rx : ignore) regexes.push_back(&rx);
  std::vector<std::string> all;
  for (const Rx* rx : regexes) {
    if (!rx->factors) return;
    for (const std::string& f : *rx->factors) {
      if (f.find('\n') == std::string::npos) {
        all.push_back(f);
        continue;
      }
      if (maxlines == 1) return;  // never in one line
      std::string_view longest;
      for (std::size_t at = 0; at <= f.size();) {
        const std::size_t nl = std::min(f.find('\n', at), f.size());
        if (nl - at > longest.size()) longest = std::string_view(f).substr(at, nl - at);
        at = nl + 1;
      }
      if (longest.empty()) return;
      all.emplace_back(longest);
    }
  }
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  literals = std::move(all);
}

// Every regex's required factors into the gate that spares PCRE2 the searches that cannot
// match (factor_gate.hpp).
void Filter::Impl::build_gate() {
  const auto enter = [&](Rx& rx) { rx.gate = gate.add(rx.factors); };
  if (pref) enter(*pref);
  for (Rx& rx : fail) enter(rx);
  for (Rx& rx : ignore) enter(rx);
  gate.build();
}

Filter::Filter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Filter::Filter(Filter&&) noexcept = default;
Filter& Filter::operator=(Filter&&) noexcept = default;
Filter::~Filter() = default;

Filter Filter::load(const std::string& name_or_path, const FilterOptions& options) {
  return of(read_filter(options.config_dir, name_or_path, options.values), options);
}
Filter Filter::of(const FilterDefinition& definition, const FilterOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->apply(definition);
  return Filter(std::move(impl));
}

// fail2ban reads a log as text: a line that is not valid UTF-8 is decoded with Python's
// "replace" (after its strict attempt fails), each invalid sequence becoming U+FFFD, which
// its regexes then match as a character (\S, .). The same is done here, only when needed.
Filter::Outcome Filter::line(std::string_view text) {
  if (valid_utf8(text)) return impl_->process(text, std::nullopt);
  return impl_->process(utf8_replaced(text), std::nullopt);
}
Filter::Outcome Filter::line(std::string_view text, double time) {
  if (valid_utf8(text)) return impl_->process(text, time);
  return impl_->process(utf8_replaced(text), time);
}
Filter::Outcome Filter::line(std::string_view text, std::span<const std::size_t> found) {
  return line(date_line(text), found);
}
const std::optional<std::vector<std::string>>& Filter::literals() const { return impl_->literals; }
const std::string& Filter::date_key() const { return impl_->date_key; }
Filter::DatedLine Filter::date_line(std::string_view raw) {
  DatedLine dated;
  dated.raw = raw;
  dated.was_replaced = !valid_utf8(raw);
  if (dated.was_replaced) dated.replaced = utf8_replaced(raw);
  dated.now = impl_->now();
  dated.date = impl_->dates.find(dated.text(), dated.now);
  return dated;
}
Filter::DatedLine Filter::known_line(std::string_view raw, double time) {
  DatedLine dated;
  dated.raw = raw;
  dated.was_replaced = !valid_utf8(raw);
  if (dated.was_replaced) dated.replaced = utf8_replaced(raw);
  dated.now = impl_->now();
  dated.known = time;
  return dated;
}
Filter::Outcome Filter::line(const DatedLine& dated) {
  impl_->known_text = dated.known_text;
  return impl_->process(dated.text(), dated.known, nullptr, &dated.date, dated.now);
}
// Most lines hold none of a filter's literals (every stock filter reads every line of a
// jail's log): process()'s answer is then known, and only its date is learnt. Not where
// the date lies inside the line (it could join a literal's halves) or lines are buffered.
bool Filter::learns_only(const DatedLine& dated) {
  const auto& date = dated.date;
  if (!impl_->literals || dated.was_replaced || impl_->maxlines != 1 || (date && date->start != 0) ||
      impl_->keeps_dates())  // the last date's text is then the tuple's (cut())
    return false;
  if (dated.known) impl_->last_date = *dated.known;
  else if (date && date->end > date->start && date->time) impl_->last_date = *date->time;
  return true;
}
Filter::Outcome Filter::line(const DatedLine& dated, std::span<const std::size_t> found) {
  if (found.empty() && learns_only(dated)) return {};
  const bool filtered = impl_->literals && !dated.was_replaced;
  impl_->known_text = dated.known_text;
  return impl_->process(dated.text(), dated.known, filtered ? &found : nullptr, &dated.date, dated.now);
}
struct Filter::Ahead::Impl {
  std::unique_ptr<FactorGate> gate;  // the filter's, for this thread
  Lines lines{1};                    // the line searched, as its tuple
  std::string buf, content;
  PyRegex::Match match;
  std::vector<Searched> searched;
  std::vector<PyRegex::Span> spans;  // of the searches that matched
  struct Line {
    std::size_t index, start, end;  // the line, and the date's span its text was cut at
    std::size_t first, count;       // its searches
  };
  std::vector<Line> done;
  std::size_t next = 0;  // the first of `done` not taken up

  // What was searched of line `index` (none made: an empty Replay); asked in line order.
  Replay take(std::size_t index) {
    while (next < done.size() && done[next].index < index) ++next;
    if (next == done.size() || done[next].index != index) return {};
    const Line& l = done[next++];
    return {searched.data() + l.first, searched.data() + l.first + l.count, spans.data(), l.start, l.end};
  }

  // A search of `rx` in `text`, kept; whether it matched.
  bool look(const Rx& rx, const std::string& text) {
    Searched s{&rx, text.size(), spans.size(), 0};
    if (gate->may_match(rx.gate, text) && rx.re.search(match, text)) {
      spans.insert(spans.end(), match.groups.begin(), match.groups.end());
      s.count = match.groups.size();
    }
    searched.push_back(s);
    return s.count > 0;
  }
};

// What find_failure() searches first in a line of a one-line filter, up to and with the
// first failregex that matches (what follows depends on the lines before), or every
// search when it checks all regexes (fail2ban-regex's way), into `a`: a.buf holds the
// line's tuple text.
void Filter::Impl::search_first(Filter::Ahead::Impl& a) const {
  const bool all = options.check_all_regex;  // every ignoreregex and failregex, not the first that matches
  if (!ignore.empty() && ignore.size() + 2 < fail.size()) {
    bool ignored = false;
    for (const Rx& rx : ignore) {
      if (!a.look(rx, a.buf)) continue;
      ignored = true;
      if (!all) break;
    }
    if (ignored) return;  // find_failure() returns
  }
  const std::string* text = &a.buf;
  if (pref) {
    if (!a.look(*pref, a.buf)) return;
    const auto alt = [&](const auto& ids) { return ids.second == key.content; };
    if (std::any_of(pref->alt_ids.begin(), pref->alt_ids.end(), alt)) return;  // content from an alt_ group: left to line()
    // The buffer becomes the content where the prefregex gave one (find_failure()).
    const auto number = std::lower_bound(pref->groups.begin(), pref->groups.end(), std::make_pair(key.content, std::size_t{0}));
    if (number != pref->groups.end() && number->first == key.content && number->second < a.match.groups.size() &&
        a.match.groups[number->second].set() && a.match.end(number->second) > a.match.start(number->second)) {
      const std::size_t at = a.match.start(number->second), size = a.match.end(number->second) - at;
      a.content.assign(a.buf, at, size).push_back('\n');
      a.gate->forget();
      text = &a.content;
    }
  }
  for (const Rx& rx : fail) {
    if (!a.look(rx, *text)) continue;
    if (!ignore.empty()) {
      for (const Rx& ig : ignore)
        if (a.look(ig, *text) && !all) break;
    }
    // Checking all, a match changes neither the buffer nor which regexes come next.
    if (!all) return;
  }
}

Filter::Ahead::Ahead(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Filter::Ahead::Ahead(Ahead&&) noexcept = default;
Filter::Ahead& Filter::Ahead::operator=(Ahead&&) noexcept = default;
Filter::Ahead::~Ahead() = default;
void Filter::Ahead::clear() {
  impl_->searched.clear();
  impl_->spans.clear();
  impl_->done.clear();
  impl_->next = 0;
}

bool Filter::searches_ahead() const { return impl_->maxlines == 1; }

Filter::Ahead Filter::ahead() const {
  auto a = std::make_unique<Ahead::Impl>();
  a->gate = impl_->gate.copy();
  return Ahead(std::move(a));
}

void Filter::search_ahead(const DatedLine& dated, std::span<const std::size_t> found, std::size_t index,
                          Ahead& into) const {
  search_ahead(dated, &found, index, into);
}
void Filter::search_ahead(const DatedLine& dated, std::size_t index, Ahead& into) const {
  search_ahead(dated, nullptr, index, into);
}
void Filter::search_ahead(const DatedLine& dated, const std::span<const std::size_t>* found, std::size_t index,
                          Ahead& into) const {
  const Impl& f = *impl_;
  if (!searches_ahead()) return;
  // Where process() cuts the line, when that does not depend on the lines before: a date
  // read (not an empty span, nor one without a time: then the last date decides), or none.
  const auto& date = dated.date;
  std::size_t start = 0, end = 0;
  if (date) {
    if (date->end <= date->start || !date->time) return;
    start = date->start;
    end = date->end;
  }
  // Lines line() answers without a search (the scan's offsets go as line() takes them).
  if (!may_hold_literal(found != nullptr && f.literals && !dated.was_replaced ? found : nullptr, start, end)) return;
  Ahead::Impl& a = *into.impl_;
  const std::string_view text = dated.text();
  a.lines[0][0].assign(text.substr(0, start));
  a.lines[0][2].assign(text.substr(end));
  fill_lines_buffer(a.lines, a.buf);
  a.gate->forget();
  const std::size_t first = a.searched.size();
  f.search_first(a);
  a.done.push_back({index, start, end, first, a.searched.size() - first});
}

Filter::Outcome Filter::line(const DatedLine& dated, std::span<const std::size_t> found, Ahead& ahead,
                             std::size_t index) {
  return line(dated, &found, ahead, index);
}
Filter::Outcome Filter::line(const DatedLine& dated, Ahead& ahead, std::size_t index) {
  return line(dated, nullptr, ahead, index);
}
Filter::Outcome Filter::line(const DatedLine& dated, const std::span<const std::size_t>* found, Ahead& ahead,
                             std::size_t index) {
  Impl::Scratch& s = impl_->main;
  s.take(ahead.impl_->take(index));
  const Impl::Reading reading{s};
  return found != nullptr ? line(dated, *found) : line(dated);
}

// A batch read in lanes: the lines queued to the lanes (in line order, each with what the
// filter decided of it in that order), and each lane's working memory.
struct Filter::Lanes::Impl {
  struct Job {
    std::string_view line;  // the dated line's text (valid while the batch is)
    Filter::Impl::Cut cut;
    Replay replay;  // its searches made ahead
    Merge merge;
  };
  std::vector<Job> jobs;
  std::vector<std::vector<std::size_t>> by_lane;  // jobs, by lane, in line order
  std::vector<std::unique_ptr<Filter::Impl::Scratch>> scratch;
  std::vector<std::unique_ptr<FactorGate>> gates;
};

Filter::Lanes::Lanes(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Filter::Lanes::Lanes(Lanes&&) noexcept = default;
Filter::Lanes& Filter::Lanes::operator=(Lanes&&) noexcept = default;
Filter::Lanes::~Lanes() = default;
void Filter::Lanes::clear() {
  impl_->jobs.clear();
  for (auto& lane : impl_->by_lane) lane.clear();
}
std::size_t Filter::Lanes::count() const { return impl_->by_lane.size(); }
std::size_t Filter::Lanes::queued() const { return impl_->jobs.size(); }
std::size_t Filter::Lanes::queued(std::size_t lane) const { return impl_->by_lane[lane].size(); }
std::span<const std::size_t> Filter::Lanes::queued_to(std::size_t lane) const { return impl_->by_lane[lane]; }

// One line, a filter whose only state across lines besides its dates is fail2ban's cache of
// connections' failures: an <F-MLFID> (or none), no alt_ group naming the id or its flags,
// the first failregex that matches taken.
bool Filter::reads_in_lanes() const {
  const Impl& f = *impl_;
  // keep_matches: a lane's tuple would read the last date's text the planning thread writes.
  if (f.maxlines != 1 || f.options.check_all_regex || f.options.keep_matches) return false;
  const auto names_id = [&](const Rx& rx) {
    return std::any_of(rx.alt_ids.begin(), rx.alt_ids.end(), [&](const auto& ids) {
      return ids.second == f.key.mlfid || ids.second == f.key.mlfforget;
    });
  };
  if (f.pref && names_id(*f.pref)) return false;
  return std::none_of(f.fail.begin(), f.fail.end(), names_id);
}

Filter::Lanes Filter::lanes(std::size_t count) const {
  auto l = std::make_unique<Lanes::Impl>();
  count = std::max<std::size_t>(count, 1);
  l->by_lane.resize(count);
  for (std::size_t i = 0; i < count; ++i) {
    l->gates.push_back(impl_->gate.copy());
    l->scratch.push_back(std::make_unique<Impl::Scratch>());
    l->scratch.back()->gate = l->gates.back().get();
  }
  return Lanes(std::move(l));
}

std::size_t Filter::plan(const DatedLine& dated, std::span<const std::size_t> found, Ahead* ahead, std::size_t index,
                         Lanes& lanes, Outcome& out) {
  Impl& f = *impl_;
  out = Outcome();
  if (found.empty() && learns_only(dated)) return Lanes::kDone;
  Lanes::Impl::Job job;
  if (ahead != nullptr) job.replay = ahead->impl_->take(index);
  Impl::Scratch& s = f.main;
  s.take(job.replay);
  std::optional<Merge> planned;
  s.planned = &planned;
  const Impl::Reading reading{s};
  const bool filtered = f.literals && !dated.was_replaced;
  job.line = dated.text();
  job.cut = f.cut(job.line, dated.known, filtered ? &found : nullptr, &dated.date, dated.now);
  if (!job.cut.holds_literal) return Lanes::kDone;  // one line: nothing read
  if (const auto merge = f.replayed_merge(s, job.line, job.cut)) {  // most lines: the line not read here
    FailPtr cached;
    if (f.mlfid_used)
      if (const FailPtr* in_cache = f.mlfid.get(merge->first, wall_clock_now())) cached = *in_cache;
    planned = f.plan_merge(merge->first, cached, merge->second);
  } else {
    f.read(s, job.line, job.cut, out);
    if (!planned) return Lanes::kDone;
    out = Outcome();  // read to the merge only: its lane reads it whole
  }
  job.merge = std::move(*planned);
  Lanes::Impl& l = *lanes.impl_;
  l.by_lane[job.merge.lane_key % l.by_lane.size()].push_back(l.jobs.size());
  l.jobs.push_back(std::move(job));
  return l.jobs.size() - 1;
}

void Filter::read_lane(Lanes& lanes, std::size_t lane, std::span<Outcome* const> into) {
  Impl& f = *impl_;
  Lanes::Impl& l = *lanes.impl_;
  Impl::Scratch& s = *l.scratch[lane];
  const Impl::Reading reading{s};
  for (const std::size_t j : l.by_lane[lane]) {
    const Lanes::Impl::Job& job = l.jobs[j];
    s.take(job.replay);
    s.decided = &job.merge;
    Outcome& out = *into[j];
    out = Outcome();
    f.read(s, job.line, job.cut, out);
  }
}

const std::vector<std::string>& Filter::failregex() const { return impl_->fail_text; }
const std::vector<std::string>& Filter::ignoreregex() const { return impl_->ignore_text; }
void Filter::buffered(std::vector<std::string>& out) const {
  const Lines& buffer = impl_->main.buffer;
  out.resize(buffer.size());  // the strings' memory reused from line to line
  for (std::size_t i = 0; i < buffer.size(); ++i) out[i].assign(buffer[i][0]).append(buffer[i][1]).append(buffer[i][2]);
}
std::string Filter::last_read() const { return whole(impl_->main.tuple); }
std::size_t Filter::maxlines() const { return impl_->maxlines; }

}  // namespace gpufilter::fail2ban
