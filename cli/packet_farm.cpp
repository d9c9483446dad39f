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

namespace {

// Nothing carries over from one selected packet (flow) to the next.
bool farm_applies(const cli::Options& o) {
  return !o.max_count && !o.quiet && o.list == cli::ListMode::kNone && !o.before && !o.after && !o.context &&
         o.pcap_out.empty() && o.interface.empty() && !o.max_packets &&
         (o.time == cli::TimeFormat::kAbsolute || o.time == cli::TimeFormat::kEpoch);
}

}  // namespace

bool packet_farm_applies(const cli::Options& o) { return !o.stream && farm_applies(o); }

bool flow_farm_applies(const cli::Options& o) { return o.stream && farm_applies(o); }

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

// A part of the file whose records a thread walked (PcapPieces::walk) from where it
// guessed the first one starts (find_start); the calling thread checks the guess.
struct Part {
  std::size_t start = PcapPieces::kNoStart;
  PcapPieces::Walk walk;
  bool done = false;
};

// About this many bytes of records a piece, and of the file a part.
constexpr std::size_t kPieceBytes = std::size_t{512} << 10;
constexpr std::size_t kPartBytes = std::size_t{4} << 20;
// The pages of written pieces are given back in steps of this many bytes.
constexpr std::size_t kReleaseBytes = std::size_t{64} << 20;

class Farm {
 public:
  Farm(const cli::Options& o, const PatternTable& table, const PacketFarmParts& parts, const FarmCapture& capture,
       StopSignal& stop)
      : o_(o), table_(table), parts_(parts), capture_(capture), stop_(stop),
        window_(std::max<std::size_t>(2, 2 * parts.threads)), ahead_(std::max<std::size_t>(2, parts.threads)),
        slots_(window_),
        parts_count_((capture.pieces.size() - PcapPieces::kFileHeader + kPartBytes - 1) / kPartBytes),
        walked_(parts_count_) {}

  FarmResult run(Output& out);

 private:
  struct Lane;
  struct Task {
    enum class Kind { kNone, kPiece, kPart } kind = Kind::kNone;
    std::size_t index = 0;
    Piece piece;
  };
  void thread_main();
  Task take();
  void search(Lane& lane, const Piece& piece, PieceResult& result);
  void walk_part(std::size_t index);
  bool settle_part();
  void write_in_order(Output& out, FarmResult& r);
  void end_threads();
  std::size_t part_begin(std::size_t index) const noexcept {
    return PcapPieces::kFileHeader + index * kPartBytes;
  }

  const cli::Options& o_;
  const PatternTable& table_;
  const PacketFarmParts& parts_;
  const FarmCapture& capture_;
  StopSignal& stop_;
  const std::size_t window_;  // pieces taken and not written, at most
  const std::size_t ahead_;   // parts walked and not settled, at most
  std::vector<PieceResult> slots_;  // piece i's in slots_[i % window_]
  const std::size_t parts_count_;
  std::vector<Part> walked_;   // each part's walk, by the threads
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Piece> pieces_;  // settled so far, numbered
  std::size_t next_piece_ = 0;  // the next piece a thread takes
  std::size_t written_ = 0;     // pieces written
  std::size_t next_part_ = 0;   // the next part a thread walks
  std::size_t settled_ = 0;     // parts settled by the calling thread
  bool all_settled_ = false;    // no more pieces come
  bool abort_ = false;
  std::string error_;
  std::vector<std::thread> threads_;
  // The settling, on the calling thread: where the next part's first record must start,
  // and its number.
  std::size_t expected_ = PcapPieces::kFileHeader;
  std::uint64_t index_ = 1;
  bool left_ = false;         // stopped at a record PcapPieces does not read
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

// The next piece to match while fewer than window_ are not written, else the next part
// to walk while fewer than ahead_ are walked and not settled; kNone when nothing is left
// (or the run stops).
Farm::Task Farm::take() {
  std::unique_lock lock(mutex_);
  Task t;
  const auto piece_ready = [&] { return next_piece_ < pieces_.size() && next_piece_ < written_ + window_; };
  const auto part_ready = [&] { return next_part_ < parts_count_ && next_part_ < settled_ + ahead_; };
  changed_.wait(lock, [&] {
    return abort_ || piece_ready() || part_ready() || (all_settled_ && next_piece_ >= pieces_.size());
  });
  if (abort_) return t;
  if (piece_ready()) {
    t.kind = Task::Kind::kPiece;
    t.index = next_piece_++;
    t.piece = pieces_[t.index];
  } else if (part_ready()) {
    t.kind = Task::Kind::kPart;
    t.index = next_part_++;
  }
  return t;
}

void Farm::thread_main() {
  try {
    Lane lane(table_, o_, parts_);
    for (Task t = take(); t.kind != Task::Kind::kNone; t = take()) {
      if (t.kind == Task::Kind::kPart) {
        walk_part(t.index);
        continue;
      }
      PieceResult result;
      search(lane, t.piece, result);
      std::lock_guard lock(mutex_);
      slots_[t.index % window_] = std::move(result);
      slots_[t.index % window_].done = true;
      changed_.notify_all();
    }
  } catch (const std::exception& e) {
    std::lock_guard lock(mutex_);
    if (error_.empty()) error_ = e.what();
    abort_ = true;
    changed_.notify_all();
  }
}

// A part's records from where its first one seems to start (the first part's is known).
void Farm::walk_part(std::size_t index) {
  const PcapPieces& file = capture_.pieces;
  const std::size_t begin = part_begin(index);
  const std::size_t end = std::min(file.size(), begin + kPartBytes);
  Part part;
  part.start = index == 0 ? begin : file.find_start(begin, end);
  if (part.start != PcapPieces::kNoStart) part.walk = file.walk(part.start, end, kPieceBytes);
  std::lock_guard lock(mutex_);
  walked_[index] = std::move(part);
  walked_[index].done = true;
  changed_.notify_all();
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
    if (capture_.filter != nullptr && !capture_.filter->passes(raw)) continue;
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

// The next part's walk, once its guessed start is checked: it must be where the part
// before ended, else the part is walked again from there, here. Its pieces are numbered
// and handed to the threads. False when no part is left.
bool Farm::settle_part() {
  if (settled_ >= parts_count_ || left_) return false;
  const std::size_t index = settled_;
  Part part;
  {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return abort_ || walked_[index].done; });
    if (!walked_[index].done) return false;
    part = std::move(walked_[index]);
  }
  if (part.start != expected_) {
    const std::size_t end = std::min(capture_.pieces.size(), part_begin(index) + kPartBytes);
    part.walk = capture_.pieces.walk(expected_, end, kPieceBytes);
  }
  if (!part.walk.pieces.empty() || part.walk.left) expected_ = part.walk.end;
  left_ = part.walk.left;
  std::lock_guard lock(mutex_);
  for (const PcapPieces::Piece& p : part.walk.pieces) {
    pieces_.push_back(Piece{p.begin, p.end, index_});
    index_ += p.packets;
  }
  ++settled_;
  all_settled_ = left_ || settled_ >= parts_count_;
  changed_.notify_all();
  return true;
}

// Each piece's output as soon as it and every piece before it are done.
void Farm::write_in_order(Output& out, FarmResult& r) {
  for (std::size_t i = 0;; ++i) {
    while (!all_settled_ && pieces_.size() <= i && settle_part()) {
    }
    PieceResult piece;
    std::size_t end;
    {
      std::unique_lock lock(mutex_);
      if (i >= pieces_.size()) break;
      changed_.wait(lock, [&] { return abort_ || slots_[i % window_].done; });
      if (!slots_[i % window_].done) return;  // a thread failed
      piece = std::move(slots_[i % window_]);
      slots_[i % window_] = PieceResult{};
      end = pieces_[i].end;
      ++written_;
      changed_.notify_all();
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
    r.resume_offset = expected_;
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
