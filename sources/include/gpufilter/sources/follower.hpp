// Follower: `tail -F` for gpufilter. Follows files as they grow, across rotation by
// rename-and-create, copytruncate, and delete-and-re-create, and files that appear only
// later. Runs on the I/O thread's boost::asio::io_context: inotify (watching each file's
// directory) wakes it, and a timer re-checks every poll interval as a fallback (the only
// mechanism when inotify is unavailable or disabled).
//
// Each followed path is one input: its lines go to the RecordChannel under a stream id
// per opened file; after a rotation the new file's stream continues the old one's input
// (RecordChannel::open's `continues`). Before switching to a new file the old one is read
// to its end, so a line written just before a rotation is read from the old file.
//
// --state FILE: for every path, the identity (device, inode, a fingerprint of its first
// bytes) and the offset up to which the consumer has acknowledged its output. start()
// resumes there; follow_state.hpp states the exact guarantee (docs/STREAMING.md quotes it).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "gpufilter/core/record_channel.hpp"
#include "gpufilter/core/notices.hpp"

namespace gpufilter {

struct FollowConfig {
  std::vector<std::string> paths;
  bool from_start = false;       // read what the files hold already (else start at their end)
  std::string state_path;        // empty: no state file
  bool use_inotify = true;       // false: poll only (also the fallback when inotify fails)
  std::chrono::milliseconds poll_interval{200};  // re-check period when polling only
  std::size_t max_line_bytes = 1u << 20;
  std::size_t read_bytes = 1u << 20;              // one read() of a file
  std::chrono::milliseconds state_interval{100};  // how often the state file is rewritten
  std::uint32_t origin = 0;  // BatchEntry::origin of its streams
};

class Follower {
 public:
  // Throws ConfigError when the state file exists but cannot be read or parsed.
  Follower(boost::asio::io_context& io, RecordChannel& channel, FollowConfig config, Notices& notices);
  ~Follower();
  Follower(const Follower&) = delete;
  Follower& operator=(const Follower&) = delete;

  // Opens the files (those missing are waited for, with a notice) and starts watching.
  // First raises the soft open-file limit (RLIMIT_NOFILE) toward the hard limit to fit
  // every file; files for which no descriptor is left wait, are named in one notice, and
  // are tried again at each poll. Call before io.run() or on the I/O thread.
  void start();
  // On the I/O thread: stops reading and closes every stream (ends_input). A file's
  // unterminated last line is not handed on: a restart with --state reads it again.
  void stop();
  // True once stop() was called and every stream is closed, with everything it had to
  // hand on handed on (a stream still waiting for room stays open until on_space()).
  bool stopped() const;
  // On the I/O thread: the channel has room again; resume streams that were waiting.
  void on_space();
  // Writes the state file (temporary file + rename) from the channel's acknowledgements.
  // Throws ConfigError naming the file when it cannot be written. Any thread, once the
  // I/O thread has stopped; on the I/O thread otherwise.
  void save_state();

  struct Counters {
    std::uint64_t lines_too_long = 0;
    std::uint64_t rotations = 0;    // a new file took a path's place
    std::uint64_t truncations = 0;  // a file shrank below what was read (copytruncate)
  };
  Counters counters() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpufilter
