#include "gpufilter/sinks/json_printer.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>

#include "gpufilter/sinks/json.hpp"

namespace gpufilter {
namespace {

void append_number(std::string& out, std::uint64_t value) {
  char digits[24];
  const auto r = std::to_chars(digits, digits + sizeof digits, value);
  out.append(digits, static_cast<std::size_t>(r.ptr - digits));
}

void append_field(std::string& out, std::string_view name, std::uint64_t value) {
  out += '"';
  out += name;
  out += "\":";
  append_number(out, value);
}

// rg's Duration: secs, nanos and "human" seconds with six decimals. `sorted`: the keys in
// the order rg's summary has them (it writes that record through a sorted map).
void append_elapsed(std::string& out, std::chrono::nanoseconds elapsed, bool sorted) {
  const std::uint64_t total = elapsed.count() > 0 ? static_cast<std::uint64_t>(elapsed.count()) : 0;
  char human[40];
  std::snprintf(human, sizeof human, "%.6fs", static_cast<double>(total) / 1e9);
  std::string human_field = "\"human\":\"";
  human_field += human;
  human_field += '"';
  out += '{';
  if (sorted) {
    out += human_field + ',';
    append_field(out, "nanos", total % 1'000'000'000);
    out += ',';
    append_field(out, "secs", total / 1'000'000'000);
  } else {
    append_field(out, "secs", total / 1'000'000'000);
    out += ',';
    append_field(out, "nanos", total % 1'000'000'000);
    out += ',' + human_field;
  }
  out += '}';
}

// rg's Stats, in the order of its end record, or sorted as in its summary.
void append_stats(std::string& out, const JsonPrinter::Stats& s, bool sorted) {
  using Field = std::pair<std::string_view, std::uint64_t>;
  const Field searches{"searches", s.searches}, with_match{"searches_with_match", s.searches_with_match},
      searched{"bytes_searched", s.bytes_searched}, printed{"bytes_printed", s.bytes_printed},
      lines{"matched_lines", s.matched_lines}, matches{"matches", s.matches}, elapsed{"elapsed", 0};
  const std::array<const Field*, 7> in_struct{&elapsed, &searches, &with_match, &searched, &printed, &lines, &matches};
  const std::array<const Field*, 7> in_keys{&printed, &searched, &elapsed, &lines, &matches, &searches, &with_match};
  out += '{';
  for (const Field* f : sorted ? in_keys : in_struct) {
    if (out.back() != '{') out += ',';
    if (f == &elapsed) {
      out += "\"elapsed\":";
      append_elapsed(out, s.elapsed, sorted);
    } else {
      append_field(out, f->first, f->second);
    }
  }
  out += '}';
}

}  // namespace

JsonPrinter::Stats& JsonPrinter::Stats::operator+=(const Stats& other) {
  elapsed += other.elapsed;
  searches += other.searches;
  searches_with_match += other.searches_with_match;
  bytes_searched += other.bytes_searched;
  bytes_printed += other.bytes_printed;
  matched_lines += other.matched_lines;
  matches += other.matches;
  return *this;
}

JsonPrinter::JsonPrinter(Output& out, std::vector<Pattern> given, Options options) : out_(out), options_(options) {
  pattern_json_.reserve(given.size());
  for (const Pattern& p : given) {
    std::string object;  // the empty pattern is never listed: it occurs everywhere
    if (!p.text.empty()) json::append_pattern(object, p.id, p.text);
    pattern_json_.push_back(std::move(object));
    pattern_id_.push_back(p.id);
  }
}

SinkNeeds JsonPrinter::needs() const {
  SinkNeeds needs;
  needs.spans = true;
  needs.context_spans = true;
  needs.pattern_ids = true;
  needs.line_numbers = true;
  needs.any_bytes = true;
  return needs;
}

const std::string& JsonPrinter::path_json(std::string_view source) {
  if (source != path_of_ || path_json_.empty()) {
    path_of_ = source;
    path_json_.clear();
    json::append_data(path_json_, source);
  }
  return path_json_;
}

void JsonPrinter::begin(const InputInfo& input) {
  name_ = input.name;
  begun_ = false;
  started_ = Clock::now();
  input_ = Stats{};
  first_nul_.reset();
}

// Streams have no input of their own to count in: their records count in the totals.
JsonPrinter::Stats& JsonPrinter::counting() { return options_.per_input ? input_ : total_; }

void JsonPrinter::write_line(const std::string& record) {
  out_.write(record);
  out_.end_line();
  counting().bytes_printed += record.size() + 1;
}

void JsonPrinter::write_begin() {
  std::string head = "{\"type\":\"begin\",\"data\":{\"path\":";
  head += path_json(name_);
  head += "}}";
  write_line(head);
  begun_ = true;
}

void JsonPrinter::line_record(const LineMatch& line, std::string_view type, std::string_view text,
                              std::uint64_t offset, std::span<const MatchSpan> spans, bool whole_line) {
  if (options_.per_input && !begun_) write_begin();
  if (!first_nul_) {
    if (const std::size_t nul = text.find('\0'); nul != std::string_view::npos) first_nul_ = offset + nul;
  }
  std::string& b = buffer_;
  b.clear();
  b += "{\"type\":\"";
  b += type;
  b += "\",\"data\":{\"path\":";
  b += path_json(line.source);
  b += ",\"lines\":";
  if (whole_line && line.terminated) {
    lines_.assign(text);
    lines_ += options_.eol;
    json::append_data(b, lines_);
  } else {
    json::append_data(b, text);
  }
  b += ',';
  append_field(b, "line_number", line.number);
  b += ',';
  append_field(b, "absolute_offset", offset);
  b += ",\"submatches\":[";
  for (std::size_t i = 0; i < spans.size(); ++i) {
    if (i > 0) b += ',';
    b += "{\"match\":";
    json::append_data(b, text.substr(spans[i].begin, spans[i].end - spans[i].begin));
    b += ',';
    append_field(b, "start", spans[i].begin);
    b += ',';
    append_field(b, "end", spans[i].end);
    b += '}';
  }
  b += "],\"patterns\":[";
  // In the given patterns' order, each once: ids that name one pattern (its case variants)
  // are listed as one.
  listed_.clear();
  for (const std::uint32_t id : line.patterns)
    if (!pattern_json_[id].empty()) listed_.push_back(id);
  std::sort(listed_.begin(), listed_.end(), [&](std::uint32_t x, std::uint32_t y) { return pattern_id_[x] < pattern_id_[y]; });
  for (std::size_t i = 0; i < listed_.size(); ++i) {
    if (i > 0 && pattern_id_[listed_[i]] == pattern_id_[listed_[i - 1]]) continue;
    if (i > 0) b += ',';
    b += pattern_json_[listed_[i]];
  }
  b += "]}}";
  write_line(b);
}

Flow JsonPrinter::matched(const LineMatch& line) {
  Stats& stats = counting();
  ++stats.matched_lines;
  stats.matches += line.spans.size();
  if (options_.count) return Flow::kContinue;
  if (!options_.only_matching) {
    line_record(line, "match", line.line, line.offset, line.spans, true);
    return Flow::kContinue;
  }
  // -o: each part is a record of its own, as grep -o prints each on a line of its own.
  for (const MatchSpan& s : line.spans) {
    const MatchSpan whole{0, s.end - s.begin};
    line_record(line, "match", line.line.substr(s.begin, s.end - s.begin), line.offset + s.begin,
                std::span<const MatchSpan>(&whole, 1), false);
  }
  return Flow::kContinue;
}

void JsonPrinter::context(const LineMatch& line) {
  // grep -o prints no context lines, nor does -c.
  if (options_.count || options_.only_matching) return;
  line_record(line, "context", line.line, line.offset, line.spans, true);
}

void JsonPrinter::finish(const InputSummary& summary) {
  Stats& stats = counting();
  ++stats.searches;
  if (summary.selected_lines > 0) ++stats.searches_with_match;
  stats.bytes_searched += summary.bytes_searched;
  if (!options_.per_input) return;
  input_.elapsed = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - started_);
  if (options_.count && !begun_) write_begin();
  if (begun_) {
    std::string& b = buffer_;
    b.clear();
    b += "{\"type\":\"end\",\"data\":{\"path\":";
    b += path_json(name_);
    b += ",\"binary_offset\":";
    if (first_nul_) append_number(b, *first_nul_);
    else b += "null";
    b += ",\"stats\":";
    append_stats(b, input_, false);
    b += "}}";
    out_.write(b);
    out_.end_line();
  }
  total_ += input_;
}

void JsonPrinter::summary(std::chrono::nanoseconds elapsed_total) {
  std::string& b = buffer_;
  b.clear();
  b += "{\"data\":{\"elapsed_total\":";
  append_elapsed(b, elapsed_total, true);
  b += ",\"stats\":";
  append_stats(b, total_, true);
  b += "},\"type\":\"summary\"}";
  out_.write(b);
  out_.end_line();
}

void JsonPrinter::flush() { out_.flush(); }

}  // namespace gpufilter
