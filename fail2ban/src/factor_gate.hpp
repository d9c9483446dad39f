// FactorGate: which of a filter's regexes a text can match at all, decided by one
// Hyperscan literal scan instead of a PCRE2 search per regex. Each regex's required
// factors (regex/factors.hpp: an OR-set, one of which every match contains) are looked for
// in the text; a regex none of whose factors it holds cannot match it, so its search would
// find nothing and is not made. fail2ban-regex tries every failregex on every line (sshd:
// about twenty, most of them failing), the daemon up to the first that matches.
// A regex without factors is always searched. One gate per Filter, used by one thread at a
// time, as the Filter is; another thread searching the filter's regexes takes a copy().
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

struct hs_database;
struct hs_scratch;

namespace gpufilter::fail2ban {

class FactorGate {
 public:
  FactorGate() = default;
  ~FactorGate();
  FactorGate(const FactorGate&) = delete;
  FactorGate& operator=(const FactorGate&) = delete;

  // Adds a regex with its factors (nullopt: none known) and returns its number for
  // may_match(). Call before build().
  std::size_t add(const std::optional<std::vector<std::string>>& factors);
  // Compiles the factors of every regex added. Where Hyperscan refuses them (it never
  // should), the gate stays open: every regex is searched, as without it.
  void build();
  // A gate for another thread: the same compiled factors, its own scan state.
  std::unique_ptr<FactorGate> copy() const;
  // Whether regex `regex` may match `text` (false: it cannot). The text is scanned once
  // for all regexes, again when a text at another address or of another length is asked
  // about, or after forget().
  // The check is made for a few dozen regexes a line: the text scanned last is answered
  // here, inline.
  bool may_match(std::size_t regex, std::string_view text) {
    if (regex < masks_.size() && looked_any_ && text.data() == looked_at_ && text.size() == looked_size_) {
      const std::uint64_t mask = masks_[regex];  // 0: a regex without factors
      return mask == 0 || !looked_valid_ || (present_[0] & mask) != 0;
    }
    return may_match_slow(regex, text);
  }
  // The memory of the texts asked about may hold other text now (a buffer refilled in
  // place): the next may_match() scans again. Comparing the text with the one scanned
  // instead cost a whole line's memcmp per regex (sshd tries 23 a line).
  void forget() noexcept { looked_any_ = false; }

 private:
  bool may_match_slow(std::size_t regex, std::string_view text);
  void look(std::string_view text);

  std::vector<std::vector<std::uint32_t>> regex_literals_;  // per regex: its factors' ids
  std::vector<std::uint64_t> masks_;  // per regex: those ids as bits (0: none), where all ids are under 64
  std::vector<char> always_;  // per regex: no factors, always searched (not vector<bool>: a fifth of a check)
  std::vector<std::string> literals_;                        // by id
  std::vector<std::uint64_t> present_;                       // found in the text scanned last, a bit per id
  const char* looked_at_ = nullptr;                          // the text present_ is for
  std::size_t looked_size_ = 0;
  bool looked_any_ = false;    // a text was scanned (and not forgotten since)
  bool looked_valid_ = false;  // and the scan succeeded
  std::shared_ptr<const hs_database> database_;  // null: the gate is open (shared by copies)
  hs_scratch* scratch_ = nullptr;
};

}  // namespace gpufilter::fail2ban
