// gpufilter::fail2ban: fail2ban 1.0.2 filters, read from the user's fail2ban installation
// as fail2ban reads them (ini.hpp, reader.hpp), their regexes run through PCRE2
// (pyregex.hpp, tags.hpp), and each log line processed as fail2ban's Filter.processLine
// does: the date found and cut out of the line (date.hpp), the ignoreregex, prefregex and
// failregex tried in fail2ban's order, multi-line buffers (maxlines, <SKIPLINES>) and
// connection ids (<F-MLFID>, <F-NOFAIL>, <F-MLFFORGET>, <F-MLFGAINED>) carried from line
// to line. No name is ever resolved: a <HOST> that matched a host name reports the name.
#pragma once

#include <algorithm>
#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpufilter/fail2ban/date.hpp"
#include "gpufilter/fail2ban/errors.hpp"
#include "gpufilter/fail2ban/reader.hpp"

namespace gpufilter::fail2ban {

struct FilterOptions {
  std::string config_dir = "/etc/fail2ban";  // holds filter.d/
  // The jail's filter options, as in `filter = sshd[mode=aggressive]` (mode, logtype, ...).
  std::map<std::string, std::string> values;
  // fail2ban-regex's default (and the samples test's): every failregex is tried on a line,
  // not only up to the first that matched.
  bool check_all_regex = false;
  // A multi-line failure still waiting for its address is not reported (fail2ban's default).
  bool ignore_pending = true;
  // The filter's own usedns (its [Definition] or an option, `sshd[usedns=no]`) decides what
  // <HOST> takes, as fail2ban-server applies it; fail2ban-regex ignores it (false).
  bool filter_usedns = true;
  // Each regex's required factors looked for in a text first, so that PCRE2 is not asked
  // where it cannot match (the same answers; false only to compare, in tests).
  bool factor_gate = true;
  // MyTime: "now" for the assumed year/day and the 60-second reuse of the last date;
  // unset, the clock's time.
  std::optional<double> now;
  // Each failure's matches as fail2ban keeps them, the lines' text (Failure::matches, what
  // fail2ban-regex -o msg prints); off, only their number (Failure::attempts).
  bool keep_matches = false;
  // A multi-line filter's buffered lines keep their date's text (buffered(), last_read()):
  // fail2ban-regex compares them so. Only --test-filter asks; the daemon has no use for it.
  bool keep_dates = false;
};

// A failure's named values in name order, as a sorted vector: a failure has a dozen, and
// a map's node per value was a tenth of a line's work in --test-filter. Looked up as a
// std::map<std::string, std::string> is.
class Fields {
 public:
  using value_type = std::pair<std::string, std::string>;
  using const_iterator = std::vector<value_type>::const_iterator;
  const_iterator begin() const noexcept { return entries_.begin(); }
  const_iterator end() const noexcept { return entries_.end(); }
  std::vector<value_type>::iterator begin() noexcept { return entries_.begin(); }
  std::vector<value_type>::iterator end() noexcept { return entries_.end(); }
  bool empty() const noexcept { return entries_.empty(); }
  std::size_t size() const noexcept { return entries_.size(); }
  void reserve(std::size_t n) { entries_.reserve(n); }
  const_iterator find(std::string_view key) const {
    const auto it = lower(key);
    return it != entries_.end() && it->first == key ? it : entries_.end();
  }
  std::size_t count(std::string_view key) const { return find(key) != end() ? 1 : 0; }
  const std::string& at(std::string_view key) const;  // throws std::out_of_range
  // map::emplace: the value is set only where the key is not there yet.
  void emplace(std::string_view key, std::string value);
  std::string& operator[](std::string_view key);
  // operator[](key) = value for each of `more` (sorted by key, none twice, none empty;
  // taken apart) in one pass: the new keys merged in from the back, where an insertion
  // each moved every entry after it (a failure's dozen) once per key.
  void set(std::span<value_type> more);
  bool operator==(const Fields&) const = default;

 private:
  const_iterator lower(std::string_view key) const {
    return std::lower_bound(entries_.begin(), entries_.end(), key,
                            [](const value_type& e, std::string_view k) { return e.first < k; });
  }
  std::vector<value_type> entries_;
};

class Filter {
 public:
  struct Failure {
    std::size_t failregex = 0;  // index into failregex()
    std::string id;             // fail2ban's failure id: the address (as fail2ban prints it), name or F-ID
    std::string host;           // the address or host name matched (<HOST>, <ADDR>, ...), if any
    std::string user;           // <F-USER>, or <F-ALT_USER>
    Fields fields;                              // every named group that took part (and fail2ban's own keys)
    // Multi-line: the users seen on one connection id when this failure was found, sorted;
    // shared by that connection's failures (null: none).
    std::shared_ptr<const std::vector<std::string>> users;
    std::size_t attempts = 0;                   // lines fail2ban keeps as this failure's matches
    std::vector<std::string> matches;           // those lines, with FilterOptions::keep_matches
    std::optional<double> time;                 // UTC seconds; nullopt: the line had no usable date
    bool nofail = false;                        // check_all_regex only: a match that is not a failure
    bool pending = false;                       // ignore_pending = false only: no id known yet
  };
  struct Outcome {
    std::vector<Failure> failures;
    std::vector<std::size_t> ignore_hits;  // the ignoreregexes that matched, once per match
    bool matched = false;  // a failregex matched (even one that yields no failure)
    bool ignored() const noexcept { return !ignore_hits.empty(); }  // an ignoreregex matched
  };

  // name_or_path: "sshd" (read from options.config_dir/filter.d/) or a path to a .conf
  // file (its config dir is the folder above filter.d). Throws Fail2banError.
  static Filter load(const std::string& name_or_path, const FilterOptions& options = {});
  // A filter read already (read_filter(), reader.hpp), or made of regexes alone as
  // fail2ban-regex takes them on its command line (`file` names them in errors).
  static Filter of(const FilterDefinition& definition, const FilterOptions& options = {});

  Filter(Filter&&) noexcept;
  Filter& operator=(Filter&&) noexcept;
  ~Filter();

  // One line without its '\n'.
  Outcome line(std::string_view text);
  // A line whose time is already known (the journal): no date is looked for in it.
  Outcome line(std::string_view text, double time);

  // The literals that let a scan skip lines (issue 23's "one read for all jails"): a line
  // in which this filter finds anything (a failure, a failregex match, an ignoreregex that
  // ignores it) holds one of them after its date is cut out. They are the required factors
  // (regex/factors.hpp) of every failregex, and of every ignoreregex where fail2ban tries
  // those first; for a multi-line filter (maxlines > 1) with a prefregex, the prefregex's
  // instead of the failregexes', and the buffer is searched only while one of its lines
  // holds one (every line still joins the buffer). nullopt when some regex has none.
  // Found once, when the filter is loaded.
  const std::optional<std::vector<std::string>>& literals() const;
  // line(text) for a line in which a scan found literals() at the byte offsets `found`
  // (their starts, in any order; empty: none). The date is still looked for in every line,
  // as fail2ban's detector learns from each; the regexes run only when a literal lies
  // where they look: the same Outcome as line(text), exactly.
  Outcome line(std::string_view text, std::span<const std::size_t> found);

  // One date detection for many filters (gpufilterd's rules, every stock filter at once):
  // filters with the same date_key() (the same datepattern lines, or none) have detectors
  // configured alike, which fed the same lines give the same answers; one of them reads a
  // line's date with date_line() (its detector learning from it, as line() does) and each
  // takes it with line(DatedLine, found), which is line(text, found) otherwise.
  // It views the raw line (valid for as long as that is), copied only where invalid
  // UTF-8 had to be replaced.
  struct DatedLine {
    std::string_view raw;
    std::string replaced;   // the line with invalid UTF-8 replaced, when it held some
    bool was_replaced = false;  // then the raw line's offsets do not apply to text()
    std::optional<DateDetector::Found> date;
    double now = 0;  // MyTime.time() when it was read: every filter's "now" for the line
    // The line's time given with it (the systemd journal's entries): no date is looked
    // for in the text, which the regexes see whole, as fail2ban's systemd backend does.
    std::optional<double> known;
    // Its text in fail2ban's tuple ("", this, the line): the journal's "ISO-TIME "; shown
    // in the matches kept (FilterOptions::keep_matches) and a multi-line filter's buffer.
    std::string known_text;
    std::string_view text() const { return was_replaced ? std::string_view(replaced) : raw; }
  };
  const std::string& date_key() const;
  DatedLine date_line(std::string_view raw);
  DatedLine known_line(std::string_view raw, double time);  // a line whose time is known
  Outcome line(const DatedLine& dated, std::span<const std::size_t> found);
  Outcome line(const DatedLine& dated);  // no scan: line(text), its date read already
  // Whether line(dated, found) with no literal found answers nothing without a search (a
  // one-line filter with literals, the date at the line's start or none); if so the line's
  // date is learnt, as line() would, and line() need not be called.
  bool learns_only(const DatedLine& dated);

  // The searches line(DatedLine, found) begins a line with, made ahead of it on other
  // threads (a batch's lines in pieces, side by side). In a one-line filter (maxlines 1)
  // which regexes a line meets first (up to the first that matches; all of them when
  // check_all_regex), and what each finds, follow from the line and its date alone; only
  // what is done with a match (the multi-line failure cache, the last date) depends on
  // the lines before. line() replays the searches
  // made ahead while its own steps ask for the same ones, and searches itself from the
  // first that differs (or where none were made): the same Outcome, exactly.
  // An Ahead is one thread's: its lines in order, clear()ed before the next batch's.
  class Ahead {
   public:
    Ahead(Ahead&&) noexcept;
    Ahead& operator=(Ahead&&) noexcept;
    ~Ahead();
    void clear();

   private:
    friend class Filter;
    struct Impl;
    explicit Ahead(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
  };
  bool searches_ahead() const;  // false: search_ahead() leaves nothing (maxlines > 1)
  // The fewest searched lines worth a task of their own when a batch's lines are searched
  // ahead in pieces (gpufilterd's pipeline, --test-filter).
  static constexpr std::size_t kAheadPiece = 128;
  Ahead ahead() const;
  // Line `index`'s searches (`dated` and `found` as line() is given them; without `found`,
  // as line(dated)) into `into`. Const: any number of threads at once, each with its own
  // Ahead.
  void search_ahead(const DatedLine& dated, std::span<const std::size_t> found, std::size_t index, Ahead& into) const;
  void search_ahead(const DatedLine& dated, std::size_t index, Ahead& into) const;
  // line(dated, found), or line(dated), for line `index`, taking up what `ahead` searched of it.
  Outcome line(const DatedLine& dated, std::span<const std::size_t> found, Ahead& ahead, std::size_t index);
  Outcome line(const DatedLine& dated, Ahead& ahead, std::size_t index);

  // Lanes: a batch of a one-line filter read in two parts. In line order (plan()): the
  // dates, the searches made ahead taken up, and up to where a line's failure would merge
  // into a connection's (<F-MLFID>, as sshd's), which entry of fail2ban's cache of
  // connections that is, the cache changed as fail2ban changes it. Then side by side by
  // connection (read_lane(), one task per lane): each queued line read again from its
  // start, its merge into the entry decided, and its Failure made, each connection's lines
  // in their order. fail2ban's cache is the only state of such a filter across lines
  // besides its dates, and a connection's failure is read and changed by its own lines
  // alone: the same outcomes as line(). A Lanes is one batch's, clear()ed before the next;
  // a batch's lanes may be read while the filter plans the next batch.
  class Lanes {
   public:
    static constexpr std::size_t kDone = static_cast<std::size_t>(-1);
    Lanes(Lanes&&) noexcept;
    Lanes& operator=(Lanes&&) noexcept;
    ~Lanes();
    void clear();
    std::size_t count() const;                   // lanes
    std::size_t queued() const;                  // lines queued, all lanes
    std::size_t queued(std::size_t lane) const;  // lines queued to one
    std::span<const std::size_t> queued_to(std::size_t lane) const;  // their numbers, in order

   private:
    friend class Filter;
    struct Impl;
    explicit Lanes(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
  };
  bool reads_in_lanes() const;  // false: plan() may not be used
  Lanes lanes(std::size_t count) const;
  // line(dated, found, *ahead, index) (line(dated, found) without `ahead`), in line
  // order: Lanes::kDone with its outcome in `out`, or the line's number among those queued
  // to `lanes` (0, 1, ...), whose outcome read_lane() makes. Once lines are queued, every
  // line goes through plan() until their lanes are read: a line read by line() could
  // change a connection's failure before the lines queued before it.
  std::size_t plan(const DatedLine& dated, std::span<const std::size_t> found, Ahead* ahead, std::size_t index,
                   Lanes& lanes, Outcome& out);
  // The lines queued to `lane`, their outcomes into into[number]. Any number of lanes at
  // once, each on its own thread, beside plan() of the next batch into other Lanes.
  void read_lane(Lanes& lanes, std::size_t lane, std::span<Outcome* const> into);

  const std::vector<std::string>& failregex() const;    // after tag expansion, Python syntax as fail2ban shows it
  const std::vector<std::string>& ignoreregex() const;
  std::size_t maxlines() const;
  // A multi-line filter's line buffer (fail2ban's __lineBuffer) as line() left it, each
  // line's tuple joined (with FilterOptions::keep_dates its date's text in place; a
  // dateless line that reused the last date after that date's text), oldest first; and
  // the last line line() read, so. What fail2ban-regex compares to count a match's
  // earlier lines as matched.
  void buffered(std::vector<std::string>& out) const;
  std::string last_read() const;

 private:
  struct Impl;
  explicit Filter(std::unique_ptr<Impl> impl);
  void search_ahead(const DatedLine& dated, const std::span<const std::size_t>* found, std::size_t index,
                    Ahead& into) const;
  Outcome line(const DatedLine& dated, const std::span<const std::size_t>* found, Ahead& ahead, std::size_t index);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpufilter::fail2ban
