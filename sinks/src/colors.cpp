#include "gpufilter/sinks/colors.hpp"

#include <cstring>
#include <optional>

namespace gpufilter {

Colors Colors::from_environment(const char* grep_color, const char* grep_colors) {
  return parse_grep_colors(grep_color, grep_colors);
}

Colors Colors::parse_grep_colors(const char* grep_color, const char* grep_colors) {
  Colors c;
  // GREP_COLOR counts only when it is an SGR parameter list (digits and ';').
  if (grep_color != nullptr && *grep_color != '\0' &&
      std::string_view(grep_color).find_first_not_of("0123456789;") == std::string_view::npos) {
    c.selected_match = c.context_match = grep_color;
    c.legacy_match = c.legacy_context_match = true;
  }
  if (grep_colors != nullptr && *grep_colors != '\0') c.parse_entries(grep_colors);
  // grep warns when GREP_COLOR's own string is still ms or mc (it compares pointers), so
  // a GREP_COLORS entry that sets the same value silences it.
  c.legacy_color_in_effect = c.legacy_match || c.legacy_context_match;
  return c;
}

// grep 3.8's parse_grep_colors: entries are NAME or NAME=VALUE. Unknown names and empty
// entries are skipped (forward compatibility); rv and ne act with or without a value, a
// colour name without a value sets nothing ("mt" still copies ms to mc). Only a malformed
// entry (empty name before '=', a second '=', a value byte other than digits and ';')
// stops the parse, keeping what came before it.
void Colors::parse_entries(std::string_view spec) {
  while (true) {
    const std::size_t colon = spec.find(':');
    const std::string_view item = spec.substr(0, colon);
    const std::size_t eq = item.find('=');
    const std::string_view key = item.substr(0, eq);
    std::optional<std::string> value;
    if (eq != std::string_view::npos) {
      value = std::string(item.substr(eq + 1));
      if (key.empty() || value->find_first_not_of("0123456789;") != std::string::npos) return;
    }
    apply(key, value);
    if (colon == std::string_view::npos) return;
    spec = spec.substr(colon + 1);
  }
}

void Colors::apply(std::string_view key, const std::optional<std::string>& value) {
  std::string* var = key == "mt"   ? &selected_match
                     : key == "ms" ? &selected_match
                     : key == "mc" ? &context_match
                     : key == "sl" ? &selected_line
                     : key == "cx" ? &context_line
                     : key == "fn" ? &file_name
                     : key == "ln" ? &line_number
                     : key == "bn" ? &byte_offset
                     : key == "se" ? &separator
                                   : nullptr;
  if (var != nullptr && value) *var = *value;
  if (value && (key == "mt" || key == "ms")) legacy_match = false;
  if (value && key == "mc") legacy_context_match = false;
  if (key == "mt") {
    context_match = selected_match;
    legacy_context_match = legacy_match;
  }
  else if (key == "rv") reverse = true;
  else if (key == "ne") no_erase = true;
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
