#include "gpufilter/fail2ban/jails.hpp"

#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "gpufilter/fail2ban/errors.hpp"
#include "gpufilter/fail2ban/ini.hpp"

namespace gpufilter::fail2ban {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string trim(std::string s) {
  s.erase(0, s.find_first_not_of(" \t\r\n"));
  s.erase(s.find_last_not_of(" \t\r\n") + 1);
  return s;
}

// ConfigReaderUnshared.read("jail"): jail.conf, jail.d/*.conf, jail.local, jail.d/*.local
// (each directory sorted), those that exist.
std::vector<std::string> jail_files(const std::string& dir) {
  namespace fs = std::filesystem;
  const std::string base = dir + "/jail";
  const auto in_dir = [&](const std::string& ext) {
    std::vector<std::string> found;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(base + ".d", ec))
      if (e.path().extension() == ext) found.push_back(e.path().string());
    std::sort(found.begin(), found.end());
    return found;
  };
  std::vector<std::string> files{base + ".conf"};
  for (const auto& f : in_dir(".conf")) files.push_back(f);
  files.push_back(base + ".local");
  for (const auto& f : in_dir(".local")) files.push_back(f);
  std::erase_if(files, [](const std::string& f) { return !fs::exists(f); });
  return files;
}

// configparser's getboolean (RawConfigParser.BOOLEAN_STATES).
std::optional<bool> boolean(const std::string& text) {
  const std::string t = lower(trim(text));
  if (t == "1" || t == "yes" || t == "true" || t == "on") return true;
  if (t == "0" || t == "no" || t == "false" || t == "off") return false;
  return std::nullopt;
}

// helpers.splitwords: on commas, spaces and new lines.
std::vector<std::string> splitwords(const std::string& text) {
  std::vector<std::string> out;
  std::string word;
  for (const char c : text + " ") {
    if (c == ' ' || c == ',' || c == '\n' || c == '\t' || c == '\r') {
      if (!word.empty()) out.push_back(word);
      word.clear();
    } else {
      word += c;
    }
  }
  return out;
}

// A tiny evaluator for what str2seconds hands to Python's eval(): numbers, + - * /,
// parentheses.
struct Eval {
  std::string_view s;
  std::size_t i = 0;
  bool ok = true;
  void space() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  }
  double factor() {
    space();
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) {
      const bool minus = s[i++] == '-';
      const double v = factor();
      return minus ? -v : v;
    }
    if (i < s.size() && s[i] == '(') {
      ++i;
      const double v = expr();
      space();
      if (i >= s.size() || s[i] != ')') ok = false;
      else ++i;
      return v;
    }
    const std::size_t start = i;
    while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
    if (start == i) {
      ok = false;
      return 0;
    }
    try {
      return std::stod(std::string(s.substr(start, i - start)));
    } catch (const std::exception&) {
      ok = false;
      return 0;
    }
  }
  double term() {
    double v = factor();
    for (space(); ok && i < s.size() && (s[i] == '*' || s[i] == '/'); space()) {
      const char op = s[i++];
      const double r = factor();
      if (op == '/' && r == 0) ok = false;
      v = op == '*' ? v * r : (r == 0 ? 0 : v / r);
    }
    return v;
  }
  double expr() {
    double v = term();
    for (space(); ok && i < s.size() && (s[i] == '+' || s[i] == '-'); space()) {
      const char op = s[i++];
      const double r = term();
      v = op == '+' ? v + r : v - r;
    }
    return v;
  }
};

// MyTime._str2sec_parts: the abbreviation's multiplier, or 0.
double unit_seconds(const std::string& word) {
  static const std::map<std::string, double> units = [] {
    std::map<std::string, double> m;
    for (const char* w : {"days", "day", "da", "dd", "d"}) m[w] = 86400;
    for (const char* w : {"weeks", "week", "wee", "we", "ww", "w"}) m[w] = 7 * 86400;
    for (const char* w : {"months", "month", "mon", "mo"}) m[w] = (365.0 * 3 + 366) * 86400 / 4 / 12;
    for (const char* w : {"years", "year", "yea", "ye", "yy", "y"}) m[w] = (365.0 * 3 + 366) * 86400 / 4;
    for (const char* w : {"seconds", "second", "sec", "se", "ss", "s"}) m[w] = 1;
    for (const char* w : {"minutes", "minute", "min", "mi", "mm", "m"}) m[w] = 60;
    for (const char* w : {"hours", "hour", "hou", "ho", "hh", "h"}) m[w] = 3600;
    return m;
  }();
  const auto it = units.find(lower(word));
  return it == units.end() ? 0 : it->second;
}

// The jail's `filter` option (with %(__name__)s and friends already interpolated).
void read_filter_option(Jail& jail, const std::string& text, const std::string& where) {
  const std::string flt = trim(text);
  if (flt.empty()) return;
  try {
    auto [name, options] = extract_options(flt);
    jail.filter = trim(name);
    jail.filter_options = std::move(options);
  } catch (const Fail2banError& e) {
    throw Fail2banError(where + ": jail [" + jail.name + "]: invalid filter definition \"" + flt + "\": " + e.what());
  }
}

double read_time(const ConfigParser& cfg, const Jail& jail, const char* option, double fallback) {
  const auto text = cfg.get(jail.name, option);
  if (!text) return fallback;
  const std::optional<double> v = str2seconds(*text);
  if (!v) {
    const ConfigParser::Value* d = cfg.defined(jail.name, option);
    const std::string where = d != nullptr ? d->file + ":" + std::to_string(d->line) : jail.where;
    throw Fail2banError(where + ": jail [" + jail.name + "]: " + option + " \"" + *text +
                        "\" is not a time (like 600, 10m, 1h 30m, 1d, -1)");
  }
  return *v;
}

// JailReader.getOptions for one enabled jail: the filter, the log paths, the numbers.
void read_jail_options(const ConfigParser& cfg, Jail& jail) {
  if (const auto v = cfg.get(jail.name, "filter")) read_filter_option(jail, *v, jail.where);
  if (const auto v = cfg.get(jail.name, "backend")) jail.backend = trim(*v);
  if (const auto v = cfg.get(jail.name, "logpath")) {
    std::istringstream lines(*v);
    for (std::string line; std::getline(lines, line);) {
      line = trim(line);
      if (line.empty()) continue;
      // JailReader.convert: path.rsplit(" ", 1) -> the path and "head" or "tail".
      const std::size_t space = line.rfind(' ');
      if (space != std::string::npos) {
        const std::string tail = line.substr(space + 1);
        if (tail == "tail") jail.tail = true;
        line = trim(line.substr(0, space));
      }
      jail.logpaths.push_back(line);
    }
  }
  if (const auto v = cfg.get(jail.name, "maxretry")) {
    try {
      std::size_t used = 0;
      jail.maxretry = std::stoi(trim(*v), &used);
      if (used != trim(*v).size()) throw std::invalid_argument("rest");
    } catch (const std::exception&) {
      throw Fail2banError(jail.where + ": jail [" + jail.name + "]: maxretry \"" + *v + "\" is not a whole number");
    }
  }
  jail.findtime = read_time(cfg, jail, "findtime", jail.findtime);
  jail.bantime = read_time(cfg, jail, "bantime", jail.bantime);
  if (const auto v = cfg.get(jail.name, "ignoreip")) jail.ignoreip = splitwords(*v);
  if (const auto v = cfg.get(jail.name, "ignoreself"); v && !trim(*v).empty()) {
    const std::optional<bool> on = boolean(*v);
    if (!on) throw Fail2banError(jail.where + ": jail [" + jail.name + "]: ignoreself \"" + *v + "\" is not a boolean");
    jail.ignoreself = *on;
  }
  if (const auto v = cfg.get(jail.name, "usedns")) jail.usedns = trim(*v);
  for (const char* key : {"failregex", "ignoreregex", "prefregex", "maxlines", "datepattern", "journalmatch"})
    if (const auto v = cfg.get(jail.name, key); v && !trim(*v).empty()) jail.filter_overrides[key] = *v;
  for (const char* key : {"bantime.increment", "ignorecommand", "logtimezone", "logencoding"})
    if (const auto v = cfg.get(jail.name, key); v && !trim(*v).empty()) jail.other[key] = trim(*v);
}

}  // namespace

namespace {

// The canonical text of an address ("::0001" -> "::1"), or "" when it is none.
std::string canonical_address(const std::string& text) {
  unsigned char bytes[16];
  char out[INET6_ADDRSTRLEN];
  for (const int family : {AF_INET, AF_INET6}) {
    if (::inet_pton(family, text.c_str(), bytes) == 1 && ::inet_ntop(family, bytes, out, sizeof out) != nullptr)
      return out;
  }
  return "";
}

// A hosts file's lines: the address, then its names.
std::vector<std::vector<std::string>> hosts_lines(const std::string& path) {
  std::vector<std::vector<std::string>> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (const std::size_t hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    std::istringstream words(line);
    std::vector<std::string> fields;
    for (std::string w; words >> w;) fields.push_back(w);
    if (fields.size() >= 2) lines.push_back(std::move(fields));
  }
  return lines;
}

}  // namespace

std::vector<std::string> self_addresses(const std::string& hosts_file) {
  const std::vector<std::vector<std::string>> lines = hosts_lines(hosts_file);
  char host[256] = {};
  std::set<std::string> names = {"localhost"};
  if (::gethostname(host, sizeof host - 1) == 0 && host[0] != '\0') {
    const std::string self = lower(host);
    names.insert(self);
    for (const auto& l : lines)  // the host's other names: its fully qualified one
      if (std::any_of(l.begin() + 1, l.end(), [&](const std::string& n) { return lower(n) == self; }))
        for (auto n = l.begin() + 1; n != l.end(); ++n) names.insert(lower(*n));
  }
  std::vector<std::string> out;
  bool localhost = false;
  for (const auto& l : lines) {
    const bool named = std::any_of(l.begin() + 1, l.end(), [&](const std::string& n) { return names.count(lower(n)); });
    if (!named) continue;
    localhost = localhost || std::any_of(l.begin() + 1, l.end(), [](const std::string& n) { return lower(n) == "localhost"; });
    const std::string address = canonical_address(l[0]);
    if (!address.empty() && std::find(out.begin(), out.end(), address) == out.end()) out.push_back(address);
  }
  if (!localhost && std::find(out.begin(), out.end(), "127.0.0.1") == out.end()) out.push_back("127.0.0.1");
  return out;
}

std::optional<double> str2seconds(std::string_view text) {
  std::string v = trim(std::string(text));
  if (v.empty()) return std::nullopt;
  // _str2sec_prep: "1h30m" -> "1h 30m".
  std::string prepped;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i > 0 && std::isdigit(static_cast<unsigned char>(v[i])) && std::isalpha(static_cast<unsigned char>(v[i - 1])))
      prepped += ' ';
    prepped += v[i];
  }
  // _str2sec_parts: a word after a digit or a space -> "*SECONDS".
  std::string out;
  for (std::size_t i = 0; i < prepped.size();) {
    const char c = prepped[i];
    const bool after = i > 0 && (std::isdigit(static_cast<unsigned char>(prepped[i - 1])) || prepped[i - 1] == ' ');
    if (std::isalpha(static_cast<unsigned char>(c)) && after) {
      std::size_t j = i;
      while (j < prepped.size() && (std::isalnum(static_cast<unsigned char>(prepped[j])) || prepped[j] == '_')) ++j;
      const double seconds = unit_seconds(prepped.substr(i, j - i));
      if (seconds == 0) return std::nullopt;  // eval() would fail on the name
      std::ostringstream n;
      n.precision(17);
      n << "*" << seconds;
      out += n.str();
      i = j;
      continue;
    }
    out += c;
    ++i;
  }
  // _str2sec_fini: "1*3600 30*60" -> "1*3600+30*60" (non-overlapping, as re.sub).
  std::string joined;
  for (std::size_t i = 0; i < out.size(); ++i) {
    joined += out[i];
    if (std::isdigit(static_cast<unsigned char>(out[i])) && i + 1 < out.size() && out[i + 1] == ' ') {
      std::size_t j = i + 1;
      while (j < out.size() && out[j] == ' ') ++j;
      if (j < out.size() && std::isdigit(static_cast<unsigned char>(out[j]))) {
        joined += '+';
        joined += out[j];
        i = j;
      }
    }
  }
  Eval e{joined};
  const double r = e.expr();
  e.space();
  if (!e.ok || e.i != joined.size() || !std::isfinite(r)) return std::nullopt;
  return r;
}

std::pair<std::string, std::map<std::string, std::string>> extract_options(const std::string& text) {
  // OPTION_CRE: ^([^\[]+)(?:\[(.*)\])?\s*$
  std::string t = text;
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
  const std::size_t open = t.find('[');
  if (open == 0) throw Fail2banError("unexpected option syntax");
  std::map<std::string, std::string> options;
  if (open == std::string::npos) return {t, options};
  if (t.back() != ']') throw Fail2banError("unexpected option syntax");
  const std::string name = t.substr(0, open);
  std::string list = t.substr(open + 1, t.size() - open - 2);
  // OPTION_EXTRACT_CRE, one option at a time: NAME=("..."|'...'|[^,\]]*) then , or ][ or the end.
  std::size_t i = 0;
  const auto skip = [&] {
    while (i < list.size() && std::isspace(static_cast<unsigned char>(list[i]))) ++i;
  };
  while (true) {
    skip();
    if (i >= list.size()) break;
    const std::size_t key_start = i;
    while (i < list.size() && (std::isalnum(static_cast<unsigned char>(list[i])) || list[i] == '_' || list[i] == '-' ||
                               list[i] == '.'))
      ++i;
    if (i == key_start || i >= list.size() || list[i] != '=')
      throw Fail2banError("expected option, wrong syntax at " + std::to_string(key_start) + ": " +
                          list.substr(key_start, 25));
    const std::string key = list.substr(key_start, i - key_start);
    ++i;
    std::string value;
    if (i < list.size() && (list[i] == '"' || list[i] == '\'')) {
      const char q = list[i];
      const std::size_t close = list.find(q, i + 1);
      if (close == std::string::npos) throw Fail2banError("unexpected syntax after option " + key);
      value = list.substr(i + 1, close - i - 1);
      i = close + 1;
    } else {
      const std::size_t end = list.find_first_of(",]", i);
      value = list.substr(i, (end == std::string::npos ? list.size() : end) - i);
      i = end == std::string::npos ? list.size() : end;
    }
    options[trim(key)] = trim(value);
    if (i >= list.size()) break;
    if (list[i] == ',') {
      ++i;
    } else if (list[i] == ']') {  // "][": the next group of options
      ++i;
      skip();
      if (i >= list.size() || list[i] != '[') throw Fail2banError("unexpected syntax after option " + key);
      ++i;
    } else {
      throw Fail2banError("unexpected syntax after option " + key + ": " + list.substr(i, 25));
    }
  }
  return {name, options};
}

std::vector<Jail> read_jails(const std::string& config_dir, const std::vector<std::string>& only) {
  std::string dir = config_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (!std::filesystem::is_directory(dir)) throw Fail2banError(dir + ": no such folder (fail2ban's configuration)");
  const std::vector<std::string> files = jail_files(dir);
  if (files.empty()) throw Fail2banError(dir + "/jail.conf: no jail.conf, jail.local or jail.d/ file to read");
  ConfigParser cfg;
  if (cfg.read(files).empty()) throw Fail2banError(files.front() + ": cannot read the jails' files");
  for (const std::string& name : only)
    if (!cfg.has_section(name)) throw Fail2banError(dir + "/jail.conf: no jail [" + name + "] in " + files.front() +
                                                    " or the files read after it");
  std::vector<Jail> jails;
  for (const std::string& section : cfg.sections()) {
    if (section == "Definition" || section == "Init") continue;
    if (!only.empty() && std::find(only.begin(), only.end(), section) == only.end()) continue;
    Jail jail;
    jail.name = section;
    const ConfigParser::Value* at = cfg.defined(section, "enabled");
    if (at == nullptr) at = cfg.defined(section, "filter");
    if (at == nullptr) at = cfg.defined(section, "logpath");
    jail.where = at != nullptr ? at->file + ":" + std::to_string(at->line) : files.front();
    // JailReader.isEnabled: a value that is no boolean counts as false, as fail2ban's
    // getOptions falls back to the default with a warning.
    const auto enabled = cfg.get(section, "enabled");
    const bool on = enabled && boolean(*enabled).value_or(false);
    if (!on && only.empty()) continue;
    read_jail_options(cfg, jail);
    jails.push_back(std::move(jail));
  }
  return jails;
}

IgnoreEntry parse_ignore(const std::string& text) {
  IgnoreEntry e;
  e.text = text;
  std::string addr = text, mask;
  if (const std::size_t slash = text.find('/'); slash != std::string::npos) {
    addr = text.substr(0, slash);
    mask = text.substr(slash + 1);
  }
  in_addr v4{};
  in6_addr v6{};
  if (::inet_pton(AF_INET, addr.c_str(), &v4) == 1) {
    std::copy_n(reinterpret_cast<const std::uint8_t*>(&v4), 4, e.addr.begin());
    e.prefix = 32;
  } else if (::inet_pton(AF_INET6, addr.c_str(), &v6) == 1) {
    std::copy_n(reinterpret_cast<const std::uint8_t*>(&v6), 16, e.addr.begin());
    e.v6 = true;
    e.prefix = 128;
    // ::ffff:a.b.c.d is the IPv4 address, as fail2ban's IPAddr reads it.
    static const std::uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::equal(mapped, mapped + 12, e.addr.begin())) {
      std::copy(e.addr.begin() + 12, e.addr.end(), e.addr.begin());
      e.v6 = false;
      e.prefix = 32;
    }
  } else {
    return e;  // a name (or anything else): compared as text
  }
  if (!mask.empty()) {
    in_addr m{};
    if (std::all_of(mask.begin(), mask.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }) &&
        mask.size() <= 3 && std::stoi(mask) <= e.prefix) {
      e.prefix = std::stoi(mask);
    } else if (!e.v6 && ::inet_pton(AF_INET, mask.c_str(), &m) == 1) {
      const std::uint32_t bits = ntohl(m.s_addr);
      e.prefix = 0;
      while (e.prefix < 32 && (bits & (0x80000000u >> e.prefix)) != 0) ++e.prefix;
    } else {
      return IgnoreEntry{false, false, {}, 0, text};  // fail2ban reads it as a raw id too
    }
  }
  e.network = true;
  return e;
}

bool ignored(const std::vector<IgnoreEntry>& list, std::string_view id) {
  const IgnoreEntry address = parse_ignore(std::string(id));
  for (const IgnoreEntry& e : list) {
    if (!e.network) {
      if (e.text == id) return true;
      continue;
    }
    if (!address.network || address.v6 != e.v6) continue;
    int bits = e.prefix;
    std::size_t i = 0;
    bool in = true;
    for (; bits >= 8; bits -= 8, ++i)
      if (address.addr[i] != e.addr[i]) in = false;
    if (in && bits > 0) {
      const auto m = static_cast<std::uint8_t>(0xff << (8 - bits));
      in = (address.addr[i] & m) == (e.addr[i] & m);
    }
    if (in) return true;
  }
  return false;
}

bool ignored(const std::vector<std::string>& list, std::string_view id) {
  std::vector<IgnoreEntry> entries;
  entries.reserve(list.size());
  for (const std::string& e : list) entries.push_back(parse_ignore(e));
  return ignored(entries, id);
}

}  // namespace gpufilter::fail2ban
