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

// A round as every shard takes it, from the calling thread.
struct RoundInput {
  std::uint64_t round = 0;
  std::vector<const PacketBatch*> batches;
  bool finish = false;  // the capture ends after them
};

// Where a flow's number goes in a shard's output: at `at`, the number of the flow that
// began at packet `created`.
struct NumberPlace {
  std::size_t at = 0;
  std::uint64_t created = 0;
};

// What one shard printed for a round, and its counts so far.
struct RoundOutput {
  std::uint64_t round = 0;
  std::string text;
  std::vector<std::pair<EventKey, std::size_t>> ends;  // each printing event's key and end in `text`
  std::vector<NumberPlace> numbers;
  std::vector<std::uint64_t> created;  // where the round's new flows began
  std::vector<std::uint64_t> gone;     // where the flows printed or dropped in it began
  std::uint64_t selected = 0;
  std::uint64_t bytes = 0;
  bool finished = false;  // the capture's end was in it: `reassembly` holds the counters
  TcpReassembler::Counters reassembly;
};

// A round as the calling thread keeps it until written: where it starts in the file, and
// its packets.
struct RoundOrder {
  std::uint64_t round = 0;
  std::size_t begin = 0;
  std::vector<std::unique_ptr<PacketBatch>> batches;
  bool finish = false;
};

}  // namespace

// The shards' outputs for one round, being written.
struct FlowFarm::RoundWrite {
  std::vector<RoundOutput> outputs;
};

// The farm's state beside its threads (FlowFarm keeps it behind a pointer).
struct FarmShared {
  std::mutex mutex;
  std::condition_variable changed;  // for the calling thread: a round is done, or a thread failed
  // Under the mutex.
  bool abort = false;  // a thread failed, or the farm ends
  std::string error;   // the failed thread's message
  // The calling thread's only.
  std::deque<RoundOrder> rounds;  // given and not written; the last is being filled
  std::size_t last_next = 0;      // the offset read_to() was last given
  ReassemblyConfig share;         // each shard's reassembly limits
};

struct FlowFarm::Lane final : FlowShardReport {
  Lane(FarmShared& s, std::size_t i, std::size_t n) : shared(s), lane(i), lanes(n) {}

  // Under shared.mutex.
  std::deque<RoundInput> inbox;
  std::condition_variable wake;  // a round came, or the farm ends
  std::deque<RoundOutput> outbox;
  // The lane's thread.
  FarmShared& shared;
  const std::size_t lane, lanes;   // this lane's number, of the farm's
  std::int64_t last_expire = 0;    // when flows were last ended idle (as one reassembler would)
  std::uint64_t others = 0;        // packets of other protocols met
  std::unique_ptr<FlowShard> shard;
  StringWriter writer;
  Output out{writer, false, 64 * 1024};
  std::deque<EventKey> keys;  // of the events not yet printed, in order
  RoundOutput doing;          // the round being reported: its events so far
  std::deque<std::pair<std::uint64_t, std::vector<std::uint64_t>>> created_in;  // by round taken
  std::atomic<double> cpu{0};    // the thread's CPU seconds, as of its last round
  std::thread thread;

  ReassemblyConfig reassembly() const override { return shared.share; }
  void key(const EventKey& k) override { keys.push_back(k); }
  void created(std::uint64_t index) override { created_in.back().second.push_back(index); }
  void number_here(std::uint64_t index) override {
    out.flush();
    doing.numbers.push_back(NumberPlace{writer.text().size(), index});
  }
  void gone(std::uint64_t index) override { doing.gone.push_back(index); }
  void reassembled(const TcpReassembler::Counters& counters) override {
    doing.finished = true;
    doing.reassembly = counters;
  }

  void printed() override {
    out.flush();
    if (keys.empty()) throw Error("a flow thread printed an event it was not given");
    doing.ends.emplace_back(keys.front(), writer.text().size());
    keys.pop_front();
  }

  void round_done(std::uint64_t round) override {
    out.flush();
    RoundOutput done = std::move(doing);
    doing = RoundOutput{};
    done.round = round;
    done.text = writer.take();
    done.selected = shard->selected();
    done.bytes = shard->bytes_scanned();
    if (!created_in.empty() && created_in.front().first == round) {
      done.created = std::move(created_in.front().second);
      created_in.pop_front();
    }
    {
      std::lock_guard lock(shared.mutex);
      outbox.push_back(std::move(done));
    }
    shared.changed.notify_all();
  }

  // This lane's packets of the batch, in order: the segments of its flows and every
  // lanes-th packet of another protocol; and after each segment whose second is new, the
  // idle flows one reassembler would end then.
  void take(const PacketBatch& batch) {
    if (batch.lanes != lanes) throw Error("a batch listed for another number of flow threads");
    const std::vector<std::uint32_t>& mine = batch.segments[lane];
    const std::vector<std::uint32_t>& ticks = batch.ticks;
    const std::vector<std::uint32_t>& other = batch.others;
    constexpr std::uint32_t kNone = ~std::uint32_t{0};
    std::size_t m = 0, t = 0;
    std::size_t o = (lane + lanes - others % lanes) % lanes;  // its first packet of another protocol
    others += other.size();
    RawPacket raw;
    for (;;) {
      const std::uint32_t next_mine = m < mine.size() ? mine[m] : kNone;
      const std::uint32_t next_tick = t < ticks.size() ? ticks[t] : kNone;
      const std::uint32_t next_other = o < other.size() ? other[o] : kNone;
      const std::uint32_t at = std::min({next_mine, next_tick, next_other});
      if (at == kNone) return;
      const DecodedPacket& d = batch.packets[at];
      raw = d.raw;
      raw.index += batch.index_base;
      if (at == next_mine) {
        // The flow of a segment a few on is fetched into the cache meanwhile (the flow
        // table's misses were the largest cost of reassembling).
        if (m + kAhead < mine.size()) shard->prefetch(batch.packets[mine[m + kAhead]].key);
        shard->segment(raw, d.info, d.key);
        ++m;
      }
      if (at == next_tick) {
        if (raw.seconds - last_expire >= 1) {
          shard->expire(raw.seconds, raw.index);
          last_expire = raw.seconds;
        }
        ++t;
      }
      if (at == next_other) {
        shard->packet(raw, d.info);
        o += lanes;
      }
    }
  }
  static constexpr std::size_t kAhead = 4;

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
        const RoundInput round = std::move(inbox.front());
        inbox.pop_front();
        lock.unlock();
        created_in.emplace_back(round.round, std::vector<std::uint64_t>{});
        for (const PacketBatch* batch : round.batches) take(*batch);
        if (round.finish) shard->finish();
        shard->end_round(round.round);
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

namespace {

// Each shard reassembles its flows with its share of one reassembler's limits: flows and
// held out-of-order bytes divided among them (never below one direction's limit), so that
// the memory they can hold together is what one thread's could.
ReassemblyConfig shard_limits(std::size_t threads) {
  ReassemblyConfig one;
  ReassemblyConfig share = one;
  const std::size_t n = std::max<std::size_t>(1, threads);
  share.max_flows = std::max<std::size_t>(1, (one.max_flows + n - 1) / n);
  share.max_total_pending_bytes = std::max(one.max_pending_bytes, one.max_total_pending_bytes / n);
  return share;
}

// The threads' reassemblers counted together: sums, and the largest peak.
void add_counters(TcpReassembler::Counters& to, const TcpReassembler::Counters& from) {
  to.flows += from.flows;
  to.gaps += from.gaps;
  to.gap_bytes += from.gap_bytes;
  to.retransmitted_bytes += from.retransmitted_bytes;
  to.budget_gaps += from.budget_gaps;
  to.budget_gap_bytes += from.budget_gap_bytes;
  to.limit_gaps += from.limit_gaps;
  to.limit_gap_bytes += from.limit_gap_bytes;
  to.held_peak = std::max(to.held_peak, from.held_peak);
}

}  // namespace

FlowFarm::FlowFarm(std::size_t threads, const MakeShard& make, Output& out, std::size_t first_offset,
                   std::size_t round_bytes)
    : out_(out), shared_(std::make_unique<FarmShared>()),
      round_limit_(std::max<std::size_t>(1, round_bytes)),
      selected_(threads, 0), bytes_(threads, 0) {
  shared_->rounds.push_back(RoundOrder{0, first_offset, {}, false});
  shared_->last_next = first_offset;
  shared_->share = shard_limits(threads);
  loose_.for_lanes(threads);
  for (std::size_t i = 0; i < threads; ++i) {
    auto lane = std::make_unique<Lane>(*shared_, i, threads);
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

void FlowFarm::add(PacketBatch&& batch) {
  round_bytes_ += batch.bytes;
  shared_->rounds.back().batches.push_back(std::make_unique<PacketBatch>(std::move(batch)));
}

// The packet is copied (its frame too) into the batch being filled here, decoded as a
// reading thread decodes.
void FlowFarm::add(const RawPacket& raw, const PacketInfo& info) {
  const std::vector<std::uint8_t>& frame = loose_.frames.emplace_back(raw.data.begin(), raw.data.end());
  DecodedPacket& d = loose_.packets.emplace_back(raw, [&] { return info; });
  d.raw.data = frame;
  if (info.transport == PacketInfo::Transport::kTcp) d.key = TcpReassembler::key_of(info);
  loose_.list_last();
  loose_.bytes += raw.caplen;
  round_bytes_ += raw.caplen;
}

PacketBatch FlowFarm::spare_batch() {
  PacketBatch batch;
  if (!spare_.empty()) {
    batch = std::move(spare_.back());
    spare_.pop_back();
  }
  batch.for_lanes(lanes_.size());
  return batch;
}

void FlowFarm::finish() { shared_->rounds.back().finish = true; }

void FlowFarm::read_to(std::size_t next) {
  shared_->last_next = next;
  if (round_bytes_ < round_limit_) return;
  end_round(next);
  while (write_oldest(false)) {
  }
  while (shared_->rounds.size() > kWindow) write_oldest(true);
}

// The round being filled goes to the threads; the next one starts at `next`.
void FlowFarm::end_round(std::size_t next) {
  RoundOrder& filled = shared_->rounds.back();
  if (!loose_.packets.empty()) {
    filled.batches.push_back(std::make_unique<PacketBatch>(std::move(loose_)));
    loose_ = spare_batch();
  }
  RoundInput input{filled.round, {}, filled.finish};
  for (const auto& batch : filled.batches) input.batches.push_back(batch.get());
  {
    std::lock_guard lock(shared_->mutex);
    for (auto& lane : lanes_) lane->inbox.push_back(input);
    shared_->rounds.push_back(RoundOrder{filled.round + 1, next, {}, false});
  }
  round_bytes_ = 0;
  for (auto& lane : lanes_) lane->wake.notify_one();
}

// Writes the oldest given round when every thread has finished it (waiting for that when
// `wait`); false when it was not written.
bool FlowFarm::write_oldest(bool wait) {
  if (shared_->rounds.size() < 2) return false;
  const std::uint64_t number = shared_->rounds.front().round;
  RoundWrite round;
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
      round.outputs.push_back(std::move(lane->outbox.front()));
      lane->outbox.pop_front();
    }
  }
  number_flows(round);
  write_events(round);
  for (std::size_t i = 0; i < lanes_.size(); ++i) {
    const RoundOutput& o = round.outputs[i];
    for (const std::uint64_t created : o.gone) numbers_.erase(created);
    selected_[i] = o.selected;
    bytes_[i] = o.bytes;
    if (o.finished) add_counters(reassembly_, o.reassembly);
  }
  for (auto& batch : shared_->rounds.front().batches) {  // the threads are done with them
    batch->clear();
    spare_.push_back(std::move(*batch));
  }
  shared_->rounds.pop_front();
  return true;
}

// The flows that began in the round are numbered in the order they began, after those of
// the rounds before: one reassembler's numbers.
void FlowFarm::number_flows(const RoundWrite& round) {
  std::vector<std::uint64_t> began;
  for (const RoundOutput& o : round.outputs) began.insert(began.end(), o.created.begin(), o.created.end());
  std::sort(began.begin(), began.end());
  for (const std::uint64_t created : began) numbers_[created] = next_number_++;
}

void FlowFarm::write_number(std::uint64_t created) {
  const auto it = numbers_.find(created);
  if (it == numbers_.end()) throw Error("a flow thread printed a flow it did not report");
  out_.write_number(it->second);
}

// The round's printing events in one thread's order (by key), each one's text with the
// flows' numbers where the shard left their places.
void FlowFarm::write_events(const RoundWrite& round) {
  struct Event {
    EventKey key;
    std::uint32_t lane;
    std::uint32_t index;
  };
  // Only the events that printed something are ordered (most print nothing: with -c, or
  // flows and packets not selected). An event's text starts where the one before ends.
  std::vector<Event> order;
  for (std::size_t l = 0; l < round.outputs.size(); ++l) {
    const auto& ends = round.outputs[l].ends;
    std::size_t from = 0;
    for (std::size_t i = 0; i < ends.size(); ++i) {
      if (ends[i].second != from)
        order.push_back(Event{ends[i].first, static_cast<std::uint32_t>(l), static_cast<std::uint32_t>(i)});
      from = ends[i].second;
    }
  }
  std::sort(order.begin(), order.end(), [](const Event& a, const Event& b) { return a.key < b.key; });
  std::vector<std::size_t> at(round.outputs.size(), 0);
  std::vector<std::size_t> place(round.outputs.size(), 0);
  for (const Event& e : order) {
    const RoundOutput& o = round.outputs[e.lane];
    const std::size_t end = o.ends[e.index].second;
    std::size_t& from = at[e.lane];
    from = e.index > 0 ? o.ends[e.index - 1].second : 0;
    std::size_t& next_place = place[e.lane];
    while (next_place < o.numbers.size() && o.numbers[next_place].at < end) {  // text follows a number
      const NumberPlace& n = o.numbers[next_place++];
      out_.write(std::string_view(o.text).substr(from, n.at - from));
      write_number(n.created);
      from = n.at;
    }
    out_.write(std::string_view(o.text).substr(from, end - from));
    from = end;
  }
  for (std::size_t l = 0; l < round.outputs.size(); ++l) {
    if (at[l] != round.outputs[l].text.size() || place[l] != round.outputs[l].numbers.size())
      throw Error("a flow thread printed outside its events");
  }
}

void FlowFarm::drain() {
  end_round(shared_->last_next);
  while (shared_->rounds.size() > 1) write_oldest(true);
}

FlowFarm::Totals FlowFarm::totals() const {
  Totals t;
  t.reassembly = reassembly_;
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

ReassemblyConfig FlowFarm::reassembly_limits() const { return shared_->share; }

std::size_t FlowFarm::oldest_offset() const { return shared_->rounds.front().begin; }

}  // namespace gpufilter
