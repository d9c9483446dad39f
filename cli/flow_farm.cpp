// --stream over a capture file on several threads (flow_farm.hpp).
#include "flow_farm.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "gpufilter/core/errors.hpp"
#include "gpufilter/core/thread_clock.hpp"
#include "gpufilter/sinks/writer.hpp"

namespace gpufilter {

namespace {

// One shard's share of a round, from the calling thread.
struct RoundInput {
  std::uint64_t round = 0;
  std::vector<FlowEvent> events;
  std::vector<FlowPacket> packets;
  std::deque<std::vector<std::uint8_t>> copies;  // the bytes that are not in the mapping
};

// What one shard printed for a round, and its counts so far.
struct RoundOutput {
  std::uint64_t round = 0;
  std::string text;
  std::vector<std::size_t> ends;  // each printing event's end in `text`, in order
  std::uint64_t selected = 0;
  std::uint64_t bytes = 0;
};

// A round as the calling thread keeps it until written: where it starts in the file, and
// which shard printed each of its printing events, in the order they were given.
struct RoundOrder {
  std::uint64_t round = 0;
  std::size_t begin = 0;
  std::vector<std::uint32_t> lanes;
};

}  // namespace

// The farm's state beside its threads (FlowFarm keeps it behind a pointer).
struct FarmShared {
  std::mutex mutex;
  std::condition_variable changed;  // for the calling thread: a round is done, or a thread failed
  // Under the mutex.
  bool abort = false;  // a thread failed, or the farm ends
  std::string error;   // the failed thread's message
  // Rounds the threads are done with, emptied, for the next ones: fresh vectors would be
  // grown and their pages faulted in anew every round.
  std::vector<RoundInput> spare;
  // The calling thread's only.
  std::deque<RoundOrder> rounds;  // given and not written; the last is being filled
  std::size_t last_next = 0;      // the offset read_to() was last given
};

struct FlowFarm::Lane final : FlowShardReport {
  explicit Lane(FarmShared& s) : shared(s) {}

  // Calling thread.
  RoundInput filling;
  // Under shared.mutex.
  std::deque<RoundInput> inbox;
  std::condition_variable wake;  // a round came, or the farm ends
  std::deque<RoundOutput> outbox;
  // The lane's thread.
  FarmShared& shared;
  std::unique_ptr<FlowShard> shard;
  StringWriter writer;
  Output out{writer, false, 64 * 1024};
  std::vector<std::size_t> ends;
  std::deque<RoundInput> taken;  // until each one's round_done()
  std::atomic<double> cpu{0};    // the thread's CPU seconds, as of its last round
  std::thread thread;

  void printed() override {
    out.flush();
    ends.push_back(writer.text().size());
  }

  void round_done(std::uint64_t round) override {
    out.flush();
    RoundOutput done{round, writer.take(), std::move(ends), shard->selected(), shard->bytes_scanned()};
    ends.clear();
    RoundInput spent;
    if (!taken.empty() && taken.front().round == round) {
      spent = std::move(taken.front());
      taken.pop_front();
    }
    spent.events.clear();
    spent.packets.clear();
    spent.copies.clear();
    {
      std::lock_guard lock(shared.mutex);
      outbox.push_back(std::move(done));
      shared.spare.push_back(std::move(spent));
    }
    shared.changed.notify_all();
  }

  // Takes rounds until the farm ends; flushes the shard whenever it has none waiting, so
  // that every round given is finished without waiting for the next.
  void run() noexcept {
    try {
      bool flushed = true;
      for (;;) {
        std::unique_lock lock(shared.mutex);
        if (inbox.empty() && !flushed) {
          lock.unlock();
          shard->flush();
          cpu.store(thread_cpu_seconds(), std::memory_order_relaxed);
          flushed = true;
          continue;
        }
        wake.wait(lock, [&] { return shared.abort || !inbox.empty(); });
        if (shared.abort) return;
        taken.push_back(std::move(inbox.front()));
        inbox.pop_front();
        lock.unlock();
        RoundInput& round = taken.back();
        const std::uint64_t number = round.round;
        for (const FlowEvent& e : round.events)
          shard->take(e, e.packet == FlowEvent::kNoPacket ? nullptr : &round.packets[e.packet]);
        shard->end_round(number);
        cpu.store(thread_cpu_seconds(), std::memory_order_relaxed);
        flushed = false;
      }
    } catch (const std::exception& e) {
      std::lock_guard lock(shared.mutex);
      if (shared.error.empty()) shared.error = e.what();
      shared.abort = true;
      shared.changed.notify_all();
    }
  }
};

FlowFarm::FlowFarm(std::size_t threads, const MakeShard& make, const PcapPieces& mapping, Output& out,
                   std::size_t first_offset, std::size_t round_bytes)
    : mapping_(mapping), out_(out), shared_(std::make_unique<FarmShared>()),
      window_(std::max<std::size_t>(2, 2 * threads)), round_limit_(std::max<std::size_t>(1, round_bytes)),
      selected_(threads, 0), bytes_(threads, 0) {
  shared_->rounds.push_back(RoundOrder{0, first_offset, {}});
  shared_->last_next = first_offset;
  for (std::size_t i = 0; i < threads; ++i) {
    auto lane = std::make_unique<Lane>(*shared_);
    lane->shard = make(lane->out, *lane);
    lanes_.push_back(std::move(lane));
  }
  try {
    for (auto& lane : lanes_) lane->thread = std::thread([l = lane.get()] { l->run(); });
  } catch (const std::system_error& e) {
    stop_threads();
    throw Error(std::string("cannot start a thread: ") + e.what());
  }
}

FlowFarm::~FlowFarm() { stop_threads(); }

void FlowFarm::stop_threads() noexcept {
  {
    std::lock_guard lock(shared_->mutex);
    shared_->abort = true;
  }
  for (auto& lane : lanes_) lane->wake.notify_one();
  for (auto& lane : lanes_) {
    if (lane->thread.joinable()) lane->thread.join();
  }
}

// A flow's thread: its id scattered (ids are given in turn), then scaled to the count (a
// multiply, not a division: this is asked for every segment on the reading thread).
std::uint32_t FlowFarm::lane_index(std::uint64_t flow) const noexcept {
  const std::uint64_t scattered = (flow * 0x9e3779b97f4a7c15ull) >> 32;
  return static_cast<std::uint32_t>((scattered * lanes_.size()) >> 32);
}

FlowFarm::Lane& FlowFarm::lane_of_flow(std::uint64_t flow) { return *lanes_[lane_index(flow)]; }

// Bytes in the mapping stay where they are; others (held out-of-order data, a frame
// libpcap read) are copied into the round.
std::span<const std::uint8_t> FlowFarm::kept(Lane& lane, std::span<const std::uint8_t> bytes) {
  if (bytes.empty() || mapping_.holds(bytes.data())) return bytes;
  return lane.filling.copies.emplace_back(bytes.begin(), bytes.end());
}

void FlowFarm::segment(std::uint64_t flow, const RawPacket& raw, const PacketInfo& info) {
  RoundInput& round = lane_of_flow(flow).filling;
  FlowEvent& e = round.events.emplace_back();
  e.kind = FlowEvent::Kind::kSegment;
  e.flow = flow;
  e.seconds = raw.seconds;
  e.nanoseconds = raw.nanoseconds;
  if (flow > newest_flow_) {  // its first segment
    newest_flow_ = flow;
    e.packet = static_cast<std::uint32_t>(round.packets.size());
    FlowPacket& p = round.packets.emplace_back(FlowPacket{raw, info});
    p.raw.data = {};  // a segment's bytes come as kBytes
  }
  round_bytes_ += raw.caplen;
}

void FlowFarm::bytes(std::uint64_t flow, int direction, std::uint64_t offset, std::span<const std::uint8_t> bytes) {
  Lane& lane = lane_of_flow(flow);
  FlowEvent& e = lane.filling.events.emplace_back();
  e.kind = FlowEvent::Kind::kBytes;
  e.flow = flow;
  e.direction = static_cast<std::uint8_t>(direction);
  e.offset = offset;
  e.bytes = kept(lane, bytes);
}

void FlowFarm::closing(std::uint64_t flow) {
  Lane& lane = lane_of_flow(flow);
  FlowEvent& e = lane.filling.events.emplace_back();
  e.kind = FlowEvent::Kind::kClosing;
  e.flow = flow;
  shared_->rounds.back().lanes.push_back(lane_index(flow));
}

void FlowFarm::packet(const RawPacket& raw, const PacketInfo& info) {
  const auto index = static_cast<std::uint32_t>(next_lane_);
  if (++next_lane_ == lanes_.size()) next_lane_ = 0;
  Lane& lane = *lanes_[index];
  FlowEvent& e = lane.filling.events.emplace_back();
  e.kind = FlowEvent::Kind::kPacket;
  e.packet = static_cast<std::uint32_t>(lane.filling.packets.size());
  FlowPacket& p = lane.filling.packets.emplace_back(FlowPacket{raw, info});
  p.raw.data = kept(lane, raw.data);
  round_bytes_ += raw.caplen;
  shared_->rounds.back().lanes.push_back(index);
}

void FlowFarm::read_to(std::size_t next) {
  shared_->last_next = next;
  if (round_bytes_ < round_limit_) return;
  end_round(next);
  while (write_oldest(false)) {
  }
  while (shared_->rounds.size() > window_) write_oldest(true);
}

// The round being filled goes to the threads; the next one starts at `next`.
void FlowFarm::end_round(std::size_t next) {
  const std::uint64_t number = shared_->rounds.back().round;
  {
    std::lock_guard lock(shared_->mutex);
    for (auto& lane : lanes_) {
      lane->filling.round = number;
      lane->inbox.push_back(std::move(lane->filling));
      lane->filling = RoundInput{};
      if (!shared_->spare.empty()) {
        lane->filling = std::move(shared_->spare.back());
        shared_->spare.pop_back();
      }
    }
    shared_->rounds.push_back(RoundOrder{number + 1, next, {}});
  }
  round_bytes_ = 0;
  for (auto& lane : lanes_) lane->wake.notify_one();
}

// Writes the oldest given round when every thread has finished it (waiting for that when
// `wait`); false when it was not written.
bool FlowFarm::write_oldest(bool wait) {
  if (shared_->rounds.size() < 2) return false;
  const std::uint64_t number = shared_->rounds.front().round;
  std::vector<RoundOutput> outputs;
  {
    std::unique_lock lock(shared_->mutex);
    const auto ready = [&] {
      return std::all_of(lanes_.begin(), lanes_.end(),
                         [&](const auto& l) { return !l->outbox.empty() && l->outbox.front().round == number; });
    };
    if (wait && !shared_->abort && !ready()) {
      const WaitTimer timer(waited_);
      shared_->changed.wait(lock, [&] { return shared_->abort || ready(); });
    }
    if (shared_->abort) throw Error(shared_->error.empty() ? "a flow thread stopped" : shared_->error);
    if (!ready()) return false;
    for (auto& lane : lanes_) {
      outputs.push_back(std::move(lane->outbox.front()));
      lane->outbox.pop_front();
    }
  }
  std::vector<std::size_t> at(lanes_.size(), 0);
  std::vector<std::size_t> next(lanes_.size(), 0);
  for (const std::uint32_t lane : shared_->rounds.front().lanes) {
    const RoundOutput& o = outputs[lane];
    if (next[lane] >= o.ends.size()) throw Error("a flow thread lost an event");
    const std::size_t end = o.ends[next[lane]++];
    out_.write(std::string_view(o.text).substr(at[lane], end - at[lane]));
    at[lane] = end;
  }
  for (std::size_t i = 0; i < lanes_.size(); ++i) {
    if (next[i] != outputs[i].ends.size()) throw Error("a flow thread printed an event it was not given");
    selected_[i] = outputs[i].selected;
    bytes_[i] = outputs[i].bytes;
  }
  shared_->rounds.pop_front();
  return true;
}

void FlowFarm::drain() {
  end_round(shared_->last_next);
  while (shared_->rounds.size() > 1) write_oldest(true);
}

FlowFarm::Totals FlowFarm::totals() const {
  Totals t;
  for (std::size_t i = 0; i < lanes_.size(); ++i) {
    t.selected += selected_[i];
    t.bytes += bytes_[i];
    const double cpu = lanes_[i]->cpu.load(std::memory_order_relaxed);
    t.threads_cpu_max = std::max(t.threads_cpu_max, cpu);
    t.threads_cpu_sum += cpu;
  }
  t.waited = waited_;
  return t;
}

bool FlowFarm::failed() const {
  std::lock_guard lock(shared_->mutex);
  return shared_->abort;
}

std::size_t FlowFarm::oldest_offset() const { return shared_->rounds.front().begin; }

}  // namespace gpufilter
