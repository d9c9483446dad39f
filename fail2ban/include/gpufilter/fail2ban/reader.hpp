// fail2ban's FilterReader (client/filterreader.py, configreader.py): the files of one
// filter (filter.d/NAME.conf, NAME.d/*.conf, NAME.local, NAME.d/*.local, their includes),
// [Definition] read with the jail's options (`sshd[mode=aggressive]`) as interpolation
// variables, [Init] options as defaults for those, then <tag> substitution
// (helpers.substituteRecursiveTags) over the combined options.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gpufilter::fail2ban {

struct FilterDefinition {
  std::string file;  // the filter's main file
  std::optional<std::string> prefregex, datepattern, usedns;
  std::optional<std::string> journalmatch;  // the systemd backend's (journalctl's matches)
  std::optional<int> maxlines;
  std::vector<std::string> failregex, ignoreregex;  // one entry per non-empty line
};

// `name_or_path` as fail2ban-regex takes it: a name ("sshd", "sshd.conf") is looked up as
// <config_dir>/filter.d/<name>.conf with its .local files; a path in a filter.d folder as
// that folder's filter; any other path is read alone, with its includes. Throws
// Fail2banError where fail2ban would refuse the filter (no file, a bad interpolation,
// self-referencing tags).
FilterDefinition read_filter(const std::string& config_dir, const std::string& name_or_path,
                             const std::map<std::string, std::string>& init_options);

// substituteRecursiveTags(tags, addrepl=lookup): <name> replaced by the value of tag
// `name` (or lookup(name)) until no replacement is left; unknown tags stay as written.
using TagLookup = std::optional<std::string> (*)(const void* context, const std::string& name);
std::vector<std::pair<std::string, std::string>> substitute_recursive_tags(
    std::vector<std::pair<std::string, std::string>> tags, const std::vector<std::string>& ignore,
    TagLookup lookup, const void* context);

}  // namespace gpufilter::fail2ban
