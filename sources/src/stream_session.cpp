// StreamSession: readers on one I/O thread feeding a RecordChannel, and their stop
// (stream_session.hpp). Everything that touches a reader runs on the I/O thread.
#include "gpufilter/sources/stream_session.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include <boost/asio/post.hpp>

namespace gpufilter {

namespace asio = boost::asio;

StreamSession::StreamSession(StreamSessionConfig config)
    : config_(std::move(config)), channel_(config_.channel), stop_check_(io_), stop_watch_(io_) {}

StreamSession::~StreamSession() { end_io(); }

void StreamSession::add_follower(FollowConfig config, Notices& notices) {
  followers_.push_back(std::make_unique<Follower>(io_, channel_, std::move(config), notices));
}

void StreamSession::add_listener(ListenConfig config, Notices& notices) {
  listener_ = std::make_unique<Listener>(io_, channel_, std::move(config), notices);
}

void StreamSession::add_stdin(std::size_t max_line_bytes, int fd, std::uint32_t origin) {
  stdin_ = std::make_unique<StdinReader>(io_, channel_, max_line_bytes, fd, "stdin", origin);
}

void StreamSession::add_capture(CaptureConfig config, Notices& notices) {
  captures_.push_back(std::make_unique<CaptureSource>(io_, channel_, std::move(config), notices));
}

void StreamSession::add_kafka(std::unique_ptr<KafkaReader> reader) { kafkas_.push_back(std::move(reader)); }

void StreamSession::add_journal(JournalConfig config, Notices& notices) {
  journals_.push_back(std::make_unique<JournalReader>(io_, channel_, std::move(config), notices));
}

void StreamSession::start(const std::function<void(const std::string&)>& on_listening) {
  if (listener_) {
    listener_->start();
    for (const std::string& url : listener_->bound())
      if (on_listening) on_listening(url);
  }
  for (auto& f : followers_) f->start();
  // Standard input and capture files as the only sources: their end is the end of the run.
  const bool finite = followers_.empty() && !listener_ && kafkas_.empty() &&
                      std::none_of(captures_.begin(), captures_.end(), [](const auto& c) { return c->live(); }) &&
                      std::none_of(journals_.begin(), journals_.end(), [](const auto& j) { return j->follows(); });
  if (stdin_) {
    stdin_->start();
    if (finite) stdin_->on_end([this] { end_when_all_ended(); });
  }
  channel_.set_space_callback([this] { asio::post(io_, [this] { on_space(); }); });
  // After the space callback: a capture's thread may fill the channel at once.
  for (auto& c : captures_) {
    if (finite) c->on_end([this] { end_when_all_ended(); });
    c->start();
  }
  for (auto& k : kafkas_) k->start();
  for (auto& j : journals_) {
    if (finite) j->on_end([this] { end_when_all_ended(); });
    j->start();
  }
  if (config_.stop != nullptr) {
    stop_watch_.assign(::dup(config_.stop->fd()));
    stop_watch_.async_wait(asio::posix::stream_descriptor::wait_read, [this](const boost::system::error_code& ec) {
      if (!ec) stop_readers();
    });
  }
}

void StreamSession::on_space() {
  for (auto& f : followers_) f->on_space();
  if (listener_) listener_->on_space();
  if (stdin_) stdin_->on_space();
  for (auto& c : captures_) c->on_space();
  for (auto& k : kafkas_) k->on_space();
  for (auto& j : journals_) j->on_space();
}

bool StreamSession::readers_stopped() const {
  for (const auto& f : followers_)
    if (!f->stopped()) return false;
  for (const auto& c : captures_)
    if (!c->stopped()) return false;
  for (const auto& k : kafkas_)
    if (!k->stopped()) return false;
  for (const auto& j : journals_)
    if (!j->stopped()) return false;
  return (!listener_ || listener_->stopped()) && (!stdin_ || stdin_->stopped());
}

// Called as each finite reader ends by itself (they are the only readers): the run ends
// with the last of them.
void StreamSession::end_when_all_ended() {
  if (readers_stopped()) stop_readers();
}

// A reader whose last lines wait for room closes later, in on_space() or its handlers:
// look again every 20 ms until every one has.
void StreamSession::finish_when_stopped() {
  if (readers_stopped()) {
    channel_.finish();
    return;
  }
  stop_check_.expires_after(std::chrono::milliseconds(20));
  stop_check_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) finish_when_stopped();
  });
}

void StreamSession::stop_readers() {
  if (stopping_) return;
  stopping_ = true;
  for (auto& f : followers_) f->stop();
  if (listener_) listener_->stop();
  if (stdin_) stdin_->stop();
  for (auto& c : captures_) c->stop();
  for (auto& k : kafkas_) k->stop();
  for (auto& j : journals_) j->stop();
  finish_when_stopped();
}

void StreamSession::request_stop() {
  asio::post(io_, [this] { stop_readers(); });
}

void StreamSession::run_io() {
  work_ = std::make_unique<asio::executor_work_guard<asio::io_context::executor_type>>(io_.get_executor());
  io_thread_ = std::thread([this] { io_main(); });
}

// No exception leaves the thread: kEnd keeps it for join(), kRestart reports it.
void StreamSession::io_main() {
  if (config_.on_io_failure == StreamSessionConfig::IoFailure::kEnd) {
    try {
      io_.run();
    } catch (...) {
      io_failure_ = std::current_exception();
      channel_.finish();  // the scan side drains what came and returns
    }
    return;
  }
  for (;;) {
    try {
      io_.run();
      return;
    } catch (const std::exception& e) {
      if (config_.report_io_failure) config_.report_io_failure(e);
    }
  }
}

void StreamSession::end_io() noexcept {
  if (work_) work_->reset();
  io_.stop();
  if (io_thread_.joinable()) io_thread_.join();
}

void StreamSession::join() {
  end_io();
  if (io_failure_) std::rethrow_exception(std::exchange(io_failure_, nullptr));
}

void StreamSession::save_state(const std::function<void(const Error&)>& on_error) {
  const auto save = [&](const std::function<void()>& one) {
    if (!on_error) return one();
    try {
      one();
    } catch (const Error& e) {
      on_error(e);
    }
  };
  for (auto& f : followers_) save([&] { f->save_state(); });
  for (auto& k : kafkas_) save([&] { k->close(); });
}

StreamSession::Counters StreamSession::counters() const {
  Counters c;
  for (const auto& f : followers_) {
    const Follower::Counters one = f->counters();
    c.follow.lines_too_long += one.lines_too_long;
    c.follow.rotations += one.rotations;
    c.follow.truncations += one.truncations;
  }
  if (listener_) c.listen = listener_->counters();
  if (stdin_) c.stdin_lines_too_long = stdin_->lines_too_long();
  for (const auto& j : journals_) {
    c.journal_entries += j->entries();
    c.journal_entries_invalid += j->entries_invalid();
  }
  for (const auto& capture : captures_) {
    const CaptureSource::Counters one = capture->counters();
    c.capture.packets += one.packets;
    c.capture.lines_too_long += one.lines_too_long;
    c.capture.flows += one.flows;
    c.capture.gaps += one.gaps;
  }
  for (const auto& kafka : kafkas_) {
    const KafkaReader::Counters one = kafka->counters();
    c.kafka.records += one.records;
    c.kafka.bytes += one.bytes;
    c.kafka.lines_too_long += one.lines_too_long;
    c.kafka.rebalances += one.rebalances;
    c.kafka.commits += one.commits;
    c.kafka.commit_failures += one.commit_failures;
    c.kafka.lag += one.lag;
    c.kafka.partitions += one.partitions;
  }
  return c;
}

}  // namespace gpufilter
