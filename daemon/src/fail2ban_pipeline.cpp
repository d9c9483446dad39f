#include "gpufilter/daemon/fail2ban_pipeline.hpp"

#include <algorithm>
#include <chrono>
#include <exception>

namespace gpufilter::daemon {

void Fail2banPipeline::run(const RuleSet& rules, std::string_view source, const Gather& gather, const Deliver& deliver,
                           std::optional<double> known) {
  if (timed_ != &rules) {  // another set of filters: their times start afresh
    timed_ = &rules;
    seconds_[kFilter].assign(rules.fail2ban_filters(), 0.0);
    seconds_[kDate].assign(rules.fail2ban_filters(), 0.0);
    seconds_[kAhead].assign(rules.fail2ban_filters(), 0.0);
    seconds_[kLane].assign(rules.fail2ban_filters(), 0.0);
  }
  std::array<bool, kSlots> live{};  // the slot holds a batch not yet delivered
  bool more = true;
  for (std::size_t t = 0;; ++t) {
    // The slots of batches t, t - 1, ..., t - 4: the one gathered now was delivered a step
    // ago.
    const std::size_t now = t % kSlots, ahead = (t + 4) % kSlots, filtering = (t + 3) % kSlots,
                      laning = (t + 2) % kSlots, delivering = (t + 1) % kSlots;
    tasks_.clear();
    if (more) {
      texts_[now].clear();
      spans_[now].clear();
      gather(now, texts_[now], spans_[now]);
      more = live[now] = !texts_[now].empty();
      if (more) add(kDate, rules.fail2ban_begin(batches_[now], source, texts_[now], spans_[now], known));
    }
    const bool search = t >= 1 && live[ahead];
    const bool filter = t >= 2 && live[filtering];
    const bool lanes = t >= 3 && live[laning];
    const bool hand_out = t >= 4 && live[delivering];
    if (!more && !search && !filter && !lanes && !hand_out) return;
    if (search) add(kAhead, rules.fail2ban_ahead(batches_[ahead], pool_.width()));
    if (lanes) add(kLane, rules.fail2ban_lanes(batches_[laning]));
    // One filter on fewer than four threads reads its batch on the thread that delivers it,
    // when it is delivered, while the others date and search ahead: its outcomes are made and taken
    // apart on one thread (made on one and freed on another, they cost the delivery as much
    // again). On more, the filter and the delivery each on a thread of its own are faster.
    // The sshd rule, 67 MB here (2 threads): 0.66-0.70 s so against 0.86-0.87 line by line;
    // GPU machine (16), 268 MB: 5.2-6.5 s so against 4.9-6.0 apart.
    const bool fused = rules.fail2ban_filters() == 1 && pool_.width() < 4;
    if (filter && !fused) add(kFilter, rules.fail2ban_filters());
    const std::array<RuleSet::Fail2banBatch*, 4> of = {&batches_[now], &batches_[ahead], &batches_[filtering],
                                                       &batches_[laning]};
    // The delivery first (index 0, which WorkerPool::run() gives its caller: the rules and
    // outputs stay on the scan thread), then the others longest first by what each took a
    // step ago: a long filter begun last would hold up the whole step.
    std::stable_sort(tasks_.begin(), tasks_.end(), [&](const Task& a, const Task& b) {
      return cost(a, *of[a.kind]) > cost(b, *of[b.kind]);
    });
    const RuleSet::Fail2banBatch& searching = batches_[ahead];
    piece_seconds_.assign(search ? searching.ahead_tasks.size() : 0, 0.0);
    const RuleSet::Fail2banBatch& laned = batches_[laning];
    lane_seconds_.assign(lanes ? laned.lane_tasks.size() : 0, 0.0);
    std::exception_ptr delivery_failed;
    pool_.run((hand_out ? 1 : 0) + tasks_.size(), [&](std::size_t i) {
      if (hand_out && i-- == 0) {
        try {
          if (fused) rules.fail2ban_filter(batches_[delivering], 0);
          rules.fail2ban_hand_out(&batches_[delivering]);
          deliver(delivering);
        } catch (...) {
          delivery_failed = std::current_exception();
        }
        rules.fail2ban_hand_out(nullptr);
        return;
      }
      run_task(rules, tasks_[i], *of[tasks_[i].kind]);
    });
    for (std::size_t i = 0; i < piece_seconds_.size(); ++i) {
      const std::size_t f = searching.ahead_tasks[i].first;
      if (i == 0 || searching.ahead_tasks[i - 1].first != f) seconds_[kAhead][f] = 0;
      seconds_[kAhead][f] += piece_seconds_[i];
    }
    for (std::size_t i = 0; i < lane_seconds_.size(); ++i) {
      const std::size_t f = laned.lane_tasks[i].first;
      if (i == 0 || laned.lane_tasks[i - 1].first != f) seconds_[kLane][f] = 0;
      seconds_[kLane][f] = std::max(seconds_[kLane][f], lane_seconds_[i]);
    }
    if (hand_out) live[delivering] = false;
    if (delivery_failed) std::rethrow_exception(delivery_failed);
    if (filter && !fused) RuleSet::fail2ban_check(batches_[filtering]);
    if (lanes) RuleSet::fail2ban_check(batches_[laning]);
    if (more) RuleSet::fail2ban_check(batches_[now]);
  }
}

void Fail2banPipeline::add(Kind kind, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) tasks_.push_back({kind, i});
}

// What a task took a step ago, by the filter it is of: a date reader's whole batch, a
// filter's, or a piece of what a filter searched ahead.
double Fail2banPipeline::cost(const Task& task, const RuleSet::Fail2banBatch& b) const {
  switch (task.kind) {
    case kDate: return seconds_[kDate][b.readers[task.index]];
    case kAhead: {
      const std::size_t filter = b.ahead_tasks[task.index].first;
      return seconds_[kAhead][filter] / static_cast<double>((b.lines.size() + b.piece[filter] - 1) / b.piece[filter]);
    }
    case kLane: return seconds_[kLane][b.lane_tasks[task.index].first];
    default: return seconds_[kFilter][task.index];
  }
}

void Fail2banPipeline::run_task(const RuleSet& rules, const Task& task, RuleSet::Fail2banBatch& b) {
  const auto start = std::chrono::steady_clock::now();
  switch (task.kind) {
    case kDate: rules.fail2ban_date(b, task.index); break;
    case kAhead: rules.fail2ban_search_ahead(b, task.index); break;
    case kLane: rules.fail2ban_lane(b, task.index); break;
    default: rules.fail2ban_filter(b, task.index);
  }
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // By the rule the task is of: a date reader's, a filter's; a filter's pieces run side by
  // side, each into its own entry, summed after the step.
  switch (task.kind) {
    case kDate: seconds_[kDate][b.readers[task.index]] = took; break;
    case kAhead: piece_seconds_[task.index] = took; break;
    case kLane: lane_seconds_[task.index] = took; break;
    default: seconds_[kFilter][task.index] = took;
  }
}

}  // namespace gpufilter::daemon
