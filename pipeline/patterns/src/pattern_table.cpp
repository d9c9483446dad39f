#include "gpufilter/patterns/pattern_table.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <numeric>
#include <utility>

#include "gpufilter/core/errors.hpp"
#include "gpufilter/core/workers.hpp"

namespace gpufilter {

// The patterns that begin with one byte: a subtree of the root, built on a thread of its
// own with nodes and unique ids numbered from 0 (node 0 is the root's child), then
// numbered into the whole in byte order, which gives every node and id the number one
// pass over all the patterns would.
struct TrieBranch {
  // A pattern in the order the trie is built in: by its first eight bytes as one
  // big-endian number (zero-padded: a shorter string comes first), the whole strings
  // compared only where those are equal, a tenth of the time of comparing strings
  // throughout. It carries its bytes, so that the trie's pass reads them in order.
  struct SortedPattern {
    std::uint64_t prefix;
    std::string_view bytes;
    std::uint32_t index;
  };
  struct Edge {
    std::uint32_t parent;
    unsigned char byte;
    std::uint32_t child;
  };
  FillLaterVector<SortedPattern> patterns;
  std::vector<std::uint32_t> node_pattern;       // local unique id, or kNoPattern
  std::vector<Edge> edges;                       // below node 0, local numbers
  std::vector<std::uint32_t> unique_length;
  std::string unique_bytes;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> ids;  // pattern index, local id
  std::uint32_t too_large = PatternTable::kNoPattern;      // a pattern past the node limit
  // Numbers of the branch's first node, first unique id and first unique byte in the whole.
  std::uint32_t node_base = 0;
  std::uint32_t unique_base = 0;
  std::size_t byte_base = 0;
};

namespace {

// The patterns' folded bytes (-i): views of one folded copy of their `total` bytes.
std::vector<std::string_view> folded_patterns(const PatternSet& patterns, std::size_t total, std::string& storage) {
  const std::size_t n = patterns.size();
  std::vector<std::string_view> folded(n);
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

constexpr std::size_t kMaxNodes = 0x7ffffff0u;  // below PatternTable::kEnds

void sort_branch(TrieBranch& b) {
  for (TrieBranch::SortedPattern& p : b.patterns) {
    std::uint64_t prefix = 0;
    for (std::size_t k = 0; k < 8; ++k)
      prefix = prefix << 8 | (k < p.bytes.size() ? static_cast<unsigned char>(p.bytes[k]) : 0u);
    p.prefix = prefix;
  }
  std::sort(b.patterns.begin(), b.patterns.end(), [](const TrieBranch::SortedPattern& x, const TrieBranch::SortedPattern& y) {
    if (x.prefix != y.prefix) return x.prefix < y.prefix;
    return x.bytes < y.bytes;
  });
}

// The subtree in one pass over its sorted patterns: each shares its longest common
// prefix with the previous one and adds nodes only for the rest.
void build_branch(TrieBranch& b) {
  sort_branch(b);
  // Room for the most it can hold (a node per byte), so that no table is copied as it grows:
  // what is never written is never touched.
  std::size_t bytes = 0;
  for (const TrieBranch::SortedPattern& p : b.patterns) bytes += p.bytes.size();
  b.node_pattern.reserve(bytes);
  b.edges.reserve(bytes);
  b.unique_length.reserve(b.patterns.size());
  b.unique_bytes.reserve(bytes);
  b.ids.reserve(b.patterns.size());
  std::vector<std::uint32_t> path;  // path[d - 1]: node at depth d of the previous pattern
  std::string_view previous;
  for (const TrieBranch::SortedPattern& sorted : b.patterns) {
    const std::string_view s = sorted.bytes;
    if (!previous.empty() && previous == s) {
      b.ids.emplace_back(sorted.index, b.node_pattern[path[s.size() - 1]]);
      continue;
    }
    std::size_t common = 1;
    if (previous.empty()) {
      b.node_pattern.push_back(PatternTable::kNoPattern);
      path.assign(1, 0);
    } else {
      const std::size_t limit = std::min(previous.size(), s.size());
      while (common < limit && previous[common] == s[common]) ++common;
      path.resize(common);
    }
    for (std::size_t d = common; d < s.size(); ++d) {
      if (b.node_pattern.size() >= kMaxNodes) {
        b.too_large = sorted.index;
        return;
      }
      const auto node = static_cast<std::uint32_t>(b.node_pattern.size());
      b.node_pattern.push_back(PatternTable::kNoPattern);
      b.edges.push_back({path[d - 1], static_cast<unsigned char>(s[d]), node});
      path.push_back(node);
    }
    const auto id = static_cast<std::uint32_t>(b.unique_length.size());
    b.unique_length.push_back(static_cast<std::uint32_t>(s.size()));
    b.unique_bytes += s;
    b.node_pattern[path[s.size() - 1]] = id;
    b.ids.emplace_back(sorted.index, id);
    previous = s;
  }
}

// Calls work(c) for every c of `order` on the pool, in that order as threads come free
// (the largest branches first); the first exception is rethrown here, since the pool's
// tasks must not throw.
template <typename Work>
void run_all(WorkerPool& pool, const std::vector<std::size_t>& order, Work&& work) {
  std::exception_ptr failure;
  std::mutex failure_mutex;
  pool.run(order.size(), [&](std::size_t k) {
    try {
      work(order[k]);
    } catch (...) {
      const std::lock_guard<std::mutex> lock(failure_mutex);
      if (!failure) failure = std::current_exception();
    }
  });
  if (failure) std::rethrow_exception(failure);
}

// Helper threads for building a set of `bytes` pattern bytes: none below 256 KiB, where
// starting them costs more than they save.
std::size_t build_helpers(std::size_t bytes) {
  return bytes < (std::size_t{256} << 10) ? 0 : WorkerPool::default_threads();
}

// The patterns dealt into their first bytes' branches, in pattern order within each, on the
// pool: each piece of the list counts its patterns per branch, then writes them where the
// counts of the pieces before it say.
struct Dealt {
  std::array<std::size_t, 256> sizes{};
  std::size_t max_length = 0;
  bool has_nul = false;
  std::vector<std::size_t> empty;  // the empty patterns, which no branch holds
};

template <typename Patterns>  // a PatternSet, or the views of its folded copy
Dealt deal_patterns(const Patterns& folded, std::vector<TrieBranch>& branches, WorkerPool& pool) {
  std::vector<Dealt> pieces(pool.width());
  std::vector<std::array<std::size_t, 256>> at(pool.width());
  const std::size_t used = pool.split(folded.size(), 1u << 14, [&](std::size_t k, std::size_t begin, std::size_t end) {
    Dealt& piece = pieces[k];
    for (std::size_t i = begin; i < end; ++i) {
      const std::string_view s(folded[i]);
      piece.max_length = std::max(piece.max_length, s.size());
      piece.has_nul = piece.has_nul || s.find('\0') != std::string_view::npos;
      if (s.empty())
        piece.empty.push_back(i);
      else
        ++piece.sizes[static_cast<unsigned char>(s[0])];
    }
  });
  Dealt all;
  for (std::size_t k = 0; k < used; ++k) {
    for (std::size_t c = 0; c < 256; ++c) {
      at[k][c] = all.sizes[c];
      all.sizes[c] += pieces[k].sizes[c];
    }
    all.max_length = std::max(all.max_length, pieces[k].max_length);
    all.has_nul = all.has_nul || pieces[k].has_nul;
    all.empty.insert(all.empty.end(), pieces[k].empty.begin(), pieces[k].empty.end());
  }
  for (std::size_t c = 0; c < 256; ++c) branches[c].patterns.resize(all.sizes[c]);
  pool.split(folded.size(), 1u << 14, [&](std::size_t k, std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      const std::string_view s(folded[i]);
      if (s.empty()) continue;
      const auto c = static_cast<unsigned char>(s[0]);
      branches[c].patterns[at[k][c]++] = {0, s, static_cast<std::uint32_t>(i)};
    }
  });
  return all;
}

}  // namespace

PatternTable::ZeroedWords::ZeroedWords(std::size_t count)
    : count_(count), words_(static_cast<std::uint32_t*>(std::calloc(count, sizeof(std::uint32_t)))) {
  if (!words_) throw std::bad_alloc();
}

PatternTable::ZeroedWords::ZeroedWords(const ZeroedWords& other) : ZeroedWords(other.count_) {
  if (other.words_) std::memcpy(words_.get(), other.words_.get(), count_ * sizeof(std::uint32_t));
}

PatternTable::ZeroedWords& PatternTable::ZeroedWords::operator=(const ZeroedWords& other) {
  if (this != &other) *this = ZeroedWords(other);
  return *this;
}

PatternTable::PatternTable(const PatternSet& patterns, MatchOptions options)
    : options_(options),
      root_next_(256, kNoNode),
      root_pairs_(kRootPairs) {
  static_assert(kNoNode == 0, "root_pairs_ starts as calloc()'s zeros");
  const std::size_t n = patterns.size();
  std::size_t total = 0;
  for (std::size_t i = 0; i < n; ++i) total += patterns[i].size();
  WorkerPool pool(build_helpers(total));
  std::vector<TrieBranch> branches(256);
  std::string storage;  // -i: the folded copy that the branches' views see
  const Dealt dealt = options.ignore_case ? deal_patterns(folded_patterns(patterns, total, storage), branches, pool)
                                          : deal_patterns(patterns, branches, pool);
  max_length_ = dealt.max_length;
  has_nul_ = dealt.has_nul;
  has_empty_ = !dealt.empty.empty();
  if (max_length_ >= (std::size_t{1} << 31)) throw PatternError(0, "pattern longer than 2 GiB");
  std::vector<std::size_t> order(256);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return dealt.sizes[a] > dealt.sizes[b]; });
  run_all(pool, order, [&](std::size_t c) { build_branch(branches[c]); });
  number_branches(branches, n);
  run_all(pool, order, [&](std::size_t c) { join_branch(branches[c], static_cast<unsigned char>(c)); });
  for (std::size_t i : dealt.empty) unique_of_pattern_[i] = kNoPattern;
  lay_out_edges(branches, order, pool);
  fill_prefix_words(pool);
}

// Gives each branch its place in the whole, in byte order after the root. The tables are
// sized here and written by join_branch() (each branch its own part) and the constructor.
void PatternTable::number_branches(std::vector<TrieBranch>& branches, std::size_t pattern_count) {
  std::size_t nodes = 1, uniques = 0, bytes = 0;
  for (TrieBranch& b : branches) {
    if (b.too_large != kNoPattern || nodes + b.node_pattern.size() > kMaxNodes)
      throw PatternError(b.too_large != kNoPattern ? b.too_large : b.patterns.back().index,
                         "pattern set too large for the device trie");
    b.node_base = static_cast<std::uint32_t>(nodes);
    b.unique_base = static_cast<std::uint32_t>(uniques);
    b.byte_base = bytes;
    nodes += b.node_pattern.size();
    uniques += b.unique_length.size();
    bytes += b.unique_bytes.size();
  }
  node_pattern_.resize(nodes);
  node_info_.resize(nodes);
  node_pattern_[0] = kNoPattern;  // the root
  node_info_[0] = 0;
  unique_length_.resize(uniques);
  unique_start_.resize(uniques);
  unique_bytes_.resize(bytes);
  unique_of_pattern_.resize(pattern_count);
}

// Copies a branch into the whole at its place, its numbers made the whole's: every entry
// of its nodes, unique patterns and patterns.
void PatternTable::join_branch(TrieBranch& b, unsigned char first) {
  if (b.node_pattern.empty()) return;
  for (std::size_t i = 0; i < b.node_pattern.size(); ++i)
    node_pattern_[b.node_base + i] = b.node_pattern[i] != kNoPattern ? b.unique_base + b.node_pattern[i] : kNoPattern;
  std::fill_n(node_info_.begin() + b.node_base, b.node_pattern.size(), std::uint16_t{0});
  std::size_t start = b.byte_base;
  for (std::size_t i = 0; i < b.unique_length.size(); ++i) {
    unique_length_[b.unique_base + i] = b.unique_length[i];
    unique_start_[b.unique_base + i] = start;
    start += b.unique_length[i];
  }
  std::copy(b.unique_bytes.begin(), b.unique_bytes.end(), unique_bytes_.begin() + static_cast<std::ptrdiff_t>(b.byte_base));
  for (const auto& [index, id] : b.ids) unique_of_pattern_[index] = b.unique_base + id;
  const auto ref = [&](std::uint32_t local) {
    return (b.node_base + local) | (b.node_pattern[local] != kNoPattern ? kEnds : 0u);
  };
  root_next_[first] = ref(0);
  std::size_t others = 0;  // the edges to a child other than the first stay for the hash table
  for (const TrieBranch::Edge& e : b.edges) {
    if (e.parent == 0) root_pairs_.data()[std::size_t{first} << 8 | e.byte] = ref(e.child);
    std::uint16_t& info = node_info_[b.node_base + e.parent];
    if (e.child == e.parent + 1) {
      info = static_cast<std::uint16_t>(info | e.byte | kHasChild |
                                        (b.node_pattern[e.child] != kNoPattern ? kFirstChildEnds : 0));
    } else {
      info = static_cast<std::uint16_t>(info | kMoreChildren);
      b.edges[others++] = {b.node_base + e.parent, e.byte, ref(e.child)};
    }
  }
  b.edges.resize(others);
  std::vector<std::uint32_t>().swap(b.node_pattern);
  std::string().swap(b.unique_bytes);
}

namespace {

// A gate's words: four for each pattern that reaches it (between 1 Ki and 1 Mi words),
// so that few prefixes share a word. Returns the shift that makes an index of that many.
std::uint32_t size_gate(std::vector<std::uint32_t>& words, std::size_t patterns) {
  const std::size_t count = std::bit_ceil(std::clamp<std::size_t>(patterns * 4, 1024, std::size_t{1} << 20));
  words.assign(count, 0);
  return 32u - static_cast<std::uint32_t>(std::countr_zero(count));
}

}  // namespace

// The two gates (see prefix_words() and deep_words()), the unique patterns split over the
// pool (a word's bits set by an atomic OR).
void PatternTable::fill_prefix_words(WorkerPool& pool) {
  std::size_t from3 = 0, from4 = 0;
  for (std::uint32_t length : unique_length_) {
    from3 += length >= 3 ? 1 : 0;
    from4 += length >= 4 ? 1 : 0;
  }
  prefix_shift_ = size_gate(prefix_words_, from3);
  deep_shift_ = size_gate(deep_words_, from4);
  const auto set = [](std::uint32_t& word, std::uint32_t bit) {
    std::atomic_ref<std::uint32_t>(word).fetch_or(bit, std::memory_order_relaxed);
  };
  pool.split(unique_count(), 1u << 14, [&](std::size_t, std::size_t begin, std::size_t end) {
    for (std::size_t id = begin; id < end; ++id) {
      const std::string_view s = unique_pattern(static_cast<std::uint32_t>(id));
      if (s.size() < 3) continue;
      const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
      set(prefix_words_[prefix_word(byte(0), byte(1), byte(2), prefix_shift_)],
          s.size() == 3 ? 1u : 1u << prefix_bit(byte(3)));
      if (s.size() < 4) continue;
      set(deep_words_[deep_word(byte(0), byte(1), byte(2), byte(3), deep_shift_)],
          s.size() == 4 ? 1u : 1u << prefix_bit(byte(4)));
    }
  });
}

// The edges below the root's children (those from the root are root_next_'s) go to a
// hash table at most half full, each branch's on a thread (a slot is claimed by a
// compare-and-swap of its key: any order of insertion leaves each key after its home
// slot with no free slot between, which is all a lookup needs).
void PatternTable::lay_out_edges(const std::vector<TrieBranch>& branches, const std::vector<std::size_t>& order,
                                 WorkerPool& pool) {
  std::size_t deep = 0;
  for (const TrieBranch& b : branches) deep += b.edges.size();
  const std::size_t table_size = std::bit_ceil(std::max<std::size_t>(16, deep * 2));
  edge_mask_ = static_cast<std::uint32_t>(table_size - 1);
  edge_slots_.resize(table_size);
  pool.split(table_size, 1u << 16, [&](std::size_t, std::size_t begin, std::size_t end) {
    std::fill(edge_slots_.begin() + static_cast<std::ptrdiff_t>(begin), edge_slots_.begin() + static_cast<std::ptrdiff_t>(end),
              EdgeSlot{kEmptyKey, kNoNode});
  });
  run_all(pool, order, [&](std::size_t c) {
    for (const TrieBranch::Edge& e : branches[c].edges) {
      const std::uint64_t key = edge_key(e.parent, e.byte);
      for (std::uint32_t h = edge_home(key, edge_mask_);; h = (h + 1) & edge_mask_) {
        std::atomic_ref<std::uint64_t> slot(edge_slots_[h].key);
        std::uint64_t empty = kEmptyKey;
        if (slot.load(std::memory_order_relaxed) == kEmptyKey &&
            slot.compare_exchange_strong(empty, key, std::memory_order_relaxed)) {
          edge_slots_[h].child = e.child;
          break;
        }
      }
    }
  });
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
