#include "gpufilter/grep/searcher.hpp"

#include <algorithm>
#include <cstring>
#include <cwchar>
#include <exception>

#include "gpufilter/core/errors.hpp"
#include "gpufilter/core/utf8.hpp"
#include "gpufilter/grep/word.hpp"

namespace gpufilter {
namespace {

constexpr bool is_word(unsigned char c) noexcept { return is_word_byte(c); }

// The smallest stretch of lines that predecide() hands out (two pieces).
constexpr std::size_t kMinPredecided = std::size_t{128} << 10;

// Where the complete lines from data[pos] end: after the chunk's last line end when its
// last line goes on in the next chunk (pos: none), else at the chunk's end.
std::size_t complete_end_from(const Chunk& chunk, std::size_t pos, char eol) {
  if (!chunk.line_open) return chunk.size;
  const void* last_nl = memrchr(chunk.data + pos, eol, chunk.size - pos);
  return last_nl != nullptr ? static_cast<std::size_t>(static_cast<const char*>(last_nl) - chunk.data) + 1 : pos;
}

// Literal occurrences dense enough (one per 4 KiB or more) that the lines are decided
// ahead; a few lines are decided faster on the delivering thread than handed out.
constexpr bool dense_occurrences(std::size_t count, std::size_t bytes) noexcept { return count * 4096 > bytes; }

// The line of data[floor, end) around data[at]: [begin, end), and whether an `eol` ends it.
struct LineAround {
  std::size_t begin, end;
  bool terminated;
};
LineAround line_around(const char* data, std::size_t floor, std::size_t at, std::size_t end, char eol) {
  const char* before = static_cast<const char*>(memrchr(data + floor, eol, at - floor));
  const char* nl = static_cast<const char*>(std::memchr(data + at, eol, end - at));
  return {before != nullptr ? static_cast<std::size_t>(before - data) + 1 : floor,
          nl != nullptr ? static_cast<std::size_t>(nl - data) : end, nl != nullptr};
}

std::uint64_t count_lines(const char* begin, const char* end, char eol) {
  return count_byte(std::string_view(begin, static_cast<std::size_t>(end - begin)), eol);
}

// What the sink needs, added to what the options ask for: the Searcher gives the union,
// so a front end states grep's rules and each sink states its own wants.
SearchOptions with_needs(SearchOptions options, const SinkNeeds& needs) noexcept {
  options.quiet = options.quiet || !needs.lines;
  options.spans = options.spans || needs.spans;
  options.context_spans = options.context_spans || needs.context_spans;
  options.pattern_ids = options.pattern_ids || needs.pattern_ids;
  options.line_numbers = options.line_numbers || needs.line_numbers;
  if (needs.any_bytes) options.binary_files = BinaryFiles::kText;
  return options;
}

}  // namespace

Searcher::Searcher(const PatternTable& table, SearchOptions options, Sink& sink)
    : table_(table), options_(with_needs(options, sink.needs())), sink_(sink) {}

void Searcher::begin_input(const std::string& name, std::optional<std::uint64_t> size) {
  name_ = name;
  used_here_ = false;
  next_number_ = 1;
  lastout_set_ = false;
  lastout_ = 1;
  last_selected_ = 0;
  lagging_.clear();
  selected_ = 0;
  after_last_selected_ = 0;
  pending_after_ = 0;
  draining_ = false;
  done_ = false;
  binary_start_ = kNoBinary;
  in_binary_ = false;
  binary_matched_ = false;
  bytes_searched_ = 0;
  quiet_ = options_.quiet;
  stop_on_first_ = options_.stop_on_first;
  before_.clear();
  open_ = false;
  open_settled_ = false;
  spool_.clear();
  open_occurrences_.clear();
  done_ = options_.max_count == 0;
  sink_.begin(InputInfo{name_, size});
}

// -x: the occurrence is the whole line. -w: no word character touches either end (in a
// UTF-8 locale a character: grep's fixed-string matcher reads multibyte letters there).
bool Searcher::valid(std::string_view line, std::uint64_t position, std::uint32_t length) const {
  return occurrence_counts(line, position, position + length, options_.word, options_.whole_line, options_.utf8);
}

bool Searcher::any_line_may_match() const noexcept {
  return options_.regex != nullptr ? options_.regex->every_line_is_candidate() : table_.has_empty_pattern();
}

bool Searcher::line_matches(std::string_view line, std::span<const LineOccurrence> occurrences) const {
  if (options_.regex != nullptr) return options_.regex->line_matches(line, occurrences);
  if (table_.has_empty_pattern()) {
    if (options_.whole_line) {
      if (line.empty()) return true;
    } else if (!options_.word) {
      return true;
    } else {
      // The empty match at p counts when neither side of p is a word character.
      for (std::size_t p = 0; p <= line.size(); ++p) {
        const bool left = p > 0 && is_word(static_cast<unsigned char>(line[p - 1]));
        const bool right = p < line.size() && is_word(static_cast<unsigned char>(line[p]));
        if (!left && !right) return true;
      }
    }
  }
  for (const auto& o : occurrences)
    if (valid(line, o.position, table_.unique_length(o.pattern))) return true;
  return false;
}

void Searcher::match_spans(std::string_view line, std::span<const LineOccurrence> occurrences,
                           std::vector<MatchSpan>& out) const {
  if (options_.regex != nullptr) return options_.regex->match_spans(line, occurrences, out);
  out.clear();
  if (options_.word && options_.regex_word) {
    if (options_.whole_line) {
      // grep's regex matcher takes a -x -w match as the line with its newline.
      if (line_matches(line, occurrences)) out.push_back({0, line.size(), true});
      return;
    }
    // Otherwise the leftmost occurrence that is a word in the whole line, from where the
    // last match ended: the loop below, as valid() looks at the whole line.
  } else if (options_.word && !options_.whole_line) {
    word_spans(line, occurrences, out);
    return;
  }
  std::uint64_t cursor = 0;
  // Occurrences are sorted by position, longest first at each position.
  for (std::size_t i = 0; i < occurrences.size();) {
    const std::uint64_t at = occurrences[i].position;
    std::size_t j = i;
    std::uint32_t best = 0;
    for (; j < occurrences.size() && occurrences[j].position == at; ++j) {
      const std::uint32_t length = table_.unique_length(occurrences[j].pattern);
      const bool counts = options_.parts_without_whole_line
                              ? occurrence_counts(line, at, at + length, options_.word, false)
                              : valid(line, at, length);
      if (best == 0 && at >= cursor && counts) best = length;
    }
    if (best != 0) {
      out.push_back({static_cast<std::size_t>(at), static_cast<std::size_t>(at + best)});
      cursor = at + best;
    }
    i = j;
  }
}

// With two or more distinct patterns (SearchOptions::regex_word is for one), grep -w
// -o/--color walks a line with repeated searches that each start where the last
// match ended (or one past an empty match), and a search does not look at the byte before
// its own start when it checks a word boundary (GNU kwsearch.c, Fexecute with start_ptr).
// After a failed candidate it skips the run of word characters there. This reproduces that
// walk exactly, so the printed parts are grep's.
void Searcher::word_spans(std::string_view line, std::span<const LineOccurrence> occurrences,
                          std::vector<MatchSpan>& out) const {
  const std::size_t n = line.size();
  const bool empty = table_.has_empty_pattern();
  const bool utf8 = options_.utf8;
  auto word_at = [&](std::size_t i) { return regex::word_after(line, i, utf8); };
  std::size_t index = 0;
  std::size_t cursor = 0;
  while (cursor <= n) {
    std::size_t search_start = cursor;  // grep's mb_start
    std::size_t from = cursor;
    bool found = false;
    std::size_t found_at = 0, found_length = 0;
    while (from <= n) {
      while (index < occurrences.size() && occurrences[index].position < from) ++index;
      std::size_t at;
      if (empty) at = from;
      else if (index < occurrences.size()) at = static_cast<std::size_t>(occurrences[index].position);
      else break;
      if (!(at > search_start && regex::word_before(line, at, utf8))) {
        // Longest first, then shorter ones at the same place, the empty pattern last.
        for (std::size_t k = index; k < occurrences.size() && occurrences[k].position == at; ++k) {
          const std::size_t length = table_.unique_length(occurrences[k].pattern);
          if (!word_at(at + length)) {
            found = true;
            found_at = at;
            found_length = length;
            break;
          }
        }
        if (!found && empty && !word_at(at)) {
          found = true;
          found_at = at;
          found_length = 0;
        }
        if (found) break;
      }
      const std::size_t skip = at + regex::word_chars_from(line, at, utf8);
      search_start = skip;
      from = skip + 1;
    }
    if (!found) return;
    if (found_length == 0) {
      cursor = found_at + 1;
      continue;
    }
    out.push_back({found_at, found_at + found_length});
    cursor = found_at + found_length;
  }
}

// grep's prtext: the group of selected line `number` begins with its leading context,
// which reaches back `before` lines but not past the last output (lastout_, even one that
// stalled on a line it could not print); it is adjacent to that output, or "--" comes first.
void Searcher::start_group(std::uint64_t number) {
  const std::uint64_t back = number > options_.before ? number - options_.before : 1;
  if (options_.group_separators && used_ && (!lastout_set_ || std::max(back, lastout_) != lastout_))
    sink_.context_break();
}

std::span<const std::uint32_t> Searcher::matched_patterns(std::string_view line,
                                                         std::span<const LineOccurrence> occurrences) {
  ids_.clear();
  if (options_.regex != nullptr) {
    options_.regex->matched_patterns(line, occurrences, ids_);
    return ids_;
  }
  for (const auto& o : occurrences)
    if (valid(line, o.position, table_.unique_length(o.pattern))) ids_.push_back(o.pattern);
  std::sort(ids_.begin(), ids_.end());
  ids_.erase(std::unique(ids_.begin(), ids_.end()), ids_.end());
  return ids_;
}

// grep 3.8's print_line_head: a line (or, with -o, a matched part) that is not valid
// UTF-8 is not printed; the input then says "binary file matches" at its end (not with
// -I, which drops such lines silently). Lines before and after print as usual; with -o,
// the parts of the line before the bad one print, those after it do not.
bool Searcher::encoding_error(std::string_view text, std::span<const MatchSpan>& spans, bool selected) {
  if (!options_.utf8 || options_.binary_files == BinaryFiles::kText) return false;
  if (options_.only_matching) {
    if (!selected) return false;  // -o prints nothing of context lines
    good_spans_.clear();
    for (const MatchSpan& s : spans) {
      if (!valid_utf8(text.substr(s.begin, s.end - s.begin))) break;
      good_spans_.push_back(s);
    }
    if (good_spans_.size() == spans.size()) return false;
    if (options_.binary_files == BinaryFiles::kBinary) binary_matched_ = true;
    spans = good_spans_;
    return good_spans_.empty();
  }
  if (valid_utf8(text)) return false;
  if (options_.binary_files == BinaryFiles::kBinary) binary_matched_ = true;
  return true;
}

// Whether the line was printed. One grep does not print (an encoding error) leaves its
// "last output" where it was: the next group is not adjacent to it ("--"), and trailing
// context stalls on it (line(), catch_up()). With -o grep prints the line's good parts
// and counts it printed.
bool Searcher::emit(std::string_view text, std::uint64_t offset, std::uint64_t number, bool selected,
                    std::span<const MatchSpan> spans, std::span<const std::uint32_t> ids, bool terminated) {
  used_ = used_here_ = true;
  if (encoding_error(text, spans, selected)) {
    if (!options_.only_matching) return false;
  } else {
    LineMatch m{text, offset, options_.line_numbers ? number : 0, spans, {}, {}, {}};
    m.source = name_;
    m.patterns = ids;
    m.terminated = terminated;
    if (selected) {
      if (sink_.matched(m) == Flow::kStop) done_ = true;
    } else {
      sink_.context(m);
    }
  }
  lastout_set_ = true;
  lastout_ = number + 1;
  lagging_.clear();
  return true;
}

// A line not printed, kept while it follows the last output closely: grep's trailing
// context after a selected line it could not print starts at its last output, and each
// such line moves that on by `after` lines at most. Bounded: 64 times `after` lines and
// 4 MiB (past that, the lines such a run of unprintable selected lines would print are
// not kept, and are not printed).
bool Searcher::lags(std::uint64_t number, std::size_t size) const noexcept {
  constexpr std::size_t kLaggingBytes = std::size_t{4} << 20;
  // Only where encoding_error() can hide a line, or hide_selected every selected one.
  if (!options_.hide_selected &&
      (!options_.utf8 || options_.binary_files == BinaryFiles::kText || options_.only_matching))
    return false;
  const std::size_t kept = lagging_.lines.size();
  return options_.after > 0 && number == lastout_ + kept && kept < 64 * options_.after &&
         lagging_.bytes.size() + size <= kLaggingBytes;
}

void Searcher::lag(std::string_view text, std::uint64_t offset, std::uint64_t number, std::span<const MatchSpan> spans,
                   std::span<const std::uint32_t> ids) {
  if (lags(number, text.size())) lagging_.add(text, offset, number, spans, ids);
}

// grep's prpending() after a selected line it could not print: up to `after` lines from
// its last output on (lines before that selected line, even the input's first ones when
// nothing was printed yet), until one it cannot print; it then spends the count on that
// one, as at the latest on the selected line itself. No trailing context follows.
void Searcher::catch_up() {
  if (options_.after == 0) return;
  lastout_set_ = true;  // prpending() starts from the buffer's first line when nothing was printed
  Lagging kept;
  std::swap(kept, lagging_);  // emit() clears lagging_
  std::size_t k = 0;
  std::size_t left = options_.after;
  bool stopped = false;
  for (; left > 0 && k < kept.lines.size(); --left, ++k) {
    const Lagging::Line& l = kept.lines[k];
    if (!emit(kept.text(l), l.offset, l.number, false, l.spans, l.ids, true)) {
      stopped = true;
      break;
    }
  }
  lagging_.clear();
  for (; k < kept.lines.size(); ++k) {
    const Lagging::Line& l = kept.lines[k];
    lagging_.add(kept.text(l), l.offset, l.number, l.spans, l.ids);
  }
  // Hidden selected lines (hide_selected) stop nothing: the count left goes on to the
  // lines after them, as grep's prpending() goes on to its limit.
  pending_after_ = options_.hide_selected && !stopped ? left : 0;
}

// A selected line under hide_selected: its group starts and its leading context prints,
// as in grep's prtext(), but the line itself is neither printed nor counted.
void Searcher::hidden_selected(std::string_view text, std::uint64_t offset, std::uint64_t number,
                               std::span<const MatchSpan> spans) {
  if (quiet_) return;
  if (last_selected_ == 0 || number != last_selected_ + 1) {  // grep's prtext() takes a run at once
    start_group(number);
    // Leading context reaches back to the last output, which a hidden line does not
    // move: the hidden lines of earlier runs are context too.
    for (std::size_t i = 0; i < before_.size(); ++i) {
      const StoredLine& s = before_[i];
      if (!lastout_set_ || s.number >= lastout_) emit(s.text, s.offset, s.number, false, s.spans, s.ids, true);
    }
    before_.clear();
    pending_after_ = options_.after;
  }
  lag(text, offset, number, spans, {});
  last_selected_ = number;
  used_ = used_here_ = true;
  if (options_.before > 0) before_.keep(options_.before, text, offset, number, spans, {});
}

// With -v grep prints a run of selected lines at once, and its trailing context follows
// the run: caught up (catch_up()) when the run's last line was not printed.
void Searcher::end_run() {
  if (options_.invert && pending_after_ > 0 && last_selected_ != 0 && lastout_ <= last_selected_) catch_up();
}

// grep reads an unterminated last line as a buffer of its own: it first ends what it read
// (a -v run's trailing context), keeps up to `before` lines before the line (not past its
// last output), and forgets its last output unless those lines reach it; its late context
// (catch_up()) then starts at the first line kept.
void Searcher::last_buffer(std::uint64_t number) {
  end_run();
  last_selected_ = 0;
  const std::uint64_t back = number > options_.before ? number - options_.before : 1;
  const std::uint64_t begin = lastout_set_ ? std::max(back, lastout_) : back;
  if (lastout_set_ && begin == lastout_) return;
  lastout_set_ = false;
  lastout_ = begin;
  lagging_.clear();
  for (std::size_t i = 0; i < before_.size(); ++i) {
    const StoredLine& l = before_[i];
    if (l.number < begin) continue;
    if (!lags(l.number, l.text.size())) break;  // only the lines from `begin` on, without a gap
    lagging_.add(l.text, l.offset, l.number, l.spans, l.ids);
  }
}

void Searcher::BeforeLines::keep(std::size_t capacity, std::string_view text, std::uint64_t offset,
                                  std::uint64_t number, std::span<const MatchSpan> spans,
                                  std::span<const std::uint32_t> ids) {
  std::size_t at;
  if (count_ < capacity) {  // first_ is 0 until the ring is full
    at = count_++;
    if (at == lines_.size()) lines_.emplace_back();
  } else {
    at = first_;
    first_ = (first_ + 1) % lines_.size();
  }
  StoredLine& s = lines_[at];
  s.text.assign(text.data(), text.size());
  s.offset = offset;
  s.number = number;
  s.spans.assign(spans.begin(), spans.end());
  s.ids.assign(ids.begin(), ids.end());
}

void Searcher::enter_binary() {
  in_binary_ = true;
  before_.clear();
  pending_after_ = 0;
  draining_ = false;
  if (options_.binary_files == BinaryFiles::kWithoutMatch) {
    // grep gives up on the input: it is taken as not matching.
    selected_ = 0;
    done_ = true;
    return;
  }
  if (!options_.counting) {
    quiet_ = true;
    stop_on_first_ = true;
  }
}

// In the binary part NUL bytes end records, as GNU grep turns them into newlines; an
// occurrence that spans a NUL is no match there. Occurrences are sorted by position, so
// each record looks only at its own; and unless -v or the empty pattern can select a
// record without any, the records between occurrences are skipped unsearched (a file of
// NUL bytes is a billion records per GB).
void Searcher::binary_record(std::string_view text, std::uint64_t offset, std::span<const LineOccurrence> occurrences,
                             bool terminated) {
  const bool only_with_occurrences = !options_.invert && !any_line_may_match();
  std::size_t index = 0;  // the first occurrence not before the record
  std::size_t begin = 0;
  for (;;) {
    while (index < occurrences.size() && occurrences[index].position < begin) ++index;
    if (only_with_occurrences) {
      if (index == occurrences.size() || occurrences[index].position >= text.size()) return;
      const std::size_t at = static_cast<std::size_t>(occurrences[index].position);
      const void* nul_before = memrchr(text.data() + begin, '\0', at - begin);
      if (nul_before != nullptr) begin = static_cast<std::size_t>(static_cast<const char*>(nul_before) - text.data()) + 1;
    }
    const std::size_t nul = text.find('\0', begin);
    // A NUL that ends an unterminated last line ends the input, not a record before nothing.
    if (begin == text.size() && begin > 0 && !terminated) return;
    const std::size_t end = nul == std::string_view::npos ? text.size() : nul;
    const std::string_view record = text.substr(begin, end - begin);
    record_occurrences_.clear();
    for (std::size_t k = index; k < occurrences.size() && occurrences[k].position < end; ++k) {
      const LineOccurrence& o = occurrences[k];
      if (o.position + table_.unique_length(o.pattern) <= end) record_occurrences_.push_back({o.position - begin, o.pattern});
    }
    const bool selected = line_matches(record, record_occurrences_) != options_.invert;
    if (selected) used_ = used_here_ = true;  // grep's separator rule counts lines it selected but did not print
    // hide_selected: grep counts no selected line, so it has none to report here either.
    if (selected && !options_.hide_selected) {
      ++selected_;
      after_last_selected_ = offset + std::min(end + 1, text.size() + (terminated ? 1 : 0));
      binary_matched_ = true;
      if (stop_on_first_ || selected_ >= options_.max_count) {
        done_ = true;
        return;
      }
    }
    if (nul == std::string_view::npos) return;
    begin = nul + 1;
  }
}

void Searcher::line(std::string_view text, std::uint64_t offset, std::span<const LineOccurrence> occurrences,
                    bool terminated) {
  const std::uint64_t number = next_number_++;
  if (done_) return;
  if (!in_binary_ && binary_start_ != kNoBinary && offset + text.size() >= binary_start_) {
    enter_binary();
    if (done_) return;
  }
  if (in_binary_) {
    binary_record(text, offset, occurrences, terminated);
    return;
  }
  if (!terminated && !quiet_) last_buffer(number);
  const bool matched = decide(text, occurrences);
  const bool selected = matched != options_.invert;
  auto spans_for = [&](bool as_selected) -> std::span<const MatchSpan> {
    // grep colours (and -o prints) matches only in lines that match: selected lines
    // without -v, context lines with -v. With -v a line printed as context need not match
    // (trailing context after -m, selected lines hidden by a negative -m): grep searches it
    // all the same, and its regex matcher, asked from a start pointer, leaves -x out.
    const bool context_under_v = options_.invert && !as_selected;
    if (!options_.spans || (!matched && !context_under_v) || (as_selected == options_.invert && !options_.context_spans))
      return {};
    if (!matched || !decided_spans(text, spans_)) match_spans(text, occurrences, spans_);
    return spans_;
  };
  auto ids = [&]() -> std::span<const std::uint32_t> {
    if (!options_.pattern_ids || !matched) return {};
    return matched_patterns(text, occurrences);
  };

  if (draining_) {
    // grep spends the count on a line it cannot print
    if (!emit(text, offset, number, false, spans_for(false), ids(), terminated) || --pending_after_ == 0) {
      pending_after_ = 0;
      done_ = true;
    }
    return;
  }
  if (selected && options_.hide_selected) {
    hidden_selected(text, offset, number, spans_for(false));
    return;
  }
  if (selected) {
    ++selected_;
    after_last_selected_ = offset + text.size() + (terminated ? 1 : 0);
    if (!quiet_) {
      const bool run_goes_on = options_.invert && last_selected_ != 0 && number == last_selected_ + 1;
      if (!run_goes_on) start_group(number);  // -v: a run of selected lines is one group
      for (std::size_t i = 0; i < before_.size(); ++i) {
        const StoredLine& s = before_[i];
        emit(s.text, s.offset, s.number, false, s.spans, s.ids, true);
      }
      before_.clear();
      pending_after_ = options_.after;
      if (!emit(text, offset, number, true, spans_for(true), ids(), terminated)) {
        if (!options_.invert) catch_up();  // -v: where the run ends (end_run())
        lag(text, offset, number, {}, {});
      }
      last_selected_ = number;
    }
    used_ = used_here_ = true;  // grep's separator rule counts lines it selected but did not print
    if (stop_on_first_) {
      done_ = true;
    } else if (selected_ >= options_.max_count) {
      end_run();
      if (!quiet_ && pending_after_ > 0) draining_ = true;
      else done_ = true;
    }
    return;
  }
  if (quiet_) return;
  end_run();
  if (pending_after_ > 0) {
    --pending_after_;
    const auto spans = spans_for(false);
    const auto line_ids = ids();
    if (emit(text, offset, number, false, spans, line_ids, terminated)) return;
    pending_after_ = 0;  // grep spends the count on a line it cannot print
    lag(text, offset, number, spans, line_ids);
    return;
  }
  if (options_.before == 0 && !lags(number, text.size())) return;
  const auto spans = spans_for(false);
  const auto line_ids = ids();
  if (options_.before > 0) before_.keep(options_.before, text, offset, number, spans, line_ids);
  lag(text, offset, number, spans, line_ids);
}

bool Searcher::fast_path() const noexcept {
  // Only lines with an occurrence can be selected and nothing else is printed.
  return !options_.invert && !options_.group_separators && !any_line_may_match();
}

// Whether -v lines are counted, not visited (count_unmatched()): from the options alone,
// then as the input stands (binary data is taken line by line).
bool Searcher::counting_inverted() const noexcept {
  return options_.quiet && options_.invert && !options_.stop_on_first && !options_.hide_selected;
}

bool Searcher::counts_inverted() const noexcept {
  return counting_inverted() && !stop_on_first_ && binary_start_ == kNoBinary && !in_binary_;
}

bool Searcher::counting_unmatched() const noexcept {
  return counting_inverted() && options_.regex == nullptr && !options_.word && !options_.whole_line &&
         !table_.has_empty_pattern();
}

bool Searcher::counts_unmatched() const noexcept { return counting_unmatched() && counts_inverted(); }

// -v counted (-c, or a sink that takes no lines) where every occurrence is a match: the
// lines selected are those without one, so the chunk's lines are counted, less those
// that hold an occurrence, and none is visited (`-c -v e` visited 1.8 million lines of 250
// MB one by one). False, with nothing done, where the count would reach -m's.
bool Searcher::count_unmatched(const Chunk& chunk, std::span<const Occurrence> occurrences, std::size_t pos,
                               std::size_t& index, std::size_t complete_end) {
  const char* data = chunk.data;
  const char eol = options_.eol;
  if (pos >= complete_end) return true;
  std::uint64_t lines = count_lines(data + pos, data + complete_end, eol) + (data[complete_end - 1] != eol ? 1 : 0);
  std::size_t at = index;
  std::uint64_t matched = 0;
  while (at < occurrences.size() && occurrences[at].position < complete_end) {
    const void* nl = std::memchr(data + occurrences[at].position, eol, complete_end - occurrences[at].position);
    const std::size_t end = nl != nullptr ? static_cast<std::size_t>(static_cast<const char*>(nl) - data) : complete_end;
    ++matched;
    while (at < occurrences.size() && occurrences[at].position <= end) ++at;
  }
  if (!add_unmatched(lines, matched)) return false;
  index = at;
  return true;
}

// -v counted where the regexes decided the lines ahead (predecide(), work_ahead()): the
// lines selected are the others (-c -v '[0-9]' visited 1.8 million lines one by one).
bool Searcher::count_decided_unmatched(const Chunk& chunk, std::size_t pos, std::size_t complete_end) {
  if (pos >= complete_end) return true;
  const char* data = chunk.data;
  const std::uint64_t lines =
      count_lines(data + pos, data + complete_end, options_.eol) + (data[complete_end - 1] != options_.eol ? 1 : 0);
  return add_unmatched(lines, predecided_.matched.size());
}

// `lines` less `matched` selected, unless that reaches -m's count (false: nothing done).
bool Searcher::add_unmatched(std::uint64_t lines, std::uint64_t matched) {
  const std::uint64_t selected = lines - matched;
  if (options_.max_count - selected_ <= selected) return false;
  if (options_.line_numbers) next_number_ += lines;
  selected_ += selected;
  if (selected > 0) used_ = used_here_ = true;
  return true;
}

bool Searcher::context_path() const noexcept {
  return !options_.invert && !any_line_may_match() && binary_start_ == kNoBinary && !in_binary_;
}

// One line of data[pos, end) with no occurrence, to line(); returns where the next begins.
std::size_t Searcher::visit_line(const Chunk& chunk, std::size_t pos, std::size_t end) {
  const char* nl = static_cast<const char*>(std::memchr(chunk.data + pos, options_.eol, end - pos));
  const std::size_t stop = nl != nullptr ? static_cast<std::size_t>(nl - chunk.data) : end;
  line(std::string_view(chunk.data + pos, stop - pos), chunk.offset + pos, {}, nl != nullptr);
  return stop + 1;
}

// The lines of data[pos, gap_end), none with an occurrence (gap_end: a line's start, or
// the end of the chunk's complete lines): those that can print or lag are visited one by
// one; of the rest only the last `before` (leading context for a line that may follow)
// and an unterminated last line are, the others only counted (-C2 walked every line of
// 250 MB: 1.7x grep's time). Returns gap_end.
std::size_t Searcher::context_gap(const Chunk& chunk, std::size_t pos, std::size_t gap_end) {
  const char* data = chunk.data;
  const char eol = options_.eol;
  // Each line that follows the last output closely may lag; each of pending_after_ prints.
  auto matters = [&] {
    return draining_ || pending_after_ > 0 || next_number_ <= lastout_ + lagging_.lines.size();
  };
  while (pos < gap_end && !done_ && matters()) pos = visit_line(chunk, pos, gap_end);
  if (pos >= gap_end || done_) return std::max(pos, gap_end);
  // Back from gap_end over an unterminated last line, then over `before` lines: each step
  // to the start of the line whose last byte lies before `keep` (its eol not searched).
  std::size_t keep = gap_end;
  auto back = [&](std::size_t last) {
    const void* nl = last > pos ? memrchr(data + pos, eol, last - pos) : nullptr;
    keep = nl != nullptr ? static_cast<std::size_t>(static_cast<const char*>(nl) - data) + 1 : pos;
  };
  if (data[keep - 1] != eol) back(keep);
  for (std::size_t i = 0; i < options_.before && keep > pos; ++i) back(keep - 1);
  if (keep > pos) {
    next_number_ += count_lines(data + pos, data + keep, eol);
    before_.clear();  // older than the lines skipped
    pos = keep;
  }
  while (pos < gap_end && !done_) pos = visit_line(chunk, pos, gap_end);
  return std::max(pos, gap_end);
}

void Searcher::gather(std::span<const Occurrence> occurrences, std::size_t& index, std::size_t begin,
                      std::size_t end) {
  line_occurrences_.clear();
  for (; index < occurrences.size() && occurrences[index].position < end; ++index)
    line_occurrences_.push_back({occurrences[index].position - begin, occurrences[index].pattern});
}

bool Searcher::decided_spans(std::string_view text, std::vector<MatchSpan>& out) const {
  const Predecided& p = predecided_;
  if (!spans_ahead() || text.data() < p.begin || text.data() >= p.end || p.cursor >= p.matched.size() ||
      p.matched[p.cursor] != text.data() || p.cursor >= p.spans.ends.size())
    return false;
  const std::size_t from = p.cursor == 0 ? 0 : p.spans.ends[p.cursor - 1];
  out.assign(p.spans.spans.begin() + static_cast<std::ptrdiff_t>(from),
             p.spans.spans.begin() + static_cast<std::ptrdiff_t>(p.spans.ends[p.cursor]));
  return true;
}

bool Searcher::decide(std::string_view text, std::span<const LineOccurrence> occurrences) {
  Predecided& p = predecided_;
  if (text.data() < p.begin || text.data() >= p.end) return line_matches(text, occurrences);
  while (p.cursor < p.matched.size() && p.matched[p.cursor] < text.data()) ++p.cursor;
  return p.cursor < p.matched.size() && p.matched[p.cursor] == text.data();
}

namespace {

// The first byte of the first line that starts at or after data[at] (end: none).
std::size_t line_start_from(const char* data, std::size_t begin, std::size_t at, std::size_t end, char eol) {
  if (at <= begin) return begin;
  const void* nl = std::memchr(data + at - 1, eol, end - (at - 1));
  return nl != nullptr ? static_cast<std::size_t>(static_cast<const char*>(nl) - data) + 1 : end;
}

// Regexes: one pass of them all over a piece of lines decides it faster than asking line
// by line, when every line is to be asked (some regex has no factor) or most are.
bool whole_pieces_pay(const RegexLines& regex, std::size_t occurrences, std::size_t bytes) {
  return regex.every_line_is_candidate() || occurrences * 256 > bytes;
}

// A lane of the regexes by its number, as predecide()'s workers use them.
struct OnLane {
  RegexLines& regex;
  std::size_t lane;
  bool select_lines(std::string_view piece, std::vector<const char*>& starts, std::vector<const char*>& ends) {
    return regex.select_lines_on(lane, piece, starts, ends);
  }
  bool line_matches(std::string_view line, std::span<const LineOccurrence> occurrences) {
    return regex.line_matches_on(lane, line, occurrences);
  }
  void match_spans(std::string_view line, std::span<const LineOccurrence> occurrences, std::vector<MatchSpan>& out) {
    regex.match_spans_on(lane, line, occurrences, out);
  }
};

// The occurrences in data[first, last) from occurrences[index] on, relative to `first`.
std::size_t occurrences_in(std::span<const Occurrence> occurrences, std::size_t index, std::size_t first,
                           std::size_t last, std::vector<LineOccurrence>& out) {
  out.clear();
  for (; index < occurrences.size() && occurrences[index].position < last; ++index)
    out.push_back({occurrences[index].position - first, occurrences[index].pattern});
  return index;
}

// The spans of the lines select_lines() chose (ascending, from occurrences[index] on),
// each asked with its own occurrences.
template <typename Lane>
void spans_of_lines(Lane& lane, const char* data, std::span<const Occurrence> occurrences, std::size_t index,
                    const std::vector<const char*>& matched, const std::vector<const char*>& ends,
                    std::vector<LineOccurrence>& scratch, DecidedSpans& spans) {
  for (std::size_t k = 0; k < matched.size(); ++k) {
    const auto first = static_cast<std::size_t>(matched[k] - data);
    const auto last = static_cast<std::size_t>(ends[k] - data);
    while (index < occurrences.size() && occurrences[index].position < first) ++index;
    index = occurrences_in(occurrences, index, first, last, scratch);
    lane.match_spans(std::string_view(matched[k], last - first), scratch, spans.line);
    spans.add_line();
  }
}

// One worker's share of predecide(), or an engine's worker's chunk (work_ahead(), with a
// RegexLines::AheadLease): the lines starting in data[begin, end) (whole lines; end is a
// line's start or the end of the complete lines). Only lines with an occurrence can match
// unless some regex has no factor.
// With `spans`, each selected line's -o/--color spans too.
template <typename Lane>
void decide_lines(const RegexLines& regex, Lane&& lane, const char* data, std::size_t begin, std::size_t end,
                  std::span<const Occurrence> occurrences, std::vector<LineOccurrence>& scratch,
                  std::vector<const char*>& matched, std::vector<const char*>& ends, bool whole_piece, char eol,
                  DecidedSpans* spans) {
  if (spans != nullptr) spans->clear();
  std::size_t index = static_cast<std::size_t>(
      std::lower_bound(occurrences.begin(), occurrences.end(), begin,
                       [](const Occurrence& o, std::size_t at) { return o.position < at; }) -
      occurrences.begin());
  if (whole_piece && lane.select_lines(std::string_view(data + begin, end - begin), matched, ends)) {
    if (spans != nullptr) spans_of_lines(lane, data, occurrences, index, matched, ends, scratch, *spans);
    return;
  }
  if (regex.every_line_is_candidate()) {
    LineCutter<> cutter(std::string_view(data, end), 0, occurrences, scratch, begin, index, eol);
    CutLine<LineOccurrence> line;
    while (cutter.next(line))
      if (lane.line_matches(line.text, line.occurrences)) {
        matched.push_back(line.text.data());
        ends.push_back(line.text.data() + line.text.size());
        if (spans != nullptr) {
          lane.match_spans(line.text, line.occurrences, spans->line);
          spans->add_line();
        }
      }
    return;
  }
  // The floor moves past each line decided, so the searches for line starts cover the piece
  // once however many lines hold occurrences.
  for (std::size_t floor = begin; index < occurrences.size() && occurrences[index].position < end;) {
    const auto [first, last, terminated] = line_around(data, floor, occurrences[index].position, end, eol);
    index = occurrences_in(occurrences, index, first, last, scratch);
    const std::string_view text(data + first, last - first);
    if (lane.line_matches(text, scratch)) {
      matched.push_back(text.data());
      ends.push_back(data + last);
      if (spans != nullptr) {
        lane.match_spans(text, scratch, spans->line);
        spans->add_line();
      }
    }
    floor = last + 1;
  }
}

// Whether the lines [starts[k], ends[k]) are all valid UTF-8, adjacent lines checked as
// one piece (as emit_run checks a run).
bool lines_valid_utf8(const std::vector<const char*>& starts, const std::vector<const char*>& ends) {
  for (std::size_t k = 0; k < starts.size();) {
    std::size_t last = k;
    while (last + 1 < starts.size() && ends[last] + 1 == starts[last + 1]) ++last;
    if (!valid_utf8(std::string_view(starts[k], static_cast<std::size_t>(ends[last] - starts[k])))) return false;
    k = last + 1;
  }
  return true;
}

}  // namespace

void Searcher::decide_literal_lines(const char* data, std::size_t begin, std::size_t end,
                                    std::span<const Occurrence> occurrences, std::vector<LineOccurrence>& scratch,
                                    std::vector<const char*>& matched, std::vector<const char*>& ends) const {
  std::size_t index = static_cast<std::size_t>(
      std::lower_bound(occurrences.begin(), occurrences.end(), begin,
                       [](const Occurrence& o, std::size_t at) { return o.position < at; }) -
      occurrences.begin());
  const bool any = !options_.word && !options_.whole_line;  // every occurrence is valid
  for (std::size_t floor = begin; index < occurrences.size() && occurrences[index].position < end;) {
    const auto [first, last, terminated] = line_around(data, floor, occurrences[index].position, end, options_.eol);
    scratch.clear();
    for (; index < occurrences.size() && occurrences[index].position < last; ++index)
      if (!any) scratch.push_back({occurrences[index].position - first, occurrences[index].pattern});
    if (any || line_matches(std::string_view(data + first, last - first), scratch)) {
      matched.push_back(data + first);
      ends.push_back(data + last);
    }
    floor = last + 1;  // as in decide_lines
  }
}

void Searcher::predecide(const char* data, std::size_t begin, std::size_t end,
                         std::span<const Occurrence> occurrences) {
  constexpr std::size_t kMinPiece = kMinPredecided / 2;
  Predecided& p = predecided_;
  p.begin = p.end = nullptr;
  WorkerPool* pool = options_.workers;
  if (pool == nullptr || pool->width() < 2 || end - begin < kMinPredecided) return;
  RegexLines* regex = options_.regex;
  // Most lines are to be asked (some regex has no factor, or factors are everywhere): one
  // pass of every regex over the whole piece beats asking line by line.
  const bool whole_piece =
      regex != nullptr && whole_pieces_pay(*regex, occurrences.size(), end - begin) && regex->prepare_lines();
  if (regex != nullptr) regex->prepare_ahead();  // the engine's workers may decide the next chunks
  if (regex != nullptr) regex->set_lanes(pool->width());
  p.pieces.resize(pool->width());
  p.piece_ends.resize(pool->width());
  p.piece_valid.assign(pool->width(), 1);
  // Only printed lines are checked (emit_run): -c, -l, -q print none.
  const bool check_utf8 = options_.utf8 && options_.binary_files != BinaryFiles::kText && !options_.quiet;
  p.scratch.resize(pool->width());
  if (spans_ahead()) p.piece_spans.resize(pool->width());
  std::vector<std::exception_ptr> errors(pool->width());
  const std::size_t pieces = pool->split(end - begin, kMinPiece, [&](std::size_t i, std::size_t b, std::size_t e) {
    p.pieces[i].clear();
    p.piece_ends[i].clear();
    try {
      const std::size_t first = line_start_from(data, begin, begin + b, end, options_.eol);
      const std::size_t last = line_start_from(data, begin, begin + e, end, options_.eol);
      if (regex != nullptr)
        decide_lines(*regex, OnLane{*regex, i}, data, first, last, occurrences, p.scratch[i], p.pieces[i],
                     p.piece_ends[i], whole_piece, options_.eol, spans_ahead() ? &p.piece_spans[i] : nullptr);
      else decide_literal_lines(data, first, last, occurrences, p.scratch[i], p.pieces[i], p.piece_ends[i]);
      if (check_utf8) p.piece_valid[i] = lines_valid_utf8(p.pieces[i], p.piece_ends[i]);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  });
  for (const std::exception_ptr& e : errors) {
    if (!e) continue;
    try {
      std::rethrow_exception(e);
    } catch (const MatchError&) {
      // A line the matcher cannot decide: the lines are decided here one by one instead,
      // so that every line before it is delivered before the error, as grep prints them.
      return;
    }
  }
  p.all_valid_utf8 = std::all_of(p.piece_valid.begin(), p.piece_valid.begin() + pieces, [](char v) { return v != 0; });
  p.matched.clear();
  p.ends.clear();
  p.spans.clear();
  for (std::size_t i = 0; i < pieces; ++i) {
    p.matched.insert(p.matched.end(), p.pieces[i].begin(), p.pieces[i].end());
    p.ends.insert(p.ends.end(), p.piece_ends[i].begin(), p.piece_ends[i].end());
    if (spans_ahead()) p.spans.append(p.piece_spans[i]);
  }
  p.cursor = 0;
  p.begin = data + begin;
  p.end = data + end;
}

namespace {

// What work_ahead() decided of a chunk: predecide()'s answer for the lines of
// data[begin, end), made on the engine's thread that scanned it.
struct DecidedLines final : SlotNote {
  std::uint64_t seq = 0, offset = 0;  // the chunk's
  const char* begin = nullptr;        // null: nothing decided
  const char* end = nullptr;
  std::vector<const char*> matched, ends;
  bool all_valid_utf8 = false;
  std::vector<LineOccurrence> scratch;
  DecidedSpans spans;  // with spans_ahead()
};

// The chunk's complete lines as consume() finds them when the chunk's first line is the
// rest of an open one: [pos, complete_end); pos == complete_end: none.
std::pair<std::size_t, std::size_t> complete_lines(const Chunk& chunk, char eol) {
  const char* data = chunk.data;
  std::size_t pos = chunk.overlap;
  if (chunk.continues_line) {
    const void* nl = std::memchr(data + pos, eol, chunk.size - pos);
    if (nl == nullptr) return {pos, pos};
    pos = static_cast<std::size_t>(static_cast<const char*>(nl) - data) + 1;
  }
  if (pos >= chunk.size) return {pos, pos};
  return {pos, complete_end_from(chunk, pos, eol)};
}

}  // namespace

bool Searcher::works_ahead() noexcept {
  if (options_.workers == nullptr || counting_unmatched()) return false;  // nothing to decide
  // Regexes: once predecide() has readied the lanes the engine's workers lease
  // (prepare_ahead()); a database whose build is deferred stays so until lines cost it.
  return options_.regex != nullptr || !any_line_may_match();
}

// The lines that consume() would decide ahead (dense occurrences, a stretch as large as
// predecide() hands out), decided here on one thread: the engine's workers decide
// several chunks at once.
void Searcher::work_ahead(const Chunk& chunk, std::span<const Occurrence> occurrences,
                          std::unique_ptr<SlotNote>& note) const noexcept {
  try {
    if (!note) note = std::make_unique<DecidedLines>();
    auto& d = static_cast<DecidedLines&>(*note);
    d.begin = d.end = nullptr;
    d.matched.clear();
    d.ends.clear();
    const auto [pos, complete_end] = complete_lines(chunk, options_.eol);
    if (complete_end - pos < kMinPredecided) return;
    const auto first = std::lower_bound(occurrences.begin(), occurrences.end(), pos,
                                        [](const Occurrence& o, std::size_t at) { return o.position < at; });
    const auto count = static_cast<std::size_t>(occurrences.end() - first);
    if (RegexLines* regex = options_.regex) {
      // Rare candidates too: confirming them on the pipeline thread's turn held it up.
      RegexLines::AheadLease lease = regex->lease_ahead();
      if (!lease) return;
      decide_lines(*regex, lease, chunk.data, pos, complete_end, occurrences, d.scratch, d.matched, d.ends,
                   whole_pieces_pay(*regex, count, complete_end - pos), options_.eol, spans_ahead() ? &d.spans : nullptr);
    } else {
      // Sparse ones too: deciding them on the pipeline thread's turn held the delivery up.
      if (count == 0) return;
      decide_literal_lines(chunk.data, pos, complete_end, occurrences, d.scratch, d.matched, d.ends);
    }
    d.all_valid_utf8 = !options_.utf8 || options_.binary_files == BinaryFiles::kText || options_.quiet ||
                       lines_valid_utf8(d.matched, d.ends);
    d.seq = chunk.seq;
    d.offset = chunk.offset;
    d.begin = chunk.data + pos;
    d.end = chunk.data + complete_end;
  } catch (...) {
    // Decided in turn instead (predecide()).
    if (note) static_cast<DecidedLines&>(*note).begin = nullptr;
  }
}

bool Searcher::take_decided(SlotNote* note, const Chunk& chunk, std::size_t pos, std::size_t complete_end) {
  auto* d = dynamic_cast<DecidedLines*>(note);
  if (d == nullptr || d->begin != chunk.data + pos || d->end != chunk.data + complete_end || d->seq != chunk.seq ||
      d->offset != chunk.offset)
    return false;
  Predecided& p = predecided_;
  p.matched.swap(d->matched);  // the note keeps the vectors predecided_ had, for its next chunk
  p.ends.swap(d->ends);
  std::swap(p.spans, d->spans);
  p.all_valid_utf8 = d->all_valid_utf8;
  p.cursor = 0;
  p.begin = d->begin;
  p.end = d->end;
  d->begin = d->end = nullptr;
  return true;
}

Flow Searcher::consume(const Chunk& chunk, std::span<const Occurrence> occurrences) {
  return consume_noted(chunk, occurrences, nullptr);
}

Flow Searcher::consume_noted(const Chunk& chunk, std::span<const Occurrence> occurrences, SlotNote* note) {
  if (done_) return Flow::kStop;
  bytes_searched_ = std::max(bytes_searched_, chunk.offset + chunk.size);
  if (options_.binary_files != BinaryFiles::kText) binary_start_ = chunk.binary_offset;
  const char* data = chunk.data;
  std::size_t pos = chunk.overlap;
  std::size_t index = 0;

  // 1. The split line that earlier chunks left open.
  if (chunk.continues_line && open_) {
    const char* nl = static_cast<const char*>(std::memchr(data + pos, options_.eol, chunk.size - pos));
    const std::size_t end = nl != nullptr ? static_cast<std::size_t>(nl - data) : chunk.size;
    spool_.append(data + pos, end - pos);
    for (; index < occurrences.size() && occurrences[index].position < end; ++index) {
      // One that starts before the line's first byte held spans the NUL at which
      // settle_binary_records() cut it: no match in the binary part.
      if (chunk.offset + occurrences[index].position < open_offset_) continue;
      hold_open_occurrence({chunk.offset + occurrences[index].position - open_offset_, occurrences[index].pattern});
    }
    if (nl == nullptr && !chunk.last) {
      settle_binary_records(data + pos, end - pos);
      return done_ ? Flow::kStop : Flow::kContinue;
    }
    open_ = false;
    complete_open_line(nl != nullptr);
    pos = end + 1;
    if (done_) return Flow::kStop;
  }
  if (pos >= chunk.size && !chunk.line_open) {
    if (binary_start_ != kNoBinary && !in_binary_ && binary_start_ < chunk.offset + chunk.size) enter_binary();
    return done_ ? Flow::kStop : Flow::kContinue;
  }

  // 2. Complete lines: up to the last line end, or all of it when the input ends here.
  const std::size_t complete_end = complete_end_from(chunk, pos, options_.eol);
  const bool decide_ahead = options_.regex != nullptr
                                ? any_line_may_match() || index < occurrences.size()
                                : !any_line_may_match() && !counts_unmatched() &&
                                      dense_occurrences(occurrences.size() - index, complete_end - pos);
  // Decided where the chunk was scanned (work_ahead()), or now on the WorkerPool where
  // that pays; else line by line below.
  if (!in_binary_ && (binary_start_ == kNoBinary || binary_start_ >= chunk.offset + complete_end) &&
      !take_decided(note, chunk, pos, complete_end) && decide_ahead)
    predecide(data, pos, complete_end, occurrences);
  const Flow flow = consume_lines(chunk, occurrences, pos, index, complete_end);
  predecided_.begin = predecided_.end = nullptr;  // the chunk's bytes go back to the engine
  return flow;
}

Flow Searcher::consume_lines(const Chunk& chunk, std::span<const Occurrence> occurrences, std::size_t pos,
                             std::size_t index, std::size_t complete_end) {
  const char* data = chunk.data;
  const bool decided = predecided_.begin == data + pos && predecided_.end == data + complete_end;
  if (counts_unmatched() && count_unmatched(chunk, occurrences, pos, index, complete_end)) {
    // counted
  } else if (decided && options_.invert && counts_inverted() && count_decided_unmatched(chunk, pos, complete_end)) {
    while (index < occurrences.size() && occurrences[index].position < complete_end) ++index;
  } else if (decided && !options_.invert && !options_.group_separators) {
    pos = selected_lines(chunk, occurrences, pos, index, complete_end);
    if (done_) return Flow::kStop;
    while (index < occurrences.size() && occurrences[index].position < complete_end) ++index;
  } else if (fast_path()) {
    while (index < occurrences.size() && occurrences[index].position < complete_end) {
      const auto [begin, end, terminated] = line_around(data, pos, occurrences[index].position, complete_end, options_.eol);
      if (options_.line_numbers) next_number_ += count_lines(data + pos, data + begin, options_.eol);
      gather(occurrences, index, begin, end);
      line(std::string_view(data + begin, end - begin), chunk.offset + begin, line_occurrences_, terminated);
      pos = end + 1;
      if (done_) return Flow::kStop;
    }
    if (options_.line_numbers && pos < complete_end) next_number_ += count_lines(data + pos, data + complete_end, options_.eol);
    pos = std::max(pos, complete_end);
  } else if (context_path()) {
    while (index < occurrences.size() && occurrences[index].position < complete_end) {
      const auto [begin, end, terminated] = line_around(data, pos, occurrences[index].position, complete_end, options_.eol);
      pos = context_gap(chunk, pos, begin);
      if (done_) return Flow::kStop;
      gather(occurrences, index, begin, end);
      line(std::string_view(data + begin, end - begin), chunk.offset + begin, line_occurrences_, terminated);
      pos = end + 1;
      if (done_) return Flow::kStop;
    }
    pos = context_gap(chunk, std::min(pos, complete_end), complete_end);
    if (done_) return Flow::kStop;
  } else {
    LineCutter<> cutter(std::string_view(data, complete_end), chunk.offset, occurrences, line_occurrences_, pos, index,
                        options_.eol);
    CutLine<LineOccurrence> cut;
    while (cutter.next(cut)) {
      line(cut.text, cut.offset, cut.occurrences, cut.terminated);
      if (done_) return Flow::kStop;
    }
    index = cutter.index();
  }

  // 3. A line that goes on in the next chunk.
  if (chunk.line_open) {
    open_ = true;
    open_offset_ = chunk.offset + complete_end;
    spool_.clear();
    spool_.append(data + complete_end, chunk.size - complete_end);
    open_occurrences_.clear();
    ++open_generation_;
    open_settled_ = false;
    for (; index < occurrences.size(); ++index)
      hold_open_occurrence({occurrences[index].position - complete_end, occurrences[index].pattern});
    settle_binary_records(data + complete_end, chunk.size - complete_end);
  } else if (binary_start_ != kNoBinary && !in_binary_ && binary_start_ < chunk.offset + chunk.size) {
    enter_binary();
  }
  return done_ ? Flow::kStop : Flow::kContinue;
}

// The complete lines of data[pos, complete_end), decided by predecide(): without -v or
// context only the selected ones matter, so only they are visited (a count alone needs
// not even that). Returns complete_end; done_ when the input is decided.
std::size_t Searcher::selected_lines(const Chunk& chunk, std::span<const Occurrence> occurrences, std::size_t pos,
                                     std::size_t& index, std::size_t complete_end) {
  const char* data = chunk.data;
  const std::vector<const char*>& matched = predecided_.matched;
  const std::vector<const char*>& ends = predecided_.ends;
  if (quiet_ && !stop_on_first_ && options_.max_count - selected_ > matched.size()) {
    if (options_.line_numbers) next_number_ += count_lines(data + pos, data + complete_end, options_.eol);
    if (!matched.empty()) {
      const char* last = matched.back();
      const void* nl = std::memchr(last, options_.eol, static_cast<std::size_t>(data + complete_end - last));
      after_last_selected_ =
          chunk.offset + (nl != nullptr ? static_cast<std::size_t>(static_cast<const char*>(nl) - data) + 1 : complete_end);
      selected_ += matched.size();
      used_ = used_here_ = true;
    }
    return complete_end;
  }
  // A verbatim sink takes runs of adjacent selected lines as they lie in the chunk.
  const bool runs = sink_.verbatim() && !quiet_ && !options_.spans && !options_.pattern_ids;
  Run run{chunk, data};
  run.known_valid_utf8 = predecided_.all_valid_utf8;
  for (std::size_t i = 0; i < matched.size(); ++i) {
    const std::size_t begin = static_cast<std::size_t>(matched[i] - data);
    const std::size_t end = static_cast<std::size_t>(ends[i] - data);
    const char* nl = end < complete_end ? data + end : nullptr;  // the workers stopped at '\n' or the end
    if (options_.line_numbers) next_number_ += count_lines(data + pos, data + begin, options_.eol);
    pos = end + 1;
    if (runs && nl != nullptr && selected_ + run.count + 1 < options_.max_count) {
      if (run.count > 0 && begin != run.end) emit_run(run);
      if (run.count == 0) run.begin = begin;
      run.end = end + 1;
      ++run.count;
      continue;
    }
    if (run.count > 0) emit_run(run);
    while (index < occurrences.size() && occurrences[index].position < begin) ++index;
    gather(occurrences, index, begin, end);
    line(std::string_view(data + begin, end - begin), chunk.offset + begin, line_occurrences_, nl != nullptr);
    if (done_) return complete_end;
  }
  if (run.count > 0) emit_run(run);
  if (options_.line_numbers && pos < complete_end) next_number_ += count_lines(data + pos, data + complete_end, options_.eol);
  return complete_end;
}

// Adjacent selected lines to a verbatim sink in one piece. In a UTF-8 locale a piece that
// is not valid UTF-8 goes line by line (grep hides such lines: print_line_head).
void Searcher::emit_run(Run& run) {
  const std::string_view bytes(run.data + run.begin, run.end - run.begin);
  if (options_.utf8 && options_.binary_files != BinaryFiles::kText && !run.known_valid_utf8 && !valid_utf8(bytes)) {
    for (std::size_t at = run.begin; at < run.end && !done_;) {
      const std::size_t end = static_cast<std::size_t>(
          static_cast<const char*>(std::memchr(run.data + at, options_.eol, run.end - at)) - run.data);
      line(std::string_view(run.data + at, end - at), run.chunk.offset + at, {}, true);
      at = end + 1;
    }
  } else {
    if (sink_.matched_lines(bytes, run.count) == Flow::kStop) done_ = true;
    selected_ += run.count;
    after_last_selected_ = run.chunk.offset + run.end;
    used_ = used_here_ = true;
  }
  run.count = 0;
}

// An occurrence in the line that goes on past the chunk. Where only which patterns occur
// matters (a regex's candidates; a fixed string without -w, -x or spans), before any NUL
// (whose records would be cut by position), one per pattern is held: a 2 GB line of "a"
// held 64 million occurrences of "a" (1.5 GB for 64 MB), where one decides it.
void Searcher::hold_open_occurrence(LineOccurrence o) {
  const bool positions_matter = binary_start_ != kNoBinary ||
                                (options_.regex == nullptr && (options_.word || options_.whole_line ||
                                                               options_.spans || options_.context_spans));
  if (!positions_matter) {
    if (o.pattern >= open_seen_.size()) open_seen_.resize(std::max<std::size_t>(table_.unique_count(), o.pattern + 1), 0);
    if (open_seen_[o.pattern] == open_generation_) return;
    open_seen_[o.pattern] = open_generation_;
  }
  open_occurrences_.push_back(o);
}

// The pieces of a split line each reported their occurrences in position order, but a
// piece's overlap repeats the end of the previous one: sort them as one line's.
void Searcher::complete_open_line(bool terminated) {
  if (open_settled_ && spool_.size() == 0 && !terminated) {
    // The input ended with the NUL at which the line was last cut: that NUL ended the
    // input, not a record before nothing (binary_record's rule). The line still counts.
    ++next_number_;
  } else {
    std::sort(open_occurrences_.begin(), open_occurrences_.end(),
              [&](const LineOccurrence& a, const LineOccurrence& b) { return table_.before(a, b); });
    line(spool_.view(), open_offset_, open_occurrences_, terminated);
  }
  spool_.clear();
  open_occurrences_.clear();
  open_settled_ = false;
}

// In the binary part NUL bytes end records, so a split line there need not be held whole:
// the records that end in what has arrived are searched now (as line() would search them
// once the line ends), and only the bytes after the last NUL stay in the spool, at most
// the piece just appended. A file of NUL bytes, one line of 10 GB, is then searched in
// bounded memory and time instead of being spooled to a temporary file of its size and
// mapped back. Line numbers are unaffected: the line still counts once, when it ends.
//
// `piece` is what was just appended to the spool. Only it can hold a NUL: the chunker
// sees every byte until the first NUL, so no NUL came before binary_start_ was known, and
// every piece since was settled as it came. So a long run without NULs costs one look at
// each piece, and the spool is read back only when there is something to cut.
void Searcher::settle_binary_records(const char* piece, std::size_t size) {
  if (done_ || binary_start_ == kNoBinary || open_offset_ + spool_.size() < binary_start_) return;
  if (!in_binary_) {
    // The line reaches the binary part, so line() would enter it when the line ends;
    // every line before this one has been searched already.
    enter_binary();
    if (done_) return;
  }
  const void* nul_in_piece = size > 0 ? memrchr(piece, '\0', size) : nullptr;
  if (nul_in_piece == nullptr) return;
  const std::size_t last_nul =
      spool_.size() - size + static_cast<std::size_t>(static_cast<const char*>(nul_in_piece) - piece);
  const std::string_view held = spool_.view();
  std::sort(open_occurrences_.begin(), open_occurrences_.end(),
            [&](const LineOccurrence& a, const LineOccurrence& b) { return table_.before(a, b); });
  binary_record(held.substr(0, last_nul), open_offset_, open_occurrences_, true);
  if (done_) return;
  const std::size_t cut = last_nul + 1;
  const std::string tail(held.substr(cut));
  spool_.clear();
  spool_.append(tail.data(), tail.size());
  open_offset_ += cut;
  std::size_t kept = 0;
  for (const LineOccurrence& o : open_occurrences_) {
    if (o.position >= cut) open_occurrences_[kept++] = {o.position - cut, o.pattern};
  }
  open_occurrences_.resize(kept);
  open_settled_ = true;
}

bool Searcher::needs_locations() const noexcept {
  // -I: grep drops a binary input before it searches the buffer with the first NUL, so an
  // occurrence decides only when it lies in a line before binary mode starts.
  // A regex's factor is only a candidate: its line must still be confirmed.
  return options_.regex != nullptr || !(options_.stop_on_first && !options_.invert && !options_.word && !options_.whole_line &&
           !table_.has_empty_pattern() && !table_.has_nul_byte() &&
           options_.binary_files != BinaryFiles::kWithoutMatch);
}

bool Searcher::one_occurrence_per_line() const noexcept {
  return options_.regex == nullptr && !options_.word && !options_.whole_line && !options_.spans &&
         !options_.context_spans && !options_.pattern_ids && !options_.only_matching &&
         !table_.has_empty_pattern() && !table_.has_nul_byte();
}

Flow Searcher::consume_count(const Chunk& chunk, std::uint64_t occurrences) {
  if (done_) return Flow::kStop;
  bytes_searched_ = std::max(bytes_searched_, chunk.offset + chunk.size);
  if (occurrences > 0) {
    // Every occurrence lies in some line, and that line is selected.
    ++selected_;
    done_ = true;
  }
  return done_ ? Flow::kStop : Flow::kContinue;
}

InputSummary Searcher::finish_input() {
  if (open_ && !done_) complete_open_line(false);
  if (!done_ && !in_binary_) end_run();
  open_ = false;
  spool_.clear();
  open_occurrences_.clear();
  InputSummary summary;
  summary.selected_lines = selected_;
  if (selected_ >= options_.max_count && !stop_on_first_) summary.after_last_selected = after_last_selected_;
  summary.binary_matched = binary_matched_;
  summary.bytes_searched = bytes_searched_;
  summary.name = name_;
  sink_.finish(summary);
  return summary;
}

}  // namespace gpufilter
