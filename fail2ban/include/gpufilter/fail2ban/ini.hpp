// fail2ban's configuration reading (client/configparserinc.py over Python 3.11's
// configparser): sections, `name = value` or `name: value`, values continued on indented
// lines, `#`/`;` comment lines and ` ;` inline comments, option names lower-cased,
// [INCLUDES] before/after (each file followed by its .local), later files overriding
// earlier ones option by option (the overridden values kept in section "KNOWN/<name>"),
// and %(name)s / %(section/name)s / %(known/name)s / %(default/name)s interpolation.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gpufilter::fail2ban {

class ConfigParser {
 public:
  struct Value {
    std::string text;
    std::string file;  // where it was defined, for error messages
    int line = 0;
  };
  using Section = std::map<std::string, Value>;
  using Vars = std::map<std::string, std::string>;

  // SafeConfigParserWithIncludes.read(files): each file with its includes and .local
  // files, merged in order. Returns the files read. Throws Fail2banError on a malformed file.
  std::vector<std::string> read(const std::vector<std::string>& files);

  bool has_section(const std::string& section) const;
  // The sections read, in name order, without [DEFAULT], [INCLUDES] and the KNOWN/ copies.
  std::vector<std::string> sections() const;
  // Where the section's own `option` was last defined (no [DEFAULT] lookup), or nullptr.
  const Value* defined(const std::string& section, const std::string& option) const;
  // The section's own option names (no [DEFAULT] ones), in name order.
  std::vector<std::string> options(const std::string& section) const;
  // ConfigParser.get(section, option, vars=vars) with fail2ban's interpolation; nullopt
  // where the section or the option does not exist. Throws Fail2banError when the
  // interpolation fails (a missing key, '%' not followed by '%' or '(', too deep).
  std::optional<std::string> get(const std::string& section, const std::string& option, const Vars& vars = {}) const;
  // get_ex(): `sec/opt` names an option of another section (`known/opt`: the value this
  // section's option had before a later file overrode it).
  std::optional<std::string> get_ex(const std::string& section, const std::string& option, const Vars& vars = {}) const;

 private:
  struct Parsed;
  static Parsed parse_file(const std::string& path);
  std::vector<std::string> includes(const std::vector<std::string>& files, const std::vector<std::string>& seen) const;
  std::vector<std::string> includes_of(const std::string& resource, const std::vector<std::string>& seen) const;
  void merge(const Parsed& parsed);
  const Value* find_raw(const std::string& section, const std::string& option, const Vars& vars) const;
  void interpolate(const std::string& section, const Value& where, const std::string& rest, Vars mapped,
                   const Vars& vars, int depth, std::string& out) const;
  void map_section_options(const std::string& section, const std::string& rest, Vars& mapped, const Vars& vars) const;

  Section defaults_;
  std::map<std::string, Section> sections_;
};

}  // namespace gpufilter::fail2ban
