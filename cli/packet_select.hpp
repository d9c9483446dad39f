// PacketSelect: which records of a capture the patterns select, and what the output shows
// of them. A record (a packet's payload or frame, or a piece of a TCP stream) is matched
// as a whole by fixed strings, under -w and -x within the record; with regexes it is read
// as lines, each selected as grep selects a line, behind the factors' prefilter. One per
// thread: it keeps scratch space, and its RegexLines lane 0 is used.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "gpufilter/cli/options.hpp"
#include "gpufilter/engines/scanner.hpp"
#include "gpufilter/grep/line_occurrences.hpp"
#include "gpufilter/grep/regex_lines.hpp"
#include "gpufilter/patterns/pattern_table.hpp"
#include "gpufilter/sinks/packet_printer.hpp"

namespace gpufilter {

class PacketSelect {
 public:
  // `regex`: the patterns are regexes and the occurrences are their factors' (null: fixed
  // strings). `show`: the output names the patterns and shows the matches (else only the
  // decision is made, as cheaply as it can be).
  PacketSelect(const cli::Options& o, const PatternTable& table, RegexLines* regex, bool show)
      : o_(o), table_(table), regex_(regex), show_(show) {}

  // Whether some pattern matches the record (before -v); ids() and matches() say which
  // and where when `show`.
  bool record(std::string_view bytes, std::span<const Occurrence> occurrences);
  // Regexes: whether some regex selects one of the lines of bytes[0, end) (a stream's
  // complete lines; an empty record is one empty line).
  bool lines(std::string_view bytes, std::size_t end, std::span<const Occurrence> occurrences);
  // Fixed strings: only ids() (the patterns that count under -w/-x), and matches() when
  // `show`; true when there is one.
  bool fixed(std::string_view bytes, std::span<const Occurrence> occurrences);
  // The empty pattern matches every record; under -w or -x only an empty one, as grep -w
  // '' and -x '' match only empty lines. The scanner reports no occurrences for it.
  bool empty_pattern_matches(std::size_t record_size) const noexcept;
  // Regexes: whether some regex selects the empty line (asked once).
  bool empty_line_selected();

  std::span<const std::uint32_t> ids() const noexcept { return ids_; }  // ascending
  std::span<const PacketMatch> matches() const noexcept { return matches_; }  // ascending
  bool regexes() const noexcept { return regex_ != nullptr; }

 private:
  void literal_spans(std::string_view bytes, std::span<const Occurrence> occurrences);

  const cli::Options& o_;
  const PatternTable& table_;
  RegexLines* regex_;
  bool show_;
  std::optional<bool> empty_line_selected_;
  std::vector<std::uint32_t> ids_;
  std::vector<PacketMatch> matches_;
  std::vector<LineOccurrence> line_occurrences_;
  std::vector<MatchSpan> spans_;
  std::vector<std::uint32_t> line_ids_;
};

}  // namespace gpufilter
