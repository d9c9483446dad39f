#include "hs_select.hpp"

#include "gpufilter/core/errors.hpp"
#include "gpufilter/core/utf8.hpp"
#include "gpufilter/hs_cache/compile_cache.hpp"

#include <hs/hs.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <new>
#include <span>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

namespace gpufilter::regex {
namespace {

// A scan Hyperscan could not finish: the line stays undecided, and the run stops there as
// grep stops where its matcher fails (MatchError, "FILE: what()").
[[noreturn]] void scan_failed(hs_error_t rc) {
  if (rc == HS_NOMEM) throw MatchError("memory exhausted");
  throw MatchError("Hyperscan could not search a line (error " + std::to_string(rc) + ")");
}

struct Scan {
  std::vector<std::uint32_t>* ids;
  bool any = false;
};

int on_match(unsigned int id, unsigned long long, unsigned long long, unsigned int, void* context) {
  auto* scan = static_cast<Scan*>(context);
  scan->any = true;
  if (scan->ids == nullptr) return 1;  // one is enough: stop
  scan->ids->push_back(id);
  return 0;
}

// select_lines(): the line each match ends in, once per line (matches come in about the
// order of their ends; a later one in the same line costs a comparison).
struct Lines {
  const char* piece;
  std::size_t size;
  std::size_t line_begin = 1, line_end = 0;  // the last line found: [begin, end)
  std::vector<const char*>* starts;
  std::vector<const char*>* ends;
};

int on_line_match(unsigned int, unsigned long long, unsigned long long to, unsigned int, void* context) {
  auto* lines = static_cast<Lines*>(context);
  const std::size_t last = static_cast<std::size_t>(to) - 1;  // a match is never empty here
  if (last >= lines->line_begin && last < lines->line_end) return 0;
  // Past the last line found, this line starts after it: the search backwards stops there
  // (a match out of order searches from the piece's start).
  const bool after_last = lines->line_begin <= lines->line_end && last > lines->line_end;
  const std::size_t floor = after_last ? lines->line_end + 1 : 0;
  const void* before = memrchr(lines->piece + floor, '\n', last - floor);
  const std::size_t begin = before != nullptr ? static_cast<std::size_t>(static_cast<const char*>(before) - lines->piece) + 1 : floor;
  const void* after = std::memchr(lines->piece + last, '\n', lines->size - last);
  lines->line_begin = begin;
  lines->line_end = after != nullptr ? static_cast<std::size_t>(static_cast<const char*>(after) - lines->piece) : lines->size;
  lines->starts->push_back(lines->piece + begin);
  lines->ends->push_back(lines->piece + lines->line_end);
  return 0;
}

// Whether every match of `expression` is at least one byte long (Hyperscan's min_width;
// false where it cannot say).
bool never_empty(const std::string& expression, unsigned flags) {
  hs_expr_info_t* info = nullptr;
  hs_compile_error_t* error = nullptr;
  if (hs_expression_info(expression.c_str(), flags, &info, &error) != HS_SUCCESS) {
    hs_free_compile_error(error);
    return false;
  }
  const bool answer = info != nullptr && info->min_width > 0;
  std::free(info);  // allocated with Hyperscan's misc allocator: malloc here
  return answer;
}

}  // namespace

HsSelect::HsSelect(const std::vector<std::string>& expressions, const std::vector<std::uint32_t>& ids,
                   bool ignore_case, bool utf8, bool lines) {
  std::vector<std::string> kept;
  std::vector<std::uint32_t> kept_ids;
  const unsigned flag = (lines ? HS_FLAG_MULTILINE : HS_FLAG_SINGLEMATCH | HS_FLAG_ALLOWEMPTY) |
                        (ignore_case ? HS_FLAG_CASELESS : 0u) | (utf8 ? HS_FLAG_UTF8 : 0u);
  for (std::size_t k = 0; k < expressions.size(); ++k) {
    // A lines database names a match's line by its last byte: an expression with an empty
    // match somewhere ("\b", "x|\b") has none, so it stays with glibc.
    if (lines && !never_empty(expressions[k], flag)) continue;
    kept.push_back(expressions[k]);
    kept_ids.push_back(ids[k]);
  }
  // A refused expression (a repeat bound too large, say) is dropped and the rest tried
  // again; the dropped ones stay with glibc.
  while (!kept.empty()) {
    std::vector<const char*> texts;
    for (const std::string& e : kept) texts.push_back(e.c_str());
    std::vector<unsigned> flags(kept.size(), flag);
    hs_compile_error_t* error = nullptr;
    hs_database_t* database = nullptr;
    const hs_error_t rc = hs_cache::compile({texts, {}, flags, kept_ids}, &database, &error);
    if (rc == HS_SUCCESS) {
      database_.reset(database, hs_free_database);
      break;
    }
    const int bad = error != nullptr ? error->expression : -1;
    hs_free_compile_error(error);
    if (bad < 0 || static_cast<std::size_t>(bad) >= kept.size()) return;  // give all to glibc
    kept.erase(kept.begin() + bad);
    kept_ids.erase(kept_ids.begin() + bad);
  }
  if (!database_) return;
  if (lines) {
    dfa_ = std::make_shared<LazyDfa>();
    dfa_->expressions = std::move(kept);
    dfa_->ignore_case = ignore_case;
    dfa_->utf8 = utf8;
  }
  if (hs_alloc_scratch(database_.get(), &scratch_) != HS_SUCCESS) throw std::bad_alloc();
  accepted_ = std::move(kept_ids);
}

std::unique_ptr<HsSelect> HsSelect::clone() const {
  std::unique_ptr<HsSelect> copy(new HsSelect());
  copy->database_ = database_;
  copy->accepted_ = accepted_;
  copy->dfa_ = dfa_;
  if (scratch_ != nullptr && hs_clone_scratch(scratch_, &copy->scratch_) != HS_SUCCESS) throw std::bad_alloc();
  if (ascii_twin_) copy->ascii_twin_ = ascii_twin_->clone();
  return copy;
}

HsSelect::~HsSelect() {
  if (scratch_ != nullptr) hs_free_scratch(scratch_);
}

std::size_t HsSelect::select_lines(std::string_view piece, std::vector<const char*>& line_starts,
                                   std::vector<const char*>& line_ends, Text text) {
  // Blocks of about kBlock bytes, each cut after a line's '\n'.
  constexpr std::size_t kBlock = 64 << 10;
  for (std::size_t begin = 0; begin < piece.size();) {
    std::size_t end = piece.size();
    if (piece.size() - begin > kBlock) {
      const void* nl = std::memchr(piece.data() + begin + kBlock, '\n', piece.size() - begin - kBlock);
      if (nl != nullptr) end = static_cast<std::size_t>(static_cast<const char*>(nl) - piece.data()) + 1;
    }
    const std::string_view block = piece.substr(begin, end - begin);
    // The ASCII prefix is found once: the twin takes an ASCII block, and a UTF-8 block's
    // test goes on from there.
    const std::size_t ascii = text == Text::kAny ? block.size() : first_beyond_ascii(block);
    if (ascii_twin_ && text == Text::kUtf8 && ascii == block.size()) {
      ascii_twin_->select_block(block, line_starts, line_ends);
      begin = end;
      continue;
    }
    const std::size_t beyond = text == Text::kUtf8 ? ascii + well_formed_utf8_prefix(block.substr(ascii)) : ascii;
    if (beyond < block.size()) {
      const void* nl = memrchr(block.data(), '\n', beyond);
      const std::size_t line =
          nl != nullptr ? static_cast<std::size_t>(static_cast<const char*>(nl) - block.data()) + 1 : 0;
      if (line > 0) select_block(block.substr(0, line), line_starts, line_ends);
      return begin + line;
    }
    select_block(block, line_starts, line_ends);
    begin = end;
  }
  return piece.size();
}

// A block decided the way that has cost this copy less per byte so far.
void HsSelect::select_block(std::string_view block, std::vector<const char*>& line_starts,
                            std::vector<const char*>& line_ends) {
  const bool each_line = pace_.each_line_next(block.size());
  const LineDfa* dfa = each_line ? line_dfa() : nullptr;  // built, the first time, before the block is timed
  const auto start = std::chrono::steady_clock::now();
  if (dfa != nullptr) dfa->select_lines(block, line_starts, line_ends);
  else if (each_line) select_each_line(block, line_starts, line_ends);
  else select_in_one_pass(block, line_starts, line_ends);
  pace_.took(each_line, block.size(), std::chrono::steady_clock::now() - start);
}

const LineDfa* HsSelect::line_dfa() {
  if (!dfa_) return nullptr;
  LazyDfa& lazy = *dfa_;
  std::call_once(lazy.once, [&] { lazy.dfa = LineDfa::build(lazy.expressions, lazy.ignore_case, lazy.utf8); });
  return lazy.dfa.get();
}

bool HsSelect::Pace::each_line_next(std::size_t bytes) noexcept {
  ++blocks;
  if (blocks == 1) return false;  // warms this copy's scratch and caches: not timed
  if (times[0].empty()) return false;
  if (times[1].empty()) return true;
  const double dearer_ns = times[each_line_cheaper() ? 0 : 1].least() * static_cast<double>(bytes);
  trying = blocks >= next_try && cheap_ns >= kTrialShare * dearer_ns;
  return trying != each_line_cheaper();
}

bool HsSelect::Pace::each_line_cheaper() const noexcept { return times[1].least() < times[0].least(); }

void HsSelect::Pace::took(bool each_line, std::size_t bytes, std::chrono::nanoseconds time) noexcept {
  if (blocks == 1) return;
  const bool cheaper_before = each_line_cheaper();
  times[each_line ? 1 : 0].add((static_cast<double>(time.count()) + 1) / static_cast<double>(bytes + 1));
  if (!trying) {
    cheap_ns += static_cast<double>(time.count());
    return;
  }
  // The other way timed again: while it stays dearer, it is tried half as often.
  trying = false;
  cheap_ns = 0;
  interval = each_line_cheaper() == cheaper_before ? std::min<std::uint32_t>(interval * 2, kLongestInterval) : 2;
  next_try = blocks + interval;
}

void HsSelect::Pace::Recent::add(double ns_per_byte) noexcept {
  last[next] = ns_per_byte;
  next = (next + 1) % last.size();
  count = std::min<std::size_t>(count + 1, last.size());
}

double HsSelect::Pace::Recent::least() const noexcept {
  return *std::min_element(last.begin(), last.begin() + static_cast<std::ptrdiff_t>(count));
}

void HsSelect::select_in_one_pass(std::string_view block, std::vector<const char*>& line_starts,
                                  std::vector<const char*>& line_ends) {
  const std::size_t first = line_starts.size();
  Lines lines{block.data(), block.size(), 1, 0, &line_starts, &line_ends};
  const hs_error_t rc = hs_scan(database_.get(), block.data(), static_cast<unsigned>(block.size()), 0, scratch_,
                                on_line_match, &lines);
  if (rc != HS_SUCCESS) scan_failed(rc);
  const auto starts = std::span(line_starts).subspan(first);
  if (std::adjacent_find(starts.begin(), starts.end(), std::greater_equal<>()) == starts.end()) return;
  // A match out of order, or a line found twice: its ends follow its starts.
  std::vector<std::pair<const char*, const char*>> found;
  for (std::size_t k = first; k < line_starts.size(); ++k) found.emplace_back(line_starts[k], line_ends[k]);
  std::sort(found.begin(), found.end());
  found.erase(std::unique(found.begin(), found.end()), found.end());
  line_starts.resize(first);
  line_ends.resize(first);
  for (const auto& [start, end] : found) {
    line_starts.push_back(start);
    line_ends.push_back(end);
  }
}

// A scan per line, stopped at the line's first match. No expression of a lines database
// matches the empty string, so an empty line is never selected.
void HsSelect::select_each_line(std::string_view block, std::vector<const char*>& line_starts,
                                std::vector<const char*>& line_ends) {
  const char* const end = block.data() + block.size();
  for (const char* line = block.data(); line < end;) {
    const void* nl = std::memchr(line, '\n', static_cast<std::size_t>(end - line));
    const char* line_end = nl != nullptr ? static_cast<const char*>(nl) : end;
    if (line_end > line) {
      Scan scan{nullptr};
      const hs_error_t rc = hs_scan(database_.get(), line, static_cast<unsigned>(line_end - line), 0, scratch_,
                                    on_match, &scan);
      if (rc != HS_SUCCESS && rc != HS_SCAN_TERMINATED) scan_failed(rc);
      if (scan.any) {
        line_starts.push_back(line);
        line_ends.push_back(line_end);
      }
    }
    line = line_end + 1;
  }
}

bool HsSelect::scan(std::string_view line, std::vector<std::uint32_t>* ids) {
  if (ascii_twin_ && all_ascii(line)) return ascii_twin_->scan(line, ids);
  Scan scan{ids};
  // Hyperscan refuses a null pointer even for no bytes.
  const char* bytes = line.empty() ? "" : line.data();
  const hs_error_t rc = hs_scan(database_.get(), bytes, static_cast<unsigned>(line.size()), 0, scratch_, on_match, &scan);
  if (rc != HS_SUCCESS && rc != HS_SCAN_TERMINATED) scan_failed(rc);
  return scan.any;
}

struct HsGroups::Shared {
  enum State : std::uint8_t { kWaiting, kBuilding, kReady, kRefused };
  struct Group {
    std::vector<std::string> expressions;
    std::vector<std::uint32_t> ids;
    std::atomic<std::uint8_t> state{kWaiting};
    std::atomic<std::uint64_t> spent_ns{0};
    std::unique_ptr<HsSelect> built;  // set before state becomes kReady
  };
  std::vector<Group> groups;
  std::atomic<std::size_t> next_to_build{0};     // help_build()'s share-out
  std::vector<std::uint32_t> group_of;           // by pattern
  std::unique_ptr<std::atomic<bool>[]> accepted;  // by pattern, set before its group is ready
  bool ignore_case = false, utf8 = false;
};

HsGroups::HsGroups(std::vector<std::string> expressions, std::vector<std::uint32_t> ids, std::size_t group_size,
                   bool ignore_case, bool utf8)
    : shared_(std::make_shared<Shared>()) {
  Shared& s = *shared_;
  s.ignore_case = ignore_case;
  s.utf8 = utf8;
  const std::uint32_t patterns = ids.empty() ? 0 : *std::max_element(ids.begin(), ids.end()) + 1;
  s.group_of.assign(patterns, kNone);
  s.accepted = std::make_unique<std::atomic<bool>[]>(patterns);
  for (std::uint32_t i = 0; i < patterns; ++i) s.accepted[i].store(false, std::memory_order_relaxed);
  s.groups = std::vector<Shared::Group>((expressions.size() + group_size - 1) / group_size);
  for (std::size_t k = 0; k < expressions.size(); ++k) {
    Shared::Group& g = s.groups[k / group_size];
    g.expressions.push_back(std::move(expressions[k]));
    g.ids.push_back(ids[k]);
    s.group_of[ids[k]] = static_cast<std::uint32_t>(k / group_size);
  }
  mine_.resize(s.groups.size());
}

HsGroups::~HsGroups() = default;

std::unique_ptr<HsGroups> HsGroups::clone() const {
  std::unique_ptr<HsGroups> copy(new HsGroups());
  copy->shared_ = shared_;
  copy->mine_.resize(mine_.size());  // scratches of its own, cloned as it scans
  return copy;
}

std::uint32_t HsGroups::group_of(std::uint32_t pattern) const noexcept {
  return pattern < shared_->group_of.size() ? shared_->group_of[pattern] : kNone;
}

bool HsGroups::accepted(std::uint32_t pattern) const noexcept {
  return shared_->accepted[pattern].load(std::memory_order_relaxed);
}

bool HsGroups::build(std::uint32_t g) {
  Shared::Group& group = shared_->groups[g];
  std::uint8_t state = Shared::kWaiting;
  if (!group.state.compare_exchange_strong(state, Shared::kBuilding, std::memory_order_acq_rel))
    return state == Shared::kReady;
  auto built = std::make_unique<HsSelect>(group.expressions, group.ids, shared_->ignore_case, shared_->utf8);
  if (built->empty()) {
    group.state.store(Shared::kRefused, std::memory_order_release);
    return false;
  }
  for (std::uint32_t i : built->accepted()) shared_->accepted[i].store(true, std::memory_order_relaxed);
  group.built = std::move(built);
  group.state.store(Shared::kReady, std::memory_order_release);
  return true;
}

bool HsGroups::take(std::uint32_t g, std::uint64_t glibc_ns, std::uint64_t build_ns_per_expression) {
  Shared::Group& group = shared_->groups[g];
  const std::uint8_t state = group.state.load(std::memory_order_acquire);
  if (state != Shared::kWaiting) return state == Shared::kReady;
  const std::uint64_t budget = build_ns_per_expression * group.expressions.size();
  if (group.spent_ns.fetch_add(glibc_ns, std::memory_order_relaxed) + glibc_ns < budget) return false;
  return build(g);
}

void HsGroups::help_build() {
  Shared& s = *shared_;
  for (std::size_t g; (g = s.next_to_build.fetch_add(1, std::memory_order_relaxed)) < s.groups.size();)
    build(static_cast<std::uint32_t>(g));  // a group a copy took meanwhile (take()) is skipped there
}

void HsGroups::build_all(std::size_t threads) {
  if (shared_->next_to_build.load(std::memory_order_relaxed) >= shared_->groups.size()) return;
  std::vector<std::thread> helpers;
  try {
    for (std::size_t t = 1; t < std::min(threads, shared_->groups.size()); ++t)
      helpers.emplace_back([this] { help_build(); });
  } catch (const std::system_error&) {
    // No more threads to be had: those started and this one build them all.
  }
  help_build();
  for (std::thread& t : helpers) t.join();
}

bool HsGroups::scan(std::uint32_t g, std::string_view line, std::vector<std::uint32_t>* ids) {
  std::unique_ptr<HsSelect>& mine = mine_[g];
  if (!mine) mine = shared_->groups[g].built->clone();
  return mine->scan(line, ids);
}

}  // namespace gpufilter::regex
