// RecordFields: what a source knows about a record beside its bytes (a Kafka record's
// topic, partition, offset, key and headers), carried with its lines through the
// RecordChannel to the sinks (LineMatch::fields). gpufilterd's rules read them as they
// read a regex's named groups: in label templates ("{{kafka.key}}") and group_by. A systemd
// journal entry's time (JournalReader) is the field "journal.time", which fail2ban filters
// take as the line's date.
#pragma once

#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpufilter {

struct RecordFields {
  std::vector<std::pair<std::string, std::string>> values;  // (name, value), names unique
};

// The record field that carries a journal entry's time: seconds since the epoch.
inline constexpr std::string_view kJournalTimeField = "journal.time";
inline std::optional<double> journal_time(const RecordFields* fields) {
  if (fields == nullptr) return std::nullopt;
  for (const auto& [name, value] : fields->values) {
    if (name != kJournalTimeField) continue;
    char* end = nullptr;
    const double t = std::strtod(value.c_str(), &end);
    if (end != value.c_str() && std::isfinite(t)) return t;
  }
  return std::nullopt;
}

}  // namespace gpufilter
