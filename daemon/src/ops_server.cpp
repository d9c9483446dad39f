// OpsServer: /metrics, /healthz, /readyz and /-/reload over HTTP/1.1 (ops_server.hpp), with
// Boost.Beast on one io_context and one thread of its own.
//
// A connection's life:
//   accept -> Session::read (request parser with a body limit, under a deadline)
//          -> respond (on this thread; reload may take seconds and holds the others
//             back meanwhile, which is fine for an operations endpoint)
//          -> write (under a deadline) -> keep-alive: read again | close
// The deadlines are what keep a client that connects and sends nothing, or sends one
// byte a second, or never reads its answer, from holding a connection for long; and a
// connection cap keeps many of them from taking every descriptor. The cap must not make
// /healthz unanswerable: a request header must arrive whole within 2 s (not 10), and a
// connection accepted at the cap closes the oldest one still waiting for its header, so
// idle connections opened again and again cannot hold every slot. Nothing a client
// sends and nothing a handler throws leaves the server thread.
#include "gpufilter/daemon/ops_server.hpp"

#include <chrono>
#include <exception>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "gpufilter/core/errors.hpp"
#include "gpufilter/sources/listener.hpp"

namespace gpufilter::daemon {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using boost::system::error_code;
using tcp = asio::ip::tcp;

namespace {

constexpr std::size_t kBodyLimit = 64 * 1024;      // nothing here takes a body; 64 KiB is generous
constexpr std::size_t kHeaderLimit = 16 * 1024;
constexpr auto kIoTimeout = std::chrono::seconds(10);  // per request body read and per response write
// From awaiting a request (a new or kept-alive connection) to its complete header: what
// an idle or byte-a-second client may hold a slot for. A scraper sends its header at once.
constexpr auto kHeaderTimeout = std::chrono::seconds(2);
constexpr std::size_t kMaxConnections = 64;            // a scraper and a few humans need far fewer
constexpr auto kAcceptRetry = std::chrono::milliseconds(100);  // after EMFILE and the like

constexpr std::string_view kTextPlain = "text/plain; charset=utf-8";
constexpr std::string_view kMetricsType = "text/plain; version=0.0.4; charset=utf-8";

using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

// "127.0.0.1:40312", "[::1]:40312".
std::string endpoint_text(const tcp::endpoint& endpoint) {
  const std::string host = endpoint.address().to_string();
  const std::string port = std::to_string(endpoint.port());
  return endpoint.address().is_v6() ? "[" + host + "]:" + port : host + ":" + port;
}

// `text` with one final newline, so that curl's output ends its line.
std::string line(std::string text) {
  if (text.empty() || text.back() != '\n') text += '\n';
  return text;
}

Response make_response(http::status status, unsigned version, bool keep_alive, std::string body,
                       std::string_view content_type = kTextPlain) {
  Response response{status, version};
  response.set(http::field::content_type, beast::string_view(content_type.data(), content_type.size()));
  response.set(http::field::cache_control, "no-store");
  response.keep_alive(keep_alive);
  response.body() = std::move(body);
  response.prepare_payload();
  return response;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// The server's state, all of it touched only on the server thread once start() ran

struct OpsServer::Impl {
  class Session;

  Impl(Metrics& metrics_in, OpsHandlers handlers_in)
      : metrics(metrics_in), handlers(std::move(handlers_in)), acceptor(io), retry(io) {}

  void accept();
  void evict_one_waiting();
  void close_all();
  // What a request gets, before it becomes a response for the request's version.
  struct Answer {
    http::status status = http::status::ok;
    std::string body;
    std::string content_type;
    std::string allow;  // for 405
  };
  Response respond(const Request& request);  // never throws
  Answer route(const Request& request);

  Metrics& metrics;
  OpsHandlers handlers;
  // Declared before the sockets that use it, so that it is destroyed after them.
  asio::io_context io{1};
  asio::executor_work_guard<asio::io_context::executor_type> work = asio::make_work_guard(io);
  tcp::acceptor acceptor;
  asio::steady_timer retry;
  std::string address;  // bound()
  std::vector<std::weak_ptr<Session>> sessions;  // pruned on accept; closed by stop()
  std::thread thread;
  std::mutex lifecycle;  // start() and stop() from any thread
  bool started = false;
  bool stopped = false;
};

// One connection: requests read and answered one after another (HTTP/1.1 without
// pipelining, which no scraper uses, needs nothing more).
class OpsServer::Impl::Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, Impl& server) : stream_(std::move(socket)), server_(server) {}

  void read() {
    parser_.emplace();
    parser_->body_limit(kBodyLimit);
    parser_->header_limit(kHeaderLimit);
    waiting_header_ = true;
    stream_.expires_after(kHeaderTimeout);
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](error_code ec, std::size_t) { self->on_header(ec); });
  }

  // True until the request's header is complete: such a connection may be closed to make
  // room (accept()), as it has asked for nothing yet.
  bool waiting_header() const { return waiting_header_; }

  void close() {
    error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

 private:
  void on_header(error_code ec) {
    waiting_header_ = false;
    if (ec || parser_->is_done()) return on_read(ec);
    stream_.expires_after(kIoTimeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](error_code e, std::size_t) { self->on_read(e); });
  }

  void on_read(error_code ec) {
    if (ec == http::error::body_limit) {
      return write(make_response(http::status::payload_too_large, 11, false, "request body too large\n"));
    }
    if (ec == http::error::header_limit) {
      return write(make_response(http::status::request_header_fields_too_large, 11, false, "request header too large\n"));
    }
    // Anything else the parser refused is a malformed request; the rest (end of stream,
    // timeout, reset, stop()) ends the connection without an answer.
    if (ec && ec.category() == http::make_error_code(http::error::end_of_stream).category() &&
        ec != http::error::end_of_stream && ec != http::error::partial_message) {
      return write(make_response(http::status::bad_request, 11, false, "bad request\n"));
    }
    if (ec) return close();
    write(server_.respond(parser_->get()));
  }

  void write(Response response) {
    response_ = std::move(response);
    stream_.expires_after(kIoTimeout);
    http::async_write(stream_, response_, [self = shared_from_this()](error_code ec, std::size_t) {
      if (ec || !self->response_.keep_alive()) return self->close();
      self->read();
    });
  }

  beast::tcp_stream stream_;
  Impl& server_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  Response response_;
  bool waiting_header_ = false;
};

void OpsServer::Impl::accept() {
  acceptor.async_accept([this](error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
    if (ec) {
      // Out of descriptors, most likely: try again shortly rather than spin or give up.
      retry.expires_after(kAcceptRetry);
      retry.async_wait([this](error_code wait_ec) {
        if (!wait_ec) accept();
      });
      return;
    }
    std::erase_if(sessions, [](const std::weak_ptr<Session>& s) { return s.expired(); });
    if (sessions.size() >= kMaxConnections) evict_one_waiting();
    if (sessions.size() >= kMaxConnections) {
      error_code ignored;
      socket.close(ignored);
    } else {
      auto session = std::make_shared<Session>(std::move(socket), *this);
      sessions.push_back(session);
      session->read();
    }
    accept();
  });
}

// At the cap: the oldest connection that has not sent a whole request header yet makes
// room, so that a health check gets in even while idle connections fill every slot.
// Connections being answered are never closed for it.
void OpsServer::Impl::evict_one_waiting() {
  for (auto it = sessions.begin(); it != sessions.end(); ++it) {
    const auto session = it->lock();
    if (session && session->waiting_header()) {
      session->close();
      sessions.erase(it);
      return;
    }
  }
}

void OpsServer::Impl::close_all() {
  error_code ignored;
  acceptor.close(ignored);
  retry.cancel();
  for (const auto& weak : sessions) {
    if (const auto session = weak.lock()) session->close();
  }
  sessions.clear();
}

// ---------------------------------------------------------------------------------------
// Requests

OpsServer::Impl::Answer OpsServer::Impl::route(const Request& request) {
  const std::string_view full(request.target().data(), request.target().size());
  const std::string_view target = full.substr(0, full.find('?'));  // a query changes nothing here
  const http::verb method = request.method();
  const bool get = method == http::verb::get || method == http::verb::head;
  const auto not_allowed = [](std::string allow) {
    return Answer{http::status::method_not_allowed, "method not allowed\n", std::string(kTextPlain), std::move(allow)};
  };
  const auto text = [](http::status status, std::string body) {
    return Answer{status, std::move(body), std::string(kTextPlain), {}};
  };

  if (target == "/metrics") {
    if (!get) return not_allowed("GET, HEAD");
    return Answer{http::status::ok, metrics.render(), std::string(kMetricsType), {}};
  }
  if (target == "/healthz") {
    if (!get) return not_allowed("GET, HEAD");
    return text(http::status::ok, "ok\n");
  }
  if (target == "/readyz") {
    if (!get) return not_allowed("GET, HEAD");
    // No ready() means nothing to wait for.
    if (!handlers.ready || handlers.ready()) return text(http::status::ok, "ready\n");
    return text(http::status::service_unavailable, "not ready\n");
  }
  if (target == "/-/reload") {
    if (method != http::verb::post) return not_allowed("POST");
    // The one route that changes state: there only when the configuration asks for it.
    if (!handlers.reload) {
      return text(http::status::forbidden,
                  "reload over HTTP is disabled (reload_endpoint: true enables it; SIGHUP always reloads)\n");
    }
    auto [ok, message] = handlers.reload();
    return text(ok ? http::status::ok : http::status::internal_server_error, line(std::move(message)));
  }
  return text(http::status::not_found, "not found\n");
}

Response OpsServer::Impl::respond(const Request& request) {
  Answer answer;
  try {
    answer = route(request);
  } catch (const std::exception& e) {
    answer = Answer{http::status::internal_server_error, line(std::string("internal error: ") + e.what()),
                    std::string(kTextPlain), {}};
  } catch (...) {
    answer = Answer{http::status::internal_server_error, "internal error\n", std::string(kTextPlain), {}};
  }
  const std::size_t length = answer.body.size();
  Response response =
      make_response(answer.status, request.version(), request.keep_alive(), std::move(answer.body), answer.content_type);
  if (!answer.allow.empty()) response.set(http::field::allow, answer.allow);
  if (request.method() == http::verb::head) {
    // HEAD: the headers GET would send, Content-Length included, and no body.
    response.body().clear();
    response.content_length(length);
  }
  return response;
}

// ---------------------------------------------------------------------------------------
// OpsServer

OpsServer::OpsServer(const std::string& listen, Metrics& metrics, OpsHandlers handlers)
    : impl_(std::make_unique<Impl>(metrics, std::move(handlers))) {
  // Without a host, loopback: the metrics are served beyond this machine only when asked.
  const HostPort address = parse_host_port(listen, "server address " + listen);
  error_code ec;
  tcp::endpoint endpoint;
  const asio::ip::address ip = asio::ip::make_address(address.host, ec);
  if (!ec) {
    endpoint = tcp::endpoint(ip, address.port);
  } else {
    // A name ("localhost"): its first address, so that bound() names one socket.
    tcp::resolver resolver(impl_->io);
    const auto results = resolver.resolve(address.host, std::to_string(address.port),
                                          tcp::resolver::passive | tcp::resolver::numeric_service, ec);
    if (ec || results.empty()) {
      throw ConfigError("server address " + listen + ": cannot resolve '" + address.host +
                        "': " + (ec ? ec.message() : std::string("no address")));
    }
    endpoint = results.begin()->endpoint();
  }
  tcp::acceptor& acceptor = impl_->acceptor;
  acceptor.open(endpoint.protocol(), ec);
  // A restart while old connections linger in TIME_WAIT must bind; a second server on a
  // port that is listened on still fails (Linux refuses SO_REUSEADDR there).
  if (!ec) acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw SourceError(listen, ec.value());
  impl_->address = endpoint_text(acceptor.local_endpoint());
}

OpsServer::~OpsServer() { stop(); }

void OpsServer::start() {
  std::lock_guard lock(impl_->lifecycle);
  if (impl_->started || impl_->stopped) return;
  impl_->started = true;
  Impl* impl = impl_.get();
  impl->accept();
  impl->thread = std::thread([impl] {
    // Handlers catch what they can; this keeps anything else from ending the thread
    // (and the process, through std::terminate) while the server should still serve.
    for (;;) {
      try {
        impl->io.run();
        return;
      } catch (...) {
      }
    }
  });
}

void OpsServer::stop() {
  std::unique_lock lock(impl_->lifecycle);
  Impl* impl = impl_.get();
  if (!impl->stopped) {
    impl->stopped = true;
    if (!impl->started) {
      impl->close_all();  // no thread: nothing else touches the acceptor
    } else {
      // Close on the server thread, where the sockets live; then let run() return.
      asio::post(impl->io, [impl] {
        impl->close_all();
        impl->work.reset();
        impl->io.stop();
      });
    }
  }
  // From a handler (the server thread itself) there is nothing to wait for here: the
  // thread ends once that handler returns, and a later stop() or the destructor joins.
  if (impl->thread.joinable() && impl->thread.get_id() != std::this_thread::get_id()) impl->thread.join();
}

std::string OpsServer::bound() const { return impl_->address; }

}  // namespace gpufilter::daemon
