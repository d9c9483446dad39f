// gpufilter --kafka against a Kafka-protocol broker process (kafka_broker.cpp), records
// produced by Debian's kcat: the lines grep would select, from every partition; with
// ?group= the offsets are committed once the lines are written, so a second run reads
// only what is new; and URL mistakes are exit status 2 with the URL named.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "broker_process.hpp"
#include "testutil/running_gpufilter.hpp"
#include "testutil/testutil.hpp"

namespace gpufilter::test {
namespace {

using namespace std::chrono_literals;

std::vector<std::string> sorted_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::sort(lines.begin(), lines.end());
  return lines;
}

std::string numbered(int first, int last) {
  std::string s;
  for (int i = first; i <= last; ++i) s += "request " + std::to_string(i) + (i % 7 == 0 ? " ERROR\n" : " ok\n");
  return s;
}

// Runs gpufilter ARGS until it has printed `lines` lines, then SIGTERM: its output.
std::string run_until(const std::vector<std::string>& args, std::size_t lines) {
  RunningGpufilter g(args);
  EXPECT_TRUE(g.wait_for([&](const std::string& out, const std::string&) {
    return static_cast<std::size_t>(std::count(out.begin(), out.end(), '\n')) >= lines;
  }, 60s)) << g.err();
  std::this_thread::sleep_for(300ms);  // nothing more comes
  g.signal(SIGTERM);
  EXPECT_EQ(g.wait_exit(30s), 0) << g.err();
  return g.out();
}

TEST(KafkaCli, SelectsWhatGrepSelectsFromEveryPartitionAndResumesInItsGroup) {
  BrokerProcess broker({"logs:3"});
  broker.produce("logs", numbered(1, 700));
  const ProcessResult grep = run_process({grep_binary(), "ERROR"}, numbered(1, 700));
  const std::string url = "kafka://" + broker.bootstraps() + "/logs";
  EXPECT_EQ(sorted_lines(run_until({"-h", "-F", "ERROR", "--kafka", url}, 100)), sorted_lines(grep.out));
  // In a group: a second run reads only what was produced after the first one stopped.
  EXPECT_EQ(sorted_lines(run_until({"-h", "ERROR", "--kafka", url + "?group=cli&session.timeout.ms=6000"}, 100)),
            sorted_lines(grep.out));
  broker.produce("logs", numbered(701, 714));
  EXPECT_EQ(sorted_lines(run_until({"-h", "ERROR", "--kafka", url + "?group=cli"}, 2)),
            (std::vector<std::string>{"request 707 ERROR", "request 714 ERROR"}));
}

TEST(KafkaCli, UrlMistakesAreExitStatusTwoNamingTheUrl) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"kafka://127.0.0.1:9", "expected kafka://HOST:PORT/TOPIC"},
      {"http://127.0.0.1:9/logs", "expected kafka://HOST:PORT/TOPIC"},
      {"kafka://127.0.0.1:9/logs,", "names an empty topic"},
      {"kafka://127.0.0.1:9/logs?sasl.password=hunter2", "secrets do not belong on a command line"},
      {"kafka://127.0.0.1:9/logs?fetch.wait.max.ms=soon", "fetch.wait.max.ms"},
      {"kafka://127.0.0.1:9/logs?novalue", "expected KEY=VALUE"},
  };
  for (const auto& [url, why] : bad) {
    const ProcessResult r = run_process({gpufilter_binary(), "x", "--kafka", url});
    EXPECT_EQ(r.status, 2) << url;
    EXPECT_NE(r.err.find(why), std::string::npos) << url << ": " << r.err;
    EXPECT_EQ(r.err.find("hunter2"), std::string::npos) << r.err;
  }
  const ProcessResult r = run_process({gpufilter_binary(), "x", "--kafka", "kafka://127.0.0.1:9/logs", "file.log"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("FILE operands with --kafka are followed"), std::string::npos) << r.err;
}

// librdkafka (and the TLS and SASL libraries it brings) is loaded only for --kafka, from
// the module beside the executable: a search without --kafka does not load it (nor
// libpcap), and an executable without the module says so for --kafka, exit status 2.
TEST(KafkaCli, KafkaSupportIsLoadedOnlyForKafka) {
  const ProcessResult plain = run_process({gpufilter_binary(), "--engine=host", "foo"}, "foo\n", {"LD_DEBUG=files"});
  EXPECT_EQ(plain.status, 0) << plain.err;
  EXPECT_NE(plain.err.find("libpcre2"), std::string::npos) << "LD_DEBUG=files said nothing:\n" << plain.err;
  EXPECT_EQ(plain.err.find("librdkafka"), std::string::npos) << plain.err;
  EXPECT_EQ(plain.err.find("libssl"), std::string::npos) << plain.err;
  // Nor libpcap (and its D-Bus and systemd libraries), loaded when a capture needs it.
  EXPECT_EQ(plain.err.find("libpcap"), std::string::npos) << plain.err;
  EXPECT_EQ(plain.err.find("libdbus"), std::string::npos) << plain.err;

  const ProcessResult kafka = run_process({gpufilter_binary(), "x", "--kafka", "kafka://127.0.0.1:9/logs?no.such.property=1"},
                                          "", {"LD_DEBUG=files"});
  EXPECT_EQ(kafka.status, 2);
  EXPECT_NE(kafka.err.find("gpufilter-kafka.so"), std::string::npos) << kafka.err;
  EXPECT_NE(kafka.err.find("librdkafka"), std::string::npos) << kafka.err;

  const TempDir dir;
  const std::string alone = dir.path() + "/gpufilter";
  std::filesystem::copy_file(gpufilter_binary(), alone);
  std::filesystem::permissions(alone, std::filesystem::perms::owner_exec, std::filesystem::perm_options::add);
  const ProcessResult missing = run_process({alone, "x", "--kafka", "kafka://127.0.0.1:9/logs"});
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.err.find("--kafka: Kafka support is missing"), std::string::npos) << missing.err;
  EXPECT_NE(missing.err.find("gpufilter-kafka.so"), std::string::npos) << missing.err;
  EXPECT_EQ(run_process({alone, "--engine=host", "foo"}, "foo\n").status, 0);
}

}  // namespace
}  // namespace gpufilter::test
