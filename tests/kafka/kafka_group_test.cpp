// gpufilterd instances sharing a topic as one Kafka consumer group, with real parts: a
// Kafka-protocol broker in a process of its own (kafka_broker.cpp: librdkafka's mock
// cluster), records produced by Debian's kcat, three gpufilterd processes with one
// group_id, each alerting every record to a JSON-lines file and to an alerts topic. One member is killed with
// SIGKILL while records flow; the others take its partitions over. Every record is
// alerted at least once (none lost), and a record alerted twice is one the killed member
// alerted and had not committed. A member started after the others stopped reads nothing
// again: their offsets were committed at the stop.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "broker_process.hpp"
#include "testutil/testutil.hpp"

namespace gpufilter::test {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr int kPartitions = 6;

std::string temp_dir() {
  char pattern[] = "/tmp/gpufilter-kafka-XXXXXX";
  return ::mkdtemp(pattern);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// One gpufilterd, its log in a file (nothing to drain), killed if the test leaves it.
class Member {
 public:
  // The group's member of the sequence test.
  Member(const std::string& dir, const std::string& name, const std::string& brokers) : dir_(dir), name_(name) {
    std::ostringstream config;
    config << "sources:\n"
           << "  - kafka:\n"
           << "      brokers: \"" << brokers << "\"\n"
           << "      topics: logs\n"
           << "      group_id: sequence-test\n"
           << "      settings: {session.timeout.ms: \"3000\", heartbeat.interval.ms: \"300\", "
              "auto.commit.interval.ms: \"200\"}\n"
           << "rules:\n"
           << "  - name: every-record\n"
           << "    regex: 'seq [0-9]+'\n"
           << "    cooldown: 0s\n"
           << "    labels: {partition: \"{{kafka.partition}}\"}\n"
           << "outputs:\n"
           << "  - {type: jsonl, path: " << output() << ", queue: 1000000}\n"
           << "  - {type: kafka, brokers: \"" << brokers << "\", topic: alerts, queue: 1000000}\n"
           << "server: 127.0.0.1:0\n";
    start(config.str());
  }
  // One with its own configuration.
  struct Config {
    std::string text;
  };
  Member(const std::string& dir, const std::string& name, const Config& config) : dir_(dir), name_(name) {
    start(config.text);
  }
  ~Member() {
    if (!exited_) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
  }
  Member(const Member&) = delete;
  Member& operator=(const Member&) = delete;

  std::string output() const { return dir_ + "/" + name_ + ".jsonl"; }
  std::string log_path() const { return dir_ + "/" + name_ + ".log"; }
  std::string log() const { return read_file(log_path()); }
  void signal(int number) const { ::kill(pid_, number); }
  std::optional<int> wait_exit(std::chrono::milliseconds limit) {
    const auto deadline = Clock::now() + limit;
    for (;;) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      if (Clock::now() >= deadline) return std::nullopt;
      std::this_thread::sleep_for(10ms);
    }
  }
  // The sequence numbers alerted so far, in the order written.
  std::vector<long> alerted() const {
    std::vector<long> seqs;
    const std::string text = read_file(output());
    static const std::regex line_re(R"re("line":"seq ([0-9]+)")re");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), line_re); it != std::sregex_iterator(); ++it)
      seqs.push_back(std::stol((*it)[1].str()));
    return seqs;
  }

 private:
  void start(const std::string& text) {
    const std::string config = dir_ + "/" + name_ + ".yaml";
    std::ofstream(config) << text;
    ::chmod(config.c_str(), 0644);
    const SpawnedProcess child = spawn_process(
        {"/bin/sh", "-c", "exec \"$0\" --config \"$1\" 2>\"$2\" >/dev/null", gpufilterd_binary(), config, log_path()});
    pid_ = child.pid;
    ::close(child.in);
    ::close(child.out);
    ::close(child.err);
  }

  std::string dir_;
  std::string name_;
  pid_t pid_ = -1;
  bool exited_ = false;
};

// Records "seq FIRST" .. "seq LAST" to the topic through kcat.
void produce(const BrokerProcess& broker, long first, long last) {
  std::string records;
  for (long i = first; i <= last; ++i) records += "seq " + std::to_string(i) + "\n";
  broker.produce("logs", records);
}

std::map<long, int> counts(const std::vector<const Member*>& members) {
  std::map<long, int> c;
  for (const Member* m : members)
    for (const long s : m->alerted()) ++c[s];
  return c;
}

// The first few sequence numbers up to `last` that no member alerted.
std::string missing(const std::map<long, int>& seen, long last) {
  std::string out;
  int n = 0;
  for (long s = 1; s <= last && n < 20; ++s)
    if (seen.count(s) == 0) out += std::to_string(s) + (++n < 20 ? " " : " ...");
  return out;
}

bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  while (!done()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(50ms);
  }
  return true;
}

TEST(KafkaGroup, AMemberKilledMidStreamLosesNoRecordAndDuplicatesOnlyWhatItHadNotCommitted) {
  const std::string dir = temp_dir();
  BrokerProcess broker({"logs:" + std::to_string(kPartitions), "alerts:3"});
  ASSERT_FALSE(broker.bootstraps().empty());
  Member a(dir, "a", broker.bootstraps()), b(dir, "b", broker.bootstraps()), c(dir, "c", broker.bootstraps());
  const std::vector<const Member*> all{&a, &b, &c};

  // Until the group settled with every member holding partitions: each one alerts.
  long produced = 0;
  ASSERT_TRUE(wait_until(
      [&] {
        produce(broker, produced + 1, produced + 300);
        produced += 300;
        std::this_thread::sleep_for(300ms);
        return !a.alerted().empty() && !b.alerted().empty() && !c.alerted().empty();
      },
      60s))
      << a.log() << b.log() << c.log();
  ASSERT_TRUE(wait_until([&] { return counts(all).size() == static_cast<std::size_t>(produced); }, 30s))
      << "alerted " << counts(all).size() << " of " << produced << ", missing " << missing(counts(all), produced)
      << "\n" << a.log() << b.log() << c.log();

  // Records flow while `a` is killed.
  const long settled_end = produced;
  std::thread producer([&, first = produced + 1] {
    for (long i = 0; i < 20; ++i) {
      produce(broker, first + i * 500, first + i * 500 + 499);
      std::this_thread::sleep_for(50ms);
    }
  });
  // Killed once it alerted some of them, while the producer goes on.
  EXPECT_TRUE(wait_until(
      [&] {
        const std::vector<long> seqs = a.alerted();
        return std::any_of(seqs.begin(), seqs.end(), [&](long s) { return s > settled_end; });
      },
      30s));
  a.signal(SIGKILL);
  EXPECT_EQ(a.wait_exit(10s), 128 + SIGKILL);
  producer.join();
  produced += 10000;
  // After the group noticed (session.timeout.ms), more records go to the survivors.
  std::this_thread::sleep_for(4s);
  produce(broker, produced + 1, produced + 5000);
  produced += 5000;

  ASSERT_TRUE(wait_until([&] { return counts(all).size() == static_cast<std::size_t>(produced); }, 60s))
      << "alerted " << counts(all).size() << " of " << produced << "\n" << b.log() << c.log();
  // One after the other, the group settled in between: a member that stops while another's
  // leaving rebalances the group may find its last commit refused (a notice; the group
  // then reads again what it had not committed, at least once), which the new member's
  // check below would take for a lost commit.
  b.signal(SIGTERM);
  EXPECT_EQ(b.wait_exit(30s), 0) << b.log();
  std::this_thread::sleep_for(4s);
  c.signal(SIGTERM);
  EXPECT_EQ(c.wait_exit(30s), 0) << c.log();

  const std::map<long, int> seen = counts(all);
  const std::vector<long> by_a = a.alerted();
  const std::set<long> from_a(by_a.begin(), by_a.end());
  std::size_t once = 0, twice = 0, more = 0, lost = 0, twice_not_a = 0;
  for (long s = 1; s <= produced; ++s) {
    const auto it = seen.find(s);
    const int n = it == seen.end() ? 0 : it->second;
    if (n == 0) ++lost;
    if (n == 1) ++once;
    if (n == 2) ++twice;
    if (n > 2) ++more;
    if (n >= 2 && from_a.count(s) == 0) ++twice_not_a;
  }
  const std::size_t a_mid_stream = static_cast<std::size_t>(
      std::count_if(by_a.begin(), by_a.end(), [&](long s) { return s > settled_end; }));
  std::printf("kafka consumer group: produced %ld, alerted once %zu, twice %zu, more %zu, lost %zu "
              "(the killed member alerted %zu, %zu of them while records flowed)\n",
              produced, once, twice, more, lost, by_a.size(), a_mid_stream);
  EXPECT_GT(a_mid_stream, 0u) << "the member was killed before it read anything of the stream";
  EXPECT_EQ(lost, 0u);
  EXPECT_EQ(more, 0u);
  EXPECT_EQ(twice_not_a, 0u) << "a record alerted twice that the killed member never alerted";
  EXPECT_LT(twice, by_a.size() + 1);
  EXPECT_EQ(seen.size(), static_cast<std::size_t>(produced));

  // The kafka output of the same members: every record's alert is on the alerts topic.
  const std::string topic = broker.consume("alerts");
  std::set<long> on_topic;
  static const std::regex line_re(R"re("line":"seq ([0-9]+)")re");
  for (auto it = std::sregex_iterator(topic.begin(), topic.end(), line_re); it != std::sregex_iterator(); ++it)
    on_topic.insert(std::stol((*it)[1].str()));
  EXPECT_EQ(on_topic.size(), static_cast<std::size_t>(produced));
  // Each alert's partition label (a record field) is the partition of its source.
  static const std::regex partition_re(R"re("partition":"([0-9]+)".*"source":"kafka:logs/([0-9]+)")re");
  std::size_t labelled = 0;
  for (const Member* m : all) {
    const std::string text = read_file(m->output());
    for (auto it = std::sregex_iterator(text.begin(), text.end(), partition_re); it != std::sregex_iterator(); ++it) {
      EXPECT_EQ((*it)[1].str(), (*it)[2].str());
      ++labelled;
    }
  }
  EXPECT_EQ(labelled, static_cast<std::size_t>(produced) + twice);

  // The survivors committed what they alerted when they stopped: a new member reads only
  // what is produced now.
  Member d(dir, "d", broker.bootstraps());
  produce(broker, produced + 1, produced + 10);
  ASSERT_TRUE(wait_until([&] { return d.alerted().size() >= 10; }, 60s)) << d.log();
  std::this_thread::sleep_for(500ms);
  const std::vector<long> by_d = d.alerted();
  EXPECT_EQ(by_d.size(), 10u);
  EXPECT_EQ(std::count_if(by_d.begin(), by_d.end(), [&](long s) { return s <= produced; }), 0)
      << "records read again after the group's graceful stop";
  d.signal(SIGTERM);
  EXPECT_EQ(d.wait_exit(30s), 0) << d.log();
  if (::testing::Test::HasFailure()) {
    std::printf("kept for a look: %s\n", dir.c_str());
  } else {
    std::system(("rm -rf " + dir).c_str());
  }
}

// `send: records`: every record some rule matches (before thresholds) is produced to the
// output's topic, the records grep -E selects with the rules' expressions, keyed by a named
// group, with its source and rules as headers; no alert goes there.
TEST(KafkaGroup, SelectedRecordsGoToATopicKeyedByAGroupWithTheirRules) {
  const std::string dir = temp_dir();
  BrokerProcess broker({"logs:3", "selected:2"});
  std::string records;
  for (int i = 1; i <= 3000; ++i) {
    records += "seq " + std::to_string(i) + " user=u" + std::to_string(i % 17) + " action=" +
               (i % 7 == 0 ? "failed" : i % 2 == 0 ? "login" : "logout");
    if (i % 11 == 0) records += " disk full";
    records += '\n';
  }
  broker.produce("logs", records);
  std::ostringstream config;
  config << "sources:\n"
         << "  - kafka: {brokers: \"" << broker.bootstraps() << "\", topics: logs, group_id: records-test}\n"
         << "rules:\n"
         << "  - name: failed-login\n"
         << "    regex: 'user=(?<user>u[0-9]+) action=failed'\n"
         << "    threshold: {count: 100000, window: 1h}\n"
         << "  - name: disk\n"
         << "    patterns: disk full\n"
         << "outputs:\n"
         << "  - {type: kafka, brokers: \"" << broker.bootstraps()
         << "\", topic: selected, send: records, record_key: \"{{user}}\"}\n"
         << "server: 127.0.0.1:0\n";
  Member m(dir, "records", Member::Config{config.str()});
  const ProcessResult grep = run_process({"/usr/bin/grep", "-E", "user=u[0-9]+ action=failed|disk full"}, records);
  const auto expected = static_cast<std::size_t>(std::count(grep.out.begin(), grep.out.end(), '\n'));
  ASSERT_GT(expected, 500u);
  std::string topic;
  EXPECT_TRUE(wait_until(
      [&] {
        topic = broker.consume("selected", "%k\t%h\t%s\n");
        return static_cast<std::size_t>(std::count(topic.begin(), topic.end(), '\n')) >= expected;
      },
      60s))
      << m.log();
  m.signal(SIGTERM);
  EXPECT_EQ(m.wait_exit(30s), 0) << m.log();

  std::multiset<std::string> got;
  std::istringstream in(topic);
  static const std::regex message_re(
      R"re(([^\t]*)\tgpufilter\.source=kafka:logs/[0-2],gpufilter\.rules=([a-z,-]+)\t(.*))re");
  for (std::string message; std::getline(in, message);) {
    std::smatch part;
    ASSERT_TRUE(std::regex_match(message, part, message_re)) << message;
    const std::string line = part[3].str();
    const bool failed = line.find("action=failed") != std::string::npos;
    const bool disk = line.find("disk full") != std::string::npos;
    EXPECT_EQ(part[2].str(), failed && disk ? "failed-login,disk" : failed ? "failed-login" : "disk") << line;
    EXPECT_EQ(part[1].str(), failed ? line.substr(line.find("user=") + 5, line.find(" action") - line.find("user=") - 5)
                                 : "")
        << line;
    got.insert(line);
  }
  std::multiset<std::string> want;
  std::istringstream lines(grep.out);
  for (std::string line; std::getline(lines, line);) want.insert(line);
  EXPECT_EQ(got, want);
  if (!::testing::Test::HasFailure()) std::system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace gpufilter::test
