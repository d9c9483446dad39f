// A Filter::Outcome's failures as text, field for field, for tests that compare two
// filters' answers line by line; and what those tests feed them.
#pragma once

#include <cstddef>
#include <fstream>
#include <string>
#include <vector>

#include "gpufilter/fail2ban/filter.hpp"

namespace gpufilter::fail2ban {

inline std::string failures_text(const Filter::Outcome& o) {
  std::string s;
  for (const Filter::Failure& f : o.failures) {
    s += " [" + std::to_string(f.failregex) + " " + f.id + " " + f.host + " u=" + f.user +
         " n=" + std::to_string(f.attempts) + " t=" + (f.time ? std::to_string(*f.time) : "none") +
         (f.nofail ? " nofail" : "") + (f.pending ? " pending" : "");
    for (const auto& [k, v] : f.fields) s += " " + k + "=" + v;
    if (f.users)
      for (const auto& u : *f.users) s += " user:" + u;
    s += "]";
  }
  return s;
}

// Whether a failregex matched, whether an ignoreregex ignored the line, and every failure.
inline std::string text_of(const Filter::Outcome& o) {
  return std::string(o.matched ? "m" : "-") + (o.ignored() ? "i" : "-") + failures_text(o);
}

// Debian's fail2ban's annotated sample logs.
inline const std::string kSampleLogs = "/usr/lib/python3/dist-packages/fail2ban/tests/files/logs/";

// A log's lines without their ends ('\r' too), its comment lines left out.
inline std::vector<std::string> read_log_lines(const std::string& path) {
  std::vector<std::string> lines;
  std::ifstream in(path);
  for (std::string l; std::getline(in, l);) {
    if (!l.empty() && l.back() == '\r') l.pop_back();
    if (l.rfind('#', 0) != 0) lines.push_back(l);
  }
  return lines;
}

// The offsets of every literal of the filter in `line` (what the scan finds).
inline std::vector<std::size_t> literal_offsets(const Filter& f, const std::string& line) {
  std::vector<std::size_t> at;
  if (!f.literals()) return at;
  for (const std::string& l : *f.literals())
    for (std::size_t p = line.find(l); p != std::string::npos; p = line.find(l, p + 1)) at.push_back(p);
  return at;
}

}  // namespace gpufilter::fail2ban
