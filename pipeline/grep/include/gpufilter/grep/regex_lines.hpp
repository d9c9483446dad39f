// RegexLines: grep's line decisions for regular expressions, behind the literal prefilter.
// The engines scan for the required factors of every regex (regex/factors.hpp); a line is
// a candidate for the regexes whose factors occur in it, and for those without any factor;
// only candidates reach the regex engine (regex/line_regex.hpp), which decides as grep does.
// Occurrences are candidates, selected lines are matches: two different things.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpufilter/core/sink.hpp"
#include "gpufilter/grep/line_occurrences.hpp"
#include "gpufilter/patterns/pattern_set.hpp"
#include "gpufilter/patterns/pattern_table.hpp"
#include "gpufilter/regex/line_regex.hpp"

namespace gpufilter {

// How the prefilter fared, for --stats.
struct RegexCounts {
  std::uint64_t candidates = 0;  // lines holding a factor of some regex
  std::uint64_t confirmed = 0;   // lines a regex selected
  std::uint64_t full_scan = 0;   // lines searched only because some regex has no factor
};

class RegexLines {
 public:
  // Finds each pattern's factors and makes the literal set the engines scan for.
  RegexLines(std::unique_ptr<regex::LineRegex> regex, const std::vector<std::string>& patterns,
             regex::Syntax syntax, bool ignore_case, bool utf8);
  ~RegexLines();

  // A copy for a search on another thread (one per thread of a search of many files at
  // once): the same factors and table ids (after bind()), a clone of the regexes (what
  // their compiling built, such as a Hyperscan database, is shared, the rest compiled
  // again on first use), counts of its own. Several threads may copy one RegexLines at
  // once, as long as none searches with it.
  std::unique_ptr<RegexLines> copy() const;

  // The literals for the engines: every factor once (the empty pattern when there is
  // none, so that an engine always has a set to scan).
  const PatternSet& factors() const noexcept { return factors_; }
  // Maps the ids of the table the engines built from factors() to the regexes.
  void bind(const PatternTable& table);
  // Some regex has no factor: every line must be asked.
  bool every_line_is_candidate() const noexcept { return !unfiltered_.empty(); }
  std::size_t unfiltered_count() const noexcept { return unfiltered_.size(); }

  // `occurrences` are the factors' (ids of the PatternTable built from factors()).
  bool line_matches(std::string_view line, std::span<const LineOccurrence> occurrences) {
    return line_matches_on(0, line, occurrences);
  }
  // The same on lane `lane` of lanes(): each lane has its own copy of the regexes and its
  // own scratch, so different lanes may decide lines on different threads at once (one
  // thread per lane at a time; lane 0 is the one the calls above use).
  bool line_matches_on(std::size_t lane, std::string_view line, std::span<const LineOccurrence> occurrences);
  // Many whole lines at once: prepare_lines() (on the thread that owns lane 0, outside any
  // parallel use) says whether the regexes can decide a piece of lines in one pass;
  // select_lines_on() then appends the first byte of each selected line of `piece`
  // (whole lines), ascending, and its end (its '\n', or the piece's end) to `line_ends`,
  // or returns false for this piece (decide line by line).
  bool prepare_lines();
  bool select_lines_on(std::size_t lane, std::string_view piece, std::vector<const char*>& line_starts,
                       std::vector<const char*>& line_ends);
  // The same for the engine's workers, each deciding a chunk it scanned (work ahead):
  // prepare_ahead() on the thread that owns lane 0, outside any parallel use; then any
  // thread may take a lease (a lane of its own, made on first need from a copy no one
  // searches with) and decide lines with it, line by line, or a whole piece at once where
  // prepare_lines() said yes before prepare_ahead() (else select_lines() returns false).

 private:
  struct Lane;

 public:
  class AheadLease {
   public:
    AheadLease(AheadLease&& other) noexcept : owner_(other.owner_), lane_(std::exchange(other.lane_, nullptr)) {}
    AheadLease& operator=(AheadLease&&) = delete;
    ~AheadLease();
    explicit operator bool() const noexcept { return lane_ != nullptr; }
    bool line_matches(std::string_view line, std::span<const LineOccurrence> occurrences) {
      return owner_.line_matches_in(*lane_, line, occurrences);
    }
    bool select_lines(std::string_view piece, std::vector<const char*>& line_starts,
                      std::vector<const char*>& line_ends) {
      return owner_.select_lines_in(*lane_, piece, line_starts, line_ends);
    }
    void match_spans(std::string_view line, std::span<const LineOccurrence> occurrences, std::vector<MatchSpan>& out) {
      owner_.match_spans_in(*lane_, line, occurrences, out);
    }

   private:
    friend class RegexLines;
    AheadLease(RegexLines& owner, Lane* lane) : owner_(owner), lane_(lane) {}
    RegexLines& owner_;
    Lane* lane_;
  };
  void prepare_ahead();
  AheadLease lease_ahead();
  // Makes `count` lanes (copies are made on each lane's first use, on its thread).
  void set_lanes(std::size_t count);
  std::size_t lanes() const noexcept { return lanes_.size(); }

  // Does some pattern select `line`, every pattern asked (no occurrences known: the
  // unterminated end of a stream, say)? Lane 0; not counted.
  bool any_selects(std::string_view line);
  std::size_t pattern_count() const noexcept { return pattern_count_; }

  // grep's -o/--color walk over the line (lane 0).
  void match_spans(std::string_view line, std::span<const LineOccurrence> occurrences, std::vector<MatchSpan>& out) {
    match_spans_in(lane(0), line, occurrences, out);
  }
  // The same on lane `lane`, as line_matches_on().
  void match_spans_on(std::size_t lane_index, std::string_view line, std::span<const LineOccurrence> occurrences,
                      std::vector<MatchSpan>& out) {
    match_spans_in(lane(lane_index), line, occurrences, out);
  }
  // The patterns (by index given) that select the line, ascending.
  void matched_patterns(std::string_view line, std::span<const LineOccurrence> occurrences,
                        std::vector<std::uint32_t>& out);

  // Summed over the lanes.
  RegexCounts counts() const noexcept;
  // Whether a piece decided in one pass adds its lines to counts().full_scan: a count of
  // its newlines, a pass of its own over the piece (on unless turned off; --stats only).
  void count_full_scans(bool on) noexcept { count_full_scans_ = on; }

 private:
  RegexLines() = default;  // copy()'s
  Lane& lane(std::size_t index);
  // The patterns worth asking about this line, ascending, into lane.candidates; false when
  // none. `count`: for the counts (once per line).
  bool gather(Lane& lane, std::span<const LineOccurrence> occurrences, bool count) const;
  void gather_all(Lane& lane) const;
  bool select_lines_in(Lane& lane, std::string_view piece, std::vector<const char*>& line_starts,
                       std::vector<const char*>& line_ends);
  bool line_matches_in(Lane& lane, std::string_view line, std::span<const LineOccurrence> occurrences);
  void match_spans_in(Lane& lane, std::string_view line, std::span<const LineOccurrence> occurrences,
                      std::vector<MatchSpan>& out);

  PatternSet factors_;
  std::size_t pattern_count_ = 0;
  std::vector<std::vector<std::uint32_t>> patterns_of_factor_;  // by index in factors_
  std::vector<std::vector<std::uint32_t>> patterns_of_id_;      // by the table's unique id
  std::vector<std::uint32_t> unfiltered_;  // regexes without a factor
  std::vector<std::unique_ptr<Lane>> lanes_;  // [0] holds the regexes given
  // prepare_ahead()'s: the copy the workers' lanes are cloned from, and those lanes
  // (the idle ones in ahead_idle_), all under ahead_mutex_.
  std::unique_ptr<regex::LineRegex> ahead_model_;
  std::vector<std::unique_ptr<Lane>> ahead_lanes_;
  std::vector<Lane*> ahead_idle_;
  bool ahead_lines_ = false;      // ahead_model_ was copied after prepare_lines() said yes
  std::uint64_t ahead_models_ = 0;  // how many ahead_model_ has been
  mutable std::mutex ahead_mutex_;
  bool count_full_scans_ = true;
  int lines_ready_ = -1;  // prepare_lines(): -1 not asked yet, else its answer
};

}  // namespace gpufilter
