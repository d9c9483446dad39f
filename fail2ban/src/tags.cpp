#include "gpufilter/fail2ban/tags.hpp"

#include <cctype>
#include <map>

#include "gpufilter/fail2ban/pyregex.hpp"

namespace gpufilter::fail2ban {
namespace {

const std::string kIp4 = R"((?:\d{1,3}\.){3}\d{1,3})";
const std::string kIp6 = R"((?:[0-9a-fA-F]{1,4}::?|::){1,7}(?:[0-9a-fA-F]{1,4}|(?<=:):))";
const std::string kHostIp4 = "(?:::f{4,6}:)?(?P<ip4>" + kIp4 + ")";
const std::string kHostIp6 = "(?P<ip6>" + kIp6 + ")";
const std::string kHostDns = R"((?P<dns>[\w\-.^_]*\w))";
const std::string kCidr = R"((?P<cidr>\d+))";
const std::string kAddr = R"(\[?(?:)" + kHostIp4 + "|" + kHostIp6 + R"()\]?)";
const std::string kHost = "(?:" + kAddr + "|" + kHostDns + ")";
const std::string kSubnet = R"(\[?(?:)" + kHostIp4 + "|" + kHostIp6 + ")(?:/" + kCidr + R"()?\]?)";

const std::map<std::string, std::string>& fixed_tags() {
  static const std::map<std::string, std::string> tags = {
      {"IP4", kHostIp4},   {"F-IP4/", kHostIp4},   {"IP6", kHostIp6},   {"F-IP6/", kHostIp6},
      {"ADDR", kAddr},     {"F-ADDR/", kAddr},     {"CIDR", kCidr},     {"F-CIDR/", kCidr},
      {"SUBNET", kSubnet}, {"F-SUBNET/", kSubnet}, {"DNS", kHostDns},   {"F-DNS/", kHostDns},
      {"F-ID/", R"((?P<fid>\S+))"}, {"F-PORT/", R"((?P<fport>\w+))"},
  };
  return tags;
}

std::string tag_option(std::string tag) {  // mapTag2Opt
  for (char& c : tag) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (tag == "id") return "fid";
  if (tag == "port") return "fport";
  return tag;
}

bool is_tag_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; }

// FTAG_CRE = </?[\w\-]+/?> : the length of a tag at `at`, or 0.
std::size_t tag_length(std::string_view s, std::size_t at) {
  std::size_t j = at + 1;
  if (j < s.size() && s[j] == '/') ++j;
  const std::size_t name = j;
  while (j < s.size() && is_tag_char(s[j])) ++j;
  if (j == name) return 0;
  if (j < s.size() && s[j] == '/') ++j;
  return j < s.size() && s[j] == '>' ? j + 1 - at : 0;
}

// FCUSTNAME_CRE = ^(/?)F-([A-Z0-9_\-]+)$
bool custom_name(std::string_view tn, bool& closing, std::string& name) {
  closing = !tn.empty() && tn[0] == '/';
  if (closing) tn.remove_prefix(1);
  if (tn.substr(0, 2) != "F-" || tn.size() == 2) return false;
  for (const char c : tn.substr(2)) {
    if (!(std::isupper(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '_' ||
          c == '-')) {
      return false;
    }
  }
  name = std::string(tn.substr(2));
  return true;
}

}  // namespace

std::string host_expression() { return kHost; }

std::string resolve_tags(std::string_view regex, std::string_view usedns) {
  std::string out;
  std::map<std::string, bool> open;
  int skiplines = 0;
  for (std::size_t i = 0; i < regex.size();) {
    const std::size_t len = regex[i] == '<' ? tag_length(regex, i) : 0;
    if (len == 0) {
      out += regex[i++];
      continue;
    }
    const std::string tag(regex.substr(i, len));
    const std::string tn = tag.substr(1, tag.size() - 2);
    i += len;
    bool closing = false;
    std::string name;
    if (tn == "HOST") {
      out += usedns == "no" ? kAddr : kHost;
    } else if (tn == "SKIPLINES") {
      out += R"(\n(?P<skiplines)" + std::to_string(skiplines++) + R"(>(?:(?:.*\n)*?)))";
    } else if (const auto it = fixed_tags().find(tn); it != fixed_tags().end()) {
      out += it->second;
    } else if (custom_name(tn, closing, name)) {
      if (closing) {
        out += open[name] ? ")" : tag;  // a closing tag never opened stays as written
      } else {
        open[name] = true;
        out += "(?P<" + tag_option(name) + ">";
      }
    } else {
      out += tag;
    }
  }
  // R_GLOB2LOCFLAGS: ((?i)...) -> (?i:...), so that Python 3.11 accepts the flags.
  static thread_local const PyRegex glob2loc(R"((?<!\\)\((?:\?:)?(\(\?[a-z]+)\))");
  return py_sub(glob2loc, out, [](const PyRegex::Match& m) { return *m.group(1) + ":"; });
}

}  // namespace gpufilter::fail2ban
