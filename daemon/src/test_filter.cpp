// gpufilterd --test-filter FILTER LOG [IGNOREREGEX]: what fail2ban-regex prints for a
// filter and a log, from gpufilter::fail2ban, so that a fail2ban user can set the two side
// by side.
//   FILTER   a filter name (sshd), with options (sshd[mode=aggressive]), or a .conf path;
//            or, as fail2ban-regex takes it, a failregex ('Failed .* from <HOST>')
//   LOG      a file, or - for standard input; or, as fail2ban-regex takes it, the log
//            lines themselves (a LOG that is no file and holds a space or a tab), or the
//            systemd journal: systemd-journal[journalfiles=..., journalpath=...], read
//            through journalctl with the filter's journalmatch, each entry's time its date
//            (LOG FILTER, fail2ban-regex's order, is taken too: fail2ban_regex_order())
//   IGNOREREGEX   an ignoreregex, beside the filter's own
//   --fail2ban-dir DIR (-c/--config DIR, as fail2ban-regex's)   where filter.d/ is (/etc/fail2ban)
//   -d/--datepattern PATTERN, -L/--maxlines N   as fail2ban-regex's, over the filter's
//   -m/--journalmatch MATCH   as fail2ban-regex's, over the filter's (a systemd-journal LOG)
//   -o/--out ip|id|fid|user|msg|json|KEY   one line per failure instead of the summary: its
//            address (as fail2ban-regex -o ip -r), fail2ban's id, the user, its matches (every
//            line fail2ban keeps for it, as -o msg prints them), a JSON object with all of
//            them, the line number, the time and the failregex's index, or the value of any
//            other key of fail2ban's failure dict (port, ip4, mlfid; None where it has none)
//   -r/--raw   taken and ignored: no name is ever looked up. Long options also as --opt=value;
//            after --, every argument is FILTER, LOG or IGNOREREGEX.
#include "test_filter.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpufilter/core/workers.hpp"
#include "gpufilter/fail2ban/filter.hpp"
#include "gpufilter/fail2ban/jails.hpp"
#include "gpufilter/fail2ban/pyregex.hpp"
#include "gpufilter/fail2ban/reader.hpp"
#include "gpufilter/core/errors.hpp"
#include "gpufilter/sources/file_source.hpp"
#include "gpufilter/sources/journal_reader.hpp"
#include "fail2ban_jails.hpp"

namespace gpufilter::daemon {
namespace {

// A source's bytes as a stream, 64 KiB a read. std::cin, synchronised with stdio and tied
// to std::cout, takes a character at a time and flushes the output before each line: a 64
// MB log took 3.9 s from a pipe against 0.64 s from the file. `failed` keeps what
// stopped a read (what() names the input).
class SourceBuffer : public std::streambuf {
 public:
  explicit SourceBuffer(Source& source) : source_(source) {}
  std::optional<SourceError> failed;

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    std::size_t n = 0;
    try {
      n = source_.read(std::span<char>(data_.data(), data_.size()));
    } catch (const SourceError& e) {
      failed = e;
    }
    if (n == 0) return traits_type::eof();
    setg(data_.data(), data_.data(), data_.data() + n);
    return traits_type::to_int_type(*gptr());
  }

 private:
  Source& source_;
  std::array<char, 1 << 16> data_{};
};

struct Args {
  std::string filter;
  bool filter_is_regex = false;  // FILTER is a failregex, not a filter's name or path
  std::string log;
  std::optional<std::string> ignore_regex;
  fail2ban::FilterOptions options;
  std::string out;  // "": the summary
  // fail2ban-regex's -d/--datepattern and -L/--maxlines: they win over the filter's.
  std::optional<std::string> datepattern;
  std::optional<std::string> journalmatch;  // fail2ban-regex's -m/--journalmatch
  std::optional<int> maxlines;
  // fail2ban-regex's --print-all-matched, --print-all-missed, --print-all-ignored,
  // --print-no-missed and --print-no-ignored.
  bool all_matched = false, all_missed = false, all_ignored = false, no_missed = false, no_ignored = false;
};

int refuse(const std::string& why) {
  std::fprintf(stderr,
               "gpufilterd: %s\nUsage: gpufilterd --test-filter FILTER LOG [IGNOREREGEX] [--fail2ban-dir DIR] [-d PATTERN] [-L N] [-m MATCH] "
               "[-o|--out ip|id|user|msg|json|KEY] [--print-all-matched|missed|ignored] [--print-no-missed|ignored]\n",
               why.c_str());
  return 2;
}

// "sshd[mode=aggressive, logtype=short]": the name and its options, read as fail2ban reads
// a jail's `filter` (quoted values may hold commas; a malformed list is refused, as
// fail2ban-regex refuses it).
bool split_options(Args& a, std::string& why) {
  try {
    auto [name, options] = fail2ban::extract_options(a.filter);
    const std::size_t last = name.find_last_not_of(" \t");
    a.filter = name.substr(0, last == std::string::npos ? 0 : last + 1);
    a.options.values = std::move(options);
    return true;
  } catch (const fail2ban::Fail2banError& e) {
    why = std::string("wrong filter name or options: ") + e.what();
    return false;
  }
}

// fail2ban-regex's test of its FILTER argument: a name, a path or a name with options
// (`^/{0,3}[\w/_\-.]+(?:\[.*\])?$`); anything else is a failregex.
bool names_a_filter(const std::string& value) {
  const std::size_t bracket = value.find('[');
  const std::string_view name = std::string_view(value).substr(0, bracket);
  if (name.empty() || (bracket != std::string::npos && value.back() != ']')) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return std::isalnum(u) || u >= 0x80 || c == '_' || c == '/' || c == '-' || c == '.';
  });
}

// Whether FILTER LOG came in fail2ban-regex's order, LOG FILTER: the first is the journal
// (systemd-journal[...], no file of that name) or a file that is no filter file (.conf,
// .local), and the second names no file or a filter file. In this command's order the log
// is a file that is no filter file (or the log's text, which names none, after a filter
// that is no file either).
bool fail2ban_regex_order(const std::string& first, const std::string& second) {
  std::error_code ec;
  const auto filter_file = [](const std::string& p) { return p.ends_with(".conf") || p.ends_with(".local"); };
  if (std::filesystem::exists(second, ec) && !filter_file(second)) return false;
  if (first.starts_with("systemd-journal") && names_a_filter(first)) return !std::filesystem::exists(first, ec);
  return std::filesystem::is_regular_file(first, ec) && !filter_file(first);
}

std::optional<Args> parse(int argc, char** argv, int first, std::string& why) {
  Args a;
  std::vector<std::string> positional;
  bool options_end = false;  // after "--": a failregex or a log line may begin with '-'
  for (int i = first; i < argc; ++i) {
    std::string s = argv[i];
    if (options_end) {
      positional.push_back(s);
      continue;
    }
    if (s == "--") {
      options_end = true;
      continue;
    }
    // fail2ban-regex's spellings too: -o for --out, and --option=value.
    std::optional<std::string> attached;
    if (const std::size_t eq = s.find('='); s.rfind("--", 0) == 0 && eq != std::string::npos) {
      attached = s.substr(eq + 1);
      s.resize(eq);
    }
    if (s == "-o") s = "--out";
    if (s == "-c" || s == "--config") s = "--fail2ban-dir";  // fail2ban-regex's config directory
    if (s == "--fail2ban-dir" || s == "--out" || s == "-d" || s == "--datepattern" || s == "-L" || s == "--maxlines" ||
        s == "-m" || s == "--journalmatch") {
      if (!attached && i + 1 >= argc) {
        why = "option '" + s + "' requires an argument";
        return std::nullopt;
      }
      const std::string value = attached ? *attached : argv[++i];
      if (s == "--out") a.out = value;
      else if (s == "--fail2ban-dir") a.options.config_dir = value;
      else if (s == "-d" || s == "--datepattern") a.datepattern = value;
      else if (s == "-m" || s == "--journalmatch") a.journalmatch = value;
      else if (value.empty() || value.size() > 6 || value.find_first_not_of("0123456789") != std::string::npos ||
               (a.maxlines = std::stoi(value)) <= 0) {
        why = "option '" + s + "': '" + value + "' is not a number of lines above 0";
        return std::nullopt;
      }
    } else if (attached) {
      why = "option '" + s + "' takes no value or is unknown";
      return std::nullopt;
    } else if (s == "-r" || s == "--raw") {
      // fail2ban-regex's "no DNS lookups": what this test always does.
    } else if (s == "--print-all-matched" || s == "--print-all-missed" || s == "--print-all-ignored" ||
               s == "--print-no-missed" || s == "--print-no-ignored") {
      bool& flag = s == "--print-all-matched"   ? a.all_matched
                   : s == "--print-all-missed"  ? a.all_missed
                   : s == "--print-all-ignored" ? a.all_ignored
                   : s == "--print-no-missed"   ? a.no_missed
                                                : a.no_ignored;
      flag = true;
    } else if (s.size() > 1 && s[0] == '-') {
      why = "unrecognized option '" + s + "'";
      return std::nullopt;
    } else {
      positional.push_back(s);
    }
  }
  if (positional.size() != 2 && positional.size() != 3) {
    why = "--test-filter takes a filter and a log (and an ignoreregex)";
    return std::nullopt;
  }
  if ((a.no_missed && a.all_missed) || (a.no_ignored && a.all_ignored)) {
    why = std::string("--print-no-") + (a.no_missed && a.all_missed ? "missed and --print-all-missed" : "ignored and --print-all-ignored") +
          " are mutually exclusive";
    return std::nullopt;
  }
  // fail2ban-regex -o takes any key of the failure's dict too (-o port, -o ip4); those whose
  // value is a Python set or list (users, matches) and its <tag> templates are not taken.
  if (a.out == "users" || a.out == "matches" || a.out == "nofail-matches" || a.out == "row" ||
      a.out.find('<') != std::string::npos) {
    why = "--out: '" + a.out + "' is not supported (ip, id, fid, user, msg, json, or a failure's key such as port)";
    return std::nullopt;
  }
  if (fail2ban_regex_order(positional[0], positional[1])) std::swap(positional[0], positional[1]);
  a.filter = positional[0];
  a.log = positional[1];
  if (positional.size() == 3) a.ignore_regex = positional[2];
  a.filter_is_regex = !names_a_filter(a.filter);
  if (!a.filter_is_regex && !split_options(a, why)) return std::nullopt;
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

// fail2ban-regex -o KEY: the failure's value, or Python's None.
std::string field_or_none(const fail2ban::Filter::Failure& f, const std::string& key) {
  const auto it = f.fields.find(key);
  return it == f.fields.end() ? "None" : it->second;
}

// fail2ban-regex -o user: Python's None for a failure without one.
std::string user_of(const fail2ban::Filter::Failure& f) {
  const auto it = f.fields.find("user");
  if (it != f.fields.end()) return it->second;
  return f.user.empty() ? "None" : f.user;
}

void print_failure(const Args& a, const fail2ban::Filter::Failure& f, std::size_t number, const std::string& line) {
  if (a.out == "ip") std::cout << address(f) << '\n';
  else if (a.out == "id" || a.out == "fid") std::cout << f.id << '\n';
  else if (a.out == "user") std::cout << user_of(f) << '\n';
  else if (a.out == "msg") for (const std::string& m : f.matches) std::cout << m << '\n';  // fail2ban's matches
  else if (a.out != "json") std::cout << field_or_none(f, a.out) << '\n';  // r[3].get(KEY)
  else {
    nlohmann::json j{{"line", number}, {"id", f.id}, {"ip", address(f)}, {"failregex", f.failregex + 1}, {"msg", line}};
    // A user the filter captured empty is "" (fail2ban's 'user': ''), none is left out.
    if (const auto it = f.fields.find("user"); it != f.fields.end()) j["user"] = it->second;
    else if (!f.user.empty()) j["user"] = f.user;
    if (f.time) j["time"] = *f.time;
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  }
}

// fail2ban-regex lists at most this many lines of a kind unless asked for all (its
// _maxlines): it keeps up to 21 and prints them when fewer than 20.
constexpr std::size_t kListed = 20;

struct Totals {
  // Signed as in Python: a multi-line match's earlier lines move from missed to matched.
  std::int64_t lines = 0, matched = 0, ignored = 0, missed = 0;
  std::vector<std::size_t> hits;         // per failregex
  std::vector<std::size_t> ignore_hits;  // per ignoreregex
  std::vector<std::string> matched_lines, ignored_lines, missed_lines;  // as listed
  // Multi-line filters: the buffer before and after a line, each line its tuple joined.
  std::vector<std::string> before, after;
};

// fail2ban-regex's list of one kind of regex: the sum of their hits, then those hit.
void print_regexes(const char* title, const std::vector<std::string>& regexes, const std::vector<std::size_t>& hits) {
  std::size_t total = 0;
  for (const std::size_t h : hits) total += h;
  std::cout << title << ": " << total << " total\n";
  bool any = false;
  for (std::size_t i = 0; i < regexes.size(); ++i) {
    if (hits[i] == 0) continue;  // as fail2ban-regex lists them (without -v)
    if (!any) std::cout << "|-  #) [# of hits] regular expression\n";
    any = true;
    std::cout << "|  " << std::setw(2) << i + 1 << ") [" << hits[i] << "] " << regexes[i] << '\n';  // "%2d)"
  }
  if (any) std::cout << "`-\n";
  std::cout << '\n';
}

// fail2ban-regex's printLines(): a kind's lines, or how to see them all.
void print_lines(const char* kind, std::int64_t count, const std::vector<std::string>& lines, bool all) {
  if (count <= 0) return;
  const std::string header = std::string(kind) + " line(s):";
  if (count >= static_cast<std::int64_t>(kListed) && !all) {
    std::cout << header << " too many to print.  Use --print-all-" << static_cast<char>(std::tolower(kind[0])) << (kind + 1)
              << " to print all " << count << " lines\n";
    return;
  }
  if (lines.empty()) return;
  std::cout << "|- " << header << '\n';
  for (const std::string& l : lines) std::cout << "|  " << std::string_view(l).substr(0, l.find_last_not_of(" \t\r\n\f\v") + 1) << '\n';
  std::cout << "`-\n";
}

void print_summary(const Args& a, const fail2ban::Filter& filter, const Totals& t, double seconds) {
  print_regexes("Failregex", filter.failregex(), t.hits);
  print_regexes("Ignoreregex", filter.ignoreregex(), t.ignore_hits);
  std::cout << "Lines: " << t.lines << " lines, " << t.ignored << " ignored, " << t.matched << " matched, " << t.missed
            << " missed\n";
  std::cout << "[processed in " << std::fixed << std::setprecision(2) << seconds << " sec]\n\n";
  if (a.all_matched) print_lines("Matched", t.matched, t.matched_lines, true);
  if (!a.no_ignored) print_lines("Ignored", t.ignored, t.ignored_lines, a.all_ignored);
  if (!a.no_missed) print_lines("Missed", t.missed, t.missed_lines, a.all_missed);
}

// A line as fail2ban-regex counts it: ignored (an ignoreregex, or any failregex match
// marked <F-NOFAIL>), matched (a failure), or missed; every failregex match is a hit.
void count(const Args& a, const fail2ban::Filter::Outcome& o, std::string_view line, Totals& t) {
  bool failed = false, nofail = false;
  for (const auto& f : o.failures) {
    if (f.failregex < t.hits.size()) ++t.hits[f.failregex];
    (f.nofail ? nofail : failed) = true;
  }
  for (const std::size_t i : o.ignore_hits)
    if (i < t.ignore_hits.size()) ++t.ignore_hits[i];
  if (o.ignored() || nofail) {
    if (++t.ignored <= static_cast<std::int64_t>(kListed) + 1 || a.all_ignored)
      if (!a.no_ignored) t.ignored_lines.emplace_back(line);
  } else if (failed) {
    ++t.matched;
    if (a.all_matched) t.matched_lines.emplace_back(line);
  } else {
    if ((++t.missed <= static_cast<std::int64_t>(kListed) + 1 || a.all_missed) && !a.no_missed)
      t.missed_lines.emplace_back(line);
  }
}

// fail2ban-regex's testRegex() for a multi-line filter: each line of the buffer before
// the line came (but its oldest, when it was full) that the buffer no longer holds was
// taken by a match: it counts as matched, no longer as missed; its joined tuple (a dateless
// line after a recent date holds that date's text before it, a journal entry its time) is
// looked up among the listed lines' text, and listed as matched so.
void count_taken(const Args& a, const fail2ban::Filter& filter, Totals& t) {
  filter.buffered(t.after);
  for (std::size_t k = t.before.size() >= filter.maxlines() ? 1 : 0; k < t.before.size(); ++k) {
    const std::string& taken = t.before[k];
    if (std::find(t.after.begin(), t.after.end(), taken) != t.after.end()) continue;
    const auto listed = std::find(t.missed_lines.begin(), t.missed_lines.end(), taken);
    if (listed != t.missed_lines.end()) t.missed_lines.erase(listed);
    if (a.all_matched) t.matched_lines.push_back(taken);
    ++t.matched;
    --t.missed;
  }
}

// One batch of the log's lines on their way through the filter: each counted line, its
// number, its date (DatedLine views the line), and the filter's searches made ahead.
struct Batch {
  std::vector<std::string> lines;
  std::vector<double> times;  // the lines' times, when given with them (the journal's)
  std::vector<std::size_t> numbers;
  std::vector<fail2ban::Filter::DatedLine> dated;
  std::vector<fail2ban::Filter::Ahead> ahead;  // per piece
  std::size_t piece = 0;                       // lines per piece
  std::exception_ptr failed;                   // what stopped the dating (at line dated.size())
};

// As fail2ban reads a log: a last line without its newline is still being written, and
// is not read (`unterminated`: the caller says so once the lines before it are out). Fills
// `b` with up to kBatch lines; false at the end of the log.
constexpr std::size_t kBatch = 1024;
// Each line is read into the string that held a line of the batch before, in its memory
// (a string made and freed a line cost a tenth of the time of `--test-filter sshd`).
bool gather(std::istream& in, std::size_t& number, Batch& b, bool& unterminated) {
  b.numbers.clear();
  b.times.clear();
  std::size_t n = 0;
  while (n < kBatch) {
    if (n == b.lines.size()) b.lines.emplace_back();
    std::string& line = b.lines[n];
    if (!std::getline(in, line)) break;
    // fail2ban's FileContainer takes a line as complete when it ends in '\n' or '\r'.
    if (in.eof() && (line.empty() || line.back() != '\r')) {
      unterminated = true;
      in.setstate(std::ios::failbit);
      break;
    }
    // fail2ban-regex's reading: line ends stripped, comments and empty lines skipped.
    while (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;  // its string takes the next line
    b.numbers.push_back(++number);
    ++n;
  }
  b.lines.resize(n);
  return n > 0;
}

// A journal entry's time as fail2ban-regex shows it: Python's isoformat() of the local
// time with its offset ("2025-12-03T23:13:25+01:00", microseconds when there are some).
std::string iso_local(double t) {
  const auto whole = static_cast<std::time_t>(std::floor(t));
  const long micros = std::lround((t - static_cast<double>(whole)) * 1e6);
  std::tm tm{};
  ::localtime_r(&whole, &tm);
  char buf[64];
  std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  if (micros > 0 && micros < 1000000) n += static_cast<std::size_t>(std::snprintf(buf + n, sizeof buf - n, ".%06ld", micros));
  const long off = tm.tm_gmtoff;
  const long a = off < 0 ? -off : off;
  std::snprintf(buf + n, sizeof buf - n, "%c%02ld:%02ld", off < 0 ? '-' : '+', a / 3600, a / 60 % 60);
  return buf;
}

// The batch's lines dated by the filter's date detector, up to a line where that throws.
void date_batch(fail2ban::Filter& filter, Batch& b) noexcept {
  b.failed = nullptr;
  b.dated.clear();
  try {
    for (std::size_t j = 0; j < b.lines.size(); ++j) {
      if (b.times.empty()) {
        b.dated.push_back(filter.date_line(b.lines[j]));
        continue;
      }
      b.dated.push_back(filter.known_line(b.lines[j], b.times[j]));
      b.dated.back().known_text = iso_local(b.times[j]) + " ";  // fail2ban's journal tuple
    }
  } catch (...) {
    b.failed = std::current_exception();
  }
}

// Piece `p` of the batch's lines searched ahead.
void search_piece(const fail2ban::Filter& filter, Batch& b, std::size_t p) noexcept {
  fail2ban::Filter::Ahead& piece = b.ahead[p];
  piece.clear();
  try {
    for (std::size_t j = p * b.piece; j < std::min(b.dated.size(), (p + 1) * b.piece); ++j)
      filter.search_ahead(b.dated[j], j, piece);
  } catch (...) {
    piece.clear();  // read_batch() searches for itself, and meets what failed here on its thread
  }
}

// The batch's dated lines read by the filter in order, counted or printed; then what
// stopped their dating, if anything did (the lines before it read first, as line by line).
void read_batch(const Args& a, fail2ban::Filter& filter, Batch& b, Totals& t) {
  const bool multi = a.out.empty() && filter.maxlines() > 1;
  for (std::size_t j = 0; j < b.dated.size(); ++j) {
    if (multi) filter.buffered(t.before);
    const fail2ban::Filter::Outcome o = filter.line(b.dated[j], b.ahead[j / b.piece], j);
    if (!a.out.empty()) {
      for (const auto& f : o.failures) if (!f.nofail) print_failure(a, f, b.numbers[j], b.lines[j]);
      continue;
    }
    std::string_view line = b.dated[j].text();  // as fail2ban lists it: not UTF-8 replaced by U+FFFD
    std::string shown;  // a journal entry is listed after its time, as fail2ban-regex lists it
    if (!b.times.empty()) line = shown = b.dated[j].known_text + std::string(line);
    if (multi) count_taken(a, filter, t);
    count(a, o, line, t);
  }
  if (b.failed) std::rethrow_exception(b.failed);
}

// The journal's entries, each the line fail2ban's systemd backend makes of it, with its
// time (fail2ban-regex reads no date from them); every entry is a line, none skipped.
struct Journal {
  JournalConfig config;
  JournalProcess process;
  FILE* out = nullptr;
};
bool gather_journal(Journal& j, std::size_t& number, Batch& b) {
  b.lines.clear();
  b.numbers.clear();
  b.times.clear();
  char* buf = nullptr;
  std::size_t cap = 0;
  while (b.lines.size() < kBatch) {
    const ssize_t n = ::getline(&buf, &cap, j.out);
    if (n <= 0) break;
    try {
      JournalLine line = journal_line(std::string_view(buf, static_cast<std::size_t>(n)));
      b.lines.push_back(std::move(line.text));
      b.times.push_back(line.time);
      b.numbers.push_back(++number);
    } catch (const std::invalid_argument&) {  // not an entry: journalctl prints none such
    }
  }
  std::free(buf);
  return !b.lines.empty();
}

// The log through the filter a batch at a time, four batches in flight, each step's tasks
// side by side on a pool (WorkerPool::run()): batch t read from the log, batch t - 1 dated
// (the filter's date detector, which nothing else touches), batch t - 2 searched ahead in
// pieces (Filter::search_ahead(), const), and batch t - 3 read by the filter in order,
// counted or printed, on this thread. The same answers as line by line
// (tests/fail2ban/ahead_test.cpp), on every core; the filter's reading, the longest task,
// is this thread's only one (reading the log here as well cost a tenth of the wall time).
int scan(const Args& a, fail2ban::Filter& filter, std::istream& in, Journal* journal = nullptr) {
  const auto started = std::chrono::steady_clock::now();
  Totals t;
  t.hits.assign(filter.failregex().size(), 0);
  t.ignore_hits.assign(filter.ignoreregex().size(), 0);
  WorkerPool pool(WorkerPool::default_threads());
  constexpr std::size_t kInFlight = 4;
  std::array<Batch, kInFlight> batches;
  std::array<bool, kInFlight> live{};
  const auto at = [&](std::size_t step, std::size_t back) -> std::size_t { return (step + kInFlight - back) % kInFlight; };
  std::size_t number = 0;
  bool more = true, unterminated = false;
  for (std::size_t step = 0;; ++step) {
    Batch &now = batches[at(step, 0)], &dating = batches[at(step, 1)], &ahead = batches[at(step, 2)],
          &read = batches[at(step, 3)];
    const bool gathering = more, date = step >= 1 && live[at(step, 1)], search = step >= 2 && live[at(step, 2)],
               reading = step >= 3 && live[at(step, 3)];
    if (!gathering && !date && !search && !reading) break;
    if (search) {
      const std::size_t pieces = std::max<std::size_t>(1, std::min(pool.width(), ahead.lines.size() / fail2ban::Filter::kAheadPiece));
      ahead.piece = (ahead.lines.size() + pieces - 1) / pieces;
      while (ahead.ahead.size() < pieces) ahead.ahead.push_back(filter.ahead());
    }
    const std::size_t searches = search ? (ahead.lines.size() + ahead.piece - 1) / ahead.piece : 0;
    std::exception_ptr read_failed, gather_failed;
    bool gathered = false;
    pool.run(3 + searches, [&](std::size_t task) {
      if (task == 0) {  // the caller's: the filter's reading and the output
        try {
          if (reading) read_batch(a, filter, read, t);
        } catch (...) {
          read_failed = std::current_exception();
        }
      } else if (task == 1) {
        if (!gathering) return;
        try {
          gathered = journal != nullptr ? gather_journal(*journal, number, now) : gather(in, number, now, unterminated);
        } catch (...) {
          gather_failed = std::current_exception();
        }
      } else if (task == 2) {
        if (date) date_batch(filter, dating);
      } else {
        search_piece(filter, ahead, task - 3);
      }
    });
    if (read_failed) std::rethrow_exception(read_failed);
    if (gather_failed) std::rethrow_exception(gather_failed);
    if (gathering) more = live[at(step, 0)] = gathered;
    if (reading) live[at(step, 3)] = false;
  }
  t.lines = static_cast<std::int64_t>(number);
  std::cout.flush();  // the lines before it, then the message, as line by line
  if (unterminated)
    std::fprintf(stderr, "gpufilterd: %s: the last line has no newline; not read (as fail2ban does)\n", a.log.c_str());
  if (a.out.empty()) print_summary(a, filter, t, std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  std::cout.flush();
  if (const std::uint64_t stopped = fail2ban::PyRegex::limit_failures(); stopped > 0)
    std::fprintf(stderr,
                 "gpufilterd: %s: %llu regex searches stopped at PCRE2's limits (a long line under a "
                 "backtracking failregex); those lines count as not matched\n",
                 a.log.c_str(), static_cast<unsigned long long>(stopped));
  return std::cout ? 0 : 2;
}

// fail2ban-regex's `systemd-journal[...]` LOG: the journal from its start, through the
// filter's journalmatch.
int scan_journal(const Args& a, fail2ban::Filter& filter, const fail2ban::FilterDefinition& definition) {
  JournalSourceConfig source = systemd_backend(a.log, a.log);
  source.matches = a.journalmatch ? journal_matches(*a.journalmatch) : journal_matches(definition.journalmatch.value_or(""), true);
  source.follow = false;
  source.from_start = true;
  source.name = a.log;
  Journal j;
  j.config = journal_reader_config(source);
  j.process = spawn_journalctl(j.config);
  j.out = ::fdopen(j.process.out, "r");
  if (j.out == nullptr) {
    ::close(j.process.out);
    (void)end_journalctl(j.process, j.config, true);
    throw SourceError(a.log, errno);
  }
  std::istringstream none;
  int rc = 2;
  try {
    rc = scan(a, filter, none, &j);
  } catch (...) {
    std::fclose(j.out);
    (void)end_journalctl(j.process, j.config, true);
    throw;
  }
  std::fclose(j.out);
  const std::string failure = end_journalctl(j.process, j.config, false);
  if (failure.empty()) return rc;
  std::fprintf(stderr, "gpufilterd: %s\n", failure.c_str());
  return 2;
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
    options.keep_matches = a->out == "msg";
    options.keep_dates = a->out.empty();  // the summary's multi-line bookkeeping (count_taken())
    options.filter_usedns = false;  // fail2ban-regex reads no usedns from the filter
    fail2ban::FilterDefinition definition;
    if (a->filter_is_regex) {
      definition.file = "failregex";
      definition.failregex.push_back(a->filter);
    } else {
      definition = fail2ban::read_filter(options.config_dir, a->filter, options.values);
    }
    if (a->ignore_regex) definition.ignoreregex.push_back(*a->ignore_regex);
    if (a->datepattern) definition.datepattern = a->datepattern;
    if (a->maxlines) definition.maxlines = a->maxlines;
    fail2ban::Filter filter = fail2ban::Filter::of(definition, options);
    if (a->log == "-") {
      const std::unique_ptr<FileSource> input = FileSource::standard_input(a->log);
      SourceBuffer buffer(*input);
      std::istream in(&buffer);
      const int status = scan(*a, filter, in);
      if (!buffer.failed) return status;
      std::fprintf(stderr, "gpufilterd: %s\n", buffer.failed->what());
      return 2;
    }
    std::error_code ec;
    // As fail2ban-regex: a file of that name first.
    if (a->log.starts_with("systemd-journal") && !std::filesystem::is_regular_file(a->log, ec))
      return scan_journal(*a, filter, definition);
    if (!std::filesystem::exists(a->log, ec) && a->log.find_first_of(" \t") != std::string::npos) {
      std::istringstream lines(a->log + "\n");  // fail2ban-regex splits it at '\n'
      return scan(*a, filter, lines);
    }
    if (std::filesystem::is_directory(a->log, ec)) {
      std::fprintf(stderr, "gpufilterd: %s: Is a directory\n", a->log.c_str());
      return 2;
    }
    errno = 0;
    std::ifstream in(a->log, std::ios::binary);
    if (!in) {
      // The reason, as grep words it ("No such file or directory", "Permission denied").
      std::fprintf(stderr, "gpufilterd: %s: %s\n", a->log.c_str(), errno != 0 ? std::strerror(errno) : "cannot be read");
      return 2;
    }
    return scan(*a, filter, in);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpufilterd: %s\n", e.what());
    return 2;
  }
}

}  // namespace gpufilter::daemon
