#include "packet_mode.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>
#include <chrono>
#include <optional>
#include <ctime>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "gpufilter/grep/word.hpp"
#include "gpufilter/core/errors.hpp"
#include "gpufilter/scan/record_scan.hpp"
#include "gpufilter/sinks/json.hpp"
#include "gpufilter/sources/packet.hpp"
#include "gpufilter/sinks/pcap_writer.hpp"
#include "gpufilter/sources/pcap_reader.hpp"
#include "gpufilter/sources/tcp_reassembler.hpp"

namespace gpufilter {
namespace {

// Record tags: a packet's (bit 63 set, its index), or a flow's data of one direction
// (flow << 2 | direction) and the flow's end (flow << 2 | 2).
constexpr std::uint64_t kPacketTag = std::uint64_t{1} << 63;
constexpr std::uint64_t kFlowEnd = 2;


std::string timestamp(std::int64_t seconds, std::uint32_t nanoseconds, bool nano) {
  std::tm tm{};
  const std::time_t t = static_cast<std::time_t>(seconds);
  gmtime_r(&t, &tm);
  char text[64];
  const std::size_t n = std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &tm);
  char frac[24];
  if (nano) std::snprintf(frac, sizeof frac, ".%09uZ", nanoseconds);
  else std::snprintf(frac, sizeof frac, ".%06uZ", nanoseconds / 1000);
  return std::string(text, n) + frac;
}

std::string endpoint(const PacketInfo& info, bool source) {
  if (info.ip_version == 0) return "-";
  const std::string address = address_text(info, source);
  const std::uint16_t port = source ? info.sport : info.dport;
  const bool ports = info.transport == PacketInfo::Transport::kTcp || info.transport == PacketInfo::Transport::kUdp;
  if (!ports) return address;
  return (info.ip_version == 6 ? "[" + address + "]" : address) + ":" + std::to_string(port);
}

const char* protocol_name(const PacketInfo& info) {
  switch (info.transport) {
    case PacketInfo::Transport::kTcp: return "TCP";
    case PacketInfo::Transport::kUdp: return "UDP";
    default: return info.ip_version != 0 ? "IP" : "FRAME";
  }
}

std::string tcp_flags(std::uint8_t f) {
  std::string s;
  if (f & 0x02) s += 'S';
  if (f & 0x10) s += 'A';
  if (f & 0x08) s += 'P';
  if (f & 0x01) s += 'F';
  if (f & 0x04) s += 'R';
  if (f & 0x20) s += 'U';
  return s;
}

// Writing the output failed: standard output (OutputError) or the --pcap-out file. Either
// ends the run: nothing more can be written, and going on would report the same failure
// again for every packet. The message names the file; for standard output it is grep's.
class CaptureOutputError final : public Error {
 public:
  using Error::Error;
};

// A packet whose record is being scanned: kept until its result comes back.
struct Pending {
  RawPacket raw;
  std::vector<std::uint8_t> frame;
  PacketInfo info;
};

struct Flow {
  PacketInfo first;  // direction 0's first packet: the client
  std::int64_t seconds = 0;
  std::uint32_t nanoseconds = 0;
  std::string carry[2];  // the last longest-pattern - 1 bytes of each direction
  std::uint64_t bytes[2] = {0, 0};
  std::uint64_t packets = 0;
  std::set<std::uint32_t> patterns;  // unique ids found
  bool matched = false;
  int match_direction = 0;
  std::uint64_t match_offset = 0;
  bool written = false;  // single-pass --pcap-out: its packets are being written
};

class CaptureRun {
 public:
  CaptureRun(const cli::Options& o, Scanner& scanner, const PatternSet& patterns, Output& out, StopSignal& stop,
             Notices& notices)
      : o_(o),
        scanner_(scanner),
        table_(scanner.table()),
        out_(out),
        stop_(stop),
        notices_(notices),
        records_(scanner, [this](std::uint64_t tag, std::string_view bytes, std::size_t overlap,
                                 std::span<const Occurrence> occurrences) { delivered(tag, bytes, overlap, occurrences); }) {
    // The text of each unique pattern: the first given pattern that became it.
    std::vector<bool> seen(table_.unique_count(), false);
    pattern_text_.resize(table_.unique_count());
    pattern_id_.resize(table_.unique_count());
    for (std::size_t i = 0; i < patterns.size(); ++i) {
      const std::uint32_t u = table_.unique_of(i);
      if (u == PatternTable::kNoPattern || seen[u]) continue;
      seen[u] = true;
      pattern_text_[u] = patterns.patterns()[i];
      pattern_id_[u] = static_cast<std::uint32_t>(i);
    }
    carry_ = table_.max_length() > 0 ? table_.max_length() - 1 : 0;
    with_name_ = o.with_filename.value_or(o.pcaps.size() > 1);
  }

  CaptureResult run() {
    std::vector<std::string> inputs = o_.pcaps;
    const bool live = !o_.interface.empty();
    if (live) inputs = {o_.interface};
    for (const std::string& input : inputs) {
      if (done_ || stop_.requested()) break;
      std::unique_ptr<PcapReader> reader;
      try {
        reader = live ? PcapReader::open_live(input, o_.bpf) : PcapReader::open_file(input, o_.bpf);
      } catch (const Error& e) {
        fail(e.what());
        continue;
      }
      run_input(*reader, input, live);
    }
    CaptureResult r;
    r.selected = selected_total_;
    r.packets = packets_;
    r.bytes = records_.bytes_scanned();
    r.trouble = trouble_;
    return r;
  }

 private:
  void fail(const std::string& message) {
    if (!o_.no_messages) {
      out_.flush();
      notices_.notice(message);
    }
    trouble_ = true;
  }

  void run_input(PcapReader& reader, const std::string& input, bool live) {
    name_ = reader.name();
    link_type_ = reader.link_type();
    nano_ = reader.nanosecond();
    if (!link_type_supported(link_type_)) {
      fail(name_ + ": unsupported link type " + link_type_name(link_type_) +
           " (Ethernet, Linux cooked SLL/SLL2, raw IP and loopback are supported)");
      return;
    }
    selected_input_ = 0;
    const bool two_pass_out = !o_.pcap_out.empty() && o_.stream && !live && input != "-";
    if (!o_.pcap_out.empty() && !writer_) {
      try {
        writer_ = std::make_unique<PcapWriter>(o_.pcap_out, link_type_, reader.snaplen(), nano_);
        writer_link_type_ = link_type_;
      } catch (const Error& e) {
        fail(e.what());
        done_ = true;
        return;
      }
    } else if (writer_ && writer_link_type_ != link_type_) {
      fail(name_ + ": link type " + link_type_name(link_type_) + " differs from the first capture's; --pcap-out " +
           "holds one link type");
      return;
    }
    single_pass_out_ = writer_ != nullptr && !two_pass_out;
    if (o_.stream) {
      reassembler_ = std::make_unique<TcpReassembler>(
          ReassemblyConfig{},
          [this](std::uint64_t flow, int direction, std::uint64_t offset, std::span<const std::uint8_t> bytes) {
            stream_bytes(flow, direction, offset, bytes);
          },
          [this](std::uint64_t flow) { records_.add((flow << 2) | kFlowEnd, {}); });
    }
    std::int64_t last_expire = 0;
    // libpcap waits on a live interface in its own poll, which a signal does not end: a
    // watcher breaks the loop when the stop comes (pcap_breakloop wakes that poll).
    int wake[2] = {-1, -1};
    std::thread watcher;
    if (live && ::pipe2(wake, O_CLOEXEC) == 0) {
      watcher = std::thread([&reader, &wake, this] {
        pollfd p[2] = {{stop_.fd(), POLLIN, 0}, {wake[0], POLLIN, 0}};
        while (::poll(p, 2, -1) < 0 && errno == EINTR) {
        }
        if (p[0].revents != 0) reader.break_loop();
      });
    }
    struct StopWatcher {
      std::thread& thread;
      int* fds;
      ~StopWatcher() {
        if (thread.joinable()) {
          const char byte = 0;
          [[maybe_unused]] const ssize_t n = ::write(fds[1], &byte, 1);
          thread.join();
        }
        if (fds[0] >= 0) ::close(fds[0]);
        if (fds[1] >= 0) ::close(fds[1]);
      }
    } stop_watcher{watcher, wake};
    try {
      RawPacket raw;
      while (!done_ && !stop_.requested()) {
        const PcapReader::Read got = reader.read(raw);
        if (got == PcapReader::Read::kEnd) break;
        if (got == PcapReader::Read::kIdle || (live && waiting_since_ && Clock::now() - *waiting_since_ >= batch_timeout_)) {
          // A quiet interface, or a packet that has waited the batch timeout: what waits
          // in the chunk is scanned and printed now.
          records_.flush();
          out_.flush();
          flush_capture();
          waiting_since_.reset();
          if (got == PcapReader::Read::kIdle) continue;
        }
        if (live && !waiting_since_) waiting_since_ = Clock::now();
        ++packets_;
        const PacketInfo info = decode_packet(link_type_, raw.data);
        if (o_.stream && info.transport == PacketInfo::Transport::kTcp) {
          const std::uint64_t flow = reassembler_->segment(info, raw.data, raw.seconds);
          Flow& f = flows_[flow];
          if (f.packets++ == 0) {
            f.first = info;
            f.seconds = raw.seconds;
            f.nanoseconds = raw.nanoseconds;
          }
          if (single_pass_out_ && f.written) write_capture(raw);
          if (raw.seconds - last_expire >= 1) {
            reassembler_->expire(raw.seconds);
            last_expire = raw.seconds;
          }
          continue;
        }
        Pending p;
        p.raw = raw;
        p.frame.assign(raw.data.begin(), raw.data.end());
        p.raw.data = std::span<const std::uint8_t>(p.frame);
        p.info = info;
        pending_.push_back(std::move(p));
        const Pending& back = pending_.back();
        const std::span<const std::uint8_t> record =
            o_.match_frame ? std::span<const std::uint8_t>(back.frame)
                           : std::span<const std::uint8_t>(back.frame).subspan(info.payload_offset, info.payload_length);
        records_.add(kPacketTag | raw.index, record);
      }
    } catch (const OutputError&) {
      throw;  // main() reports it once: "write error: ..." (quiet for a closed pipe)
    } catch (const CaptureOutputError&) {
      throw;
    } catch (const PcapError& e) {
      fail(e.what());
    } catch (const Error& e) {
      fail(name_ + ": " + e.what());
    }
    if (reassembler_) reassembler_->finish();
    records_.finish();
    reassembler_.reset();
    flows_.clear();
    pending_.clear();
    if (two_pass_out) write_second_pass(input);
    matched_flows_.clear();
    selected_packets_.clear();
    if (o_.count && !o_.quiet) {
      if (with_name_) {
        out_.write(name_);
        out_.put(':');
      }
      out_.write_number(selected_input_);
      out_.end_line();
    }
    out_.flush();
    flush_capture();
  }

  // The --pcap-out writer's calls: a failure (a full disk, RLIMIT_FSIZE, an I/O error)
  // becomes a CaptureOutputError naming the file, and ends the run.
  [[noreturn]] void capture_failed(const SourceError& e) const {
    const std::string reason = std::string("write error: ") + std::strerror(e.error_number());
    throw CaptureOutputError(o_.pcap_out == "-" ? reason : o_.pcap_out + ": " + reason);
  }
  void write_capture(const RawPacket& raw) {
    try {
      writer_->write(raw);
    } catch (const SourceError& e) {
      capture_failed(e);
    }
  }
  void flush_capture() {
    if (!writer_) return;
    try {
      writer_->flush();
    } catch (const SourceError& e) {
      capture_failed(e);
    }
  }

  // --stream --pcap-out on a file: the flows are known only once they are scanned, so the
  // file is read again and the packets of the selected flows (and the selected packets of
  // other protocols) are written in capture order.
  void write_second_pass(const std::string& input) {
    try {
      std::unique_ptr<PcapReader> reader = PcapReader::open_file(input, o_.bpf);
      TcpReassembler flows(ReassemblyConfig{}, [](std::uint64_t, int, std::uint64_t, std::span<const std::uint8_t>) {},
                           [](std::uint64_t) {});
      RawPacket raw;
      while (reader->next(raw)) {
        const PacketInfo info = decode_packet(link_type_, raw.data);
        if (info.transport == PacketInfo::Transport::kTcp) {
          const std::uint64_t flow = flows.segment(info, raw.data, raw.seconds);
          if (matched_flows_.count(flow)) write_capture(raw);
        } else if (selected_packets_.count(raw.index)) {
          write_capture(raw);
        }
      }
    } catch (const CaptureOutputError&) {
      throw;
    } catch (const Error& e) {
      fail(e.what());
    }
  }

  void stream_bytes(std::uint64_t flow, int direction, std::uint64_t offset, std::span<const std::uint8_t> bytes) {
    Flow& f = flows_[flow];
    std::string& carry = f.carry[direction];
    f.bytes[direction] += bytes.size();
    record_offsets_.push_back(offset - carry.size());
    records_.add((flow << 2) | static_cast<std::uint64_t>(direction),
                 std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(carry.data()), carry.size()),
                 bytes);
    // The next piece's carry: the last carry_ bytes of carry + bytes.
    const char* tail = reinterpret_cast<const char*>(bytes.data());
    if (bytes.size() >= carry_) {
      carry.assign(tail + bytes.size() - carry_, carry_);
    } else {
      carry.append(tail, bytes.size());
      carry.erase(0, carry.size() - std::min(carry.size(), carry_));
    }
  }


  // Which patterns match in `bytes` under -w/-x; the unique ids, ascending.
  void valid_ids(std::string_view bytes, std::span<const Occurrence> occurrences) {
    ids_.clear();
    for (const Occurrence& o : occurrences) {
      const std::size_t at = o.position;
      const std::size_t end = at + table_.unique_length(o.pattern);
      if (!occurrence_counts(bytes, at, end, o_.word, o_.whole_line)) continue;
      ids_.push_back(o.pattern);
    }
    std::sort(ids_.begin(), ids_.end());
    ids_.erase(std::unique(ids_.begin(), ids_.end()), ids_.end());
  }

  bool take_selection() {
    ++selected_total_;
    ++selected_input_;
    if (o_.quiet) done_ = true;
    if (o_.max_count && selected_input_ >= *o_.max_count) done_ = true;
    return !o_.quiet && !o_.count;
  }

  void delivered(std::uint64_t tag, std::string_view bytes, std::size_t overlap, std::span<const Occurrence> occurrences) {
    (void)overlap;  // the scanner kept only occurrences ending past it
    if (tag & kPacketTag) {
      Pending p = std::move(pending_.front());
      pending_.pop_front();
      if (done_ && !o_.stream) return;  // -m reached or -q decided: the rest is not selected
      valid_ids(bytes, occurrences);
      const bool matched = !ids_.empty() || table_.has_empty_pattern();
      if (matched == o_.invert) return;
      if (done_) return;
      const bool print = take_selection();
      if (writer_ && single_pass_out_) write_capture(p.raw);
      if (writer_ && !single_pass_out_) selected_packets_.insert(p.raw.index);
      if (print) print_packet(p, bytes);
      return;
    }
    const std::uint64_t flow = tag >> 2;
    const std::uint64_t kind = tag & 3;
    auto it = flows_.find(flow);
    if (kind == kFlowEnd) {
      if (it == flows_.end()) return;
      Flow& f = it->second;
      if (f.matched != o_.invert && !done_) {
        const bool print = take_selection();
        if (!single_pass_out_ && writer_) matched_flows_.insert(flow);
        if (print) print_flow(flow, f);
      }
      flows_.erase(it);
      return;
    }
    const std::uint64_t record_offset = record_offsets_.front();
    record_offsets_.pop_front();
    if (it == flows_.end()) return;
    Flow& f = it->second;
    valid_ids(bytes, occurrences);
    if (ids_.empty()) return;
    if (!f.matched) {
      f.matched = true;
      f.match_direction = static_cast<int>(kind);
      std::size_t first = bytes.size();
      for (const Occurrence& o : occurrences) first = std::min<std::size_t>(first, o.position);
      f.match_offset = record_offset + first;  // may start in the carried overlap: still exact
      if (single_pass_out_ && !o_.invert) f.written = true;
    }
    f.patterns.insert(ids_.begin(), ids_.end());
  }

  void write_patterns_text(const std::vector<std::uint32_t>& ids) {
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (i > 0) out_.write(", ");
      for (const char c : pattern_text_[ids[i]]) out_.put(c >= 0x20 && c < 0x7f ? c : '.');
    }
  }

  void write_payload(std::string_view bytes) {
    if (o_.hexdump) {
      static constexpr char kHex[] = "0123456789abcdef";
      for (std::size_t row = 0; row < bytes.size(); row += 16) {
        char line[80];
        std::snprintf(line, sizeof line, "  %04zx ", row);
        out_.write(line);
        for (std::size_t i = 0; i < 16; ++i) {
          out_.put(' ');
          if (row + i < bytes.size()) {
            const auto c = static_cast<unsigned char>(bytes[row + i]);
            out_.put(kHex[c >> 4]);
            out_.put(kHex[c & 15]);
          } else {
            out_.write("  ");
          }
        }
        out_.write("  ");
        for (std::size_t i = row; i < std::min(bytes.size(), row + 16); ++i) {
          const auto c = static_cast<unsigned char>(bytes[i]);
          out_.put(c >= 0x20 && c < 0x7f ? static_cast<char>(c) : '.');
        }
        out_.end_line();
      }
    } else {
      out_.write("  ");
      for (const char c : bytes) out_.put(c >= 0x20 && c < 0x7f ? c : '.');
      out_.end_line();
    }
    out_.end_line();
  }

  void json_patterns(std::string& s, const std::vector<std::uint32_t>& ids) {
    s += "\"patterns\":[";
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (i > 0) s += ',';
      s += "{\"id\":" + std::to_string(pattern_id_[ids[i]]) + ",\"text\":\"";
      const bool valid = json::append_escaped(s, pattern_text_[ids[i]]);
      s += '"';
      if (!valid) {
        s += ",\"text_base64\":\"";
        json::append_base64(s, pattern_text_[ids[i]]);
        s += '"';
      }
      s += '}';
    }
    s += ']';
  }

  void print_packet(const Pending& p, std::string_view record) {
    const PacketInfo& info = p.info;
    if (o_.json) {
      std::string s = "{\"type\":\"packet\",\"source\":\"";
      json::append_escaped(s, name_);
      s += "\",\"frame\":" + std::to_string(p.raw.index) + ",\"time\":\"" +
           timestamp(p.raw.seconds, p.raw.nanoseconds, nano_) + "\",\"proto\":\"" + protocol_name(info) + "\"";
      if (info.ip_version != 0) {
        s += ",\"src\":\"" + address_text(info, true) + "\",\"dst\":\"" + address_text(info, false) + "\"";
        if (info.transport == PacketInfo::Transport::kTcp || info.transport == PacketInfo::Transport::kUdp)
          s += ",\"sport\":" + std::to_string(info.sport) + ",\"dport\":" + std::to_string(info.dport);
        if (info.transport == PacketInfo::Transport::kTcp) s += ",\"tcp_flags\":\"" + tcp_flags(info.tcp_flags) + "\"";
      }
      s += ",\"length\":" + std::to_string(p.raw.len) + ",\"captured\":" + std::to_string(p.raw.caplen) +
           ",\"record_length\":" + std::to_string(record.size()) + ",";
      json_patterns(s, ids_);
      s += ",\"payload\":\"";
      json::append_escaped(s, record);
      s += "\",\"payload_base64\":\"";
      json::append_base64(s, record);
      s += "\"}";
      out_.write(s);
      out_.end_line();
      return;
    }
    // ngrep's layout: a header line, then the payload with non-printables as dots.
    if (with_name_) {
      out_.write(name_);
      out_.put(':');
    }
    const char kind = info.transport == PacketInfo::Transport::kTcp   ? 'T'
                      : info.transport == PacketInfo::Transport::kUdp ? 'U'
                      : info.ip_version != 0                          ? 'I'
                                                                      : '-';
    out_.put(kind);
    out_.put(' ');
    out_.write(timestamp(p.raw.seconds, p.raw.nanoseconds, nano_));
    out_.put(' ');
    out_.write(endpoint(info, true));
    out_.write(" -> ");
    out_.write(endpoint(info, false));
    if (info.transport == PacketInfo::Transport::kTcp) {
      out_.write(" [");
      out_.write(tcp_flags(info.tcp_flags));
      out_.put(']');
    }
    out_.write(" #");
    out_.write_number(p.raw.index);
    if (!ids_.empty()) {
      out_.write(" matched: ");
      write_patterns_text(ids_);
    }
    out_.end_line();
    write_payload(record);
  }

  void print_flow(std::uint64_t flow, const Flow& f) {
    const std::vector<std::uint32_t> ids(f.patterns.begin(), f.patterns.end());
    if (o_.json) {
      std::string s = "{\"type\":\"flow\",\"source\":\"";
      json::append_escaped(s, name_);
      s += "\",\"flow\":" + std::to_string(flow) + ",\"proto\":\"TCP\",\"start\":\"" +
           timestamp(f.seconds, f.nanoseconds, nano_) + "\",\"client\":\"" + endpoint(f.first, true) +
           "\",\"server\":\"" + endpoint(f.first, false) + "\",\"packets\":" + std::to_string(f.packets) +
           ",\"bytes_client\":" + std::to_string(f.bytes[0]) + ",\"bytes_server\":" + std::to_string(f.bytes[1]) +
           ",";
      json_patterns(s, ids);
      if (f.matched)
        s += ",\"first_match\":{\"direction\":\"" + std::string(f.match_direction == 0 ? "client" : "server") +
             "\",\"offset\":" + std::to_string(f.match_offset) + "}";
      s += "}";
      out_.write(s);
      out_.end_line();
      return;
    }
    if (with_name_) {
      out_.write(name_);
      out_.put(':');
    }
    out_.write("T ");
    out_.write(timestamp(f.seconds, f.nanoseconds, nano_));
    out_.put(' ');
    out_.write(endpoint(f.first, true));
    out_.write(" <-> ");
    out_.write(endpoint(f.first, false));
    out_.write(" flow #");
    out_.write_number(flow);
    out_.write(" packets ");
    out_.write_number(f.packets);
    out_.write(" bytes ");
    out_.write_number(f.bytes[0]);
    out_.put('/');
    out_.write_number(f.bytes[1]);
    if (f.matched) {
      out_.write(" matched: ");
      write_patterns_text(ids);
      out_.write(f.match_direction == 0 ? " (client, offset " : " (server, offset ");
      out_.write_number(f.match_offset);
      out_.put(')');
    }
    out_.end_line();
  }

  const cli::Options& o_;
  Scanner& scanner_;
  const PatternTable& table_;
  Output& out_;
  StopSignal& stop_;
  Notices& notices_;
  RecordScan records_;
  std::vector<std::string> pattern_text_;
  std::vector<std::uint32_t> pattern_id_;
  std::size_t carry_ = 0;
  bool with_name_ = false;

  std::string name_;
  int link_type_ = 0;
  bool nano_ = false;
  std::unique_ptr<PcapWriter> writer_;
  int writer_link_type_ = -1;
  bool single_pass_out_ = false;
  std::unique_ptr<TcpReassembler> reassembler_;
  std::unordered_map<std::uint64_t, Flow> flows_;
  std::deque<std::uint64_t> record_offsets_;
  std::deque<Pending> pending_;
  std::unordered_set<std::uint64_t> matched_flows_;
  std::unordered_set<std::uint64_t> selected_packets_;
  std::vector<std::uint32_t> ids_;
  using Clock = std::chrono::steady_clock;
  std::optional<Clock::time_point> waiting_since_;  // live: the oldest packet not yet scanned
  std::chrono::milliseconds batch_timeout_{std::max<std::uint64_t>(1, o_.batch_timeout_ms)};
  std::uint64_t packets_ = 0;
  std::uint64_t selected_total_ = 0;
  std::uint64_t selected_input_ = 0;
  bool done_ = false;
  bool trouble_ = false;
};

}  // namespace

CaptureResult run_captures(const cli::Options& o, Scanner& scanner, const PatternSet& patterns, Output& out,
                           StopSignal& stop, Notices& notices) {
  CaptureRun run(o, scanner, patterns, out, stop, notices);
  return run.run();
}

}  // namespace gpufilter
