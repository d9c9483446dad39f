// The plain CPU answer the device is checked against: every occurrence of every pattern,
// found by comparing each pattern at each position. Independent of the trie and kernels.
#pragma once

#include <string_view>
#include <vector>

#include "gpufilter/core/chunk.hpp"
#include "gpufilter/patterns/pattern_set.hpp"
#include "gpufilter/patterns/pattern_table.hpp"

namespace gpufilter {

// Occurrences in `text` that end past `overlap` (the chunk ownership rule), sorted like
// ScanSlot::occurrences(): by position, longest first. Ids are table's unique ids.
std::vector<Occurrence> reference_occurrences(const PatternSet& patterns, const PatternTable& table,
                                              std::string_view text, std::size_t overlap = 0);

}  // namespace gpufilter
