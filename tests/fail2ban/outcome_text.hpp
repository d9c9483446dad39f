// A Filter::Outcome's failures as text, field for field, for tests that compare two
// filters' answers line by line.
#pragma once

#include <string>

#include "gpufilter/fail2ban/filter.hpp"

namespace gpufilter::fail2ban {

inline std::string failures_text(const Filter::Outcome& o) {
  std::string s;
  for (const Filter::Failure& f : o.failures) {
    s += " [" + std::to_string(f.failregex) + " " + f.id + " " + f.host + " u=" + f.user +
         " n=" + std::to_string(f.attempts) + " t=" + (f.time ? std::to_string(*f.time) : "none") +
         (f.nofail ? " nofail" : "") + (f.pending ? " pending" : "");
    for (const auto& [k, v] : f.fields) s += " " + k + "=" + v;
    for (const auto& u : f.users) s += " user:" + u;
    s += "]";
  }
  return s;
}

}  // namespace gpufilter::fail2ban
