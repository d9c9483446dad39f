#include "gpufilter/fail2ban/reader.hpp"

#include <algorithm>
#include <filesystem>
#include <set>
#include <sstream>

#include "gpufilter/fail2ban/errors.hpp"
#include "gpufilter/fail2ban/ini.hpp"

namespace gpufilter::fail2ban {
namespace {

constexpr int kMaxTagReplaceCount = 25;  // helpers.MAX_TAG_REPLACE_COUNT

// FilterReader._configOpts, in its order.
const char* const kConfigOptions[] = {"usedns", "prefregex", "ignoreregex", "failregex",
                                      "maxlines", "datepattern", "journalmatch"};

using Ordered = std::vector<std::pair<std::string, std::string>>;

std::string* find(Ordered& tags, const std::string& name) {
  for (auto& [k, v] : tags) {
    if (k == name) return &v;
  }
  return nullptr;
}

void put(Ordered& tags, const std::string& name, const std::string& value) {
  if (std::string* v = find(tags, name)) {
    *v = value;
  } else {
    tags.emplace_back(name, value);
  }
}

struct TagMatch {
  std::size_t start, end;
  std::string name;
};

// TAG_CRE = <([^ <>]+)>
std::optional<TagMatch> search_tag(const std::string& value, std::size_t from) {
  for (std::size_t at = value.find('<', from); at != std::string::npos; at = value.find('<', at + 1)) {
    std::size_t j = at + 1;
    while (j < value.size() && value[j] != ' ' && value[j] != '<' && value[j] != '>') ++j;
    if (j > at + 1 && j < value.size() && value[j] == '>') return TagMatch{at, j + 1, value.substr(at + 1, j - at - 1)};
  }
  return std::nullopt;
}

std::string replace_all(std::string value, const std::string& from, const std::string& to) {
  for (std::size_t at = value.find(from); at != std::string::npos; at = value.find(from, at + to.size())) {
    value.replace(at, from.size(), to);
  }
  return value;
}

std::vector<std::string> existing_files(const std::string& basename) {
  namespace fs = std::filesystem;
  std::vector<std::string> files{basename + ".conf"};
  const auto in_dir = [&](const std::string& ext) {
    std::vector<std::string> found;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(basename + ".d", ec)) {
      if (e.path().extension() == ext) found.push_back(e.path().string());
    }
    std::sort(found.begin(), found.end());
    return found;
  };
  const auto confs = in_dir(".conf");
  files.insert(files.end(), confs.begin(), confs.end());
  files.push_back(basename + ".local");
  const auto locals = in_dir(".local");
  files.insert(files.end(), locals.begin(), locals.end());
  std::vector<std::string> out;
  for (const auto& f : files) {
    if (fs::exists(f)) out.push_back(f);
  }
  return out;
}

struct Lookup {
  const ConfigParser* cfg;
  ConfigParser::Vars vars;
  mutable std::map<std::string, std::optional<std::string>> cache;  // getCombOption's _defCache
};

std::optional<std::string> comb_option(const void* context, const std::string& name) {
  const auto* l = static_cast<const Lookup*>(context);
  if (const auto it = l->cache.find(name); it != l->cache.end()) return it->second;
  return l->cache[name] = l->cfg->get_ex("Definition", name, l->vars);
}

std::vector<std::string> split_lines(const std::string& value) {
  std::vector<std::string> out;
  std::istringstream in(value);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

// getOptions() then getCombined(): [Definition] with the jail's options as variables,
// [Init] under them, tags substituted.
Ordered combined_options(const ConfigParser& cfg, const std::map<std::string, std::string>& init_options,
                         const Lookup& lookup) {
  Ordered opts;
  for (const char* name : kConfigOptions) {
    if (init_options.count(name)) continue;
    if (auto v = cfg.get("Definition", name, lookup.vars)) opts.emplace_back(name, *v);
  }
  Ordered init(init_options.begin(), init_options.end());
  for (const std::string& opt : cfg.options("Init")) {
    const std::string v = cfg.get("Init", opt).value_or("");
    if (opt.rfind("known/", 0) != 0) put(init, "known/" + opt, v);
    if (find(init, opt) == nullptr) init.emplace_back(opt, v);
  }
  for (const auto& [k, v] : init) put(opts, k, v);
  return opts;
}

}  // namespace

Ordered substitute_recursive_tags(Ordered tags, const std::vector<std::string>& ignore_list, TagLookup lookup,
                                  const void* context) {
  const std::set<std::string> ignore(ignore_list.begin(), ignore_list.end());
  std::set<std::string> done;
  std::map<std::string, std::map<std::string, int>> counts;
  for (bool again = true; again;) {
    again = false;
    for (std::size_t t = 0; t < tags.size(); ++t) {
      const std::string tag = tags[t].first;
      if (ignore.count(tag) || done.count(tag)) continue;
      std::string value = tags[t].second;
      const std::string original = value;
      std::map<std::string, int> replaced = counts.count(tag) ? counts[tag] : std::map<std::string, int>{};
      for (auto m = search_tag(value, 0); m;) {
        const std::string rtag = m->name;
        if (ignore.count(rtag)) {
          m = search_tag(value, m->end);
          continue;
        }
        if (rtag == tag || (replaced.count(rtag) ? replaced[rtag] : 1) > kMaxTagReplaceCount) {
          throw Fail2banError("properties contain self referencing definitions and cannot be resolved, fail tag: " +
                              tag + ", found: " + rtag + ", value: " + value);
        }
        std::optional<std::string> repl;
        if (const std::string* v = find(tags, rtag)) repl = *v;
        if (!repl && lookup != nullptr) repl = lookup(context, rtag);
        if (!repl) {  // unknown tags (<HOST>, <F-USER>) are left for the regex stage
          m = search_tag(value, m->end);
          continue;
        }
        value = replace_all(value, "<" + rtag + ">", *repl);
        ++replaced[rtag];
        m = search_tag(value, m->start);
      }
      if (value != original) {
        if (search_tag(value, 0)) {
          counts[tag] = replaced;
          again = true;
        }
        tags[t].second = value;
      }
      if (value.find('<') == std::string::npos) done.insert(tag);
    }
  }
  return tags;
}

namespace {

std::string without_trailing_slashes(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

// fail2ban-regex's readRegex: "sshd", "sshd.conf" or "sshd.local" name a filter of
// CONFIG/filter.d (CONFIG itself when it is a filter.d folder), read with its .local
// files; a path names a file: one in a filter.d folder (or in CONFIG) is read as that
// folder's filter, any other alone, with its own includes only.
struct Located {
  std::string config_dir;           // standard reading: CONFIG/filter.d/NAME.conf, .local, .d/
  std::string name;
  std::optional<std::string> file;  // else this file alone
};

Located locate_filter(const std::string& config, const std::string& value) {
  namespace fs = std::filesystem;
  const std::string config_dir = without_trailing_slashes(config);
  const bool has_extension = value.size() >= 5 && value.substr(value.size() - 5).find('.') != std::string::npos;
  const std::string stem = fs::path(value).stem().string();
  if (value.find('/') == std::string::npos) {
    const bool in_filter_d = fs::path(config_dir).filename() == "filter.d";
    return {in_filter_d ? fs::path(config_dir).parent_path().string() : config_dir, has_extension ? stem : value,
            std::nullopt};
  }
  std::vector<std::string> tries{value};
  if (!has_extension) tries = {value, value + ".conf", value + ".local"};
  for (const std::string& t : tries) {
    std::error_code ec;
    if (!fs::is_regular_file(t, ec)) continue;
    const fs::path dir = fs::path(t).parent_path();
    if (dir.filename() == "filter.d") return {dir.parent_path().string(), stem, std::nullopt};
    if (without_trailing_slashes(dir.string()) == config_dir) return {config_dir, stem, std::nullopt};
    return {config_dir, stem, t};
  }
  throw Fail2banError(value, 0, "no such filter file");
}

}  // namespace

FilterDefinition read_filter(const std::string& config, const std::string& name_or_path,
                             const std::map<std::string, std::string>& init_options) {
  const Located at = locate_filter(config, name_or_path);
  const std::string basename = at.config_dir + "/filter.d/" + at.name;
  const auto files = at.file ? std::vector<std::string>{*at.file} : existing_files(basename);
  FilterDefinition def;
  def.file = at.file ? *at.file : basename + ".conf";
  if (files.empty()) throw Fail2banError(def.file, 0, "no such filter (no .conf or .local file)");
  ConfigParser cfg;
  if (cfg.read(files).empty()) throw Fail2banError(def.file, 0, "cannot read the filter's files");
  // A file of [INCLUDES] and [DEFAULT] alone (apache-common.conf) is a filter of nothing:
  // fail2ban-regex reads it and misses every line.
  if (!cfg.has_section("Definition")) return def;
  Lookup lookup{&cfg, ConfigParser::Vars(init_options.begin(), init_options.end()), {}};
  const Ordered opts = substitute_recursive_tags(combined_options(cfg, init_options, lookup), {}, comb_option, &lookup);
  for (const auto& [k, v] : opts) {
    if (k == "failregex") def.failregex = split_lines(v);
    if (k == "ignoreregex") def.ignoreregex = split_lines(v);
    if (k == "prefregex") def.prefregex = v;
    if (k == "datepattern") def.datepattern = v;
    if (k == "usedns") def.usedns = v;
    if (k == "journalmatch") def.journalmatch = v;
    if (k == "maxlines") {
      try {
        def.maxlines = std::stoi(v);
      } catch (const std::exception&) {  // fail2ban warns and keeps its default
      }
    }
  }
  return def;
}

}  // namespace gpufilter::fail2ban
