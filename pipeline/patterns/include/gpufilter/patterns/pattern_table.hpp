// PatternTable: the compiled, immutable host form of a PatternSet. Patterns are folded
// (with ignore_case), de-duplicated into "unique patterns", and laid out as a trie whose
// arrays are uploaded to the device unchanged (see kernels/scan.cl).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpufilter/core/chunk.hpp"
#include "gpufilter/patterns/pattern_set.hpp"

namespace gpufilter {

struct MatchOptions {
  bool ignore_case = false;  // ASCII case folding, as grep -i in the C locale
};

// ASCII folding used by the kernels and every host check.
constexpr unsigned char fold_byte(unsigned char c, bool ignore_case) noexcept {
  return (ignore_case && c >= 'A' && c <= 'Z') ? static_cast<unsigned char>(c + 32) : c;
}

struct TrieBranch;  // pattern_table.cpp: one first byte's subtree while it is built
class WorkerPool;   // core/workers.hpp: the threads that build the branches

// An allocator whose resize() leaves trivial elements unwritten (default-initialised, not
// zeroed): the tables of a large set are then written once, by the threads that build their
// parts, instead of first being zeroed by one thread (80 MB at a million literals).
template <typename T>
struct FillLaterAllocator : std::allocator<T> {
  FillLaterAllocator() = default;
  template <typename U>
  FillLaterAllocator(const FillLaterAllocator<U>&) noexcept {}  // NOLINT: as std::allocator
  template <typename U>
  struct rebind {
    using other = FillLaterAllocator<U>;
  };
  template <typename U, typename... Args>
  void construct(U* at, Args&&... args) {
    if constexpr (sizeof...(Args) == 0)
      ::new (static_cast<void*>(at)) U;
    else
      ::new (static_cast<void*>(at)) U(std::forward<Args>(args)...);
  }
};
template <typename T>
using FillLaterVector = std::vector<T, FillLaterAllocator<T>>;

class PatternTable {
 public:
  static constexpr std::uint32_t kNoNode = 0;  // the root is never a child
  // The tables below refer to a node by its number with kEnds set when a pattern ends
  // there, so that a walk reads node_pattern() only where it reports.
  static constexpr std::uint32_t kEnds = 0x80000000u;
  // node_info()[n]: the byte to n's first child in its low 8 bits, and these flags. Nodes
  // are numbered depth first, so the first child of n is n + 1: most steps of a walk (a
  // node with one child) read this array, in order along the walk, and only a node with
  // more children is looked up in the hash table, which holds the other children alone.
  static constexpr std::uint16_t kHasChild = 0x100;
  static constexpr std::uint16_t kMoreChildren = 0x200;
  static constexpr std::uint16_t kFirstChildEnds = 0x400;
  static constexpr std::uint32_t kNoPattern = 0xffffffffu;
  static constexpr std::uint64_t kEmptyKey = ~std::uint64_t{0};

  PatternTable(const PatternSet& patterns, MatchOptions options);

  const MatchOptions& options() const noexcept { return options_; }

  // Unique (non-empty, folded) patterns: the ids the kernels report.
  std::size_t unique_count() const noexcept { return unique_length_.size(); }
  std::uint32_t unique_length(std::uint32_t id) const { return unique_length_[id]; }
  std::span<const std::uint32_t> unique_lengths() const noexcept { return unique_length_; }
  // The folded bytes of unique pattern `id` (what a host engine compiles).
  std::string_view unique_pattern(std::uint32_t id) const {
    return std::string_view(unique_bytes_).substr(unique_start_[id], unique_length_[id]);
  }
  // Which unique id each original pattern became (kNoPattern for the empty pattern).
  std::uint32_t unique_of(std::size_t pattern_index) const { return unique_of_pattern_[pattern_index]; }
  std::size_t pattern_count() const noexcept { return unique_of_pattern_.size(); }

  bool has_empty_pattern() const noexcept { return has_empty_; }
  bool has_nul_byte() const noexcept { return has_nul_; }  // some pattern holds a NUL byte
  bool matches_nothing() const noexcept { return unique_count() == 0 && !has_empty_; }
  // Longest pattern in bytes; a split line overlaps by max_length() - 1.
  std::size_t max_length() const noexcept { return max_length_; }

  // Device tables.
  std::span<const std::uint32_t> root_next() const noexcept { return root_next_; }
  // root_pairs()[b0 << 8 | b1]: the node two bytes below the root (kNoNode if none), so
  // the kernel takes its first two steps without the hash table.
  std::span<const std::uint32_t> root_pairs() const noexcept { return {root_pairs_.data(), kRootPairs}; }
  // The gate before the walk's third step: prefix_words()[prefix_word(b0, b1, b2)] has
  // bit 0 set if a pattern of three bytes may be b0 b1 b2, and bit prefix_bit(b3) if a
  // longer one may begin b0 b1 b2 b3 (hashed: a set bit may be another's, a clear one
  // is certain). Most positions where two bytes begin a pattern go no further, and the
  // gate (at most 4 MiB, cache-resident) answers them without the hash table's probes.
  std::span<const std::uint32_t> prefix_words() const noexcept { return prefix_words_; }
  std::uint32_t prefix_shift() const noexcept { return prefix_shift_; }
  static std::uint32_t prefix_word(unsigned char b0, unsigned char b1, unsigned char b2, std::uint32_t shift) noexcept {
    return ((std::uint32_t{b0} << 16 | std::uint32_t{b1} << 8 | b2) * 0x9E3779B1u) >> shift;
  }
  static std::uint32_t prefix_bit(unsigned char b3) noexcept { return 1u + (b3 * 7u) % 31u; }
  // The second gate, before the walk's fourth step, for positions whose three bytes
  // begin no pattern of three bytes: deep_words()[deep_word(b0, b1, b2, b3)] has bit 0
  // set if a pattern of four bytes may be b0 b1 b2 b3, and bit prefix_bit(b4) if a
  // longer one may begin b0 b1 b2 b3 b4 (hashed as above). With many patterns most
  // four-byte prefixes of text are some pattern's (at 1,000,000 literals of the bench a
  // fifth of the positions), but few five-byte ones (0.3 %): without it those walks
  // take two dependent steps through the trie to learn that they end there.
  std::span<const std::uint32_t> deep_words() const noexcept { return deep_words_; }
  std::uint32_t deep_shift() const noexcept { return deep_shift_; }
  static std::uint32_t deep_word(unsigned char b0, unsigned char b1, unsigned char b2, unsigned char b3,
                                 std::uint32_t shift) noexcept {
    return ((std::uint32_t{b0} << 24 | std::uint32_t{b1} << 16 | std::uint32_t{b2} << 8 | b3) * 0x85EBCA6Bu) >> shift;
  }
  // The hash table of the edges below depth 1 to a child other than the first: key
  // (node << 8 | byte), kEmptyKey in a free slot, and the child beside it.
  struct EdgeSlot {
    std::uint64_t key;
    std::uint64_t child;
  };
  std::span<const EdgeSlot> edge_slots() const noexcept { return edge_slots_; }
  // An edge's key and its home slot in a table of mask + 1 slots (kernels/scan.cl's
  // child() computes the same).
  static std::uint64_t edge_key(std::uint32_t node, unsigned char byte) noexcept {
    return (std::uint64_t{node} << 8) | byte;
  }
  static std::uint32_t edge_home(std::uint64_t key, std::uint32_t mask) noexcept {
    return static_cast<std::uint32_t>((key * 0x9E3779B97F4A7C15ull) >> 32) & mask;
  }
  std::uint32_t edge_mask() const noexcept { return edge_mask_; }
  std::span<const std::uint32_t> node_pattern() const noexcept { return node_pattern_; }
  std::span<const std::uint16_t> node_info() const noexcept { return node_info_; }
  std::size_t node_count() const noexcept { return node_pattern_.size(); }

  // The order occurrences are handed on in: by position, the longest pattern first at a
  // position (grep's leftmost-longest walk relies on it). T has .position and .pattern.
  template <typename T>
  bool before(const T& a, const T& b) const noexcept {
    if (a.position != b.position) return a.position < b.position;
    return unique_length_[a.pattern] > unique_length_[b.pattern];
  }

  // Host walk of the same trie: calls f(id) for every unique pattern occurring at text[0].
  template <typename F>
  void for_each_at(std::string_view text, F&& f) const;
  // The kernel's whole scan on the host: f(position, id) for every occurrence in `text`
  // that ends past `overlap` (position + length > overlap: the earlier chunk owns the
  // rest), by position, shortest first at a position.
  template <typename F>
  void for_each_occurrence(std::string_view text, std::size_t overlap, F&& f) const;

 private:
  void number_branches(std::vector<TrieBranch>& branches, std::size_t pattern_count);
  void join_branch(TrieBranch& branch, unsigned char first);
  void lay_out_edges(const std::vector<TrieBranch>& branches, const std::vector<std::size_t>& order,
                     WorkerPool& pool);
  void fill_prefix_words(WorkerPool& pool);
  std::uint32_t child(std::uint32_t node, unsigned char c) const noexcept;

  MatchOptions options_;
  FillLaterVector<std::uint32_t> unique_length_;
  FillLaterVector<std::size_t> unique_start_;  // offset of each unique pattern in unique_bytes_
  std::string unique_bytes_;
  FillLaterVector<std::uint32_t> unique_of_pattern_;
  bool has_empty_ = false;
  bool has_nul_ = false;
  std::size_t max_length_ = 0;
  std::vector<std::uint32_t> root_next_;
  // 256 KiB of words, nearly all kNoNode (0) unless the set is large: from calloc(), whose
  // fresh mapping costs a page fault only where a pair is written (filling it touched
  // every page: 0.7 ms of a one-literal run's 3 ms start-up on the 2-core machine).
  class ZeroedWords {
   public:
    explicit ZeroedWords(std::size_t count);
    ZeroedWords(const ZeroedWords& other);
    ZeroedWords& operator=(const ZeroedWords& other);
    ZeroedWords(ZeroedWords&&) noexcept = default;
    ZeroedWords& operator=(ZeroedWords&&) noexcept = default;
    std::uint32_t* data() const noexcept { return words_.get(); }

   private:
    struct Free {
      void operator()(std::uint32_t* words) const noexcept { std::free(words); }
    };
    std::size_t count_ = 0;
    std::unique_ptr<std::uint32_t[], Free> words_;
  };
  static constexpr std::size_t kRootPairs = 256 * 256;
  ZeroedWords root_pairs_;
  FillLaterVector<EdgeSlot> edge_slots_;
  std::uint32_t edge_mask_ = 0;
  FillLaterVector<std::uint32_t> node_pattern_;
  FillLaterVector<std::uint16_t> node_info_;
  std::vector<std::uint32_t> prefix_words_;
  std::uint32_t prefix_shift_ = 32;
  std::vector<std::uint32_t> deep_words_;
  std::uint32_t deep_shift_ = 32;
};

// Puts occurrences reported in any order into PatternTable::before order, as every engine
// hands them on: a stable LSD radix sort on the position, then each run of equal
// positions longest first. Linear, where a comparison sort with a table lookup per
// compare cost more than the scan on match-dense chunks. `buffer` is reusable scratch.
void sort_occurrences(std::span<Occurrence> occurrences, std::vector<Occurrence>& buffer, const PatternTable& table);

inline std::uint32_t PatternTable::child(std::uint32_t node, unsigned char c) const noexcept {
  const std::uint16_t info = node_info_[node];
  if ((info & kHasChild) == 0) return kNoNode;
  if ((info & 0xff) == c) return (node + 1) | ((info & kFirstChildEnds) != 0 ? kEnds : 0u);
  if ((info & kMoreChildren) == 0) return kNoNode;
  const std::uint64_t key = edge_key(node, c);
  std::uint32_t h = edge_home(key, edge_mask_);
  for (;;) {
    const EdgeSlot& slot = edge_slots_[h];
    if (slot.key == key) return static_cast<std::uint32_t>(slot.child);
    if (slot.key == kEmptyKey) return kNoNode;
    h = (h + 1) & edge_mask_;
  }
}

template <typename F>
void PatternTable::for_each_at(std::string_view text, F&& f) const {
  if (text.empty()) return;
  const bool fold = options_.ignore_case;
  std::uint32_t node = root_next_[fold_byte(static_cast<unsigned char>(text[0]), fold)];
  std::size_t depth = 1;
  while (node != kNoNode) {
    if ((node & kEnds) != 0) f(node_pattern_[node & ~kEnds]);
    if (depth >= text.size()) break;
    node = child(node & ~kEnds, fold_byte(static_cast<unsigned char>(text[depth]), fold));
    ++depth;
  }
}

template <typename F>
void PatternTable::for_each_occurrence(std::string_view text, std::size_t overlap, F&& f) const {
  for (std::size_t p = 0; p < text.size(); ++p) {
    for_each_at(text.substr(p), [&](std::uint32_t id) {
      if (p + unique_length_[id] > overlap) f(p, id);
    });
  }
}

}  // namespace gpufilter
