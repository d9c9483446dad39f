// The packets of a classic pcap file matched on every core at once (packet_farm.hpp).
#include "packet_farm.hpp"

#include <pcap/pcap.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "gpufilter/core/errors.hpp"
#include "gpufilter/scan/record_scan.hpp"
#include "gpufilter/sinks/writer.hpp"
#include "gpufilter/sources/packet.hpp"
#include "packet_select.hpp"

namespace gpufilter {

bool packet_farm_applies(const cli::Options& o) {
  return !o.stream && !o.max_count && !o.quiet && o.list == cli::ListMode::kNone && !o.before && !o.after &&
         !o.context && o.pcap_out.empty() && o.interface.empty() && !o.max_packets &&
         (o.time == cli::TimeFormat::kAbsolute || o.time == cli::TimeFormat::kEpoch);
}

namespace {

// A piece's output and counts, from its thread to the writer.
struct PieceResult {
  std::string text;
  std::uint64_t selected = 0;
  std::uint64_t bytes = 0;
  bool done = false;
};

// libpcap's BPF program for the capture's link type, run on each packet
// (pcap_offline_filter only reads it, so every thread may run it at once).
class Filter {
 public:
  Filter(const FarmCapture& c) {
    if (c.bpf.empty()) return;
    dead_ = pcap_open_dead(c.link_type, c.snaplen);
    if (dead_ == nullptr || pcap_compile(dead_, &program_, c.bpf.c_str(), 1, PCAP_NETMASK_UNKNOWN) != 0)
      throw Error("BPF expression '" + c.bpf + "' does not compile");
    compiled_ = true;
  }
  ~Filter() {
    if (compiled_) pcap_freecode(&program_);
    if (dead_ != nullptr) pcap_close(dead_);
  }
  Filter(const Filter&) = delete;
  Filter& operator=(const Filter&) = delete;
  bool passes(const RawPacket& raw) const {
    if (!compiled_) return true;
    pcap_pkthdr h{};
    h.caplen = raw.caplen;
    h.len = raw.len;
    return pcap_offline_filter(&program_, &h, raw.data.data()) != 0;
  }

 private:
  pcap_t* dead_ = nullptr;
  bpf_program program_{};
  bool compiled_ = false;
};

class Farm {
 public:
  Farm(const cli::Options& o, const PatternTable& table, const PacketFarmParts& parts, const FarmCapture& capture,
       StopSignal& stop)
      : o_(o), table_(table), parts_(parts), capture_(capture), stop_(stop), filter_(capture),
        window_(std::max<std::size_t>(2, 2 * parts.threads)), slots_(window_) {}

  FarmResult run(Output& out);

 private:
  struct Lane;
  void thread_main();
  bool take(std::size_t& index);
  void search(Lane& lane, std::size_t index, PieceResult& result);
  void write_in_order(Output& out, FarmResult& r);
  void end_threads();

  const cli::Options& o_;
  const PatternTable& table_;
  const PacketFarmParts& parts_;
  const FarmCapture& capture_;
  StopSignal& stop_;
  Filter filter_;
  const std::size_t window_;
  std::vector<PieceResult> slots_;  // piece i's in slots_[i % window_]
  std::mutex mutex_;
  std::condition_variable changed_;
  std::size_t next_ = 0;     // the next piece a thread takes
  std::size_t written_ = 0;  // pieces written so far
  bool abort_ = false;
  std::string error_;
  std::vector<std::thread> threads_;
};

// One thread's scanner, regexes, selection and printer.
struct Farm::Lane {
  Lane(const PatternTable& table, const cli::Options& o, const PacketFarmParts& parts)
      : scanner(parts.scanner()),
        regexes(parts.regexes != nullptr ? parts.regexes->copy() : nullptr),
        select(o, table, regexes.get(), parts.show),
        out(writer, false, 256 * 1024),
        printer(parts.printer(out)) {
    if (!scanner) throw Error("the engine has no scanner for another thread");
  }
  std::unique_ptr<Scanner> scanner;
  std::unique_ptr<RegexLines> regexes;
  PacketSelect select;
  StringWriter writer;
  Output out;
  std::unique_ptr<PacketSink> printer;
};

// The next piece, once it is within the window of pieces not yet written; false: none left.
bool Farm::take(std::size_t& index) {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return abort_ || next_ >= capture_.pieces.pieces().size() || next_ < written_ + window_; });
  if (abort_ || next_ >= capture_.pieces.pieces().size()) return false;
  index = next_++;
  return true;
}

void Farm::thread_main() {
  try {
    Lane lane(table_, o_, parts_);
    std::size_t index = 0;
    while (take(index)) {
      PieceResult result;
      search(lane, index, result);
      std::lock_guard lock(mutex_);
      slots_[index % window_] = std::move(result);
      slots_[index % window_].done = true;
      changed_.notify_all();
    }
  } catch (const std::exception& e) {
    std::lock_guard lock(mutex_);
    if (error_.empty()) error_ = e.what();
    abort_ = true;
    changed_.notify_all();
  }
}

// A packet of the piece whose record is being scanned (its bytes stay in the mapping).
struct Scanned {
  RawPacket raw;
  PacketInfo info;
};

void Farm::search(Lane& lane, std::size_t index, PieceResult& result) {
  const PcapPieces::Piece& piece = capture_.pieces.pieces()[index];
  std::deque<Scanned> pending;
  if (lane.printer) lane.printer->begin(capture_.input);
  RecordScan records(*lane.scanner, [&](std::uint64_t, std::string_view bytes, std::size_t,
                                        std::span<const Occurrence> occurrences) {
    const Scanned p = pending.front();
    pending.pop_front();
    const bool matched = lane.select.record(bytes, occurrences);
    if (matched == o_.invert) return;
    ++result.selected;
    if (!lane.printer) return;
    const std::span<const PacketMatch> shown = o_.invert ? std::span<const PacketMatch>() : lane.select.matches();
    lane.printer->packet(PacketRecord{p.raw, p.info, bytes, lane.select.ids(), shown});
  });
  capture_.pieces.for_each(piece, [&](const RawPacket& raw) {
    if (!filter_.passes(raw)) return;
    const PacketInfo info = decode_packet(capture_.link_type, raw.data);
    pending.push_back(Scanned{raw, info});
    const std::span<const std::uint8_t> record =
        o_.match_frame ? raw.data : raw.data.subspan(info.payload_offset, info.payload_length);
    records.add(raw.index, record);
  });
  records.finish();
  result.bytes = records.bytes_scanned();
  lane.out.flush();
  result.text = lane.writer.text();
  lane.writer.clear();
}

// Each piece's output as soon as it and every piece before it are done.
void Farm::write_in_order(Output& out, FarmResult& r) {
  const std::size_t count = capture_.pieces.pieces().size();
  for (std::size_t i = 0; i < count; ++i) {
    PieceResult piece;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return abort_ || slots_[i % window_].done; });
      if (!slots_[i % window_].done) return;  // a thread failed, or the run stops
      piece = std::move(slots_[i % window_]);
      slots_[i % window_] = PieceResult{};
      ++written_;
      changed_.notify_all();
    }
    out.write(piece.text);
    r.selected += piece.selected;
    r.bytes += piece.bytes;
    if (stop_.requested()) return;
  }
}

void Farm::end_threads() {
  {
    std::lock_guard lock(mutex_);
    abort_ = true;
    changed_.notify_all();
  }
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

FarmResult Farm::run(Output& out) {
  FarmResult r;
  try {
    for (std::size_t i = 0; i < parts_.threads; ++i) threads_.emplace_back([this] { thread_main(); });
  } catch (const std::system_error&) {
    if (threads_.empty()) return r;  // no thread at all: the caller reads the file
  }
  r.ran = true;
  try {
    write_in_order(out, r);
  } catch (...) {
    end_threads();
    throw;  // a write error: the caller reports it
  }
  end_threads();
  r.packets = capture_.pieces.packets();
  r.error = error_;
  return r;
}

}  // namespace

FarmResult run_packet_farm(const cli::Options& o, const PatternTable& table, const PacketFarmParts& parts,
                           const FarmCapture& capture, Output& out, StopSignal& stop) {
  Farm farm(o, table, parts, capture, stop);
  return farm.run(out);
}

}  // namespace gpufilter
