// OneLiteral: every occurrence of one literal, found as ripgrep's memchr crate finds one
// (its "packed pair"): two of the literal's bytes, those least frequent in logs, compared
// at 32 positions at once (AVX2), each position where both agree confirmed with memcmp.
// Hyperscan's engine for a lone literal (noodle) ran at about half grep's speed here on a
// literal like "INFO" (docs/PERFORMANCE.md). Without AVX2 there is none (usable()).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace gpufilter {

class OneLiteral {
 public:
  // Whether this CPU runs it.
  static bool usable() noexcept;
  explicit OneLiteral(std::string_view literal);

  // Calls report(to) with the end offset of each occurrence in data[0, size) (overlapping
  // ones too), in ascending order, until report returns non-zero: Hyperscan's callback
  // contract (id 0). Returns whether report stopped it. With `drops_until`, after each
  // report the occurrences after it that end at or before *drops_until are not reported:
  // the caller would drop them (a line's later occurrences, where one a line is enough).
  using Report = int (*)(unsigned int id, unsigned long long from, unsigned long long to, unsigned int flags,
                         void* context);
  bool scan(const char* data, std::size_t size, Report report, void* context,
            const unsigned long long* drops_until = nullptr) const noexcept;

 private:
  std::string literal_;
  std::size_t first_ = 0;   // the offsets in literal_ of the two bytes compared
  std::size_t second_ = 0;  // (equal for a literal of one byte)
};

}  // namespace gpufilter
