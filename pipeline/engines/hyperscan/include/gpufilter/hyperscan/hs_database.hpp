// HsDatabase: the host twin of the device scan (kernels/scan.cl). It compiles a
// PatternTable's unique patterns into a Hyperscan literal database and reports the same
// occurrences as the kernel, byte for byte and in the same order (PatternTable::before).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "gpufilter/core/chunk.hpp"
#include "gpufilter/patterns/pattern_table.hpp"

// Hyperscan's handles (hs_database_t, hs_scratch_t), kept out of this header.
struct hs_database;
struct hs_scratch;

namespace gpufilter {

class OneLiteral;

class HsDatabase {
 public:
  // Per-thread scan state: Hyperscan scratch space and the buffer of the reordering
  // step. One per scanning thread; made by new_scratch() of the matcher it is used with.
  class Scratch {
   public:
    Scratch() = default;  // empty: good for nothing but assignment
    ~Scratch();
    Scratch(Scratch&& other) noexcept;
    Scratch& operator=(Scratch&& other) noexcept;
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;

   private:
    friend class HsDatabase;
    hs_scratch* scratch_ = nullptr;
    const hs_database* database_ = nullptr;  // the database it was made for
    std::vector<Occurrence> sort_buffer_;
  };

  // Compiles table's unique patterns (folded; caseless with ignore_case). A table without
  // unique patterns (only the empty pattern, or none) is valid: scans then find nothing.
  // Throws PatternError (naming the first original pattern of the offending unique one) or
  // Error with Hyperscan's message when compilation fails.
  // `table` must outlive the matcher.
  explicit HsDatabase(const PatternTable& table);
  // Whether an earlier run left this table's database in the compile cache
  // (hs_cache::stored): making the matcher would load it, not compile.
  static bool stored(const PatternTable& table) noexcept;
  ~HsDatabase();
  HsDatabase(HsDatabase&& other) noexcept;
  HsDatabase& operator=(HsDatabase&& other) noexcept;
  HsDatabase(const HsDatabase&) = delete;
  HsDatabase& operator=(const HsDatabase&) = delete;

  std::size_t unique_count() const noexcept { return table_->unique_count(); }

  Scratch new_scratch() const;

  // Scans data[0, size) (size below 4 GiB) for every occurrence, overlapping ones
  // included, of every unique pattern that ends past `overlap` (position + length >
  // overlap, the kernel's ownership rule) and returns how many there are. With `out`,
  // appends them in PatternTable::before order (position ascending, longest first at a
  // position). With `pattern_counts` (unique_count() counters), adds each occurrence to
  // its pattern's counter. With `first_nul`, also sets it to where the first NUL byte of
  // data[0, size) is (kNoNul: none), searched piece by piece just after each is scanned
  // (a mapped chunk's binary-file test). Concurrent calls are safe with distinct Scratch objects
  // (and distinct `out` and `pattern_counts`). With `out`, no `pattern_counts` and
  // `one_per_line` (the byte that ends a line, '\n' or '\0'; -1: every occurrence), an
  // occurrence of a line that already has one appended may be left out
  // (ScanConfig::one_per_line).
  // Where Hyperscan fails on a chunk with HS_UNKNOWN_ERROR (a known bug of its literal
  // API, see hs_database.cpp), the chunk is scanned by the pattern table's trie walk
  // instead, with the same results. Other Hyperscan failures throw Error; a failed scan
  // leaves `out` and `pattern_counts` as they were.
  static constexpr std::size_t kNoNul = static_cast<std::size_t>(-1);
  std::uint64_t scan(const char* data, std::size_t size, std::size_t overlap, Scratch& scratch,
                     std::vector<Occurrence>* out, std::uint64_t* pattern_counts,
                     std::size_t* first_nul = nullptr, int one_per_line = -1) const;

 private:
  // scan(), with `base` added to every position reported.
  std::uint64_t scan_at(const char* data, std::size_t size, std::size_t overlap, std::uint32_t base, Scratch& scratch,
                        std::vector<Occurrence>* out, std::uint64_t* pattern_counts, int one_per_line) const;
  // scan()'s results from PatternTable::for_each_occurrence, without Hyperscan.
  std::uint64_t walk(const char* data, std::size_t size, std::size_t overlap, std::uint32_t base, Scratch& scratch,
                     std::vector<Occurrence>* out, std::uint64_t* pattern_counts) const;

  static constexpr std::size_t kNulPiece = std::size_t{256} << 10;  // scan()'s pieces with first_nul
  hs_database* database_ = nullptr;  // null when there is nothing to match, or one_ matches
  // One case-sensitive literal: found by it alone, no database compiled (one_literal.hpp).
  std::unique_ptr<const OneLiteral> one_;
  const PatternTable* table_;
};

}  // namespace gpufilter
