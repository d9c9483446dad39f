// The seam between the pipeline and its outputs. The pipeline pushes lines; a Sink never
// sees chunks, buffers or OpenCL types.
//
// Lifecycle per input: begin() once, then matched()/context()/context_break() in input
// order, then finish() once, unless an error ended the input (then finish() is not called).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "gpufilter/core/chunk.hpp"
#include "gpufilter/core/record_fields.hpp"

namespace gpufilter {

enum class Flow { kContinue, kStop };

// A byte range of a line, relative to the line's first byte.
struct MatchSpan {
  std::size_t begin;
  std::size_t end;
  // The match goes on over the line's '\n' (present or not: grep adds the one a last line
  // lacks). Only grep -F -x -w with one distinct pattern: GNU grep 3.8 runs that through
  // its regex matcher, whose whole-line match takes the newline too (dfasearch.c,
  // EGexecute), so -o prints "a\n\n" and --color colours the newline.
  bool newline = false;
};

struct LineMatch {
  std::string_view line;   // without its '\n'; valid only during the call
  std::uint64_t offset;    // absolute byte offset of the line's start in the input; never an index
  std::uint64_t number;    // 1-based line number; 0 when line numbers are not counted
  // Leftmost-longest, non-overlapping, non-empty matches (grep -o and --color order);
  // filled only when the Searcher was asked for spans and the line matches.
  std::span<const MatchSpan> spans;
  // The input's name (a path, "(standard input)", "tcp://127.0.0.1:40312"): with many
  // streams at once, lines of different inputs reach one sink interleaved.
  std::string_view source;
  // The unique pattern ids (PatternTable) that match in this line under -w/-x, ascending;
  // filled only when the Searcher was asked for them (SearchOptions::pattern_ids).
  std::span<const std::uint32_t> patterns;
  // Every occurrence that starts in the line, before any -w/-x: its position relative to
  // the line and its unique pattern id, in PatternTable::before order. Filled for a sink
  // that needs them (SinkNeeds::occurrences: gpufilterd's rules, which confirm case and
  // -w per rule); the Searcher does not fill it.
  std::span<const Occurrence> occurrences;
  // A '\n' ended the line in the input: false only for an input's last line when the
  // input lacks a final newline (--json writes the line with its terminator, as rg does).
  bool terminated = true;
  // The fields of the record the line is part of (a Kafka record's key ...), or null.
  const RecordFields* fields = nullptr;
};

struct InputInfo {
  std::string name;  // as grep prints it: a path or "(standard input)" / --label
  std::optional<std::uint64_t> size = std::nullopt;  // a regular file's size (Source::file_size)
};

struct InputSummary {
  std::string name;                  // the input's name, as in InputInfo
  std::uint64_t selected_lines = 0;  // lines selected (after -v), capped by -m
  bool binary_matched = false;       // a selected line fell in the binary part of the input
  // Set when reading failed part-way ("NAME: reason"): like grep, the input is finished
  // with what was read before the failure.
  std::string read_error;
  // Set when -m ended the input: the offset just past the last selected line (its '\n'
  // included), from where the input was first read. grep leaves a seekable standard
  // input there, whatever trailing context it printed, so a next reader goes on from it.
  std::optional<std::uint64_t> after_last_selected;
  // The bytes of the input read for the search: its size, or less when the search was
  // decided early (-m, -q); in whole chunks. --json reports it as rg's bytes_searched.
  std::uint64_t bytes_searched = 0;
};

// What a sink needs the Searcher to give it, beyond what grep's own options ask for. Each
// sink answers from its own options (as ripgrep's printers answer
// needs_match_granularity), so no front end has to know which printer wants what.
struct SinkNeeds {
  // Selected and context lines at all. false: the sink writes counts or names only (grep
  // -c, -l, -L, -q), so the Searcher counts lines without pushing them.
  bool lines = true;
  bool spans = false;         // LineMatch::spans (grep -o, --color)
  // Spans for every context line that matches too: grep colours them only with -v (where
  // context lines are the matching ones), not the matching lines after -m's last.
  bool context_spans = false;
  bool pattern_ids = false;   // LineMatch::patterns
  bool line_numbers = false;  // LineMatch::number
  bool occurrences = false;   // LineMatch::occurrences (fed by a line cutter, not the Searcher)
  // The sink writes any byte faithfully (JSON escapes them): GNU grep's binary-file mode,
  // which hides the lines of binary input, is off.
  bool any_bytes = false;
};

class Sink {
 public:
  virtual ~Sink() = default;
  // Asked once, when a Searcher is built on this sink; the default asks for nothing more
  // than the SearchOptions do.
  virtual SinkNeeds needs() const { return {}; }
  virtual void begin(const InputInfo& input) { (void)input; }
  // A selected line (a match, or a non-match with -v).
  virtual Flow matched(const LineMatch& line) = 0;
  // The sink prints a selected line as its bytes and a '\n', nothing more (no name,
  // number, offset, colour or -o part): the Searcher may then hand it adjacent selected
  // lines of one input at once, through matched_lines().
  virtual bool verbatim() const { return false; }
  // `count` adjacent selected lines, each with its '\n' (only when verbatim()).
  virtual Flow matched_lines(std::string_view lines, std::uint64_t count) {
    (void)lines;
    (void)count;
    return Flow::kContinue;
  }
  // A context line (-A, -B, -C).
  virtual void context(const LineMatch& line) { (void)line; }
  // Output is about to resume after a gap (grep's "--").
  virtual void context_break() {}
  virtual void finish(const InputSummary& summary) { (void)summary; }
  // The input went quiet: write out anything buffered.
  virtual void flush() {}
};

}  // namespace gpufilter
