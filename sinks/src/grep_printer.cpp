#include "gpufilter/sinks/grep_printer.hpp"

namespace gpufilter {

GrepPrinter::GrepPrinter(Output& out, Output& err, PrinterOptions options)
    : out_(out), err_(err), options_(std::move(options)) {}

SinkNeeds GrepPrinter::needs() const {
  SinkNeeds needs;
  needs.lines = options_.mode == PrinterOptions::Mode::kLines;
  needs.spans = needs.lines && (options_.only_matching || options_.colors.has_value());
  needs.line_numbers = options_.line_numbers;
  return needs;
}

// -T pads line numbers and offsets to the digits of the input's size (plus one with -n),
// or of INTMAX_MAX for an input without one, as grep 3.8 does.
void GrepPrinter::begin(const InputInfo& input) {
  name_ = input.name;
  number_width_ = 0;
  if (!options_.initial_tab) return;
  constexpr std::uint64_t kIntmaxMax = 9223372036854775807u;
  std::uint64_t n = input.size.value_or(kIntmaxMax);
  if (options_.line_numbers && n < kIntmaxMax) ++n;
  do ++number_width_;
  while ((n /= 10) != 0);
}

void GrepPrinter::number(std::uint64_t value, const std::string& sgr) {
  const Colors* c = options_.colors ? &*options_.colors : nullptr;
  if (c) out_.write(c->start(sgr));
  int digits = 1;
  for (std::uint64_t v = value; v >= 10; v /= 10) ++digits;
  for (int i = digits; i < number_width_; ++i) out_.put(' ');
  out_.write_number(value);
  if (c) out_.write(c->end(sgr));
}

// A file name and what follows it: `separator` in its colour, or with -Z a NUL byte.
void GrepPrinter::file_name(std::string_view name, std::string_view separator) {
  const Colors* c = options_.colors ? &*options_.colors : nullptr;
  colored(name, c ? c->file_name : std::string());
  if (options_.null_after_name) out_.put('\0');
  else if (separator == "\n") out_.end_line();
  else colored(separator, c ? c->separator : std::string());
}

void GrepPrinter::colored(std::string_view text, const std::string& sgr) {
  if (options_.colors) out_.write(options_.colors->start(sgr));
  out_.write(text);
  if (options_.colors) out_.write(options_.colors->end(sgr));
}

// One match, in its colour; with the line's newline when it took it (MatchSpan::newline).
void GrepPrinter::match(const LineMatch& line, const MatchSpan& span, const std::string& sgr) {
  if (options_.colors) out_.write(options_.colors->start(sgr));
  out_.write(line.line.substr(span.begin, span.end - span.begin));
  if (span.newline) out_.put(options_.eol);
  if (options_.colors) out_.write(options_.colors->end(sgr));
}

// grep's print_line_head: [file SEP] [line SEP] [offset SEP].
void GrepPrinter::head(std::string_view source, std::uint64_t line_number, std::uint64_t offset, char separator,
                       std::size_t length) {
  const Colors* c = options_.colors ? &*options_.colors : nullptr;
  const std::string sep(1, separator);
  if (options_.with_filename) file_name(source, sep);
  if (options_.line_numbers) {
    number(line_number, c ? c->line_number : std::string());
    colored(sep, c ? c->separator : std::string());
  }
  if (options_.byte_offset) {
    number(offset, c ? c->byte_offset : std::string());
    colored(sep, c ? c->separator : std::string());
  }
  if (options_.initial_tab && (options_.with_filename || options_.line_numbers || options_.byte_offset) && length != 0)
    out_.put('\t');
}

void GrepPrinter::print_line(const LineMatch& line, bool selected) {
  const char separator = selected ? ':' : '-';
  const Colors* c = options_.colors ? &*options_.colors : nullptr;
  if (options_.only_matching) {
    // One output line per match, prefixed as a line of its own.
    for (const MatchSpan& s : line.spans) {
      head(source_of(line), line.number, line.offset + s.begin, separator, s.end - s.begin + (s.newline ? 1 : 0));
      match(line, s, c ? (selected ? c->selected_match : c->context_match) : std::string());
      out_.end_line(options_.eol);
    }
    return;
  }
  head(source_of(line), line.number, line.offset, separator, line.line.size());
  std::string_view rest = line.line;
  if (c != nullptr) {
    const std::string& line_color = (selected != (options_.invert && c->reverse)) ? c->selected_line : c->context_line;
    const std::string& match_color = selected ? c->selected_match : c->context_match;
    std::size_t cursor = 0;
    // grep colours the matches only when their colour is set (print_line_middle); with an
    // empty ms or mc the whole line is one tail in the line colour, not reopened per match.
    if (!match_color.empty()) for (const MatchSpan& s : line.spans) {
      out_.write(c->start(line_color));
      out_.write(line.line.substr(cursor, s.begin - cursor));
      match(line, s, match_color);
      cursor = s.end;
    }
    // A match that took the newline ended the line (grep prints nothing after it).
    if (!line.spans.empty() && line.spans.back().newline) {
      if (out_.line_buffered()) out_.flush();
      return;
    }
    rest = line.line.substr(cursor);
    if (!line_color.empty()) {
      // grep's print_line_tail: colour up to a trailing '\r', not including it.
      const std::size_t tail = (!rest.empty() && rest.back() == '\r') ? rest.size() - 1 : rest.size();
      if (tail > 0) colored(rest.substr(0, tail), line_color);
      rest = rest.substr(tail);
    }
  }
  out_.write(rest);
  out_.end_line(options_.eol);
}

Flow GrepPrinter::matched(const LineMatch& line) {
  if (options_.mode == PrinterOptions::Mode::kLines) print_line(line, true);
  return Flow::kContinue;
}

bool GrepPrinter::verbatim() const {
  return options_.mode == PrinterOptions::Mode::kLines && !options_.with_filename && !options_.line_numbers &&
         !options_.byte_offset && !options_.only_matching && !options_.colors;
}

Flow GrepPrinter::matched_lines(std::string_view lines, std::uint64_t count) {
  (void)count;
  out_.write(lines);
  if (out_.line_buffered()) out_.flush();
  return Flow::kContinue;
}

void GrepPrinter::context(const LineMatch& line) {
  if (options_.mode == PrinterOptions::Mode::kLines) print_line(line, false);
}

void GrepPrinter::context_break() {
  if (options_.mode != PrinterOptions::Mode::kLines || !options_.group_separator) return;
  colored(*options_.group_separator, options_.colors ? options_.colors->separator : std::string());
  out_.end_line();
}

void GrepPrinter::finish(const InputSummary& summary) {
  const std::string& name = summary.name.empty() ? name_ : summary.name;
  switch (options_.mode) {
    case PrinterOptions::Mode::kCount:
      if (options_.with_filename) file_name(name, ":");
      out_.write_number(summary.selected_lines);
      out_.end_line();
      break;
    case PrinterOptions::Mode::kFilesWithMatches:
    case PrinterOptions::Mode::kFilesWithoutMatch:
      if ((summary.selected_lines > 0) == (options_.mode == PrinterOptions::Mode::kFilesWithMatches))
        file_name(name, "\n");
      break;
    case PrinterOptions::Mode::kLines:
      if (summary.binary_matched) {
        out_.flush();
        err_.write(options_.program_name + ": " + name + ": binary file matches\n");
        err_.flush();
      }
      break;
    case PrinterOptions::Mode::kQuiet:
      break;
  }
}

void GrepPrinter::flush() { out_.flush(); }

}  // namespace gpufilter
