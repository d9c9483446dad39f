// StreamSession: the I/O side of a stream run, one for gpufilter --follow/--listen and for
// gpufilterd. It owns the io_context and its thread, the readers that feed one
// RecordChannel (followers, a listener, standard input, packet captures), the channel's
// space callback, and the stop: the readers hand on what they hold and close, then
// channel.finish(), so the consumer scans what is left and returns. The state files are
// saved last, by the front end's call, once what they name is written.
//
//   add_follower / add_listener / add_stdin / add_capture / add_kafka / add_journal   build the readers (each may throw)
//   start()     the listener binds, the followers, standard input and the captures open
//   run_io()    the I/O thread; the consumer then runs on the caller's thread
//   join()      the I/O thread ends; save_state()
//
// A capture or a Kafka source reads on a thread of its own; the session wakes it from
// on_space() and stops it with the others. The stop comes from request_stop() (any
// thread), from the StopSignal when one is given, or, when the only readers are standard
// input and capture files (no follower, listener or live capture), from the end of all of
// them.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "gpufilter/core/errors.hpp"
#include "gpufilter/core/notices.hpp"
#include "gpufilter/core/record_channel.hpp"
#include "gpufilter/core/stop_signal.hpp"
#include "gpufilter/sources/capture_source.hpp"
#include "gpufilter/sources/follower.hpp"
#include "gpufilter/sources/journal_reader.hpp"
#include "gpufilter/sources/kafka_source.hpp"
#include "gpufilter/sources/listener.hpp"
#include "gpufilter/sources/stdin_reader.hpp"

namespace gpufilter {

struct StreamSessionConfig {
  RecordChannel::Config channel;
  // What the I/O thread does when a handler throws.
  enum class IoFailure {
    // The thread ends and the channel finishes, so the consumer scans what came and
    // returns; join() rethrows the failure (gpufilter: the run fails).
    kEnd,
    // The failure (a std::exception) goes to report_io_failure and the io_context runs
    // again: the readers go on (gpufilterd: a daemon outlives one bad handler).
    kRestart,
  };
  IoFailure on_io_failure = IoFailure::kEnd;
  std::function<void(const std::exception&)> report_io_failure;  // kRestart; on the I/O thread
  StopSignal* stop = nullptr;  // when readable, the readers stop
};

class StreamSession {
 public:
  explicit StreamSession(StreamSessionConfig config);
  ~StreamSession();  // ends the I/O thread if join() was not called
  StreamSession(const StreamSession&) = delete;
  StreamSession& operator=(const StreamSession&) = delete;

  boost::asio::io_context& io() noexcept { return io_; }
  RecordChannel& channel() noexcept { return channel_; }

  // Build, before start(). Each throws what its reader's constructor throws.
  void add_follower(FollowConfig config, Notices& notices);
  void add_listener(ListenConfig config, Notices& notices);  // at most one
  // A duplicate of `fd` is read; `origin`: BatchEntry::origin of its stream.
  void add_stdin(std::size_t max_line_bytes, int fd = STDIN_FILENO, std::uint32_t origin = 0);
  void add_capture(CaptureConfig config, Notices& notices);  // opens the capture file or interface
  // A Kafka consumer (KafkaSource, or one made by kafka_module.hpp's open_kafka_url()).
  void add_kafka(std::unique_ptr<KafkaReader> reader);
  // The systemd journal through journalctl (JournalReader); one that does not follow is
  // finite, as standard input is.
  void add_journal(JournalConfig config, Notices& notices);

  // The listener binds (SourceError) and each bound URL goes to `on_listening`; then the
  // followers and standard input start. Before run_io().
  void start(const std::function<void(const std::string& url)>& on_listening = {});
  void run_io();
  // Any thread: the readers hand on what they hold and close; then the channel finishes.
  void request_stop();
  // Ends the I/O thread; kEnd: rethrows its failure, if any.
  void join();
  // Ends the I/O thread; never throws (for the consumer's failure path).
  void end_io() noexcept;

  // Each follower's state file, and each Kafka source's last commit (KafkaSource::close),
  // once the I/O thread has ended and what was scanned is delivered. A failure goes to
  // `on_error` and the others are still saved; without one it is thrown (ConfigError,
  // SourceError).
  void save_state(const std::function<void(const Error&)>& on_error = {});

  bool following() const noexcept { return !followers_.empty(); }
  bool listening() const noexcept { return listener_ != nullptr; }
  bool capturing() const noexcept { return !captures_.empty(); }
  bool consuming() const noexcept { return !kafkas_.empty(); }
  bool journaling() const noexcept { return !journals_.empty(); }
  struct Counters {
    Follower::Counters follow;  // summed over the followers
    Listener::Counters listen;
    std::uint64_t stdin_lines_too_long = 0;
    std::uint64_t journal_entries = 0, journal_entries_invalid = 0;  // summed over the journal readers
    CaptureSource::Counters capture;  // summed over the captures
    KafkaReader::Counters kafka;      // summed over the Kafka sources
  };
  // On the I/O thread, or before or after it runs.
  Counters counters() const;

 private:
  void stop_readers();  // on the I/O thread
  bool readers_stopped() const;
  void finish_when_stopped();
  void end_when_all_ended();  // only finite readers: the last one's end stops the run
  void on_space();
  void io_main();

  StreamSessionConfig config_;
  boost::asio::io_context io_;
  RecordChannel channel_;
  std::vector<std::unique_ptr<Follower>> followers_;
  std::unique_ptr<Listener> listener_;
  std::unique_ptr<StdinReader> stdin_;
  std::vector<std::unique_ptr<CaptureSource>> captures_;  // declared after channel_: joined before it goes
  std::vector<std::unique_ptr<KafkaReader>> kafkas_;      // likewise
  std::vector<std::unique_ptr<JournalReader>> journals_;
  bool stopping_ = false;
  boost::asio::steady_timer stop_check_;
  boost::asio::posix::stream_descriptor stop_watch_;
  std::unique_ptr<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::exception_ptr io_failure_;
  std::thread io_thread_;
};

}  // namespace gpufilter
