#include "gpufilter/patterns/pattern_table.hpp"

#include <algorithm>
#include <bit>
#include <numeric>
#include <utility>

#include "gpufilter/core/errors.hpp"

namespace gpufilter {

// The trie is built from the sorted distinct patterns in one pass: each pattern shares
// its longest common prefix with the previous one and adds nodes only for the rest.
PatternTable::PatternTable(const PatternSet& patterns, MatchOptions options)
    : options_(options), root_next_(256, kNoNode), root_pairs_(256 * 256, kNoNode) {
  const std::size_t n = patterns.size();
  std::vector<std::string> folded(n);
  for (std::size_t i = 0; i < n; ++i) {
    folded[i] = patterns[i];
    for (char& c : folded[i]) c = static_cast<char>(fold_byte(static_cast<unsigned char>(c), options.ignore_case));
    max_length_ = std::max(max_length_, folded[i].size());
    has_nul_ = has_nul_ || folded[i].find('\0') != std::string::npos;
  }
  if (max_length_ >= (std::size_t{1} << 31)) throw PatternError(0, "pattern longer than 2 GiB");

  std::vector<std::uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) { return folded[a] < folded[b]; });

  unique_of_pattern_.assign(n, kNoPattern);
  node_pattern_.push_back(kNoPattern);  // root
  struct Edge {
    std::uint32_t parent;
    unsigned char byte;
    std::uint32_t child;
  };
  std::vector<Edge> edges;
  std::vector<std::uint32_t> path{0};  // path[d]: node at depth d of the previous pattern
  const std::string* previous = nullptr;
  for (std::uint32_t index : order) {
    const std::string& s = folded[index];
    if (s.empty()) {
      has_empty_ = true;
      continue;
    }
    if (previous != nullptr && *previous == s) {
      unique_of_pattern_[index] = node_pattern_[path[s.size()]];
      continue;
    }
    std::size_t common = 0;
    if (previous != nullptr) {
      const std::size_t limit = std::min(previous->size(), s.size());
      while (common < limit && (*previous)[common] == s[common]) ++common;
    }
    path.resize(common + 1);
    for (std::size_t d = common; d < s.size(); ++d) {
      if (node_pattern_.size() >= 0xfffffff0u) throw PatternError(index, "pattern set too large for the device trie");
      const auto node = static_cast<std::uint32_t>(node_pattern_.size());
      node_pattern_.push_back(kNoPattern);
      edges.push_back({path[d], static_cast<unsigned char>(s[d]), node});
      path.push_back(node);
    }
    const auto id = static_cast<std::uint32_t>(unique_length_.size());
    unique_length_.push_back(static_cast<std::uint32_t>(s.size()));
    unique_start_.push_back(unique_bytes_.size());
    unique_bytes_ += s;
    node_pattern_[path[s.size()]] = id;
    unique_of_pattern_[index] = id;
    previous = &s;
  }

  // Root edges go to the direct table, deeper ones to a hash table at most half full.
  std::size_t deep = 0;
  std::vector<unsigned char> first_byte(node_pattern_.size(), 0);  // of each depth-1 node
  std::vector<bool> depth_one(node_pattern_.size(), false);
  for (const Edge& e : edges) {
    if (e.parent == 0) {
      root_next_[e.byte] = e.child;
      first_byte[e.child] = e.byte;
      depth_one[e.child] = true;
    } else {
      ++deep;
    }
  }
  for (const Edge& e : edges)
    if (e.parent != 0 && depth_one[e.parent]) root_pairs_[std::size_t{first_byte[e.parent]} << 8 | e.byte] = e.child;
  const std::size_t table_size = std::bit_ceil(std::max<std::size_t>(16, deep * 2));
  edge_mask_ = static_cast<std::uint32_t>(table_size - 1);
  edge_keys_.assign(table_size, kEmptyKey);
  edge_values_.assign(table_size, kNoNode);
  for (const Edge& e : edges) {
    if (e.parent == 0) continue;
    const std::uint64_t key = (std::uint64_t{e.parent} << 8) | e.byte;
    std::uint32_t h = static_cast<std::uint32_t>((key * 0x9E3779B97F4A7C15ull) >> 32) & edge_mask_;
    while (edge_keys_[h] != kEmptyKey) h = (h + 1) & edge_mask_;
    edge_keys_[h] = key;
    edge_values_[h] = e.child;
  }
}

void sort_occurrences(std::span<Occurrence> occurrences, std::vector<Occurrence>& buffer, const PatternTable& table) {
  const auto before = [&](const Occurrence& a, const Occurrence& b) { return table.before(a, b); };
  if (occurrences.size() < 512) {
    std::sort(occurrences.begin(), occurrences.end(), before);
    return;
  }
  std::uint32_t max_position = 0;
  for (const Occurrence& o : occurrences) max_position = std::max(max_position, o.position);
  constexpr unsigned kBits = 11;
  constexpr std::size_t kBuckets = std::size_t{1} << kBits;
  buffer.resize(occurrences.size());
  Occurrence* from = occurrences.data();
  Occurrence* to = buffer.data();
  for (unsigned shift = 0; shift < 32 && (shift == 0 || (max_position >> shift) != 0); shift += kBits) {
    std::size_t count[kBuckets] = {};
    for (std::size_t i = 0; i < occurrences.size(); ++i) ++count[(from[i].position >> shift) & (kBuckets - 1)];
    std::size_t sum = 0;
    for (std::size_t& c : count) sum += std::exchange(c, sum);
    for (std::size_t i = 0; i < occurrences.size(); ++i) to[count[(from[i].position >> shift) & (kBuckets - 1)]++] = from[i];
    std::swap(from, to);
  }
  if (from != occurrences.data()) std::copy(from, from + occurrences.size(), occurrences.data());
  for (std::size_t i = 0; i < occurrences.size();) {
    std::size_t j = i + 1;
    while (j < occurrences.size() && occurrences[j].position == occurrences[i].position) ++j;
    if (j - i > 1) std::sort(occurrences.begin() + static_cast<std::ptrdiff_t>(i),
                             occurrences.begin() + static_cast<std::ptrdiff_t>(j), before);
    i = j;
  }
}

}  // namespace gpufilter
