// HsDatabase: a PatternTable's unique patterns as one Hyperscan literal database.
//
// Hyperscan reports a literal's occurrence at its end offset `to`; the start is
// to - length. Occurrences ending inside the overlap belong to the previous chunk and are
// dropped, as in kernels/scan.cl. The reports come in end-offset order, which is already
// PatternTable::before order unless occurrences nest or overlap with different lengths;
// only then is the appended range put in order, by sort_occurrences like the device's.
//
// Hyperscan 5.4's literal API has a scan-time bug (intel/hyperscan#303, #353): with a long
// literal made mostly of one repeated byte beside any other literal, hs_scan returns
// HS_UNKNOWN_ERROR on text that contains the long one (our chunker_fuzz found
// "xxy" + 34 x's beside "a"). Such a chunk is scanned again by the pattern table's own trie
// walk, the host form of the device kernel, with the same results; nothing of the failed
// scan is kept (what a count-only scan counted before failing is taken back by the same
// scan, replayed).
#include "gpufilter/hyperscan/hs_database.hpp"

#include "gpufilter/hs_cache/compile_cache.hpp"
#include "one_literal.hpp"

#include <hs/hs.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <exception>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "gpufilter/core/errors.hpp"

namespace gpufilter {
namespace {

const char* hs_error_name(hs_error_t code) noexcept {
  switch (code) {
    case HS_SUCCESS: return "HS_SUCCESS";
    case HS_INVALID: return "HS_INVALID";
    case HS_NOMEM: return "HS_NOMEM";
    case HS_SCAN_TERMINATED: return "HS_SCAN_TERMINATED";
    case HS_COMPILER_ERROR: return "HS_COMPILER_ERROR";
    case HS_DB_VERSION_ERROR: return "HS_DB_VERSION_ERROR";
    case HS_DB_PLATFORM_ERROR: return "HS_DB_PLATFORM_ERROR";
    case HS_DB_MODE_ERROR: return "HS_DB_MODE_ERROR";
    case HS_BAD_ALIGN: return "HS_BAD_ALIGN";
    case HS_BAD_ALLOC: return "HS_BAD_ALLOC";
    case HS_SCRATCH_IN_USE: return "HS_SCRATCH_IN_USE";
    case HS_ARCH_ERROR: return "HS_ARCH_ERROR";
    case HS_INSUFFICIENT_SPACE: return "HS_INSUFFICIENT_SPACE";
    case HS_UNKNOWN_ERROR: return "HS_UNKNOWN_ERROR";
    default: return "unknown Hyperscan error";
  }
}

[[noreturn]] void throw_hs(const char* call, hs_error_t code) {
  throw Error(std::string("Hyperscan ") + call + " failed: " + hs_error_name(code) + " (" + std::to_string(code) +
              ")");
}

// PatternTable::before as one integer: position ascending, then length descending.
constexpr std::uint64_t order_key(std::uint32_t position, std::uint32_t length) noexcept {
  return (std::uint64_t{position} << 32) | (0xffffffffu - length);
}

struct ScanContext {
  const std::uint32_t* length;
  std::uint32_t base = 0;  // added to every position: where data lies in the caller's chunk
  unsigned long long overlap;
  std::uint64_t total = 0;
  std::uint64_t* pattern_counts = nullptr;
  std::uint64_t digest = 0;  // count_each/uncount: of the ids counted, in order
  std::uint64_t limit = 0;   // uncount: how many counts to take back
  std::vector<Occurrence>* out = nullptr;
  // locate_line_firsts: the bytes scanned, the byte that ends a line, and the last
  // occurrence appended's start and the end of its line (no occurrence crosses one).
  const char* data = nullptr;
  unsigned long long size = 0;
  int eol = -1;
  unsigned long long line_from = ~0ull, line_end = 0;
  std::uint64_t last_key = 0;
  bool ordered = true;
  std::exception_ptr error = nullptr;
};

// Hyperscan calls these from C: nothing may be thrown through them.
int count_only(unsigned int, unsigned long long, unsigned long long to, unsigned int, void* context) noexcept {
  auto& c = *static_cast<ScanContext*>(context);
  c.total += to > c.overlap ? 1 : 0;
  return 0;
}

// The running digest of the ids counted, so that uncount can check it takes back exactly
// what count_each added.
constexpr std::uint64_t next_digest(std::uint64_t digest, unsigned int id) noexcept {
  return (digest ^ id) * 0x100000001B3ull + 0x9E3779B97F4A7C15ull;
}

int count_each(unsigned int id, unsigned long long, unsigned long long to, unsigned int, void* context) noexcept {
  auto& c = *static_cast<ScanContext*>(context);
  if (to <= c.overlap) return 0;
  ++c.total;
  ++c.pattern_counts[id];
  c.digest = next_digest(c.digest, id);
  return 0;
}

// The same scan again after a failed one, taking back the counts it added: Hyperscan's
// block scan is deterministic, so it reports the same occurrences in the same order.
int uncount(unsigned int id, unsigned long long, unsigned long long to, unsigned int, void* context) noexcept {
  auto& c = *static_cast<ScanContext*>(context);
  if (to <= c.overlap) return 0;
  if (c.total == c.limit) return 1;  // all taken back: stop
  ++c.total;
  --c.pattern_counts[id];
  c.digest = next_digest(c.digest, id);
  return 0;
}

int append(ScanContext& c, unsigned int id, unsigned long long to) noexcept {
  const std::uint32_t length = c.length[id];
  const auto position = static_cast<std::uint32_t>(to - length) + c.base;
  const std::uint64_t key = order_key(position, length);
  if (key < c.last_key) c.ordered = false;
  c.last_key = key;
  try {
    c.out->push_back({position, id});
  } catch (...) {
    c.error = std::current_exception();
    return 1;  // stop: hs_scan returns HS_SCAN_TERMINATED
  }
  ++c.total;
  return 0;
}

int locate(unsigned int id, unsigned long long, unsigned long long to, unsigned int, void* context) noexcept {
  auto& c = *static_cast<ScanContext*>(context);
  if (to <= c.overlap) return 0;
  return append(c, id, to);
}

// locate, leaving out an occurrence that starts at or after the last one appended and
// ends within its line: one per line for a consumer that selects lines and shows no
// match (a line of "e"s is one occurrence, not thousands to append and walk). It leaves
// out only occurrences of a line that already has one kept, and may keep more: the
// consumer cuts the lines.
int locate_line_firsts(unsigned int id, unsigned long long, unsigned long long to, unsigned int,
                       void* context) noexcept {
  auto& c = *static_cast<ScanContext*>(context);
  if (to <= c.overlap) return 0;
  const unsigned long long from = to - c.length[id];
  if (from >= c.line_from && to <= c.line_end) return 0;
  // The line ends at the next eol, or at a NUL before it: grep cuts a binary input's
  // lines there too (its NULs become line ends).
  const char* rest = c.data + to;
  const void* end = std::memchr(rest, c.eol, c.size - to);
  std::size_t length = end != nullptr ? static_cast<std::size_t>(static_cast<const char*>(end) - rest) : c.size - to;
  if (c.eol != '\0')
    if (const void* nul = std::memchr(rest, '\0', length)) length = static_cast<std::size_t>(static_cast<const char*>(nul) - rest);
  c.line_from = from;
  c.line_end = to + length;
  return append(c, id, to);
}

}  // namespace

HsDatabase::Scratch::~Scratch() { hs_free_scratch(scratch_); }

HsDatabase::Scratch::Scratch(Scratch&& other) noexcept
    : scratch_(std::exchange(other.scratch_, nullptr)),
      database_(std::exchange(other.database_, nullptr)),
      sort_buffer_(std::move(other.sort_buffer_)) {}

HsDatabase::Scratch& HsDatabase::Scratch::operator=(Scratch&& other) noexcept {
  if (this != &other) {
    hs_free_scratch(scratch_);
    scratch_ = std::exchange(other.scratch_, nullptr);
    database_ = std::exchange(other.database_, nullptr);
    sort_buffer_ = std::move(other.sort_buffer_);
  }
  return *this;
}

namespace {

// What Hyperscan compiles for a table: its unique patterns as literals, ids in order.
struct LiteralRequest {
  explicit LiteralRequest(const PatternTable& table)
      : expressions(table.unique_count()), lengths(expressions.size()), ids(expressions.size()),
        flags(expressions.size(), table.options().ignore_case ? HS_FLAG_CASELESS : 0u) {
    for (std::size_t i = 0; i < expressions.size(); ++i) {
      const auto id = static_cast<std::uint32_t>(i);
      expressions[i] = table.unique_pattern(id).data();
      lengths[i] = table.unique_length(id);
      ids[i] = id;
    }
  }
  hs_cache::Request request() const { return {expressions, lengths, flags, ids}; }

  std::vector<const char*> expressions;
  std::vector<std::size_t> lengths;
  std::vector<unsigned> ids;
  std::vector<unsigned> flags;
};

}  // namespace

bool HsDatabase::stored(const PatternTable& table) noexcept {
  try {
    return table.unique_count() != 0 && hs_cache::stored(LiteralRequest(table).request());
  } catch (...) {
    return false;
  }
}

HsDatabase::HsDatabase(const PatternTable& table) : table_(&table) {
  const std::size_t n = table.unique_count();
  if (n > UINT_MAX) throw Error("Hyperscan: too many patterns");
  if (n == 0) return;  // only the empty pattern, or none: nothing to compile
  if (n == 1 && !table.options().ignore_case && OneLiteral::usable()) {
    // OneLiteral scans alone: no database, whose compile was a tenth of a short run.
    one_ = std::make_unique<const OneLiteral>(table.unique_pattern(0));
    return;
  }
  const LiteralRequest literals(table);
  hs_compile_error_t* error = nullptr;
  const hs_error_t rc = hs_cache::compile(literals.request(), &database_, &error);
  if (rc == HS_SUCCESS) return;
  const std::string message = error != nullptr && error->message != nullptr ? error->message : hs_error_name(rc);
  const int expression = error != nullptr ? error->expression : -1;
  hs_free_compile_error(error);
  database_ = nullptr;
  if (expression >= 0 && static_cast<std::size_t>(expression) < n) {
    for (std::size_t index = 0; index < table.pattern_count(); ++index)
      if (table.unique_of(index) == static_cast<std::uint32_t>(expression))
        throw PatternError(index, "Hyperscan: " + message);
  }
  throw Error("Hyperscan: compiling the patterns failed: " + message);
}

HsDatabase::~HsDatabase() { hs_free_database(database_); }

HsDatabase::HsDatabase(HsDatabase&& other) noexcept
    : database_(std::exchange(other.database_, nullptr)), one_(std::move(other.one_)), table_(other.table_) {}

HsDatabase& HsDatabase::operator=(HsDatabase&& other) noexcept {
  if (this != &other) {
    hs_free_database(database_);
    database_ = std::exchange(other.database_, nullptr);
    one_ = std::move(other.one_);
    table_ = other.table_;
  }
  return *this;
}

HsDatabase::Scratch HsDatabase::new_scratch() const {
  Scratch scratch;
  if (database_ == nullptr) return scratch;
  const hs_error_t rc = hs_alloc_scratch(database_, &scratch.scratch_);
  if (rc != HS_SUCCESS) throw_hs("hs_alloc_scratch", rc);
  scratch.database_ = database_;
  return scratch;
}

// With `first_nul`, in pieces of kNulPiece: each piece is scanned, then searched for NUL
// from the cache the scan filled. Searched first, a piece waited on memory twice over
// where Hyperscan is compute-bound (its prefetches hide the memory under its work, the
// search's cannot): a quarter of the host engine's time at 10 literals. A NUL literal in
// the database instead changed Hyperscan's engine choice, 40 % slower at 1, 100 and
// 1,000 literals on the H200 machine (docs/PERFORMANCE.md).
std::uint64_t HsDatabase::scan(const char* data, std::size_t size, std::size_t overlap, Scratch& scratch,
                                std::vector<Occurrence>* out, std::uint64_t* pattern_counts,
                                std::size_t* first_nul, int one_per_line) const {
  if (first_nul == nullptr) return scan_at(data, size, overlap, 0, scratch, out, pattern_counts, one_per_line);
  *first_nul = kNoNul;
  const std::size_t longest = table_->max_length() > 0 ? table_->max_length() - 1 : 0;
  const std::size_t first = out != nullptr ? out->size() : 0;
  std::uint64_t total = 0;
  try {
    for (std::size_t begin = 0; begin < size; begin += kNulPiece) {
      const std::size_t end = std::min(size, begin + kNulPiece);
      // Occurrences that end in this piece (and past the chunk's own overlap): the piece
      // with the longest pattern's worth before it.
      const std::size_t from = begin > longest ? begin - longest : 0;
      const std::size_t drop = std::max(overlap, begin);
      if (drop < end)
        total += scan_at(data + from, end - from, drop - from, static_cast<std::uint32_t>(from), scratch, out,
                         pattern_counts, one_per_line);
      if (*first_nul != kNoNul) continue;
      if (const void* nul = std::memchr(data + begin, '\0', end - begin))
        *first_nul = static_cast<std::size_t>(static_cast<const char*>(nul) - data);
    }
  } catch (...) {
    if (out != nullptr) out->resize(first);  // no partial result
    throw;
  }
  // An occurrence that ends in a later piece comes after those of the piece before, even
  // where it starts first: one ordering pass over the chunk's occurrences puts that right.
  if (out != nullptr) {
    const auto found = std::span(*out).subspan(first);
    const auto before = [this](const Occurrence& a, const Occurrence& b) { return table_->before(a, b); };
    if (!std::is_sorted(found.begin(), found.end(), before)) sort_occurrences(found, scratch.sort_buffer_, *table_);
  }
  return total;
}

std::uint64_t HsDatabase::scan_at(const char* data, std::size_t size, std::size_t overlap, std::uint32_t base,
                                   Scratch& scratch, std::vector<Occurrence>* out,
                                   std::uint64_t* pattern_counts, int one_per_line) const {
  if (size > UINT_MAX) throw Error("host scan: a chunk must be smaller than 4 GiB");
  if (scratch.database_ != database_) throw Error("host scan: scratch space made for another HsDatabase");
  if ((database_ == nullptr && !one_) || size == 0 || overlap >= size) return 0;

  ScanContext context{.length = table_->unique_lengths().data(), .base = base, .overlap = overlap};
  match_event_handler handler = count_only;
  if (out != nullptr) {
    // (Counts made from `out` need every occurrence.)
    handler = one_per_line >= 0 && pattern_counts == nullptr ? locate_line_firsts : locate;
    context.out = out;
    context.data = data;
    context.size = size;
    context.eol = one_per_line;
  } else if (pattern_counts != nullptr) {
    handler = count_each;
    context.pattern_counts = pattern_counts;
  }
  const std::size_t first = out != nullptr ? out->size() : 0;
  const hs_error_t rc =
      one_ ? (one_->scan(data, size, handler, &context,
                         handler == locate_line_firsts ? &context.line_end : nullptr)
                  ? HS_SCAN_TERMINATED
                  : HS_SUCCESS)
           : hs_scan(database_, data, static_cast<unsigned>(size), 0, scratch.scratch_, handler, &context);
  if (rc != HS_SUCCESS) {
    if (out != nullptr) out->resize(first);  // no partial result
    if (context.error) std::rethrow_exception(context.error);
    if (rc != HS_UNKNOWN_ERROR) throw_hs("hs_scan", rc);
    // Hyperscan's literal bug (see the top): take back what the failed scan counted, then
    // scan the chunk with the trie walk.
    if (handler == count_each && context.total > 0) {
      ScanContext undo{.length = context.length, .overlap = overlap, .pattern_counts = pattern_counts,
                       .limit = context.total};
      hs_scan(database_, data, static_cast<unsigned>(size), 0, scratch.scratch_, uncount, &undo);
      if (undo.total != context.total || undo.digest != context.digest)
        throw Error("Hyperscan hs_scan failed (HS_UNKNOWN_ERROR) and its partial pattern counts could not be taken back");
    }
    return walk(data, size, overlap, base, scratch, out, pattern_counts);
  }
  if (out != nullptr) {
    // Counted here rather than in the callback, so that a failed scan adds nothing.
    if (pattern_counts != nullptr)
      for (std::size_t i = first; i < out->size(); ++i) ++pattern_counts[(*out)[i].pattern];
    if (!context.ordered)
      sort_occurrences(std::span(*out).subspan(first), scratch.sort_buffer_, *table_);
  }
  return context.total;
}

std::uint64_t HsDatabase::walk(const char* data, std::size_t size, std::size_t overlap, std::uint32_t base,
                                Scratch& scratch, std::vector<Occurrence>* out,
                                std::uint64_t* pattern_counts) const {
  std::uint64_t total = 0;
  if (out == nullptr) {
    table_->for_each_occurrence(std::string_view(data, size), overlap, [&](std::size_t, std::uint32_t id) {
      ++total;
      if (pattern_counts != nullptr) ++pattern_counts[id];  // nothing here can throw
    });
    return total;
  }
  const std::size_t first = out->size();
  try {
    table_->for_each_occurrence(std::string_view(data, size), overlap, [&](std::size_t p, std::uint32_t id) {
      out->push_back(Occurrence{static_cast<std::uint32_t>(p) + base, id});
    });
  } catch (...) {
    out->resize(first);  // no partial result
    throw;
  }
  const auto found = std::span(*out).subspan(first);
  if (pattern_counts != nullptr)
    for (const Occurrence& o : found) ++pattern_counts[o.pattern];
  sort_occurrences(found, scratch.sort_buffer_, *table_);  // the walk gives the shortest first at a position
  return found.size();
}

}  // namespace gpufilter
