// JsonPrinter: the Sink behind --json. ripgrep's JSON Lines format (rg --json; the
// grep_printer crate's JSON printer documents every message), so that the editors and
// tools that read rg's output read ours. One object per line, {"type":T,"data":{...}}:
//
//   begin    {"path":P}, before an input's first record
//   match    {"path":P,"lines":D,"line_number":N,"absolute_offset":O,
//             "submatches":[{"match":D,"start":S,"end":E},...],"patterns":[...]}
//   context  the same for a -A/-B/-C line (submatches only where it matches: -v)
//   end      {"path":P,"binary_offset":B,"stats":STATS}, after the input's last record
//   summary  {"elapsed_total":ELAPSED,"stats":STATS}: last, over every input
//
// P and D are rg's "arbitrary data": {"text":"..."} for valid UTF-8, else
// {"bytes":"BASE64"} (RFC 4648). lines: the line with its terminator ("\r\n" stays), none
// after an input's unterminated last line. line_number: 1-based. absolute_offset: of the
// line's first byte. submatches: the leftmost-longest non-overlapping matches (grep's -o
// parts); empty under -v. STATS: elapsed {secs,nanos,human}, searches,
// searches_with_match, bytes_searched, bytes_printed, matched_lines, matches.
//
// gpufilter's addition, "patterns" in match and context records: the given patterns (id:
// 0-based index in the order given by -e/-f/the operand; text as given, with
// "text_base64" when not UTF-8) that match in the line under -i/-w/-x; a pattern given
// twice is listed once, with its first id; the empty pattern is never listed.
//
// Beyond rg (docs/JSON.md has these and every difference from rg 13, with why):
//  - begin/end: like rg, only around an input that has a record; with -c around every
//    input (the count is end's stats.matched_lines, no match records); streams (--follow,
//    --listen) have none, as their lines interleave and never end: each record's path
//    names its stream.
//  - -o: one match record per matched part: lines is the part (no terminator),
//    absolute_offset the part's, one submatch spanning it (rg ignores -o under --json).
//  - binary_offset: the first NUL byte in a line written for the input, else null (every
//    input is searched as text, as with rg -a).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpufilter/core/sink.hpp"
#include "gpufilter/sinks/output.hpp"

namespace gpufilter {

class JsonPrinter final : public Sink {
 public:
  // given[u]: the id and text reported for unique pattern u (PatternTable ids).
  struct Pattern {
    std::uint32_t id;
    std::string text;
  };
  struct Options {
    bool per_input = true;       // begin/end records around each input's (false: streams)
    bool only_matching = false;  // -o: a record per matched part
    bool count = false;          // -c: begin/end for every input and no line records
    char eol = '\n';             // the terminator `lines` keeps: '\0' with -z (rg --null-data)
  };
  JsonPrinter(Output& out, std::vector<Pattern> given, Options options);

  // Spans for submatches, pattern ids and line numbers for every record; JSON carries
  // every byte, so there is no binary file to hide.
  SinkNeeds needs() const override;
  void begin(const InputInfo& input) override;
  Flow matched(const LineMatch& line) override;
  void context(const LineMatch& line) override;
  void finish(const InputSummary& summary) override;
  void flush() override;
  // rg's last record, over every input; `elapsed_total`: the whole run's time.
  void summary(std::chrono::nanoseconds elapsed_total);

  // rg's per-search statistics (grep_printer::Stats).
  struct Stats {
    std::chrono::nanoseconds elapsed{0};
    std::uint64_t searches = 0;
    std::uint64_t searches_with_match = 0;
    std::uint64_t bytes_searched = 0;
    std::uint64_t bytes_printed = 0;
    std::uint64_t matched_lines = 0;
    std::uint64_t matches = 0;
    Stats& operator+=(const Stats& other);
  };
  // The statistics of the inputs finished so far, and those of inputs another printer
  // wrote (a search of several files at once: a printer per thread) added to them.
  const Stats& totals() const noexcept { return total_; }
  void add_totals(const Stats& other) { total_ += other; }

 private:
  using Clock = std::chrono::steady_clock;
  // A match or context record: `text` at `offset` (the line, or with -o a part of it);
  // `whole_line`: lines gets the line's terminator. Writes the input's begin record first.
  void line_record(const LineMatch& line, std::string_view type, std::string_view text, std::uint64_t offset,
                   std::span<const MatchSpan> spans, bool whole_line);
  void write_begin();
  void write_line(const std::string& record);  // counted in bytes_printed
  const std::string& path_json(std::string_view source);
  Stats& counting();

  Output& out_;
  Options options_;
  std::vector<std::string> pattern_json_;  // per unique id: the ready {"id":..,"text":..} object
  std::vector<std::uint32_t> pattern_id_;  // per unique id: the given pattern's (several may share one)
  std::vector<std::uint32_t> listed_;      // line_record(): the line's unique ids, by given pattern
  std::string buffer_;
  std::string lines_;  // a line with its terminator

  // The input being searched (files: one at a time).
  std::string name_;
  std::string path_json_;   // rg's data object of name_
  std::string path_of_;     // the source path_json_ was made for
  bool begun_ = false;      // its begin record is written
  Clock::time_point started_{};
  Stats input_;
  std::optional<std::uint64_t> first_nul_;  // in a line written for it
  Stats total_;
};

}  // namespace gpufilter
