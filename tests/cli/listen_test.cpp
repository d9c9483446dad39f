// gpufilter --listen end to end, against the built binary on real loopback sockets: many
// TCP clients with interleaved writes give, per source (-H), exactly what GNU grep -F
// selects from that client's lines; SIGTERM and SIGINT end it with exit status 0 and every
// received line scanned (a connection's unterminated last line included); UDP datagrams
// the kernel dropped are counted in --stats (received + dropped == sent); --json objects
// are checked field by field.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "differential.hpp"
#include "json_records.hpp"
#include "testutil/running_gpufilter.hpp"
#include "testutil/testutil.hpp"

namespace gpufilter::test {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::size_t count_lines(const std::string& s) { return static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n')); }

// -H output split by source: "tcp://127.0.0.1:PORT:line" -> source -> "line\n"...
std::map<std::string, std::string> by_source(const std::string& out) {
  std::map<std::string, std::string> split;
  std::size_t begin = 0;
  while (begin < out.size()) {
    std::size_t end = out.find('\n', begin);
    if (end == std::string::npos) end = out.size();
    const std::string line = out.substr(begin, end - begin);
    // The source ends at the ':' after the port.
    const std::size_t port_colon = line.find(':', line.find("://") + 3);
    const std::size_t colon = port_colon == std::string::npos ? std::string::npos : line.find(':', port_colon + 1);
    if (colon == std::string::npos) {
      split["(no source)"] += line + "\n";
    } else {
      split[line.substr(0, colon)] += line.substr(colon + 1) + "\n";
    }
    begin = end + 1;
  }
  return split;
}

// A log line from a small vocabulary, sometimes with a pattern in it.
std::string random_line(std::mt19937& rng, int client, int seq) {
  static const std::vector<std::string> words = {"GET", "/index", "200", "user=alice", "ERROR",  "disk",
                                                 "full", "WARN", "ok",  "timeout",    "retry", "ERR"};
  std::string line = "c";
  line += std::to_string(client);
  line += " n";
  line += std::to_string(seq);
  const int count = std::uniform_int_distribution<int>(0, 12)(rng);
  for (int i = 0; i < count; ++i) {
    line += ' ';
    line += words[std::uniform_int_distribution<std::size_t>(0, words.size() - 1)(rng)];
  }
  if (rng() % 17 == 0) line += " disk full";
  if (rng() % 23 == 0) line += "\r";
  return line;
}

class Listen : public ::testing::Test {
 protected:
  void SetUp() override { ::signal(SIGPIPE, SIG_IGN); }
};

// Many clients at once, each writing its lines in random pieces (a line may be split
// across writes, pieces of different clients interleave): per source, gpufilter -H prints
// exactly what grep -F prints for that client's lines.
TEST_F(Listen, ManyTcpClientsMatchGrepPerSource) {
  const std::vector<std::string> patterns = {"-e", "ERROR", "-e", "disk full"};
  std::vector<std::string> args = {"--listen", "tcp://127.0.0.1:0", "-H"};
  args.insert(args.end(), patterns.begin(), patterns.end());
  RunningGpufilter gf(args);
  const std::vector<std::string> urls = gf.listening(1);
  ASSERT_EQ(urls.size(), 1u);
  ASSERT_TRUE(urls[0].starts_with("tcp://127.0.0.1:")) << urls[0];

  constexpr int kClients = 24;
  constexpr int kLines = 1500;
  std::vector<std::string> data(kClients);
  std::vector<std::string> names(kClients);
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      std::mt19937 rng(static_cast<unsigned>(c) + 100);
      std::string& d = data[static_cast<std::size_t>(c)];
      for (int i = 0; i < kLines; ++i) d += random_line(rng, c, i) + "\n";
      const int fd = tcp_connect(urls[0]);
      names[static_cast<std::size_t>(c)] = local_name("tcp", fd);
      for (std::size_t pos = 0; pos < d.size();) {
        const std::size_t n = std::min(d.size() - pos, std::uniform_int_distribution<std::size_t>(1, 4000)(rng));
        if (!write_all(fd, std::string_view(d).substr(pos, n))) ADD_FAILURE() << "client " << c << " write failed";
        pos += n;
        if (rng() % 4 == 0) std::this_thread::yield();
      }
      ::close(fd);
    });
  }
  for (std::thread& t : threads) t.join();

  std::map<std::string, std::string> expected;
  std::size_t expected_lines = 0;
  for (int c = 0; c < kClients; ++c) {
    const GrepRun grep = run_grep(patterns, data[static_cast<std::size_t>(c)]);
    ASSERT_EQ(grep.status, 0) << grep.err;
    expected[names[static_cast<std::size_t>(c)]] = grep.out;
    expected_lines += count_lines(grep.out);
  }
  ASSERT_GT(expected_lines, static_cast<std::size_t>(kClients) * 100) << "too few selected lines to tell";
  // SIGTERM stops reading: send it once everything sent has come out.
  EXPECT_TRUE(gf.wait_for([&](const std::string& out, const std::string&) { return count_lines(out) >= expected_lines; },
                          milliseconds(60000)))
      << count_lines(gf.out()) << " of " << expected_lines << " lines";
  gf.signal(SIGTERM);
  const std::optional<int> status = gf.wait_exit(milliseconds(30000));
  ASSERT_TRUE(status.has_value()) << "gpufilter did not exit after SIGTERM";
  EXPECT_EQ(*status, 0) << gf.err();

  const std::map<std::string, std::string> got = by_source(gf.out());
  for (const auto& [name, out] : expected) {
    const auto it = got.find(name);
    const std::string actual = it == got.end() ? std::string() : it->second;
    EXPECT_TRUE(actual == out) << name << ": " << first_difference(out, actual);
  }
  for (const auto& [name, out] : got) {
    EXPECT_TRUE(expected.count(name) == 1) << "output from an unknown source: " << name;
  }
  EXPECT_EQ(gf.err().find("gpufilter: listening on"), 0u) << gf.err();
}

// A signal ends gpufilter with status 0 once every line received is scanned and written,
// the unterminated last line of a connection that is still open included.
TEST_F(Listen, SignalEndsWithEveryLineOutput) {
  for (const int sig : {SIGTERM, SIGINT}) {
    SCOPED_TRACE(sig == SIGTERM ? "SIGTERM" : "SIGINT");
    RunningGpufilter gf({"--listen", "tcp://127.0.0.1:0", "-H", "ERROR"});
    const std::vector<std::string> urls = gf.listening(1);
    ASSERT_EQ(urls.size(), 1u);
    const int fd = tcp_connect(urls[0]);
    const std::string name = local_name("tcp", fd);
    std::string sent;
    std::string expected;
    for (int i = 0; i < 5000; ++i) {
      const std::string line = (i % 10 == 3 ? "ERROR at " : "fine at ") + std::to_string(i);
      sent += line + "\n";
      if (i % 10 == 3) expected += name + ":" + line + "\n";
    }
    ASSERT_TRUE(write_all(fd, sent));
    ASSERT_TRUE(gf.wait_for([&](const std::string& out, const std::string&) { return out.size() >= expected.size(); },
                            milliseconds(30000)))
        << gf.out().size() << " of " << expected.size() << " bytes";
    ASSERT_TRUE(write_all(fd, "ERROR unterminated, the connection still open"));
    expected += name + ":ERROR unterminated, the connection still open\n";
    std::this_thread::sleep_for(milliseconds(300));  // received, not yet a whole line
    gf.signal(sig);
    const std::optional<int> status = gf.wait_exit(milliseconds(30000));
    ::close(fd);
    ASSERT_TRUE(status.has_value()) << "gpufilter did not exit";
    EXPECT_EQ(*status, 0) << gf.err();
    EXPECT_TRUE(gf.out() == expected) << first_difference(expected, gf.out());
  }
}

// Datagrams the kernel dropped before any socket saw them, on every CPU: loopback's
// per-CPU backlog (netdev_max_backlog) overflows when its soft interrupts are deferred
// on a busy machine (/proc/net/softnet_stat's second column). No socket counts those.
std::uint64_t backlog_drops() {
  std::FILE* file = std::fopen("/proc/net/softnet_stat", "r");
  if (file == nullptr) return 0;
  std::uint64_t total = 0;
  unsigned processed = 0, dropped = 0;
  char rest[512];
  while (std::fscanf(file, "%x %x", &processed, &dropped) == 2) {
    total += dropped;
    if (std::fgets(rest, sizeof rest, file) == nullptr) break;
  }
  std::fclose(file);
  return total;
}

// The listener cannot ask UDP senders to wait: with gpufilter stopped (SIGSTOP) while
// 20,000 datagrams arrive, the socket buffer overflows. --stats counts every datagram:
// received + dropped by the kernel == sent (less any the loopback device dropped before
// the socket, counted apart by the kernel), and every received one that found room is
// printed.
TEST_F(Listen, UdpDropsAreCountedInStats) {
  RunningGpufilter gf({"--listen", "udp://127.0.0.1:0", "--stats", "seq="});
  const std::vector<std::string> urls = gf.listening(1);
  ASSERT_EQ(urls.size(), 1u);
  ASSERT_TRUE(urls[0].starts_with("udp://127.0.0.1:")) << urls[0];
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  const sockaddr_in address = loopback(urls[0]);
  int sent = 0;
  auto send = [&](const std::string& datagram) {
    if (::sendto(fd, datagram.data(), datagram.size(), 0, reinterpret_cast<const sockaddr*>(&address),
                 sizeof address) >= 0)
      ++sent;
  };
  const std::uint64_t backlog_before = backlog_drops();
  gf.signal(SIGSTOP);
  constexpr int kBurst = 20000;
  for (int i = 0; i < kBurst; ++i) send("udp seq=" + std::to_string(i) + "\n");
  gf.signal(SIGCONT);
  // A last datagram, sent again until it comes out: the queue has been drained by then
  // (it is itself dropped while the queue is still full).
  for (int tries = 0; tries < 100; ++tries) {
    send("udp seq=last\n");
    if (gf.wait_for([](const std::string& out, const std::string&) { return out.find("seq=last\n") != std::string::npos; },
                    milliseconds(300))) {
      break;
    }
  }
  ASSERT_NE(gf.out().find("seq=last\n"), std::string::npos) << "the final datagram never came out";
  gf.signal(SIGTERM);
  const std::optional<int> status = gf.wait_exit(milliseconds(30000));
  ::close(fd);
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(*status, 0) << gf.err();

  const std::string err = gf.err();
  const std::string mark = "gpufilter-stats: ";
  const std::size_t at = err.find(mark);
  ASSERT_NE(at, std::string::npos) << err;
  const nlohmann::json stats = nlohmann::json::parse(err.substr(at + mark.size(), err.find('\n', at) - at - mark.size()));
  const auto datagrams = stats.at("datagrams").get<std::uint64_t>();
  const auto dropped = stats.at("datagrams_dropped").get<std::uint64_t>();
  const auto dropped_kernel = stats.at("datagrams_dropped_kernel").get<std::uint64_t>();
  const std::uint64_t backlog = backlog_drops() - backlog_before;
  EXPECT_LE(datagrams + dropped_kernel, static_cast<std::uint64_t>(sent))
      << "received " << datagrams << " + dropped by the kernel " << dropped_kernel;
  EXPECT_GE(datagrams + dropped_kernel + backlog, static_cast<std::uint64_t>(sent))
      << "received " << datagrams << " + dropped by the kernel " << dropped_kernel << " + dropped by loopback "
      << backlog;
  EXPECT_GT(dropped_kernel, 0u) << "20,000 datagrams into a stopped process and none dropped?";
  const std::size_t printed = count_lines(gf.out());
  EXPECT_EQ(printed + dropped, datagrams) << "printed " << printed << ", found no room " << dropped;
  EXPECT_EQ(stats.at("connections").get<std::uint64_t>(), 0u);
  EXPECT_EQ(stats.at("connections_refused").get<std::uint64_t>(), 0u);
  EXPECT_EQ(stats.at("connections_lost").get<std::uint64_t>(), 0u);
  EXPECT_EQ(stats.at("lines_too_long").get<std::uint64_t>(), 0u);
  // What arrived came in the order it was sent.
  long last = -1;
  std::size_t begin = 0;
  const std::string out = gf.out();
  while (begin < out.size()) {
    const std::size_t end = out.find('\n', begin);
    const std::string line = out.substr(begin, end - begin);
    begin = end + 1;
    if (line == "udp seq=last") continue;
    ASSERT_TRUE(line.starts_with("udp seq=")) << line;
    const long seq = std::stol(line.substr(8));
    EXPECT_GT(seq, last);
    last = seq;
  }
}

// A URL without a host listens on loopback only: gpufilter says so ("listening on
// tcp://127.0.0.1:PORT"), and lines sent there are read. Every address is an explicit
// choice, said as written (0.0.0.0).
TEST_F(Listen, NoHostListensOnLoopbackOnly) {
  RunningGpufilter gf({"--listen", "tcp://:0", "--listen", "udp://:0", "--listen", "tcp://0.0.0.0:0", "-H", "hello"});
  const std::vector<std::string> urls = gf.listening(3);
  ASSERT_EQ(urls.size(), 3u);
  EXPECT_TRUE(urls[0].starts_with("tcp://127.0.0.1:")) << urls[0];
  EXPECT_TRUE(urls[1].starts_with("udp://127.0.0.1:")) << urls[1];
  EXPECT_TRUE(urls[2].starts_with("tcp://0.0.0.0:")) << urls[2];
  const int fd = tcp_connect(urls[0]);
  const std::string name = local_name("tcp", fd);
  ASSERT_TRUE(write_all(fd, "hello over loopback\n"));
  ::close(fd);
  EXPECT_TRUE(gf.wait_for(
      [&](const std::string& out, const std::string&) { return out.find(name + ":hello over loopback\n") != std::string::npos; },
      milliseconds(10000)))
      << gf.out();
  gf.signal(SIGTERM);
  const std::optional<int> status = gf.wait_exit(milliseconds(30000));
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(*status, 0) << gf.err();
  EXPECT_EQ(gf.out(), name + ":hello over loopback\n");
}

// A stop signal the process was started ignoring stays ignored, as in grep: a
// non-interactive shell starts its background jobs with SIGINT ignored, so that ^C in the
// terminal leaves them running. SIGTERM still stops the run cleanly.
TEST_F(Listen, AStopSignalStartedIgnoredStaysIgnored) {
  RunningGpufilter gf({"--listen", "tcp://127.0.0.1:0", "hello"}, "trap '' INT");
  const std::string url = gf.listening();
  ASSERT_FALSE(url.empty());
  const int fd = tcp_connect(url);
  ASSERT_TRUE(write_all(fd, "hello before\n"));
  ASSERT_TRUE(gf.out_has("hello before\n", milliseconds(10000))) << gf.err();
  gf.signal(SIGINT);
  EXPECT_FALSE(gf.wait_exit(milliseconds(1000)).has_value()) << "SIGINT, started ignored, ended the run";
  ASSERT_TRUE(write_all(fd, "hello after\n"));
  EXPECT_TRUE(gf.out_has("hello after\n", milliseconds(10000))) << gf.err();
  ::close(fd);
  gf.signal(SIGTERM);
  const std::optional<int> status = gf.wait_exit(milliseconds(30000));
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(*status, 0) << gf.err();
}

// --json: rg's match record per selected line, with the connection as its path, its line
// number and byte offset in that connection, the patterns that match, and the line with
// its terminator (its exact bytes in base64 when they are not UTF-8); a stream has no
// begin or end record, and the run ends with rg's summary.
TEST_F(Listen, JsonObjectsFieldByField) {
  RunningGpufilter gf({"--listen", "tcp://127.0.0.1:0", "--json", "-e", "ERROR", "-e", "WARN"});
  const std::vector<std::string> urls = gf.listening(1);
  ASSERT_EQ(urls.size(), 1u);
  const int fd = tcp_connect(urls[0]);
  const std::string name = local_name("tcp", fd);
  const std::vector<std::string> lines = {
      "first ok", "ERROR one", "noise", "WARN and ERROR", "bad \xff\xfe ERROR", "quote \" and \\ WARN", "ERROR last",
  };
  std::string sent;
  std::vector<std::uint64_t> offsets;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    offsets.push_back(sent.size());
    sent += lines[i];
    if (i + 1 < lines.size()) sent += "\n";  // the last line unterminated: the close ends it
  }
  ASSERT_TRUE(write_all(fd, sent));
  ::close(fd);
  ASSERT_TRUE(gf.wait_for([](const std::string& out, const std::string&) { return count_lines(out) >= 5; },
                          milliseconds(30000)))
      << gf.out();
  gf.signal(SIGTERM);
  const std::optional<int> status = gf.wait_exit(milliseconds(30000));
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(*status, 0) << gf.err();

  struct Want {
    std::size_t index;  // into lines
    std::vector<std::pair<int, std::string>> patterns;
  };
  const std::vector<Want> want = {
      {1, {{0, "ERROR"}}}, {3, {{0, "ERROR"}, {1, "WARN"}}}, {4, {{0, "ERROR"}}}, {5, {{1, "WARN"}}}, {6, {{0, "ERROR"}}},
  };
  const std::string out = gf.out();
  const std::vector<nlohmann::json> records = json_records(out);
  ASSERT_EQ(records.size(), want.size() + 1) << out;
  EXPECT_EQ(records.back().at("type"), "summary");
  EXPECT_EQ(records.back().at("data").at("stats").at("matched_lines"), want.size());
  const std::vector<nlohmann::json> objects = records_of(records, "match");
  ASSERT_EQ(objects.size(), want.size()) << out;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const nlohmann::json& o = objects[i].at("data");
    const std::size_t index = want[i].index;
    SCOPED_TRACE("object " + std::to_string(i) + ": " + o.dump());
    EXPECT_EQ(o.at("path").at("text"), name);
    EXPECT_EQ(o.at("line_number").get<std::uint64_t>(), index + 1);
    EXPECT_EQ(o.at("absolute_offset").get<std::uint64_t>(), offsets[index]);
    std::vector<std::pair<int, std::string>> patterns;
    for (const nlohmann::json& p : o.at("patterns")) patterns.emplace_back(p.at("id").get<int>(), p.at("text").get<std::string>());
    std::sort(patterns.begin(), patterns.end());
    EXPECT_EQ(patterns, want[i].patterns);
    // The reader hands on the connection's unterminated last line as a whole record, with
    // the '\n' every record has.
    EXPECT_EQ(o.at("lines").contains("bytes"), index == 4);  // the one that is not UTF-8
    EXPECT_EQ(data_bytes(o.at("lines")), lines[index] + "\n");
  }
}


// Backpressure end to end: nobody reads gpufilter's standard output, so its writes
// block, its batches stay taken, and it stops reading the connection; the kernel buffers
// fill and the sender's window closes (send() says EAGAIN for good) long before the input
// is all sent, while gpufilter's memory stays small. Once the output is read, every line
// arrives exactly once.
TEST_F(Listen, SlowOutputClosesTheSendersWindow) {
  const SpawnedProcess child = spawn_process({gpufilter_binary(), "--listen", "tcp://127.0.0.1:0", "--engine=cpu",
                                              "--chunk-size=256K", "--max-line-bytes=64K", "--slots=2", "seq"});
  ::close(child.in);
  // Where it listens: read stderr until the line is there (stdout stays unread).
  std::string err;
  std::string url;
  const auto deadline = Clock::now() + milliseconds(60000);
  while (url.empty() && Clock::now() < deadline) {
    pollfd p{child.err, POLLIN, 0};
    if (::poll(&p, 1, 1000) <= 0) continue;
    char buffer[4096];
    const ssize_t n = ::read(child.err, buffer, sizeof buffer);
    if (n <= 0) break;
    err.append(buffer, static_cast<std::size_t>(n));
    const std::size_t at = err.find("listening on ");
    if (at != std::string::npos && err.find('\n', at) != std::string::npos)
      url = err.substr(at + 13, err.find('\n', at) - at - 13);
  }
  ASSERT_FALSE(url.empty()) << err;
  const int fd = tcp_connect(url);
  ASSERT_EQ(::fcntl(fd, F_SETFL, O_NONBLOCK), 0);
  // 200 MB of lines, far more than every buffer on the way could hold.
  const std::uint64_t total_lines = 2'000'000;
  std::uint64_t next = 0;
  std::string pending;
  std::uint64_t sent_bytes = 0;
  auto refill = [&] {
    while (pending.size() < (1u << 20) && next < total_lines) {
      pending += "seq=" + std::to_string(next++) + " ";
      pending.append(80, 'x');
      pending += '\n';
    }
  };
  auto last_progress = Clock::now();
  while (Clock::now() - last_progress < milliseconds(1500)) {
    refill();
    const ssize_t n = ::send(fd, pending.data(), pending.size(), MSG_NOSIGNAL);
    if (n > 0) {
      pending.erase(0, static_cast<std::size_t>(n));
      sent_bytes += static_cast<std::uint64_t>(n);
      last_progress = Clock::now();
    } else {
      ASSERT_TRUE(errno == EAGAIN || errno == EWOULDBLOCK) << std::strerror(errno);
      std::this_thread::sleep_for(milliseconds(10));
    }
  }
  // The window closed: well short of the 200 MB.
  EXPECT_LT(sent_bytes, std::uint64_t{64} << 20) << "sent " << sent_bytes << " bytes without a closed window";
  // gpufilter holds no more than its batches, slots, framer and output buffers.
  long rss_kb = 0;
  {
    const std::string status = read_file("/proc/" + std::to_string(child.pid) + "/status");
    const std::size_t at = status.find("VmRSS:");
    ASSERT_NE(at, std::string::npos);
    rss_kb = std::stol(status.substr(at + 6));
  }
  EXPECT_LT(rss_kb, 100 * 1024) << "resident " << rss_kb << " KiB while blocked";
  std::printf("window closed after %llu bytes sent; gpufilter resident %ld KiB\n",
              static_cast<unsigned long long>(sent_bytes), rss_kb);

  // Now read the output while sending the rest; then end and count.
  std::atomic<bool> reading{true};
  std::atomic<std::uint64_t> lines_read{0};
  std::string out;
  std::thread reader([&] {
    char buffer[1 << 16];
    for (;;) {
      const ssize_t n = ::read(child.out, buffer, sizeof buffer);
      if (n <= 0) break;
      out.append(buffer, static_cast<std::size_t>(n));
      lines_read += static_cast<std::uint64_t>(std::count(buffer, buffer + n, '\n'));
    }
    reading = false;
  });
  ASSERT_EQ(::fcntl(fd, F_SETFL, 0), 0);
  for (;;) {
    refill();
    if (pending.empty()) break;
    ASSERT_TRUE(write_all(fd, pending));
    pending.clear();
  }
  ::close(fd);
  // What was sent but is still in the socket's buffer is not yet read, and a stop ends
  // with what was read: wait for the lines (a sanitizer build on a busy machine is slow).
  const auto read_by = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (lines_read < total_lines && std::chrono::steady_clock::now() < read_by)
    std::this_thread::sleep_for(milliseconds(20));
  std::this_thread::sleep_for(milliseconds(200));
  ::kill(child.pid, SIGTERM);
  int status = 0;
  ::waitpid(child.pid, &status, 0);
  reader.join();
  ::close(child.out);
  ::close(child.err);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // Every line once, in order.
  std::uint64_t expect = 0;
  bool in_order = true;
  for (std::size_t at = 0; at < out.size();) {
    const std::size_t nl = out.find('\n', at);
    if (nl == std::string::npos) break;
    if (out.compare(at, 4, "seq=") != 0 || std::stoull(out.substr(at + 4, 12)) != expect) {
      in_order = false;
      break;
    }
    ++expect;
    at = nl + 1;
  }
  EXPECT_TRUE(in_order) << "line " << expect << " missing or out of order";
  EXPECT_EQ(expect, total_lines);
}

}  // namespace
}  // namespace gpufilter::test
