// Pattern sets built from the real logs of ../shared/corpus/loghub.
#pragma once

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace gpufilter::test {

inline const std::vector<std::string>& loghub_logs() {
  static const std::vector<std::string> logs = {
      "Android", "Apache",  "BGL",     "HDFS",      "HPC",   "Hadoop",      "HealthApp", "Linux",
      "Mac",     "OpenSSH", "OpenStack", "Proxifier", "Spark", "Thunderbird", "Windows",   "Zookeeper",
  };
  return logs;
}

// The fields of one CSV record per row (RFC 4180: quotes, doubled quotes, CRLF or LF).
inline std::vector<std::vector<std::string>> parse_csv(std::string_view text) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field.push_back('"');
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field.push_back(c);
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      row.push_back(std::move(field));
      field.clear();
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      row.push_back(std::move(field));
      field.clear();
      rows.push_back(std::move(row));
      row.clear();
    } else {
      field.push_back(c);
    }
  }
  if (!field.empty() || !row.empty()) {
    row.push_back(std::move(field));
    rows.push_back(std::move(row));
  }
  return rows;
}

inline std::string trim(std::string s) {
  const auto not_space = [](char c) { return c != ' ' && c != '\t' && c != '\r'; };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
  s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
  return s;
}

// EventTemplate fragments between "<*>" placeholders, trimmed, at least `min_length` bytes,
// without duplicates, in first-seen order.
inline std::vector<std::string> template_fragments(std::string_view csv, std::size_t min_length) {
  const auto rows = parse_csv(csv);
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (std::size_t r = 1; r < rows.size(); ++r) {
    if (rows[r].empty()) continue;
    const std::string& templ = rows[r].back();
    std::size_t start = 0;
    for (;;) {
      const std::size_t star = templ.find("<*>", start);
      std::string piece = trim(templ.substr(start, star == std::string::npos ? std::string::npos : star - start));
      if (piece.size() >= min_length && seen.insert(piece).second) out.push_back(piece);
      if (star == std::string::npos) break;
      start = star + 3;
    }
  }
  return out;
}

inline std::vector<std::string> split_lines(std::string_view text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) nl = text.size();
    std::string line(text.substr(start, nl - start));
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
    start = nl + 1;
  }
  return lines;
}

inline std::vector<std::string> words(std::string_view line) {
  std::vector<std::string> out;
  std::string w;
  for (char c : line) {
    if (c == ' ' || c == '\t') {
      if (!w.empty()) out.push_back(std::move(w));
      w.clear();
    } else {
      w.push_back(c);
    }
  }
  if (!w.empty()) out.push_back(std::move(w));
  return out;
}

}  // namespace gpufilter::test
