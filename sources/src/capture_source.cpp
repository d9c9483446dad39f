// CaptureSource: PcapReader -> decode -> lines (per packet, or per TCP flow direction
// through TcpReassembler and a LineFramer each) -> RecordChannel, on a thread of its own
// (capture_source.hpp). Everything but start(), stop(), on_space(), stopped() and
// counters() runs on that thread.
#include "gpufilter/sources/capture_source.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <unordered_map>
#include <utility>

#include <boost/asio/post.hpp>

#include "gpufilter/core/errors.hpp"
#include "gpufilter/core/libpcap.hpp"
#include "gpufilter/sources/line_framer.hpp"
#include "gpufilter/sources/packet.hpp"

namespace gpufilter {

namespace {

// PcapReader says "--bpf EXPR: why" (gpufilter's option); the daemon names its own key.
std::string without_option(const std::string& message) {
  const std::string option = "--bpf ";
  return message.starts_with(option) ? message.substr(option.size()) : message;
}

void require_supported(const PcapReader& reader, const std::string& name) {
  const int link_type = reader.link_type();
  if (link_type_supported(link_type)) return;
  throw SourceError(name, EINVAL,
                    name + ": unsupported link type " + link_type_name(link_type) +
                        " (Ethernet, Linux cooked SLL/SLL2, raw IP and loopback are supported)");
}

std::unique_ptr<PcapReader> open_reader(const CaptureConfig& c, const std::string& name) {
  try {
    return c.interface.empty() ? PcapReader::open_file(c.file, c.bpf) : PcapReader::open_live(c.interface, c.bpf);
  } catch (const ConfigError& e) {
    throw ConfigError(name + ": bpf: " + without_option(e.what()));
  }
}

// "192.0.2.1:80" or "[2001:db8::1]:80": one end of a packet (its source or destination).
std::string endpoint(const PacketInfo& info, bool source) {
  const std::string address = address_text(info, source);
  const std::string port = std::to_string(source ? info.sport : info.dport);
  return info.ip_version == 6 ? "[" + address + "]:" + port : address + ":" + port;
}

constexpr auto kSpaceRetry = std::chrono::milliseconds(100);  // a lost wake-up costs at most this

}  // namespace

void check_bpf(const std::string& bpf) {
  if (bpf.empty()) return;
  try {
    const BpfFilter filter(DLT_EN10MB, 262144, bpf);
  } catch (const ConfigError& e) {
    throw ConfigError(without_option(e.what()));
  }
}

void check_capture_file(const std::string& path, const std::string& bpf) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw SourceError(path, errno);
  if (S_ISDIR(st.st_mode)) throw SourceError(path, EISDIR);
  if (!S_ISREG(st.st_mode)) {
    // A named pipe: its header comes once a writer opens it, at the start.
    check_bpf(bpf);
    return;
  }
  std::unique_ptr<PcapReader> reader;
  try {
    reader = PcapReader::open_file(path, bpf);
  } catch (const ConfigError& e) {
    throw ConfigError(without_option(e.what()));
  }
  require_supported(*reader, path);
}

// ---- The capture thread's state.

struct CaptureSource::Work {
  struct Direction {
    StreamId id = kNoStream;  // opened at its first bytes
    std::unique_ptr<LineFramer> framer;
    std::uint64_t next = 0;     // stream offset past the last byte received
    std::uint64_t counted = 0;  // of framer->lines_too_long(), added to the counter already
  };
  struct Flow {
    std::string client;  // "ADDRESS:PORT" of the side that sent the flow's first segment seen
    std::string server;
    Direction directions[2];  // 0: client -> server
  };
  std::unique_ptr<TcpReassembler> reassembler;  // stream mode
  std::unordered_map<std::uint64_t, Flow> flows;  // open flows, named
  std::uint64_t last_flow = 0;          // the highest flow id named or closed (ids only grow)
  const PacketInfo* current = nullptr;  // the segment being reassembled: a new flow's first
  std::int64_t last_expire = 0;
  // Per packet: the capture's stream, its offset, over-long lines not yet reported, and
  // the lines of the packet at hand.
  StreamId stream = kNoStream;
  std::uint64_t offset = 0;
  std::uint64_t skipped = 0;
  std::string piece;

  // The flow `id`, named at first sight: callbacks for a flow the current segment opened
  // come before segment() returns its id, and its client is the segment's sender.
  Flow& named(std::uint64_t id) {
    const auto it = flows.find(id);
    if (it != flows.end()) return it->second;
    Flow f;
    if (current != nullptr) {
      f.client = endpoint(*current, true);
      f.server = endpoint(*current, false);
    } else {
      f.client = "flow " + std::to_string(id) + " client";
      f.server = "server";
    }
    last_flow = std::max(last_flow, id);
    return flows.emplace(id, std::move(f)).first->second;
  }
};

CaptureSource::CaptureSource(boost::asio::io_context& io, RecordChannel& channel, CaptureConfig config,
                             Notices& notices)
    : io_(io),
      channel_(channel),
      config_(std::move(config)),
      notices_(notices),
      name_(config_.interface.empty() ? "pcap:" + config_.file : "interface:" + config_.interface),
      work_(std::make_unique<Work>()) {
  reader_ = open_reader(config_, name_);
  require_supported(*reader_, live() ? config_.interface : config_.file);
  link_type_ = reader_->link_type();
  if (config_.stream) {
    work_->reassembler = std::make_unique<TcpReassembler>(
        config_.reassembly,
        [this](std::uint64_t flow, int direction, std::uint64_t offset, std::span<const std::uint8_t> bytes) {
          deliver(flow, direction, offset, bytes);
        },
        [this](std::uint64_t flow) { flow_closed(flow); });
  }
}

CaptureSource::~CaptureSource() {
  abandon_.store(true);
  stopping_.store(true);
  if (live()) reader_->break_loop();
  {
    const std::lock_guard lock(mutex_);
    space_cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

void CaptureSource::start() {
  done_.store(false, std::memory_order_release);
  thread_ = std::thread([this] { run(); });
}

void CaptureSource::stop() noexcept {
  stopping_.store(true);
  if (live()) reader_->break_loop();  // wakes libpcap's poll
}

void CaptureSource::on_space() {
  const std::lock_guard lock(mutex_);
  space_ = true;
  space_cv_.notify_all();
}

CaptureSource::Counters CaptureSource::counters() const noexcept {
  Counters c;
  c.packets = packets_.load(std::memory_order_relaxed);
  c.lines_too_long = lines_too_long_.load(std::memory_order_relaxed);
  c.flows = flows_.load(std::memory_order_relaxed);
  c.gaps = gaps_.load(std::memory_order_relaxed);
  return c;
}

void CaptureSource::report(const std::string& message) noexcept {
  try {
    notices_.notice(message);
  } catch (...) {
    // Out of memory for a notice: the source ends as it would have.
  }
}

// ---- The capture thread.

// No exception leaves: a failure is reported and ends the source; its streams close
// whatever happened. `on_end` hears of an end that was not a stop.
void CaptureSource::run() noexcept {
  bool ended = true;
  try {
    ended = read_packets() == Ending::kEnd;
  } catch (const Abandoned&) {
    ended = false;
  } catch (const PcapError& e) {
    // "FILE: truncated capture at byte N: ...": every packet before it was handed on.
    report(std::string(e.what()) + " (the capture source ends)");
  } catch (const SourceError& e) {
    report(std::string(e.what()) + " (the capture source ends)");
  } catch (const std::exception& e) {
    report(name_ + ": " + e.what() + " (the capture source ends)");
  }
  if (!abandon_.load()) {
    try {
      finish_streams();
    } catch (const Abandoned&) {
      ended = false;
    } catch (const std::exception& e) {
      report(name_ + ": " + e.what());
    }
  }
  close_streams();
  if (abandon_.load()) ended = false;
  done_.store(true, std::memory_order_release);
  if (ended) boost::asio::post(io_, [this] {
      if (on_end_) on_end_();
    });
}

CaptureSource::Ending CaptureSource::read_packets() {
  RawPacket raw;
  while (!stopping_.load(std::memory_order_relaxed)) {
    const PcapReader::Read got = reader_->read(raw);
    // A live capture ends only by break_loop(), that is by a stop.
    if (got == PcapReader::Read::kEnd) return live() ? Ending::kStopped : Ending::kEnd;
    if (got == PcapReader::Read::kIdle) {
      // A quiet interface: flows idle past the timeout end by the wall clock (capture time).
      expire(static_cast<std::int64_t>(std::time(nullptr)));
      continue;
    }
    packets_.fetch_add(1, std::memory_order_relaxed);
    const PacketInfo info = decode_packet(link_type_, raw.data);
    if (work_->reassembler && info.transport == PacketInfo::Transport::kTcp) {
      segment(raw, info);
      continue;
    }
    const std::size_t begin = std::min(info.payload_offset, raw.data.size());
    packet_lines(raw.data.subspan(begin, std::min(info.payload_length, raw.data.size() - begin)));
  }
  return Ending::kStopped;
}

// One packet's payload as lines of the capture's stream: cut at '\n', an unterminated last
// piece ended with one; over-long lines dropped, the lines before them handed on first so
// that `skipped` tells where they were.
void CaptureSource::packet_lines(std::span<const std::uint8_t> payload) {
  Work& w = *work_;
  const char* data = reinterpret_cast<const char*>(payload.data());
  const std::size_t size = payload.size();
  std::uint64_t piece_offset = w.offset;
  const auto flush = [&] {
    if (w.piece.empty()) return;
    if (w.stream == kNoStream) {
      w.stream = channel_.new_stream_id();
      channel_.open(w.stream, name_);
    }
    hand_on(w.stream, piece_offset, w.piece, w.skipped);
    w.skipped = 0;
    w.piece.clear();
  };
  w.piece.clear();
  for (std::size_t at = 0; at < size;) {
    const void* nl = std::memchr(data + at, '\n', size - at);
    const std::size_t end = nl != nullptr ? static_cast<std::size_t>(static_cast<const char*>(nl) - data) : size;
    const std::size_t length = end - at;
    if (length > config_.max_line_bytes) {
      flush();
      ++w.skipped;
      lines_too_long_.fetch_add(1, std::memory_order_relaxed);
      piece_offset = w.offset + length + 1;
    } else {
      w.piece.append(data + at, length).push_back('\n');
    }
    w.offset += length + 1;
    at = end + 1;
  }
  flush();
}

void CaptureSource::segment(const RawPacket& raw, const PacketInfo& info) {
  Work& w = *work_;
  struct Current {
    Work& w;
    ~Current() { w.current = nullptr; }
  } const current{w};
  w.current = &info;
  const std::uint64_t flow = w.reassembler->segment(info, raw.data, raw.seconds);
  // A new flow without bytes yet is named now: its client sent this segment.
  if (flow > w.last_flow) w.named(flow);
  w.current = nullptr;
  const TcpReassembler::Counters c = w.reassembler->counters();
  flows_.store(c.flows, std::memory_order_relaxed);
  gaps_.store(c.gaps, std::memory_order_relaxed);
  expire(raw.seconds);
}

void CaptureSource::expire(std::int64_t seconds) {
  Work& w = *work_;
  if (!w.reassembler || seconds - w.last_expire < 1) return;
  w.reassembler->expire(seconds);
  w.last_expire = seconds;
}

// In-order bytes of one flow direction: its stream opens at the first; a gap (bytes never
// captured) ends the line before it, so no line is made of bytes that were not adjacent.
void CaptureSource::deliver(std::uint64_t flow, int direction, std::uint64_t offset,
                            std::span<const std::uint8_t> bytes) {
  if (bytes.empty()) return;
  Work::Flow& f = work_->named(flow);
  Work::Direction& d = f.directions[direction];
  if (d.id == kNoStream) {
    d.id = channel_.new_stream_id();
    channel_.open(d.id, name_ + " " + (direction == 0 ? f.client + " -> " + f.server : f.server + " -> " + f.client));
    d.framer = std::make_unique<LineFramer>(config_.max_line_bytes, offset);
  } else if (offset != d.next) {
    end_lines(d.id, *d.framer, d.counted);
    d.framer = std::make_unique<LineFramer>(config_.max_line_bytes, offset);
    d.counted = 0;
  }
  const std::span<char> room = d.framer->prepare(bytes.size());
  std::memcpy(room.data(), bytes.data(), bytes.size());
  d.framer->commit(bytes.size());
  d.next = offset + bytes.size();
  hand_on(d.id, *d.framer, d.counted);
  d.framer->release();  // an idle flow keeps only its partial line
}

// The flow ended (FIN, RST, idle, evicted, or the end of the capture): each direction's
// unterminated last line is handed on, then its stream closes.
void CaptureSource::flow_closed(std::uint64_t flow) {
  Work& w = *work_;
  const auto it = w.flows.find(flow);
  if (it == w.flows.end()) {
    w.last_flow = std::max(w.last_flow, flow);  // never named: ended in its first segment
    return;
  }
  for (Work::Direction& d : it->second.directions) {
    if (d.id == kNoStream) continue;
    end_lines(d.id, *d.framer, d.counted);
    channel_.close(d.id);
    d.id = kNoStream;
  }
  w.flows.erase(it);
}

void CaptureSource::end_lines(StreamId stream, LineFramer& framer, std::uint64_t& counted) {
  framer.end_of_stream();
  hand_on(stream, framer, counted);
}

// The end of the capture or a stop: the reassembler hands on what it holds (after its gaps)
// and ends every flow; then the capture's stream closes.
void CaptureSource::finish_streams() {
  Work& w = *work_;
  if (w.reassembler) {
    w.reassembler->finish();
    const TcpReassembler::Counters c = w.reassembler->counters();
    flows_.store(c.flows, std::memory_order_relaxed);
    gaps_.store(c.gaps, std::memory_order_relaxed);
    if (c.budget_gaps > 0) {
      report(name_ + ": " + std::to_string(c.budget_gaps) + " gaps (" + std::to_string(c.budget_gap_bytes) +
             " bytes) skipped because all flows together held more out-of-order data than the limit");
    }
  }
  while (!w.flows.empty()) flow_closed(w.flows.begin()->first);
  if (w.stream != kNoStream) {
    channel_.close(w.stream);
    w.stream = kNoStream;
  }
}

// Whatever is still open after a failure or the destructor: closed without more lines.
void CaptureSource::close_streams() noexcept {
  Work& w = *work_;
  try {
    for (auto& [id, flow] : w.flows) {
      for (Work::Direction& d : flow.directions) {
        if (d.id != kNoStream) channel_.close(d.id);
        d.id = kNoStream;
      }
    }
    if (w.stream != kNoStream) channel_.close(w.stream);
  } catch (...) {
    // Out of memory for a close event: the consumer forgets the stream at the channel's end.
  }
  w.flows.clear();
  w.stream = kNoStream;
}

void CaptureSource::hand_on(StreamId stream, std::uint64_t offset, std::string_view lines, std::uint64_t skipped) {
  while (!lines.empty()) {
    const std::size_t taken = append(stream, offset, lines, skipped);
    lines.remove_prefix(taken);
    offset += taken;
    if (taken > 0) skipped = 0;
  }
}

void CaptureSource::hand_on(StreamId stream, LineFramer& framer, std::uint64_t& counted) {
  for (LineFramer::Ready r = framer.ready(); !r.lines.empty(); r = framer.ready())
    framer.consumed(append(stream, r.offset, r.lines, r.skipped));
  const std::uint64_t too_long = framer.lines_too_long();
  lines_too_long_.fetch_add(too_long - counted, std::memory_order_relaxed);
  counted = too_long;
}

std::size_t CaptureSource::append(StreamId stream, std::uint64_t offset, std::string_view lines,
                                  std::uint64_t skipped) {
  if (abandon_.load()) throw Abandoned{};
  {
    const std::lock_guard lock(mutex_);
    space_ = false;  // before the append: an on_space() after its shortfall is not lost
  }
  const std::size_t taken = channel_.append(stream, offset, lines, skipped);
  if (taken < lines.size()) wait_for_space();
  return taken;
}

void CaptureSource::wait_for_space() {
  std::unique_lock lock(mutex_);
  space_cv_.wait_for(lock, kSpaceRetry, [this] { return space_ || abandon_.load(); });
  if (abandon_.load()) throw Abandoned{};
}

}  // namespace gpufilter
