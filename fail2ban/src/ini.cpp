#include "gpufilter/fail2ban/ini.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "gpufilter/fail2ban/errors.hpp"

namespace gpufilter::fail2ban {
namespace {

constexpr int kMaxInterpolationDepth = 10;  // configparser.MAX_INTERPOLATION_DEPTH

std::string strip(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r\n\f\v");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\r\n\f\v");
  return std::string(s.substr(first, last - first + 1));
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

// Where a comment starts on a raw line, as configparser decides it: a full-line comment
// ('#' or ';' first), or an inline ';' at the start or after whitespace.
std::size_t comment_start(const std::string& line) {
  const std::string stripped = strip(line);
  if (!stripped.empty() && (stripped[0] == '#' || stripped[0] == ';')) return 0;
  for (std::size_t i = line.find(';'); i != std::string::npos; i = line.find(';', i + 1)) {
    if (i == 0 || is_space(line[i - 1])) return i;
  }
  return std::string::npos;
}

bool is_word(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

}  // namespace

struct ConfigParser::Parsed {
  std::string path;
  bool ok = false;
  Section defaults;
  std::vector<std::pair<std::string, Section>> sections;  // in file order, merged by name
  Section* find(const std::string& name) {
    for (auto& [n, s] : sections) {
      if (n == name) return &s;
    }
    return nullptr;
  }
};

ConfigParser::Parsed ConfigParser::parse_file(const std::string& path) {
  Parsed parsed;
  parsed.path = path;
  // configparser skips unreadable files; a FIFO or a device is not read (opening a FIFO
  // would wait for a writer).
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) return parsed;
  std::ifstream in(path, std::ios::binary);
  if (!in) return parsed;
  parsed.ok = true;
  Section* current = nullptr;
  std::string option;
  std::vector<std::string>* value = nullptr;
  std::map<Value*, std::vector<std::string>> pending;  // multi-line values, joined at the end
  std::size_t indent_level = 0;
  std::string line;
  int number = 0;
  // configparser's strict mode, per file: a section or an option of a section given twice
  // is an error (DEFAULT may open again).
  std::set<std::string> sections_seen;
  std::set<std::pair<std::string, std::string>> options_seen;
  std::string section_name;
  while (std::getline(in, line)) {
    ++number;
    const std::size_t comment = comment_start(line);
    const std::string text = strip(line.substr(0, comment));
    if (text.empty()) {
      // An empty line belongs to the value being read, unless it carried a comment.
      if (comment == std::string::npos && value != nullptr) value->push_back("");
      continue;
    }
    const std::size_t indent = line.find_first_not_of(" \t\r\n\f\v");
    if (value != nullptr && indent > indent_level) {
      value->push_back(text);
      continue;
    }
    indent_level = indent;
    if (text[0] == '[' && text.find(']', 2) != std::string::npos) {
      const std::string name = text.substr(1, text.rfind(']') - 1);
      if (name != "DEFAULT" && !sections_seen.insert(name).second)
        throw Fail2banError(path, number, "section '" + name + "' already exists");
      section_name = name;
      if (name == "DEFAULT") {
        current = &parsed.defaults;
      } else {
        current = parsed.find(name);
        if (current == nullptr) current = &parsed.sections.emplace_back(name, Section{}).second;
      }
      value = nullptr;
      continue;
    }
    if (current == nullptr) throw Fail2banError(path, number, "option before the first section header");
    const std::size_t delim = text.find_first_of("=:");
    const std::string name = delim == std::string::npos ? std::string() : strip(text.substr(0, delim));
    if (name.empty()) throw Fail2banError(path, number, "cannot parse line: " + text);
    option = lower(name);
    if (!options_seen.emplace(section_name, option).second)
      throw Fail2banError(path, number, "option '" + option + "' in section '" + section_name + "' already exists");
    Value& v = (*current)[option];
    v = Value{strip(text.substr(delim + 1)), path, number};
    pending[&v] = {v.text};
    value = &pending[&v];
  }
  for (auto& [v, lines] : pending) {
    std::string joined;
    for (std::size_t i = 0; i < lines.size(); ++i) joined += (i ? "\n" : "") + lines[i];
    v->text = joined.substr(0, joined.find_last_not_of(" \t\r\n\f\v") + 1);
  }
  return parsed;
}

std::vector<std::string> ConfigParser::includes(const std::vector<std::string>& files,
                                                const std::vector<std::string>& seen) const {
  // _expandConfFilesWithLocal: X.conf is followed by X.local where that exists.
  std::vector<std::string> expanded;
  for (const std::string& f : files) {
    expanded.push_back(f);
    const std::filesystem::path p(f);
    const std::string local = (p.parent_path() / p.stem()).string() + ".local";
    if (std::find(files.begin(), files.end(), local) == files.end() && std::filesystem::is_regular_file(local)) {
      expanded.push_back(local);
    }
  }
  std::vector<std::string> out;
  for (const std::string& f : expanded) {
    const auto more = includes_of(f, seen);
    out.insert(out.end(), more.begin(), more.end());
  }
  return out;
}

std::vector<std::string> ConfigParser::includes_of(const std::string& resource,
                                                   const std::vector<std::string>& seen) const {
  ConfigParser alone;
  Parsed parsed = parse_file(resource);
  if (!parsed.ok) return {};
  alone.merge(parsed);
  const std::string dir = std::filesystem::path(resource).parent_path().string();
  std::vector<std::string> before, after;
  using Slot = std::pair<const char*, std::vector<std::string>*>;
  for (const auto& [name, list] : {Slot{"before", &before}, Slot{"after", &after}}) {
    const auto value = alone.has_section("INCLUDES") ? alone.get("INCLUDES", name) : std::nullopt;
    if (!value) continue;
    std::istringstream lines(*value);
    for (std::string item; std::getline(lines, item);) {
      if (item.empty()) continue;  // os.path.join(dir, '') names the folder, which reads as nothing
      const std::string r = item[0] == '/' ? item : (dir.empty() ? item : dir + "/" + item);
      if (std::find(seen.begin(), seen.end(), r) != seen.end()) continue;
      std::vector<std::string> s = seen;
      s.push_back(resource);
      const auto more = includes({r}, s);
      list->insert(list->end(), more.begin(), more.end());
    }
  }
  before.push_back(resource);
  before.insert(before.end(), after.begin(), after.end());
  return before;
}

void ConfigParser::merge(const Parsed& parsed) {
  for (const auto& [k, v] : parsed.defaults) defaults_[k] = v;
  for (const auto& [name, s] : parsed.sections) {
    const auto it = sections_.find(name);
    if (it == sections_.end()) {
      sections_[name] = s;
      continue;
    }
    // The values a later file overrides stay reachable as %(known/name)s.
    Section& known = sections_["KNOWN/" + name];
    for (const auto& [k, v] : it->second) {
      if (s.count(k)) known[k] = v;
    }
    for (const auto& [k, v] : s) it->second[k] = v;
  }
}

std::vector<std::string> ConfigParser::read(const std::vector<std::string>& files) {
  std::vector<std::string> done;
  for (const std::string& f : includes(files, {})) {
    const Parsed parsed = parse_file(f);
    if (!parsed.ok) continue;
    merge(parsed);
    done.push_back(f);
  }
  return done;
}

bool ConfigParser::has_section(const std::string& section) const { return sections_.count(section) != 0; }

std::vector<std::string> ConfigParser::sections() const {
  std::vector<std::string> out;
  for (const auto& [name, s] : sections_)
    if (name != "INCLUDES" && !name.starts_with("KNOWN/")) out.push_back(name);
  return out;
}

const ConfigParser::Value* ConfigParser::defined(const std::string& section, const std::string& option) const {
  const auto s = sections_.find(section);
  if (s == sections_.end()) return nullptr;
  const auto o = s->second.find(lower(option));
  return o == s->second.end() ? nullptr : &o->second;
}

std::vector<std::string> ConfigParser::options(const std::string& section) const {
  std::vector<std::string> out;
  const auto it = sections_.find(section);
  if (it == sections_.end()) return out;
  for (const auto& [k, v] : it->second) out.push_back(k);
  return out;
}

const ConfigParser::Value* ConfigParser::find_raw(const std::string& section, const std::string& option,
                                                  const Vars& vars) const {
  static thread_local Value from_vars;
  if (const auto v = vars.find(option); v != vars.end()) {
    from_vars = Value{v->second, "<options>", 0};
    return &from_vars;
  }
  if (const auto s = sections_.find(section); s != sections_.end()) {
    if (const auto o = s->second.find(option); o != s->second.end()) return &o->second;
  }
  if (const auto d = defaults_.find(option); d != defaults_.end()) return &d->second;
  return nullptr;
}

std::optional<std::string> ConfigParser::get(const std::string& section, const std::string& option,
                                             const Vars& vars) const {
  if (section != "DEFAULT" && !has_section(section)) return std::nullopt;
  Vars lowered;
  for (const auto& [k, v] : vars) lowered[lower(k)] = v;
  const Value* raw = find_raw(section, lower(option), lowered);
  if (raw == nullptr) return std::nullopt;
  const Value where = *raw;
  std::string out;
  interpolate(section, where, where.text, {}, lowered, 1, out);
  return out;
}

std::optional<std::string> ConfigParser::get_ex(const std::string& section, const std::string& option,
                                                const Vars& vars) const {
  const std::size_t slash = option.find('/');
  if (slash != std::string::npos && slash > 0 && option.find_first_of(" \t>", slash) == std::string::npos &&
      std::all_of(option.begin(), option.begin() + static_cast<std::ptrdiff_t>(slash),
                  [](char c) { return is_word(c) || c == '-'; }) &&
      slash + 1 < option.size()) {
    const std::string sec = option.substr(0, slash), opt = option.substr(slash + 1);
    const std::string l = lower(sec);
    const std::vector<std::string> tries =
        l == "known" ? std::vector<std::string>{"KNOWN/" + section, section}
                     : std::vector<std::string>{l == "default" ? std::string("DEFAULT") : sec};
    for (const std::string& s : tries) {
      if (auto v = get(s, opt)) return v;
    }
  }
  return get(section, option, vars);
}

void ConfigParser::map_section_options(const std::string& section, const std::string& rest, Vars& mapped,
                                       const Vars& vars) const {
  // %(sec/opt)s: the raw value of opt in section sec ([DEFAULT] where sec lacks it).
  for (std::size_t at = rest.find("%("); at != std::string::npos; at = rest.find("%(", at + 2)) {
    const std::size_t close = rest.find(')', at + 2);
    if (close == std::string::npos || close + 1 >= rest.size() || rest[close + 1] != 's') continue;
    const std::string sopt = rest.substr(at + 2, close - at - 2);
    const std::size_t slash = sopt.find('/');
    if (slash == std::string::npos || slash == 0 || slash + 1 >= sopt.size()) continue;
    if (!std::all_of(sopt.begin(), sopt.begin() + static_cast<std::ptrdiff_t>(slash),
                     [](char c) { return is_word(c) || c == '-'; })) continue;
    if (mapped.count(sopt) || vars.count(sopt) || find_raw(section, sopt, {}) != nullptr) continue;
    const std::string sec = sopt.substr(0, slash), opt = sopt.substr(slash + 1), l = lower(sec);
    const Value* v = nullptr;
    if (l != "default") {
      const auto s = sections_.find(l == "known" ? "KNOWN/" + section : sec);
      if (s == sections_.end() && l != "known") continue;
      if (s != sections_.end()) {
        if (const auto o = s->second.find(opt); o != s->second.end()) v = &o->second;
      }
    }
    if (v == nullptr) {
      const auto d = defaults_.find(opt);
      if (d == defaults_.end()) continue;
      v = &d->second;
    }
    mapped[sopt] = v->text;
  }
}

void ConfigParser::interpolate(const std::string& section, const Value& where, const std::string& rest_in,
                               Vars mapped, const Vars& vars, int depth, std::string& out) const {
  if (depth > kMaxInterpolationDepth) {
    throw Fail2banError(where.file, where.line, "interpolation too deep in section [" + section + "]");
  }
  map_section_options(section, rest_in, mapped, vars);
  std::string_view rest = rest_in;
  while (!rest.empty()) {
    const std::size_t p = rest.find('%');
    out.append(rest.substr(0, p));
    if (p == std::string_view::npos) return;
    rest.remove_prefix(p);
    if (rest.size() > 1 && rest[1] == '%') {
      out += '%';
      rest.remove_prefix(2);
      continue;
    }
    const std::size_t close = rest.size() > 1 && rest[1] == '(' ? rest.find(')', 2) : std::string_view::npos;
    if (close == std::string_view::npos || close == 2 || close + 1 >= rest.size() || rest[close + 1] != 's') {
      throw Fail2banError(where.file, where.line, "bad interpolation in [" + section + "]: '%' must be followed by "
                                                  "'%' or '(name)s', found: " + std::string(rest.substr(0, 40)));
    }
    const std::string var = lower(std::string(rest.substr(2, close - 2)));
    rest.remove_prefix(close + 2);
    std::string value;
    if (const auto m = mapped.find(var); m != mapped.end()) {
      value = m->second;
    } else if (var == "__name__") {
      value = section;
    } else if (const Value* raw = find_raw(section, var, vars)) {
      value = raw->text;
    } else {
      throw Fail2banError(where.file, where.line,
                          "interpolation key '" + var + "' in section [" + section + "] is not a valid option name");
    }
    if (value.find('%') != std::string::npos) {
      interpolate(section, where, value, mapped, vars, depth + 1, out);
    } else {
      out += value;
    }
  }
}

}  // namespace gpufilter::fail2ban
