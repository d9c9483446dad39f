#include "gpufilter/patterns/pattern_set.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <functional>

#include "gpufilter/core/workers.hpp"

namespace gpufilter {

void PatternSet::add(std::string_view pattern) {
  has_empty_ = has_empty_ || pattern.empty();
  max_length_ = std::max(max_length_, pattern.size());
  patterns_.emplace_back(pattern);
}

// grep appends '\n' to each -e argument and to a -f file that lacks a final one, then
// splits on '\n'; the final terminator does not start another pattern.
void PatternSet::add_list(std::string_view text) {
  std::size_t start = 0;
  for (;;) {
    const std::size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) {
      add(text.substr(start));
      return;
    }
    add(text.substr(start, nl - start));
    start = nl + 1;
  }
}

void PatternSet::add_file_contents(std::string_view contents) {
  if (contents.empty()) return;
  if (contents.back() == '\n') contents.remove_suffix(1);
  add_list(contents);
}

std::vector<std::size_t> first_of_each(const std::vector<std::string>& patterns) {
  constexpr std::size_t kFree = ~std::size_t{0};
  const std::size_t size = std::bit_ceil(std::max<std::size_t>(16, patterns.size() * 2));
  std::vector<std::size_t> slots(size, kFree);
  std::vector<std::size_t> first;
  const std::hash<std::string_view> hash;
  for (std::size_t i = 0; i < patterns.size(); ++i) {
    for (std::size_t h = hash(patterns[i]) & (size - 1);; h = (h + 1) & (size - 1)) {
      if (slots[h] == kFree) {
        slots[h] = i;
        first.push_back(i);
        break;
      }
      if (patterns[slots[h]] == patterns[i]) break;
    }
  }
  return first;
}

std::size_t distinct_count(const std::vector<std::string>& patterns) {
  const std::size_t n = patterns.size();
  if (n < (std::size_t{1} << 16) || n >= UINT32_MAX) return first_of_each(patterns).size();
  // Slot values are a pattern's index + 1 (0: free). Two equal patterns probe the same
  // slots, and a claimed slot stays claimed, so the second always meets the first.
  const std::size_t size = std::bit_ceil(n * 2);
  std::vector<std::uint32_t> slots(size, 0);
  std::atomic<std::size_t> distinct{0};
  WorkerPool pool(WorkerPool::default_threads());
  pool.split(n, std::size_t{1} << 14, [&](std::size_t, std::size_t begin, std::size_t end) {
    const std::hash<std::string_view> hash;
    std::size_t found = 0;
    for (std::size_t i = begin; i < end; ++i) {
      for (std::size_t h = hash(patterns[i]) & (size - 1);; h = (h + 1) & (size - 1)) {
        std::atomic_ref<std::uint32_t> slot(slots[h]);
        std::uint32_t held = slot.load(std::memory_order_acquire);
        if (held == 0 && slot.compare_exchange_strong(held, static_cast<std::uint32_t>(i + 1), std::memory_order_acq_rel)) {
          ++found;
          break;
        }
        if (patterns[held - 1] == patterns[i]) break;
      }
    }
    distinct.fetch_add(found, std::memory_order_relaxed);
  });
  return distinct.load();
}

}  // namespace gpufilter
