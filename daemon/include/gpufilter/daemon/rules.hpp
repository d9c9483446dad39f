// Rules: one scan for all of them.
//
//   RuleSet     every rule's patterns in ONE PatternSet (so one device scan serves
//               thousands of rules); each unique pattern id maps back to (rule, pattern)
//   RuleEngine  per line: which rules match (case and -w confirmed on the host, invert
//               rules), then thresholds (count in a sliding window, per group), cooldown
//               (one alert per group per interval, the rest counted as suppressed) and
//               resolution after a quiet period; emits Alerts
//   RuleConsumer  the StreamConsumer that cuts a scanned batch into lines and hands each,
//               with its occurrences, to the RuleEngine through the Sink seam
//
// How one line goes through (after the sources framed it and StreamScan scanned its batch):
//   1. RuleConsumer::lines() gets one stream's piece of whole lines and the occurrences in
//      it: unique pattern ids of the bound table, positions relative to the piece, in
//      PatternTable::before order. It counts the piece's lines and bytes per source label.
//   2. LineCutter (grep/line_occurrences.hpp) cuts the piece: each line without its '\n',
//      with the occurrences that start in it, relative to the line.
//   3. RuleEngine, a Sink that needs occurrences (SinkNeeds::occurrences), takes each line as
//      a LineMatch (matched() -> line()): a line without occurrences ends here unless a
//      rule is inverted.
//      RuleSet::matching_rules() maps each occurrence to the (rule, pattern) pairs of its
//      unique id, confirms the exact bytes for case-sensitive rules when the scan folded
//      case for another rule, and -w with grep's one rule (grep/word.hpp); an invert rule
//      matches when none of its patterns did.
//   4. Per matching rule: its group (none, the source, or a field of the line), then the
//      cooldown (a match in it is counted as suppressed), then the threshold over the
//      sliding window; reaching it fires an Alert through Emit.
//   5. About every 50 ms the scan thread's tick() resolves groups quiet for resolve_after
//      and pushes the counters to the metrics.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gpufilter/core/sink.hpp"
#include "gpufilter/core/workers.hpp"
#include "gpufilter/daemon/alert.hpp"
#include "gpufilter/daemon/config.hpp"
#include "gpufilter/daemon/metrics.hpp"
#include "gpufilter/daemon/multiline.hpp"
#include "gpufilter/fail2ban/filter.hpp"
#include "gpufilter/grep/line_occurrences.hpp"
#include "gpufilter/patterns/pattern_set.hpp"
#include "gpufilter/patterns/pattern_table.hpp"
#include "gpufilter/regex/capture_regex.hpp"
#include "gpufilter/scan/stream_scan.hpp"

namespace gpufilter::daemon {

class Fail2banPipeline;  // fail2ban_pipeline.hpp

class RuleSet {
 public:
  explicit RuleSet(std::vector<RuleConfig> rules);

  const std::vector<RuleConfig>& rules() const noexcept { return rules_; }
  const PatternSet& patterns() const noexcept { return patterns_; }
  // This set's number, unlike any other set's of the process (an address may be reused).
  std::uint64_t serial() const noexcept { return serial_; }
  // The scan folds case when any rule ignores case; case-sensitive rules are then
  // confirmed on the host (exact bytes at the occurrence).
  MatchOptions match_options() const noexcept { return MatchOptions{any_ignore_case_}; }
  // Ties unique pattern ids of `table` (built from patterns() and match_options()) to rules.
  void bind(const PatternTable& table);

  // The rules that match `line`, given the occurrences in it (positions relative to the
  // line, unique ids of the bound table), ascending and without repeats. A regex rule is
  // asked only when a factor of its regexes occurs (or when some regex of it has none).
  // Regexes keep match state: call from one thread (the scan thread).
  void matching_rules(std::string_view line, std::span<const Occurrence> occurrences,
                      std::vector<std::uint32_t>& out) const;
  // Some rule must look at every line: an invert rule, a regex without a factor, or a
  // fail2ban filter.
  bool asks_every_line() const noexcept {
    return !invert_.empty() || !unfiltered_.empty() || !fail2ban_rules_.empty();
  }
  // Rules with a fail2ban_filter: every line goes to their filter, on the host.
  const std::vector<std::uint32_t>& fail2ban_rules() const noexcept { return fail2ban_rules_; }
  // What each fail2ban rule's filter makes of `line` of `source` (in fail2ban_rules()
  // order; nothing for a rule whose only_sources leave `source` out): fail2ban's failures in it. The filters keep multi-line state from line to line, as fail2ban's do
  // per jail: one thread. Their literals (Filter::literals()) are in the scan's pattern set:
  // `occurrences` (the line's, as for matching_rules) tell each where its own are, and a
  // line without one meets only the date detector, not its regexes. Filters with the same
  // date settings share one date detection per line (Filter::date_line()). The outcomes
  // are scratch, valid until the next call: the caller may take them apart. Each failure's
  // fields hold the rules' captures already (fail2ban_captures()).
  // `known`: the line's time, given with it (a journal entry's).
  std::vector<fail2ban::Filter::Outcome>& fail2ban_lines(std::string_view source, std::string_view line,
                                                         std::span<const Occurrence> occurrences,
                                                         std::optional<double> known = std::nullopt) const;
  // The indexes of the outcomes the last fail2ban_lines() found anything in, ascending;
  // every other outcome is empty. With every stock filter a line holds one or two: the
  // delivery reads those, not all of them (93 a line were most of its time).
  const std::vector<std::size_t>& fail2ban_found() const noexcept { return found_in_line_; }
  // The text a filter reads of a line: without a CRLF log's '\r'.
  static std::string_view fail2ban_text(std::string_view text);
  // Whether lines go through the filters in batches (Fail2banPipeline) rather than one at a
  // time, on a pool `width` threads wide: on two threads or more (one filter too: its
  // searches ahead, its dates and its reading overlap; the pipeline decides whether its
  // delivery shares its thread). The sshd rule, 67 MB here (2 threads): 0.66-0.70 s against
  // 0.86-0.87 line by line; GPU machine (16), 268 MB: 3.8-6.0 s against 6.2-8.3.
  bool fail2ban_in_parallel(std::size_t width) const noexcept {
    return fail2ban_rules_.size() > 1 || (fail2ban_rules_.size() == 1 && width >= 2);
  }
  // A batch of one source's lines on its way through the fail2ban filters: each date
  // reader dates every line (fail2ban_date(), one task per reader); a filter that would
  // hold up the step has its regex searches made ahead in pieces (fail2ban_search_ahead(),
  // one task per piece, const on the filter); each filter takes every line in order
  // (fail2ban_filter(), one task per filter), a filter that reads in lanes only up to
  // which connection a line's failure merges into, its queued lines read a step later by
  // connection (fail2ban_lane(), one task per lane); then fail2ban_lines() hands the
  // outcomes out as the lines are delivered. The tasks of one step run side by side, and
  // beside another batch's other steps (Fail2banPipeline keeps five batches in flight): a
  // date reader touches only its filter's date detector, a filter everything else of its
  // own, a lane only its connections' failures. The same outcomes as line by line.
  struct Fail2banBatch {
    std::string_view source;
    std::optional<double> known;  // the lines' time, when given with them
    std::vector<std::string_view> lines;  // fail2ban_text() of each
    // Per fail2ban rule, the lines in which its filter found something (in line order) and
    // what: each filter's task writes its own, one after the other. A table of every line
    // and rule written a rule (column) at a time missed the cache at every entry: a fifth of
    // the run with the 93 stock filters.
    std::vector<std::vector<std::pair<std::size_t, fail2ban::Filter::Outcome>>> found;
    // Every entry of `found` by line, then rule: (line, rule, entry), made as the batch is
    // handed out, and the first not handed out yet.
    std::vector<std::array<std::uint32_t, 3>> by_line;
    std::size_t by_line_next = 0;
    std::size_t next = 0;  // the next line handed out
    std::vector<std::vector<std::pair<std::size_t, std::size_t>>> literals;  // per rule: (line, offset)
    std::vector<std::size_t> readers;  // this source's date readers (indexes of fail2ban_rules())
    std::vector<std::vector<fail2ban::Filter::DatedLine>> dated;  // per reader, per line
    std::vector<std::exception_ptr> failed;  // per task, thrown by fail2ban_hand_out()
    // Per rule, its filter's searches made ahead (Filter::search_ahead()) in pieces of
    // `piece` lines (0: none made), and the tasks that make them: (rule, piece).
    std::vector<std::vector<fail2ban::Filter::Ahead>> ahead;
    std::vector<std::size_t> piece;
    std::vector<std::pair<std::size_t, std::size_t>> ahead_tasks;
    std::uint64_t ahead_of = 0;  // the serial() of the RuleSet whose filters `ahead` is of
    // A filter that reads in lanes (Filter::reads_in_lanes(), on `lane_count` lanes; 0:
    // none) plans its lines in its task and reads the queued ones a step later, a task per
    // lane: per rule its Lanes, the entries of `found` its queued lines hold (in queued
    // order) and where each lane puts them; the tasks, (rule, lane), and what each threw.
    std::size_t lane_count = 0;
    std::vector<std::optional<fail2ban::Filter::Lanes>> lanes;
    std::vector<std::vector<std::size_t>> queued;
    std::vector<std::vector<fail2ban::Filter::Outcome*>> into;
    std::vector<std::pair<std::size_t, std::size_t>> lane_tasks;
    std::vector<std::exception_ptr> lane_failed;
    std::uint64_t lanes_of = 0;  // the serial() of the RuleSet whose filters `lanes` are of
  };
  // Readies `batch` for `lines` (each valid until it is handed out) and the occurrences the
  // scan found in each: per filter its literals' offsets; the readers this source needs.
  // Returns how many date tasks there are.
  // `known`: the lines' time, given with them (a journal entry's): no date is looked for.
  std::size_t fail2ban_begin(Fail2banBatch& batch, std::string_view source, std::span<const std::string_view> lines,
                             std::span<const std::span<const Occurrence>> occurrences,
                             std::optional<double> known = std::nullopt) const;
  void fail2ban_date(Fail2banBatch& batch, std::size_t reader) const noexcept;
  // After the dates: each filter's searches made ahead of it, side by side, where its
  // lines would keep its task longer than a `width`-th of the batch's: the batch's lines
  // in pieces, one task each (fail2ban_search_ahead()). Returns how many tasks.
  std::size_t fail2ban_ahead(Fail2banBatch& batch, std::size_t width) const;
  void fail2ban_search_ahead(Fail2banBatch& batch, std::size_t task) const noexcept;
  std::size_t fail2ban_filters() const noexcept { return fail2ban_rules_.size(); }
  void fail2ban_filter(Fail2banBatch& batch, std::size_t i) const noexcept;
  // After the filters: the lanes their queued lines are read in, one task each
  // (fail2ban_lane()). Returns how many tasks.
  std::size_t fail2ban_lanes(Fail2banBatch& batch) const;
  void fail2ban_lane(Fail2banBatch& batch, std::size_t task) const noexcept;
  // From now on fail2ban_lines() hands out `batch`'s outcomes, in line order (nullptr:
  // none). Throws what a task of the batch threw, on the thread that asks (as
  // fail2ban_check()).
  void fail2ban_hand_out(Fail2banBatch* batch) const;
  static void fail2ban_check(const Fail2banBatch& batch);
  // A failure's fields as the rules' captures: with its host (the failure id), its user
  // (where captured) and the number of the failregex that matched (from 1). Done where
  // the outcome is made (a filter's or a lane's task), not on the delivery's thread.
  static void fail2ban_captures(fail2ban::Filter::Outcome& outcome);
  // Line `j` of `batch`'s outcomes into outcomes_ (fail2ban_lines()).
  void hand_out(Fail2banBatch& batch, std::size_t j) const;
  // The dates and the filters one after the other on `pool`, then handed out: for a
  // single batch (no searches ahead).
  void prepare_fail2ban(std::string_view source, std::span<const std::string_view> lines,
                        std::span<const std::span<const Occurrence>> occurrences, WorkerPool& pool) const;
  // What the named groups of the first regex of `rule` that matches `line` took.
  std::map<std::string, std::string> captures(std::uint32_t rule, std::string_view line) const;
  // Rules with a `field:` (JSON records): not in the scan; matches() decides on the host.
  const std::vector<std::uint32_t>& field_rules() const noexcept { return field_rules_; }
  // Whether `rule` matches `text` (a field's value), its patterns or regexes searched on
  // the host, case, -w and invert as the scan's confirmation applies them.
  bool matches(std::uint32_t rule, std::string_view text) const;

 private:
  static constexpr std::uint32_t kFactor = 0xffffffffu;  // Ref::pattern of a regex's factor
  static constexpr std::uint32_t kLiteral = 0xfffffffeu;  // Ref::pattern of a fail2ban filter's literal
  static constexpr std::uint32_t kNoRule = 0xffffffffu;  // Ref::rule of the placeholder pattern
  struct Ref {
    std::uint32_t rule;
    std::uint32_t pattern;  // index into rules_[rule].patterns, or kFactor
  };
  // A regex rule's compiled regexes (mutable: matching writes their match data).
  struct RegexRule {
    std::vector<std::unique_ptr<regex::CaptureRegex>> regexes;
  };
  bool regex_matches(std::uint32_t rule, std::string_view line) const;
  void add_regex_rule(std::uint32_t r, bool scanned);
  std::vector<RuleConfig> rules_;
  std::uint64_t serial_;
  PatternSet patterns_;
  std::vector<Ref> given_;                       // per pattern of patterns_, in order
  std::vector<std::vector<Ref>> by_unique_;      // per unique id of the bound table
  std::vector<std::uint32_t> invert_;            // rules with invert: true
  std::vector<std::uint32_t> unfiltered_;        // regex rules asked about every line
  std::vector<std::uint32_t> field_rules_;       // rules with a field: (host only)
  std::vector<std::uint32_t> fail2ban_rules_;    // rules with a fail2ban_filter (host only)
  std::map<std::uint32_t, std::unique_ptr<fail2ban::Filter>> fail2ban_;  // by rule
  // Per index of fail2ban_rules_: the index whose filter reads the dates of its date_key().
  std::vector<std::size_t> date_reader_;
  std::vector<std::size_t> fail2ban_index_;  // per rule: its index in fail2ban_rules_ (or none)
  // Scratch of fail2ban_lines(): per fail2ban rule, its literals' offsets and its outcome;
  // the lines dated once per line, by reading index.
  mutable std::vector<std::vector<std::size_t>> literals_at_;
  mutable std::vector<fail2ban::Filter::Outcome> outcomes_;
  mutable std::vector<std::size_t> found_in_line_;  // fail2ban_found()
  mutable std::vector<std::pair<std::size_t, fail2ban::Filter::DatedLine>> dated_;
  // The batch fail2ban_lines() hands out (fail2ban_hand_out()), and prepare_fail2ban()'s.
  mutable Fail2banBatch* handing_out_ = nullptr;
  mutable Fail2banBatch prepared_;
  bool fail2ban_reads(std::size_t i, std::string_view source) const;
  const std::vector<fail2ban::Filter::DatedLine>& dated_for(const Fail2banBatch& b, std::size_t i) const;
  std::map<std::uint32_t, std::unique_ptr<RegexRule>> regex_rules_;  // by rule
  mutable std::vector<std::uint32_t> regex_candidates_;  // scratch
  bool any_ignore_case_ = false;
  const PatternTable* table_ = nullptr;
};

class RuleEngine final : public Sink {
 public:
  using Clock = std::chrono::steady_clock;
  // What a match's groups took, by name: a sorted vector, not a map (a fail2ban failure's
  // dozen fields are moved in whole, where a map made a node of each on every failure).
  using Captures = fail2ban::Fields;
  using Emit = std::function<void(const Alert&)>;

  RuleEngine(std::shared_ptr<const RuleSet> rules, Emit emit, Metrics* metrics = nullptr);

  // The Sink seam: a line of any stream with every occurrence in it, now.
  SinkNeeds needs() const override { return SinkNeeds{.occurrences = true}; }
  Flow matched(const LineMatch& line) override {
    this->line(line.source, line.line, line.occurrences, Clock::now(), line.fields);
    return Flow::kContinue;
  }
  // One line of `source` (without its '\n') with its occurrences, at `now`; `fields`: its
  // record's (a Kafka record's key ...), read by the rules as named groups are.
  void line(std::string_view source, std::string_view text, std::span<const Occurrence> occurrences,
            Clock::time_point now, const RecordFields* fields = nullptr);
  // Every record that one or more rules matched, as it is matched (before thresholds and
  // cooldowns), for the outputs that take records; with `captures`, SelectedRecord's
  // captures are filled (a pass of the first matching regex rule). Runs on the scan thread.
  using Select = std::function<void(const SelectedRecord&)>;
  void on_selected(Select select, bool captures) {
    select_ = std::move(select);
    select_captures_ = captures;
  }
  // Resolves groups quiet for their rule's resolve_after; pushes counters to the metrics.
  void tick(Clock::time_point now);
  // A reload: rules with the same definition keep their state (windows, active alerts,
  // cooldowns); the others start afresh, and active alerts of removed rules are resolved.
  void replace(std::shared_ptr<const RuleSet> rules, Clock::time_point now);
  const RuleSet& rules() const noexcept { return *rules_; }

  // Across a restart (alert_state.cpp): the groups of every rule (threshold windows,
  // cooldowns, firing alerts, suppressed counts) as JSON text, their times as ages at
  // `now`/`wall`; and back, for the rules whose definition is unchanged (same name, same
  // fingerprint), the time the process was down counting as time passed. restore_state()
  // returns the alerts that were firing, for the outputs to adopt (nothing is sent for
  // them); it throws ConfigError for text it cannot read, restoring nothing.
  std::string save_state(Clock::time_point now, SystemClock::time_point wall) const;
  std::vector<Alert> restore_state(std::string_view text, Clock::time_point now, SystemClock::time_point wall);
  // Whether a line matched, an alert fired or resolved since saved() was last called.
  bool changed() const noexcept { return changed_; }
  void saved() noexcept { changed_ = false; }
  // tick() hands save_state()'s text to `save` at most once per `every`, when changed().
  // `save` runs on the scan thread and must not throw.
  void persist(std::function<void(const std::string&)> save, std::chrono::milliseconds every) {
    persist_ = std::move(save);
    persist_every_ = every;
  }

  // Totals for tests: matches, alerts fired, matches suppressed, per rule name.
  std::uint64_t matches(const std::string& rule) const;
  std::uint64_t alerts(const std::string& rule) const;
  std::uint64_t suppressed(const std::string& rule) const;

 private:
  struct Group {
    std::deque<Clock::time_point> hits;  // within the window
    bool active = false;                 // fired and not yet resolved
    Clock::time_point last_match{};
    Clock::time_point last_alert{};
    SystemClock::time_point starts_at{};
    std::uint64_t suppressed = 0;
    std::string last_line;
    std::string last_source;
    Captures captures;  // of the last matching line (regex rules, fail2ban's failures)
    // threshold.fail2ban: the host's FailTicket (hits: its last failure; retry, first) and
    // the end of its ban (on the log's clock).
    std::uint64_t retry = 0;
    Clock::time_point first{};
    Clock::time_point ban_end{};
  };
  struct RuleState {
    std::unordered_map<std::string, Group> groups;
    std::uint64_t matches = 0, alerts = 0, suppressed = 0;  // totals
    std::uint64_t reported_matches = 0, reported_alerts = 0, reported_suppressed = 0;
    // Matches put in "(other)" because kMaxGroups groups were tracked: forged fields can
    // fill the table, and then real groups merge; counted so that it shows.
    std::uint64_t overflowed = 0, reported_overflowed = 0;
  };
  static constexpr std::size_t kMaxGroups = 10000;  // per rule; more share "(other)"
  // A field_after token is cut to this many bytes: the log's writer chooses its length (up
  // to max_line_bytes), and kMaxGroups of them are kept as keys and sent as labels.
  static constexpr std::size_t kMaxGroupBytes = 256;

  // The line's group; nullopt when the rule groups by a field the line does not hold.
  std::optional<std::string> group_of(const RuleConfig& rule, std::string_view source, std::string_view text,
                                      const Captures& captures) const;
  // A fail2ban failure: its fields (host, ip, user, F-* groups) and the line's time;
  // matched() takes the fields.
  struct Failure {
    Captures captures;
    std::optional<SystemClock::time_point> time;
  };
  void matched(std::uint32_t rule, std::string_view source, std::string_view text, Clock::time_point now,
               const RecordFields* fields, std::string_view matched_text, Failure* failure = nullptr);
  void fail2ban_rules(std::string_view source, std::string_view text, std::span<const Occurrence> occurrences,
                      Clock::time_point now, const RecordFields* fields);
  void field_rules(std::string_view source, std::string_view text, Clock::time_point now, const RecordFields& fields);
  void select(std::string_view source, std::string_view text, const RecordFields* fields);
  Alert make_alert(const RuleConfig& rule, const std::string& group, const Group& g, Alert::State state) const;
  void resolve(const RuleConfig& rule, const std::string& group, Group& g);

  // A jail's failure (threshold.fail2ban): whether it bans the host now. A cooldown this
  // long is bantime -1, a ban that never ends.
  static constexpr Millis kPermanentBan{36500LL * 86'400'000};
  bool jail_bans(const RuleConfig& rule, Group& g, Clock::time_point when);

  std::shared_ptr<const RuleSet> rules_;
  Emit emit_;
  Metrics* metrics_;
  std::map<std::string, RuleState> state_;  // by rule name
  bool changed_ = false;  // a match, an alert or a resolution since the last saved()
  std::function<void(const std::string&)> persist_;
  std::chrono::milliseconds persist_every_{1000};
  Clock::time_point persisted_at_{};
  std::vector<std::uint32_t> scratch_;
  Select select_;
  bool select_captures_ = false;
  std::vector<std::uint32_t> selected_;  // the rules that matched the current record
  SelectedRecord selection_;             // reused
};

// The StreamConsumer of gpufilterd: lines of every stream, with their occurrences, to
// the RuleEngine; per-source line and byte counts to the metrics.
// What a source asks of its records (by BatchEntry::origin - 1): joined lines
// (multiline: null for none) and JSON objects (json_fields).
struct RecordShape {
  std::shared_ptr<const Multiline> multiline;
  bool json = false;
  std::size_t json_max_bytes = 1u << 20;
};

// A JSON object's members as fields "json.NAME" (nested objects "json.a.b", to depth 8;
// strings decoded, numbers, true, false and null as written; arrays left out), after
// `base`'s fields; null when `text` is longer than max_bytes or not a JSON object.
std::shared_ptr<const RecordFields> json_fields(std::string_view text, std::size_t max_bytes,
                                                const RecordFields* base);

class RuleConsumer final : public StreamConsumer {
 public:
  RuleConsumer(RuleEngine& engine, Metrics* metrics, std::vector<RecordShape> shapes = {});
  ~RuleConsumer() override;

  // The scanner it is fed by must locate occurrences, whatever the rules: a line is
  // found by where its occurrences are, and rules confirm case and -w at them. (The
  // Searcher can do with counts alone for grep -q and -l; no rule can.)
  static constexpr bool needs_locations() noexcept { return true; }
  void open(const BatchEntry& entry) override;
  void close(const BatchEntry& entry) override;
  void lines(const BatchEntry& entry, const Chunk& piece, std::span<const Occurrence> occurrences) override;
  void flush() override {}
  void tick() override;
  void batch_done(std::size_t bytes, double seconds) override;

  // The metrics label of an input: a followed file's path, or the scheme of a socket
  // ("tcp", "udp", "unix": peers would make the label set unbounded), or "stdin", or a
  // capture ("pcap:FILE", "interface:IFACE"; a flow direction's stream counts as its capture's).
  static std::string source_label(const std::string& name);

 private:
  struct Input {
    std::string name;
    std::string label;
    std::unique_ptr<Joiner> joiner;  // a multiline source's
    const RecordShape* shape = nullptr;
  };
  void record(const Input& input, const Joiner::Record& r);
  void deliver(const Input& input, LineMatch& match);
  // fail2ban filters: lines gathered kFail2banBatch at a time, each batch dated, through
  // the filters and delivered in a Fail2banPipeline, five batches in flight.
  static constexpr std::size_t kFail2banBatch = 1024;
  struct Gathered {  // one slot's batch
    std::vector<std::string_view> lines;
    std::vector<std::uint64_t> offsets;
    std::vector<Occurrence> occurrences;
    std::vector<std::size_t> starts;  // per line, its first in `occurrences` (and the end)
    std::span<const Occurrence> occurrences_of(std::size_t line) const {
      return std::span<const Occurrence>(occurrences).subspan(starts[line], starts[line + 1] - starts[line]);
    }
  };
  std::uint64_t lines_in_batches(const Input& input, const BatchEntry& entry, LineCutter<Occurrence>& cutter);
  std::unique_ptr<WorkerPool> pool_;  // made at the first batch
  std::unique_ptr<Fail2banPipeline> pipeline_;
  std::array<Gathered, 5> gathered_;  // per Fail2banPipeline::kSlots
  RuleEngine& engine_;
  Metrics* metrics_;
  std::vector<RecordShape> shapes_;
  std::uint64_t json_invalid_ = 0;  // unreported
  std::unordered_map<StreamId, Input> inputs_;
  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> counts_;  // label -> lines, bytes (unreported)
  std::vector<Occurrence> scratch_;
  RuleEngine::Clock::time_point last_tick_{};
};

}  // namespace gpufilter::daemon
