// The kinds of AlertOutput gpufilterd delivers to (alert_output.hpp has the contract:
// bounded queue, own delivery thread, retry with backoff, drops counted).
//   jsonl         one alert_json() object per line, to standard output or a file
//   alertmanager  Prometheus Alertmanager API v2: POST {url}/api/v2/alerts; active alerts
//                 are re-sent every resend_interval until resolved
//   webhook       POST {url} with the alert_json() object; optional bearer token
//   kafka         the alert_json() object produced to a topic (kafka_output.cpp)
//   exec          a program run per firing (and resolved) alert, its arguments filled
//                 from the alert: fail2ban's ban and unban actions (exec_output.cpp)
// HTTP is Boost.Beast over TCP, and over TLS (OpenSSL) for https:// URLs.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpufilter/daemon/alert_output.hpp"

namespace gpufilter::daemon {

struct QueueConfig {
  std::size_t capacity = 10000;                    // alerts waiting; beyond it the oldest is dropped
  std::chrono::milliseconds initial_backoff{200};  // first retry delay, doubled per failure
  std::chrono::milliseconds max_backoff{30000};
};

// `path` "-": standard output. Throws ConfigError when the file cannot be opened.
std::unique_ptr<AlertOutput> make_jsonl_output(std::string name, std::string path, QueueConfig queue = {});

// TLS for an https:// URL. The receiver's certificate chain is checked against the
// system's CA certificates, or against ca_file's (PEM) when set, and its name against the
// URL's host (a DNS name or an IP address) unless verify_hostname is false. cert_file and
// key_file (PEM, both or neither) present a client certificate: mutual TLS. The files are
// read when the output is made; check_tls() reads them for --check and reload.
struct TlsConfig {
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
  bool verify_hostname = true;
  bool operator==(const TlsConfig&) const = default;
};
// Throws ConfigError naming the file that cannot be read or used (a missing CA file, a
// certificate without its key, a key that is not the certificate's).
void check_tls(const TlsConfig& tls);

struct AlertmanagerConfig {
  std::string url;  // http(s)://HOST:PORT[/prefix]; alerts go to {url}/api/v2/alerts
  std::chrono::milliseconds resend_interval{60000};
  std::chrono::milliseconds timeout{5000};  // per request
  std::string generator_url;                // sent as generatorURL (e.g. http://host:9464/)
  QueueConfig queue;
  TlsConfig tls;  // https:// URLs
};
// Throws ConfigError for a URL that is not http(s)://HOST:PORT[/path], or TLS files that
// cannot be used.
std::unique_ptr<AlertOutput> make_alertmanager_output(std::string name, AlertmanagerConfig config);

// A bearer token that can change while an output delivers: gpufilterd re-reads
// bearer_token_file at every reload, so a rotated token is used without a restart.
// Thread-safe. The token is only ever put into the Authorization header: nothing here
// logs, counts or reports it.
class BearerToken {
 public:
  explicit BearerToken(std::string value = {}) : value_(std::move(value)) {}
  void set(std::string value) {
    std::lock_guard lock(mutex_);
    value_ = std::move(value);
  }
  std::string get() const {
    std::lock_guard lock(mutex_);
    return value_;
  }

 private:
  mutable std::mutex mutex_;
  std::string value_;
};

struct WebhookConfig {
  std::string url;           // http(s)://HOST:PORT/path
  std::string bearer_token;  // empty: no Authorization header (unless `token` is set)
  std::chrono::milliseconds timeout{5000};
  QueueConfig queue;
  // When set, read at every request instead of bearer_token (empty: no header).
  std::shared_ptr<const BearerToken> token;
  TlsConfig tls;  // https:// URLs
};
std::unique_ptr<AlertOutput> make_webhook_output(std::string name, WebhookConfig config);

// Alerts and/or selected records produced to a Kafka topic by an idempotent producer
// (librdkafka). An alert is its alert_json() object, keyed by its group or by one of its
// labels; a record is its bytes, keyed by `record_key` filled from its fields and named
// groups, with the headers gpufilter.source and gpufilter.rules (the names, comma-separated).
// librdkafka's queue is the output's (at most `queue` messages; a full one drops the new
// message, counted); a send is retried for up to `timeout`, then it is dropped and counted
// as a failure.
struct KafkaOutputConfig {
  std::string brokers;
  std::string topic;
  std::string key_label;  // "": the alert's group
  bool alerts = true;     // produce the alerts
  bool records = false;   // produce the selected records
  std::string record_key;  // a template ("{{kafka.key}}", "{{host}}"); "": no key
  std::vector<std::pair<std::string, std::string>> settings;  // librdkafka properties
  std::vector<std::pair<std::string, std::string>> secrets;   // likewise, never quoted
  std::size_t queue = 10000;
  std::chrono::milliseconds timeout{30000};
};
// Throws ConfigError ("settings: KEY: why", "secrets_file: KEY: refused ...").
void check_kafka_output(const KafkaOutputConfig& config);
std::unique_ptr<AlertOutput> make_kafka_output(std::string name, KafkaOutputConfig config);

// A program run for each firing alert (`fire`) and, when given, each resolved one
// (`resolve`): fail2ban's actionban and actionunban. Each is an argument vector, never a
// shell command line: every argument stays one argument whatever the alert puts into it.
// Tags filled in every argument (as fail2ban's action tags), other <...> text is left:
//   <ip>        the failure's address: the label `ip` when the alert has one, else its
//               group (a fail2ban_filter rule groups by the address). Must be an IPv4 or
//               IPv6 address: an alert whose <ip> is not one (a host name, "(other)") runs
//               nothing and is counted as rejected
//   <family>    inet4 or inet6, of <ip>
//   <name>      the rule's name (fail2ban's jail name)
//   <failures>  the matches that fired the alert
//   <time>      when the group started firing, in Unix seconds
//   <group>     the alert's group as it is (what the log's writer chose: do not give it to a
//               program that parses its arguments as commands, as nft does)
//   <state>     firing or resolved
//   <user>, <F-USER>, <F-NAME>  the label `user` (`name`, lower case): a rule sets it from
//               its captures (labels: {user: "{{user}}"}); empty when the alert has none
//   {{LABEL}}   the alert's label LABEL (filled(), cut to 256 bytes)
// A command runs with standard input from /dev/null, in a new process group, in "/",
// with PATH (/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin) as its whole
// environment (gpufilterd's may hold a webhook's token), no other descriptor open and no
// signal blocked or ignored. Exit status 0 is delivered; another status, a signal, or
// `timeout` passing (SIGTERM to the process group, SIGKILL a second later) is a failure,
// retried with the queue's backoff; OutputStats::last_error says why ("/usr/sbin/nft
// (fire): exit status 1: Error: ..."), with the first line of the command's standard
// error (at most 4 KiB of its output is kept, the rest read and discarded).
// At most `concurrency` commands run at once; the alerts of one (rule, group) run one at
// a time in the order they were published (an unban never overtakes its ban, and a
// failing ban holds back that group's later commands, not other groups'). A resolved
// alert without a `resolve` command counts as delivered at once.
struct ExecOutputConfig {
  std::vector<std::string> fire;     // [0] an absolute path (find_exec_command)
  std::vector<std::string> resolve;  // empty: nothing runs when an alert resolves
  std::chrono::milliseconds timeout{10000};
  std::size_t concurrency = 4;
  QueueConfig queue;
};
// The program `command` names, as the exec output runs it: an absolute path as it is, a
// relative one with a '/' against `base_dir` (the configuration's directory), a bare name
// looked up in PATH (gpufilterd's, or the default above). Throws ConfigError naming it when
// it is missing, not a regular file, not executable, or could be changed by someone other
// than root and gpufilterd's user (owned by another user, writable by group or others, or
// under a directory they may write): gpufilterd often runs as root.
std::string find_exec_command(const std::string& command, const std::string& base_dir);
// Throws ConfigError for what make_exec_output refuses (no fire command, a command that
// find_exec_command refuses or that holds a tag, a zero timeout or concurrency).
void check_exec_output(const ExecOutputConfig& config);
std::unique_ptr<AlertOutput> make_exec_output(std::string name, ExecOutputConfig config);

// `url` as it may be printed: the user information before an '@' in the authority is
// replaced ("http://ops:***@host:9093", "http://***@host/" for a user alone, which may be
// a token), so that no password reaches a message, a log line, a metric or an alert.
std::string redact_url(std::string_view url);
// Refuses what the alertmanager and webhook outputs refuse: anything but
// http(s)://HOST[:PORT][/path][?query], a bad port, user information,
// spaces and control characters. Throws ConfigError naming redact_url(url). The outputs
// run it when they are made; the configuration's validation runs it for --check and reload.
void check_http_url(const std::string& url);

}  // namespace gpufilter::daemon
