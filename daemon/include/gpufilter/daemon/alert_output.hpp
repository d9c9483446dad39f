// AlertOutput: where alerts go (outputs.hpp has the five kinds: JSON lines, Alertmanager,
// webhook, Kafka, exec; a Kafka output can take the selected records too). publish() never blocks the caller (the scan thread): each output has a bounded
// queue and its own delivery thread; a failing delivery is retried with exponential
// backoff; when the queue is full the oldest alert is dropped and counted. Matching never
// waits for an output.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "gpufilter/daemon/alert.hpp"

namespace gpufilter::daemon {

struct OutputStats {
  std::uint64_t published = 0;  // alerts given to publish()
  std::uint64_t delivered = 0;  // deliveries that succeeded (HTTP 2xx, a written line)
  std::uint64_t failures = 0;   // delivery attempts that failed (each retry counts)
  std::uint64_t dropped = 0;    // alerts dropped because the queue was full
  std::uint64_t rejected = 0;   // alerts dropped because the receiver refused them for good (4xx)
  std::uint64_t queued = 0;     // alerts waiting now
  std::uint64_t capacity = 0;   // the most that may wait (beyond it alerts are dropped)
  // The first `settled` alerts published have all left for good (delivered, dropped or
  // rejected): what the kafka sources' offsets wait for.
  std::uint64_t settled = 0;
  // Why the last failed attempt failed ("connect: Connection refused", "TLS handshake:
  // certificate verify failed", "HTTP 500"), for the log; "" before any failure.
  std::string last_error;
};

class AlertOutput {
 public:
  virtual ~AlertOutput() = default;
  // "jsonl", "alertmanager", "webhook" plus the configured name, for logs and metrics.
  virtual const std::string& name() const = 0;
  // Queues the alert; never blocks, never throws.
  virtual void publish(const Alert& alert) noexcept = 0;
  // Whether the output forwards selected records (SelectedRecord), and one of them: never
  // blocks, never throws. A record counts among `published` and `settled` as an alert does.
  virtual bool takes_records() const noexcept { return false; }
  virtual void publish_record(const SelectedRecord& record) noexcept { (void)record; }
  // An alert that was firing before a restart (gpufilterd's alert_state): nothing is sent
  // for it now, but an output that re-sends active alerts (Alertmanager) keeps it among
  // them, so that it is re-sent, and resolved, as if the process had never stopped.
  virtual void adopt(const Alert& alert) noexcept { (void)alert; }
  // Delivers what is queued, waiting at most `timeout`; true when nothing is left.
  // Stops the delivery thread afterwards (shutdown).
  virtual bool drain(std::chrono::milliseconds timeout) noexcept = 0;
  virtual OutputStats stats() const noexcept = 0;
};

}  // namespace gpufilter::daemon
