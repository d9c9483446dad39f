// gpufilter-test-kafka-broker: librdkafka's protocol-level mock cluster (rdkafka_mock.h)
// in a process of its own, so that real clients in other processes (gpufilterd, kcat,
// python3-confluent-kafka) reach it on loopback. Debian ships no Kafka broker; this is
// only for tests, and nothing in gpufilter knows it is a mock.
//
//   gpufilter-test-kafka-broker [--brokers N] TOPIC:PARTITIONS ...
//
// Prints the bootstrap servers ("127.0.0.1:PORT,...") on one line, then serves until its
// standard input ends or it gets SIGTERM/SIGINT.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

int main(int argc, char** argv) {
  int brokers = 1;
  int first = 1;
  if (argc > 2 && std::strcmp(argv[1], "--brokers") == 0) {
    brokers = std::atoi(argv[2]);
    first = 3;
  }
  char why[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  if (rd_kafka_conf_set(conf, "test.mock.num.brokers", std::to_string(brokers).c_str(), why, sizeof why) !=
      RD_KAFKA_CONF_OK) {
    std::fprintf(stderr, "kafka-broker: %s\n", why);
    return 2;
  }
  rd_kafka_conf_set(conf, "log_level", "0", why, sizeof why);
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, why, sizeof why);
  if (rk == nullptr) {
    std::fprintf(stderr, "kafka-broker: %s\n", why);
    return 2;
  }
  rd_kafka_mock_cluster_t* cluster = rd_kafka_handle_mock_cluster(rk);
  for (int i = first; i < argc; ++i) {
    std::string spec = argv[i];
    const std::size_t colon = spec.rfind(':');
    const int partitions = colon == std::string::npos ? 1 : std::atoi(spec.c_str() + colon + 1);
    const std::string topic = spec.substr(0, colon);
    if (rd_kafka_mock_topic_create(cluster, topic.c_str(), partitions, 1) != RD_KAFKA_RESP_ERR_NO_ERROR) {
      std::fprintf(stderr, "kafka-broker: cannot create %s\n", spec.c_str());
      return 2;
    }
  }
  std::printf("%s\n", rd_kafka_mock_cluster_bootstraps(cluster));
  std::fflush(stdout);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  // Standard input's end (the test went away) or a signal ends it.
  std::thread([] {
    char b;
    while (::read(STDIN_FILENO, &b, 1) > 0) {
    }
    ::kill(::getpid(), SIGTERM);
  }).detach();
  int sig = 0;
  sigwait(&set, &sig);
  rd_kafka_destroy(rk);
  return 0;
}
