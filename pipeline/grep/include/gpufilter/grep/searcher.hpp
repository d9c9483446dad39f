// Searcher: grep's line semantics on top of device occurrences. It receives chunks in
// input order with their occurrences, rebuilds lines (joining the pieces of a split line),
// applies -w/-x, -v, -m, context and GNU's binary-file rules, and pushes lines to a Sink.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpufilter/core/chunk.hpp"
#include "gpufilter/core/workers.hpp"
#include "gpufilter/grep/line_occurrences.hpp"
#include "gpufilter/grep/line_spool.hpp"
#include "gpufilter/grep/regex_lines.hpp"
#include "gpufilter/patterns/pattern_table.hpp"
#include "gpufilter/core/sink.hpp"
#include "gpufilter/scan/file_scan.hpp"

namespace gpufilter {

enum class BinaryFiles { kBinary, kText, kWithoutMatch };

struct SearchOptions {
  bool invert = false;      // -v
  bool word = false;        // -w
  bool whole_line = false;  // -x (wins over -w)
  // -w as grep's regex matcher applies it. GNU grep 3.8 in the C locale turns -F -w with
  // exactly one distinct pattern into a regex (grep.c, fgrep_to_grep_pattern), and that
  // matcher's -o/--color walk judges each match's word boundary against the whole line
  // (dfasearch.c, EGexecute), while with more patterns the fixed-string walk does not see
  // the byte before where it restarts (kwsearch.c, Fexecute). With -x as well its match
  // is the line and its newline (MatchSpan::newline). A front end sets it; it changes
  // only the spans, never which lines match.
  bool regex_word = false;
  // -x with fixed strings that grep matched with its regex matcher (one -G/-E pattern),
  // which leaves -x out when it finds a line's -o/--color parts: they are the pattern's
  // occurrences, seen in a line printed as context under -v that is not whole (trailing
  // context after -m). Spans only, never which lines match.
  bool parts_without_whole_line = false;
  std::uint64_t max_count = std::numeric_limits<std::uint64_t>::max();  // -m
  // grep -v with a negative -m: its count of lines left is below 0 from the start, so it
  // prints and counts no selected line, but prints their context, and its late trailing
  // context (prpending(), from its last output on) takes the selected lines as context.
  bool hide_selected = false;
  std::size_t before = 0;   // -B
  std::size_t after = 0;    // -A
  bool group_separators = false;  // a context option was given, even -C 0: print "--"
  // The next four are also what a sink can ask for (Sink::needs()): the Searcher adds the
  // sink's needs to these, so a front end leaves them to the sink.
  bool line_numbers = false;      // count lines for LineMatch::number
  bool spans = false;             // match spans for LineMatch::spans (-o, --color)
  bool context_spans = false;     // ...for context lines that match too (SinkNeeds)
  bool pattern_ids = false;       // the ids of the patterns a line matches (--json)
  bool quiet = false;             // no line output at all (-c, -l, -L, -q)
  bool counting = false;          // -c: keeps counting inside the binary part
  bool stop_on_first = false;     // -l, -L, -q: the first selected line decides the input
  BinaryFiles binary_files = BinaryFiles::kBinary;
  // The locale's character set is UTF-8: a line to be printed that is not valid UTF-8
  // makes the input binary there, as in grep (print_line_head), unless -a. With -o only the
  // matched parts count.
  bool utf8 = false;
  bool only_matching = false;
  char eol = '\n';  // the byte that ends a line: '\0' for -z (--null-data)
  // -G/-E/-P: the occurrences are the regexes' factors, and this decides each line (not
  // owned; used from the thread that delivers lines). nullptr: fixed strings.
  RegexLines* regex = nullptr;
  // With regexes: the complete lines of a large chunk are decided on these threads before
  // they are walked in order (null: on the delivering thread alone).
  WorkerPool* workers = nullptr;
};

// The -o/--color spans of lines decided on a worker, in the order of their lines: line k's
// are spans[ends[k - 1], ends[k]) (from 0 for the first).
struct DecidedSpans {
  std::vector<MatchSpan> spans;
  std::vector<std::size_t> ends;
  std::vector<MatchSpan> line;  // scratch: one line's
  void clear() noexcept {
    spans.clear();
    ends.clear();
  }
  void add_line() {
    spans.insert(spans.end(), line.begin(), line.end());
    ends.push_back(spans.size());
  }
  void append(const DecidedSpans& other) {
    const std::size_t base = spans.size();
    spans.insert(spans.end(), other.spans.begin(), other.spans.end());
    for (std::size_t e : other.ends) ends.push_back(base + e);
  }
};

class Searcher final : public ChunkConsumer {
 public:
  // Asks `sink` what it needs (Sink::needs()) and adds that to `options`.
  Searcher(const PatternTable& table, SearchOptions options, Sink& sink);

  // The options in effect: those given, with the sink's needs added.
  const SearchOptions& options() const noexcept { return options_; }

  void begin_input(const std::string& name, std::optional<std::uint64_t> size = std::nullopt) override;
  // Chunks of one input, in order; occurrences sorted by position. kStop: this input is
  // decided (-m reached, -l/-q matched, binary match); read no more of it.
  Flow consume(const Chunk& chunk, std::span<const Occurrence> occurrences) override;
  // A chunk's lines decided where it was scanned, as predecide() would decide them, while
  // earlier chunks are delivered (ChunkConsumer::work_ahead): dense fixed strings, and
  // regexes, line by line or a whole piece at once (RegexLines::lease_ahead).
  bool works_ahead() noexcept override;
  void work_ahead(const Chunk& chunk, std::span<const Occurrence> occurrences,
                  std::unique_ptr<SlotNote>& note) const noexcept override;
  Flow consume_noted(const Chunk& chunk, std::span<const Occurrence> occurrences, SlotNote* note) override;

  // Whether the device must locate occurrences. It need not when any occurrence at all
  // decides the input (-q, -l, -L without -v, -w, -x, -I, the empty pattern or NUL bytes
  // in patterns): then consume_count() takes the chunk's count alone.
  bool needs_locations() const noexcept;
  // Whether one occurrence per line is all it needs: any occurrence selects its line
  // (fixed strings without -w, -x, the empty pattern or NUL bytes) and nothing shows
  // where (no -o, --color, --json).
  bool one_occurrence_per_line() const noexcept;
  Flow consume_count(const Chunk& chunk, std::uint64_t occurrences) override;
  // `lines` lines of the input were dropped before the next chunk (over-long lines of a
  // stream): line numbers go on counting them.
  void skip_lines(std::uint64_t lines) noexcept { next_number_ += lines; }
  // Whether the input is decided (-m reached, -l/-q matched): nothing more is needed.
  bool done() const noexcept { return done_; }
  // Ends the input: completes an unterminated last line and calls Sink::finish.
  InputSummary finish_input() override;
  void flush() override { sink_.flush(); }
  // grep's separator rule looks back over every input: "--" goes before a group when some
  // line was output before it, in any input. A search of several inputs on several
  // threads (a Searcher each) sets what came before from the others' answers.
  bool output_before() const noexcept { return used_; }
  void set_output_before(bool used) noexcept { used_ = used; }
  // Whether the last input (begin_input) output a line, or selected one that counts as
  // output under the separator rule.
  bool output_in_input() const noexcept { return used_here_; }

  // Does this line (or binary-mode record) match, under -w/-x and the empty pattern?
  bool line_matches(std::string_view line, std::span<const LineOccurrence> occurrences) const;
  // grep's -o/--color spans: leftmost-longest, non-overlapping, non-empty matches.
  void match_spans(std::string_view line, std::span<const LineOccurrence> occurrences,
                   std::vector<MatchSpan>& out) const;

 private:
  struct StoredLine {
    std::string text;
    std::uint64_t offset = 0;
    std::uint64_t number = 0;
    std::vector<MatchSpan> spans;
    std::vector<std::uint32_t> ids;
  };
  // The last -B lines, oldest first: a ring whose entries keep their buffers, so that
  // keeping a line allocates nothing once the ring is warm (a new string and vectors a line
  // were a fifth of a -C run's time). It grows to `capacity` entries as lines come.
  class BeforeLines {
   public:
    void keep(std::size_t capacity, std::string_view text, std::uint64_t offset, std::uint64_t number,
              std::span<const MatchSpan> spans, std::span<const std::uint32_t> ids);
    void clear() noexcept { first_ = count_ = 0; }
    std::size_t size() const noexcept { return count_; }
    const StoredLine& operator[](std::size_t i) const { return lines_[(first_ + i) % lines_.size()]; }

   private:
    std::vector<StoredLine> lines_;
    std::size_t first_ = 0;  // 0 until the ring is full
    std::size_t count_ = 0;
  };

  bool valid(std::string_view line, std::uint64_t position, std::uint32_t length) const;
  void word_spans(std::string_view line, std::span<const LineOccurrence> occurrences,
                  std::vector<MatchSpan>& out) const;
  // `terminated`: the line ended with '\n' (not the unterminated end of the input).
  void line(std::string_view text, std::uint64_t offset, std::span<const LineOccurrence> occurrences,
            bool terminated);
  // `offset`: where `text` lies in the input.
  void binary_record(std::string_view text, std::uint64_t offset, std::span<const LineOccurrence> occurrences,
                     bool terminated);
  void complete_open_line(bool terminated);
  void hold_open_occurrence(LineOccurrence o);
  void settle_binary_records(const char* piece, std::size_t size);
  void enter_binary();
  // grep's rule for output with encoding errors in a UTF-8 locale: true when this line is
  // not printed; with -o, `spans` loses the parts that are not valid UTF-8.
  bool encoding_error(std::string_view text, std::span<const MatchSpan>& spans, bool selected);
  bool emit(std::string_view text, std::uint64_t offset, std::uint64_t number, bool selected,
            std::span<const MatchSpan> spans, std::span<const std::uint32_t> ids, bool terminated);
  bool lags(std::uint64_t number, std::size_t size) const noexcept;
  void lag(std::string_view text, std::uint64_t offset, std::uint64_t number, std::span<const MatchSpan> spans,
           std::span<const std::uint32_t> ids);
  void catch_up();
  void hidden_selected(std::string_view text, std::uint64_t offset, std::uint64_t number,
                       std::span<const MatchSpan> spans);
  void end_run();
  void last_buffer(std::uint64_t number);
  void start_group(std::uint64_t number);
  std::span<const std::uint32_t> matched_patterns(std::string_view line, std::span<const LineOccurrence> occurrences);
  bool fast_path() const noexcept;
  // Context without -v: only lines with an occurrence can be selected, so the lines
  // between them matter only as trailing context, as lagging lines (lags()), or as the
  // `before` lines before the next selected one (context_gap()).
  bool counting_inverted() const noexcept;
  bool counts_inverted() const noexcept;
  bool counting_unmatched() const noexcept;
  bool counts_unmatched() const noexcept;
  bool count_unmatched(const Chunk& chunk, std::span<const Occurrence> occurrences, std::size_t pos,
                       std::size_t& index, std::size_t complete_end);
  bool count_decided_unmatched(const Chunk& chunk, std::size_t pos, std::size_t complete_end);
  bool add_unmatched(std::uint64_t lines, std::uint64_t matched);
  bool context_path() const noexcept;
  std::size_t context_gap(const Chunk& chunk, std::size_t pos, std::size_t gap_end);
  std::size_t visit_line(const Chunk& chunk, std::size_t pos, std::size_t end);
  // A line can be selected without any occurrence: the empty pattern, or a regex that has
  // no factor.
  bool any_line_may_match() const noexcept;
  void gather(std::span<const Occurrence> occurrences, std::size_t& index, std::size_t begin, std::size_t end);
  // consume()'s steps 2 and 3: the complete lines from data[pos] to data[complete_end],
  // then the line that goes on in the next chunk.
  Flow consume_lines(const Chunk& chunk, std::span<const Occurrence> occurrences, std::size_t pos, std::size_t index,
                     std::size_t complete_end);
  // Adjacent selected lines data[begin, end) ('\n' included) not yet handed on.
  struct Run {
    const Chunk& chunk;
    const char* data;
    std::size_t begin = 0, end = 0;
    std::uint64_t count = 0;
    bool known_valid_utf8 = false;  // every line in it was checked on a worker
  };
  void emit_run(Run& run);
  std::size_t selected_lines(const Chunk& chunk, std::span<const Occurrence> occurrences, std::size_t pos,
                             std::size_t& index, std::size_t complete_end);
  // Decides the lines of data[begin, end) (whole lines) on the workers' threads, for line()
  // and selected_lines() to read back in order; `occurrences` relative to data. Regexes
  // always (their confirmation is the costly part); literals where occurrences are dense,
  // so that most lines are selected and deciding them one by one would bound the output.
  void predecide(const char* data, std::size_t begin, std::size_t end, std::span<const Occurrence> occurrences);
  // A worker's literal share of predecide(): the lines of data[begin, end) that hold a
  // valid occurrence (-w, -x), by their first bytes and their ends (the '\n', or `end`).
  void decide_literal_lines(const char* data, std::size_t begin, std::size_t end,
                            std::span<const Occurrence> occurrences, std::vector<LineOccurrence>& scratch,
                            std::vector<const char*>& matched, std::vector<const char*>& ends) const;
  // The lines work_ahead() decided, when they are the ones consume() is about to decide:
  // taken into predecided_ as if predecide() had decided them.
  bool take_decided(SlotNote* note, const Chunk& chunk, std::size_t pos, std::size_t complete_end);
  // line_matches(), answered from predecide() where it decided the line.
  bool decide(std::string_view text, std::span<const LineOccurrence> occurrences);

  const PatternTable& table_;
  SearchOptions options_;
  Sink& sink_;
  bool used_ = false;       // some line was output, in any input (grep's separator rule)
  bool used_here_ = false;  // ... in this input
  std::string name_;

  // Per input.
  std::uint64_t next_number_ = 1;
  bool lastout_set_ = false;              // grep's lastout is set (else nothing output yet)
  std::uint64_t lastout_ = 1;             // ... the line after the last printed
  std::uint64_t last_selected_ = 0;       // the last selected line's number (0: none)
  // Lines from lastout_ on, not printed (lag()): their bytes one after another in one
  // buffer, so that keeping them allocates nothing per line.
  struct Lagging {
    struct Line {
      std::size_t at = 0, size = 0;
      std::uint64_t offset = 0, number = 0;
      std::vector<MatchSpan> spans;
      std::vector<std::uint32_t> ids;
    };
    std::string bytes;
    std::vector<Line> lines;
    void clear() noexcept {
      bytes.clear();
      lines.clear();
    }
    void add(std::string_view text, std::uint64_t offset, std::uint64_t number, std::span<const MatchSpan> spans,
             std::span<const std::uint32_t> ids) {
      lines.push_back(Line{bytes.size(), text.size(), offset, number, {spans.begin(), spans.end()}, {ids.begin(), ids.end()}});
      bytes.append(text);
    }
    std::string_view text(const Line& l) const { return std::string_view(bytes).substr(l.at, l.size); }
  };
  Lagging lagging_;
  std::uint64_t selected_ = 0;
  std::uint64_t after_last_selected_ = 0;  // the input offset just past the last selected line
  std::size_t pending_after_ = 0;
  bool draining_ = false;  // -m reached: only trailing context remains
  bool done_ = false;
  std::uint64_t binary_start_ = kNoBinary;
  bool in_binary_ = false;
  std::uint64_t bytes_searched_ = 0;  // the end of the furthest chunk consumed (InputSummary)
  bool binary_matched_ = false;
  bool quiet_ = false;
  bool stop_on_first_ = false;
  BeforeLines before_;
  bool open_ = false;  // a split line is being collected
  std::uint64_t open_offset_ = 0;
  LineSpool spool_;
  std::vector<LineOccurrence> open_occurrences_;
  // hold_open_occurrence(): the open line's generation at which each pattern was held.
  std::vector<std::uint64_t> open_seen_;
  std::uint64_t open_generation_ = 1;
  bool open_settled_ = false;  // the open line's records up to a NUL were searched and cut off

  // The lines predecide() decided: those that start in [begin, end) of the chunk being
  // consumed; `matched` holds the first bytes of those that matched, ascending.
  struct Predecided {
    const char* begin = nullptr;
    const char* end = nullptr;
    std::vector<const char*> matched;  // the selected lines' first bytes
    std::vector<const char*> ends;     // and their ends, found by the workers too
    std::size_t cursor = 0;
    std::vector<std::vector<const char*>> pieces, piece_ends;  // per worker piece, joined
    // In a UTF-8 locale, whether every selected line is valid UTF-8 (checked by the
    // workers), so that runs of them need no check on this thread (emit_run).
    bool all_valid_utf8 = false;
    std::vector<char> piece_valid;
    std::vector<std::vector<LineOccurrence>> scratch;
    // With spans_ahead(): the selected lines' spans, found by the workers too.
    DecidedSpans spans;
    std::vector<DecidedSpans> piece_spans;
  };
  Predecided predecided_;
  // Whether the workers that decide a regex's lines find their -o/--color spans too
  // (a selected line's spans; -v prints the lines that do not match).
  bool spans_ahead() const noexcept { return options_.regex != nullptr && options_.spans && !options_.invert; }
  // The spans the workers found for `text`, a line decide() just found selected there.
  bool decided_spans(std::string_view text, std::vector<MatchSpan>& out) const;

  // Scratch, reused per line (and per NUL-separated record in the binary part).
  std::vector<LineOccurrence> line_occurrences_;
  std::vector<LineOccurrence> record_occurrences_;
  std::vector<MatchSpan> spans_;
  std::vector<MatchSpan> good_spans_;
  std::vector<std::uint32_t> ids_;
};

}  // namespace gpufilter
