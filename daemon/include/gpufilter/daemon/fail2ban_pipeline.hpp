// Fail2banPipeline: one source's lines through RuleSet's fail2ban filters, three batches
// in flight. Each step is one WorkerPool::run() of three kinds of task side by side:
//
//   batch t      dated: a task per date reader      (RuleSet::fail2ban_date)
//   batch t - 1  through the filters: one per filter (RuleSet::fail2ban_filter)
//   batch t - 2  delivered: one task, the caller's   (RuleEngine, outputs)
//
// Each batch takes its steps in order and each filter reads its lines in order, so the
// outcomes are those of line by line (tests/daemon/rules_test.cpp), while the dates, the
// filters and the rules' thresholds and alerts overlap on as many threads as there are
// tasks: the delivery of one batch no longer waits for the slowest filter of the next.
// The tasks of a step are handed out longest first (by what each took the step before).
#pragma once

#include <array>
#include <cstddef>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "gpufilter/core/workers.hpp"
#include "gpufilter/daemon/rules.hpp"

namespace gpufilter::daemon {

class Fail2banPipeline {
 public:
  static constexpr std::size_t kSlots = 3;
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
  void run(const RuleSet& rules, std::string_view source, const Gather& gather, const Deliver& deliver);

 private:
  WorkerPool& pool_;
  const RuleSet* timed_ = nullptr;  // the set the times below are of (compared, never read)
  std::array<RuleSet::Fail2banBatch, kSlots> batches_;
  std::array<std::vector<std::string_view>, kSlots> texts_;
  std::array<std::vector<std::span<const Occurrence>>, kSlots> spans_;
  // What each filter and each date reader (by its index in RuleSet::fail2ban_rules()) took
  // in its last step, seconds: a step's tasks are handed out longest first.
  std::vector<double> filter_seconds_, date_seconds_;
  static constexpr std::size_t kDate = std::size_t{1} << 40;  // a task's mark: a date reader's
  std::vector<std::size_t> order_;  // the step's tasks but the delivery: filter i, or kDate | reader k
};

}  // namespace gpufilter::daemon
