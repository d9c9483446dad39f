// GNU grep's --color settings: the SGR sequences for each part of a line, with
// GREP_COLORS parsed the way grep 3.8 parses it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace gpufilter {

struct Colors {
  std::string selected_match = "01;31";  // ms
  std::string context_match = "01;31";   // mc
  std::string selected_line;             // sl
  std::string context_line;              // cx
  std::string file_name = "35";          // fn
  std::string line_number = "32";        // ln
  std::string byte_offset = "32";        // bn
  std::string separator = "36";          // se
  bool reverse = false;                  // rv
  bool no_erase = false;                 // ne: omit "\33[K"
  // GREP_COLOR still decides a match colour (grep 3.8 then warns that it is deprecated).
  bool legacy_color_in_effect = false;

  // GREP_COLOR (deprecated: sets ms and mc), then GREP_COLORS; unknown and empty entries
  // are skipped, and a malformed entry ends the parse, as grep does.
  static Colors from_environment(const char* grep_color, const char* grep_colors);

  std::string start(std::string_view sgr) const;  // "" for an empty capability
  std::string end(std::string_view sgr) const;

 private:
  static Colors parse_grep_colors(const char* grep_color, const char* grep_colors);
  void parse_entries(std::string_view spec);
  // One well-formed GREP_COLORS entry; `value` is absent for a bare NAME.
  void apply(std::string_view key, const std::optional<std::string>& value);

  // Whether ms / mc still hold GREP_COLOR's value, not one GREP_COLORS gave.
  bool legacy_match = false;
  bool legacy_context_match = false;
};

}  // namespace gpufilter
