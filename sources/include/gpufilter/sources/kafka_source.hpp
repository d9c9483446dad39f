// KafkaSource: Kafka topics as line streams, beside Follower, Listener, StdinReader and
// CaptureSource (gpufilterd's `kafka:` source, gpufilter --kafka). librdkafka's C++
// consumer (Debian: librdkafka-dev) joins a consumer group; each assigned partition is one
// stream of the channel ("kafka:TOPIC/PARTITION"), opened when the partition is assigned
// and closed when it is revoked; each record's value is one line (a value holding '\n' is
// several; a missing final '\n' is added; a tombstone is nothing).
//
//   consumer thread: consume() -> rebalance callback (assign: open streams; revoke: store
//                    what is settled, commit it, close the streams)
//                    each record -> hand_on(stream, value) -> channel, waiting for room
//                    about every 100 ms: store_settled() -> offsets_store()
//   librdkafka:      commits the stored offsets every auto.commit.interval.ms
//   I/O thread:      start(), stop(), on_space(), stopped()
//   after the drain: close(): store and commit what is settled, leave the group
//
// At least once. An offset is stored only when (1) the consumer acknowledged every line
// of the records before it (RecordChannel::acknowledge: scanned, and what they produced
// handed to the outputs), and (2) the DeliveryGate, when there is one, says that every
// output has delivered, durably written, or given up on (dropped and counted) everything
// handed to it by then. enable.auto.offset.store is off, as Vector does it. A crash re-reads
// at most the records after the last committed offset: those not yet acknowledged and
// settled, plus at most auto.commit.interval.ms of stored ones. A partition taken away by
// a rebalance commits what is settled at that moment; its new owner re-reads the rest.
//
// Backpressure: the source waits while the channel is full or the gate is congested, so
// that a slow output slows the reading (the lag grows) instead of dropping alerts. A
// wait longer than max.poll.interval.ms (5 minutes by default) makes librdkafka leave the
// group; the partitions go to the other members and come back when it reads again.
//
// No exception leaves the thread: librdkafka's errors go to Notices (a fatal one ends the
// source and closes its streams). Memory: one record (held while the channel is full),
// plus per partition the ends of the records in flight (bounded by the channel) and at
// most kMaxMarks delivery marks.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gpufilter/core/notices.hpp"
#include "gpufilter/core/record_channel.hpp"

namespace gpufilter {

// What must have left the process before an acknowledged offset may be stored. mark() is
// taken after an acknowledgement is read; settled(mark) is true once every output has
// delivered (or given up on) everything it had been handed when the mark was taken.
class DeliveryGate {
 public:
  using Mark = std::vector<std::uint64_t>;
  virtual ~DeliveryGate() = default;
  virtual Mark mark() const = 0;                       // any thread
  virtual bool settled(const Mark& mark) const = 0;    // any thread
  // True while the outputs are too far behind to take more (an output's queue half full):
  // the source reads nothing more until it is false again, rather than let them drop.
  virtual bool congested() const { return false; }     // any thread
};

struct KafkaConfig {
  std::string brokers;              // bootstrap.servers
  std::vector<std::string> topics;  // subscribed (a name starting '^' is a regex, as librdkafka reads it)
  std::string group_id;             // group.id ("": gpufilter-PID, nothing committed)
  // Further librdkafka properties, set after ours (security.protocol, sasl.*, ssl.*,
  // session.timeout.ms, ...): a user's setting wins. Never logged (they may hold secrets).
  std::vector<std::pair<std::string, std::string>> settings;
  // Likewise, but secret (sasl.password ...): set last; a value librdkafka refuses is
  // named by its key only, never quoted.
  std::vector<std::pair<std::string, std::string>> secrets;
  std::size_t max_line_bytes = 1u << 20;
  std::shared_ptr<const DeliveryGate> gate;  // null: acknowledged is settled
  // Hand each record's fields on with its lines (RecordFields): kafka.topic,
  // kafka.partition, kafka.offset, kafka.key (when it has one) and kafka.header.NAME per
  // header (the first kMaxHeaders; a key or header value cut to kMaxFieldBytes).
  bool record_fields = false;
  std::uint32_t origin = 0;  // BatchEntry::origin of its streams
};

// Builds (never connects) a consumer configuration as the source would: throws
// ConfigError naming the property librdkafka refuses and its reason ("settings:
// session.timeout.ms: Invalid value ..."), or a missing brokers/topics.
void check_kafka(const KafkaConfig& config);

// Whether a librdkafka property holds a secret (passwords, private keys, SASL, OAuth and
// Kerberos settings): such a property is refused on a command line and in gpufilterd's
// settings (secrets_file takes it), and never quoted.
bool kafka_secret_property(const std::string& key);

// gpufilter --kafka URL: kafka://HOST:PORT[,HOST:PORT...]/TOPIC[,TOPIC...][?KEY=VALUE&...]
// where `group=NAME` joins that consumer group (its offsets committed as the lines are
// written) and every other KEY is a librdkafka property (not a secret: those are refused).
// Without a group the topics are read from their start, nothing committed. Throws
// ConfigError ("--kafka URL: why"), checked as check_kafka() does.
KafkaConfig parse_kafka_url(const std::string& url, std::size_t max_line_bytes);

// What StreamSession asks of a Kafka source: KafkaSource, linked in (gpufilterd) or made
// by the module that gpufilter loads for --kafka (kafka_module.hpp).
class KafkaReader {
 public:
  virtual ~KafkaReader() = default;
  // "kafka:TOPIC,TOPIC": for messages.
  virtual const std::string& name() const noexcept = 0;
  // Subscribes and starts the consumer thread. Once, after the channel's space callback is set.
  virtual void start() = 0;
  // Any thread: stop consuming; what is held is handed on, then the streams close.
  virtual void stop() noexcept = 0;
  // True once every stream is closed and the thread is done (or before start()).
  virtual bool stopped() const noexcept = 0;
  // Any thread: the channel has room again.
  virtual void on_space() = 0;
  // After stop() and once what was scanned is delivered (gpufilterd: after the outputs'
  // drain): stores and commits what is settled, then leaves the group. Throws SourceError
  // when the commit fails (the records after the last commit will be read again), but
  // for a group still rebalancing (all members stopping at once): that is a notice.
  virtual void close() = 0;

  struct Counters {
    std::uint64_t records = 0;         // records read
    std::uint64_t bytes = 0;           // their values' bytes
    std::uint64_t lines_too_long = 0;  // records (lines) over max_line_bytes, skipped
    std::uint64_t rebalances = 0;      // assignments and revocations
    std::uint64_t commits = 0;         // offset commits that succeeded
    std::uint64_t commit_failures = 0; // offset commits that failed
    std::int64_t lag = 0;              // records behind the partitions' ends (last statistics)
    std::uint64_t partitions = 0;      // assigned now
  };
  virtual Counters counters() const noexcept = 0;  // any thread
};

class KafkaSource final : public KafkaReader {
 public:
  // Makes the consumer (no connection yet). Throws ConfigError (check_kafka's), SourceError.
  KafkaSource(RecordChannel& channel, KafkaConfig config, Notices& notices);
  ~KafkaSource() override;  // ends the thread; closes the consumer without committing more
  KafkaSource(const KafkaSource&) = delete;
  KafkaSource& operator=(const KafkaSource&) = delete;

  const std::string& name() const noexcept override { return name_; }
  void start() override;
  void stop() noexcept override;
  bool stopped() const noexcept override { return done_.load(std::memory_order_acquire); }
  void on_space() override;
  void close() override;
  Counters counters() const noexcept override;

 private:
  struct Impl;
  void run() noexcept;

  RecordChannel& channel_;
  const KafkaConfig config_;
  Notices& notices_;
  std::string name_;
  std::unique_ptr<Impl> impl_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> done_{true};
  std::thread thread_;
};

}  // namespace gpufilter
