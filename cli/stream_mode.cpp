#include "stream_mode.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <optional>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "gpufilter/core/record_channel.hpp"
#include "gpufilter/grep/stream_grep.hpp"
#include "gpufilter/sources/follower.hpp"
#include "gpufilter/sources/listener.hpp"

namespace gpufilter {

namespace asio = boost::asio;

StreamResult run_streams(const cli::Options& o, Scanner& scanner, const SearchOptions& searching, Sink& sink,
                         StopSignal& stop, Notices& notices) {
  asio::io_context io;
  RecordChannel channel(RecordChannel::Config{scanner.chunk_bytes(), 3});

  std::optional<Follower> follower;
  std::optional<Listener> listener;
  if (o.follow) {
    FollowConfig follow;
    follow.paths = o.files;
    follow.from_start = o.from_start;
    follow.state_path = o.state_path;
    if (o.poll_interval_ms) {
      follow.use_inotify = false;
      follow.poll_interval = std::chrono::milliseconds(*o.poll_interval_ms);
    }
    follow.max_line_bytes = o.max_line_bytes;
    follower.emplace(io, channel, follow, notices);
  }
  if (!o.listen.empty()) {
    ListenConfig listen;
    for (const std::string& url : o.listen) listen.urls.push_back(parse_listen_url(url));
    listen.max_line_bytes = o.max_line_bytes;
    listen.max_connections = o.max_connections;
    listener.emplace(io, channel, listen, notices);
    listener->start();
    for (const std::string& url : listener->bound()) notices.notice("listening on " + url);
  }
  if (follower) follower->start();

  // Everything below that touches the readers runs on the I/O thread.
  bool stopping = false;
  asio::steady_timer stop_check(io);
  auto finish_if_stopped = [&] {
    if ((!follower || follower->stopped()) && (!listener || listener->stopped())) {
      channel.finish();
      stop_check.cancel();
    }
  };
  std::function<void()> check_again = [&] {
    // A reader whose last lines wait for room closes later, in on_space() or its handlers.
    stop_check.expires_after(std::chrono::milliseconds(20));
    stop_check.async_wait([&](const boost::system::error_code& ec) {
      if (ec) return;
      finish_if_stopped();
      if (!channel.finished()) check_again();
    });
  };
  auto stop_readers = [&] {
    if (stopping) return;
    stopping = true;
    if (follower) follower->stop();
    if (listener) listener->stop();
    finish_if_stopped();
    check_again();
  };
  channel.set_space_callback([&] {
    asio::post(io, [&] {
      if (follower) follower->on_space();
      if (listener) listener->on_space();
    });
  });
  asio::posix::stream_descriptor stop_watch(io, ::dup(stop.fd()));
  stop_watch.async_wait(asio::posix::stream_descriptor::wait_read, [&](const boost::system::error_code& ec) {
    if (!ec) stop_readers();
  });

  StreamGrepConfig piping;
  piping.stop_on_first_selected = searching.stop_on_first && o.quiet;
  // With -m, -l or -L every followed file can be decided, and then nothing is left to do.
  const bool decidable = searching.stop_on_first || searching.max_count != SearchOptions{}.max_count;
  if (o.follow && o.listen.empty() && decidable) piping.inputs_to_decide = o.files.size();
  StreamGrep pipeline(scanner, searching, sink, channel, piping);
  pipeline.on_decided([&] { asio::post(io, stop_readers); });

  auto work = asio::make_work_guard(io);
  std::exception_ptr io_failure;
  std::thread io_thread([&] {
    try {
      io.run();
    } catch (...) {
      io_failure = std::current_exception();
      channel.finish();  // the scan side drains what came and returns
    }
  });
  auto join = [&] {
    work.reset();
    io.stop();
    io_thread.join();
  };
  try {
    pipeline.run();
  } catch (...) {
    join();
    throw;
  }
  join();
  if (io_failure) std::rethrow_exception(io_failure);
  // Last: the state names only what is written and flushed.
  if (follower && !o.state_path.empty()) follower->save_state();

  StreamResult result;
  result.selected = pipeline.selected();
  result.bytes = pipeline.bytes_scanned();
  std::string& s = result.stats;
  auto field = [&](const char* name, std::uint64_t value) {
    s += ",\"";
    s += name;
    s += "\":";
    s += std::to_string(value);
  };
  field("batches", pipeline.batches());
  field("lines", pipeline.lines());
  std::uint64_t too_long = 0;
  if (follower) {
    const Follower::Counters c = follower->counters();
    field("rotations", c.rotations);
    field("truncations", c.truncations);
    too_long += c.lines_too_long;
  }
  if (listener) {
    const Listener::Counters c = listener->counters();
    field("connections", c.connections);
    field("connections_refused", c.connections_refused);
    field("datagrams", c.datagrams);
    field("datagrams_dropped", c.datagrams_dropped);
    field("datagrams_dropped_kernel", c.datagrams_dropped_kernel);
    too_long += c.lines_too_long;
    const std::uint64_t dropped = c.datagrams_dropped + c.datagrams_dropped_kernel;
    if (dropped > 0)
      notices.notice(std::to_string(dropped) + " UDP datagrams dropped (" + std::to_string(c.datagrams_dropped) +
                     " found no room, " + std::to_string(c.datagrams_dropped_kernel) +
                     " overflowed the socket buffer)");
    if (c.connections_refused > 0)
      notices.notice(std::to_string(c.connections_refused) + " connections refused over --max-connections");
  }
  field("lines_too_long", too_long);
  if (too_long > 0)
    notices.notice(std::to_string(too_long) + " lines longer than --max-line-bytes (" +
                   std::to_string(o.max_line_bytes) + ") dropped");
  return result;
}

}  // namespace gpufilter
