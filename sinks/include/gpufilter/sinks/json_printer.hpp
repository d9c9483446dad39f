// JsonPrinter: the Sink behind --json. One JSON object per line, for jq and log shippers:
//
//   {"type":"match","source":"app.log","line_number":12,"offset":345,
//    "patterns":[{"id":0,"text":"ERROR"}],"line":"..."}
//
// type: "match" for a selected line, "context" for a -A/-B/-C line. source: the input's
// name (a path, "(standard input)", "tcp://127.0.0.1:40312"). line_number: 1-based.
// offset: the line's absolute byte offset in its input. patterns: the given patterns
// (id: 0-based index in the order given by -e/-f/the operand, text: as given) that match
// in the line under -i/-w/-x; a pattern given twice is listed once, with its first id; the
// empty pattern is never listed. line: the line without its '\n'; the JSON escapes for
// '"', '\\' and control bytes; a byte that is not part of valid UTF-8 becomes U+FFFD, and
// then "line_base64" holds the line's exact bytes (RFC 4648 base64). Pattern texts follow
// the same rule ("text_base64").
#pragma once

#include <cstdint>
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
  JsonPrinter(Output& out, std::vector<Pattern> given);

  // Every record carries its line number and the patterns that matched, and JSON escapes
  // every byte, so there is no binary file to hide; no spans.
  SinkNeeds needs() const override;
  Flow matched(const LineMatch& line) override;
  void context(const LineMatch& line) override;
  void flush() override;

 private:
  void record(const LineMatch& line, std::string_view type);

  Output& out_;
  std::vector<std::string> pattern_json_;  // per unique id: the ready {"id":..,"text":..} object
  std::string buffer_;
};

}  // namespace gpufilter
