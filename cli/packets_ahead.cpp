// A mapped capture read and decoded on threads of their own (packets_ahead.hpp).
#include "packets_ahead.hpp"

#include <algorithm>
#include <system_error>
#include <utility>

#include "gpufilter/core/errors.hpp"
#include "gpufilter/core/thread_clock.hpp"
#include "gpufilter/sources/packet.hpp"

namespace gpufilter {

PacketsAhead::PacketsAhead(const PcapPieces::Cursor& cursor, const BpfFilter* filter, int link_type,
                           std::size_t lanes, std::size_t threads, std::size_t part_bytes)
    : pieces_(cursor.pieces()), filter_(filter), link_type_(link_type), lanes_(std::max<std::size_t>(1, lanes)),
      first_(cursor.offset()),
      part_bytes_(std::max<std::size_t>(1, part_bytes)),
      parts_(first_ < pieces_.size() ? (pieces_.size() - first_ + part_bytes_ - 1) / part_bytes_ : 0),
      window_(2 * std::max<std::size_t>(1, threads) + 1), expected_(first_), cpu_(std::max<std::size_t>(1, threads)) {
  index_base_ = cursor.index();
  current_.start = current_.end = first_;
  try {
    for (std::size_t i = 0; i < cpu_.size(); ++i) threads_.emplace_back([this, i] { run(i); });
  } catch (const std::system_error& e) {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    changed_.notify_all();
    for (std::thread& t : threads_) t.join();
    throw Error(std::string("cannot start a thread: ") + e.what());
  }
}

PacketsAhead::~PacketsAhead() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  for (std::thread& t : threads_) t.join();
}

double PacketsAhead::reader_cpu_seconds() const noexcept {
  double sum = 0;
  for (const std::atomic<double>& c : cpu_) sum += c.load(std::memory_order_relaxed);
  return sum;
}

// The records that start in [from, until), into `part` (its packets' vector kept).
void PacketsAhead::walk(Part& part, std::size_t from, std::size_t until) const {
  part.start = part.end = from;
  part.records = 0;
  part.left = false;
  PacketBatch& batch = part.batch;
  batch.clear();
  batch.for_lanes(lanes_);
  // A new batch's vector is reserved at once, not grown by copies (each a fresh mapping
  // faulted in): records of 40 bytes at least, and untouched pages cost nothing.
  if (batch.packets.capacity() == 0) batch.packets.reserve(std::min<std::size_t>(until - from, part_bytes_) / 40 + 1);
  RawPacket raw;
  for (std::size_t at = from; at < until && at < pieces_.size();) {
    const std::size_t next = pieces_.record(at, raw);
    if (next == 0) {
      part.left = true;
      break;
    }
    at = part.end = next;
    raw.index = ++part.records;
    // The records a kilobyte or two on, asked for before they are read (a prefetch past
    // the mapping's end does nothing).
    __builtin_prefetch(raw.data.data() + raw.data.size() + 1024);
    __builtin_prefetch(raw.data.data() + raw.data.size() + 2048);
    // Decoded where it is kept (two thirds of this loop's time went to copying it).
    if (filter_ != nullptr && !filter_->passes(raw)) continue;
    DecodedPacket& d = batch.packets.emplace_back(raw, [&] { return decode_packet(link_type_, raw.data); });
    if (d.info.transport == PacketInfo::Transport::kTcp) d.key = TcpReassembler::key_of(d.info);
    batch.list_last();
  }
}

// A reading thread: the next part not yet given to one, until the file's end, while at
// most window_ parts wait to be taken.
void PacketsAhead::run(std::size_t thread) noexcept {
  for (;;) {
    Part part;
    std::size_t index = 0, release = 0;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stop_ || (next_part_ < parts_ && next_part_ < taken_ + window_); });
      if (stop_) return;
      index = next_part_++;
      walked_.emplace_back();
      // Where the part before ended, when it is walked and not yet taken; else a guess,
      // which the taker checks.
      const std::size_t slot = index - taken_;  // walked_[slot] is this part's
      if (index == 0) part.start = first_;
      else if (slot > 0 && walked_[slot - 1].done && !walked_[slot - 1].left) part.start = walked_[slot - 1].end;
      if (!spare_.empty()) {
        part.batch = std::move(spare_.back());
        spare_.pop_back();
      }
      release = release_;
    }
    {
      // One thread at a time gives pages back (every 32 MiB or so).
      std::lock_guard lock(releasing_);
      if (release > released_) {
        pieces_.release_before(release);
        released_ = release;
      }
    }
    const std::size_t begin = part_begin(index);
    const std::size_t until = std::min(pieces_.size(), begin + part_bytes_);
    std::size_t start = part.start;
    if (start == PcapPieces::kNoStart && index > 0) start = pieces_.find_start(begin, until);
    if (start != PcapPieces::kNoStart) walk(part, start, until);
    part.done = true;
    cpu_[thread].store(thread_cpu_seconds(), std::memory_order_relaxed);
    {
      std::lock_guard lock(mutex_);
      if (stop_) return;
      walked_[index - taken_] = std::move(part);
    }
    changed_.notify_all();
  }
}

// The next part in order, checked: one that does not start where the last one ended is
// walked again from there, here. False when none is left (the file's end, or a record
// the mapping does not read).
bool PacketsAhead::take_part(PacketBatch& emptied) {
  if (current_.left || taken_ >= parts_) return false;
  Part part;
  {
    std::unique_lock lock(mutex_);
    const auto ready = [&] { return !walked_.empty() && walked_.front().done; };
    if (!ready()) {
      const WaitTimer timer(waited_);
      changed_.wait(lock, ready);
    }
    part = std::move(walked_.front());
    walked_.pop_front();
    ++taken_;
    if (emptied.packets.capacity() > 0) {
      emptied.clear();
      spare_.push_back(std::move(emptied));
    }
  }
  changed_.notify_all();
  index_base_ += current_.records;
  if (part.start != expected_) {
    const std::size_t until = std::min(pieces_.size(), part_begin(taken_ - 1) + part_bytes_);
    walk(part, expected_, until);
  }
  current_ = std::move(part);
  expected_ = current_.end;
  return true;
}

void PacketsAhead::release_before(std::size_t offset) {
  std::lock_guard lock(mutex_);
  release_ = std::max(release_, offset);
}

PcapPieces::Cursor::Read PacketsAhead::take(PacketBatch& batch) {
  for (;;) {
    if (!take_part(batch)) return current_.left ? PcapPieces::Cursor::Read::kLeft : PcapPieces::Cursor::Read::kEnd;
    batch = PacketBatch{};
    if (!current_.batch.packets.empty()) break;  // every record of the part filtered out, or none
  }
  std::swap(batch, current_.batch);
  batch.index_base = index_base_;
  batch.end = current_.end;
  batch.bytes = current_.end - current_.start;
  return PcapPieces::Cursor::Read::kPacket;
}

}  // namespace gpufilter
