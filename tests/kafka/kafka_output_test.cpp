// The kafka alert output against a Kafka-protocol broker process (kafka_broker.cpp),
// read back with Debian's kcat: every alert arrives once as its documented JSON, keyed by
// its group or a label; an unreachable broker makes alerts fail after the timeout and a
// full queue drops at once, all counted; `settled` (what kafka sources' offsets wait for)
// covers only alerts that have their answer.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "gpufilter/core/errors.hpp"
#include "gpufilter/daemon/outputs.hpp"
#include "broker_process.hpp"
#include "testutil/testutil.hpp"

namespace gpufilter::test {
namespace {

using namespace std::chrono_literals;
using daemon::Alert;

Alert alert(int i) {
  Alert a;
  a.rule = "r";
  a.severity = "warning";
  a.group = "host-" + std::to_string(i % 5);
  a.labels = {{"alertname", "r"}, {"team", i % 2 == 0 ? "even" : "odd"}};
  a.line = "line " + std::to_string(i);
  a.fingerprint = "f";
  return a;
}

TEST(KafkaOutput, EveryAlertArrivesOnceKeyedByItsGroup) {
  BrokerProcess broker({"alerts:3"});
  daemon::KafkaOutputConfig config;
  config.brokers = broker.bootstraps();
  config.topic = "alerts";
  auto out = daemon::make_kafka_output("kafka", config);
  for (int i = 0; i < 500; ++i) out->publish(alert(i));
  EXPECT_TRUE(out->drain(30s));
  const daemon::OutputStats s = out->stats();
  EXPECT_EQ(s.published, 500u);
  EXPECT_EQ(s.delivered, 500u);
  EXPECT_EQ(s.settled, 500u);
  EXPECT_EQ(s.dropped, 0u);
  std::map<std::string, int> lines;
  std::istringstream in(broker.consume("alerts", "%k\t%s\n"));
  for (std::string record; std::getline(in, record);) {
    const std::size_t tab = record.find('\t');
    const nlohmann::json j = nlohmann::json::parse(record.substr(tab + 1));
    EXPECT_EQ(record.substr(0, tab), j["group"].get<std::string>());
    ++lines[j["line"].get<std::string>()];
  }
  EXPECT_EQ(lines.size(), 500u);
  for (const auto& [line, n] : lines) EXPECT_EQ(n, 1) << line;
}

// `send: records`: a record's bytes as they are (newline-free, any byte), keyed by the
// filled record_key, its source and rules as headers; alerts are not sent then, and
// records count among published and settled.
TEST(KafkaOutput, RecordsGoAsTheirBytesWithKeyAndHeaders) {
  BrokerProcess broker({"records:1"});
  daemon::KafkaOutputConfig config;
  config.brokers = broker.bootstraps();
  config.topic = "records";
  config.alerts = false;
  config.records = true;
  config.record_key = "{{kafka.key}}/{{user}}";
  auto out = daemon::make_kafka_output("kafka", config);
  EXPECT_TRUE(out->takes_records());
  out->publish(alert(1));
  daemon::SelectedRecord r;
  r.source = "kafka:logs/2";
  r.rules = {"a", "b"};
  r.captures = {{"kafka.key", "k1"}, {"user", "root"}};
  const std::string text = "failed \xff\x01 for root";
  r.text = text;
  out->publish_record(r);
  EXPECT_TRUE(out->drain(30s));
  EXPECT_EQ(out->stats().published, 1u);
  EXPECT_EQ(out->stats().settled, 1u);
  EXPECT_EQ(broker.consume("records", "%k|%h|%s\n"),
            "k1/root|gpufilter.source=kafka:logs/2,gpufilter.rules=a,b|" + text + "\n");
}

TEST(KafkaOutput, KeyedByALabelWhenAsked) {
  BrokerProcess broker({"alerts:3"});
  daemon::KafkaOutputConfig config;
  config.brokers = broker.bootstraps();
  config.topic = "alerts";
  config.key_label = "team";
  auto out = daemon::make_kafka_output("kafka", config);
  for (int i = 0; i < 10; ++i) out->publish(alert(i));
  EXPECT_TRUE(out->drain(30s));
  const std::string keys = broker.consume("alerts", "%k\n");
  EXPECT_EQ(std::count(keys.begin(), keys.end(), 'e'), 5 * 2);  // "even" x5 has two
  EXPECT_NE(keys.find("odd"), std::string::npos);
}

TEST(KafkaOutput, AnUnreachableBrokerFailsAfterTheTimeoutAndAFullQueueDropsAtOnce) {
  daemon::KafkaOutputConfig config;
  config.brokers = "127.0.0.1:1";
  config.topic = "alerts";
  config.queue = 10;
  config.timeout = 500ms;
  auto out = daemon::make_kafka_output("kafka", config);
  for (int i = 0; i < 100; ++i) out->publish(alert(i));
  daemon::OutputStats s = out->stats();
  EXPECT_EQ(s.published, 100u);
  EXPECT_EQ(s.dropped, 90u);   // the queue holds 10
  EXPECT_EQ(s.settled, 0u);    // the first 10 wait for their answer
  std::this_thread::sleep_for(2s);
  s = out->stats();
  EXPECT_EQ(s.dropped, 100u);  // message.timeout.ms passed
  EXPECT_EQ(s.failures, 10u);
  EXPECT_EQ(s.settled, 100u);
  EXPECT_EQ(s.queued, 0u);
  EXPECT_FALSE(s.last_error.empty());
  EXPECT_TRUE(out->drain(1s));
}

TEST(KafkaOutput, SettingsLibrdkafkaRefusesAreConfigErrors) {
  daemon::KafkaOutputConfig config;
  config.brokers = "127.0.0.1:1";
  config.topic = "alerts";
  config.settings = {{"acks", "some"}};
  EXPECT_THROW(daemon::check_kafka_output(config), ConfigError);
  config.settings = {};
  config.secrets = {{"sasl.password", ""}, {"linger.ms", "hunter2"}};
  try {
    daemon::check_kafka_output(config);
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()).find("hunter2"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gpufilter::test
