// CounterCopier: the counters that live in the readers and the outputs, copied into the
// metrics every second on the I/O thread (daemon.hpp), with the scan's busy time and its
// share of the last interval.
#include <algorithm>
#include <string>

#include "daemon.hpp"
#include "gpufilter/fail2ban/pyregex.hpp"

namespace gpufilter::daemon {

CounterCopier::CounterCopier(StreamSession& session, const std::vector<std::unique_ptr<AlertOutput>>& outputs,
                             const StreamScan& scan, Metrics& metrics, Log& log)
    : session_(session),
      outputs_(outputs),
      scan_(scan),
      metrics_(metrics),
      log_(log),
      timer_(session.io()),
      reported_(outputs.size()),
      reported_at_(outputs.size()) {}

void CounterCopier::copy() {
  const StreamSession::Counters c = session_.counters();
  if (session_.listening()) {
    metrics_.set("gpufilterd_source_datagrams_dropped_total", {{"reason", "no_room"}},
                 static_cast<double>(c.listen.datagrams_dropped));
    metrics_.set("gpufilterd_source_datagrams_dropped_total", {{"reason", "socket_buffer"}},
                 static_cast<double>(c.listen.datagrams_dropped_kernel));
    metrics_.set("gpufilterd_source_connections_total", {}, static_cast<double>(c.listen.connections));
    metrics_.set("gpufilterd_source_connections_refused_total", {}, static_cast<double>(c.listen.connections_refused));
    metrics_.set("gpufilterd_source_connections_lost_total", {}, static_cast<double>(c.listen.connections_lost));
  }
  if (session_.capturing()) {
    metrics_.set("gpufilterd_source_packets_total", {}, static_cast<double>(c.capture.packets));
    metrics_.set("gpufilterd_source_tcp_flows_total", {}, static_cast<double>(c.capture.flows));
    metrics_.set("gpufilterd_source_tcp_gaps_total", {}, static_cast<double>(c.capture.gaps));
  }
  if (session_.consuming()) copy_kafka(c.kafka);
  if (session_.journaling()) {
    metrics_.set("gpufilterd_journal_entries_total", {}, static_cast<double>(c.journal_entries));
    metrics_.set("gpufilterd_journal_entries_invalid_total", {}, static_cast<double>(c.journal_entries_invalid));
  }
  const std::uint64_t too_long = c.follow.lines_too_long + c.listen.lines_too_long + c.stdin_lines_too_long +
                                 c.capture.lines_too_long + c.kafka.lines_too_long;
  metrics_.set("gpufilterd_source_lines_too_long_total", {}, static_cast<double>(too_long));
  metrics_.set("gpufilterd_source_rotations_total", {}, static_cast<double>(c.follow.rotations));
  metrics_.set("gpufilterd_fail2ban_regex_limits_total", {},
               static_cast<double>(fail2ban::PyRegex::limit_failures()));
  copy_outputs();
  const Clock::time_point now = Clock::now();
  const double busy = scan_.busy_seconds();
  const double interval = std::chrono::duration<double>(now - last_copy_).count();
  metrics_.set("gpufilterd_scan_busy_seconds_total", {}, busy);
  if (interval > 0)
    metrics_.set("gpufilterd_device_utilization_ratio", {}, std::min(1.0, (busy - last_busy_) / interval));
  last_busy_ = busy;
  last_copy_ = now;
  timer_.expires_after(std::chrono::seconds(1));
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) copy();
  });
}

void CounterCopier::copy_kafka(const KafkaSource::Counters& k) {
  metrics_.set("gpufilterd_kafka_records_total", {}, static_cast<double>(k.records));
  metrics_.set("gpufilterd_kafka_bytes_total", {}, static_cast<double>(k.bytes));
  metrics_.set("gpufilterd_kafka_rebalances_total", {}, static_cast<double>(k.rebalances));
  metrics_.set("gpufilterd_kafka_commits_total", {}, static_cast<double>(k.commits));
  metrics_.set("gpufilterd_kafka_commit_failures_total", {}, static_cast<double>(k.commit_failures));
  metrics_.set("gpufilterd_kafka_consumer_lag", {}, static_cast<double>(k.lag));
  metrics_.set("gpufilterd_kafka_partitions", {}, static_cast<double>(k.partitions));
}

void CounterCopier::copy_outputs() {
  for (std::size_t i = 0; i < outputs_.size(); ++i) {
    const auto& out = outputs_[i];
    const OutputStats s = out->stats();
    const Labels l{{"output", out->name()}};
    const Labels full{{"output", out->name()}, {"reason", "queue_full"}};
    const Labels rejected{{"output", out->name()}, {"reason", "rejected"}};
    // A failing or dropping output is worth a log line, at most one per output per 10 s.
    if ((s.failures > reported_[i].failures || s.dropped > reported_[i].dropped) &&
        Clock::now() - reported_at_[i] >= std::chrono::seconds(10)) {
      log_.warn("output is failing; alerts are retried", {{"output", out->name()},
                                                          {"failures", std::to_string(s.failures)},
                                                          {"dropped", std::to_string(s.dropped)},
                                                          {"queued", std::to_string(s.queued)},
                                                          {"error", s.last_error}});
      reported_[i] = s;
      reported_at_[i] = Clock::now();
    }
    metrics_.set("gpufilterd_output_published_total", l, static_cast<double>(s.published));
    metrics_.set("gpufilterd_output_delivered_total", l, static_cast<double>(s.delivered));
    metrics_.set("gpufilterd_output_failures_total", l, static_cast<double>(s.failures));
    metrics_.set("gpufilterd_output_dropped_total", full, static_cast<double>(s.dropped));
    metrics_.set("gpufilterd_output_dropped_total", rejected, static_cast<double>(s.rejected));
    metrics_.set("gpufilterd_output_queue_depth", l, static_cast<double>(s.queued));
  }
}

}  // namespace gpufilter::daemon
