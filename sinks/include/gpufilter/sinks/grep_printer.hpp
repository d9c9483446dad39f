// GrepPrinter: the Sink that writes what GNU grep writes: lines with their file name,
// line number and byte offset prefixes, -o parts, --color escapes, "--" group
// separators, -c counts and -l/-L file names.
#pragma once

#include <optional>
#include <string>

#include "gpufilter/core/sink.hpp"
#include "gpufilter/sinks/colors.hpp"
#include "gpufilter/sinks/output.hpp"

namespace gpufilter {

struct PrinterOptions {
  enum class Mode { kLines, kCount, kFilesWithMatches, kFilesWithoutMatch, kQuiet };
  Mode mode = Mode::kLines;
  bool with_filename = false;  // -H, or several inputs without -h
  bool line_numbers = false;   // -n
  bool byte_offset = false;    // -b
  bool only_matching = false;  // -o
  bool invert = false;         // -v (line colours with rv)
  bool null_after_name = false;  // -Z: a NUL byte, not ':' or '\n', after a file name
  bool initial_tab = false;      // -T: a tab before the line, numbers padded to align
  char eol = '\n';               // ends each printed line: '\0' with -z (not -c's or -l's)
  std::optional<Colors> colors;  // --color in effect
  std::optional<std::string> group_separator = std::string("--");  // nullopt: --no-group-separator
  std::string program_name = "gpufilter";  // prefix of the binary-file message
};

class GrepPrinter final : public Sink {
 public:
  // Lines go to `out`; the "binary file matches" notice goes to `err`.
  GrepPrinter(Output& out, Output& err, PrinterOptions options);

  // Lines only in lines mode (counts and names need none), spans for -o and --color there,
  // line numbers for -n.
  SinkNeeds needs() const override;
  void begin(const InputInfo& input) override;
  Flow matched(const LineMatch& line) override;
  // Plain lines: no name, number, offset, colour nor -o.
  bool verbatim() const override;
  Flow matched_lines(std::string_view lines, std::uint64_t count) override;
  void context(const LineMatch& line) override;
  void context_break() override;
  void finish(const InputSummary& summary) override;
  void flush() override;

 private:
  void print_line(const LineMatch& line, bool selected);
  // `length`: of what follows on the line (-T's tab goes only before something).
  void head(std::string_view source, std::uint64_t number, std::uint64_t offset, char separator, std::size_t length);
  void number(std::uint64_t value, const std::string& sgr);
  void file_name(std::string_view name, std::string_view separator);
  // Lines of several inputs may interleave (many streams): each names its own.
  std::string_view source_of(const LineMatch& line) const noexcept {
    return line.source.empty() ? std::string_view(name_) : line.source;
  }
  void colored(std::string_view text, const std::string& sgr);
  void match(const LineMatch& line, const MatchSpan& span, const std::string& sgr);

  Output& out_;
  Output& err_;
  PrinterOptions options_;
  std::string name_;
  int number_width_ = 0;  // -T: grep's offset_width for this input
};

}  // namespace gpufilter
