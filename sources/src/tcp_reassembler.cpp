// TcpReassembler: per flow and direction, the next expected sequence number and the stream
// offset it stands for; segments are placed by their distance from it (modulo 2^32, so a
// wrap of the sequence space is just arithmetic), trimmed of what was handed on already,
// and either handed on at once (straight from the frame) or held, without overlaps, in a
// map keyed by stream offset until the hole before them fills. Held bytes are bounded per
// direction; past the bound the stream skips to the first held piece and counts the gap.
// The held memory of all flows is accounted too (bytes plus kPieceCost per piece) and
// bounded by a global budget: past it, the direction holding data the longest skips its
// first gap, then the next, until the total fits.
// A flow ended by FIN or RST stays as a small tombstone for its idle time, so that the
// last ACK or a retransmitted FIN does not open a new flow.
#include "gpufilter/sources/tcp_reassembler.hpp"

#include "owned_table.hpp"

#include <endian.h>

#include <algorithm>
#include <array>
#include <compare>
#include <cstring>
#include <iterator>
#include <map>
#include <vector>

namespace gpufilter {

namespace {

constexpr std::uint8_t kFin = 0x01;
constexpr std::uint8_t kSyn = 0x02;
constexpr std::uint8_t kRst = 0x04;
constexpr std::uint8_t kAck = 0x10;

// Held pieces are merged when adjacent, but an adversarial order (each byte sent before
// the one in front of it) still makes one map node per byte, some 100 bytes of memory for
// one byte held. So the pieces are bounded too: a direction holds at most
// max_pending_bytes / kPieceCost of them (at least 16) before it skips its first gap.
constexpr std::size_t kPieceCost = 64;

// An address's 16 bytes as two big-endian words: compared without a call to memcmp
// (which the arrays' own operators make, a twentieth of --stream's reading thread).
struct AddressWords {
  std::uint64_t high, low;
  explicit AddressWords(const std::array<std::uint8_t, 16>& a) noexcept {
    std::uint64_t w[2];
    std::memcpy(w, a.data(), sizeof w);
    high = be64toh(w[0]);
    low = be64toh(w[1]);
  }
  auto operator<=>(const AddressWords&) const = default;
};

// An endpoint before or equal to the other, as (address bytes, port) in order.
bool endpoint_before(const std::array<std::uint8_t, 16>& a, std::uint16_t a_port,
                     const std::array<std::uint8_t, 16>& b, std::uint16_t b_port) noexcept {
  const AddressWords x(a), y(b);
  return x != y ? x < y : a_port <= b_port;
}

// The flows are found by FlowKey; the table takes the hash made with the key.
using Key = FlowKey;
struct KeyHash {
  std::size_t operator()(const Key& key) const noexcept { return static_cast<std::size_t>(key.hash); }
};

struct Direction {
  bool started = false;
  std::uint32_t next_seq = 0;  // the sequence number of the next byte to hand on
  std::uint64_t offset = 0;    // its stream offset
  bool fin = false;
  std::uint64_t fin_offset = 0;                                // the stream offset the FIN stands at
  std::map<std::uint64_t, std::vector<std::uint8_t>> pending;  // stream offset -> bytes, disjoint
  std::size_t pending_bytes = 0;
  std::size_t accounted = 0;      // its share of the global held total
  std::uint64_t holding_since = 0;  // the tick it began holding (its key in `holders`); 0: none

  bool complete() const { return fin && offset >= fin_offset; }
};

struct Flow;
// Flows by (last_seen, touch count): the first is the least recently seen, by capture
// time even when the capture's clock steps backwards, and by arrival among equal times.
using Order = std::map<std::pair<std::int64_t, std::uint64_t>, Flow*>;

struct Flow {
  std::uint64_t id = 0;
  Key key;
  std::array<std::uint8_t, 16> client_address{};  // direction 0's sender
  std::uint16_t client_port = 0;
  std::int64_t last_seen = 0;
  bool closed = false;  // ended by FIN or RST: a tombstone
  std::array<Direction, 2> directions;
  Order::iterator place;  // in the open or the tombstone order
};


}  // namespace

struct TcpReassembler::Impl {
  ReassemblyConfig config;
  Deliver deliver;
  Closed closed;
  Counters counters;
  std::uint64_t next_id = 1;
  // std::unordered_map's division by a prime and its node chase were a fifth of the
  // reassembling thread's time.
  OwnedTable<Flow, Key, KeyHash> flows;
  Order open;
  Order tombstones;
  std::uint64_t ticks = 0;
  // The directions holding data, the longest-holding first: the ones the budget skips.
  std::map<std::uint64_t, std::pair<Flow*, int>> holders;
  std::uint64_t held = 0;  // the accounted total of every direction's held pieces
  bool absorbed = false;   // the last segment went to a tombstone

  std::size_t max_flows() const { return std::max<std::size_t>(1, config.max_flows); }
  std::size_t max_pieces() const { return TcpReassembler::max_pieces(config); }

  // Brings a direction's share of the held total, and its place among the holders, up to
  // date after its pieces changed.
  void account(Flow& flow, int d) {
    Direction& dir = flow.directions[d];
    const std::size_t now = dir.pending_bytes + dir.pending.size() * kPieceCost;
    held = held - dir.accounted + now;
    dir.accounted = now;
    if (dir.pending.empty() && dir.holding_since != 0) {
      holders.erase(dir.holding_since);
      dir.holding_since = 0;
    } else if (!dir.pending.empty() && dir.holding_since == 0) {
      dir.holding_since = ++ticks;
      holders.emplace(dir.holding_since, std::pair<Flow*, int>(&flow, d));
    }
  }

  // Over the global budget: the longest-holding directions skip their first gaps (their
  // data is handed on after them) until the total fits.
  void enforce_budget() {
    while (held > config.max_total_pending_bytes && !holders.empty()) {
      const auto [flow, d] = holders.begin()->second;
      ++counters.budget_gaps;
      counters.budget_gap_bytes += skip_gap(*flow, d);
    }
    counters.held = held;
    counters.held_peak = std::max(counters.held_peak, held);
  }

  // Hands on `bytes` at the direction's current offset and moves past them. The state
  // moves first, so a Deliver that throws leaves a consistent flow.
  void hand_on(Flow& flow, int d, std::span<const std::uint8_t> bytes) {
    if (bytes.empty()) return;
    Direction& dir = flow.directions[d];
    const std::uint64_t at = dir.offset;
    dir.offset += bytes.size();
    dir.next_seq += static_cast<std::uint32_t>(bytes.size());
    deliver(flow.id, d, at, bytes);
  }

  // Hands on the held pieces that have become contiguous.
  void drain(Flow& flow, int d) {
    Direction& dir = flow.directions[d];
    while (!dir.pending.empty() && dir.pending.begin()->first <= dir.offset) {
      auto node = dir.pending.extract(dir.pending.begin());
      const std::vector<std::uint8_t>& bytes = node.mapped();
      dir.pending_bytes -= bytes.size();
      account(flow, d);  // before hand_on: a Deliver that throws leaves the total right
      const std::uint64_t end = node.key() + bytes.size();
      if (end <= dir.offset) {
        counters.retransmitted_bytes += bytes.size();
        continue;
      }
      const std::size_t seen = static_cast<std::size_t>(dir.offset - node.key());
      counters.retransmitted_bytes += seen;
      hand_on(flow, d, std::span<const std::uint8_t>(bytes).subspan(seen));
    }
  }

  // Gives up on the hole before the first held piece: counted, then the stream goes on.
  // Returns the hole's size.
  std::uint64_t skip_gap(Flow& flow, int d) {
    Direction& dir = flow.directions[d];
    const std::uint64_t gap = dir.pending.begin()->first - dir.offset;
    ++counters.gaps;
    counters.gap_bytes += gap;
    dir.offset += gap;
    dir.next_seq += static_cast<std::uint32_t>(gap);
    drain(flow, d);
    return gap;
  }

  // Stores `bytes` (all past the direction's offset) as a new piece at `at`, appended to a
  // piece that ends there and joined by the piece that starts where it ends when that one
  // is not the larger. Only the smaller side is ever copied, so a byte is copied again
  // only when its piece at least doubles: O(n log n) copying for n held bytes.
  void store_piece(Direction& dir, std::uint64_t at, std::span<const std::uint8_t> bytes) {
    dir.pending_bytes += bytes.size();
    auto after = dir.pending.upper_bound(at);
    auto target = dir.pending.end();
    if (after != dir.pending.begin()) {
      auto before = std::prev(after);
      if (before->first + before->second.size() == at) {
        before->second.insert(before->second.end(), bytes.begin(), bytes.end());
        target = before;
      }
    }
    if (target == dir.pending.end()) {
      target = dir.pending.emplace_hint(after, at, std::vector<std::uint8_t>(bytes.begin(), bytes.end()));
    }
    if (after != dir.pending.end() && target->first + target->second.size() == after->first &&
        after->second.size() <= target->second.size()) {
      target->second.insert(target->second.end(), after->second.begin(), after->second.end());
      dir.pending.erase(after);
    }
  }

  // Holds an out-of-order segment: only its bytes no held piece has yet (the others are
  // retransmitted copies, possibly cut at other boundaries).
  void hold(Direction& dir, std::uint64_t at, std::span<const std::uint8_t> bytes) {
    const std::uint64_t end = at + bytes.size();
    std::uint64_t p = at;
    while (p < end) {
      auto after = dir.pending.upper_bound(p);
      if (after != dir.pending.begin()) {
        auto covering = std::prev(after);
        const std::uint64_t covered_end = covering->first + covering->second.size();
        if (covered_end > p) {
          const std::uint64_t covered = std::min(covered_end, end) - p;
          counters.retransmitted_bytes += covered;
          p += covered;
          continue;
        }
      }
      const std::uint64_t piece_end = after == dir.pending.end() ? end : std::min(after->first, end);
      store_piece(dir, p, bytes.subspan(static_cast<std::size_t>(p - at), static_cast<std::size_t>(piece_end - p)));
      p = piece_end;
    }
  }

  bool over_limit(const Direction& dir) const {
    return dir.pending_bytes > config.max_pending_bytes || dir.pending.size() > max_pieces();
  }

  // The payload of a segment at stream position `at` (negative: it starts before the
  // stream's first byte).
  void add(Flow& flow, int d, std::int64_t at, std::span<const std::uint8_t> bytes) {
    if (bytes.empty()) return;
    Direction& dir = flow.directions[d];
    const auto offset = static_cast<std::int64_t>(dir.offset);
    const std::int64_t end = at + static_cast<std::int64_t>(bytes.size());
    if (end <= offset) {
      counters.retransmitted_bytes += bytes.size();
      return;
    }
    if (at < offset) {
      const auto seen = static_cast<std::size_t>(offset - at);
      counters.retransmitted_bytes += seen;
      bytes = bytes.subspan(seen);
      at = offset;
    }
    if (at == offset) {
      hand_on(flow, d, bytes);
      drain(flow, d);
      return;
    }
    hold(dir, static_cast<std::uint64_t>(at), bytes);
    account(flow, d);
    while (over_limit(dir)) {
      ++counters.limit_gaps;
      counters.limit_gap_bytes += skip_gap(flow, d);
    }
    enforce_budget();
  }

  // Ends an open flow: what is held is handed on after its gaps, then Closed. A flow that
  // ended by FIN or RST becomes a tombstone; one that idled out or was evicted is dropped.
  void end(Flow* flow, bool tombstone) {
    const std::uint64_t id = flow->id;
    for (int d = 0; d < 2; ++d) {
      while (!flow->directions[d].pending.empty()) skip_gap(*flow, d);
    }
    counters.held = held;
    open.erase(flow->place);
    flow->closed = true;
    flow->directions = {};
    if (tombstone) {
      enter(tombstones, flow, flow->last_seen);
      if (tombstones.size() > max_flows()) drop(tombstones.begin()->second);
    } else {
      flows.erase(flow->key);  // `flow` is gone from here on
    }
    // Closed comes last: the flow's state is settled whatever the callback does.
    closed(id);
  }

  // Puts `flow` into `order` as seen at `seconds` (or later, if it was seen later).
  void enter(Order& order, Flow* flow, std::int64_t seconds) {
    flow->last_seen = std::max(flow->last_seen, seconds);
    // Usually the latest: the hint makes that insertion constant time.
    flow->place = order.emplace_hint(order.end(), std::pair(flow->last_seen, ++ticks), flow);
  }
  // The flow moves to the end of `order`: its node is moved, not freed and made again (one
  // touch per segment: the allocations were a tenth of --stream's time).
  void touch(Order& order, Flow* flow, std::int64_t seconds) {
    // Already the last, seen no later: a new tick would leave every order as it is (the
    // next flow touched still comes after it). Most segments come in runs of one flow.
    if (seconds <= flow->last_seen && std::prev(order.end())->second == flow) return;
    auto node = order.extract(flow->place);
    flow->last_seen = std::max(flow->last_seen, seconds);
    node.key() = {flow->last_seen, ++ticks};
    flow->place = order.insert(order.end(), std::move(node));
  }

  void drop(Flow* tombstone) {
    tombstones.erase(tombstone->place);
    flows.erase(tombstone->key);
  }

  Flow* create(const Key& key, const PacketInfo& info, std::int64_t seconds) {
    while (open.size() >= max_flows()) end(open.begin()->second, false);
    auto flow = std::make_unique<Flow>();
    flow->id = next_id++;
    flow->key = key;
    flow->client_address = info.src;
    flow->client_port = info.sport;
    flow->last_seen = seconds;
    Flow* raw = flows.insert(std::move(flow));
    enter(open, raw, seconds);
    ++counters.flows;
    return raw;
  }

  std::uint64_t segment(const PacketInfo& info, std::span<const std::uint8_t> frame, std::int64_t seconds,
                        const Key& key) {
    absorbed = false;
    if (info.transport != PacketInfo::Transport::kTcp) return 0;

    const bool syn = (info.tcp_flags & kSyn) != 0;
    Flow* flow = flows.find(key);
    // Idle for longer than the timeout in capture time: the old flow ends even when
    // expire() was not called in between, and this segment starts a new one.
    if (flow != nullptr && flow->last_seen < seconds - config.idle_timeout_seconds) {
      if (flow->closed) {
        drop(flow);
      } else {
        end(flow, false);
      }
      flow = nullptr;
    }
    if (flow != nullptr && flow->closed) {
      // The last segments of a finished connection are absorbed; a new SYN on the same
      // ports is a new connection.
      if (!syn || (info.tcp_flags & kAck) != 0) {
        touch(tombstones, flow, seconds);
        absorbed = true;
        return flow->id;
      }
      drop(flow);
      flow = nullptr;
    }
    if (flow == nullptr) {
      flow = create(key, info, seconds);
    } else {
      touch(open, flow, seconds);
    }
    const std::uint64_t id = flow->id;

    const int d = info.sport == flow->client_port && AddressWords(info.src) == AddressWords(flow->client_address) ? 0 : 1;
    Direction& dir = flow->directions[d];
    // The first byte of data follows the SYN, which takes one sequence number.
    const std::uint32_t data_seq = info.tcp_seq + (syn ? 1u : 0u);
    if (!dir.started) {
      dir.started = true;
      dir.next_seq = data_seq;
    }
    const std::size_t begin = std::min(info.payload_offset, frame.size());
    const std::size_t length = std::min(info.payload_length, frame.size() - begin);
    const std::span<const std::uint8_t> payload = frame.subspan(begin, length);
    // The distance from the next expected byte, as a signed 32-bit difference: segments
    // up to 2 GiB behind or ahead are placed right across a wrap of the sequence space.
    const std::int64_t at = static_cast<std::int64_t>(dir.offset) + static_cast<std::int32_t>(data_seq - dir.next_seq);
    if ((info.tcp_flags & kFin) != 0 && !dir.fin) {
      dir.fin = true;
      dir.fin_offset = static_cast<std::uint64_t>(std::max<std::int64_t>(0, at + static_cast<std::int64_t>(length)));
    }
    add(*flow, d, at, payload);
    // `flow` is still open here: add() ends nothing.
    if ((info.tcp_flags & kRst) != 0 || (flow->directions[0].complete() && flow->directions[1].complete())) {
      end(flow, true);
    }
    return id;
  }

  void expire(std::int64_t now) {
    const std::int64_t threshold = now - config.idle_timeout_seconds;
    while (!open.empty() && open.begin()->second->last_seen < threshold) end(open.begin()->second, false);
    while (!tombstones.empty() && tombstones.begin()->second->last_seen < threshold) drop(tombstones.begin()->second);
  }

  void finish() {
    while (!open.empty()) end(open.begin()->second, false);
    while (!tombstones.empty()) drop(tombstones.begin()->second);
  }
};

TcpReassembler::TcpReassembler(ReassemblyConfig config, Deliver deliver, Closed closed)
    : impl_(std::make_unique<Impl>()) {
  impl_->config = config;
  impl_->deliver = std::move(deliver);
  impl_->closed = std::move(closed);
}

TcpReassembler::~TcpReassembler() = default;

std::size_t TcpReassembler::max_pieces(const ReassemblyConfig& config) noexcept {
  return std::max<std::size_t>(16, config.max_pending_bytes / kPieceCost);
}

// Both endpoints as words, the lower first, each word read from within one field (no
// load spanning two fields' stores, no call to memcmp); hashed eight bytes at a time,
// each word multiplied on its own and the sum mixed once (FNV-1a's byte loop over the 40
// bytes was a fifth of --stream's time).
FlowKey TcpReassembler::key_of(const PacketInfo& info) noexcept {
  const bool source_low = endpoint_before(info.src, info.sport, info.dst, info.dport);
  const std::array<std::uint8_t, 16>& low = source_low ? info.src : info.dst;
  const std::array<std::uint8_t, 16>& high = source_low ? info.dst : info.src;
  const std::uint16_t low_port = source_low ? info.sport : info.dport;
  const std::uint16_t high_port = source_low ? info.dport : info.sport;
  FlowKey key;
  std::array<std::uint64_t, 5>& w = key.words;
  std::memcpy(&w[0], low.data(), 8);
  std::memcpy(&w[1], low.data() + 8, 8);
  std::memcpy(&w[2], high.data(), 8);
  std::memcpy(&w[3], high.data() + 8, 8);
  w[4] = low_port | std::uint64_t{high_port} << 16 |
         static_cast<std::uint64_t>(static_cast<std::uint32_t>(info.ip_version)) << 32;
  std::uint64_t h = (w[0] ^ 0x9e3779b97f4a7c15ull) * 0xff51afd7ed558ccdull +
                    (w[1] ^ 0xc2b2ae3d27d4eb4full) * 0xc4ceb9fe1a85ec53ull +
                    (w[2] ^ 0x165667b19e3779f9ull) * 0x9e3779b97f4a7c15ull +
                    (w[3] ^ 0x27d4eb2f165667c5ull) * 0xd6e8feb86659fd93ull +
                    (w[4] ^ 0x85ebca77c2b2ae63ull) * 0xff51afd7ed558ccdull;
  h ^= h >> 32;
  h *= 0xd6e8feb86659fd93ull;
  h ^= h >> 29;
  key.hash = h;
  return key;
}

std::uint64_t TcpReassembler::segment(const PacketInfo& info, std::span<const std::uint8_t> frame,
                                      std::int64_t seconds) {
  if (info.transport != PacketInfo::Transport::kTcp) return impl_->segment(info, frame, seconds, FlowKey{});
  return impl_->segment(info, frame, seconds, key_of(info));
}

std::uint64_t TcpReassembler::segment(const PacketInfo& info, std::span<const std::uint8_t> frame,
                                      std::int64_t seconds, const FlowKey& key) {
  return impl_->segment(info, frame, seconds, key);
}

void TcpReassembler::prefetch(const FlowKey& key) const noexcept { impl_->flows.prefetch(key, true); }

void TcpReassembler::expire(std::int64_t now_seconds) { impl_->expire(now_seconds); }

void TcpReassembler::finish() { impl_->finish(); }

TcpReassembler::Counters TcpReassembler::counters() const noexcept { return impl_->counters; }

bool TcpReassembler::absorbed() const noexcept { return impl_->absorbed; }

}  // namespace gpufilter
