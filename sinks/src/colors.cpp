#include "gpufilter/sinks/colors.hpp"

#include <cstring>

namespace gpufilter {

Colors Colors::from_environment(const char* grep_color, const char* grep_colors) {
  Colors c = parse_grep_colors(grep_color, grep_colors);
  if (grep_color != nullptr && *grep_color != '\0')
    c.legacy_color_in_effect = c.selected_match == grep_color || c.context_match == grep_color;
  return c;
}

Colors Colors::parse_grep_colors(const char* grep_color, const char* grep_colors) {
  Colors c;
  // GREP_COLOR counts only when it is an SGR parameter list (digits and ';').
  if (grep_color != nullptr && *grep_color != '\0' &&
      std::string_view(grep_color).find_first_not_of("0123456789;") == std::string_view::npos)
    c.selected_match = c.context_match = grep_color;
  if (grep_colors == nullptr || *grep_colors == '\0') return c;
  std::string_view spec(grep_colors);
  while (!spec.empty()) {
    const std::size_t colon = spec.find(':');
    const std::string_view item = spec.substr(0, colon);
    spec = colon == std::string_view::npos ? std::string_view() : spec.substr(colon + 1);
    const std::size_t eq = item.find('=');
    const std::string_view key = item.substr(0, eq);
    if (eq == std::string_view::npos) {
      if (key == "rv") c.reverse = true;
      else if (key == "ne") c.no_erase = true;
      else return c;
      continue;
    }
    const std::string value(item.substr(eq + 1));
    if (value.find_first_not_of("0123456789;") != std::string::npos) return c;
    if (key == "mt") c.selected_match = c.context_match = value;
    else if (key == "ms") c.selected_match = value;
    else if (key == "mc") c.context_match = value;
    else if (key == "sl") c.selected_line = value;
    else if (key == "cx") c.context_line = value;
    else if (key == "fn") c.file_name = value;
    else if (key == "ln") c.line_number = value;
    else if (key == "bn") c.byte_offset = value;
    else if (key == "se") c.separator = value;
    else return c;
  }
  return c;
}

std::string Colors::start(std::string_view sgr) const {
  if (sgr.empty()) return {};
  return "\33[" + std::string(sgr) + (no_erase ? "m" : "m\33[K");
}

std::string Colors::end(std::string_view sgr) const {
  if (sgr.empty()) return {};
  return no_erase ? "\33[m" : "\33[m\33[K";
}

}  // namespace gpufilter
