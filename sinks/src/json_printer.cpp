#include "gpufilter/sinks/json_printer.hpp"

#include "gpufilter/sinks/json.hpp"

#include <charconv>

namespace gpufilter {
namespace {

void append_number(std::string& out, std::uint64_t value) {
  char digits[24];
  const auto r = std::to_chars(digits, digits + sizeof digits, value);
  out.append(digits, static_cast<std::size_t>(r.ptr - digits));
}

}  // namespace

JsonPrinter::JsonPrinter(Output& out, std::vector<Pattern> given) : out_(out) {
  pattern_json_.reserve(given.size());
  for (const Pattern& p : given) {
    std::string object;
    json::append_pattern(object, p.id, p.text);
    pattern_json_.push_back(std::move(object));
  }
}

void JsonPrinter::record(const LineMatch& line, std::string_view type) {
  std::string& b = buffer_;
  b.clear();
  b += "{\"type\":\"";
  b += type;
  b += "\",\"source\":\"";
  json::append_escaped(b, line.source);
  b += "\",\"line_number\":";
  append_number(b, line.number);
  b += ",\"offset\":";
  append_number(b, line.offset);
  b += ",\"patterns\":[";
  for (std::size_t i = 0; i < line.patterns.size(); ++i) {
    if (i > 0) b += ',';
    b += pattern_json_[line.patterns[i]];
  }
  b += "],\"line\":\"";
  const bool valid = json::append_escaped(b, line.line);
  b += '"';
  if (!valid) {
    b += ",\"line_base64\":\"";
    json::append_base64(b, line.line);
    b += '"';
  }
  b += '}';
  out_.write(b);
  out_.end_line();
}

SinkNeeds JsonPrinter::needs() const {
  SinkNeeds needs;
  needs.pattern_ids = true;
  needs.line_numbers = true;
  needs.any_bytes = true;
  return needs;
}

Flow JsonPrinter::matched(const LineMatch& line) {
  record(line, "match");
  return Flow::kContinue;
}

void JsonPrinter::context(const LineMatch& line) { record(line, "context"); }

void JsonPrinter::flush() { out_.flush(); }

}  // namespace gpufilter
