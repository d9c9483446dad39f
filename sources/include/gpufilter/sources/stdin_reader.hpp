// StdinReader: a descriptor (standard input) as one more line stream on the I/O thread,
// beside Follower and Listener. Its bytes go through a LineFramer, like a socket's, so only
// whole lines reach the RecordChannel; a read whose lines the channel cannot take parks
// the reader until on_space() (backpressure), and the input is not read meanwhile.
//
// At the end of the input the unterminated last line becomes a line of its own; at stop()
// it is dropped, as a follower's is (everything whole is handed on first).
//
// A reader of another kind of descriptor derives from it (JournalReader: journalctl's
// output, each JSON entry made a line): hand_on() turns framed lines into records, and
// closed() follows the stream's close.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include "gpufilter/core/record_channel.hpp"
#include "gpufilter/sources/line_framer.hpp"

namespace gpufilter {

class StdinReader {
 public:
  // Reads a duplicate of `fd` as the stream named `name`.
  StdinReader(boost::asio::io_context& io, RecordChannel& channel, std::size_t max_line_bytes, int fd = STDIN_FILENO,
              std::string name = "stdin", std::uint32_t origin = 0);
  virtual ~StdinReader() = default;
  StdinReader(const StdinReader&) = delete;
  StdinReader& operator=(const StdinReader&) = delete;

  // Opens the stream and starts reading. Call before io.run() or on the I/O thread.
  void start();
  // On the I/O thread, once the input ended by itself and its stream is closed.
  void on_end(std::function<void()> callback) { on_end_ = std::move(callback); }
  // On the I/O thread: stops reading and closes the stream; lines waiting for room are
  // handed on first (the stream stays open until on_space() took them).
  void stop();
  // True once the stream is closed (stopped, or the input ended), or before start().
  bool stopped() const noexcept { return !open_; }
  // On the I/O thread: the channel has room again; hand on what waits and read on.
  void on_space();
  // On the I/O thread, or once it has stopped.
  std::uint64_t lines_too_long() const noexcept { return framer_.lines_too_long(); }

 protected:
  // The framed lines to the channel; false: the channel is full (called again at on_space()).
  virtual bool hand_on();
  virtual void closed() {}  // the stream has closed (stopped, or its input ended)

  RecordChannel& channel_;
  LineFramer framer_;
  int fd_;
  StreamId id_ = kNoStream;
  bool stopping_ = false;
  bool at_end_ = false;  // the input ended (its end was read)

 private:
  void read();
  void close();
  void ended();    // the stream closed because the input ended

  boost::asio::posix::stream_descriptor stream_;
  std::string name_;
  std::uint32_t origin_ = 0;
  bool open_ = false;
  bool parked_ = false;    // lines wait for room: resumed by on_space()
  std::function<void()> on_end_;
};

}  // namespace gpufilter
