#include "reference_matcher.hpp"

#include <algorithm>
#include <set>

namespace gpufilter {

std::vector<Occurrence> reference_occurrences(const PatternSet& patterns, const PatternTable& table,
                                              std::string_view text, std::size_t overlap) {
  const bool fold = table.options().ignore_case;
  std::vector<Occurrence> result;
  std::set<std::uint32_t> done;
  for (std::size_t i = 0; i < patterns.size(); ++i) {
    const std::string& p = patterns[i];
    const std::uint32_t id = table.unique_of(i);
    if (p.empty() || !done.insert(id).second) continue;
    for (std::size_t at = 0; at + p.size() <= text.size(); ++at) {
      if (at + p.size() <= overlap) continue;
      bool equal = true;
      for (std::size_t k = 0; k < p.size() && equal; ++k)
        equal = fold_byte(static_cast<unsigned char>(text[at + k]), fold) ==
                fold_byte(static_cast<unsigned char>(p[k]), fold);
      if (equal) result.push_back({static_cast<std::uint32_t>(at), id});
    }
  }
  std::sort(result.begin(), result.end(),
            [&](const Occurrence& a, const Occurrence& b) { return table.before(a, b); });
  return result;
}

}  // namespace gpufilter
