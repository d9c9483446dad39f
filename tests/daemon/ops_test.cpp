// gpufilterd's operations side: Metrics (the exact Prometheus text, escaping, numbers,
// threads), Log (logfmt and JSON lines read back from a pipe) and OpsServer over real
// HTTP on loopback, with a small Beast client defined here whose every operation has a
// deadline, so that a server that hangs fails the test instead of hanging it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "gpufilter/daemon/log.hpp"
#include "gpufilter/daemon/metrics.hpp"
#include "gpufilter/daemon/ops_server.hpp"
#include "gpufilter/core/errors.hpp"

namespace gpufilter::daemon {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using boost::system::error_code;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using Type = Metrics::Type;

constexpr auto kPatience = 5s;  // the longest any one client operation may take

// ---------------------------------------------------------------------------------------
// A synchronous HTTP client: each call runs its own io_context until the operation ends
// or the deadline (beast::tcp_stream's timeout) cuts it off.

struct Reply {
  unsigned status = 0;
  std::string body;
  std::string content_type;
  std::string allow;
  std::string content_length;
  bool keep_alive = false;
};

class Client {
 public:
  explicit Client(const std::string& address) : stream_(io_) {
    const std::size_t colon = address.rfind(':');
    std::string host = address.substr(0, colon);
    if (host.starts_with("[")) host = host.substr(1, host.size() - 2);
    const tcp::endpoint endpoint(asio::ip::make_address(host), static_cast<unsigned short>(std::stoi(address.substr(colon + 1))));
    error_code ec;
    stream_.expires_after(kPatience);
    stream_.async_connect(endpoint, [&](error_code e) { ec = e; });
    run();
    if (ec) throw std::runtime_error("connect " + address + ": " + ec.message());
  }

  Reply request(http::verb method, const std::string& target, unsigned version = 11, bool keep_alive = true,
                const std::string& body = {}) {
    http::request<http::string_body> request{method, target, version};
    request.set(http::field::host, "test");
    request.keep_alive(keep_alive);
    if (!body.empty() || method == http::verb::post) {
      request.body() = body;
      request.prepare_payload();
    }
    error_code ec;
    stream_.expires_after(kPatience);
    http::async_write(stream_, request, [&](error_code e, std::size_t) { ec = e; });
    run();
    if (ec) throw std::runtime_error("write " + target + ": " + ec.message());
    return read_reply(method == http::verb::head);
  }

  void send_raw(const std::string& bytes) {
    error_code ec;
    stream_.expires_after(kPatience);
    asio::async_write(stream_, asio::buffer(bytes), [&](error_code e, std::size_t) { ec = e; });
    run();
    if (ec) throw std::runtime_error("write: " + ec.message());
  }

  Reply read_reply(bool head = false) {
    http::response_parser<http::string_body> parser;
    parser.skip(head);  // a HEAD answer has Content-Length but no body
    error_code ec;
    stream_.expires_after(kPatience);
    http::async_read(stream_, buffer_, parser, [&](error_code e, std::size_t) { ec = e; });
    run();
    if (ec) throw std::runtime_error("read: " + ec.message());
    const auto& response = parser.get();
    Reply reply;
    reply.status = response.result_int();
    reply.body = response.body();
    reply.content_type = std::string(response[http::field::content_type]);
    reply.allow = std::string(response[http::field::allow]);
    reply.content_length = std::string(response[http::field::content_length]);
    reply.keep_alive = response.keep_alive();
    return reply;
  }

  // Whether the server closes the connection within `patience`, sending nothing more.
  bool closed_by_server(std::chrono::milliseconds patience) {
    char byte = 0;
    error_code ec;
    stream_.expires_after(patience);
    stream_.async_read_some(asio::buffer(&byte, 1), [&](error_code e, std::size_t) { ec = e; });
    run();
    return ec == asio::error::eof || ec == asio::error::connection_reset;
  }

 private:
  void run() {
    io_.restart();
    io_.run();
  }

  asio::io_context io_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
};

Reply fetch(const std::string& address, http::verb method, const std::string& target) {
  Client client(address);
  return client.request(method, target);
}

// ---------------------------------------------------------------------------------------
// The exposition text, read back the way a scraper would

struct Exposition {
  std::map<std::string, std::string> help;  // family -> text
  std::map<std::string, std::string> type;  // family -> counter|gauge|histogram
  std::vector<std::string> family_order;    // as HELP lines appear
  std::map<std::string, double> samples;    // `name{labels}` as written -> value
  std::vector<std::string> sample_order;
};

double parse_value(const std::string& text) {
  if (text == "+Inf") return std::numeric_limits<double>::infinity();
  if (text == "-Inf") return -std::numeric_limits<double>::infinity();
  if (text == "NaN") return std::numeric_limits<double>::quiet_NaN();
  std::size_t used = 0;
  const double value = std::stod(text, &used);
  if (used != text.size()) throw std::runtime_error("not a number: " + text);
  return value;
}

Exposition parse_exposition(const std::string& body) {
  Exposition out;
  std::istringstream in(body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) throw std::runtime_error("an empty line in the exposition");
    if (line.starts_with("# HELP ")) {
      const std::string rest = line.substr(7);
      const std::size_t space = rest.find(' ');
      const std::string name = rest.substr(0, space);
      out.help[name] = space == std::string::npos ? "" : rest.substr(space + 1);
      out.family_order.push_back(name);
    } else if (line.starts_with("# TYPE ")) {
      const std::string rest = line.substr(7);
      const std::size_t space = rest.find(' ');
      out.type[rest.substr(0, space)] = rest.substr(space + 1);
    } else {
      // The value follows the last space; label values may hold spaces, never a raw newline.
      const std::size_t space = line.rfind(' ');
      if (space == std::string::npos) throw std::runtime_error("no value: " + line);
      const std::string series = line.substr(0, space);
      out.samples[series] = parse_value(line.substr(space + 1));
      out.sample_order.push_back(series);
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Metrics

TEST(MetricsTest, RendersTheExpositionFormatExactly) {
  Metrics metrics;
  metrics.describe("b_requests_total", Type::kCounter, "Requests served.");
  metrics.describe("a_latency_seconds", Type::kHistogram, "Scan latency.", {1, 0.1, 0.5});  // sorted on describe
  metrics.describe("c_up", Type::kGauge, "Whether \\ it runs\nsecond line.");
  metrics.add("b_requests_total", {{"path", "/x"}, {"code", "200"}}, 2);
  metrics.add("b_requests_total", {{"code", "200"}, {"path", "/x"}}, 1);  // the same series
  metrics.add("b_requests_total", {{"code", "500"}, {"path", "/y"}}, 1);
  metrics.set("c_up", {}, 1);
  for (const double v : {0.05, 0.5, 0.7, 3.0}) metrics.observe("a_latency_seconds", {}, v);  // 0.5: le is inclusive

  EXPECT_EQ(metrics.render(),
            "# HELP a_latency_seconds Scan latency.\n"
            "# TYPE a_latency_seconds histogram\n"
            "a_latency_seconds_bucket{le=\"0.1\"} 1\n"
            "a_latency_seconds_bucket{le=\"0.5\"} 2\n"
            "a_latency_seconds_bucket{le=\"1\"} 3\n"
            "a_latency_seconds_bucket{le=\"+Inf\"} 4\n"
            "a_latency_seconds_sum 4.25\n"
            "a_latency_seconds_count 4\n"
            "# HELP b_requests_total Requests served.\n"
            "# TYPE b_requests_total counter\n"
            "b_requests_total{code=\"200\",path=\"/x\"} 3\n"
            "b_requests_total{code=\"500\",path=\"/y\"} 1\n"
            "# HELP c_up Whether \\\\ it runs\\nsecond line.\n"
            "# TYPE c_up gauge\n"
            "c_up 1\n");
  EXPECT_EQ(metrics.value("b_requests_total", {{"path", "/x"}, {"code", "200"}}), 3);
  EXPECT_EQ(metrics.value("a_latency_seconds", {}), 4);  // a histogram answers with its count
  EXPECT_EQ(metrics.value("b_requests_total", {{"code", "404"}}), 0);
  EXPECT_EQ(metrics.value("nothing", {}), 0);
}

TEST(MetricsTest, EscapesLabelValuesAndPutsLeLastInLabelledHistograms) {
  Metrics metrics;
  metrics.describe("g", Type::kGauge, "g");
  metrics.set("g", {{"v", "a\\b\"c\nd"}}, 0.5);
  metrics.describe("h", Type::kHistogram, "h", {2});
  metrics.observe("h", {{"source", "app \"x\""}}, 1);
  EXPECT_EQ(metrics.render(),
            "# HELP g g\n# TYPE g gauge\n"
            "g{v=\"a\\\\b\\\"c\\nd\"} 0.5\n"
            "# HELP h h\n# TYPE h histogram\n"
            "h_bucket{source=\"app \\\"x\\\"\",le=\"2\"} 1\n"
            "h_bucket{source=\"app \\\"x\\\"\",le=\"+Inf\"} 1\n"
            "h_sum{source=\"app \\\"x\\\"\"} 1\n"
            "h_count{source=\"app \\\"x\\\"\"} 1\n");
}

TEST(MetricsTest, PrintsIntegersPlainlyAndOtherNumbersShortest) {
  Metrics metrics;
  metrics.describe("n", Type::kGauge, "numbers");
  const std::vector<std::pair<double, std::string>> cases = {
      {42, "42"},
      {-3, "-3"},
      {0, "0"},
      {1.5, "1.5"},
      {0.1, "0.1"},
      {1.0 / 3, "0.3333333333333333"},
      {9007199254740991.0, "9007199254740991"},
      {1e20, "1e+20"},
      {std::numeric_limits<double>::infinity(), "+Inf"},
      {-std::numeric_limits<double>::infinity(), "-Inf"},
      {std::numeric_limits<double>::quiet_NaN(), "NaN"},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) metrics.set("n", {{"i", std::to_string(100 + i)}}, cases[i].first);
  const std::string text = metrics.render();
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const std::string expected = "n{i=\"" + std::to_string(100 + i) + "\"} " + cases[i].second + "\n";
    EXPECT_NE(text.find(expected), std::string::npos) << expected << "in\n" << text;
  }
}

TEST(MetricsTest, AnUndescribedNameBecomesAGaugeAndADescribedOneKeepsItsSeries) {
  Metrics metrics;
  metrics.add("early_total", {}, 5);
  metrics.add("early_total", {}, -2);  // a gauge may go down
  EXPECT_EQ(metrics.render(), "# HELP early_total early_total\n# TYPE early_total gauge\nearly_total 3\n");
  metrics.describe("early_total", Type::kCounter, "Described late.");
  EXPECT_EQ(metrics.value("early_total", {}), 3);
  metrics.add("early_total", {}, -1);  // a counter may not: ignored
  EXPECT_EQ(metrics.value("early_total", {}), 3);
  metrics.observe("early_total", {}, 1);  // the wrong kind: ignored
  EXPECT_EQ(metrics.render(), "# HELP early_total Described late.\n# TYPE early_total counter\nearly_total 3\n");

  metrics.observe("undescribed_seconds", {}, 0.2);  // a histogram with the default buckets
  const Exposition e = parse_exposition(metrics.render());
  EXPECT_EQ(e.type.at("undescribed_seconds"), "histogram");
  EXPECT_EQ(e.samples.at("undescribed_seconds_bucket{le=\"0.1\"}"), 0);
  EXPECT_EQ(e.samples.at("undescribed_seconds_bucket{le=\"0.25\"}"), 1);
  EXPECT_EQ(e.samples.at("undescribed_seconds_bucket{le=\"+Inf\"}"), 1);
}

TEST(MetricsTest, ManyThreadsUpdatingWhileRenderingLoseNothing) {
  Metrics metrics;
  metrics.describe("lines_total", Type::kCounter, "Lines.");
  metrics.describe("batch_seconds", Type::kHistogram, "Batches.", {0.5, 1.5});
  constexpr int kThreads = 8;
  constexpr int kIterations = 20000;
  std::atomic<bool> done{false};
  std::thread renderer([&] {
    while (!done.load()) {
      const Exposition e = parse_exposition(metrics.render());
      // Every snapshot is consistent: the +Inf bucket is the count.
      if (e.samples.contains("batch_seconds_count")) {
        ASSERT_EQ(e.samples.at("batch_seconds_bucket{le=\"+Inf\"}"), e.samples.at("batch_seconds_count"));
      }
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&metrics, t] {
      for (int i = 0; i < kIterations; ++i) {
        metrics.add("lines_total", {{"source", std::to_string(i % 4)}}, 1);
        metrics.observe("batch_seconds", {}, (i + t) % 2);
        metrics.set("threads", {{"t", std::to_string(t)}}, i);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  done = true;
  renderer.join();
  double total = 0;
  for (int s = 0; s < 4; ++s) total += metrics.value("lines_total", {{"source", std::to_string(s)}});
  EXPECT_EQ(total, double(kThreads) * kIterations);
  EXPECT_EQ(metrics.value("batch_seconds", {}), double(kThreads) * kIterations);
  const Exposition e = parse_exposition(metrics.render());
  EXPECT_EQ(e.samples.at("batch_seconds_bucket{le=\"0.5\"}"), double(kThreads) * kIterations / 2);
  EXPECT_EQ(e.samples.at("batch_seconds_sum"), double(kThreads) * kIterations / 2);
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(metrics.value("threads", {{"t", std::to_string(t)}}), kIterations - 1);
}

// ---------------------------------------------------------------------------------------
// Log

class Pipe {
 public:
  Pipe() {
    if (::pipe2(fds_, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  }
  ~Pipe() {
    ::close(fds_[0]);
    if (fds_[1] >= 0) ::close(fds_[1]);
  }
  int read_end() const { return fds_[0]; }
  int write_end() const { return fds_[1]; }
  void close_write_end() {
    ::close(fds_[1]);
    fds_[1] = -1;
  }
  // One line without its newline; throws when none comes within kPatience.
  std::string read_line() {
    for (;;) {
      const std::size_t newline = pending_.find('\n');
      if (newline != std::string::npos) {
        std::string line = pending_.substr(0, newline);
        pending_.erase(0, newline + 1);
        return line;
      }
      pollfd p{fds_[0], POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(std::chrono::milliseconds(kPatience).count())) != 1) {
        throw std::runtime_error("no line from the log");
      }
      char buffer[4096];
      const ssize_t n = ::read(fds_[0], buffer, sizeof buffer);
      if (n <= 0) throw std::runtime_error("the log pipe ended");
      pending_.append(buffer, static_cast<std::size_t>(n));
    }
  }

 private:
  int fds_[2] = {-1, -1};
  std::string pending_;
};

const std::regex kTimestamp(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)");

TEST(LogTest, LogfmtQuotesAndEscapesWhatWouldBreakTheLine) {
  Pipe pipe;
  Log log(pipe.write_end());
  log.info("config loaded", {{"rules", "12"},
                             {"path", "/var/log/a b.log"},
                             {"quote", "say \"hi\""},
                             {"empty", ""},
                             {"eq", "a=b"},
                             {"nl", "one\ntwo"},
                             {"bs", "C:\\x"},
                             {"ctl", std::string("a\x01") + "b\tc"},
                             {"bad key=", "v"},
                             {"utf8", "caf\xc3\xa9"}});
  const std::string line = pipe.read_line();
  std::smatch match;
  ASSERT_TRUE(std::regex_search(line, match, std::regex("^time=(\\S+) "))) << line;
  EXPECT_TRUE(std::regex_match(match[1].str(), kTimestamp)) << line;
  EXPECT_EQ(line.substr(match[0].length()),
            "level=info msg=\"config loaded\" rules=12 path=\"/var/log/a b.log\" quote=\"say \\\"hi\\\"\" empty=\"\" "
            "eq=\"a=b\" nl=\"one\\ntwo\" bs=\"C:\\\\x\" ctl=\"a\\u0001b\\tc\" bad_key_=v utf8=caf\xc3\xa9");

  log.warn("started");
  const std::string second = pipe.read_line();
  EXPECT_TRUE(second.ends_with(" level=warn msg=started")) << second;
}

TEST(LogTest, JsonLinesParseWithEveryFieldAString) {
  Pipe pipe;
  Log log(pipe.write_end(), Log::Format::kJson);
  log.error("send failed: \"alertmanager\"\n", {{"rules", "12"},
                                                {"path", "C:\\logs\\a b"},
                                                {"ctl", std::string("x\x01\x1f") + "y"},
                                                {"utf8", "caf\xc3\xa9 \xe2\x82\xac"},
                                                {"broken", "a\xff\xc3(b"}});
  const std::string line = pipe.read_line();
  const nlohmann::json j = nlohmann::json::parse(line);
  ASSERT_TRUE(j.is_object());
  EXPECT_TRUE(std::regex_match(j.at("time").get<std::string>(), kTimestamp)) << line;
  EXPECT_EQ(j.at("level"), "error");
  EXPECT_EQ(j.at("msg"), "send failed: \"alertmanager\"\n");
  EXPECT_EQ(j.at("rules"), "12");
  EXPECT_EQ(j.at("path"), "C:\\logs\\a b");
  EXPECT_EQ(j.at("ctl"), std::string("x\x01\x1f") + "y");
  EXPECT_EQ(j.at("utf8"), "caf\xc3\xa9 \xe2\x82\xac");
  EXPECT_EQ(j.at("broken"), "a\xef\xbf\xbd\xef\xbf\xbd(b");  // invalid bytes become U+FFFD
  EXPECT_EQ(j.size(), 8u);
  // The keys come in the order written: time, level, msg first.
  EXPECT_TRUE(line.starts_with("{\"time\":\"")) << line;
  EXPECT_NE(line.find("\",\"level\":\"error\",\"msg\":"), std::string::npos) << line;

  log.set_format(Log::Format::kLogfmt);
  log.info("back to logfmt");
  EXPECT_TRUE(pipe.read_line().starts_with("time="));
}

TEST(LogTest, LinesFromManyThreadsNeverInterleave) {
  Pipe pipe;
  Log log(pipe.write_end(), Log::Format::kJson);
  constexpr int kThreads = 6;
  constexpr int kLines = 500;
  const std::string padding(300, 'p');  // long lines make a torn write likelier to show
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kLines; ++i) log.info("tick", {{"t", std::to_string(t)}, {"i", std::to_string(i)}, {"pad", padding}});
    });
  }
  std::map<std::string, int> next;  // per thread: lines arrive in each thread's order
  for (int n = 0; n < kThreads * kLines; ++n) {
    const nlohmann::json j = nlohmann::json::parse(pipe.read_line());
    const std::string t = j.at("t");
    ASSERT_EQ(j.at("i"), std::to_string(next[t]++));
    ASSERT_EQ(j.at("pad"), padding);
  }
  for (auto& thread : threads) thread.join();
}

// ---------------------------------------------------------------------------------------
// OpsServer

class OpsServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    metrics.describe("gpufilterd_lines_total", Type::kCounter, "Lines scanned.");
    metrics.describe("gpufilterd_rules", Type::kGauge, "Rules loaded.");
    metrics.describe("gpufilterd_scan_seconds", Type::kHistogram, "Scan time per batch.", {0.001, 0.01, 0.1});
    metrics.add("gpufilterd_lines_total", {{"source", "app.log"}}, 42);
    metrics.add("gpufilterd_lines_total", {{"source", "odd \"name\"\\\n"}}, 7);
    metrics.set("gpufilterd_rules", {}, 12);
    for (const double v : {0.0005, 0.002, 0.003, 0.05, 0.5}) metrics.observe("gpufilterd_scan_seconds", {}, v);
    server = std::make_unique<OpsServer>("127.0.0.1:0", metrics, handlers());
    server->start();
  }

  OpsHandlers handlers() {
    return OpsHandlers{[this] { return ready.load(); },
                       [this] {
                         reloads.fetch_add(1);
                         std::this_thread::sleep_for(reload_delay.load());
                         std::lock_guard lock(mutex);
                         if (reload_throws) throw std::runtime_error("rules.yaml vanished");
                         return reload_answer;
                       }};
  }

  void set_reload(bool ok, std::string message, bool throws = false) {
    std::lock_guard lock(mutex);
    reload_answer = {ok, std::move(message)};
    reload_throws = throws;
  }

  std::string address() const { return server->bound(); }

  Metrics metrics;
  std::atomic<bool> ready{false};
  std::atomic<int> reloads{0};
  std::atomic<std::chrono::milliseconds> reload_delay{0ms};
  std::mutex mutex;
  std::pair<bool, std::string> reload_answer{true, "reloaded: 12 rules"};
  bool reload_throws = false;
  std::unique_ptr<OpsServer> server;
};

TEST_F(OpsServerTest, BoundNamesTheChosenPort) {
  EXPECT_TRUE(std::regex_match(address(), std::regex(R"(127\.0\.0\.1:\d+)"))) << address();
  EXPECT_NE(address(), "127.0.0.1:0");
}

TEST_F(OpsServerTest, MetricsServesTheExposition) {
  const Reply reply = fetch(address(), http::verb::get, "/metrics");
  ASSERT_EQ(reply.status, 200u);
  EXPECT_EQ(reply.content_type, "text/plain; version=0.0.4; charset=utf-8");
  const Exposition e = parse_exposition(reply.body);

  EXPECT_EQ(e.family_order,
            (std::vector<std::string>{"gpufilterd_lines_total", "gpufilterd_rules", "gpufilterd_scan_seconds"}));
  EXPECT_EQ(e.help.at("gpufilterd_lines_total"), "Lines scanned.");
  EXPECT_EQ(e.type.at("gpufilterd_lines_total"), "counter");
  EXPECT_EQ(e.type.at("gpufilterd_rules"), "gauge");
  EXPECT_EQ(e.type.at("gpufilterd_scan_seconds"), "histogram");

  EXPECT_EQ(e.samples.at("gpufilterd_lines_total{source=\"app.log\"}"), 42);
  EXPECT_EQ(e.samples.at("gpufilterd_lines_total{source=\"odd \\\"name\\\"\\\\\\n\"}"), 7);
  EXPECT_EQ(e.samples.at("gpufilterd_rules"), 12);

  // Buckets cumulative and in order, +Inf equal to the count.
  const std::vector<std::string> les = {"0.001", "0.01", "0.1", "+Inf"};
  const std::vector<double> expected = {1, 3, 4, 5};
  double previous = 0;
  for (std::size_t i = 0; i < les.size(); ++i) {
    const double n = e.samples.at("gpufilterd_scan_seconds_bucket{le=\"" + les[i] + "\"}");
    EXPECT_EQ(n, expected[i]) << les[i];
    EXPECT_GE(n, previous);
    previous = n;
  }
  EXPECT_EQ(e.samples.at("gpufilterd_scan_seconds_bucket{le=\"+Inf\"}"), e.samples.at("gpufilterd_scan_seconds_count"));
  EXPECT_NEAR(e.samples.at("gpufilterd_scan_seconds_sum"), 0.5555, 1e-12);

  // Live: a later scrape sees later updates.
  metrics.add("gpufilterd_lines_total", {{"source", "app.log"}}, 8);
  EXPECT_EQ(parse_exposition(fetch(address(), http::verb::get, "/metrics").body)
                .samples.at("gpufilterd_lines_total{source=\"app.log\"}"),
            50);
}

TEST_F(OpsServerTest, HealthzAnswersOk) {
  const Reply reply = fetch(address(), http::verb::get, "/healthz");
  EXPECT_EQ(reply.status, 200u);
  EXPECT_EQ(reply.body, "ok\n");
  EXPECT_EQ(reply.content_type, "text/plain; charset=utf-8");
  // A query string changes nothing.
  EXPECT_EQ(fetch(address(), http::verb::get, "/healthz?verbose=1").status, 200u);
}

TEST_F(OpsServerTest, HeadSendsTheHeadersWithoutTheBody) {
  const Reply reply = fetch(address(), http::verb::head, "/healthz");
  EXPECT_EQ(reply.status, 200u);
  EXPECT_EQ(reply.body, "");
  EXPECT_EQ(reply.content_length, "3");
}

TEST_F(OpsServerTest, ReadyzFollowsReady) {
  Client client(address());
  Reply reply = client.request(http::verb::get, "/readyz");
  EXPECT_EQ(reply.status, 503u);
  EXPECT_EQ(reply.body, "not ready\n");
  ready = true;
  reply = client.request(http::verb::get, "/readyz");
  EXPECT_EQ(reply.status, 200u);
  EXPECT_EQ(reply.body, "ready\n");
  ready = false;
  EXPECT_EQ(client.request(http::verb::get, "/readyz").status, 503u);
}

TEST_F(OpsServerTest, ReloadAnswersWithTheHandlersMessage) {
  Reply reply = fetch(address(), http::verb::post, "/-/reload");
  EXPECT_EQ(reply.status, 200u);
  EXPECT_EQ(reply.body, "reloaded: 12 rules\n");
  EXPECT_EQ(reloads.load(), 1);

  set_reload(false, "rules.yaml: line 3: unknown key 'treshold'");
  reply = fetch(address(), http::verb::post, "/-/reload");
  EXPECT_EQ(reply.status, 500u);
  EXPECT_EQ(reply.body, "rules.yaml: line 3: unknown key 'treshold'\n");
  EXPECT_EQ(reloads.load(), 2);

  set_reload(false, "", true);  // a handler that throws is a 500 too, and the server lives on
  reply = fetch(address(), http::verb::post, "/-/reload");
  EXPECT_EQ(reply.status, 500u);
  EXPECT_EQ(reply.body, "internal error: rules.yaml vanished\n");
  EXPECT_EQ(fetch(address(), http::verb::get, "/healthz").status, 200u);
}

TEST_F(OpsServerTest, ASlowReloadDelaysOthersButBreaksNothing) {
  reload_delay = 700ms;
  std::thread reloader([&] {
    const Reply reply = fetch(address(), http::verb::post, "/-/reload");
    EXPECT_EQ(reply.status, 200u);
    EXPECT_EQ(reply.body, "reloaded: 12 rules\n");
  });
  while (reloads.load() == 0) std::this_thread::sleep_for(5ms);
  // Served once the reload returns.
  EXPECT_EQ(fetch(address(), http::verb::get, "/healthz").body, "ok\n");
  reloader.join();
}

TEST_F(OpsServerTest, StopDuringASlowReloadWaitsForItAndEndsCleanly) {
  reload_delay = 500ms;
  std::thread reloader([&] {
    try {
      Client client(address());
      client.request(http::verb::post, "/-/reload");  // answered or cut off; either is fine
    } catch (const std::exception&) {
    }
  });
  while (reloads.load() == 0) std::this_thread::sleep_for(5ms);
  const auto start = Clock::now();
  server->stop();
  EXPECT_LT(Clock::now() - start, 3s);
  reloader.join();
}

TEST_F(OpsServerTest, UnknownTargetsAre404AndWrongMethods405WithAllow) {
  Reply reply = fetch(address(), http::verb::get, "/nothing");
  EXPECT_EQ(reply.status, 404u);
  EXPECT_EQ(reply.body, "not found\n");

  reply = fetch(address(), http::verb::get, "/-/reload");
  EXPECT_EQ(reply.status, 405u);
  EXPECT_EQ(reply.allow, "POST");
  EXPECT_EQ(reloads.load(), 0);

  reply = fetch(address(), http::verb::post, "/metrics");
  EXPECT_EQ(reply.status, 405u);
  EXPECT_EQ(reply.allow, "GET, HEAD");
  EXPECT_EQ(fetch(address(), http::verb::delete_, "/healthz").allow, "GET, HEAD");
  EXPECT_EQ(fetch(address(), http::verb::put, "/readyz").status, 405u);
}

TEST_F(OpsServerTest, KeepAliveServesSeveralRequestsOnOneConnection) {
  Client client(address());
  Reply first = client.request(http::verb::get, "/healthz");
  EXPECT_EQ(first.status, 200u);
  EXPECT_TRUE(first.keep_alive);
  Reply second = client.request(http::verb::get, "/metrics");
  EXPECT_EQ(second.status, 200u);
  Reply third = client.request(http::verb::post, "/-/reload");
  EXPECT_EQ(third.status, 200u);
  // Connection: close is honoured.
  Reply last = client.request(http::verb::get, "/healthz", 11, false);
  EXPECT_EQ(last.status, 200u);
  EXPECT_FALSE(last.keep_alive);
  EXPECT_TRUE(client.closed_by_server(2000ms));
}

TEST_F(OpsServerTest, Http10WithoutKeepAliveIsClosedAfterTheAnswer) {
  Client client(address());
  const Reply reply = client.request(http::verb::get, "/healthz", 10, false);
  EXPECT_EQ(reply.status, 200u);
  EXPECT_EQ(reply.body, "ok\n");
  EXPECT_TRUE(client.closed_by_server(2000ms));
}

TEST_F(OpsServerTest, SilentAndHalfSentClientsDoNotBlockOthers) {
  Client silent(address());
  Client half(address());
  half.send_raw("GET /heal");
  const auto start = Clock::now();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(fetch(address(), http::verb::get, "/healthz").status, 200u);
  EXPECT_LT(Clock::now() - start, 2s);
  // The half-sent request completes later on its own connection.
  half.send_raw("thz HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(half.read_reply().body, "ok\n");
}

// A connection that sends no complete request header within 2 s is closed (not after
// the 10 s of a body read or a write): an idle client holds a slot only briefly.
TEST_F(OpsServerTest, AnIdleConnectionIsClosedAfterTheHeaderTimeout) {
  Client idle(address());
  const auto start = Clock::now();
  EXPECT_TRUE(idle.closed_by_server(15000ms));
  const auto waited = Clock::now() - start;
  EXPECT_GT(waited, 1500ms);
  EXPECT_LT(waited, 4s);
  // A kept-alive connection waiting for its next request is idle as well.
  Client kept(address());
  EXPECT_EQ(kept.request(http::verb::get, "/healthz").status, 200u);
  EXPECT_TRUE(kept.closed_by_server(4000ms));
}

// The connection cap (64) full of idle connections, as an attacker would keep it, again
// and again: /healthz and /readyz still answer at once, each time.
TEST_F(OpsServerTest, IdleConnectionsAtTheCapDoNotBlockHealthChecks) {
  ready = true;
  for (int round = 0; round < 3; ++round) {
    std::vector<std::unique_ptr<Client>> idle;
    for (int i = 0; i < 70; ++i) idle.push_back(std::make_unique<Client>(address()));
    const auto start = Clock::now();
    EXPECT_EQ(fetch(address(), http::verb::get, "/healthz").status, 200u) << round;
    EXPECT_EQ(fetch(address(), http::verb::get, "/readyz").status, 200u) << round;
    EXPECT_LT(Clock::now() - start, 2s) << round;
  }
}

TEST_F(OpsServerTest, MalformedAndOversizedRequestsAreRefused) {
  {
    Client client(address());
    client.send_raw("NONSENSE\r\n\r\n");
    EXPECT_EQ(client.read_reply().status, 400u);
    EXPECT_TRUE(client.closed_by_server(2000ms));
  }
  {
    // The length alone is refused before any body is read; the handler never runs.
    Client client(address());
    client.send_raw("POST /-/reload HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n");
    EXPECT_EQ(client.read_reply().status, 413u);
    EXPECT_EQ(reloads.load(), 0);
  }
  {
    Client client(address());
    client.send_raw("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(32 * 1024, 'b') + "\r\n\r\n");
    EXPECT_EQ(client.read_reply().status, 431u);
  }
  // A body within the limit is read and ignored.
  Client client(address());
  EXPECT_EQ(client.request(http::verb::post, "/-/reload", 11, true, std::string(1000, 'x')).status, 200u);
  EXPECT_EQ(client.request(http::verb::get, "/healthz").status, 200u);
}

TEST_F(OpsServerTest, ConcurrentScrapesWhileMetricsChange) {
  std::atomic<bool> done{false};
  std::thread writer([&] {
    while (!done.load()) metrics.add("gpufilterd_lines_total", {{"source", "app.log"}}, 1);
  });
  std::vector<std::thread> scrapers;
  std::atomic<int> ok{0};
  for (int t = 0; t < 4; ++t) {
    scrapers.emplace_back([&] {
      Client client(address());
      for (int i = 0; i < 25; ++i) {
        const Exposition e = parse_exposition(client.request(http::verb::get, "/metrics").body);
        if (e.samples.at("gpufilterd_lines_total{source=\"app.log\"}") >= 42) ok.fetch_add(1);
      }
    });
  }
  for (auto& s : scrapers) s.join();
  done = true;
  writer.join();
  EXPECT_EQ(ok.load(), 100);
}

TEST_F(OpsServerTest, StopWithAConnectedClientReturnsPromptlyAndClosesIt) {
  Client idle(address());
  Client kept(address());
  EXPECT_EQ(kept.request(http::verb::get, "/healthz").status, 200u);  // a session waiting for its next request
  const auto start = Clock::now();
  server->stop();
  EXPECT_LT(Clock::now() - start, 1s);
  EXPECT_TRUE(kept.closed_by_server(2000ms));
  EXPECT_TRUE(idle.closed_by_server(2000ms));
  server->stop();  // again: nothing happens
  EXPECT_THROW(Client{address()}, std::runtime_error);  // nobody listens any more
}

TEST_F(OpsServerTest, APortInUseIsASourceErrorNamingTheAddress) {
  const std::string taken = address();
  try {
    OpsServer second(taken, metrics, handlers());
    FAIL() << "bound a port that is in use";
  } catch (const SourceError& e) {
    EXPECT_EQ(e.name(), taken);
    EXPECT_EQ(e.error_number(), EADDRINUSE);
  }
}

TEST(OpsServerSetupTest, MalformedAddressesAreConfigErrors) {
  Metrics metrics;
  for (const std::string bad :
       {"", "127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:-1", "127.0.0.1:http", "127.0.0.1:123456",
        "::1:9464", "[::1]9464", "[::1", "[not-v6]:80", "[]:80", "a b:80", "host/x:80", "127.0.0.1: 80"}) {
    try {
      OpsServer server(bad, metrics, {});
      ADD_FAILURE() << "accepted '" << bad << "' (bound " << server.bound() << ")";
    } catch (const ConfigError& e) {
      EXPECT_TRUE(std::string(e.what()).starts_with("server address " + bad + ": ")) << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "'" << bad << "': not a ConfigError: " << e.what();
    }
  }
}

TEST(OpsServerSetupTest, NamesAndIpv6AndUnsetHandlers) {
  Metrics metrics;
  {
    OpsServer server("localhost:0", metrics, {});
    server.start();
    const Reply reply = fetch(server.bound(), http::verb::get, "/readyz");
    EXPECT_EQ(reply.status, 200u);  // no ready(): nothing to wait for
    // No reload(): the endpoint is read-only, and says how reloading is enabled.
    const Reply reload = fetch(server.bound(), http::verb::post, "/-/reload");
    EXPECT_EQ(reload.status, 403u);
    EXPECT_EQ(reload.body, "reload over HTTP is disabled (reload_endpoint: true enables it; SIGHUP always reloads)\n");
  }
  try {
    OpsServer server("[::1]:0", metrics, {});
    server.start();
    EXPECT_TRUE(server.bound().starts_with("[::1]:")) << server.bound();
    EXPECT_EQ(fetch(server.bound(), http::verb::get, "/healthz").body, "ok\n");
  } catch (const SourceError& e) {
    GTEST_SKIP() << "no IPv6 loopback here: " << e.what();
  }
}

// Security default: an address without a host is loopback, never every address.
TEST(OpsServerSetupTest, AnAddressWithoutAHostBindsLoopbackOnly) {
  Metrics metrics;
  OpsServer server(":0", metrics, {});
  server.start();
  EXPECT_TRUE(std::regex_match(server.bound(), std::regex(R"(127\.0\.0\.1:[1-9]\d*)"))) << server.bound();
  EXPECT_EQ(fetch(server.bound(), http::verb::get, "/healthz").body, "ok\n");
  // Every address only when said.
  OpsServer everywhere("0.0.0.0:0", metrics, {});
  EXPECT_TRUE(everywhere.bound().starts_with("0.0.0.0:")) << everywhere.bound();
}

// Read-only: without a reload handler no request changes anything. Every method but GET
// and HEAD is refused on every route with 405 and Allow, /-/reload answers 403 to POST
// and 405 to anything else, and the page is the same before and after.
TEST(OpsServerSetupTest, WithoutAReloadHandlerNoRequestChangesState) {
  Metrics metrics;
  metrics.describe("gpufilterd_rules", Type::kGauge, "Rules loaded.");
  metrics.set("gpufilterd_rules", {}, 3);
  std::atomic<int> ready_calls{0};
  OpsServer server("127.0.0.1:0", metrics, OpsHandlers{[&] {
                                                         ready_calls.fetch_add(1);
                                                         return true;
                                                       },
                                                       {}});
  server.start();
  const std::string before = fetch(server.bound(), http::verb::get, "/metrics").body;
  const std::vector<http::verb> writes = {http::verb::post,  http::verb::put,     http::verb::delete_,
                                          http::verb::patch, http::verb::options, http::verb::trace};
  for (const std::string target : {"/metrics", "/healthz", "/readyz"}) {
    for (const http::verb method : writes) {
      SCOPED_TRACE(target + " " + std::string(http::to_string(method)));
      const Reply reply = fetch(server.bound(), method, target);
      EXPECT_EQ(reply.status, 405u);
      EXPECT_EQ(reply.allow, "GET, HEAD");
    }
  }
  EXPECT_EQ(ready_calls.load(), 0);  // a refused method never reaches a handler
  for (const http::verb method : {http::verb::get, http::verb::head, http::verb::put, http::verb::delete_}) {
    const Reply reply = fetch(server.bound(), method, "/-/reload");
    EXPECT_EQ(reply.status, 405u);
    EXPECT_EQ(reply.allow, "POST");
  }
  EXPECT_EQ(fetch(server.bound(), http::verb::post, "/-/reload").status, 403u);
  EXPECT_EQ(fetch(server.bound(), http::verb::post, "/-/reload?force=1").status, 403u);
  // No other route, and no path trick, reaches a handler.
  for (const std::string target : {"/-/quit", "/-/reload/", "/metrics/../-/reload", "//-/reload", "/api/v1/admin"}) {
    EXPECT_EQ(fetch(server.bound(), http::verb::post, target).status, 404u) << target;
  }
  EXPECT_EQ(fetch(server.bound(), http::verb::get, "/metrics").body, before);
  EXPECT_EQ(fetch(server.bound(), http::verb::get, "/readyz").status, 200u);
}

TEST(OpsServerSetupTest, AThrowingReadyIsA500AndNeverEndsTheServer) {
  Metrics metrics;
  OpsServer server("127.0.0.1:0", metrics,
                   OpsHandlers{[]() -> bool { throw 17; }, [] { return std::pair{true, std::string("done")}; }});
  server.start();
  const Reply reply = fetch(server.bound(), http::verb::get, "/readyz");
  EXPECT_EQ(reply.status, 500u);
  EXPECT_EQ(reply.body, "internal error\n");
  EXPECT_EQ(fetch(server.bound(), http::verb::post, "/-/reload").body, "done\n");
}

TEST(OpsServerSetupTest, StopAndDestroyWithoutStartOrTwice) {
  Metrics metrics;
  {
    OpsServer never_started("127.0.0.1:0", metrics, {});
  }
  {
    OpsServer stopped_unstarted("127.0.0.1:0", metrics, {});
    stopped_unstarted.stop();
    stopped_unstarted.start();  // after stop(): nothing
    stopped_unstarted.stop();
  }
  {
    OpsServer destroyed_running("127.0.0.1:0", metrics, {});
    destroyed_running.start();
    destroyed_running.start();  // twice: nothing
    EXPECT_EQ(fetch(destroyed_running.bound(), http::verb::get, "/healthz").status, 200u);
  }
}

}  // namespace
}  // namespace gpufilter::daemon
