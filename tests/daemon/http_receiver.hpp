// Test helpers for gpufilterd's HTTP: HttpReceiver, a real HTTP/1.1 server on 127.0.0.1
// that records every request (what a webhook or an Alertmanager would receive), and
// http_request(), a small blocking client (for the ops endpoint: /metrics, /healthz ...).
// No mocks: both speak HTTP over real loopback sockets through Boost.Beast.
//
//   HttpReceiver receiver;                       // 127.0.0.1, a free port, serving now
//   config.url = receiver.url() + "/hook";       // "http://127.0.0.1:40312/hook"
//   receiver.fail_next(3);                       // the next 3 requests get 500
//   ASSERT_TRUE(receiver.wait_for_count(4, 5s)); // 3 failed + 1 answered 200
//   ReceivedRequest r = receiver.requests().back();
//   EXPECT_EQ(r.header("content-type"), "application/json");
//
// Requests are recorded at arrival, before any delay, in arrival order, with the status
// they were (or will be) answered with. Keep-alive connections are served request after
// request; a request with "Connection: close" (or set_keep_alive(false)) is answered with
// "Connection: close" and its connection closed. Every method is thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpufilter::test {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct ReceivedRequest {
  std::string method;  // "POST"
  std::string target;  // "/api/v2/alerts", query included
  HttpHeaders headers;  // as received, in order, names as sent
  std::string body;
  unsigned status = 0;            // the status the receiver answered with
  std::uint64_t connection = 0;   // which accepted connection it came on: 1, 2, ...
  std::chrono::steady_clock::time_point received{};  // when it was read whole

  // The first value of header `name` (case-insensitive); "" when absent.
  std::string header(std::string_view name) const;
  bool has_header(std::string_view name) const;
};

// An https receiver: its certificate and key (PEM), and when client_ca_file is set, a
// client certificate signed by that CA is required (mutual TLS).
struct ReceiverTls {
  std::string cert_file;
  std::string key_file;
  std::string client_ca_file;
};

class HttpReceiver {
 public:
  // Binds 127.0.0.1:`port` (0: a free port the system picks; SO_REUSEADDR, so a port a
  // stopped receiver used can be bound again) and serves on its own thread at once.
  // Throws boost::system::system_error when the port cannot be bound.
  explicit HttpReceiver(std::uint16_t port = 0);
  // The same over TLS: url() says https://. Throws boost::system::system_error when a file
  // cannot be used.
  HttpReceiver(std::uint16_t port, const ReceiverTls& tls);
  ~HttpReceiver();  // stop()
  HttpReceiver(const HttpReceiver&) = delete;
  HttpReceiver& operator=(const HttpReceiver&) = delete;

  std::uint16_t port() const;
  std::string url() const;  // "http://127.0.0.1:PORT" (https:// with TLS), no trailing slash
  // TLS handshakes that failed (either side refused the other's certificate).
  std::size_t failed_handshakes() const;

  // Every request so far (a copy), in arrival order.
  std::vector<ReceivedRequest> requests() const;
  std::size_t count() const;
  // Forgets the requests recorded so far (connection numbers keep counting).
  void clear();
  // Waits until `done(requests)` is true (checked at once and after each request) or the
  // timeout passes; returns the last result of `done`.
  bool wait_for(const std::function<bool(const std::vector<ReceivedRequest>&)>& done,
                std::chrono::milliseconds timeout) const;
  bool wait_for_count(std::size_t n, std::chrono::milliseconds timeout) const;  // count() >= n

  // The next `n` requests are answered with `status` (then the normal status again).
  void fail_next(std::size_t n, unsigned status = 500);
  // The status of every other answer (200 until set).
  void set_status(unsigned status);
  // Answers this long after a request arrived (0: at once); other connections are
  // served meanwhile. A large delay makes a hung receiver.
  void set_delay(std::chrono::milliseconds delay);
  // false: every answer says "Connection: close" and the connection is closed after it.
  void set_keep_alive(bool keep_alive);

  // Closes the listening socket and every connection (a request waiting for its delayed
  // answer gets none) and joins the thread. Idempotent; the port is free afterwards.
  void stop();

 private:
  HttpReceiver(std::uint16_t port, const ReceiverTls* tls);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A CA, a receiver certificate for localhost (a DNS name only) signed by it, a client
// certificate signed by it, and another CA that signed nothing: PEM files the openssl
// command makes once per test binary in a temporary folder. Empty paths when openssl is
// missing.
struct TestPki {
  std::string dir;
  std::string ca, other_ca, server_cert, server_key, client_cert, client_key;
};
const TestPki& pki();

struct HttpResponse {
  unsigned status = 0;  // 0: no response (see error)
  HttpHeaders headers;
  std::string body;
  std::string error;  // why there is no response ("connect: Connection refused")
  std::string header(std::string_view name) const;  // case-insensitive; "" when absent
};

// One request on a new connection ("Connection: close"), waiting at most `timeout` in
// all. `url`: "http://HOST:PORT/target" or "HOST:PORT/target". Never throws for network
// errors: they come back in HttpResponse::error.
HttpResponse http_request(const std::string& method, const std::string& url, const std::string& body = "",
                          const HttpHeaders& headers = {},
                          std::chrono::milliseconds timeout = std::chrono::milliseconds(10000));

}  // namespace gpufilter::test
