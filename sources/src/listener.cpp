// Listener: sockets -> framing -> RecordChannel, all on the one I/O thread (listener.hpp).
//
// A stream connection's life, which is most of this file:
//   accept -> admit: channel.open(id, name)
//   read: async_read_some into framer.prepare()          (the only place bytes come in)
//   on_read: framer.commit(n) / end_of_stream()
//   pump: hand_on (ready() -> channel.append -> consumed())
//         -> all taken: read again | the channel is full: park | the end: close
//   on_space: pump every parked connection again
//   close: channel.close(id)
// A parked connection has no read outstanding, so its socket buffers fill and its sender's
// TCP window closes: that is the backpressure. Nothing here blocks.
//
// Datagrams cannot wait: each is split into lines and handed on at once, or dropped and
// counted.
#include "gpufilter/sources/listener.hpp"

#include <fcntl.h>
#include <linux/sock_diag.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <list>
#include <string_view>
#include <unordered_map>
#include <utility>

#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>

#include "gpufilter/core/errors.hpp"
#include "gpufilter/sources/syslog_framer.hpp"

namespace gpufilter {

namespace asio = boost::asio;
using boost::system::error_code;
using tcp = asio::ip::tcp;
using udp = asio::ip::udp;
using unix_stream = asio::local::stream_protocol;
// TCP and unix connections differ only in how they are named, so both become one type.
using StreamSocket = asio::generic::stream_protocol::socket;

// ---------------------------------------------------------------------------------------
// URLs

ListenUrl parse_listen_url(const std::string& url) {
  const auto bad = [&](const std::string& why) { return ConfigError("--listen " + url + ": " + why); };
  ListenUrl parsed;
  parsed.text = url;
  const std::string_view text(url);

  if (text.starts_with("unix:")) {
    parsed.kind = ListenUrl::Kind::kUnix;
    parsed.path = std::string(text.substr(text.starts_with("unix://") ? 7 : 5));
    if (parsed.path.empty()) throw bad("no socket path (unix:PATH)");
    if (parsed.path.find('\0') != std::string::npos) throw bad("a NUL byte in the socket path");
    if (parsed.path.size() >= sizeof(sockaddr_un::sun_path)) {
      throw bad("the socket path is longer than " + std::to_string(sizeof(sockaddr_un::sun_path) - 1) + " bytes");
    }
    return parsed;
  }
  if (text.starts_with("tcp://")) parsed.kind = ListenUrl::Kind::kTcp;
  else if (text.starts_with("udp://")) parsed.kind = ListenUrl::Kind::kUdp;
  else throw bad("expected tcp://HOST:PORT, udp://HOST:PORT or unix:PATH");

  HostPort address = parse_host_port(text.substr(6), "--listen " + url);
  parsed.host = std::move(address.host);
  parsed.port = address.port;
  return parsed;
}

HostPort parse_host_port(std::string_view text, const std::string& context) {
  const auto bad = [&](const std::string& why) { return ConfigError(context + ": " + why); };
  HostPort parsed;
  std::string_view port;
  if (text.starts_with("[")) {
    const std::size_t close = text.find(']');
    if (close == std::string_view::npos) throw bad("no ']' after the IPv6 address");
    parsed.host = std::string(text.substr(1, close - 1));
    error_code ec;
    asio::ip::make_address_v6(parsed.host, ec);
    if (ec || parsed.host.empty()) throw bad("'" + parsed.host + "' is not an IPv6 address");
    if (close + 1 >= text.size() || text[close + 1] != ':') throw bad("no :PORT after the address (expected HOST:PORT)");
    port = text.substr(close + 2);
  } else {
    const std::size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) throw bad("no :PORT (expected HOST:PORT)");
    parsed.host = std::string(text.substr(0, colon));
    if (parsed.host.find(':') != std::string::npos) throw bad("an IPv6 address goes in brackets: [ADDRESS]:PORT");
    port = text.substr(colon + 1);
  }
  if (parsed.host.empty()) parsed.host = "127.0.0.1";
  for (const char c : parsed.host) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= ' ' || u == 0x7f || c == '/' || c == '?' || c == '#' || c == '@' || c == '[' || c == ']') {
      throw bad("'" + parsed.host + "' is not a host");
    }
  }
  if (port.empty()) throw bad("no port after ':'");
  unsigned long value = 0;
  for (const char c : port) {
    if (c < '0' || c > '9' || port.size() > 5) throw bad("the port must be a number from 0 to 65535");
    value = value * 10 + static_cast<unsigned long>(c - '0');
  }
  if (value > 65535) throw bad("the port must be a number from 0 to 65535");
  parsed.port = static_cast<std::uint16_t>(value);
  return parsed;
}

namespace {

// "tcp://127.0.0.1:40312", "udp://[::1]:514".
std::string endpoint_url(std::string_view scheme, const asio::ip::address& address, std::uint16_t port) {
  std::string host = address.to_string();
  if (address.is_v6()) host = "[" + host + "]";
  return std::string(scheme) + "://" + host + ":" + std::to_string(port);
}

std::string system_message(int error_number) { return std::strerror(error_number); }

// EMFILE (this process) or ENFILE (the system) from accept().
bool out_of_descriptors(const error_code& ec) {
  return ec == asio::error::no_descriptors ||
         (ec.category() == asio::error::get_system_category() && ec.value() == ENFILE);
}

}  // namespace

// ---------------------------------------------------------------------------------------
// State

namespace {

struct Connection {
  Connection(StreamSocket s, std::size_t max_line_bytes) : socket(std::move(s)), framer(max_line_bytes) {}
  StreamSocket socket;
  SyslogFramer framer;
  StreamId id = kNoStream;
  std::string name;
  std::uint64_t too_long_counted = 0;  // framer.lines_too_long() already in the counters
  bool reading = false;  // an async_read_some is outstanding
  bool parked = false;   // waits in parked_ for room in the channel
  bool ended = false;    // no more bytes will be read: close once handed on
  bool closed = false;
};
using ConnectionPtr = std::shared_ptr<Connection>;

struct TcpPort {
  using Acceptor = tcp::acceptor;
  explicit TcpPort(asio::io_context& io) : acceptor(io), retry(io), accepted(io) {}
  tcp::acceptor acceptor;
  asio::steady_timer retry;  // after a failed accept
  std::chrono::steady_clock::time_point failure_noticed_at{};
  std::string url;  // as bound
  // The accepted socket and the address accept() returned (see on_accept()). The
  // move-accept overload with an endpoint yields a socket of the wrong type in this Boost,
  // so the one outstanding accept fills these.
  tcp::socket accepted;
  tcp::endpoint peer;
};

struct UnixPort {
  using Acceptor = unix_stream::acceptor;
  explicit UnixPort(asio::io_context& io) : acceptor(io), retry(io), accepted(io) {}
  unix_stream::acceptor acceptor;
  asio::steady_timer retry;
  std::chrono::steady_clock::time_point failure_noticed_at{};
  std::string url;
  std::string path;
  unix_stream::socket accepted;
  unix_stream::endpoint peer;  // unused: unix clients are numbered
  std::uint64_t serial = 0;  // connections admitted so far: names "unix:PATH#N"
  dev_t dev = 0;             // the socket file we made, so that stop() removes only it
  ino_t ino = 0;
  bool made = false;
};

struct UdpPeer {
  StreamId id = kNoStream;
  std::uint64_t received = 0;  // bytes from this peer so far: the next datagram's offset
  std::uint64_t skipped = 0;   // over-long lines not yet reported with a line
  std::list<std::string>::iterator recent;
};

struct UdpPort {
  explicit UdpPort(asio::io_context& io) : socket(io) {}
  udp::socket socket;
  std::string url;
  std::unordered_map<std::string, UdpPeer> peers;  // by name
  std::list<std::string> recent;                   // peer names, most recent first
  std::uint32_t kernel_drops = 0;                  // the socket's drop count last seen
};

}  // namespace

struct Listener::Impl {
  Impl(asio::io_context& io_context, RecordChannel& record_channel, ListenConfig listen_config, Notices& n)
      : io(io_context), channel(record_channel), config(std::move(listen_config)), notices(n) {
    config.read_bytes = std::max<std::size_t>(config.read_bytes, 1);
    config.udp_peers = std::max<std::size_t>(config.udp_peers, 1);
  }
  ~Impl();

  asio::io_context& io;
  RecordChannel& channel;
  ListenConfig config;
  Notices& notices;

  // Handlers that run after the Listener is gone (an io_context run again later) find
  // this expired and touch nothing.
  std::shared_ptr<int> alive = std::make_shared<int>(0);

  std::vector<std::unique_ptr<TcpPort>> tcp_ports;
  std::vector<std::unique_ptr<UnixPort>> unix_ports;
  std::vector<std::unique_ptr<UdpPort>> udp_ports;
  asio::steady_timer drops_timer{io};  // reads the UDP sockets' drop counts
  std::vector<std::string> bound_urls;

  std::unordered_map<StreamId, ConnectionPtr> connections;  // open ones
  std::vector<ConnectionPtr> parked;
  std::vector<char> datagram = std::vector<char>(65536);  // the largest UDP payload fits
  std::string datagram_lines;                             // a datagram's lines, '\n'-ended

  bool stopping = false;
  std::atomic<bool> stopped{false};

  int spare[2] = {-1, -1};  // the reserve of descriptors (hold_spares()), with TCP or unix ports

  // Refused connections: a notice the first time, then at most one a second.
  std::uint64_t refused_unreported = 0;
  std::chrono::steady_clock::time_point refused_noticed_at{};
  bool refused_noticed = false;

  struct {
    std::atomic<std::uint64_t> connections{0};
    std::atomic<std::uint64_t> connections_refused{0};
    std::atomic<std::uint64_t> connections_lost{0};
    std::atomic<std::uint64_t> lines_too_long{0};
    std::atomic<std::uint64_t> datagrams{0};
    std::atomic<std::uint64_t> datagrams_dropped{0};
    std::atomic<std::uint64_t> datagrams_dropped_kernel{0};
  } counts;

  // Setup (start()).
  template <class Protocol>
  typename Protocol::endpoint resolve(const ListenUrl& url);
  void bind_tcp(const ListenUrl& url);
  void bind_unix(const ListenUrl& url);
  void bind_udp(const ListenUrl& url);
  void remove_unix_files() noexcept;
  void fit_descriptor_limit();

  // Stream connections.
  template <class Port>
  void accept(Port& port);
  template <class Port, class Socket>
  void on_accept(Port& port, Socket socket);
  template <class Port>
  void retry_accept(Port& port, const error_code& ec);
  template <class Port>
  bool shed(Port& port);
  template <class Port>
  void await_connection(Port& port);
  void hold_spares() noexcept;
  void release_spares() noexcept;
  void admit(StreamSocket socket, std::string name, const std::string& url);
  void refuse(StreamSocket socket, const std::string& name, const std::string& url);
  void count_refused(const std::string& url, std::uint64_t n, const std::string& name, const std::string& why);
  void read(const ConnectionPtr& c);
  void on_read(const ConnectionPtr& c, const error_code& ec, std::size_t n);
  void pump(const ConnectionPtr& c);
  bool hand_on(Connection& c);
  void close(const ConnectionPtr& c);
  template <class F>
  void guarded(const ConnectionPtr& c, F&& f) noexcept;

  // Datagrams.
  void wait_udp(UdpPort& port);
  void drain_udp(UdpPort& port);
  void deliver(UdpPort& port, const udp::endpoint& from, std::string_view data);
  UdpPeer& udp_peer(UdpPort& port, const std::string& name);
  void kernel_drops(UdpPort& port, std::uint32_t total) noexcept;
  void read_kernel_drops(UdpPort& port) noexcept;
  void watch_kernel_drops();

  void start();
  void stop();
  void on_space();
  void check_stopped() noexcept {
    if (stopping && connections.empty()) stopped.store(true);
  }
  void notice(const std::string& message) noexcept {
    try {
      notices.notice(message);
    } catch (...) {
      // A notice that cannot be written must not take the I/O thread down.
    }
  }
};

// ---------------------------------------------------------------------------------------
// Setup

template <class Protocol>
typename Protocol::endpoint Listener::Impl::resolve(const ListenUrl& url) {
  error_code ec;
  const asio::ip::address address = asio::ip::make_address(url.host, ec);
  if (!ec) return typename Protocol::endpoint(address, url.port);
  // A name ("localhost"): its first address. One URL is one socket, so that bound()
  // and port 0 stay simple; name each address in its own URL to listen on several.
  typename Protocol::resolver resolver(io);
  const auto results =
      resolver.resolve(url.host, std::to_string(url.port),
                       Protocol::resolver::passive | Protocol::resolver::numeric_service, ec);
  if (ec || results.empty()) {
    throw ConfigError("--listen " + url.text + ": cannot resolve '" + url.host +
                      "': " + (ec ? ec.message() : std::string("no address")));
  }
  return results.begin()->endpoint();
}

void Listener::Impl::bind_tcp(const ListenUrl& url) {
  const tcp::endpoint endpoint = resolve<tcp>(url);
  auto port = std::make_unique<TcpPort>(io);
  error_code ec;
  port->acceptor.open(endpoint.protocol(), ec);
  // Restarting while old connections linger in TIME_WAIT must work; two listeners on
  // one port still fail (Linux refuses SO_REUSEADDR for a port that is listened on).
  if (!ec) port->acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) port->acceptor.bind(endpoint, ec);
  if (!ec) port->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw SourceError(url.text, ec.value());
  const tcp::endpoint local = port->acceptor.local_endpoint();
  port->url = endpoint_url("tcp", local.address(), local.port());
  bound_urls.push_back(port->url);
  tcp_ports.push_back(std::move(port));
}

void Listener::Impl::bind_unix(const ListenUrl& url) {
  auto port = std::make_unique<UnixPort>(io);
  port->path = url.path;
  port->url = "unix:" + url.path;
  struct stat st {};
  if (::lstat(url.path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) throw SourceError(url.text, EEXIST);
    // A socket file outlives a listener that crashed. Remove it only when nobody
    // answers on it: a second gpufilter must not steal a live one's address.
    const int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (probe < 0) throw SourceError(url.text, errno);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path, url.path.data(), url.path.size());
    const int r = ::connect(probe, reinterpret_cast<const sockaddr*>(&address), sizeof address);
    const int error = r == 0 ? 0 : errno;
    ::close(probe);
    // EAGAIN: a listener whose backlog is full, alive all the same.
    if (r == 0 || error == EAGAIN || error == EINPROGRESS) throw SourceError(url.text, EADDRINUSE);
    if (error != ECONNREFUSED) throw SourceError(url.text, error);
    if (::unlink(url.path.c_str()) != 0 && errno != ENOENT) throw SourceError(url.text, errno);
  }
  error_code ec;
  port->acceptor.open(unix_stream(), ec);
  if (!ec) port->acceptor.bind(unix_stream::endpoint(url.path), ec);
  if (ec) throw SourceError(url.text, ec.value());
  if (::lstat(url.path.c_str(), &st) == 0) {
    port->dev = st.st_dev;
    port->ino = st.st_ino;
    port->made = true;
  }
  // Kept from here on even if listen() fails, so that stop() or the destructor removes
  // the file it made.
  UnixPort& bound = *port;
  unix_ports.push_back(std::move(port));
  bound.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw SourceError(url.text, ec.value());
  bound_urls.push_back(bound.url);
}

void Listener::Impl::bind_udp(const ListenUrl& url) {
  const udp::endpoint endpoint = resolve<udp>(url);
  auto port = std::make_unique<UdpPort>(io);
  error_code ec;
  // No SO_REUSEADDR: for UDP it would let two listeners share the port silently.
  port->socket.open(endpoint.protocol(), ec);
  if (!ec) {
    // Each datagram then carries the socket's count of datagrams the kernel dropped.
    const int one = 1;
    ::setsockopt(port->socket.native_handle(), SOL_SOCKET, SO_RXQ_OVFL, &one, sizeof one);
    port->socket.bind(endpoint, ec);
  }
  if (ec) throw SourceError(url.text, ec.value());
  const udp::endpoint local = port->socket.local_endpoint();
  port->url = endpoint_url("udp", local.address(), local.port());
  bound_urls.push_back(port->url);
  udp_ports.push_back(std::move(port));
}

// Each open connection is a descriptor. With the soft open-file limit below
// max_connections, descriptors would run out first, and connections that max_connections
// allows would be refused for want of one (shed()). So the soft limit is raised, up to the
// hard limit, to max_connections plus a reserve for everything else (files, pipes, the
// OpenCL driver's, UDP sockets); a notice says when the hard limit is lower. Asio uses
// epoll, so descriptors past FD_SETSIZE are no problem here.
void Listener::Impl::fit_descriptor_limit() {
  constexpr rlim_t kReserve = 128;
  const bool streams = std::any_of(config.urls.begin(), config.urls.end(),
                                   [](const ListenUrl& u) { return u.kind != ListenUrl::Kind::kUdp; });
  rlimit limit{};
  if (!streams || ::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return;
  const rlim_t allowed = static_cast<rlim_t>(std::min<std::size_t>(config.max_connections, 1u << 30));
  const rlim_t wanted = allowed + kReserve;
  if (limit.rlim_cur >= wanted) return;
  rlimit raised = limit;
  raised.rlim_cur = limit.rlim_max == RLIM_INFINITY ? wanted : std::min(wanted, limit.rlim_max);
  if (raised.rlim_cur > limit.rlim_cur && ::setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  if (limit.rlim_cur < wanted) {
    notice("open files are limited to " + std::to_string(limit.rlim_cur) + " (ulimit -n), fewer than " +
           std::to_string(allowed) + " connections and " + std::to_string(kReserve) +
           " for the rest: connections past the limit are refused");
  }
}

void Listener::Impl::start() {
  fit_descriptor_limit();
  for (const ListenUrl& url : config.urls) {
    switch (url.kind) {
      case ListenUrl::Kind::kTcp: bind_tcp(url); break;
      case ListenUrl::Kind::kUnix: bind_unix(url); break;
      case ListenUrl::Kind::kUdp: bind_udp(url); break;
    }
  }
  // Everything is bound before anything is accepted: a bad URL leaves nothing running.
  if (!tcp_ports.empty() || !unix_ports.empty()) hold_spares();
  for (auto& port : tcp_ports) accept(*port);
  for (auto& port : unix_ports) accept(*port);
  for (auto& port : udp_ports) wait_udp(*port);
  if (!udp_ports.empty()) watch_kernel_drops();
}

void Listener::Impl::remove_unix_files() noexcept {
  for (auto& port : unix_ports) {
    if (!port->made) continue;
    port->made = false;
    struct stat st {};
    // Only our own socket: another listener may have taken the path since.
    if (::lstat(port->path.c_str(), &st) == 0 && st.st_dev == port->dev && st.st_ino == port->ino) {
      ::unlink(port->path.c_str());
    }
  }
}

Listener::Impl::~Impl() {
  alive.reset();
  error_code ignored;
  for (auto& port : tcp_ports) port->acceptor.close(ignored);
  for (auto& port : unix_ports) port->acceptor.close(ignored);
  for (auto& port : udp_ports) port->socket.close(ignored);
  for (auto& [id, c] : connections) c->socket.close(ignored);
  remove_unix_files();
  release_spares();
}

// ---------------------------------------------------------------------------------------
// Stream connections: accept

template <class Port>
void Listener::Impl::accept(Port& port) {
  auto on_accepted = [this, token = std::weak_ptr<int>(alive), &port](const error_code& ec) {
    if (token.expired()) return;
    if (stopping) {
      error_code ignored;
      port.accepted.close(ignored);
      return;
    }
    if (ec) {
      if (out_of_descriptors(ec) && shed(port)) await_connection(port);
      else retry_accept(port, ec);
      return;
    }
    try {
      on_accept(port, std::move(port.accepted));
    } catch (const std::exception& e) {
      counts.connections_lost.fetch_add(1);
      notice(port.url + ": " + e.what() + "; a connection was closed unread");  // the others go on
    }
    accept(port);
  };
  port.acceptor.async_accept(port.accepted, port.peer, std::move(on_accepted));
}

// A connection is named, then admitted as an input or refused over max_connections.
// A TCP client is named by the address accept() returned, not by remote_endpoint(): a
// connection reset while it waited in the backlog fails getpeername() (ENOTCONN), yet the
// bytes it sent are still in its socket, to be read before the reset is seen. Without an
// address at all it is still read, as "tcp://?".
template <class Port, class Socket>
void Listener::Impl::on_accept(Port& port, Socket socket) {
  std::string name;
  if constexpr (std::is_same_v<Port, TcpPort>) {
    const bool named = port.peer.port() != 0 && !port.peer.address().is_unspecified();
    name = named ? endpoint_url("tcp", port.peer.address(), port.peer.port()) : "tcp://?";
    port.peer = tcp::endpoint();
  } else {
    name = port.url + "#" + std::to_string(port.serial + 1);
  }
  if (connections.size() >= config.max_connections) {
    refuse(StreamSocket(std::move(socket)), name, port.url);
    return;
  }
  if constexpr (std::is_same_v<Port, UnixPort>) ++port.serial;
  admit(StreamSocket(std::move(socket)), std::move(name), port.url);
}

// accept() failed for want of a descriptor (EMFILE, ENFILE). The connections waiting in
// the backlog are refused, as over max_connections, rather than left waiting (each client
// would hang until its own timeout): the two reserve descriptors are given up for the
// moment, each waiting connection is accepted and closed at once, and the reserve is taken
// again. The connections already open are not touched. True when the backlog was emptied:
// then await_connection() waits for the next one. False when there is no reserve (it could
// not be taken back last time) or something else took the descriptors it freed: then
// retry_accept() backs off.
template <class Port>
bool Listener::Impl::shed(Port& port) {
  if (spare[0] < 0) return false;
  release_spares();
  error_code ignored;
  port.acceptor.native_non_blocking(true, ignored);  // the loop below must not block
  std::uint64_t refused = 0;
  bool emptied = false;
  for (;;) {
    const int fd = ::accept4(port.acceptor.native_handle(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      emptied = errno == EAGAIN || errno == EWOULDBLOCK;
      break;
    }
    ::close(fd);
    ++refused;
  }
  hold_spares();
  if (refused > 0) {
    rlimit limit{};
    const std::string open_files =
        ::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY
            ? " (open files are limited to " + std::to_string(limit.rlim_cur) + ", ulimit -n)"
            : std::string();
    count_refused(port.url, refused, {}, "no file descriptor left" + open_files);
  }
  return emptied;
}

// After shed(): with every descriptor taken, accept() fails with EMFILE even when nobody
// waits, so the next try waits until a connection does. The backlog was emptied in this
// handler on the one I/O thread, so the next connection raises a readiness edge that the
// wait sees (the argument of read()). By then a connection may have closed: the accept
// admits the newcomer, or sheds it.
template <class Port>
void Listener::Impl::await_connection(Port& port) {
  port.acceptor.async_wait(Port::Acceptor::wait_read,
                           [this, token = std::weak_ptr<int>(alive), &port](const error_code& ec) {
                             if (token.expired() || stopping || ec == asio::error::operation_aborted) return;
                             if (ec) retry_accept(port, ec);
                             else accept(port);
                           });
}

// The reserve: two descriptors of /dev/null, so that running out of descriptors never
// leaves the I/O thread without one to accept (and refuse) a connection with, nor
// anything else that needs one meanwhile (a pipe() takes two).
void Listener::Impl::hold_spares() noexcept {
  for (int& fd : spare) {
    if (fd < 0) fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  }
  if (spare[0] < 0 || spare[1] < 0) release_spares();  // all or nothing
}

void Listener::Impl::release_spares() noexcept {
  for (int& fd : spare) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
}

// With no reserve to shed connections with, EMFILE and ENFILE last until connections
// close: accepting again at once would spin.
template <class Port>
void Listener::Impl::retry_accept(Port& port, const error_code& ec) {
  if (ec == asio::error::operation_aborted) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - port.failure_noticed_at >= std::chrono::seconds(1)) {
    notice(port.url + ": accepting a connection failed: " + ec.message());
    port.failure_noticed_at = now;
  }
  port.retry.expires_after(std::chrono::milliseconds(100));
  port.retry.async_wait([this, token = std::weak_ptr<int>(alive), &port](const error_code& timer_ec) {
    if (token.expired() || timer_ec || stopping) return;
    accept(port);
  });
}

// Counted and noticed before the close, so that whoever sees the close sees them too.
void Listener::Impl::refuse(StreamSocket socket, const std::string& name, const std::string& url) {
  count_refused(url, 1, name, std::to_string(config.max_connections) + " connections open (the maximum)");
  error_code ignored;
  socket.close(ignored);
}

// Refused connections: a notice the first time (naming the client when there is one),
// then at most one a second with the number since the last.
void Listener::Impl::count_refused(const std::string& url, std::uint64_t n, const std::string& name,
                                   const std::string& why) {
  counts.connections_refused.fetch_add(n);
  refused_unreported += n;
  const auto now = std::chrono::steady_clock::now();
  if (!refused_noticed || now - refused_noticed_at >= std::chrono::seconds(1)) {
    if (!refused_noticed && refused_unreported == 1 && !name.empty()) {
      notice(url + ": connection from " + name + " refused: " + why);
    } else {
      notice(url + ": " + std::to_string(refused_unreported) + (refused_noticed ? " more" : "") +
             " connections refused: " + why);
    }
    refused_noticed = true;
    refused_noticed_at = now;
    refused_unreported = 0;
  }
}

void Listener::Impl::admit(StreamSocket socket, std::string name, const std::string& url) {
  auto c = std::make_shared<Connection>(std::move(socket), config.max_line_bytes);
  c->id = channel.new_stream_id();
  c->name = std::move(name);
  try {
    channel.open(c->id, c->name);
  } catch (const std::exception& e) {
    counts.connections_lost.fetch_add(1);
    notice(url + ": " + c->name + ": " + e.what() + "; connection closed unread");
    return;
  }
  counts.connections.fetch_add(1);
  connections.emplace(c->id, c);
  guarded(c, [&] { read(c); });
}

// ---------------------------------------------------------------------------------------
// Stream connections: the read loop

// Reads again, or waits for bytes. A connection with nothing waiting in its socket gives
// back its read buffer and waits for readability with none (async_wait): an idle
// connection, or one trickling a byte now and then, costs its partial line and the
// Connection, not a 64 KiB read each (10,000 silent clients would hold 640 MiB). A read is
// sized by what the socket holds, up to read_bytes; the framer keeps whatever follows the
// last whole line, so no byte is lost between reads.
//
// The wait is safe with Asio's edge-triggered epoll because the peek that saw the socket
// empty and the async_wait run in one handler on the one I/O thread: bytes that arrive
// after the peek raise a readiness edge that the next epoll_wait reports to the wait.
void Listener::Impl::read(const ConnectionPtr& c) {
  c->reading = true;
  const int fd = c->socket.native_handle();
  int waiting = 0;
  if (::ioctl(fd, FIONREAD, &waiting) != 0 || waiting <= 0) {
    waiting = 0;
    // Nothing to read: the socket is empty, or at its end, or failed. The peek takes a
    // pending error (a reset) from the socket, so it is reported here and not left for a
    // read that would then see only the end.
    char probe = 0;
    const ssize_t got = ::recv(fd, &probe, 1, MSG_PEEK | MSG_DONTWAIT);
    const int error = got < 0 ? errno : 0;
    if (got < 0 && (error == EAGAIN || error == EWOULDBLOCK)) {
      c->framer.release();
      c->socket.async_wait(StreamSocket::wait_read,
                           [this, token = std::weak_ptr<int>(alive), c](const error_code& ec) {
                             if (token.expired() || c->closed) return;
                             c->reading = false;
                             guarded(c, [&] {
                               if (ec) on_read(c, ec, 0);
                               else read(c);
                             });
                           });
      return;
    }
    if (got == 0 || (got < 0 && error != EINTR)) {
      c->reading = false;
      on_read(c, got == 0 ? error_code(asio::error::eof) : error_code(error, asio::error::get_system_category()), 0);
      return;
    }
    // A byte after all (it came after FIONREAD), or EINTR: read as usual.
  }
  const std::size_t want = std::clamp<std::size_t>(static_cast<std::size_t>(waiting), 1, config.read_bytes);
  const std::span<char> room = c->framer.prepare(want);
  c->socket.async_read_some(asio::buffer(room.data(), room.size()),
                            [this, token = std::weak_ptr<int>(alive), c](const error_code& ec, std::size_t n) {
                              if (token.expired() || c->closed) return;
                              c->reading = false;
                              guarded(c, [&] { on_read(c, ec, n); });
                            });
}

void Listener::Impl::on_read(const ConnectionPtr& c, const error_code& ec, std::size_t n) {
  if (n > 0) c->framer.commit(n);
  if (ec == asio::error::eof) {
    c->framer.end_of_stream();  // the unterminated last line is a line
    c->ended = true;
  } else if (ec && ec != asio::error::operation_aborted) {
    // A reset: the lines that are whole go on; a partial one may be cut anywhere.
    notice(c->name + ": " + ec.message() + "; connection closed");
    c->ended = true;
  }
  // operation_aborted: stop() cancelled the read, and pump() ends the stream.
  pump(c);
}

// Hands on what the framer holds, then reads again, parks, or closes.
void Listener::Impl::pump(const ConnectionPtr& c) {
  if (stopping && !c->ended) {
    c->framer.end_of_stream();
    c->ended = true;
  }
  const bool all_taken = hand_on(*c);
  const std::uint64_t too_long = c->framer.lines_too_long();
  counts.lines_too_long.fetch_add(too_long - c->too_long_counted);
  c->too_long_counted = too_long;
  if (!all_taken) {
    // The channel is full. No read is issued: the kernel's buffers fill and the sender
    // waits. on_space() calls pump() again.
    c->parked = true;
    parked.push_back(c);
    return;
  }
  if (c->framer.failed()) {
    notice(c->name + ": " + c->framer.error() + "; connection closed");
    close(c);
  } else if (c->ended) {
    close(c);
  } else {
    read(c);
  }
}

// False when the channel took less than it was given.
bool Listener::Impl::hand_on(Connection& c) {
  for (;;) {
    const SyslogFramer::Ready r = c.framer.ready();
    if (r.lines.empty()) return true;
    const std::size_t taken = channel.append(c.id, r.offset, r.lines, r.skipped);
    c.framer.consumed(taken);
    if (taken < r.lines.size()) return false;
  }
}

void Listener::Impl::close(const ConnectionPtr& c) {
  if (c->closed) return;
  c->closed = true;
  error_code ignored;
  c->socket.close(ignored);
  connections.erase(c->id);
  channel.close(c->id);
  check_stopped();  // after the close is in the channel: stopped() means all is handed on
}

// No exception leaves an Asio handler: it would unwind io.run() on the I/O thread and
// take every other connection with it. The connection that failed is closed instead.
template <class F>
void Listener::Impl::guarded(const ConnectionPtr& c, F&& f) noexcept {
  try {
    f();
    return;
  } catch (const std::exception& e) {
    notice(c->name + ": " + e.what() + "; connection closed");
  } catch (...) {
    notice(c->name + ": unknown error; connection closed");
  }
  try {
    close(c);
  } catch (...) {
    // channel.close() can only fail for memory; the connection is gone either way.
    check_stopped();
  }
}

void Listener::Impl::on_space() {
  std::vector<ConnectionPtr> waiting;
  waiting.swap(parked);
  for (const ConnectionPtr& c : waiting) {
    c->parked = false;
    if (!c->closed) guarded(c, [&] { pump(c); });
  }
}

// ---------------------------------------------------------------------------------------
// Datagrams

void Listener::Impl::wait_udp(UdpPort& port) {
  port.socket.async_wait(udp::socket::wait_read, [this, token = std::weak_ptr<int>(alive), &port](const error_code& ec) {
    if (token.expired() || stopping || ec == asio::error::operation_aborted) return;
    if (ec) {
      notice(port.url + ": " + ec.message() + "; no longer listening");
      return;
    }
    try {
      drain_udp(port);
    } catch (const std::exception& e) {
      notice(port.url + ": " + e.what());
    }
    wait_udp(port);
  });
}

// Native recvmsg rather than async_receive_from: only it returns the ancillary data that
// carries the kernel's drop count (SO_RXQ_OVFL).
void Listener::Impl::drain_udp(UdpPort& port) {
  const int fd = port.socket.native_handle();
  // A bounded turn, so that a flood on one socket does not starve the connections.
  for (int turn = 0; turn < 256; ++turn) {
    sockaddr_storage from{};
    iovec iov{datagram.data(), datagram.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(std::uint32_t))];
    msghdr msg{};
    msg.msg_name = &from;
    msg.msg_namelen = sizeof from;
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = ::recvmsg(fd, &msg, MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        notice(port.url + ": " + system_message(errno));
        return;
      }
      // Empty: the drops counted since the last datagram would otherwise wait for the
      // next one to carry them.
      read_kernel_drops(port);
      return;
    }
    for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm != nullptr; cm = CMSG_NXTHDR(&msg, cm)) {
      if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SO_RXQ_OVFL) {
        std::uint32_t total = 0;
        std::memcpy(&total, CMSG_DATA(cm), sizeof total);
        kernel_drops(port, total);
      }
    }
    counts.datagrams.fetch_add(1);
    udp::endpoint peer;
    const std::size_t from_size = std::min<std::size_t>(msg.msg_namelen, peer.capacity());
    std::memcpy(peer.data(), &from, from_size);
    peer.resize(from_size);
    deliver(port, peer, std::string_view(datagram.data(), static_cast<std::size_t>(n)));
  }
}

// The socket's drop count now, without a datagram to carry it.
void Listener::Impl::read_kernel_drops(UdpPort& port) noexcept {
  std::uint32_t meminfo[SK_MEMINFO_VARS] = {};
  socklen_t length = sizeof meminfo;
  if (::getsockopt(port.socket.native_handle(), SOL_SOCKET, SO_MEMINFO, meminfo, &length) == 0 &&
      length > SK_MEMINFO_DROPS * sizeof(std::uint32_t)) {
    kernel_drops(port, meminfo[SK_MEMINFO_DROPS]);
  }
}

// Datagrams carry the count, and drain_udp() reads it when the queue runs dry; but drops
// after the last datagram read (UDP gives back receive memory lazily, so they happen with
// the queue empty too) would wait for a datagram that may never come. So the count is
// also read on a timer, and once more at stop(): the counters settle on their own.
void Listener::Impl::watch_kernel_drops() {
  drops_timer.expires_after(std::chrono::milliseconds(100));
  drops_timer.async_wait([this, token = std::weak_ptr<int>(alive)](const error_code& ec) {
    if (token.expired() || ec || stopping) return;
    for (auto& port : udp_ports) read_kernel_drops(*port);
    watch_kernel_drops();
  });
}

// The kernel's count is cumulative per socket; a datagram may carry an older value than
// SO_MEMINFO gave, so it only ever moves forward.
void Listener::Impl::kernel_drops(UdpPort& port, std::uint32_t total) noexcept {
  const std::uint32_t delta = total - port.kernel_drops;
  if (delta == 0 || delta > (1u << 31)) return;
  port.kernel_drops = total;
  counts.datagrams_dropped_kernel.fetch_add(delta);
}

UdpPeer& Listener::Impl::udp_peer(UdpPort& port, const std::string& name) {
  auto it = port.peers.find(name);
  if (it != port.peers.end()) {
    port.recent.splice(port.recent.begin(), port.recent, it->second.recent);
    return it->second;
  }
  if (port.peers.size() >= config.udp_peers) {
    // The least recent peer's input ends; if it sends again it is a new input.
    const auto oldest = port.peers.find(port.recent.back());
    channel.close(oldest->second.id);
    port.peers.erase(oldest);
    port.recent.pop_back();
  }
  UdpPeer peer;
  peer.id = channel.new_stream_id();
  channel.open(peer.id, name);
  port.recent.push_front(name);
  peer.recent = port.recent.begin();
  return port.peers.emplace(name, peer).first->second;
}

// One datagram: one or more lines; a last piece without '\n' is a line of its own. What
// the channel cannot take is dropped: a datagram cannot be asked to wait.
void Listener::Impl::deliver(UdpPort& port, const udp::endpoint& from, std::string_view data) {
  UdpPeer& peer = udp_peer(port, endpoint_url("udp", from.address(), from.port()));
  const std::uint64_t at = peer.received;
  peer.received += data.size();

  // Runs of lines that lie together in the datagram go on in one append; an over-long
  // line between two runs is dropped and reported with the run after it.
  std::string& run = datagram_lines;
  run.clear();
  std::uint64_t run_offset = at;
  const auto flush = [&] {
    if (run.empty()) return true;
    const std::size_t taken = channel.append(peer.id, run_offset, run, peer.skipped);
    if (taken > 0) peer.skipped = 0;
    const bool all = taken == run.size();
    run.clear();
    return all;
  };
  bool whole = true;
  for (std::size_t pos = 0; pos < data.size() && whole;) {
    const std::size_t nl = data.find('\n', pos);
    const std::size_t end = nl == std::string_view::npos ? data.size() : nl;
    if (end - pos > config.max_line_bytes) {
      whole = flush();
      counts.lines_too_long.fetch_add(1);
      ++peer.skipped;
    } else {
      if (run.empty()) run_offset = at + pos;
      run.append(data.substr(pos, end - pos));
      run += '\n';
    }
    pos = end + 1;
  }
  if (whole) whole = flush();
  if (!whole) counts.datagrams_dropped.fetch_add(1);
}

// ---------------------------------------------------------------------------------------
// Stopping

void Listener::Impl::stop() {
  if (stopping) return;
  stopping = true;
  error_code ignored;
  release_spares();
  for (auto& port : tcp_ports) {
    port->acceptor.close(ignored);
    port->retry.cancel();
  }
  for (auto& port : unix_ports) {
    port->acceptor.close(ignored);
    port->retry.cancel();
  }
  remove_unix_files();
  drops_timer.cancel();
  for (auto& port : udp_ports) {
    read_kernel_drops(*port);
    port->socket.close(ignored);
    for (const auto& [name, peer] : port->peers) channel.close(peer.id);
    port->peers.clear();
    port->recent.clear();
  }
  std::vector<ConnectionPtr> open;
  for (const auto& [id, c] : connections) open.push_back(c);
  for (const ConnectionPtr& c : open) {
    if (c->reading) {
      c->socket.cancel(ignored);  // its handler sees operation_aborted and ends it
    } else if (c->parked) {
      // It finishes when on_space() lets it hand on the rest.
      guarded(c, [&] {
        c->framer.end_of_stream();
        c->ended = true;
      });
    }
  }
  check_stopped();
}

// ---------------------------------------------------------------------------------------
// Listener

Listener::Listener(boost::asio::io_context& io, RecordChannel& channel, ListenConfig config, Notices& notices)
    : impl_(std::make_unique<Impl>(io, channel, std::move(config), notices)) {}

Listener::~Listener() = default;

void Listener::start() { impl_->start(); }

std::vector<std::string> Listener::bound() const { return impl_->bound_urls; }

void Listener::stop() { impl_->stop(); }

bool Listener::stopped() const { return impl_->stopped.load(); }

void Listener::on_space() { impl_->on_space(); }

Listener::Counters Listener::counters() const {
  Counters c;
  c.connections = impl_->counts.connections.load();
  c.connections_refused = impl_->counts.connections_refused.load();
  c.connections_lost = impl_->counts.connections_lost.load();
  c.lines_too_long = impl_->counts.lines_too_long.load();
  c.datagrams = impl_->counts.datagrams.load();
  c.datagrams_dropped = impl_->counts.datagrams_dropped.load();
  c.datagrams_dropped_kernel = impl_->counts.datagrams_dropped_kernel.load();
  return c;
}

}  // namespace gpufilter
