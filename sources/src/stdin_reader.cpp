// StdinReader: a descriptor's bytes -> LineFramer -> RecordChannel on the I/O thread
// (stdin_reader.hpp). One read at a time; a short append parks the reader until on_space.
#include "gpufilter/sources/stdin_reader.hpp"

#include <utility>

#include <boost/asio/buffer.hpp>

namespace gpufilter {

namespace asio = boost::asio;

namespace {
constexpr std::size_t kReadBytes = 64u << 10;  // room for one read
}  // namespace

StdinReader::StdinReader(asio::io_context& io, RecordChannel& channel, std::size_t max_line_bytes, int fd,
                         std::string name, std::uint32_t origin)
    : channel_(channel), framer_(max_line_bytes), fd_(fd), stream_(io), name_(std::move(name)), origin_(origin) {}

void StdinReader::start() {
  id_ = channel_.new_stream_id();
  stream_.assign(::dup(fd_));
  channel_.open(id_, name_, kNoStream, origin_);
  open_ = true;
  read();
}

void StdinReader::read() {
  const auto room = framer_.prepare(kReadBytes);
  stream_.async_read_some(asio::buffer(room.data(), room.size()),
                          [this](const boost::system::error_code& ec, std::size_t n) {
                            if (!open_) return;
                            framer_.commit(n);
                            if (ec) {
                              framer_.end_of_stream();
                              at_end_ = true;
                            }
                            if (!hand_on()) {
                              parked_ = true;
                              return;
                            }
                            if (!ec) {
                              read();
                              return;
                            }
                            ended();
                          });
}

bool StdinReader::hand_on() {
  for (;;) {
    const LineFramer::Ready r = framer_.ready();
    if (r.lines.empty()) return true;
    const std::size_t taken = channel_.append(id_, r.offset, r.lines, r.skipped);
    framer_.consumed(taken);
    if (taken < r.lines.size()) return false;
  }
}

void StdinReader::close() {
  if (!open_) return;
  open_ = false;
  channel_.close(id_);
  boost::system::error_code ignored;
  stream_.close(ignored);
  closed();
}

void StdinReader::ended() {
  close();
  if (on_end_) on_end_();
}

void StdinReader::stop() {
  stopping_ = true;
  // A parked reader still holds whole lines: it closes once on_space() handed them on.
  if (open_ && !parked_) close();
}

void StdinReader::on_space() {
  if (!parked_ || !hand_on()) return;
  parked_ = false;
  // After a stop, or at the end of the input, nothing more is read. An input that ended
  // while parked is read once more: the read sees the end again and closes.
  if (stopping_ || !stream_.is_open()) {
    ended();
  } else {
    read();
  }
}

}  // namespace gpufilter
