// The selection of capture records: fixed strings under -w/-x, regexes line by line.
#include "packet_select.hpp"

#include <algorithm>

#include "gpufilter/grep/word.hpp"

namespace gpufilter {

bool PacketSelect::record(std::string_view bytes, std::span<const Occurrence> occurrences) {
  if (regex_ != nullptr) return lines(bytes, bytes.size(), occurrences);
  return fixed(bytes, occurrences) || empty_pattern_matches(bytes.size());
}

bool PacketSelect::lines(std::string_view bytes, std::size_t end, std::span<const Occurrence> occurrences) {
  ids_.clear();
  matches_.clear();
  if (bytes.empty()) return end == 0 && empty_line_selected();
  bool any = false;
  LineCutter<> cutter(bytes.substr(0, end), 0, occurrences, line_occurrences_);
  CutLine<LineOccurrence> line;
  while (cutter.next(line)) {
    if (!regex_->line_matches(line.text, line.occurrences)) continue;
    any = true;
    if (!show_) break;  // the first selected line decides; nothing shows the matches
    regex_->match_spans(line.text, line.occurrences, spans_);
    for (const MatchSpan& m : spans_) matches_.push_back(PacketMatch{line.offset + m.begin, m.end - m.begin});
    regex_->matched_patterns(line.text, line.occurrences, line_ids_);
    ids_.insert(ids_.end(), line_ids_.begin(), line_ids_.end());
  }
  std::sort(ids_.begin(), ids_.end());
  ids_.erase(std::unique(ids_.begin(), ids_.end()), ids_.end());
  return any;
}

bool PacketSelect::fixed(std::string_view bytes, std::span<const Occurrence> occurrences) {
  ids_.clear();
  matches_.clear();
  for (const Occurrence& o : occurrences) {
    const std::size_t at = o.position;
    const std::size_t end = at + table_.unique_length(o.pattern);
    if (!occurrence_counts(bytes, at, end, o_.word, o_.whole_line)) continue;
    ids_.push_back(o.pattern);
    if (!show_) break;  // one decides
  }
  std::sort(ids_.begin(), ids_.end());
  ids_.erase(std::unique(ids_.begin(), ids_.end()), ids_.end());
  if (show_ && !ids_.empty()) literal_spans(bytes, occurrences);
  return !ids_.empty();
}

bool PacketSelect::empty_pattern_matches(std::size_t record_size) const noexcept {
  return table_.has_empty_pattern() && (record_size == 0 || (!o_.word && !o_.whole_line));
}

// Every packet without payload asks; with thousands of regexes asking each time cost more
// than the whole scan.
bool PacketSelect::empty_line_selected() {
  if (!empty_line_selected_) empty_line_selected_ = regex_->any_selects({});
  return *empty_line_selected_;
}

// grep -o's spans of the occurrences that count under -w/-x: leftmost first, the longest
// at one place, none overlapping the one before.
void PacketSelect::literal_spans(std::string_view bytes, std::span<const Occurrence> occurrences) {
  for (const Occurrence& o : occurrences) {
    const std::size_t at = o.position;
    const std::size_t end = at + table_.unique_length(o.pattern);
    if (end > at && occurrence_counts(bytes, at, end, o_.word, o_.whole_line))
      matches_.push_back(PacketMatch{at, end - at, o.pattern});
  }
  std::sort(matches_.begin(), matches_.end(), [](const PacketMatch& a, const PacketMatch& b) {
    return a.offset != b.offset ? a.offset < b.offset : a.length > b.length;
  });
  std::size_t kept = 0;
  std::uint64_t reach = 0;
  for (const PacketMatch& m : matches_) {
    if (kept > 0 && m.offset < reach) continue;
    matches_[kept++] = m;
    reach = m.offset + m.length;
  }
  matches_.resize(kept);
}

}  // namespace gpufilter
