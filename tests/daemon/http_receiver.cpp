// HttpReceiver and http_request(): a recording HTTP/1.1 server and a blocking client for
// the daemon tests, on Boost.Beast over loopback TCP. The server runs one io_context on
// one thread; each accepted connection is a Session that reads a request, records it,
// waits for the configured delay, answers, and reads the next one while kept alive.
#include "http_receiver.hpp"

#include <stdlib.h>

#include <algorithm>
#include <cctype>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

namespace gpufilter::test {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::string find_header(const HttpHeaders& headers, std::string_view name) {
  for (const auto& [key, value] : headers) {
    if (iequals(key, name)) return value;
  }
  return {};
}

template <class Fields>
HttpHeaders copy_headers(const Fields& fields) {
  HttpHeaders out;
  for (const auto& field : fields) out.emplace_back(std::string(field.name_string()), std::string(field.value()));
  return out;
}

}  // namespace

std::string ReceivedRequest::header(std::string_view name) const { return find_header(headers, name); }

bool ReceivedRequest::has_header(std::string_view name) const {
  return std::any_of(headers.begin(), headers.end(), [&](const auto& h) { return iequals(h.first, name); });
}

std::string HttpResponse::header(std::string_view name) const { return find_header(headers, name); }

// ---------------------------------------------------------------------------------------
// The server

class SessionBase {
 public:
  virtual ~SessionBase() = default;
  virtual void close() = 0;
};

// HttpReceiver::Impl is private to the class; the sessions need its state, so it lives
// here and Impl is only its name inside HttpReceiver.
struct ReceiverState {
  // The io thread's side (only it touches these once the thread runs).
  asio::io_context ioc;
  tcp::acceptor acceptor{ioc};
  std::uint64_t connections = 0;
  std::vector<std::weak_ptr<SessionBase>> sessions;
  std::unique_ptr<ssl::context> tls;  // https: the server's certificate, and a client CA
  bool stopping = false;
  std::mutex stop_mutex;  // stop() from two threads joins once
  std::thread thread;
  std::uint16_t port = 0;

  // Shared with the test's threads.
  mutable std::mutex mutex;
  mutable std::condition_variable changed;
  std::vector<ReceivedRequest> requests;
  std::size_t fail_remaining = 0;
  unsigned fail_status = 500;
  unsigned status = 200;
  std::chrono::milliseconds delay{0};
  bool keep_alive = true;
  std::size_t failed_handshakes = 0;

  void accept();
};

struct HttpReceiver::Impl : ReceiverState {};

// One connection: plain (beast::tcp_stream) or TLS (beast::ssl_stream over it).
template <class Stream>
class Session : public SessionBase, public std::enable_shared_from_this<Session<Stream>> {
 public:
  template <class... Tls>
  Session(tcp::socket socket, ReceiverState& owner, std::uint64_t id, Tls&... tls)
      : owner_(owner), id_(id), stream_(std::move(socket), tls...), timer_(owner.ioc) {}

  // TLS: the server's side of the handshake, then the requests.
  void handshake() {
    stream_.async_handshake(ssl::stream_base::server, [self = this->shared_from_this()](beast::error_code ec) {
      if (ec) {
        {
          std::lock_guard lock(self->owner_.mutex);
          ++self->owner_.failed_handshakes;
        }
        self->owner_.changed.notify_all();
        self->close();
        return;
      }
      self->read();
    });
  }

  void read() {
    if (owner_.stopping) return;
    parser_.emplace();
    parser_->body_limit(64u << 20);
    http::async_read(stream_, buffer_, *parser_, [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
      self->on_read(ec);
    });
  }

  void close() override {
    beast::error_code ignored;
    timer_.cancel();
    beast::get_lowest_layer(stream_).socket().shutdown(tcp::socket::shutdown_both, ignored);
    beast::get_lowest_layer(stream_).socket().close(ignored);
  }

 private:
  void on_read(beast::error_code ec) {
    if (ec) {
      close();  // the client closed, sent garbage, or stop() closed us
      return;
    }
    http::request<http::string_body> request = parser_->release();
    ReceivedRequest record;
    record.method = std::string(request.method_string());
    record.target = std::string(request.target());
    record.headers = copy_headers(request);
    record.body = request.body();
    record.connection = id_;
    record.received = std::chrono::steady_clock::now();
    std::chrono::milliseconds delay{0};
    {
      std::lock_guard lock(owner_.mutex);
      if (owner_.fail_remaining > 0) {
        --owner_.fail_remaining;
        record.status = owner_.fail_status;
      } else {
        record.status = owner_.status;
      }
      keep_alive_ = owner_.keep_alive && request.keep_alive();
      delay = owner_.delay;
      owner_.requests.push_back(record);
    }
    owner_.changed.notify_all();

    response_ = {};
    response_.version(request.version());
    response_.result(record.status);
    response_.set(http::field::server, "gpufilter-test-receiver");
    response_.set(http::field::content_type, "text/plain");
    response_.body() = record.status >= 200 && record.status < 300 ? "ok\n" : "error\n";
    response_.keep_alive(keep_alive_);
    response_.prepare_payload();
    if (delay > std::chrono::milliseconds(0)) {
      timer_.expires_after(delay);
      timer_.async_wait([self = this->shared_from_this()](beast::error_code e) {
        if (e) {
          self->close();
          return;
        }
        self->write();
      });
    } else {
      write();
    }
  }

  void write() {
    http::async_write(stream_, response_, [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec || !self->keep_alive_) {
        self->close();
        return;
      }
      self->read();
    });
  }

  ReceiverState& owner_;
  const std::uint64_t id_;
  Stream stream_;
  asio::steady_timer timer_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> response_;
  bool keep_alive_ = true;
};

void ReceiverState::accept() {
  acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
    if (stopping || !acceptor.is_open()) return;
    if (!ec) {
      std::erase_if(sessions, [](const std::weak_ptr<SessionBase>& s) { return s.expired(); });
      if (tls) {
        auto session = std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(std::move(socket), *this,
                                                                                         ++connections, *tls);
        sessions.push_back(session);
        session->handshake();
      } else {
        auto session = std::make_shared<Session<beast::tcp_stream>>(std::move(socket), *this, ++connections);
        sessions.push_back(session);
        session->read();
      }
    }
    accept();  // a failed accept (EMFILE, a reset before accept) does not end the server
  });
}

HttpReceiver::HttpReceiver(std::uint16_t port, const ReceiverTls& tls) : HttpReceiver(port, &tls) {}

HttpReceiver::HttpReceiver(std::uint16_t port) : HttpReceiver(port, nullptr) {}

HttpReceiver::HttpReceiver(std::uint16_t port, const ReceiverTls* tls) : impl_(std::make_unique<Impl>()) {
  if (tls != nullptr) {
    impl_->tls = std::make_unique<ssl::context>(ssl::context::tls_server);
    impl_->tls->use_certificate_chain_file(tls->cert_file);
    impl_->tls->use_private_key_file(tls->key_file, ssl::context::pem);
    if (!tls->client_ca_file.empty()) {
      impl_->tls->load_verify_file(tls->client_ca_file);
      impl_->tls->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
    }
  }
  const tcp::endpoint endpoint(asio::ip::make_address("127.0.0.1"), port);
  impl_->acceptor.open(endpoint.protocol());
  impl_->acceptor.set_option(asio::socket_base::reuse_address(true));
  impl_->acceptor.bind(endpoint);
  impl_->acceptor.listen();
  impl_->port = impl_->acceptor.local_endpoint().port();
  impl_->accept();
  impl_->thread = std::thread([impl = impl_.get()] { impl->ioc.run(); });
}

HttpReceiver::~HttpReceiver() { stop(); }

std::uint16_t HttpReceiver::port() const { return impl_->port; }

std::string HttpReceiver::url() const {
  return (impl_->tls ? "https://127.0.0.1:" : "http://127.0.0.1:") + std::to_string(impl_->port);
}

std::size_t HttpReceiver::failed_handshakes() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->failed_handshakes;
}

std::vector<ReceivedRequest> HttpReceiver::requests() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->requests;
}

std::size_t HttpReceiver::count() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->requests.size();
}

void HttpReceiver::clear() {
  std::lock_guard lock(impl_->mutex);
  impl_->requests.clear();
}

bool HttpReceiver::wait_for(const std::function<bool(const std::vector<ReceivedRequest>&)>& done,
                            std::chrono::milliseconds timeout) const {
  std::unique_lock lock(impl_->mutex);
  return impl_->changed.wait_for(lock, timeout, [&] { return done(impl_->requests); });
}

bool HttpReceiver::wait_for_count(std::size_t n, std::chrono::milliseconds timeout) const {
  return wait_for([n](const std::vector<ReceivedRequest>& r) { return r.size() >= n; }, timeout);
}

void HttpReceiver::fail_next(std::size_t n, unsigned status) {
  std::lock_guard lock(impl_->mutex);
  impl_->fail_remaining = n;
  impl_->fail_status = status;
}

void HttpReceiver::set_status(unsigned status) {
  std::lock_guard lock(impl_->mutex);
  impl_->status = status;
}

void HttpReceiver::set_delay(std::chrono::milliseconds delay) {
  std::lock_guard lock(impl_->mutex);
  impl_->delay = delay;
}

void HttpReceiver::set_keep_alive(bool keep_alive) {
  std::lock_guard lock(impl_->mutex);
  impl_->keep_alive = keep_alive;
}

void HttpReceiver::stop() {
  std::lock_guard guard(impl_->stop_mutex);
  if (!impl_->thread.joinable()) return;
  // On the io thread: the acceptor and the sessions belong to it.
  asio::post(impl_->ioc, [impl = impl_.get()] {
    impl->stopping = true;
    beast::error_code ignored;
    impl->acceptor.close(ignored);
    for (const std::weak_ptr<SessionBase>& weak : impl->sessions) {
      if (auto session = weak.lock()) session->close();
    }
    // Handlers still queued only see closed sockets; they are destroyed with the
    // io_context rather than run.
    impl->ioc.stop();
  });
  impl_->thread.join();
}

// ---------------------------------------------------------------------------------------
// Certificates

const TestPki& pki() {
  static const TestPki made = [] {
    TestPki p;
    char pattern[] = "/tmp/gpufilter-pki-XXXXXX";
    if (::mkdtemp(pattern) == nullptr) return p;
    p.dir = pattern;
    // The keys go with the process that made them (every test binary used to leave one).
    static const struct Remover {
      std::string dir;
      ~Remover() {
        std::error_code ignored;
        std::filesystem::remove_all(dir, ignored);
      }
    } remover{p.dir};
    const std::string d = p.dir;
    const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    std::ofstream(d + "/server.ext") << "subjectAltName=DNS:localhost\n";
    const std::string script =
        "cd " + d + " && exec 2>openssl.log && "
        "openssl req -x509 " + key + " -keyout ca.key -out ca.pem -days 2 -subj /CN=gpufilter-test-ca && "
        "openssl req -x509 " + key + " -keyout other.key -out other.pem -days 2 -subj /CN=another-ca && "
        "openssl req " + key + " -keyout server.key -out server.csr -subj /CN=localhost && "
        "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 "
        "-extfile server.ext && "
        "openssl req " + key + " -keyout client.key -out client.csr -subj /CN=gpufilterd && "
        "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem -days 2";
    if (std::system(("sh -c '" + script + "' >/dev/null").c_str()) != 0) return p;
    p.ca = d + "/ca.pem";
    p.other_ca = d + "/other.pem";
    p.server_cert = d + "/server.pem";
    p.server_key = d + "/server.key";
    p.client_cert = d + "/client.pem";
    p.client_key = d + "/client.key";
    return p;
  }();
  return made;
}

// ---------------------------------------------------------------------------------------
// The client

HttpResponse http_request(const std::string& method, const std::string& url, const std::string& body,
                          const HttpHeaders& headers, std::chrono::milliseconds timeout) {
  HttpResponse out;
  std::string rest = url;
  if (rest.rfind("http://", 0) == 0) rest = rest.substr(7);
  const std::size_t slash = rest.find('/');
  const std::string authority = rest.substr(0, slash);
  const std::string target = slash == std::string::npos ? "/" : rest.substr(slash);
  const std::size_t colon = authority.rfind(':');
  const std::string host = authority.substr(0, colon);
  const std::string port = colon == std::string::npos ? "80" : authority.substr(colon + 1);

  asio::io_context ioc;
  beast::tcp_stream stream(ioc);
  beast::error_code ec;
  // Each step runs the io_context until its handler ran; the stream's timer bounds the
  // whole exchange.
  const auto step = [&](const char* what) {
    ioc.run();
    ioc.restart();
    if (ec) out.error = std::string(what) + ": " + ec.message();
    return !ec;
  };
  tcp::resolver resolver(ioc);
  const auto endpoints = resolver.resolve(host, port, ec);
  if (ec) {
    out.error = "resolve: " + ec.message();
    return out;
  }
  stream.expires_after(timeout);
  stream.async_connect(endpoints, [&](beast::error_code e, const tcp::endpoint&) { ec = e; });
  if (!step("connect")) return out;

  http::request<http::string_body> request{http::string_to_verb(method), target, 11};
  if (request.method() == http::verb::unknown) request.method_string(method);
  request.set(http::field::host, authority);
  request.set(http::field::user_agent, "gpufilter-test");
  for (const auto& [name, value] : headers) request.set(name, value);
  request.keep_alive(false);
  request.body() = body;
  request.prepare_payload();
  http::async_write(stream, request, [&](beast::error_code e, std::size_t) { ec = e; });
  if (!step("write")) return out;

  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64u << 20);
  http::async_read(stream, buffer, parser, [&](beast::error_code e, std::size_t) { ec = e; });
  if (!step("read")) return out;

  const auto& response = parser.get();
  out.status = response.result_int();
  out.headers = copy_headers(response);
  out.body = response.body();
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  return out;
}

}  // namespace gpufilter::test
