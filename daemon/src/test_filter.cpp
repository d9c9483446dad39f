// gpufilterd --test-filter FILTER LOG: what fail2ban-regex prints for a filter and a log,
// from gpufilter::fail2ban, so that a fail2ban user can set the two side by side.
//   FILTER   a filter name (sshd), with options (sshd[mode=aggressive]), or a .conf path
//   LOG      a file, or - for standard input
//   --fail2ban-dir DIR   where filter.d/ is (/etc/fail2ban)
//   --out ip|id|user|msg|json   one line per failure instead of the summary: its address
//            (as fail2ban-regex -o ip -r), fail2ban's id, the user, the line, or a JSON
//            object with all of them, the line number, the time and the failregex's index
#include "test_filter.hpp"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpufilter/fail2ban/filter.hpp"

namespace gpufilter::daemon {
namespace {

struct Args {
  std::string filter;
  std::string log;
  fail2ban::FilterOptions options;
  std::string out;  // "": the summary
};

int refuse(const std::string& why) {
  std::fprintf(stderr,
               "gpufilterd: %s\nUsage: gpufilterd --test-filter FILTER LOG [--fail2ban-dir DIR] "
               "[--out ip|id|user|msg|json]\n",
               why.c_str());
  return 2;
}

// "sshd[mode=aggressive, logtype=short]": the name and its options, as a jail names them.
void split_options(Args& a) {
  const std::size_t open = a.filter.find('[');
  if (open == std::string::npos || a.filter.back() != ']') return;
  std::string list = a.filter.substr(open + 1, a.filter.size() - open - 2);
  a.filter.resize(open);
  std::size_t at = 0;
  while (at <= list.size()) {
    std::size_t comma = list.find(',', at);
    if (comma == std::string::npos) comma = list.size();
    const std::string item = list.substr(at, comma - at);
    const std::size_t eq = item.find('=');
    const auto trim = [](std::string s) {
      s.erase(0, s.find_first_not_of(" \t\"'"));
      s.erase(s.find_last_not_of(" \t\"'") + 1);
      return s;
    };
    if (eq != std::string::npos) a.options.values[trim(item.substr(0, eq))] = trim(item.substr(eq + 1));
    at = comma + 1;
  }
}

std::optional<Args> parse(int argc, char** argv, int first, std::string& why) {
  Args a;
  std::vector<std::string> positional;
  for (int i = first; i < argc; ++i) {
    const std::string s = argv[i];
    if (s == "--fail2ban-dir" || s == "--out") {
      if (i + 1 >= argc) {
        why = "option '" + s + "' requires an argument";
        return std::nullopt;
      }
      (s == "--out" ? a.out : a.options.config_dir) = argv[++i];
    } else {
      positional.push_back(s);
    }
  }
  if (positional.size() != 2) {
    why = "--test-filter takes a filter and a log";
    return std::nullopt;
  }
  if (!a.out.empty() && a.out != "ip" && a.out != "id" && a.out != "user" && a.out != "msg" && a.out != "json") {
    why = "--out: '" + a.out + "' is none of ip, id, user, msg, json";
    return std::nullopt;
  }
  a.filter = positional[0];
  a.log = positional[1];
  split_options(a);
  return a;
}

std::string field(const fail2ban::Filter::Failure& f, const std::string& name) {
  const auto it = f.fields.find(name);
  return it == f.fields.end() ? std::string() : it->second;
}

// fail2ban-regex -o ip: the address when the failure has one, else its id.
std::string address(const fail2ban::Filter::Failure& f) {
  const std::string ip = field(f, "ip");
  return ip.empty() ? f.id : ip;
}

// fail2ban-regex -o user: Python's None for a failure without one.
std::string user_of(const fail2ban::Filter::Failure& f) {
  const auto it = f.fields.find("user");
  if (it != f.fields.end()) return it->second;
  return f.user.empty() ? "None" : f.user;
}

void print_failure(const Args& a, const fail2ban::Filter::Failure& f, std::size_t number, const std::string& line) {
  if (a.out == "ip") std::cout << address(f) << '\n';
  else if (a.out == "id") std::cout << f.id << '\n';
  else if (a.out == "user") std::cout << user_of(f) << '\n';
  else if (a.out == "msg") std::cout << line << '\n';
  else {
    nlohmann::json j{{"line", number}, {"id", f.id}, {"ip", address(f)}, {"failregex", f.failregex + 1}, {"msg", line}};
    if (!f.user.empty()) j["user"] = f.user;
    if (f.time) j["time"] = *f.time;
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  }
}

struct Totals {
  std::size_t lines = 0, matched = 0, ignored = 0, missed = 0;
  std::vector<std::size_t> hits;  // per failregex
};

void print_summary(const fail2ban::Filter& filter, const Totals& t) {
  std::cout << "Failregex: " << t.matched << " total\n|-  #) [# of hits] regular expression\n";
  for (std::size_t i = 0; i < filter.failregex().size(); ++i)
    if (t.hits[i] > 0)  // as fail2ban-regex lists them (without -v)
      std::cout << "|  " << i + 1 << ") [" << t.hits[i] << "] " << filter.failregex()[i] << '\n';
  std::cout << "`-\n\nIgnoreregex: " << t.ignored << " total\n\nLines: " << t.lines << " lines, " << t.ignored
            << " ignored, " << t.matched << " matched, " << t.missed << " missed\n";
}

// A line as fail2ban-regex counts it: ignored (an ignoreregex, or any failregex match
// marked <F-NOFAIL>), matched (a failure), or missed; every failregex match is a hit.
void count(const fail2ban::Filter::Outcome& o, Totals& t) {
  bool failed = false, nofail = false;
  for (const auto& f : o.failures) {
    if (f.failregex < t.hits.size()) ++t.hits[f.failregex];
    (f.nofail ? nofail : failed) = true;
  }
  if (o.ignored || nofail) ++t.ignored;
  else if (failed) ++t.matched;
  else ++t.missed;
}

// As fail2ban reads a log: a last line without its newline is still being written, and
// is not read.
int scan(const Args& a, fail2ban::Filter& filter, std::istream& in) {
  Totals t;
  t.hits.assign(filter.failregex().size(), 0);
  std::string line;
  while (std::getline(in, line)) {
    if (in.eof()) {
      std::fprintf(stderr, "gpufilterd: %s: the last line has no newline; not read (as fail2ban does)\n",
                   a.log.c_str());
      break;
    }
    // fail2ban-regex's reading: line ends stripped, comments and empty lines skipped.
    while (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    ++t.lines;
    const fail2ban::Filter::Outcome o = filter.line(line);
    if (a.out.empty()) {
      count(o, t);
      continue;
    }
    for (const auto& f : o.failures)
      if (!f.nofail) print_failure(a, f, t.lines, line);
  }
  if (a.out.empty()) print_summary(filter, t);
  std::cout.flush();
  return std::cout ? 0 : 2;
}

}  // namespace

int test_filter(int argc, char** argv, int first) {
  std::string why;
  const std::optional<Args> a = parse(argc, argv, first, why);
  if (!a) return refuse(why);
  try {
    // The summary counts every failregex that matches a line (fail2ban-regex's summary
    // does); --out reports each failure once, from the first that matches (its -o).
    fail2ban::FilterOptions options = a->options;
    options.check_all_regex = a->out.empty();
    fail2ban::Filter filter = fail2ban::Filter::load(a->filter, options);
    if (a->log == "-") return scan(*a, filter, std::cin);
    std::ifstream in(a->log, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "gpufilterd: %s: cannot be read\n", a->log.c_str());
      return 2;
    }
    return scan(*a, filter, in);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpufilterd: %s\n", e.what());
    return 2;
  }
}

}  // namespace gpufilter::daemon
