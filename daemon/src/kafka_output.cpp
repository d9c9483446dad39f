// The kafka output (outputs.hpp): alerts and/or selected records produced to a topic by
// librdkafka's idempotent producer. publish() and publish_record() hand the message to
// librdkafka's own bounded queue and never block; a full queue drops it and counts it. librdkafka retries a failed send
// until message.timeout.ms (the output's timeout), in order per partition; a delivery
// report ends each alert: delivered, or failed and dropped. A thread serves the reports.
//
// Settled alerts (OutputStats::settled, the kafka sources' at-least-once gate) are the
// leading run of published alerts that all have their report: reports of different
// partitions may come in any order, so each alert carries its number and the lowest one
// still waiting bounds the run.
#include <atomic>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include <librdkafka/rdkafkacpp.h>

#include "gpufilter/core/errors.hpp"
#include "gpufilter/daemon/outputs.hpp"

namespace gpufilter::daemon {

namespace {

std::unique_ptr<RdKafka::Conf> producer_conf(const KafkaOutputConfig& c) {
  if (c.brokers.empty()) throw ConfigError("brokers: none given");
  if (c.topic.empty()) throw ConfigError("topic: none given");
  std::unique_ptr<RdKafka::Conf> conf(RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  const auto set = [&](const std::string& key, const std::string& value, bool secret) {
    std::string why;
    if (conf->set(key, value, why) == RdKafka::Conf::CONF_OK) return;
    throw ConfigError(secret ? "secrets_file: " + key + ": refused by librdkafka (an unknown property or a bad value)"
                             : "settings: " + key + ": " + why);
  };
  set("bootstrap.servers", c.brokers, false);
  set("enable.idempotence", "true", false);
  set("client.id", "gpufilterd", false);
  set("linger.ms", "5", false);
  set("queue.buffering.max.messages", std::to_string(std::max<std::size_t>(c.queue, 1)), false);
  set("message.timeout.ms", std::to_string(std::max<long long>(c.timeout.count(), 1)), false);
  for (const auto& [key, value] : c.settings) set(key, value, false);
  for (const auto& [key, value] : c.secrets) set(key, value, true);
  return conf;
}

class KafkaOutput final : public AlertOutput, public RdKafka::DeliveryReportCb, public RdKafka::EventCb {
 public:
  KafkaOutput(std::string name, KafkaOutputConfig config) : name_(std::move(name)), config_(std::move(config)) {
    std::unique_ptr<RdKafka::Conf> conf = producer_conf(config_);
    std::string why;
    // With an event callback librdkafka's log lines come here (and are dropped) instead of
    // standard error: library code never prints.
    if (conf->set("dr_cb", static_cast<RdKafka::DeliveryReportCb*>(this), why) != RdKafka::Conf::CONF_OK ||
        conf->set("event_cb", static_cast<RdKafka::EventCb*>(this), why) != RdKafka::Conf::CONF_OK)
      throw ConfigError(name_ + ": " + why);
    producer_.reset(RdKafka::Producer::create(conf.get(), why));
    if (!producer_) throw ConfigError(name_ + ": " + why);
    thread_ = std::thread([this] { serve(); });
  }
  ~KafkaOutput() override { stop(); }
  KafkaOutput(const KafkaOutput&) = delete;
  KafkaOutput& operator=(const KafkaOutput&) = delete;

  const std::string& name() const override { return name_; }

  void publish(const Alert& alert) noexcept override {
    if (!config_.alerts) return;
    try {
      produce(alert_json(alert), key_of(alert), nullptr);
    } catch (...) {
      lost();
    }
  }

  bool takes_records() const noexcept override { return config_.records; }

  void publish_record(const SelectedRecord& record) noexcept override {
    if (!config_.records) return;
    try {
      std::string rules;
      for (const std::string_view name : record.rules) {
        if (!rules.empty()) rules += ',';
        rules += name;
      }
      std::unique_ptr<RdKafka::Headers> headers(RdKafka::Headers::create());
      headers->add("gpufilter.source", std::string(record.source));
      headers->add("gpufilter.rules", rules);
      produce(record.text, filled(config_.record_key, record.captures), std::move(headers));
    } catch (...) {
      lost();
    }
  }

  bool drain(std::chrono::milliseconds timeout) noexcept override {
    producer_->flush(static_cast<int>(std::min<long long>(timeout.count(), 1 << 30)));
    stop();
    std::lock_guard lock(mutex_);
    return waiting_.empty();
  }

  OutputStats stats() const noexcept override {
    std::lock_guard lock(mutex_);
    OutputStats s = stats_;
    s.queued = waiting_.size();
    s.capacity = config_.queue;
    s.settled = waiting_.empty() ? s.published : *waiting_.begin();
    return s;
  }

  // On the serving thread, inside poll().
  void dr_cb(RdKafka::Message& message) override {
    ended(reinterpret_cast<std::uintptr_t>(message.msg_opaque()), message.err(), true);
  }

  // On the serving thread: a broker error is the last error the log tells of.
  void event_cb(RdKafka::Event& event) override {
    if (event.type() != RdKafka::Event::EVENT_ERROR) return;
    try {
      std::string why = RdKafka::err2str(event.err()) + ": " + event.str();
      std::lock_guard lock(mutex_);
      stats_.last_error = std::move(why);
    } catch (...) {
    }
  }

 private:
  // The alert's group unless key_label names a label (then that label's value).
  std::string key_of(const Alert& alert) const {
    if (config_.key_label.empty()) return alert.group;
    const auto it = alert.labels.find(config_.key_label);
    return it == alert.labels.end() ? std::string() : it->second;
  }

  // One message to librdkafka's queue, numbered in publish order; librdkafka owns the
  // headers once it took the message.
  void produce(std::string_view value, const std::string& key, std::unique_ptr<RdKafka::Headers> headers) {
    std::uint64_t number = 0;
    {
      std::lock_guard lock(mutex_);
      number = stats_.published++;
      waiting_.insert(number);
    }
    const RdKafka::ErrorCode err = producer_->produce(
        config_.topic, RdKafka::Topic::PARTITION_UA, RdKafka::Producer::RK_MSG_COPY, const_cast<char*>(value.data()),
        value.size(), key.empty() ? nullptr : key.data(), key.size(), 0, headers.get(), reinterpret_cast<void*>(number));
    if (err == RdKafka::ERR_NO_ERROR) (void)headers.release();
    else ended(number, err, false);
  }

  // No memory for the copy: the message is lost, and counted.
  void lost() noexcept {
    std::lock_guard lock(mutex_);
    ++stats_.published;
    ++stats_.dropped;
  }

  void ended(std::uint64_t number, RdKafka::ErrorCode err, bool attempted) noexcept {
    std::lock_guard lock(mutex_);
    waiting_.erase(number);
    if (err == RdKafka::ERR_NO_ERROR) {
      ++stats_.delivered;
      return;
    }
    // QUEUE_FULL (or a produce refused at once): dropped; a report's error: librdkafka
    // gave up after its retries.
    ++stats_.dropped;
    if (attempted) ++stats_.failures;
    try {
      stats_.last_error = RdKafka::err2str(err);
    } catch (...) {
    }
  }

  void serve() noexcept {
    while (!stopping_.load()) producer_->poll(100);
  }

  void stop() noexcept {
    std::lock_guard join(join_mutex_);
    stopping_ = true;
    if (thread_.joinable()) thread_.join();
  }

  const std::string name_;
  const KafkaOutputConfig config_;
  std::unique_ptr<RdKafka::Producer> producer_;
  mutable std::mutex mutex_;
  OutputStats stats_;
  std::set<std::uint64_t> waiting_;  // numbers of the alerts without a report yet
  std::atomic<bool> stopping_{false};
  std::mutex join_mutex_;
  std::thread thread_;
};

}  // namespace

void check_kafka_output(const KafkaOutputConfig& config) { (void)producer_conf(config); }

std::unique_ptr<AlertOutput> make_kafka_output(std::string name, KafkaOutputConfig config) {
  return std::make_unique<KafkaOutput>(std::move(name), std::move(config));
}

}  // namespace gpufilter::daemon
