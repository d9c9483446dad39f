#include "fail2ban_jails.hpp"

#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <sstream>

#include "gpufilter/core/errors.hpp"
#include "gpufilter/fail2ban/filter.hpp"
#include "gpufilter/fail2ban/ini.hpp"
#include "gpufilter/fail2ban/jails.hpp"
#include "gpufilter/fail2ban/reader.hpp"

namespace gpufilter::daemon {
namespace {

using fail2ban::Jail;

std::string named(const Jail& jail) { return "jail [" + jail.name + "] (" + jail.where + ")"; }

// JailReader._glob: the files a logpath names now; dangling links are left out, as
// fail2ban leaves them out (with a warning). Files created later under a glob need a reload.
std::vector<std::string> expand(const std::string& pattern) {
  std::vector<std::string> out;
  glob_t g{};
  if (::glob(pattern.c_str(), 0, nullptr, &g) == 0) {
    for (std::size_t i = 0; i < g.gl_pathc; ++i) {
      struct stat st {};
      if (::stat(g.gl_pathv[i], &st) == 0) out.emplace_back(g.gl_pathv[i]);
    }
  }
  ::globfree(&g);
  return out;
}

// What a jail may set that gpufilterd does not do as fail2ban would: refused by name, so
// that no jail runs with a meaning other than the one its author gave it.
void refuse_unsupported(const Jail& jail) {
  const std::string backend = jail.backend.substr(0, jail.backend.find('['));
  if (backend != "auto" && backend != "polling" && backend != "pyinotify" && backend != "gamin" && backend != "systemd")
    throw ConfigError(named(jail) + ": backend \"" + jail.backend + "\" is not auto, polling, pyinotify, gamin or systemd");
  for (const auto& [key, value] : jail.filter_overrides) {
    if (key == "journalmatch") continue;  // the journal's only: fail2ban ignores it for files too
    throw ConfigError(named(jail) + ": " + key + " set in the jail (over its filter's) is not supported; put it in "
                      "filter.d/" + jail.filter + ".local instead");
  }
  if (jail.usedns && *jail.usedns != "warn" && *jail.usedns != "yes")
    throw ConfigError(named(jail) + ": usedns = " + *jail.usedns + " is not supported (gpufilterd never resolves names "
                      "and reports a name as the failure's host, as usedns = warn does without the lookup)");
  for (const auto& [key, value] : jail.other) {
    const bool off = value == "false" || value == "0" || value == "no" || value == "off";
    if (key == "bantime.increment" && !off)
      throw ConfigError(named(jail) + ": bantime.increment needs fail2ban's ban database; gpufilterd bans for bantime");
    if (key == "ignorecommand")
      throw ConfigError(named(jail) + ": ignorecommand is not supported (gpufilterd runs no command to decide a failure)");
    if (key == "logtimezone")
      throw ConfigError(named(jail) + ": logtimezone is not supported (set the filter's datepattern with %z)");
  }
  if (jail.maxretry < 1) throw ConfigError(named(jail) + ": maxretry " + std::to_string(jail.maxretry) + " is below 1");
  if (!(jail.findtime > 0)) throw ConfigError(named(jail) + ": findtime must be above 0");
  if (jail.bantime < 0 && jail.bantime != -1)
    throw ConfigError(named(jail) + ": bantime below 0 other than -1 (permanent) would end every ban at once");
}

// fail2ban skips an [INCLUDES] file that does not exist, and the filter then fails on what
// it lacked (an interpolation key, a tag): the error names the missing file too.
std::string missing_includes(const std::string& dir, const std::string& filter) {
  const std::string file = filter.find('/') != std::string::npos ? filter : dir + "/filter.d/" + filter + ".conf";
  std::string missing;
  try {
    fail2ban::ConfigParser cfg;
    if (cfg.read({file}).empty() || !cfg.has_section("INCLUDES")) return missing;
    for (const char* key : {"before", "after"}) {
      std::istringstream lines(cfg.get("INCLUDES", key).value_or(""));
      for (std::string item; std::getline(lines, item);) {
        if (item.empty()) continue;
        const std::string path = item[0] == '/' ? item : std::filesystem::path(file).parent_path().string() + "/" + item;
        if (!std::filesystem::exists(path)) missing += (missing.empty() ? "" : ", ") + path;
      }
    }
  } catch (const std::exception&) {
    return missing;
  }
  return missing.empty() ? missing : " (its [INCLUDES] names " + missing + ", which does not exist)";
}

Millis millis(double seconds) { return Millis(static_cast<std::int64_t>(std::llround(seconds * 1000))); }

// fail2ban's backend options, `systemd[journalpath=/x, journalfiles="a b"]`: key=value
// pairs split at commas, quotes around a value taken off.
std::map<std::string, std::string> backend_options(const std::string& backend, const std::string& who) {
  std::map<std::string, std::string> out;
  const std::size_t open = backend.find('[');
  if (open == std::string::npos) return out;
  const std::size_t close = backend.rfind(']');
  if (close == std::string::npos || close < open) throw ConfigError(who + ": " + backend + ": no ] closes its options");
  const std::string inner = backend.substr(open + 1, close - open - 1);
  const auto trim = [](std::string v) {
    const std::size_t b = v.find_first_not_of(" \t"), e = v.find_last_not_of(" \t");
    v = b == std::string::npos ? "" : v.substr(b, e - b + 1);
    if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front()) v = v.substr(1, v.size() - 2);
    return v;
  };
  std::size_t at = 0;
  while (at <= inner.size()) {
    std::size_t comma = at;
    char quote = 0;
    for (; comma < inner.size(); ++comma) {
      const char c = inner[comma];
      if (quote != 0) {
        if (c == quote) quote = 0;
      } else if (c == '"' || c == '\'') {
        quote = c;
      } else if (c == ',') {
        break;
      }
    }
    const std::string item = inner.substr(at, comma - at);
    at = comma + 1;
    if (item.find_first_not_of(" \t") == std::string::npos) continue;
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos) throw ConfigError(who + ": backend option \"" + trim(item) + "\" is not key=value");
    out[trim(item.substr(0, eq))] = trim(item.substr(eq + 1));
  }
  return out;
}

// shlex.split(line) in its POSIX mode: words at white space, quotes taken off, a
// backslash escaping the next character outside single quotes.
std::vector<std::string> shlex_split(const std::string& line) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quote == '\'') {
      if (c == '\'') quote = 0;
      else word += c;
    } else if (quote == '"') {
      if (c == '"') quote = 0;
      else if (c == '\\' && i + 1 < line.size() && (line[i + 1] == '"' || line[i + 1] == '\\')) word += line[++i];
      else word += c;
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == '\\' && i + 1 < line.size()) {
      word += line[++i];
      in_word = true;
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

}  // namespace

JournalConfig journal_reader_config(const JournalSourceConfig& j, std::size_t max_line_bytes, std::uint32_t origin) {
  JournalConfig c;
  c.journalctl = j.journalctl;
  c.directory = j.directory;
  c.files = j.files;
  c.system_only = j.system_only;
  c.ns = j.ns;
  c.matches = j.matches;
  if (j.since)
    c.since = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch() - *j.since).count();
  c.from_start = j.from_start;
  c.follow = j.follow;
  c.name = j.name;
  c.origin = origin;
  c.max_line_bytes = max_line_bytes;
  return c;
}

std::vector<std::string> journal_matches(const std::string& value, bool last_line_only) {
  std::vector<std::string> out;
  std::istringstream lines(value);
  for (std::string line; std::getline(lines, line);) {
    std::vector<std::string> words = shlex_split(line);
    if (words.empty()) continue;
    if (last_line_only) out.clear();
    else if (!out.empty()) out.emplace_back("+");
    out.insert(out.end(), words.begin(), words.end());
  }
  return out;
}

JournalSourceConfig systemd_backend(const std::string& backend, const std::string& who) {
  JournalSourceConfig j;
  const std::map<std::string, std::string> options = backend_options(backend, who);
  for (const auto& [key, value] : options) {
    if (key == "journalpath") {
      j.directory = value;
    } else if (key == "journalfiles") {
      std::istringstream words(value);
      for (std::string w; words >> w;)
        for (std::string& f : expand(w))
          if (std::find(j.files.begin(), j.files.end(), f) == j.files.end()) j.files.push_back(std::move(f));
      if (j.files.empty()) throw ConfigError(who + ": no journal file matches journalfiles " + value);
    } else if (key == "journalflags") {
      // sd_journal_open's flags: 1 LOCAL_ONLY (journalctl's own default), 4 SYSTEM.
      if (value != "0" && value != "1" && value != "4" && value != "5")
        throw ConfigError(who + ": journalflags " + value + " is not supported (0, 1, 4 or 5: local and system)");
      j.system_only = value == "4" || value == "5";
    } else if (key == "namespace") {
      j.ns = value;
    } else {
      throw ConfigError(who + ": backend option " + key + " is not journalpath, journalfiles, journalflags or namespace");
    }
  }
  if (!j.directory.empty() && !j.files.empty()) throw ConfigError(who + ": journalpath and journalfiles both set");
  // fail2ban's default flags: SYSTEM_ONLY, where no file or folder is named.
  if (j.files.empty() && j.directory.empty() && !options.contains("journalflags")) j.system_only = true;
  return j;
}

namespace {

// A `backend = systemd` jail's source: the journal as fail2ban's FilterSystemd reads it
// (journalctl with the filter's journalmatch, or the jail's), from findtime before the
// start (fail2ban seeks there) unless the jails are read from the start.
SourceConfig journal_source(const Jail& jail, const JailsConfig& jails) {
  SourceConfig s;
  s.kind = SourceConfig::Kind::kJournal;
  s.journal = systemd_backend(jail.backend, named(jail));
  JournalSourceConfig& j = s.journal;
  j.name = "journal:" + jail.name;
  std::string match;
  if (const auto it = jail.filter_overrides.find("journalmatch"); it != jail.filter_overrides.end()) {
    match = it->second;
  } else {
    try {
      match = fail2ban::read_filter(jails.dir, jail.filter, jail.filter_options).journalmatch.value_or("");
    } catch (const std::exception&) {  // jail_rule() reports what is wrong with the filter
    }
  }
  j.matches = journal_matches(match);
  if (jails.from_start) j.from_start = true;
  else j.since = millis(jail.findtime);
  return s;
}


// The rule of one jail: its filter (loaded now, so that --check and a reload refuse one
// fail2ban cannot read), maxretry/findtime as the threshold, bantime as the cooldown.
RuleConfig jail_rule(const Jail& jail, const std::string& dir, const std::vector<std::string>& files) {
  RuleConfig r;
  r.name = jail.name;
  r.where = jail.where;
  if (jail.filter.empty())
    throw ConfigError(named(jail) + ": no filter (fail2ban runs such a jail finding nothing)");
  r.fail2ban_filter = jail.filter;
  r.fail2ban_options = jail.filter_options;
  r.fail2ban_dir = dir;
  try {
    fail2ban::FilterOptions options;
    options.config_dir = dir;
    options.values = r.fail2ban_options;
    (void)fail2ban::Filter::load(r.fail2ban_filter, options);
  } catch (const std::exception& e) {
    throw ConfigError(named(jail) + ": filter " + jail.filter + ": " + e.what() + missing_includes(dir, jail.filter));
  }
  r.threshold.count = static_cast<std::uint64_t>(jail.maxretry);
  r.threshold.window = millis(jail.findtime);
  r.threshold.group_by = ThresholdConfig::GroupBy::kCapture;
  r.threshold.capture = "host";
  r.threshold.fail2ban = true;
  const Millis ban = jail.bantime == -1 ? Millis(36500LL * 86'400'000) : millis(jail.bantime);
  r.cooldown = ban;
  r.resolve_after = std::max(ban, Millis(1));  // the unban: bantime after the host's last failure
  r.labels = {{"jail", jail.name}, {"filter", jail.filter}, {"user", "{{user}}"}};
  r.ignore_hosts = jail.ignoreip;
  if (jail.ignoreself) {  // fail2ban's ignoreself: the host's own addresses (from /etc/hosts)
    const std::vector<std::string> self = fail2ban::self_addresses();
    r.ignore_hosts.insert(r.ignore_hosts.end(), self.begin(), self.end());
  }
  r.only_sources = files;
  return r;
}

}  // namespace

void add_fail2ban_jails(const JailsConfig& jails, DaemonConfig& config) {
  std::vector<Jail> read;
  try {
    read = fail2ban::read_jails(jails.dir, jails.only);
  } catch (const fail2ban::Fail2banError& e) {
    throw ConfigError(std::string("fail2ban jails: ") + e.what());
  }
  if (read.empty())
    throw ConfigError("fail2ban jails: " + jails.dir + " enables no jail (enabled = true in jail.local or jail.d/)");
  // Every file once: those a source already follows, then one source per backend kind.
  std::vector<std::string> followed;
  for (const SourceConfig& s : config.sources)
    if (s.kind == SourceConfig::Kind::kFollow) followed.insert(followed.end(), s.paths.begin(), s.paths.end());
  SourceConfig notify, polling;
  notify.from_start = polling.from_start = jails.from_start;
  notify.state = jails.state;
  polling.poll_interval = Millis(1000);  // fail2ban's polling backend looks every second
  for (const Jail& jail : read) {
    refuse_unsupported(jail);
    for (const RuleConfig& r : config.rules)
      if (r.name == jail.name)
        throw ConfigError(named(jail) + ": a rule named \"" + jail.name + "\" exists already (" + r.where + ")");
    if (jail.backend.substr(0, jail.backend.find('[')) == "systemd") {  // no logpath: the journal
      SourceConfig journal = journal_source(jail, jails);
      config.rules.push_back(jail_rule(jail, jails.dir, {journal.journal.name}));
      config.sources.push_back(std::move(journal));
      continue;
    }
    std::vector<std::string> files;
    for (const std::string& p : jail.logpaths)
      for (std::string& f : expand(p))
        if (std::find(files.begin(), files.end(), f) == files.end()) files.push_back(std::move(f));
    if (files.empty()) {
      std::string paths;
      for (const std::string& p : jail.logpaths) paths += (paths.empty() ? "" : ", ") + p;
      throw ConfigError(named(jail) + ": no log file matches logpath " + (paths.empty() ? "(none set)" : paths) +
                        " (fail2ban refuses to start it: \"Have not found any log file for " + jail.name + " jail\")");
    }
    SourceConfig& into = jail.backend == "polling" ? polling : notify;
    for (const std::string& f : files) {
      if (std::find(followed.begin(), followed.end(), f) != followed.end()) continue;
      followed.push_back(f);
      into.paths.push_back(f);
    }
    config.rules.push_back(jail_rule(jail, jails.dir, files));
  }
  if (!notify.paths.empty()) config.sources.push_back(std::move(notify));
  if (!polling.paths.empty()) {
    if (!jails.state.empty()) polling.state = jails.state + ".polling";
    config.sources.push_back(std::move(polling));
  }
}

}  // namespace gpufilter::daemon
