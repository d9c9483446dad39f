// Stream mode (stream_mode.hpp): the options -> a StreamSession and a StreamGrep, run, and
// the --stats fields and notices of what the readers dropped.
#include "stream_mode.hpp"

#include "gpufilter/sources/kafka_module.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "gpufilter/core/errors.hpp"
#include "gpufilter/core/record_channel.hpp"
#include "gpufilter/grep/stream_grep.hpp"
#include "gpufilter/sources/stream_session.hpp"

namespace gpufilter {

namespace {

// `gpufilter --follow x log >> log` would follow its own output: each line it writes is a
// new line of the followed file, selected again, forever. grep's rule for its inputs
// (main.cpp), applied to the followed files as they are at the start; throws ConfigError.
void refuse_output_as_followed_file(const cli::Options& o) {
  const bool writes_lines = !o.quiet && o.list == cli::ListMode::kNone && !o.count && !(o.max_count && *o.max_count <= 1);
  struct stat out {};
  if (!writes_lines || ::fstat(STDOUT_FILENO, &out) != 0 || !S_ISREG(out.st_mode)) return;
  for (const std::string& path : o.files) {
    struct stat in {};
    if (::stat(path.c_str(), &in) == 0 && in.st_dev == out.st_dev && in.st_ino == out.st_ino)
      throw ConfigError(path + ": input file is also the output");
  }
}

FollowConfig follow_config(const cli::Options& o) {
  FollowConfig follow;
  follow.paths = o.files;
  follow.from_start = o.from_start;
  follow.state_path = o.state_path;
  if (o.poll_interval_ms) {
    follow.use_inotify = false;
    follow.poll_interval = std::chrono::milliseconds(*o.poll_interval_ms);
  }
  follow.max_line_bytes = o.max_line_bytes;
  return follow;
}

// Throws ConfigError for a bad URL: after the follower was built, so that a bad state
// file is still reported first.
ListenConfig listen_config(const cli::Options& o) {
  ListenConfig listen;
  for (const std::string& url : o.listen) listen.urls.push_back(parse_listen_url(url));
  listen.max_line_bytes = o.max_line_bytes;
  listen.max_connections = o.max_connections;
  return listen;
}

// --stats fields of the readers, and the notices of what they dropped or refused.
void reader_stats(const cli::Options& o, const StreamSession& session, std::string& s, Notices& notices) {
  auto field = [&](const char* name, std::uint64_t value) {
    s += ",\"";
    s += name;
    s += "\":";
    s += std::to_string(value);
  };
  const StreamSession::Counters counters = session.counters();
  std::uint64_t too_long = 0;
  if (session.following()) {
    const Follower::Counters& c = counters.follow;
    field("rotations", c.rotations);
    field("truncations", c.truncations);
    too_long += c.lines_too_long;
  }
  if (session.listening()) {
    const Listener::Counters& c = counters.listen;
    field("connections", c.connections);
    field("connections_refused", c.connections_refused);
    field("connections_lost", c.connections_lost);
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
    if (c.connections_lost > 0)
      notices.notice(std::to_string(c.connections_lost) + " connections accepted but closed unread");
  }
  field("lines_too_long", too_long);
  if (too_long > 0)
    notices.notice(std::to_string(too_long) + " lines longer than --max-line-bytes (" +
                   std::to_string(o.max_line_bytes) + ") dropped");
}

}  // namespace

StreamResult run_streams(const cli::Options& o, Scanner& scanner, const SearchOptions& searching, Sink& sink,
                         StopSignal& stop, Notices& notices) {
  StreamSessionConfig config;
  config.channel = RecordChannel::Config{scanner.chunk_bytes(), 3};
  config.on_io_failure = StreamSessionConfig::IoFailure::kEnd;  // a reader's failure fails the run
  config.stop = &stop;
  StreamSession session(config);
  if (o.follow) {
    refuse_output_as_followed_file(o);
    session.add_follower(follow_config(o), notices);
  }
  if (!o.listen.empty()) session.add_listener(listen_config(o), notices);
  for (const std::string& url : o.kafka) session.add_kafka(open_kafka_url(session.channel(), url, o.max_line_bytes, notices));
  session.start([&](const std::string& url) { notices.notice("listening on " + url); });

  StreamGrepConfig piping;
  piping.stop_on_first_selected = searching.stop_on_first && o.quiet;
  // With -m, -l or -L every followed file can be decided, and then nothing is left to do.
  const bool decidable = searching.stop_on_first || searching.max_count != SearchOptions{}.max_count;
  if (o.follow && o.listen.empty() && o.kafka.empty() && decidable) piping.inputs_to_decide = o.files.size();
  StreamGrep pipeline(scanner, searching, sink, session.channel(), piping);
  pipeline.on_decided([&] { session.request_stop(); });

  session.run_io();
  try {
    pipeline.run();
  } catch (...) {
    session.end_io();
    throw;
  }
  session.join();
  // Last: the state names only what is written and flushed.
  if (!o.state_path.empty()) session.save_state();

  StreamResult result;
  result.selected = pipeline.selected();
  result.bytes = pipeline.bytes_scanned();
  result.stats += ",\"batches\":" + std::to_string(pipeline.batches());
  result.stats += ",\"lines\":" + std::to_string(pipeline.lines());
  reader_stats(o, session, result.stats, notices);
  return result;
}

}  // namespace gpufilter
