// HsSelect: line selection for the -G/-E patterns that Hyperscan can read exactly as
// grep's DFA does (dfa_view.cpp translates them), all in one database: one pass over a
// line answers for every pattern, at Hyperscan's speed instead of glibc's.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "line_dfa.hpp"

struct hs_database;
struct hs_scratch;

namespace gpufilter::regex {

class HsSelect {
 public:
  // `expressions[k]` (Hyperscan syntax, -w/-x wrapping included) stands for pattern
  // `ids[k]`. Expressions Hyperscan refuses are left out: accepted() says which stayed.
  // `utf8`: the expressions and the lines scanned are UTF-8 (the caller checks the lines).
  // `lines`: a database for select_lines() (HS_FLAG_MULTILINE; every match reported; an
  // expression that can match the empty string is refused, so left out).
  HsSelect(const std::vector<std::string>& expressions, const std::vector<std::uint32_t>& ids, bool ignore_case,
           bool utf8, bool lines = false);
  ~HsSelect();
  HsSelect(const HsSelect&) = delete;
  HsSelect& operator=(const HsSelect&) = delete;

  // One for another thread: the same database, its own scratch.
  std::unique_ptr<HsSelect> clone() const;

  bool empty() const noexcept { return !database_; }
  const std::vector<std::uint32_t>& accepted() const noexcept { return accepted_; }
  // Does some pattern select `line`? With `ids`, every such pattern is added to it (from a
  // `lines` database, maybe more than once).
  bool scan(std::string_view line, std::vector<std::uint32_t>* ids);
  // A `lines` database over many whole lines at once: appends the first byte of every line
  // some expression matches in, ascending, and its end (its '\n' or the piece's end) to
  // `line_ends`. No expression's text matches a '\n' (dfa_view), so a match lies in one
  // line and that line is selected. Returns how much of the piece it decided: all of it,
  // or the lines before the first that the database may not read as `text` says (that
  // line's offset; each block is tested just before it is read, while it is in the cache).
  enum class Text { kAny, kAscii, kUtf8 };  // any bytes; ASCII alone; well-formed UTF-8
  std::size_t select_lines(std::string_view piece, std::vector<const char*>& line_starts,
                           std::vector<const char*>& line_ends, Text text = Text::kAny);
  // A UTF-8 database's reading of the same patterns on ASCII alone (the same ids accepted):
  // blocks of select_lines() and lines of scan() that hold only ASCII go to it. Under -i
  // the UTF-8 texts spell out each letter's counterparts (U+017F beside 's' and 'S'),
  // which Hyperscan reads several times slower than its own ASCII folding.
  void set_ascii_twin(std::unique_ptr<HsSelect> twin) { ascii_twin_ = std::move(twin); }

 private:
  // How select_lines() decides a block: in one pass over it, every match reported, or
  // line by line, each stopped at its first match (through LineDfa where it reads the
  // expressions, else a scan per line). One pass costs less where few lines match;
  // line by line where most do and each reports many matches (the Loghub templates: 1.6x
  // less time). Each copy times both on its own blocks and takes the way whose recent
  // blocks cost least per byte (the least of a few: a block preempted on a busy machine
  // only looks dear), trying the other again after 2 blocks, then 4, 8, ... up to
  // kLongestInterval while it stays dearer, and only once the cheaper way has spent
  // kTrialShare times what the dearer would cost on the block (a trial costs at most about
  // 1/kTrialShare of the time: one pass of `.` over every line costs 50 times LineDfa's
  // walk, and a trial every 64 blocks doubled the time). The answer is the same either way.
  struct Pace {
    static constexpr std::uint32_t kLongestInterval = 64;
    static constexpr double kTrialShare = 32;
    struct Recent {
      std::array<double, 4> last{};  // ns per byte
      std::size_t next = 0, count = 0;
      bool empty() const noexcept { return count == 0; }
      void add(double ns_per_byte) noexcept;
      double least() const noexcept;
    };
    std::array<Recent, 2> times;  // one pass, line by line
    std::uint32_t blocks = 0, next_try = 2, interval = 2;
    double cheap_ns = 0;  // the cheaper way's time since the dearer was last timed
    bool trying = false;  // this block goes the dearer way, to time it again
    bool each_line_next(std::size_t bytes) noexcept;
    bool each_line_cheaper() const noexcept;
    void took(bool each_line, std::size_t bytes, std::chrono::nanoseconds time) noexcept;
  };

  HsSelect() = default;
  void select_block(std::string_view block, std::vector<const char*>& line_starts,
                    std::vector<const char*>& line_ends);
  void select_in_one_pass(std::string_view block, std::vector<const char*>& line_starts,
                          std::vector<const char*>& line_ends);
  void select_each_line(std::string_view block, std::vector<const char*>& line_starts,
                        std::vector<const char*>& line_ends);

  std::shared_ptr<::hs_database> database_;  // immutable once built: shared by the clones
  // A lines database's expressions as grep's DFA reads them, if LineDfa can: built when a
  // copy first decides a block line by line (one pass suits most sets), shared by the copies.
  struct LazyDfa {
    std::vector<std::string> expressions;
    bool ignore_case = false, utf8 = false;
    std::once_flag once;
    std::unique_ptr<const LineDfa> dfa;
  };
  std::shared_ptr<LazyDfa> dfa_;
  const LineDfa* line_dfa();
  ::hs_scratch* scratch_ = nullptr;
  std::vector<std::uint32_t> accepted_;
  std::unique_ptr<HsSelect> ascii_twin_;
  Pace pace_;
};

// Many patterns of which a line names a few candidates (their factors occur in it), in
// groups of consecutive patterns, a Hyperscan database per group: a line meets only the
// databases of its candidates' groups, and each group's database is built when first
// worth it (take()), or all at once on several threads (build_all()). Shared by the
// copies; each copy clones a group's scratch when it first scans that group.
class HsGroups {
 public:
  static constexpr std::uint32_t kNone = 0xffffffffu;
  // `expressions[k]` stands for pattern `ids[k]`; groups of `group_size` expressions.
  HsGroups(std::vector<std::string> expressions, std::vector<std::uint32_t> ids, std::size_t group_size,
           bool ignore_case, bool utf8);
  ~HsGroups();
  HsGroups(const HsGroups&) = delete;
  HsGroups& operator=(const HsGroups&) = delete;

  std::unique_ptr<HsGroups> clone() const;
  // Pattern i's group (kNone: none; pattern ids up to the largest given).
  std::uint32_t group_of(std::uint32_t pattern) const noexcept;
  // Whether group g's database is ready, once the time spent without it (glibc_ns more
  // now, summed over the copies) has reached its estimated build time: then it is built
  // unless a copy is building it. build_ns_per_expression 0: built at once.
  bool take(std::uint32_t g, std::uint64_t glibc_ns, std::uint64_t build_ns_per_expression);
  // Builds groups no copy has taken yet, one after another, until none is left (the
  // callers on several threads share them out); those being built elsewhere may not be
  // ready on return.
  void help_build();
  // Every group not built yet, on up to `threads` threads of its own and the caller's.
  void build_all(std::size_t threads);
  // After take(g) said yes: whether Hyperscan took pattern i (else glibc decides it).
  bool accepted(std::uint32_t pattern) const noexcept;
  // Does some pattern of group g match `line`? With `ids`, every such pattern is added.
  bool scan(std::uint32_t g, std::string_view line, std::vector<std::uint32_t>* ids);

 private:
  struct Shared;
  HsGroups() = default;
  bool build(std::uint32_t g);

  std::shared_ptr<Shared> shared_;
  std::vector<std::unique_ptr<HsSelect>> mine_;  // by group: this copy's scratch on it
};

}  // namespace gpufilter::regex
