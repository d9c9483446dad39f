// Fail2banPipeline: one source's lines through RuleSet's fail2ban filters, five batches
// in flight. Each step is one WorkerPool::run() of five kinds of task side by side:
//
//   batch t      dated: a task per date reader          (RuleSet::fail2ban_date)
//   batch t - 1  searched ahead: a task per piece of a   (RuleSet::fail2ban_search_ahead)
//                filter that would hold up the step
//   batch t - 2  through the filters: one per filter     (RuleSet::fail2ban_filter)
//   batch t - 3  the lines a filter queued to lanes by   (RuleSet::fail2ban_lane)
//                connection: a task per lane
//   batch t - 4  delivered: one task, the caller's       (RuleEngine, outputs)
//
// Each batch takes its steps in order and each filter reads its lines in order, so the
// outcomes are those of line by line (tests/daemon/rules_test.cpp), while the dates, the
// searches, the filters and the rules' thresholds and alerts overlap on as many threads as
// there are tasks: the delivery of one batch no longer waits for the slowest filter of the
// next, nor a filter for the regex searches of its lines (Filter::search_ahead()).
// The tasks of a step are handed out longest first (by what each took the step before).
// One filter on fewer than four threads is read in the delivery's task instead, a step
// later (run()).
#pragma once

#include <array>
#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "gpufilter/core/workers.hpp"
#include "gpufilter/daemon/rules.hpp"

namespace gpufilter::daemon {

class Fail2banPipeline {
 public:
  static constexpr std::size_t kSlots = 5;
  // gather(slot, texts, spans): the next batch's lines, fail2ban_text() of each (valid until
  // the slot's deliver() returns), and the occurrences the scan found in each; none left
  // when it leaves `texts` empty. The caller keeps what else it needs per slot.
  using Gather = std::function<void(std::size_t slot, std::vector<std::string_view>& texts,
                                    std::vector<std::span<const Occurrence>>& spans)>;
  // deliver(slot): each line of the slot's batch to the RuleEngine, in order, while
  // RuleSet::fail2ban_lines() hands out their outcomes.
  using Deliver = std::function<void(std::size_t slot)>;

  explicit Fail2banPipeline(WorkerPool& pool) : pool_(pool) {}

  // Every batch gather() gives, through `rules`' filters (the RuleEngine's current set: a
  // reload replaces it between runs), delivered in order before it returns. What a task
  // throws is thrown here (the older batch's first); the batches still in flight are dropped.
  // `known`: the time of every line gather() gives (one journal entry's), if given.
  void run(const RuleSet& rules, std::string_view source, const Gather& gather, const Deliver& deliver,
           std::optional<double> known = std::nullopt);

 private:
  enum Kind : std::size_t { kDate, kAhead, kFilter, kLane };  // a task's, and its batch's in a step
  struct Task {
    Kind kind;
    // The date reader's, the piece's (Fail2banBatch::ahead_tasks), the filter's, or the
    // lane's (Fail2banBatch::lane_tasks).
    std::size_t index;
  };
  void add(Kind kind, std::size_t count);
  double cost(const Task& task, const RuleSet::Fail2banBatch& b) const;
  void run_task(const RuleSet& rules, const Task& task, RuleSet::Fail2banBatch& b);

  WorkerPool& pool_;
  const RuleSet* timed_ = nullptr;  // the set the times below are of (compared, never read)
  std::array<RuleSet::Fail2banBatch, kSlots> batches_;
  std::array<std::vector<std::string_view>, kSlots> texts_;
  std::array<std::vector<std::span<const Occurrence>>, kSlots> spans_;
  // What each date reader, each filter's searches ahead, each filter and each filter's
  // lanes (by its index in RuleSet::fail2ban_rules()) took in its last step, seconds, by
  // Kind: a step's tasks are handed out longest first.
  std::array<std::vector<double>, 4> seconds_;
  std::vector<double> piece_seconds_;  // this step's, per search-ahead task
  std::vector<double> lane_seconds_;   // this step's, per lane task
  std::vector<Task> tasks_;            // the step's but the delivery
};

}  // namespace gpufilter::daemon
