// The three AlertOutputs (JSON lines, Alertmanager, webhook) on one delivery machinery:
// a bounded queue that drops its oldest alert when full, a delivery thread per output
// that retries a failed delivery with exponential backoff, and drain() for shutdown.
// HTTP is Boost.Beast over TCP (TLS through OpenSSL for https://), driven asynchronously on the delivery thread's own
// io_context so that every wait ends at the request's timeout or at the drain/stop
// deadline, whichever comes first. docs/ALERTS.md documents what goes on the wire.
#include "gpufilter/daemon/outputs.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "gpufilter/core/errors.hpp"

namespace gpufilter::daemon {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using Steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr std::size_t kAlertmanagerBatch = 64;       // alerts per POST /api/v2/alerts
constexpr std::size_t kAnnotationLineBytes = 1024;   // the "line" annotation's limit
constexpr std::uint64_t kResponseBodyLimit = 1 << 20;  // we never need the body; bound it
constexpr std::size_t kResponseBufferLimit = 2 << 20;

// t + d, saturating at time_point::max() (a configured "forever" must not wrap around).
Steady::time_point later(Steady::time_point t, milliseconds d) {
  if (d <= milliseconds(0)) return t;
  if (std::chrono::duration_cast<milliseconds>(Steady::time_point::max() - t) <= d) return Steady::time_point::max();
  return t + d;
}

// ---------------------------------------------------------------------------------------
// The queue and the delivery thread, shared by the three kinds

enum class Outcome {
  kDelivered,  // done with these alerts
  kRetry,      // try the same alerts again after the backoff
  kRejected,   // the receiver refused them for good (4xx): count a failure, drop them
};

class QueuedOutput : public AlertOutput {
 public:
  QueuedOutput(std::string name, QueueConfig config) : name_(std::move(name)), config_(config) {
    // A queue of nothing could never deliver, and a zero backoff would spin on a dead peer.
    config_.capacity = std::max<std::size_t>(config_.capacity, 1);
    config_.initial_backoff = std::max(config_.initial_backoff, milliseconds(1));
    config_.max_backoff = std::max(config_.max_backoff, config_.initial_backoff);
  }
  // Subclasses call stop() in their own destructor, while their members still exist.
  ~QueuedOutput() override { stop(); }
  QueuedOutput(const QueuedOutput&) = delete;
  QueuedOutput& operator=(const QueuedOutput&) = delete;

  const std::string& name() const override { return name_; }

  // Wakes the delivery thread only where it waits with nothing queued: while it delivers,
  // or lets alerts gather (kGather), it sees what is queued without being told.
  void publish(const Alert& alert) noexcept override {
    bool wake = false;
    try {
      Alert copy = alert;  // allocate outside the lock: the scan thread holds it briefly
      {
        std::lock_guard lock(mutex_);
        accepted(copy);
        while (queue_.size() >= config_.capacity) {
          queue_.pop_front();
          // The first (in_flight_ - displaced_) alerts are on the wire now: one of them is
          // counted once its attempt ends (delivered if it succeeds, dropped if not).
          if (displaced_ < in_flight_) {
            ++displaced_;
          } else {
            ++stats_.dropped;
          }
        }
        queue_.push_back(std::move(copy));
        ++stats_.published;
        wake = idle_;
        idle_ = false;
      }
      if (wake) cv_.notify_one();
    } catch (...) {
      std::lock_guard lock(mutex_);
      ++stats_.published;
      ++stats_.dropped;  // no memory for the copy: the alert is lost, and counted
    }
  }

  void adopt(const Alert& alert) noexcept override {
    try {
      std::lock_guard lock(mutex_);
      accepted(alert);
    } catch (...) {
      // No memory to keep it: it is not re-sent; Alertmanager resolves it by itself.
    }
    cv_.notify_one();
  }

  bool drain(milliseconds timeout) noexcept override {
    std::lock_guard join(join_mutex_);
    if (thread_.joinable()) {
      {
        std::lock_guard lock(mutex_);
        draining_ = true;
        lower_abort(later(Steady::now(), timeout));
      }
      cv_.notify_all();
      wake();
      thread_.join();
    }
    std::lock_guard lock(mutex_);
    return queue_.empty();
  }

  OutputStats stats() const noexcept override {
    std::lock_guard lock(mutex_);
    OutputStats s = stats_;
    s.queued = queue_.size();
    s.capacity = config_.capacity;
    s.settled = s.published - s.queued;  // first in, first out: the queue holds the latest
    return s;
  }

 protected:
  // Starts the delivery thread: the subclass's constructor calls it last.
  void start() { thread_ = std::thread([this] { run(); }); }
  // Ends the delivery thread at once (an HTTP request in flight is cancelled).
  void stop() noexcept {
    std::lock_guard join(join_mutex_);
    if (!thread_.joinable()) return;
    {
      std::lock_guard lock(mutex_);
      lower_abort(Steady::now());
    }
    cv_.notify_all();
    wake();
    thread_.join();
  }
  // When the delivery thread must give up whatever it waits for (drain's deadline, stop).
  Steady::time_point abort_at() const noexcept { return Steady::time_point(Steady::duration(abort_at_.load())); }

  // Delivery thread, unlocked: sends `batch` (at most max_batch() alerts, oldest first).
  virtual Outcome deliver(const std::vector<Alert>& batch) = 0;
  virtual std::size_t max_batch() const { return 1; }
  // Any thread: makes a wait inside deliver() look at abort_at() again.
  virtual void wake() noexcept {}
  // Under the queue lock, in publish(): every alert, before it is queued.
  virtual void accepted(const Alert&) {}
  // Under the queue lock: when the next periodic re-send is due (nullopt: none), and the
  // alerts to re-send when it is (which reschedules it); a failed re-send comes back to
  // periodic_failed() and is retried, rebuilt from the current state, after the backoff.
  virtual std::optional<Steady::time_point> next_periodic() const { return std::nullopt; }
  virtual std::vector<Alert> take_periodic(Steady::time_point) { return {}; }
  virtual void periodic_failed() {}
  // Delivery thread, after a failed deliver(): why it failed (OutputStats::last_error).
  virtual std::string why_failed() const { return {}; }

 private:
  void lower_abort(Steady::time_point t) {
    abort_at_.store(std::min(abort_at(), t).time_since_epoch().count());
  }

  // A deadline of time_point::max() means none; wait_until(max) overflows in libstdc++.
  void sleep_until(std::unique_lock<std::mutex>& lock, Steady::time_point t) {
    if (t == Steady::time_point::max()) {
      cv_.wait(lock);
    } else {
      cv_.wait_until(lock, t);
    }
  }

  Outcome attempt(const std::vector<Alert>& batch) noexcept {
    try {
      return deliver(batch);
    } catch (...) {
      return Outcome::kRetry;  // bad_alloc and the like: nothing escapes the thread
    }
  }

  void run() noexcept {
    for (;;) {
      try {
        loop();
        return;
      } catch (...) {
        // Copying a batch without memory (deliver()'s own exceptions are outcomes): the
        // alerts are still queued, so wait a little and go on rather than stop delivering.
        std::this_thread::sleep_for(config_.initial_backoff);
      }
    }
  }

  void loop() {
    std::unique_lock lock(mutex_);
    milliseconds backoff = config_.initial_backoff;
    Steady::time_point retry_at{};
    for (;;) {
      const Steady::time_point abort = abort_at();
      const Steady::time_point now = Steady::now();
      if (now >= abort || (draining_ && queue_.empty())) return;
      if (now < retry_at) {
        sleep_until(lock, std::min(retry_at, abort));
        continue;
      }
      Outcome outcome = Outcome::kDelivered;
      if (!queue_.empty() && gather_) {
        // Woken by the first alert of a burst (a replayed log fires thousands a second):
        // let the others queue for a moment, so that the burst costs this thread one
        // wake-up, not one per alert, where the scan keeps every core busy.
        gather_ = false;
        cv_.wait_for(lock, kGather, [&] { return draining_ || Steady::now() >= abort_at(); });
        continue;
      }
      if (!queue_.empty()) {
        // Copy, not pop: the alerts stay queued (and droppable) until their attempt ends,
        // so a retried alert keeps its place and a full queue still drops the oldest.
        const std::size_t n = std::min(queue_.size(), max_batch());
        const std::vector<Alert> batch(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(n));
        in_flight_ = n;
        displaced_ = 0;
        lock.unlock();
        outcome = attempt(batch);
        lock.lock();
        const std::size_t still_queued = in_flight_ - displaced_;
        if (outcome != Outcome::kRetry) {
          queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(still_queued));
        }
        if (outcome == Outcome::kDelivered) {
          stats_.delivered += n;
        } else {
          ++stats_.failures;
          stats_.last_error = why_failed();
          stats_.dropped += displaced_;
          // Gone for good: counted by number, not only as one failed attempt.
          if (outcome == Outcome::kRejected) stats_.rejected += still_queued;
        }
        in_flight_ = 0;
        displaced_ = 0;
      } else {
        const std::optional<Steady::time_point> due = next_periodic();
        if (!due || *due > now) {
          idle_ = true;  // publish() wakes it
          sleep_until(lock, due ? std::min(*due, abort) : abort);
          gather_ = !idle_;
          idle_ = false;
          continue;
        }
        const std::vector<Alert> active = take_periodic(now);
        lock.unlock();
        for (std::size_t i = 0; i < active.size() && outcome == Outcome::kDelivered; i += max_batch()) {
          const std::size_t end = std::min(active.size(), i + max_batch());
          outcome = attempt(std::vector<Alert>(active.begin() + static_cast<std::ptrdiff_t>(i),
                                               active.begin() + static_cast<std::ptrdiff_t>(end)));
        }
        lock.lock();
        if (outcome != Outcome::kDelivered) {
          ++stats_.failures;
          stats_.last_error = why_failed();
        }
        if (outcome == Outcome::kRetry) periodic_failed();
      }
      if (outcome == Outcome::kRetry) {
        retry_at = later(Steady::now(), backoff);
        backoff = backoff > config_.max_backoff / 2 ? config_.max_backoff : backoff * 2;
      } else {
        // A rejection is an answer: the receiver is up, so no reason to wait.
        retry_at = {};
        backoff = config_.initial_backoff;
      }
    }
  }

  const std::string name_;
  QueueConfig config_;
  mutable std::mutex mutex_;  // everything below but the thread
  std::condition_variable cv_;
  std::deque<Alert> queue_;
  OutputStats stats_;
  std::size_t in_flight_ = 0;  // alerts at the queue's front that an attempt is sending
  std::size_t displaced_ = 0;  // of those, how many publish() has pushed out meanwhile
  bool draining_ = false;
  bool idle_ = false;    // the delivery thread waits with nothing queued: publish() wakes it
  bool gather_ = false;  // publish() woke it: wait kGather before delivering
  static constexpr milliseconds kGather{5};
  std::atomic<Steady::rep> abort_at_{Steady::time_point::max().time_since_epoch().count()};
  std::mutex join_mutex_;  // drain() and stop() may race (signal thread vs destructor)
  std::thread thread_;
};

// ---------------------------------------------------------------------------------------
// JSON lines

// A file output follows rotation: before each batch it checks that its path still names
// the file it writes (same device and inode); when logrotate (or anyone) moved or removed
// it, the path is opened anew, created if need be, and the batch goes there. While the
// path cannot be opened the old file keeps the alerts. (copytruncate needs nothing: the
// file is opened O_APPEND.)
class JsonlOutput final : public QueuedOutput {
 public:
  JsonlOutput(std::string name, const std::string& path, QueueConfig queue)
      : QueuedOutput(std::move(name), queue), path_(path) {
    if (path == "-") {
      fd_ = 1;
    } else {
      fd_ = open_file();
      if (fd_ < 0) {
        throw ConfigError("jsonl output \"" + path + "\": cannot open: " + std::strerror(errno));
      }
      owned_ = true;
    }
    start();
  }
  ~JsonlOutput() override {
    stop();
    if (owned_) ::close(fd_);
  }

 private:
  // Opens path_ for appending and records which file it is; -1 (errno set) on failure.
  int open_file() {
    const int fd = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    struct stat st {};
    if (fd >= 0 && ::fstat(fd, &st) == 0) {
      dev_ = st.st_dev;
      ino_ = st.st_ino;
    }
    return fd;
  }

  void follow_rotation() {
    struct stat st {};
    if (::stat(path_.c_str(), &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_) return;
    const dev_t old_dev = dev_;
    const ino_t old_ino = ino_;
    const int fd = open_file();
    if (fd < 0) {
      dev_ = old_dev;
      ino_ = old_ino;
      return;  // the old file keeps the alerts; the next batch tries again
    }
    ::close(fd_);
    fd_ = fd;
  }

  Outcome deliver(const std::vector<Alert>& batch) override {
    if (owned_) follow_rotation();
    for (const Alert& alert : batch) {
      // One write() per line: with O_APPEND the line lands whole even when other
      // processes append to the same file.
      const std::string line = alert_json(alert) + "\n";
      const char* at = line.data();
      std::size_t left = line.size();
      while (left > 0) {
        const ssize_t n = ::write(fd_, at, left);
        if (n < 0) {
          if (errno == EINTR) continue;
          error_ = path_ + ": " + std::strerror(errno);
          return Outcome::kRetry;  // ENOSPC, a full pipe's EPIPE ...: try again later
        }
        at += n;
        left -= static_cast<std::size_t>(n);
      }
    }
    return Outcome::kDelivered;
  }
  std::string why_failed() const override { return error_; }

  const std::string path_;
  std::string error_;  // the last failed write's, for OutputStats::last_error
  int fd_ = -1;
  bool owned_ = false;
  dev_t dev_ = 0;  // the file fd_ writes
  ino_t ino_ = 0;
};

// ---------------------------------------------------------------------------------------
// HTTP

struct HttpUrl {
  bool tls = false;         // https://
  std::string host;         // without brackets for IPv6
  std::string port;         // "80" (http) or "443" (https) when not given
  std::string host_header;  // the URL's authority, as the Host header wants it
  std::string path;         // "/" when not given
  std::string query;        // with its '?', or empty
};

// http(s)://HOST[:PORT][/path][?query]; a fragment is ignored (it never goes on the wire).
HttpUrl parse_http_url(const std::string& url) {
  // Quoted without its password, and with control characters as \xNN: a CR or LF in the
  // URL must not start a line of its own in the message.
  const auto fail = [&](const std::string& why) {
    std::string shown;
    for (const char c : redact_url(url)) {
      const auto u = static_cast<unsigned char>(c);
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", u);
      shown += u < 0x20 || u == 0x7f ? std::string(hex) : std::string(1, c);
    }
    throw ConfigError("URL \"" + shown + "\": " + why);
  };
  const auto starts_with_ci = [&](std::string_view prefix) {
    if (url.size() < prefix.size()) return false;
    for (std::size_t i = 0; i < prefix.size(); ++i) {
      if (std::tolower(static_cast<unsigned char>(url[i])) != prefix[i]) return false;
    }
    return true;
  };
  if (url.empty()) fail("empty");
  for (const char c : url) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7F) fail("contains a space or a control character");
  }
  // Before anything quotes a part of the authority (a "bad port"), which could be a part
  // of a password.
  if (redact_url(url) != url) fail("user information is not supported");
  HttpUrl out;
  out.tls = starts_with_ci("https://");
  if (!out.tls && !starts_with_ci("http://")) fail("not an http:// or https:// URL");
  std::string rest = url.substr(out.tls ? 8 : 7);
  rest = rest.substr(0, rest.find('#'));
  const std::size_t end = rest.find_first_of("/?");
  const std::string authority = rest.substr(0, end);
  std::string target = end == std::string::npos ? "/" : rest.substr(end);
  if (target[0] == '?') target.insert(0, "/");
  const std::size_t q = target.find('?');
  out.path = target.substr(0, q);
  if (q != std::string::npos) out.query = target.substr(q);
  std::string port;
  if (!authority.empty() && authority[0] == '[') {
    const std::size_t bracket = authority.find(']');
    if (bracket == std::string::npos) fail("unclosed '[' in the host");
    out.host = authority.substr(1, bracket - 1);
    const std::string after = authority.substr(bracket + 1);
    if (!after.empty()) {
      if (after[0] != ':') fail("junk after the host");
      port = after.substr(1);
      if (port.empty()) fail("empty port");
    }
  } else {
    const std::size_t colon = authority.find(':');
    out.host = authority.substr(0, colon);
    if (colon != std::string::npos) {
      port = authority.substr(colon + 1);
      if (port.empty()) fail("empty port");
    }
  }
  if (out.host.empty()) fail("no host");
  if (port.empty()) {
    out.port = out.tls ? "443" : "80";
  } else {
    unsigned value = 0;
    for (const char c : port) {
      if (c < '0' || c > '9' || value > 65535) fail("bad port \"" + port + "\"");
      value = value * 10 + static_cast<unsigned>(c - '0');
    }
    if (value == 0 || value > 65535) fail("bad port \"" + port + "\"");
    out.port = std::to_string(value);
  }
  out.host_header = authority;
  return out;
}

// `path` is a regular file that can be opened for reading; else a ConfigError naming what
// it is for. (Not waiting for a FIFO's writer: OpenSSL would read it next.)
void require_readable(const std::string& what, const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw ConfigError("tls: " + what + " " + path + ": " + std::strerror(errno));
  struct stat st {};
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  ::close(fd);
  if (!regular) throw ConfigError("tls: " + what + " " + path + ": not a regular file");
}

// The TLS context of an https:// output (TlsConfig). Throws ConfigError naming the file
// that cannot be used.
std::shared_ptr<ssl::context> make_tls_context(const TlsConfig& tls) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                   ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
  ctx->set_verify_mode(ssl::verify_peer);
  boost::system::error_code ec;
  const auto failed = [&](const std::string& what, const std::string& path, const std::string& as) {
    return ConfigError("tls: " + what + " " + path + ": not " + as + " (" + ec.message() + ")");
  };
  if (tls.ca_file.empty()) {
    ctx->set_default_verify_paths(ec);
    if (ec) throw ConfigError("tls: the system's CA certificates cannot be loaded (" + ec.message() + "); set ca_file");
  } else {
    require_readable("ca_file", tls.ca_file);
    ctx->load_verify_file(tls.ca_file, ec);
    if (ec) throw failed("ca_file", tls.ca_file, "PEM CA certificates");
  }
  if (tls.cert_file.empty() != tls.key_file.empty())
    throw ConfigError("tls: cert_file and key_file go together (the client certificate of mutual TLS)");
  if (!tls.cert_file.empty()) {
    require_readable("cert_file", tls.cert_file);
    require_readable("key_file", tls.key_file);
    ctx->use_certificate_chain_file(tls.cert_file, ec);
    if (ec) throw failed("cert_file", tls.cert_file, "a PEM certificate");
    ctx->use_private_key_file(tls.key_file, ssl::context::pem, ec);
    if (ec) {
      // A key that loads on its own but not beside the certificate is another's key.
      ssl::context alone(ssl::context::tls_client);
      boost::system::error_code alone_ec;
      alone.use_private_key_file(tls.key_file, ssl::context::pem, alone_ec);
      ERR_clear_error();
      if (!alone_ec) throw ConfigError("tls: key_file " + tls.key_file + " is not the key of cert_file " + tls.cert_file);
      throw failed("key_file", tls.key_file, "a PEM private key (or it is encrypted)");
    }
  }
  return ctx;
}

// One HTTP/1.1 connection, over TLS for an https:// URL, kept alive between requests,
// for the delivery thread only (wake() aside). Every wait runs the private io_context
// until the operation completes, the request's deadline passes (beast::tcp_stream's
// timer; ours for the resolver) or abort_at() passes, whichever is first.
class HttpClient {
 public:
  HttpClient(HttpUrl url, milliseconds timeout, std::function<Steady::time_point()> abort_at, const TlsConfig& tls)
      : url_(std::move(url)),
        timeout_(timeout),
        abort_at_(std::move(abort_at)),
        tls_(url_.tls ? make_tls_context(tls) : nullptr),
        verify_hostname_(tls.verify_hostname) {}
  ~HttpClient() { close(); }

  // The response's status code, or 0 when there was none (resolution, connection, TLS
  // handshake, timeout, a malformed response, the abort deadline); last_error() says why.
  // The response body is read and ignored.
  unsigned post(const std::string& target, const std::string& body, const std::string& bearer_token) {
    http::request<http::string_body> request{http::verb::post, target, 11};
    request.set(http::field::host, url_.host_header);
    request.set(http::field::user_agent, "gpufilterd");
    request.set(http::field::content_type, "application/json");
    if (!bearer_token.empty()) request.set(http::field::authorization, "Bearer " + bearer_token);
    request.keep_alive(true);
    request.body() = body;
    request.prepare_payload();
    const Steady::time_point deadline = later(Steady::now(), timeout_);
    for (int attempt = 0; attempt < 2; ++attempt) {
      const bool reused = connected();
      if (!reused && !connect(deadline)) return 0;
      beast::error_code ec;
      bool done = false;
      lowest().expires_at(deadline);
      on_stream([&](auto& stream) {
        http::async_write(stream, request, [&](beast::error_code e, std::size_t) {
          ec = e;
          done = true;
        });
      });
      wait(done, deadline, [&] { abort_stream(); });
      http::response_parser<http::string_body> parser;
      parser.body_limit(kResponseBodyLimit);
      if (!ec) read_response(parser, deadline, ec);
      if (!ec) {
        const unsigned status = parser.get().result_int();
        if (!parser.get().keep_alive()) close();
        if (status < 200 || status >= 300) last_error_ = "HTTP " + std::to_string(status);
        return status;
      }
      close();
      last_error_ = "request: " + ec.message();
      // A kept-alive connection that the server closed while it sat idle fails before
      // any byte of an answer: the server never saw this request, so send it once more
      // on a new connection rather than count a failure.
      const bool stale = reused && !parser.got_some() &&
                         (ec == http::error::end_of_stream || ec == asio::error::eof ||
                          ec == asio::error::connection_reset || ec == asio::error::broken_pipe ||
                          ec == ssl::error::stream_truncated);
      if (!stale || Steady::now() >= std::min(deadline, abort_at_())) return 0;
    }
    return 0;
  }

  // Why the last request failed (no answer, or a status other than 2xx).
  const std::string& last_error() const noexcept { return last_error_; }

  // Any thread: wakes a wait so that it sees a new abort_at().
  void wake() noexcept {
    try {
      asio::post(ioc_, [] {});
    } catch (...) {
    }
  }

 private:
  template <class Cancel>
  void wait(const bool& done, Steady::time_point deadline, Cancel cancel) {
    ioc_.restart();
    bool cancelled = false;
    while (!done) {
      const Steady::time_point until = std::min(deadline, abort_at_());
      if (!cancelled && Steady::now() >= until) {
        cancel();  // the operation completes at once with operation_aborted
        cancelled = true;
      }
      const std::size_t ran = cancelled ? ioc_.run_one() : ioc_.run_one_until(until);
      if (ran == 0 && ioc_.stopped()) ioc_.restart();
    }
  }

  // The response: its header, then a body we ignore. A Content-Length past the body limit
  // fails at once: Beast (1.74) read such a body whole after a failed first request,
  // without its limit (a webhook answering "Content-Length: 2000000000" and an endless
  // body: 170 MB/s, until the deadline).
  void read_response(http::response_parser<http::string_body>& parser, Steady::time_point deadline,
                     beast::error_code& ec) {
    for (const bool header : {true, false}) {
      bool done = false;
      lowest().expires_at(deadline);
      on_stream([&](auto& stream) {
        const auto then = [&](beast::error_code e, std::size_t) {
          ec = e;
          done = true;
        };
        if (header) http::async_read_header(stream, buffer_, parser, then);
        else http::async_read(stream, buffer_, parser, then);
      });
      wait(done, deadline, [&] { abort_stream(); });
      if (ec) return;
      if (header && parser.content_length().value_or(0) > kResponseBodyLimit) {
        ec = http::error::body_limit;
        return;
      }
    }
  }

  // The deadline passed: the pending operation ends with an error. Closing the socket,
  // not only cancelling: a composed read (the response's headers, then its body) whose
  // peer kept sending went on reading after a cancel, holding more and more (a webhook
  // answering an endless body: 18 MB/s, and SIGTERM waited for it).
  void abort_stream() noexcept {
    beast::error_code ignored;
    lowest().cancel();
    lowest().socket().close(ignored);
  }

  bool connected() const noexcept { return plain_.has_value() || secure_.has_value(); }
  beast::tcp_stream& lowest() { return secure_ ? beast::get_lowest_layer(*secure_) : *plain_; }
  template <class Work>
  void on_stream(const Work& work) {
    if (secure_) work(*secure_);
    else work(*plain_);
  }

  // Resolves the host anew each time, so that a receiver whose address changes, or that
  // comes up after gpufilterd, is reached; then the TLS handshake for https://.
  bool connect(Steady::time_point deadline) {
    close();
    tcp::resolver resolver(ioc_);
    tcp::resolver::results_type endpoints;
    beast::error_code ec;
    bool done = false;
    resolver.async_resolve(url_.host, url_.port, [&](beast::error_code e, tcp::resolver::results_type r) {
      ec = e;
      endpoints = std::move(r);
      done = true;
    });
    wait(done, deadline, [&] { resolver.cancel(); });
    if (ec) {
      last_error_ = "resolve " + url_.host + ": " + ec.message();
      return false;
    }
    if (tls_) secure_.emplace(ioc_, *tls_);
    else plain_.emplace(ioc_);
    lowest().expires_at(deadline);
    done = false;
    lowest().async_connect(endpoints, [&](beast::error_code e, const tcp::endpoint&) {
      ec = e;
      done = true;
    });
    wait(done, deadline, [&] { abort_stream(); });
    if (ec) {
      last_error_ = "connect " + url_.host + ":" + url_.port + ": " + ec.message();
      close();
      return false;
    }
    if (secure_ && !handshake(deadline)) return false;
    buffer_.clear();
    return true;
  }

  // The TLS handshake: SNI for a host name, the chain checked against the CAs, the name
  // against the URL's host (a DNS name or an IP address) unless verify_hostname is off.
  bool handshake(Steady::time_point deadline) {
    beast::error_code ec;
    beast::error_code not_ip;
    (void)asio::ip::make_address(url_.host, not_ip);
    if (not_ip && SSL_set_tlsext_host_name(secure_->native_handle(), url_.host.c_str()) != 1) {
      last_error_ = "TLS: cannot set the server name " + url_.host;
      close();
      return false;
    }
    if (verify_hostname_) secure_->set_verify_callback(ssl::host_name_verification(url_.host));
    bool done = false;
    secure_->async_handshake(ssl::stream_base::client, [&](beast::error_code e) {
      ec = e;
      done = true;
    });
    wait(done, deadline, [&] { abort_stream(); });
    if (ec) {
      last_error_ = "TLS handshake with " + url_.host + ":" + url_.port + ": " + ec.message();
      close();
      return false;
    }
    return true;
  }

  void close() noexcept {
    if (!connected()) return;
    beast::error_code ignored;
    lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
    lowest().socket().close(ignored);
    plain_.reset();
    secure_.reset();
    buffer_.clear();
  }

  const HttpUrl url_;
  const milliseconds timeout_;
  const std::function<Steady::time_point()> abort_at_;
  const std::shared_ptr<ssl::context> tls_;  // https:// only
  const bool verify_hostname_;
  asio::io_context ioc_;
  std::optional<beast::tcp_stream> plain_;                   // engaged while connected over http://
  std::optional<beast::ssl_stream<beast::tcp_stream>> secure_;  // ... over https://
  // Bounded: a response that does not fit (headers and what is read ahead of the body
  // we skip) fails the read instead of growing it.
  beast::flat_buffer buffer_{kResponseBufferLimit};
  std::string last_error_;
};

// 2xx: delivered. 5xx, 429 (Too Many Requests), 408 (Request Timeout) and no answer at
// all: retried. Any other status (4xx, and 1xx/3xx: redirects are not followed) means
// that the same request would be refused again: a failure, and the alerts are dropped.
Outcome classify(unsigned status) {
  if (status >= 200 && status < 300) return Outcome::kDelivered;
  if (status == 0 || status >= 500 || status == 429 || status == 408) return Outcome::kRetry;
  return Outcome::kRejected;
}

// Truncates to at most `limit` bytes without cutting a UTF-8 sequence in two.
std::string truncate_utf8(const std::string& text, std::size_t limit) {
  if (text.size() <= limit) return text;
  std::size_t cut = limit;
  for (int k = 0; k < 3 && cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80; ++k) --cut;
  return text.substr(0, cut);
}

// ---------------------------------------------------------------------------------------
// Alertmanager

class AlertmanagerOutput final : public QueuedOutput {
 public:
  AlertmanagerOutput(std::string name, AlertmanagerConfig config)
      : QueuedOutput(std::move(name), config.queue),
        config_(std::move(config)),
        url_(parse_http_url(config_.url)),
        client_(url_, config_.timeout, [this] { return abort_at(); }, config_.tls) {
    std::string prefix = url_.path;
    while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
    target_ = prefix + "/api/v2/alerts" + url_.query;
    start();
  }
  ~AlertmanagerOutput() override { stop(); }

 private:
  std::size_t max_batch() const override { return kAlertmanagerBatch; }
  void wake() noexcept override { client_.wake(); }
  std::string why_failed() const override { return client_.last_error(); }

  Outcome deliver(const std::vector<Alert>& batch) override {
    return classify(client_.post(target_, payload(batch, SystemClock::now()), {}));
  }

  // The set of active alerts follows publish(), not delivery: a firing alert that the
  // full queue drops is still re-sent, and a resolved one stops the re-sends at once.
  void accepted(const Alert& alert) override {
    const std::string key = alert.fingerprint.empty() ? alert.rule + '\x1f' + alert.group : alert.fingerprint;
    if (alert.state == Alert::State::kResolved) {
      active_.erase(key);
      return;
    }
    if (active_.empty()) next_resend_ = later(Steady::now(), config_.resend_interval);
    active_.insert_or_assign(key, alert);
  }
  std::optional<Steady::time_point> next_periodic() const override {
    if (active_.empty() || config_.resend_interval <= milliseconds(0)) return std::nullopt;
    return next_resend_;
  }
  std::vector<Alert> take_periodic(Steady::time_point now) override {
    next_resend_ = later(now, config_.resend_interval);
    std::vector<Alert> alerts;
    alerts.reserve(active_.size());
    for (const auto& [key, alert] : active_) alerts.push_back(alert);
    return alerts;
  }
  void periodic_failed() override { next_resend_ = Steady::now(); }

  // The API v2 body: a JSON array of postableAlert objects.
  std::string payload(const std::vector<Alert>& alerts, SystemClock::time_point now) const {
    std::string out = "[";
    for (std::size_t i = 0; i < alerts.size(); ++i) {
      const Alert& alert = alerts[i];
      if (i > 0) out += ',';
      bool first = true;
      const auto field = [&](const std::string& key, const std::string& value) {
        if (!first) out += ',';
        first = false;
        out += json_quote(key);
        out += ':';
        out += json_quote(value);
      };
      out += "{\"labels\":{";
      bool has_alertname = false;
      for (const auto& [key, value] : alert.labels) {
        if (value.empty()) continue;  // Prometheus's rule: an empty label is no label
        has_alertname = has_alertname || key == "alertname";
        field(key, value);
      }
      if (!has_alertname) field("alertname", alert.rule);
      out += "},\"annotations\":{";
      first = true;
      for (const auto& [key, value] : alert.annotations) field(key, value);
      // The rule's own annotations win over these four.
      const auto extra = [&](const std::string& key, const std::string& value) {
        if (alert.annotations.count(key) == 0) field(key, value);
      };
      extra("source", alert.source);
      extra("line", truncate_utf8(alert.line, kAnnotationLineBytes));
      extra("matches", std::to_string(alert.matches));
      extra("suppressed", std::to_string(alert.suppressed));
      out += "},\"startsAt\":\"" + rfc3339(alert.starts_at) + '"';
      if (alert.state == Alert::State::kResolved) {
        out += ",\"endsAt\":\"" + rfc3339(alert.ends_at) + '"';
      } else if (config_.resend_interval > milliseconds(0)) {
        // As Prometheus does: if gpufilterd stops re-sending, Alertmanager resolves the
        // alert by itself after four missed re-sends.
        out += ",\"endsAt\":\"" + rfc3339(now + 4 * config_.resend_interval) + '"';
      }
      if (!config_.generator_url.empty()) out += ",\"generatorURL\":" + json_quote(config_.generator_url);
      out += '}';
    }
    out += ']';
    return out;
  }

  const AlertmanagerConfig config_;
  const HttpUrl url_;
  std::string target_;
  HttpClient client_;
  // Under the queue lock (accepted, next_periodic, take_periodic, periodic_failed).
  std::map<std::string, Alert> active_;  // by fingerprint
  Steady::time_point next_resend_{};
};

// ---------------------------------------------------------------------------------------
// Webhook

class WebhookOutput final : public QueuedOutput {
 public:
  WebhookOutput(std::string name, WebhookConfig config)
      : QueuedOutput(std::move(name), config.queue),
        config_(std::move(config)),
        url_(parse_http_url(config_.url)),
        client_(url_, config_.timeout, [this] { return abort_at(); }, config_.tls) {
    start();
  }
  ~WebhookOutput() override { stop(); }

 private:
  void wake() noexcept override { client_.wake(); }
  std::string why_failed() const override { return client_.last_error(); }
  Outcome deliver(const std::vector<Alert>& batch) override {
    return classify(client_.post(url_.path + url_.query, alert_json(batch.front()),
                                 config_.token ? config_.token->get() : config_.bearer_token));
  }

  const WebhookConfig config_;
  const HttpUrl url_;
  HttpClient client_;
};

}  // namespace

std::string redact_url(std::string_view url) {
  const std::size_t scheme = url.find("://");
  if (scheme == std::string_view::npos) return std::string(url);  // no authority ("unix:PATH")
  const std::size_t begin = scheme + 3;
  // The last '@' before the query, even past a '/' or '#': a password may hold those, and
  // hiding a path's '@' too costs only a less precise message.
  const std::size_t end = std::min(url.find('?', begin), url.size());
  const std::size_t at = url.substr(0, end).rfind('@');
  if (at == std::string_view::npos || at < begin) return std::string(url);
  const std::string_view userinfo = url.substr(begin, at - begin);
  const std::size_t colon = userinfo.find(':');
  const std::string hidden = colon == std::string_view::npos ? "***" : std::string(userinfo.substr(0, colon)) + ":***";
  return std::string(url.substr(0, begin)) + hidden + std::string(url.substr(at));
}

void check_http_url(const std::string& url) { (void)parse_http_url(url); }

void check_tls(const TlsConfig& tls) { (void)make_tls_context(tls); }

namespace {

std::string or_kind(std::string name, const char* kind) { return name.empty() ? kind : name; }

}  // namespace

std::unique_ptr<AlertOutput> make_jsonl_output(std::string name, std::string path, QueueConfig queue) {
  return std::make_unique<JsonlOutput>(or_kind(std::move(name), "jsonl"), path, queue);
}

std::unique_ptr<AlertOutput> make_alertmanager_output(std::string name, AlertmanagerConfig config) {
  return std::make_unique<AlertmanagerOutput>(or_kind(std::move(name), "alertmanager"), std::move(config));
}

std::unique_ptr<AlertOutput> make_webhook_output(std::string name, WebhookConfig config) {
  return std::make_unique<WebhookOutput>(or_kind(std::move(name), "webhook"), std::move(config));
}

}  // namespace gpufilter::daemon
