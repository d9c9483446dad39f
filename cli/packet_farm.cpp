// The packets of a classic pcap file matched on every core at once (packet_farm.hpp).
#include "packet_farm.hpp"

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

// A piece of the file: whole records, and where the first one's number starts.
struct Piece {
  std::size_t begin = 0;
  std::size_t end = 0;
  std::uint64_t first_index = 0;
};

// A piece's output and counts, from its thread to the writer.
struct PieceResult {
  std::string text;
  std::uint64_t selected = 0;
  std::uint64_t packets = 0;
  std::uint64_t bytes = 0;
  bool done = false;
};

// About this many bytes of records a piece.
constexpr std::size_t kPieceBytes = std::size_t{512} << 10;
// The pages of written pieces are given back in steps of this many bytes.
constexpr std::size_t kReleaseBytes = std::size_t{64} << 20;

class Farm {
 public:
  Farm(const cli::Options& o, const PatternTable& table, const PacketFarmParts& parts, const FarmCapture& capture,
       StopSignal& stop)
      : o_(o), table_(table), parts_(parts), capture_(capture), stop_(stop),
        filter_(capture.link_type, capture.snaplen, capture.bpf),
        window_(std::max<std::size_t>(2, 2 * parts.threads)), slots_(window_) {}

  FarmResult run(Output& out);

 private:
  struct Lane;
  void thread_main();
  bool take(std::size_t& index, Piece& piece);
  void search(Lane& lane, const Piece& piece, PieceResult& result);
  bool cut(std::size_t written);
  void write_in_order(Output& out, FarmResult& r);
  void end_threads();

  const cli::Options& o_;
  const PatternTable& table_;
  const PacketFarmParts& parts_;
  const FarmCapture& capture_;
  StopSignal& stop_;
  BpfFilter filter_;
  const std::size_t window_;
  std::vector<PieceResult> slots_;  // piece i's in slots_[i % window_]
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Piece> pieces_;  // cut so far
  bool cut_all_ = false;       // no more pieces come
  std::size_t next_ = 0;       // the next piece a thread takes
  bool abort_ = false;
  std::string error_;
  std::vector<std::thread> threads_;
  // The cutting, on the calling thread: the next record, its number.
  std::size_t at_ = PcapPieces::kFileHeader;
  std::uint64_t index_ = 1;
  bool left_ = false;  // stopped at a record PcapPieces does not read
  std::size_t released_ = 0;  // the mapping's bytes given back
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

// The next piece cut; false when none is left (or the run stops).
bool Farm::take(std::size_t& index, Piece& piece) {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return abort_ || next_ < pieces_.size() || cut_all_; });
  if (abort_ || next_ >= pieces_.size()) return false;
  index = next_++;
  piece = pieces_[index];
  return true;
}

void Farm::thread_main() {
  try {
    Lane lane(table_, o_, parts_);
    std::size_t index = 0;
    Piece piece;
    while (take(index, piece)) {
      PieceResult result;
      search(lane, piece, result);
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

void Farm::search(Lane& lane, const Piece& piece, PieceResult& result) {
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
  RawPacket raw;
  raw.index = piece.first_index;
  for (std::size_t at = piece.begin; at < piece.end; ++raw.index) {
    at = capture_.pieces.record(at, raw);  // the cut read it: never 0 here
    if (!filter_.passes(raw)) continue;
    ++result.packets;
    const PacketInfo info = decode_packet(capture_.link_type, raw.data);
    pending.push_back(Scanned{raw, info});
    records.add(raw.index, o_.match_frame ? raw.data : raw.data.subspan(info.payload_offset, info.payload_length));
  }
  records.finish();
  result.bytes = records.bytes_scanned();
  lane.out.flush();
  result.text = lane.writer.text();
  lane.writer.clear();
}

// Cuts pieces until `window_` are cut and not written (`written` so far) or the file is
// cut; false when no piece is left to cut.
bool Farm::cut(std::size_t written) {
  const PcapPieces& file = capture_.pieces;
  std::size_t count;
  {
    std::lock_guard lock(mutex_);
    count = pieces_.size();
  }
  while (!left_ && at_ < file.size() && count < written + window_) {
    Piece piece{at_, at_, index_};
    RawPacket raw;
    while (at_ < file.size() && piece.end - piece.begin < kPieceBytes) {
      const std::size_t next = file.record(at_, raw);
      if (next == 0) {
        left_ = true;
        break;
      }
      at_ = piece.end = next;
      ++index_;
    }
    std::lock_guard lock(mutex_);
    if (piece.end > piece.begin) pieces_.push_back(piece);
    count = pieces_.size();
    changed_.notify_all();
  }
  std::lock_guard lock(mutex_);
  cut_all_ = left_ || at_ >= file.size();
  changed_.notify_all();
  return count > written;
}

// Each piece's output as soon as it and every piece before it are done.
void Farm::write_in_order(Output& out, FarmResult& r) {
  for (std::size_t i = 0; cut(i); ++i) {
    PieceResult piece;
    std::size_t end;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return abort_ || slots_[i % window_].done; });
      if (!slots_[i % window_].done) return;  // a thread failed
      piece = std::move(slots_[i % window_]);
      slots_[i % window_] = PieceResult{};
      end = pieces_[i].end;
    }
    out.write(piece.text);
    // No thread reads below `end` again. Given back in large steps: each munmap stops every
    // thread's page faults and interrupts every core to flush its TLB.
    if (end >= released_ + kReleaseBytes) {
      capture_.pieces.release_before(end);
      released_ = end;
    }
    r.selected += piece.selected;
    r.packets += piece.packets;
    r.bytes += piece.bytes;
    if (stop_.requested()) return;
  }
  if (left_) {
    r.resume_offset = at_;
    r.resume_index = index_;
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
