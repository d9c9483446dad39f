// The three kinds of AlertOutput gpufilterd delivers to (alert_output.hpp has the
// contract: bounded queue, own delivery thread, retry with backoff, drop-oldest counted).
//   jsonl         one alert_json() object per line, to standard output or a file
//   alertmanager  Prometheus Alertmanager API v2: POST {url}/api/v2/alerts; active alerts
//                 are re-sent every resend_interval until resolved
//   webhook       POST {url} with the alert_json() object; optional bearer token
// HTTP is Boost.Beast over plain TCP (http:// URLs only).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "gpufilter/daemon/alert_output.hpp"

namespace gpufilter::daemon {

struct QueueConfig {
  std::size_t capacity = 10000;                    // alerts waiting; beyond it the oldest is dropped
  std::chrono::milliseconds initial_backoff{200};  // first retry delay, doubled per failure
  std::chrono::milliseconds max_backoff{30000};
};

// `path` "-": standard output. Throws ConfigError when the file cannot be opened.
std::unique_ptr<AlertOutput> make_jsonl_output(std::string name, std::string path, QueueConfig queue = {});

struct AlertmanagerConfig {
  std::string url;  // http://HOST:PORT[/prefix]; alerts go to {url}/api/v2/alerts
  std::chrono::milliseconds resend_interval{60000};
  std::chrono::milliseconds timeout{5000};  // per request
  std::string generator_url;                // sent as generatorURL (e.g. http://host:9464/)
  QueueConfig queue;
};
// Throws ConfigError for a URL that is not http://HOST:PORT[/path].
std::unique_ptr<AlertOutput> make_alertmanager_output(std::string name, AlertmanagerConfig config);

struct WebhookConfig {
  std::string url;           // http://HOST:PORT/path
  std::string bearer_token;  // empty: no Authorization header
  std::chrono::milliseconds timeout{5000};
  QueueConfig queue;
};
std::unique_ptr<AlertOutput> make_webhook_output(std::string name, WebhookConfig config);

}  // namespace gpufilter::daemon
