// fail2ban's failregex tags (server/failregex.py Regex._resolveHostTag): <HOST>, <ADDR>,
// <IP4>, <IP6>, <DNS>, <CIDR>, <SUBNET>, <F-ID/>, <F-PORT/> and friends become fail2ban's
// own sub-expressions, <F-NAME>...</F-NAME> a named group `name` (F-ID -> fid,
// F-PORT -> fport), <SKIPLINES> a run of skipped lines; then ((?i)...) is turned into
// (?i:...) as fail2ban does. The result is still Python syntax (PyRegex compiles it).
#pragma once

#include <string>
#include <string_view>

namespace gpufilter::fail2ban {

// usedns "no" makes <HOST> an address only; anything else ("warn", "yes", "raw") lets it
// also match a host name (never resolved here).
std::string resolve_tags(std::string_view regex, std::string_view usedns);

// The sub-expression <HOST> stands for (fail2ban's R_HOST[RI_HOST]).
std::string host_expression();

}  // namespace gpufilter::fail2ban
