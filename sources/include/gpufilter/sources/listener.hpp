// Listener: line streams from sockets, through Boost.Asio on the I/O thread.
//   tcp://HOST:PORT   unix:PATH   stream sockets; each connection is its own input,
//                     newline-delimited lines or RFC 6587 octet-counted syslog frames,
//                     detected per connection (syslog_framer.hpp)
//   udp://HOST:PORT   one or more lines per datagram; each peer is its own input
// Nothing listens beyond this machine unless the URL says so: a URL without a host
// ("tcp://:5140") listens on loopback (127.0.0.1); every address only when written
// (0.0.0.0, [::]). Port 0 takes a free port (bound() tells which).
//
// Idle connections hold no read buffer (they wait for readability with none), so a
// silent client costs its socket and about 1 KiB; max_connections bounds how many are
// open, and start() raises the open-file limit to fit it where it can.
//
// Backpressure: a connection whose lines the channel cannot take is not read again until
// it can (its sender's TCP window closes). UDP cannot push back: a datagram that finds no
// room is dropped and counted, and so are the kernel's drops (SO_RXQ_OVFL).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "gpufilter/core/record_channel.hpp"
#include "gpufilter/core/notices.hpp"

namespace gpufilter {

struct ListenUrl {
  enum class Kind { kTcp, kUdp, kUnix };
  Kind kind = Kind::kTcp;
  std::string host;  // tcp/udp: a literal IPv4/IPv6 address or a name ("localhost"); "127.0.0.1" when none was given
  std::uint16_t port = 0;
  std::string path;  // unix
  std::string text;  // as given
};
// Throws ConfigError("--listen URL: why") for anything else (a missing port, an IPv6
// address without brackets, a port over 65535...).
ListenUrl parse_listen_url(const std::string& url);

// "HOST:PORT", "[IPv6]:PORT", "name:PORT" or ":PORT", the address part of a tcp:// or udp://
// URL and of gpufilterd's `server`. No host is loopback (127.0.0.1): listening on every
// address must be said (0.0.0.0, [::]), never implied. Throws ConfigError("CONTEXT: why").
struct HostPort {
  std::string host;
  std::uint16_t port = 0;
};
HostPort parse_host_port(std::string_view text, const std::string& context);

struct ListenConfig {
  std::vector<ListenUrl> urls;
  std::size_t max_line_bytes = 1u << 20;
  std::size_t max_connections = 1024;  // open TCP + unix connections; more are closed at once
  std::size_t read_bytes = 64u << 10;  // one read of a connection
  std::size_t udp_peers = 1024;        // UDP peers with an open input; the least recent is closed
};

class Listener {
 public:
  Listener(boost::asio::io_context& io, RecordChannel& channel, ListenConfig config, Notices& notices);
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  // Binds and listens on every URL; throws SourceError naming the URL when one cannot be
  // bound (in use, no permission, a unix path that exists and is not a stale socket).
  // With TCP or unix URLs it first raises the soft open-file limit (RLIMIT_NOFILE) to
  // max_connections + 128 where the hard limit allows; a notice says when it cannot.
  void start();
  // The bound addresses, as URLs with their actual ports ("tcp://127.0.0.1:40312").
  std::vector<std::string> bound() const;
  // On the I/O thread: stops accepting and reading. Every open input is closed; a
  // connection's unterminated last line is handed on first (it was received).
  void stop();
  // True once stop() was called and every stream is closed, with everything it had to
  // hand on handed on (a stream still waiting for room stays open until on_space()).
  bool stopped() const;
  // On the I/O thread: the channel has room again; resume connections that were waiting.
  void on_space();

  struct Counters {
    std::uint64_t connections = 0;          // accepted and read (refused ones not counted)
    std::uint64_t connections_refused = 0;  // over max_connections
    // Accepted but closed before anything was read: no input could be opened for it, or
    // it failed while being named. Its bytes are lost, so they are counted here.
    std::uint64_t connections_lost = 0;
    std::uint64_t lines_too_long = 0;       // lines and frames over max_line_bytes, dropped
    std::uint64_t datagrams = 0;
    std::uint64_t datagrams_dropped = 0;    // no room in the channel
    std::uint64_t datagrams_dropped_kernel = 0;  // the socket's receive buffer overflowed
  };
  Counters counters() const;  // thread-safe

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpufilter
