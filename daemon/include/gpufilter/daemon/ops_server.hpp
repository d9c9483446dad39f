// OpsServer: gpufilterd's operations endpoint over HTTP (Boost.Beast), on a thread of
// its own:
//   GET  /metrics    Metrics::render(), text/plain; version=0.0.4
//   GET  /healthz    200 "ok" while the process runs
//   GET  /readyz     200 "ready" once handlers.ready() is true, else 503
//   POST /-/reload   runs handlers.reload(): 200 with its message, or 500 with the reason;
//                    403 when there is no handler (gpufilterd sets one only with
//                    reload_endpoint: true: the endpoint is read-only unless enabled)
// Anything else: 404; a wrong method: 405 (every other route takes GET and HEAD only).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "gpufilter/daemon/metrics.hpp"

namespace gpufilter::daemon {

struct OpsHandlers {
  std::function<bool()> ready;
  std::function<std::pair<bool, std::string>()> reload;  // (succeeded, message); empty: 403
};

class OpsServer {
 public:
  // `listen`: "HOST:PORT" ("127.0.0.1:9464"; port 0 picks one; ":PORT" is 127.0.0.1:PORT,
  // every address only when said: "0.0.0.0:PORT", "[::]:PORT"). Binds at once: throws
  // SourceError naming the address when it cannot, ConfigError for a malformed one.
  OpsServer(const std::string& listen, Metrics& metrics, OpsHandlers handlers);
  ~OpsServer();
  OpsServer(const OpsServer&) = delete;
  OpsServer& operator=(const OpsServer&) = delete;

  void start();  // serves on its own thread
  void stop();   // closes the socket and joins the thread
  std::string bound() const;  // "127.0.0.1:40312"

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpufilter::daemon
