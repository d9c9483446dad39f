#include "gpufilter/daemon/fail2ban_pipeline.hpp"

#include <algorithm>
#include <chrono>
#include <exception>

namespace gpufilter::daemon {

void Fail2banPipeline::run(const RuleSet& rules, std::string_view source, const Gather& gather, const Deliver& deliver) {
  if (timed_ != &rules) {  // another set of filters: their times start afresh
    timed_ = &rules;
    filter_seconds_.assign(rules.fail2ban_filters(), 0.0);
    date_seconds_.assign(rules.fail2ban_filters(), 0.0);
  }
  std::array<bool, kSlots> live{};  // the slot holds a batch not yet delivered
  bool more = true;
  for (std::size_t t = 0;; ++t) {
    // Slot of batch t, t - 1 and t - 2: the one gathered now was delivered a step ago.
    const std::size_t now = t % kSlots, filtering = (t + 2) % kSlots, delivering = (t + 1) % kSlots;
    std::size_t dates = 0;
    if (more) {
      texts_[now].clear();
      spans_[now].clear();
      gather(now, texts_[now], spans_[now]);
      more = live[now] = !texts_[now].empty();
      if (more) dates = rules.fail2ban_begin(batches_[now], source, texts_[now], spans_[now]);
    }
    const bool filter = t >= 1 && live[filtering];
    const bool hand_out = t >= 2 && live[delivering];
    if (!more && !filter && !hand_out) return;
    const std::size_t filters = filter ? rules.fail2ban_filters() : 0;
    // The delivery first (index 0, which WorkerPool::run() gives its caller: the rules and
    // outputs stay on the scan thread), then the others longest first by what each took a
    // step ago: a long filter begun last would hold up the whole step.
    order_.clear();
    for (std::size_t i = 0; i < filters; ++i) order_.push_back(i);
    for (std::size_t k = 0; k < dates; ++k) order_.push_back(kDate | k);
    const auto cost = [&](std::size_t task) {
      return task & kDate ? date_seconds_[batches_[now].readers[task & ~kDate]] : filter_seconds_[task];
    };
    std::stable_sort(order_.begin(), order_.end(), [&](std::size_t a, std::size_t b) { return cost(a) > cost(b); });
    std::exception_ptr delivery_failed;
    pool_.run((hand_out ? 1 : 0) + order_.size(), [&](std::size_t i) {
      if (hand_out && i-- == 0) {
        try {
          rules.fail2ban_hand_out(&batches_[delivering]);
          deliver(delivering);
        } catch (...) {
          delivery_failed = std::current_exception();
        }
        rules.fail2ban_hand_out(nullptr);
        return;
      }
      const std::size_t task = order_[i];
      const auto start = std::chrono::steady_clock::now();
      if (task & kDate) rules.fail2ban_date(batches_[now], task & ~kDate);
      else rules.fail2ban_filter(batches_[filtering], task);
      const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
      (task & kDate ? date_seconds_[batches_[now].readers[task & ~kDate]] : filter_seconds_[task]) = took.count();
    });
    if (hand_out) live[delivering] = false;
    if (delivery_failed) std::rethrow_exception(delivery_failed);
    if (filter) RuleSet::fail2ban_check(batches_[filtering]);
    if (dates > 0) RuleSet::fail2ban_check(batches_[now]);
  }
}

}  // namespace gpufilter::daemon
