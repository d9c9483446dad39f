// A mapped capture read and decoded on a thread of its own (packets_ahead.hpp).
#include "packets_ahead.hpp"

#include <algorithm>
#include <system_error>
#include <utility>

#include "gpufilter/core/errors.hpp"
#include "gpufilter/sources/packet.hpp"

namespace gpufilter {

PacketsAhead::PacketsAhead(const PcapPieces::Cursor& cursor, const BpfFilter* filter, int link_type)
    : cursor_(cursor), filter_(filter), link_type_(link_type) {
  current_.begin = cursor.offset();
  try {
    thread_ = std::thread([this] { run(); });
  } catch (const std::system_error& e) {
    throw Error(std::string("cannot start a thread: ") + e.what());
  }
}

PacketsAhead::~PacketsAhead() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

// The thread: batches of decoded packets until the file's end, a record the mapping does
// not read, or the consumer goes away.
void PacketsAhead::run() noexcept {
  for (;;) {
    Batch batch;
    std::size_t release = 0;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stop_ || ready_.size() < kBatches; });
      if (stop_) return;
      if (!spare_.empty()) {
        batch.packets = std::move(spare_.back());
        spare_.pop_back();
      }
      release = release_;
    }
    if (release > released_) {
      cursor_.pieces().release_before(release);
      released_ = release;
    }
    batch.begin = cursor_.offset();
    RawPacket raw;
    while (batch.packets.size() < kBatchPackets) {
      const PcapPieces::Cursor::Read read = cursor_.next(raw);
      if (read == PcapPieces::Cursor::Read::kPacket) {
        if (filter_ == nullptr || filter_->passes(raw)) batch.packets.push_back(Decoded{raw, decode_packet(link_type_, raw.data)});
        continue;
      }
      batch.end = read;
      batch.left_offset = cursor_.offset();
      batch.left_index = cursor_.index() + 1;
      break;
    }
    const bool last = batch.end != PcapPieces::Cursor::Read::kPacket;
    {
      std::lock_guard lock(mutex_);
      ready_.push_back(std::move(batch));
    }
    changed_.notify_all();
    if (last) return;
  }
}

// The next batch, waiting for it; false when the last one was taken.
bool PacketsAhead::take_batch() {
  if (current_.end != PcapPieces::Cursor::Read::kPacket) return false;
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return !ready_.empty(); });
  current_.packets.clear();
  if (current_.packets.capacity() > 0) spare_.push_back(std::move(current_.packets));
  current_ = std::move(ready_.front());
  ready_.pop_front();
  taken_ = 0;
  lock.unlock();
  changed_.notify_all();
  return true;
}

void PacketsAhead::release_before(std::size_t offset) {
  std::lock_guard lock(mutex_);
  release_ = std::max(release_, offset);
}

PcapPieces::Cursor::Read PacketsAhead::next(RawPacket& raw, PacketInfo& info) {
  while (taken_ >= current_.packets.size()) {
    if (!take_batch()) return current_.end;
  }
  const Decoded& d = current_.packets[taken_++];
  raw = d.raw;
  info = d.info;
  return PcapPieces::Cursor::Read::kPacket;
}

}  // namespace gpufilter
