// The Kafka-protocol broker of the tests (kafka_broker.cpp) as a child process: its
// bootstrap servers from its first line; it ends when its standard input closes (the
// destructor, or this process's end). produce() goes through Debian's kcat, a real client.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "testutil/testutil.hpp"

namespace gpufilter::test {

class BrokerProcess {
 public:
  // `topics`: "NAME:PARTITIONS" each.
  explicit BrokerProcess(const std::vector<std::string>& topics) {
    std::vector<std::string> argv{kafka_broker_binary()};
    argv.insert(argv.end(), topics.begin(), topics.end());
    child_ = spawn_process(argv);
    char c = 0;
    while (::read(child_.out, &c, 1) == 1 && c != '\n') bootstraps_ += c;
  }
  ~BrokerProcess() {
    ::close(child_.in);
    ::kill(child_.pid, SIGTERM);
    int status = 0;
    ::waitpid(child_.pid, &status, 0);
    ::close(child_.out);
    ::close(child_.err);
  }
  BrokerProcess(const BrokerProcess&) = delete;
  BrokerProcess& operator=(const BrokerProcess&) = delete;

  const std::string& bootstraps() const { return bootstraps_; }
  // One record per line of `records`.
  void produce(const std::string& topic, const std::string& records) const {
    const ProcessResult r = run_process({"/usr/bin/kcat", "-P", "-b", bootstraps_, "-t", topic}, records);
    ASSERT_EQ(r.status, 0) << r.err;
  }
  // Every record of `topic` now, through kcat with `format` (kcat -f).
  std::string consume(const std::string& topic, const std::string& format = "%s\n") const {
    const ProcessResult r =
        run_process({"/usr/bin/kcat", "-C", "-b", bootstraps_, "-t", topic, "-e", "-q", "-f", format});
    EXPECT_EQ(r.status, 0) << r.err;
    return r.out;
  }

 private:
  SpawnedProcess child_{};
  std::string bootstraps_;
};

}  // namespace gpufilter::test
