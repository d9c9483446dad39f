// fail2ban's jails (client/jailsreader.py, jailreader.py, configreader.py of 1.0.2), read
// into a neutral form that gpufilterd turns into sources and rules: jail.conf,
// jail.d/*.conf, jail.local, jail.d/*.local (each with its [INCLUDES], paths-debian.conf
// and the like), [DEFAULT] and per-jail values with fail2ban's interpolation; only the
// enabled jails. Nothing is resolved, nothing is globbed here: logpath entries are
// returned as written (the caller expands them, as fail2ban's JailReader.convert does).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpufilter::fail2ban {

struct Jail {
  std::string name;
  std::string where;  // "FILE:LINE" where the jail's `enabled` (else its section) was last set, for messages
  // `filter = NAME[opt=val, ...]`: the filter's name (filter.d/NAME) and its options,
  // interpolated as fail2ban does (`%(__name__)s[mode=%(mode)s]` in jail.conf). "": no filter.
  std::string filter;
  std::map<std::string, std::string> filter_options;
  // One entry per line of `logpath`, a trailing " head" or " tail" cut off (`tail` set
  // when any entry says tail: start at the end of the file).
  std::vector<std::string> logpaths;
  bool tail = false;
  std::string backend = "auto";
  int maxretry = 5;
  double findtime = 600;  // seconds (MyTime.str2seconds)
  double bantime = 600;   // seconds; -1: permanent
  std::vector<std::string> ignoreip;  // splitwords(ignoreip): addresses, CIDR, names
  bool ignoreself = true;             // the host's own addresses are ignored (self_addresses())
  std::optional<std::string> usedns;
  // Filter options the jail sets itself (failregex, ignoreregex, prefregex, maxlines,
  // datepattern, journalmatch), as fail2ban would send them after the filter's.
  std::map<std::string, std::string> filter_overrides;
  // Options fail2ban's jail knows that change what it bans, read but not applied here:
  // the caller refuses or documents them (bantime.increment, ignorecommand ...).
  std::map<std::string, std::string> other;
};

// The enabled jails of `config_dir` (holding jail.conf ...), in name order. `only`, when
// not empty: these jails whether enabled or not (fail2ban-client's force_enable for named
// jails), and an error for a name without a section. Throws Fail2banError naming the file
// (and the jail) for what fail2ban would refuse: no jail.conf/jail.local, a malformed file,
// a bad interpolation, a filter definition fail2ban cannot split, a maxretry that is no
// number, a time that is no time.
std::vector<Jail> read_jails(const std::string& config_dir, const std::vector<std::string>& only = {});

// The host's own addresses, which a jail with ignoreself (fail2ban's default) ignores:
// fail2ban's DNSUtils.getSelfIPs resolves "localhost", the host name and its fully
// qualified name. Here they are looked up in `hosts_file` only, never in DNS: the
// addresses of its lines that name localhost or this host (gethostname(), and the other
// names of that host's lines), in the canonical text of each; 127.0.0.1 when no line names
// localhost (the resolver's answer for it).
std::vector<std::string> self_addresses(const std::string& hosts_file = "/etc/hosts");

// MyTime.str2seconds: "10m", "1h 30m", "600", "1d", "-1", "2w", "1mo", "1y"; nullopt when
// fail2ban could not evaluate it either.
std::optional<double> str2seconds(std::string_view text);

// helpers.extractOptions: "sshd[mode=aggressive, port=\"22\"]" -> ("sshd", {mode, port}).
// Throws Fail2banError("", 0, reason) on a syntax fail2ban refuses.
std::pair<std::string, std::map<std::string, std::string>> extract_options(const std::string& text);

// An ignoreip entry: an IPv4 or IPv6 address with an optional /prefix (IPv4 also as a
// dotted mask, as fail2ban's IPAddr reads "10.0.0.0/255.0.0.0"), or anything else as text
// that is compared with a failure's id as it stands (a host name: never resolved).
struct IgnoreEntry {
  bool network = false;
  bool v6 = false;
  std::array<std::uint8_t, 16> addr{};
  int prefix = 0;
  std::string text;  // !network
};
IgnoreEntry parse_ignore(const std::string& text);
// Whether a failure's id (an address as the filter reported it, or a name) is ignored.
bool ignored(const std::vector<IgnoreEntry>& list, std::string_view id);
// The same for entries as written (each parsed per call: failures are few).
bool ignored(const std::vector<std::string>& list, std::string_view id);

}  // namespace gpufilter::fail2ban
