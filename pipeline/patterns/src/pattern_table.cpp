#include "gpufilter/patterns/pattern_table.hpp"

#include <algorithm>
#include <bit>
#include <numeric>
#include <utility>

#include "gpufilter/core/errors.hpp"

namespace gpufilter {

namespace {

// The patterns' folded bytes: views of the patterns themselves, or of one folded copy.
std::vector<std::string_view> folded_patterns(const PatternSet& patterns, bool ignore_case, std::string& storage) {
  const std::size_t n = patterns.size();
  std::vector<std::string_view> folded(n);
  if (!ignore_case) {
    for (std::size_t i = 0; i < n; ++i) folded[i] = patterns[i];
    return folded;
  }
  std::size_t total = 0;
  for (std::size_t i = 0; i < n; ++i) total += patterns[i].size();
  storage.reserve(total);
  for (std::size_t i = 0; i < n; ++i)
    for (char c : patterns[i]) storage.push_back(static_cast<char>(fold_byte(static_cast<unsigned char>(c), true)));
  std::size_t at = 0;
  for (std::size_t i = 0; i < n; ++i) {
    folded[i] = std::string_view(storage).substr(at, patterns[i].size());
    at += patterns[i].size();
  }
  return folded;
}

// The pattern indices in the folded patterns' byte order. Sorted by their first eight
// bytes as one big-endian number (zero-padded: a shorter string comes first), the whole
// strings compared only where those are equal: a million patterns in a tenth of the
// time of comparing strings throughout. Each carries its bytes, so that the trie's pass
// reads them in order.
struct SortedPattern {
  std::uint64_t prefix;
  std::string_view bytes;
  std::uint32_t index;
};

std::vector<SortedPattern> sorted_order(const std::vector<std::string_view>& folded) {
  std::vector<SortedPattern> keys(folded.size());
  for (std::size_t i = 0; i < folded.size(); ++i) {
    std::uint64_t prefix = 0;
    const std::string_view s = folded[i];
    for (std::size_t k = 0; k < 8; ++k)
      prefix = prefix << 8 | (k < s.size() ? static_cast<unsigned char>(s[k]) : 0u);
    keys[i] = {prefix, s, static_cast<std::uint32_t>(i)};
  }
  std::sort(keys.begin(), keys.end(), [](const SortedPattern& a, const SortedPattern& b) {
    if (a.prefix != b.prefix) return a.prefix < b.prefix;
    return a.bytes < b.bytes;
  });
  return keys;
}

std::uint32_t edge_home(std::uint64_t key, std::uint32_t mask) noexcept {
  return static_cast<std::uint32_t>((key * 0x9E3779B97F4A7C15ull) >> 32) & mask;
}

}  // namespace

// The trie is built from the sorted distinct patterns in one pass: each pattern shares
// its longest common prefix with the previous one and adds nodes only for the rest.
PatternTable::PatternTable(const PatternSet& patterns, MatchOptions options)
    : options_(options), root_next_(256, kNoNode), root_pairs_(256 * 256, kNoNode) {
  const std::size_t n = patterns.size();
  std::string storage;
  const std::vector<std::string_view> folded = folded_patterns(patterns, options.ignore_case, storage);
  std::size_t total = 0;
  for (std::string_view s : folded) {
    max_length_ = std::max(max_length_, s.size());
    has_nul_ = has_nul_ || s.find('\0') != std::string_view::npos;
    total += s.size();
  }
  if (max_length_ >= (std::size_t{1} << 31)) throw PatternError(0, "pattern longer than 2 GiB");

  unique_of_pattern_.assign(n, kNoPattern);
  node_pattern_.reserve(std::min<std::size_t>(total + 1, 0xfffffff0u));
  node_pattern_.push_back(kNoPattern);  // root
  std::vector<Edge> edges;  // below depth 1
  edges.reserve(std::min<std::size_t>(total, 0xfffffff0u));
  std::vector<std::uint32_t> path{0};  // path[d]: node at depth d of the previous pattern
  std::string_view previous;
  bool any = false;
  for (const SortedPattern& sorted : sorted_order(folded)) {
    const std::string_view s = sorted.bytes;
    const std::uint32_t index = sorted.index;
    if (s.empty()) {
      has_empty_ = true;
      continue;
    }
    if (any && previous == s) {
      unique_of_pattern_[index] = node_pattern_[path[s.size()]];
      continue;
    }
    std::size_t common = 0;
    if (any) {
      const std::size_t limit = std::min(previous.size(), s.size());
      while (common < limit && previous[common] == s[common]) ++common;
    }
    path.resize(common + 1);
    for (std::size_t d = common; d < s.size(); ++d) {
      if (node_pattern_.size() >= 0xfffffff0u) throw PatternError(index, "pattern set too large for the device trie");
      const auto node = static_cast<std::uint32_t>(node_pattern_.size());
      node_pattern_.push_back(kNoPattern);
      const auto byte = static_cast<unsigned char>(s[d]);
      if (d == 0) {
        root_next_[byte] = node;
      } else {
        if (d == 1) root_pairs_[std::size_t{static_cast<unsigned char>(s[0])} << 8 | byte] = node;
        edges.push_back({path[d], byte, node});
      }
      path.push_back(node);
    }
    const auto id = static_cast<std::uint32_t>(unique_length_.size());
    unique_length_.push_back(static_cast<std::uint32_t>(s.size()));
    unique_start_.push_back(unique_bytes_.size());
    unique_bytes_ += s;
    node_pattern_[path[s.size()]] = id;
    unique_of_pattern_[index] = id;
    previous = s;
    any = true;
  }
  lay_out_edges(edges);
  fill_prefix_words();
}

// Four words for each pattern of three bytes or more (between 1 Ki and 1 Mi words), so
// that few prefixes share a word.
void PatternTable::fill_prefix_words() {
  std::size_t long_patterns = 0;
  for (std::uint32_t length : unique_length_) long_patterns += length >= 3 ? 1 : 0;
  const std::size_t words = std::bit_ceil(std::clamp<std::size_t>(long_patterns * 4, 1024, std::size_t{1} << 20));
  prefix_shift_ = 32u - static_cast<std::uint32_t>(std::countr_zero(words));
  prefix_words_.assign(words, 0);
  for (std::uint32_t id = 0; id < unique_count(); ++id) {
    const std::string_view s = unique_pattern(id);
    if (s.size() < 3) continue;
    const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
    std::uint32_t& word = prefix_words_[prefix_word(byte(0), byte(1), byte(2), prefix_shift_)];
    word |= s.size() == 3 ? 1u : 1u << prefix_bit(byte(3));
  }
}

// The edges below the root's children (those from the root are root_next_'s) go to a
// hash table at most half full.
void PatternTable::lay_out_edges(const std::vector<Edge>& edges) {
  const std::size_t deep = edges.size();
  const std::size_t table_size = std::bit_ceil(std::max<std::size_t>(16, deep * 2));
  edge_mask_ = static_cast<std::uint32_t>(table_size - 1);
  edge_slots_.assign(table_size, EdgeSlot{kEmptyKey, kNoNode});
  // Inserted in the order of their home slots (a counting sort on the slot's high bits),
  // so that the probes walk the table nearly in order instead of missing the cache at
  // every edge: a million patterns' 12 million edges in a fraction of the time.
  const unsigned bucket_bits = std::min(12u, static_cast<unsigned>(std::bit_width(table_size)) - 1);
  const unsigned shift = static_cast<unsigned>(std::bit_width(table_size)) - 1 - bucket_bits;
  std::vector<std::uint32_t> start((std::size_t{1} << bucket_bits) + 1, 0);
  for (const Edge& e : edges) ++start[(edge_home(e.key(), edge_mask_) >> shift) + 1];
  for (std::size_t b = 1; b < start.size(); ++b) start[b] += start[b - 1];
  struct Entry {
    std::uint64_t key;
    std::uint32_t child;
  };
  std::vector<Entry> by_home(deep);
  for (const Edge& e : edges) by_home[start[edge_home(e.key(), edge_mask_) >> shift]++] = {e.key(), e.child};
  for (const Entry& e : by_home) {
    std::uint32_t h = edge_home(e.key, edge_mask_);
    while (edge_slots_[h].key != kEmptyKey) h = (h + 1) & edge_mask_;
    edge_slots_[h] = {e.key, e.child};
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
