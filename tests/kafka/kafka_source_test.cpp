// KafkaSource against librdkafka's mock cluster in this process (rdkafka_mock.h), with a
// real RecordChannel read by the test as the scan would: records become lines of one
// stream per partition; values holding '\n', empty values, tombstones and over-long
// records; and the at-least-once rule: an offset is committed only when the consumer
// acknowledged the lines and the DeliveryGate says the outputs settled them.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include "gpufilter/core/errors.hpp"
#include "gpufilter/core/record_channel.hpp"
#include "gpufilter/sources/kafka_source.hpp"

namespace gpufilter {
namespace {

using namespace std::chrono_literals;

class Collected final : public Notices {
 public:
  void notice(std::string_view m) override {
    std::lock_guard lock(mutex_);
    all_.emplace_back(m);
  }
  std::vector<std::string> all() const {
    std::lock_guard lock(mutex_);
    return all_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> all_;
};

// A mock cluster with one topic, and a producer into it.
class Cluster {
 public:
  explicit Cluster(int partitions) {
    char why[512];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "test.mock.num.brokers", "1", why, sizeof why);
    rk_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, why, sizeof why);
    cluster_ = rd_kafka_handle_mock_cluster(rk_);
    rd_kafka_mock_topic_create(cluster_, "t", partitions, 1);
    bootstraps_ = rd_kafka_mock_cluster_bootstraps(cluster_);
  }
  ~Cluster() { rd_kafka_destroy(rk_); }
  const std::string& bootstraps() const { return bootstraps_; }

  // `value` nullptr: a tombstone.
  void produce(int partition, const char* value, std::size_t size) {
    ASSERT_EQ(rd_kafka_producev(rk_, RD_KAFKA_V_TOPIC("t"), RD_KAFKA_V_PARTITION(partition),
                                RD_KAFKA_V_VALUE(const_cast<char*>(value), size), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                RD_KAFKA_V_END),
              RD_KAFKA_RESP_ERR_NO_ERROR);
  }
  void produce(int partition, const std::string& value) { produce(partition, value.data(), value.size()); }
  void flush() { rd_kafka_flush(rk_, 10000); }

 private:
  rd_kafka_t* rk_ = nullptr;
  rd_kafka_mock_cluster_t* cluster_ = nullptr;
  std::string bootstraps_;
};

// Settled only when told so.
class Gate final : public DeliveryGate {
 public:
  Mark mark() const override { return {}; }
  bool settled(const Mark&) const override { return open.load(); }
  std::atomic<bool> open{false};
};

// What the scan side sees: each stream's name and text; lines are acknowledged as taken.
struct Taken {
  std::map<StreamId, std::string> names;
  std::map<StreamId, std::string> text;
  std::uint64_t skipped = 0;
  std::size_t bytes() const {
    std::size_t n = 0;
    for (const auto& [id, t] : text) n += t.size();
    return n;
  }
};

void take_until(RecordChannel& channel, Taken& taken, std::size_t bytes, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (taken.bytes() < bytes && std::chrono::steady_clock::now() < deadline) {
    RecordBatch* batch = channel.take(50ms);
    if (batch == nullptr) continue;
    for (const BatchEntry& e : batch->entries) {
      if (e.kind == BatchEntry::Kind::kOpen) taken.names[e.stream] = e.name;
      if (e.kind != BatchEntry::Kind::kLines) continue;
      taken.text[e.stream].append(batch->bytes.data() + e.begin, e.end - e.begin);
      taken.skipped += e.skipped;
      channel.acknowledge(e.stream, e.offset + (e.end - e.begin));
    }
    channel.recycle(batch);
  }
}

KafkaConfig config(const Cluster& cluster, std::shared_ptr<const DeliveryGate> gate = nullptr) {
  KafkaConfig c;
  c.brokers = cluster.bootstraps();
  c.topics = {"t"};
  c.group_id = "g";
  c.max_line_bytes = 64;
  c.gate = std::move(gate);
  c.settings = {{"auto.commit.interval.ms", "100"}, {"session.timeout.ms", "3000"}};
  return c;
}

TEST(KafkaSource, RecordsAreLinesOfOneStreamPerPartition) {
  Cluster cluster(2);
  cluster.produce(0, "first");
  cluster.produce(0, "two\nlines\n");
  cluster.produce(0, "");
  cluster.produce(0, nullptr, 0);  // a tombstone: nothing
  cluster.produce(0, std::string(100, 'x'));  // over max_line_bytes: skipped, counted
  cluster.produce(0, "after the long one");
  cluster.produce(1, "other partition");
  cluster.flush();
  RecordChannel channel({1 << 16, 3});
  channel.set_space_callback([] {});
  Collected notices;
  KafkaSource source(channel, config(cluster), notices);
  source.start();
  Taken taken;
  const std::string p0 = "first\ntwo\nlines\n\nafter the long one\n";
  const std::string p1 = "other partition\n";
  take_until(channel, taken, p0.size() + p1.size(), 30s);
  source.stop();
  std::map<std::string, std::string> by_name;
  for (const auto& [id, text] : taken.text) by_name[taken.names[id]] = text;
  EXPECT_EQ(by_name["kafka:t/0"], p0);
  EXPECT_EQ(by_name["kafka:t/1"], p1);
  EXPECT_EQ(taken.skipped, 1u);
  EXPECT_EQ(source.counters().records, 7u);
  EXPECT_EQ(source.counters().lines_too_long, 1u);
  take_until(channel, taken, SIZE_MAX, 200ms);  // the closes
  source.close();
  EXPECT_TRUE(notices.all().empty()) << notices.all().front();
}

// Reads everything there is with a fresh source of group "g"; `open`: the gate settles.
std::string read_all(Cluster& cluster, bool open, std::size_t expect) {
  auto gate = std::make_shared<Gate>();
  gate->open = open;
  RecordChannel channel({1 << 16, 3});
  channel.set_space_callback([] {});
  Collected notices;
  KafkaSource source(channel, config(cluster, gate), notices);
  source.start();
  Taken taken;
  take_until(channel, taken, expect, expect == 0 ? 3s : 30s);
  source.stop();
  take_until(channel, taken, SIZE_MAX, 200ms);
  source.close();
  std::string all;
  for (const auto& [id, text] : taken.text) all += text;
  return all;
}

// "r0" ... "r99" (appended, not "r" + ...: GCC 12's -Wrestrict misreads that one).
std::string numbered(int i) {
  std::string r(1, 'r');
  r += std::to_string(i);
  return r;
}

TEST(KafkaSource, AnOffsetIsCommittedOnlyOnceTheGateSettlesItsRecords) {
  Cluster cluster(1);
  for (int i = 0; i < 100; ++i) cluster.produce(0, numbered(i));
  cluster.flush();
  std::size_t bytes = 0;
  for (int i = 0; i < 100; ++i) bytes += numbered(i).size() + 1;
  // Acknowledged but never settled: nothing is committed, the next member reads it all again.
  EXPECT_EQ(read_all(cluster, false, bytes).size(), bytes);
  EXPECT_EQ(read_all(cluster, true, bytes).size(), bytes);
  // Settled and committed at the close: nothing is read again.
  EXPECT_EQ(read_all(cluster, true, 0), "");
  cluster.produce(0, "new");
  cluster.flush();
  EXPECT_EQ(read_all(cluster, true, 4), "new\n");
}

TEST(KafkaSource, RecordFieldsGoWithTheirLines) {
  Cluster cluster(1);
  cluster.produce(0, "no key");
  cluster.flush();
  RecordChannel channel({1 << 16, 3});
  channel.set_space_callback([] {});
  Collected notices;
  KafkaConfig c = config(cluster);
  c.record_fields = true;
  KafkaSource source(channel, c, notices);
  source.start();
  std::vector<std::shared_ptr<const RecordFields>> fields;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (fields.empty() && std::chrono::steady_clock::now() < deadline) {
    RecordBatch* batch = channel.take(50ms);
    if (batch == nullptr) continue;
    for (const BatchEntry& e : batch->entries)
      if (e.kind == BatchEntry::Kind::kLines) fields.push_back(e.fields);
    channel.recycle(batch);
  }
  source.stop();
  ASSERT_EQ(fields.size(), 1u);
  ASSERT_NE(fields[0], nullptr);
  EXPECT_EQ(fields[0]->values, (std::vector<std::pair<std::string, std::string>>{
                                   {"kafka.topic", "t"}, {"kafka.partition", "0"}, {"kafka.offset", "0"}}));
  source.close();
}

TEST(KafkaSource, SettingsLibrdkafkaRefusesAreConfigErrors) {
  KafkaConfig c;
  c.brokers = "127.0.0.1:1";
  c.topics = {"t"};
  c.group_id = "g";
  c.settings = {{"session.timeout.ms", "soon"}};
  try {
    check_kafka(c);
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("session.timeout.ms"), std::string::npos) << e.what();
  }
  c.settings = {{"no.such.property", "1"}};
  EXPECT_THROW(check_kafka(c), ConfigError);
  c.settings = {{"enable.auto.offset.store", "true"}};
  EXPECT_THROW(check_kafka(c), ConfigError);
  c.settings = {};
  c.topics = {};
  EXPECT_THROW(check_kafka(c), ConfigError);
}

}  // namespace
}  // namespace gpufilter
