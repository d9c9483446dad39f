// The capture run: packets read and decoded, their records (or reassembled TCP streams)
// scanned in chunks by RecordScan, each packet or flow selected under -w/-x/-v/-m, and
// the selected ones handed to a PacketSink (sinks/packet_printer.hpp) and the --pcap-out
// writer. How they are printed is the sinks' business.
#include "packet_mode.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <chrono>
#include <cstring>
#include <deque>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "flow_excerpts.hpp"
#include "flow_farm.hpp"
#include "packets_ahead.hpp"
#include "packet_farm.hpp"
#include "packet_select.hpp"
#include "gpufilter/core/errors.hpp"
#include "gpufilter/core/thread_clock.hpp"
#include "gpufilter/core/unique_fd.hpp"
#include "gpufilter/grep/line_occurrences.hpp"
#include "gpufilter/grep/word.hpp"
#include "gpufilter/scan/record_scan.hpp"
#include "gpufilter/sinks/packet_printer.hpp"
#include "gpufilter/sinks/pcap_writer.hpp"
#include "gpufilter/sources/packet.hpp"
#include "gpufilter/sources/pcap_reader.hpp"
#include "gpufilter/sources/tcp_reassembler.hpp"

namespace gpufilter {
namespace {

// Record tags: a packet's (bit 63 set, its index), or a flow's data of one direction
// (flow << 2 | direction) and the flow's end (flow << 2 | 2); in a FlowFarm's shard, the
// end of a round (round << 2 | 3).
constexpr std::uint64_t kPacketTag = std::uint64_t{1} << 63;
constexpr std::uint64_t kFlowEnd = 2;
constexpr std::uint64_t kRoundEnd = 3;

std::unique_ptr<FlowShard> make_shard(const cli::Options& o, const CaptureThreads& threads, const PatternSet& patterns,
                                      Output& out, const std::optional<Colors>& colors, StopSignal& stop,
                                      Notices& notices, FlowShardReport& report, const CaptureInput& input);

// Writing the output failed: standard output (OutputError) or the --pcap-out file. Either
// ends the run: nothing more can be written, and going on would report the same failure
// again for every packet. The message names the file; for standard output it is grep's.
class CaptureOutputError final : public Error {
 public:
  using Error::Error;
};

// A piece of a flow direction's stream being scanned: where it starts in the stream, and
// whether it is the direction's unterminated last line, scanned when the flow ends.
struct Piece {
  std::uint64_t offset = 0;
  bool last = false;
};

// A packet whose record is being scanned: kept until its result comes back.
struct Pending {
  RawPacket raw;                    // its data in `frame`, or in a mapped file
  std::vector<std::uint8_t> frame;
  PacketInfo info;
};

// A packet kept for --pcap-out until its flow is decided.
struct HeldPacket {
  RawPacket raw;
  std::vector<std::uint8_t> data;
};

// Single-pass --pcap-out with --stream (standard input, a live interface): the packets of
// an undecided flow are held, at most this many bytes per flow and for all flows together.
constexpr std::size_t kHeldPerFlow = std::size_t{1} << 20;
constexpr std::size_t kHeldTotal = std::size_t{64} << 20;

// --stream on many threads: how many threads read and decode the capture for the flow
// threads (cli/packets_ahead.hpp): one per four cores, one to four (H200 machine, 16
// cores, 2 GB capture, 10,000 / 1 literals, GB/s: 2 threads 3.45 / 3.63, 3 3.74 / 4.72,
// 4 4.07 / 4.78, 5 4.05 / 3.97); tests and measurements set it with GPUFILTER_READ_THREADS.
std::size_t reading_threads() {
  if (const char* set = std::getenv("GPUFILTER_READ_THREADS"))
    return std::clamp<std::size_t>(std::strtoull(set, nullptr, 10), 1, 64);
  const std::size_t cores = std::max(1u, std::thread::hardware_concurrency());
  return std::clamp<std::size_t>(cores / 4, 1, 4);
}

// How many threads reassemble and match flows, of the `wanted`: the cores less the reading
// threads and the one that hands out their batches and writes.
// Tests set it with GPUFILTER_FLOW_THREADS (more threads than this machine's cores, so
// that flows and their ends come from many at once).
std::size_t flow_threads(std::size_t wanted, std::size_t readers) {
  if (const char* set = std::getenv("GPUFILTER_FLOW_THREADS"))
    return std::clamp<std::size_t>(std::strtoull(set, nullptr, 10), 1, 64);
  const std::size_t cores = std::max(1u, std::thread::hardware_concurrency());
  return std::min(wanted, std::max<std::size_t>(2, cores > readers + 1 ? cores - readers - 1 : 1));
}

// The parts the reading threads take (tests make them small, to cross many of their edges
// in a small capture).
std::size_t reading_part_bytes() {
  const char* set = std::getenv("GPUFILTER_READ_PART_BYTES");
  return set != nullptr ? std::max<std::size_t>(1, std::strtoull(set, nullptr, 10)) : PacketsAhead::kPartBytes;
}

// A mapped capture read here gives back the pages behind it in steps of this many bytes.
constexpr std::size_t kReleaseStep = std::size_t{32} << 20;

struct Flow {
  PacketInfo first;  // direction 0's first packet: the client
  std::int64_t seconds = 0;  // its first packet's time
  std::uint32_t nanoseconds = 0;
  std::int64_t last_seconds = 0;  // its last packet's
  std::uint32_t last_nanoseconds = 0;
  std::string carry[2];  // the last longest-pattern - 1 bytes of each direction
  std::uint64_t bytes[2] = {0, 0};
  std::uint64_t packets = 0;
  std::set<std::uint32_t> patterns;  // unique ids found
  FlowExcerpts excerpts;             // what the output shows of its matches
  bool matched = false;
  int match_direction = 0;
  std::uint64_t match_offset = 0;
  bool written = false;  // single-pass --pcap-out: its packets are being written
  // -x with fixed strings: an occurrence that is the whole of a direction so far (its
  // pattern's unique id and bytes), which selects the flow if no byte follows it.
  struct Whole {
    std::uint32_t pattern;
    std::string bytes;
  };
  std::optional<Whole> whole[2];
  // Single-pass --pcap-out: its packets while it is undecided (the first ones, within
  // kHeldPerFlow and kHeldTotal), written when it is selected.
  std::vector<HeldPacket> held;
  std::size_t held_bytes = 0;
  bool held_overflow = false;  // some were beyond the limits, and are not written
  // A FlowFarm's shard: the packet it began at, and its place among the least recently
  // seen (its latest time, the packet that touched it last), as one reassembler orders them.
  std::uint64_t created = 0;
  std::int64_t seen = 0;
  std::uint64_t touched = 0;
};

// libpcap waits on a live interface in its own poll, which a signal does not end: for a
// live capture a thread breaks the loop when the stop comes (pcap_breakloop wakes that
// poll). The destructor wakes the thread through a pipe and joins it.
class StopWatcher {
 public:
  StopWatcher(PcapReader& reader, StopSignal& stop, bool live) {
    if (!live || ::pipe2(wake_, O_CLOEXEC) != 0) return;
    thread_ = std::thread([&reader, &stop, this] {
      pollfd p[2] = {{stop.fd(), POLLIN, 0}, {wake_[0], POLLIN, 0}};
      while (::poll(p, 2, -1) < 0 && errno == EINTR) {
      }
      if (p[0].revents != 0) reader.break_loop();
    });
  }
  ~StopWatcher() {
    if (thread_.joinable()) {
      const char byte = 0;
      [[maybe_unused]] const ssize_t n = ::write(wake_[1], &byte, 1);
      thread_.join();
    }
    if (wake_[0] >= 0) ::close(wake_[0]);
    if (wake_[1] >= 0) ::close(wake_[1]);
  }
  StopWatcher(const StopWatcher&) = delete;
  StopWatcher& operator=(const StopWatcher&) = delete;

 private:
  int wake_[2] = {-1, -1};
  std::thread thread_;
};

// The name of each unique pattern in the output: the first given pattern that became it.
std::vector<PacketPattern> pattern_names(const PatternTable& table, const PatternSet& patterns) {
  std::vector<PacketPattern> names(table.unique_count());
  std::vector<bool> seen(table.unique_count(), false);
  for (std::size_t i = 0; i < patterns.size(); ++i) {
    const std::uint32_t u = table.unique_of(i);
    if (u == PatternTable::kNoPattern || seen[u]) continue;
    seen[u] = true;
    names[u] = PacketPattern{static_cast<std::uint32_t>(i), patterns.patterns()[i]};
  }
  return names;
}

// Regexes: the ids the output names are the given patterns' indexes.
std::vector<PacketPattern> given_names(const PatternSet& patterns) {
  std::vector<PacketPattern> names;
  for (std::size_t i = 0; i < patterns.size(); ++i)
    names.push_back(PacketPattern{static_cast<std::uint32_t>(i), patterns.patterns()[i]});
  return names;
}

// Whether --pcap-out writes to standard output: "-", or a name for the file standard
// output already is (/dev/stdout, or `--pcap-out x.pcap > x.pcap`).
bool capture_on_stdout(const std::string& pcap_out) {
  if (pcap_out.empty()) return false;
  if (pcap_out == "-") return true;
  struct stat file {};
  struct stat standard_output {};
  return ::stat(pcap_out.c_str(), &file) == 0 && ::fstat(STDOUT_FILENO, &standard_output) == 0 &&
         file.st_dev == standard_output.st_dev && file.st_ino == standard_output.st_ino;
}

// -q prints nothing (PacketSink's defaults), -c a count per capture, --json JSON lines,
// and otherwise ngrep's text. With the capture on standard output no report is printed:
// the capture must be all a reader there (tshark -r -) finds, and a report moved to
// standard error would mix with the notices that belong there (tcpdump -w - prints none).
std::unique_ptr<PacketSink> make_sink(const cli::Options& o, Output& out, std::vector<PacketPattern> names,
                                      const std::optional<Colors>& colors) {
  const bool with_name = o.with_filename.value_or(o.pcaps.size() > 1);
  if (o.quiet || capture_on_stdout(o.pcap_out)) return std::make_unique<PacketSink>();
  if (o.list != cli::ListMode::kNone)
    return std::make_unique<PacketListPrinter>(out, o.list == cli::ListMode::kFilesWithMatches, o.null_after_name);
  if (o.count) return std::make_unique<PacketCountPrinter>(out, with_name, o.null_after_name);
  if (o.json) return std::make_unique<PacketJsonPrinter>(out, names);
  PacketTextOptions text;
  text.with_filename = with_name;
  text.hexdump = o.hexdump;
  text.byline = o.byline;
  text.only_matching = o.only_matching;
  text.byte_offset = o.byte_offset;
  text.time = static_cast<PacketTime>(o.time);
  text.colors = colors;
  text.group_separator = o.group_separator;
  return std::make_unique<PacketTextPrinter>(out, std::move(names), std::move(text));
}

// -A/-B/-C: packets around a selected packet; with --stream, a flow's bytes around its
// matches (64 either side unless given).
std::uint64_t context_before(const cli::Options& o, std::uint64_t otherwise) {
  return o.before.value_or(o.context.value_or(otherwise));
}
std::uint64_t context_after(const cli::Options& o, std::uint64_t otherwise) {
  return o.after.value_or(o.context.value_or(otherwise));
}

ExcerptLimits excerpt_limits(const cli::Options& o) {
  ExcerptLimits limits;
  limits.before = static_cast<std::size_t>(std::min<std::uint64_t>(context_before(o, 64), limits.max_region_bytes));
  limits.after = static_cast<std::size_t>(std::min<std::uint64_t>(context_after(o, 64), limits.max_region_bytes));
  return limits;
}

class CaptureRun {
 public:
  CaptureRun(const cli::Options& o, Scanner& scanner, const PatternSet& patterns, RegexLines* regex, Output& out,
             const std::optional<Colors>& colors, StopSignal& stop, Notices& notices)
      : o_(o),
        table_(scanner.table()),
        patterns_(patterns),
        out_(out),
        stop_(stop),
        notices_(notices),
        names_(regex != nullptr ? given_names(patterns) : pattern_names(table_, patterns)),
        records_(scanner, [this](std::uint64_t tag, std::string_view bytes, std::size_t overlap,
                                 std::span<const Occurrence> occurrences) { delivered(tag, bytes, overlap, occurrences); }),
        sink_(make_sink(o, out, names_, colors)),
        regex_(regex),
        // Only the text and JSON printers name the patterns that matched and show where.
        names_wanted_(!o.quiet && !o.count && o.list == cli::ListMode::kNone && !capture_on_stdout(o.pcap_out)),
        select_(o, table_, regex, names_wanted_),
        budget_{excerpt_limits(o)},
        before_packets_(context_before(o, 0)),
        after_packets_(context_after(o, 0)) {
    // A flow's piece starts with enough of the bytes before it for a pattern split across
    // the two and for the context before a match in it.
    carry_ = table_.max_length() > 0 ? table_.max_length() - 1 : 0;
    if (names_wanted_ && o.stream) carry_ += budget_.limits.before;
  }

  // Capture files are matched per packet on `threads` threads where they can be.
  void use_farm(const CaptureThreads& threads, const std::optional<Colors>& colors) {
    farm_ = std::make_unique<PacketFarmParts>();
    farm_->threads = threads.threads;
    farm_->scanner = threads.scanner;
    farm_->regexes = threads.regexes;
    farm_->show = names_wanted_;
    // -c counts (the run's own printer says the count); the others print on each thread.
    const bool prints = !o_.count && !capture_on_stdout(o_.pcap_out);
    farm_->printer = [this, colors, prints](Output& out) -> std::unique_ptr<PacketSink> {
      return prints ? make_sink(o_, out, names_, colors) : nullptr;
    };
  }

  // --stream over capture files: the flows are matched on `threads` threads
  // (cli/flow_farm.hpp) where they can be.
  void use_flow_farm(const CaptureThreads& threads, const std::optional<Colors>& colors) {
    flow_threads_ = &threads;
    colors_ = colors;
  }

  // A FlowFarm's shard: this run reassembles and matches the flows (and packets) another
  // run's reader deals it.
  void serve(FlowShardReport& report, const CaptureInput& input) {
    report_ = &report;
    name_ = input.name;
    nano_ = input.nanosecond;
    sink_->begin(input);
    if (o_.stream) make_reassembler(report.reassembly());
  }
  void shard_segment(const RawPacket& raw, const PacketInfo& info, const FlowKey& key) {
    event_at(raw.index, false);
    reassemble(raw, info, &key);
  }
  void shard_prefetch(const FlowKey& key) const { reassembler_->prefetch(key); }
  void shard_packet(const RawPacket& raw, const PacketInfo& info) {
    event_at(raw.index, false);
    report_->key(EventKey{event_index_, 0, 0, event_order_++});
    add_packet(raw, info);
  }
  void shard_expire(std::int64_t seconds, std::uint64_t index) {
    event_at(index, true);
    reassembler_->expire(seconds);
  }
  void shard_finish() {
    event_at(~std::uint64_t{0}, true);
    reassembler_->finish();
    report_->reassembled(reassembler_->counters());
  }
  void end_round(std::uint64_t round) { records_.add((round << 2) | kRoundEnd, {}); }
  void flush_records() { records_.flush(); }
  std::uint64_t selected() const noexcept { return selected_total_; }
  std::uint64_t bytes_scanned() const noexcept { return records_.bytes_scanned(); }

  CaptureResult run() {
    std::vector<std::string> inputs = o_.pcaps;
    const bool live = !o_.interface.empty();
    if (live) inputs = {o_.interface};
    for (const std::string& input : inputs) {
      if (done_ || read_limit_reached_ || stop_.requested()) break;
      std::unique_ptr<PcapReader> reader;
      try {
        reader = live ? PcapReader::open_live(input, o_.bpf)
                      : PcapReader::open_file(input, o_.bpf, o_.label.value_or("(standard input)"));
      } catch (const Error& e) {
        fail(e.what());
        continue;
      }
      run_input(*reader, input, live);
    }
    CaptureResult r;
    r.selected = selected_total_;
    r.packets = packets_;
    r.bytes = records_.bytes_scanned() + farm_bytes_;
    r.trouble = trouble_;
    r.stream_stats = stream_stats();
    return r;
  }

 private:
  void fail(const std::string& message) {
    if (flow_farm_ && !flow_farm_->failed()) flow_farm_->drain();  // what came before is written first
    if (!o_.no_messages) {
      out_.flush();
      notices_.notice(message);
    }
    trouble_ = true;
  }

  void run_input(PcapReader& reader, const std::string& input, bool live) {
    // --stream --pcap-out on a file writes the selected flows' packets in a second pass.
    const bool two_pass_out = !o_.pcap_out.empty() && o_.stream && !live && input != "-";
    if (!open_input(reader, two_pass_out)) return;
    const std::unique_ptr<PcapPieces> pieces = live || input == "-" ? nullptr : map_file(reader, input);
    // The threads that read the mapping end before it goes, also when an error leaves early.
    struct EndReaders {
      CaptureRun& run;
      ~EndReaders() {
        run.retire_ahead();
        run.flow_farm_.reset();
      }
    } end_readers{*this};
    sink_->begin(CaptureInput{name_, nano_});
    read_mapped(pieces.get());
    if (farm_ && pieces && farm_input(reader, *pieces)) {
      report_cut_records(reader);
      finish_input(input, two_pass_out);
      return;
    }
    if (o_.stream) {
      if (flow_threads_ != nullptr && pieces) start_flow_farm();
      // The farm's threads take the capture a part at a time as threads of their own read
      // and decode it (PacketsAhead).
      if (flow_farm_ && cursor_) {
        try {
          ahead_ = std::make_unique<PacketsAhead>(*cursor_, reader.filter(), link_type_, flow_farm_->threads(),
                                                  reading_threads(), reading_part_bytes());
        } catch (const Error&) {
          ahead_.reset();  // read here, then
        }
      }
      // With the farm its threads reassemble.
      if (!flow_farm_) make_reassembler(ReassemblyConfig{});
    }
    const StopWatcher watcher(reader, stop_, live);
    if (!ahead_ || read_ahead(reader)) read_packets(reader, live);
    report_cut_records(reader);
    finish_input(input, two_pass_out);
    read_mapped(nullptr);
  }

  void make_reassembler(const ReassemblyConfig& limits) {
    reassembler_ = std::make_unique<TcpReassembler>(
        limits,
        [this](std::uint64_t flow, int direction, std::uint64_t offset, std::span<const std::uint8_t> bytes) {
          stream_bytes(flow, direction, offset, bytes);
        },
        [this](std::uint64_t flow) { flow_closing(flow); });
  }

  // A shard: the events from here on happen at packet `index`, after its own (`after`:
  // flows ended idle after it, or at the end).
  void event_at(std::uint64_t index, bool after) {
    event_index_ = index;
    event_order_ = 0;
    ending_idle_ = after;
  }

  // Records longer than the file's snaplen are cut to it, as libpcap reads them (and as
  // ngrep sees them); tshark reads them whole. Said once per capture, not an error.
  void report_cut_records(const PcapReader& reader) {
    const std::uint64_t cut = reader.records_cut_to_snaplen();
    if (cut == 0 || o_.no_messages) return;
    out_.flush();
    const bool one = cut == 1;
    notices_.notice(name_ + ": " + std::to_string(cut) + (one ? " record is" : " records are") +
                    " longer than the file's snapshot length (" + std::to_string(reader.snaplen()) + " bytes) and " +
                    (one ? "was" : "were") + " matched cut to it, as libpcap reads " + (one ? "it" : "them"));
  }

  // The flows of a mapped capture file are reassembled and matched on the farm's threads;
  // this thread hands them the packets and writes. Without a thread (or a scanner for one)
  // they are matched here.
  void start_flow_farm() {
    const CaptureInput input{name_, nano_};
    const FlowFarm::MakeShard make = [this, input](Output& out, FlowShardReport& report) {
      return make_shard(o_, *flow_threads_, patterns_, out, colors_, stop_, notices_, report, input);
    };
    // Tests make the rounds small, to cross many of their edges in a small capture.
    const char* round = std::getenv("GPUFILTER_FLOW_ROUND_BYTES");
    const std::size_t round_bytes = round != nullptr ? std::strtoull(round, nullptr, 10) : FlowFarm::kRoundBytes;
    try {
      flow_farm_ = std::make_unique<FlowFarm>(flow_threads(flow_threads_->threads, reading_threads()), make, out_,
                                              cursor_->offset(), round_bytes);
      farm_cpu_start_ = thread_cpu_seconds();
    } catch (const Error&) {
      flow_farm_.reset();
    }
  }

  // The farm's flows are all matched and written; their counts join the run's.
  void finish_flow_farm() {
    if (!flow_farm_) return;
    const std::unique_ptr<FlowFarm> farm = std::move(flow_farm_);
    if (!farm->failed()) {
      try {
        farm->finish();
        farm->drain();
      } catch (const OutputError&) {
        throw;
      } catch (const Error& e) {
        fail(name_ + ": " + e.what());
      }
    }
    const FlowFarm::Totals totals = farm->totals();
    selected_total_ += totals.selected;
    selected_input_ += totals.selected;
    farm_bytes_ += totals.bytes;
    farm_time_.threads = farm->threads();
    farm_time_.main_cpu += thread_cpu_seconds() - farm_cpu_start_;
    farm_time_.waited_for_threads += totals.waited;
    farm_time_.threads_cpu_max += totals.threads_cpu_max;
    farm_time_.threads_cpu_sum += totals.threads_cpu_sum;
    report_early_gaps(totals.reassembly, farm->reassembly_limits(), farm->threads());
  }

  // The reading threads end (their time joins --stats', also when a damaged record
  // ended them early).
  void retire_ahead() noexcept {
    if (!ahead_) return;
    farm_time_.reading_cpu += ahead_->reader_cpu_seconds();
    farm_time_.waited_for_reading += ahead_->waited_seconds();
    ahead_.reset();
  }

  // --stats' "stream_threads": the farm's time, summed over the inputs.
  std::string stream_stats() const {
    if (farm_time_.threads == 0) return {};
    char text[400];
    std::snprintf(text, sizeof text,
                  "\"flow_threads\":%zu,\"reading_cpu_s\":%.3f,\"main_cpu_s\":%.3f,"
                  "\"main_waited_for_reading_s\":%.3f,\"main_waited_for_flows_s\":%.3f,"
                  "\"flow_thread_cpu_max_s\":%.3f,\"flow_threads_cpu_s\":%.3f",
                  farm_time_.threads, farm_time_.reading_cpu, farm_time_.main_cpu,
                  farm_time_.waited_for_reading, farm_time_.waited_for_threads, farm_time_.threads_cpu_max,
                  farm_time_.threads_cpu_sum);
    return text;
  }

  // A classic pcap file is read from its mapping (no copy, no system call per packet):
  // null when PcapPieces does not take it, and libpcap reads it.
  std::unique_ptr<PcapPieces> map_file(const PcapReader& reader, const std::string& input) {
    const UniqueFd fd(::open(input.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) return nullptr;
    return PcapPieces::map(fd.get(), reader.snaplen(), nano_);
  }

  // The packets come from `pieces`, through the reader's BPF filter, or (null) from the
  // reader.
  void read_mapped(const PcapPieces* pieces) {
    retire_ahead();
    cursor_.reset();
    released_ = 0;
    if (pieces != nullptr) cursor_.emplace(*pieces);
  }

  PcapReader::Read next_packet(PcapReader& reader, RawPacket& raw) {
    if (!cursor_) return reader.read(raw);
    if (cursor_->offset() >= released_ + kReleaseStep) release_mapping(cursor_->offset());
    for (;;) {
      switch (cursor_->next(raw)) {
        case PcapPieces::Cursor::Read::kPacket:
          if (reader.filter() == nullptr || reader.filter()->passes(raw)) return PcapReader::Read::kPacket;
          continue;
        case PcapPieces::Cursor::Read::kEnd: return PcapReader::Read::kEnd;
        case PcapPieces::Cursor::Read::kLeft: break;
      }
      // A record the mapping does not read (cut short, over the snaplen): libpcap reads
      // on from it, and words what is wrong with it.
      hand_to_libpcap(reader, cursor_->offset(), cursor_->index() + 1);
      return reader.read(raw);
    }
  }

  void hand_to_libpcap(PcapReader& reader, std::uint64_t offset, std::uint64_t index) {
    if (!reader.resume_at(offset, index)) throw Error("cannot seek to byte " + std::to_string(offset));
    cursor_.reset();
  }

  // The flow farm's packets, a part of the file at a time as the reading threads decoded
  // them. True when a record the mapping does not read stopped them: libpcap reads on
  // from it, here (read_packets()).
  bool read_ahead(PcapReader& reader) {
    try {
      PcapPieces::Cursor::Read got = PcapPieces::Cursor::Read::kPacket;
      while (!done_ && !stop_.requested()) {
        if (ahead_->batch_begin() >= released_ + kReleaseStep) release_mapping(ahead_->batch_begin());
        PacketBatch batch = flow_farm_->spare_batch();
        got = ahead_->take(batch);
        if (got != PcapPieces::Cursor::Read::kPacket) break;
        packets_ += batch.packets.size();
        const std::size_t next = batch.end;
        flow_farm_->add(std::move(batch));
        flow_farm_->read_to(next);
      }
      if (got != PcapPieces::Cursor::Read::kLeft) return false;
      const std::size_t offset = ahead_->left_offset();
      const std::uint64_t index = ahead_->left_index();
      retire_ahead();
      hand_to_libpcap(reader, offset, index);
      return true;
    } catch (const OutputError&) {
      throw;
    } catch (const Error& e) {
      read_failed_ = true;
      fail(name_ + ": " + e.what());
      return false;
    }
  }

  // The mapping's pages before the oldest packet still kept (waiting for its result, or
  // for -B) leave the process, so memory stays bounded whatever the file's size.
  // With the reader ahead, its thread gives them back (munmap is slow on this one).
  void release_mapping(std::size_t reading) {
    const PcapPieces& pieces = cursor_->pieces();
    std::size_t oldest = reading;
    if (!pending_.empty()) oldest = std::min(oldest, pieces.offset_of(pending_.front().raw.data.data()));
    if (!behind_.empty()) oldest = std::min(oldest, pieces.offset_of(behind_.front().raw.data.data()));
    if (flow_farm_) oldest = std::min(oldest, flow_farm_->oldest_offset());
    if (ahead_) ahead_->release_before(oldest);
    else pieces.release_before(oldest);
    released_ = oldest;
  }

  // A classic pcap file, per packet, on every core (cli/packet_farm.hpp). False when it
  // cannot be (no thread): the caller reads it here, from the start. A record the farm
  // does not read (damage) is where it stops: libpcap reads on from there, here.
  bool farm_input(PcapReader& reader, const PcapPieces& pieces) {
    const FarmCapture capture{pieces, CaptureInput{name_, nano_}, link_type_, reader.filter()};
    const FarmResult r = run_packet_farm(o_, table_, *farm_, capture, out_, stop_);
    if (!r.ran) return false;
    packets_ += r.packets;
    farm_bytes_ += r.bytes;
    selected_total_ += r.selected;
    selected_input_ = r.selected;
    if (!r.error.empty()) {
      fail(name_ + ": " + r.error);
    } else if (r.resume_offset != 0) {
      try {
        hand_to_libpcap(reader, r.resume_offset, r.resume_index);
        read_packets(reader, false);
      } catch (const Error& e) {
        fail(name_ + ": " + e.what());
      }
    }
    return true;
  }

  // The capture's link type is decoded, and the --pcap-out file (opened for the first
  // capture) takes it; false when the capture cannot be run (reported).
  bool open_input(PcapReader& reader, bool two_pass_out) {
    name_ = reader.name();  // standard input is --label's name already
    input_done_ = false;
    draining_ = false;
    read_failed_ = false;
    last_printed_ = 0;
    behind_.clear();
    after_left_ = 0;
    link_type_ = reader.link_type();
    nano_ = reader.nanosecond();
    if (!link_type_supported(link_type_)) {
      fail(name_ + ": unsupported link type " + link_type_name(link_type_) +
           " (Ethernet, Linux cooked SLL/SLL2, raw IP and loopback are supported)");
      return false;
    }
    selected_input_ = 0;
    if (!o_.pcap_out.empty() && !writer_) {
      try {
        writer_ = std::make_unique<PcapWriter>(o_.pcap_out, link_type_, reader.snaplen(), nano_);
        writer_link_type_ = link_type_;
      } catch (const Error& e) {
        fail(e.what());
        done_ = true;
        return false;
      }
    } else if (writer_ && writer_link_type_ != link_type_) {
      fail(name_ + ": link type " + link_type_name(link_type_) + " differs from the first capture's; --pcap-out " +
           "holds one link type");
      return false;
    }
    single_pass_out_ = writer_ != nullptr && !two_pass_out;
    return true;
  }

  void read_packets(PcapReader& reader, bool live) {
    std::int64_t last_expire = 0;
    try {
      RawPacket raw;
      while (!done_ && !input_done_ && !stop_.requested()) {
        if (o_.max_packets && packets_ >= *o_.max_packets) {
          read_limit_reached_ = true;  // --max-packets: no more are read, of any capture
          break;
        }
        PacketInfo info;
        const PcapReader::Read got = next_packet(reader, raw);
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
        info = decode_packet(link_type_, raw.data);
        if (flow_farm_) {
          flow_farm_->add(raw, info);  // its threads reassemble and match
          flow_farm_->read_to(cursor_ ? cursor_->offset() : 0);
        } else if (o_.stream && info.transport == PacketInfo::Transport::kTcp) {
          add_segment(raw, info, last_expire);
        } else {
          add_packet(raw, info);
        }
      }
    } catch (const OutputError&) {
      throw;  // main() reports it once: "write error: ..." (quiet for a closed pipe)
    } catch (const CaptureOutputError&) {
      throw;
    } catch (const PcapError& e) {
      read_failed_ = true;
      fail(e.what());
    } catch (const Error& e) {
      read_failed_ = true;
      fail(name_ + ": " + e.what());
    }
  }

  // --stream: a TCP segment goes to its flow's reassembly, which hands on the bytes in order.
  void add_segment(const RawPacket& raw, const PacketInfo& info, std::int64_t& last_expire) {
    reassemble(raw, info, nullptr);
    if (raw.seconds - last_expire >= 1) {
      reassembler_->expire(raw.seconds);
      last_expire = raw.seconds;
    }
  }

  // A TCP segment to its flow's reassembly, which hands on the bytes in order.
  void reassemble(const RawPacket& raw, const PacketInfo& info, const FlowKey* key) {
    const std::uint64_t flow =
        key != nullptr ? reassembler_->segment(info, raw.data, raw.seconds, *key) : reassembler_->segment(info, raw.data, raw.seconds);
    // A flow's count ends with the segment that ended it (FIN, RST): the segments its
    // tombstone absorbs after it are neither counted nor written (write_second_pass()
    // leaves them out alike), whether or not its end was printed yet.
    if (!reassembler_->absorbed()) flow_segment(flow, raw, info);
  }

  // A segment of `flow` (after its bytes were handed on): the flow's times and count, and
  // with single-pass --pcap-out the packet written or held.
  void flow_segment(std::uint64_t flow, const RawPacket& raw, const PacketInfo& info) {
    Flow& f = flows_[flow];
    if (f.packets++ == 0) {
      f.first = info;
      f.seconds = raw.seconds;
      f.nanoseconds = raw.nanoseconds;
      f.created = raw.index;
      f.seen = raw.seconds;
      if (report_ != nullptr) report_->created(raw.index);
      // The empty pattern selects the flow before any of its bytes (without -w/-x).
      if (single_pass_out_ && !o_.invert && table_.has_empty_pattern() && !o_.word && !o_.whole_line) f.written = true;
    }
    f.last_seconds = raw.seconds;
    f.last_nanoseconds = raw.nanoseconds;
    f.seen = std::max(f.seen, raw.seconds);
    f.touched = raw.index;
    if (single_pass_out_) {
      if (f.written) write_capture(raw);
      else hold(f, raw);
    }
  }

  // An undecided flow's packet, kept for --pcap-out while the limits allow.
  void hold(Flow& f, const RawPacket& raw) {
    const std::size_t cost = raw.data.size() + sizeof(HeldPacket);
    if (f.held_bytes + cost > kHeldPerFlow || held_total_ + cost > kHeldTotal) {
      f.held_overflow = true;
      return;
    }
    HeldPacket& h = f.held.emplace_back(HeldPacket{raw, {raw.data.begin(), raw.data.end()}});
    h.raw.data = std::span<const std::uint8_t>(h.data);
    f.held_bytes += cost;
    held_total_ += cost;
  }

  // The flow is selected: what it held is written, and its packets from now on.
  void start_writing(Flow& f) {
    f.written = true;
    for (const HeldPacket& h : f.held) write_capture(h.raw);
    if (f.held_overflow) ++flows_cut_;
    drop_held(f);
  }

  void drop_held(Flow& f) {
    held_total_ -= std::min(held_total_, f.held_bytes);
    f.held.clear();
    f.held.shrink_to_fit();
    f.held_bytes = 0;
  }

  // Any other packet is one record; its frame is kept until the record's result comes back
  // (a mapped file's stays where it is).
  void add_packet(const RawPacket& raw, const PacketInfo& info) {
    Pending p;
    p.raw = raw;
    if (!cursor_ && report_ == nullptr) {  // a shard's frames stay until its round is done
      p.frame.assign(raw.data.begin(), raw.data.end());
      p.raw.data = std::span<const std::uint8_t>(p.frame);
    }
    p.info = info;
    pending_.push_back(std::move(p));
    const Pending& back = pending_.back();
    const std::span<const std::uint8_t> record =
        o_.match_frame ? back.raw.data : back.raw.data.subspan(info.payload_offset, info.payload_length);
    records_.add(kPacketTag | raw.index, record);
  }

  void finish_input(const std::string& input, bool two_pass_out) {
    if (reassembler_) {
      reassembler_->finish();
      report_early_gaps(reassembler_->counters());
    }
    finish_flow_farm();
    records_.finish();
    reassembler_.reset();
    flows_.clear();
    held_total_ = 0;
    report_cut_flows();
    budget_.used = 0;
    pending_.clear();
    behind_.clear();
    if (two_pass_out) write_second_pass(input);
    matched_flows_.clear();
    selected_packets_.clear();
    sink_->finish(CaptureSummary{name_, selected_input_});
    out_.flush();
    flush_capture();
  }

  // Single-pass --pcap-out: selected flows some of whose packets before the decision were
  // beyond the hold limits are said once per capture.
  void report_cut_flows() {
    if (flows_cut_ == 0 || o_.no_messages) return;
    out_.flush();
    notices_.notice(name_ + ": --pcap-out: " + std::to_string(flows_cut_) + " selected flows lack packets from " +
                    "before their match (more than " + std::to_string(kHeldPerFlow >> 20) + " MiB per flow, or " +
                    std::to_string(kHeldTotal >> 20) + " MiB for all flows, waited)");
    flows_cut_ = 0;
  }

  // Gaps skipped before their bytes came, because a direction or all flows together held
  // more out-of-order data than their limits, change what --stream saw (bytes that came
  // later were not scanned; a peer can cause them): said once per capture, not an error.
  void report_early_gaps(const TcpReassembler::Counters& c, const ReassemblyConfig& limits = {},
                         std::size_t threads = 1) {
    if (o_.no_messages || (c.budget_gaps == 0 && c.limit_gaps == 0)) return;
    out_.flush();
    const auto say = [&](std::uint64_t gaps, std::uint64_t bytes, const char* missing, const std::string& held) {
      if (gaps > 0)
        notices_.notice(name_ + ": --stream skipped " + std::to_string(gaps) + " gaps (" + std::to_string(bytes) +
                        " bytes " + missing + ") early: " + held);
    };
    say(c.limit_gaps, c.limit_gap_bytes, "missing then",
        "a flow's direction held more than " + std::to_string(limits.max_pending_bytes >> 20) + " MiB (or " +
            std::to_string(TcpReassembler::max_pieces(limits)) + " pieces) of out-of-order data");
    const std::string budget = std::to_string(limits.max_total_pending_bytes >> 20) + " MiB of out-of-order data";
    say(c.budget_gaps, c.budget_gap_bytes, "never captured",
        threads > 1 ? "the flows of one of the " + std::to_string(threads) + " reassembling threads held more than " +
                          budget + " together (its share)"
                    : "the flows held more than " + budget + " together");
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
          // A flow's packets end with the segment that ended it, as its count does.
          if (matched_flows_.count(flow) && !flows.absorbed()) write_capture(raw);
        } else if (selected_packets_.count(raw.index)) {
          write_capture(raw);
        }
      }
    } catch (const CaptureOutputError&) {
      throw;
    } catch (const Error& e) {
      if (!read_failed_) fail(e.what());  // else the first pass said it (a cut capture)
    }
  }

  void stream_bytes(std::uint64_t flow, int direction, std::uint64_t offset, std::span<const std::uint8_t> bytes) {
    Flow& f = flows_[flow];
    std::string& carry = f.carry[direction];
    f.bytes[direction] += bytes.size();
    if (regex_ != nullptr) {
      stream_lines(flow, direction, offset, bytes, carry);
      return;
    }
    pieces_.push_back(Piece{offset - carry.size(), false});
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

  // Regexes: the piece is the direction's unterminated line so far, then the new bytes, as
  // one record (every factor in it counts: that line was not asked before); what follows its
  // last '\n' is carried on.
  void stream_lines(std::uint64_t flow, int direction, std::uint64_t offset, std::span<const std::uint8_t> bytes,
                    std::string& carry) {
    pieces_.push_back(Piece{offset - carry.size(), false});
    carry.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    records_.add((flow << 2) | static_cast<std::uint64_t>(direction),
                 std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(carry.data()), carry.size()));
    const std::size_t nl = carry.rfind('\n');
    if (nl != std::string::npos) carry.erase(0, nl + 1);
    if (carry.size() > kMaxRegexSpan) carry.erase(0, carry.size() - kMaxRegexSpan);
  }

  void take_selection() {
    ++selected_total_;
    ++selected_input_;
    if (o_.quiet) done_ = true;
    if (o_.list != cli::ListMode::kNone) input_done_ = true;  // -l/-L: this capture is decided
    if (o_.max_count && selected_input_ >= *o_.max_count) {
      // grep's -m, per capture: its selection ends here; the -A packets after the last
      // selected one still print (as context, matching or not), then its reading stops.
      if (after_packets_ > 0 && names_wanted_ && !o_.stream) draining_ = true;
      else input_done_ = true;
    }
  }

  void delivered(std::uint64_t tag, std::string_view bytes, std::size_t overlap, std::span<const Occurrence> occurrences) {
    (void)overlap;  // the scanner kept only occurrences ending past it
    if (tag & kPacketTag) {
      packet_scanned(bytes, occurrences);
      if (report_ != nullptr) report_->printed();
      return;
    }
    const std::uint64_t flow = tag >> 2;
    const std::uint64_t kind = tag & 3;
    if (kind == kFlowEnd) {
      flow_ended(flow);
      if (report_ != nullptr) report_->printed();
      return;
    }
    if (kind == kRoundEnd) {
      report_->round_done(tag >> 2);
      return;
    }
    const Piece piece = pieces_.front();
    pieces_.pop_front();
    flow_piece_scanned(flow, static_cast<int>(kind), piece, bytes, occurrences);
  }

  // A packet's record came back: selected or not, written out when selected; -A/-B
  // packets around it are printed as context.
  void packet_scanned(std::string_view bytes, std::span<const Occurrence> occurrences) {
    Pending p = std::move(pending_.front());
    pending_.pop_front();
    if (finished() && !o_.stream) return;  // -m reached or -q decided: the rest is not selected
    const bool matched = select_.record(bytes, occurrences);
    if (matched == o_.invert || finished() || draining_) {
      context_packet(std::move(p));
      if (draining_ && after_left_ == 0) input_done_ = true;
      return;
    }
    take_selection();
    if (writer_ && single_pass_out_) write_capture(p.raw);
    if (writer_ && !single_pass_out_) selected_packets_.insert(p.raw.index);
    for (const Pending& b : behind_) print_packet(b, record_of(b), true, {}, {});
    behind_.clear();
    const std::span<const PacketMatch> shown = o_.invert ? std::span<const PacketMatch>() : select_.matches();
    print_packet(p, bytes, false, select_.ids(), shown);
    after_left_ = after_packets_;
  }

  // A packet not selected: printed after a selected one (-A), or kept for one to come (-B).
  void context_packet(Pending p) {
    if (!names_wanted_) return;
    if (after_left_ > 0) {
      --after_left_;
      print_packet(p, record_of(p), true, {}, {});
    } else if (before_packets_ > 0 && !finished()) {
      behind_.push_back(std::move(p));
      if (behind_.size() > before_packets_) behind_.pop_front();
    }
  }

  std::string_view record_of(const Pending& p) const {
    const std::string_view frame(reinterpret_cast<const char*>(p.raw.data.data()), p.raw.data.size());
    return o_.match_frame ? frame : frame.substr(p.info.payload_offset, p.info.payload_length);
  }

  void print_packet(const Pending& p, std::string_view record, bool context, std::span<const std::uint32_t> ids,
                    std::span<const PacketMatch> matches) {
    const bool gap = (before_packets_ > 0 || after_packets_ > 0) && last_printed_ != 0 &&
                     p.raw.index != last_printed_ + 1;
    last_printed_ = p.raw.index;
    PacketRecord record_out{p.raw, p.info, record, ids, matches};
    record_out.context = context;
    record_out.after_gap = gap;
    sink_->packet(record_out);
  }

  bool finished() const noexcept { return done_ || input_done_; }

  // A flow ended: selected on what its pieces found, written out when selected.
  void flow_ended(std::uint64_t flow) {
    auto it = flows_.find(flow);
    if (it == flows_.end()) return;
    Flow& f = it->second;
    if (regex_ != nullptr) regex_flow_end(f);
    else if (o_.whole_line) whole_flow_end(f);
    // Only the empty pattern matched: its first match is at the client's offset 0.
    const bool matched = f.matched || (regex_ == nullptr && select_.empty_pattern_matches(f.bytes[0] + f.bytes[1]));
    if (matched != o_.invert && !finished()) {
      take_selection();
      if (!single_pass_out_ && writer_) matched_flows_.insert(flow);
      if (single_pass_out_ && !f.written) start_writing(f);
      const std::vector<std::uint32_t> ids(f.patterns.begin(), f.patterns.end());
      FlowRecord record{flow, f.first, f.seconds, f.nanoseconds, f.packets, f.bytes[0], f.bytes[1], ids,
                        matched, f.match_direction != 0, f.match_offset, f.excerpts.matches(),
                        f.excerpts.regions(), f.excerpts.left_out()};
      record.last_seconds = f.last_seconds;
      record.last_nanoseconds = f.last_nanoseconds;
      if (report_ != nullptr) record.place_number = [this, created = f.created] { report_->number_here(created); };
      sink_->flow(record);
    }
    if (report_ != nullptr) report_->gone(f.created);
    f.excerpts.release(budget_);
    drop_held(f);
    flows_.erase(it);
  }

  // -x with fixed strings: the record is a whole direction, known only when the flow ends.
  // An occurrence from its first byte to the piece's end is the direction so far; a later
  // piece of that direction replaces or drops it.
  void whole_candidate(Flow& f, int direction, std::uint64_t record_offset, std::string_view bytes,
                       std::span<const Occurrence> occurrences) {
    f.whole[direction].reset();
    if (record_offset > 0) return;  // the piece does not hold the direction's first byte
    for (const Occurrence& o : occurrences)
      if (o.position == 0 && table_.unique_length(o.pattern) == bytes.size())
        f.whole[direction] = Flow::Whole{o.pattern, std::string(bytes)};
  }

  void whole_flow_end(Flow& f) {
    for (int d = 0; d < 2; ++d) {
      if (!f.whole[d] || f.whole[d]->bytes.size() != f.bytes[d]) continue;
      const std::uint32_t id = f.whole[d]->pattern;
      note_match(f, d, 0, std::span<const std::uint32_t>(&id, 1));
      if (names_wanted_) f.excerpts.match(d, 0, f.whole[d]->bytes, 0, f.whole[d]->bytes.size(), id, 0, budget_);
    }
  }

  // Regexes, a flow's end: each direction's unterminated last line is asked (every regex:
  // its factors were not looked for alone); a flow without data is one empty line.
  void regex_flow_end(Flow& f) {
    if (f.bytes[0] + f.bytes[1] == 0 && select_.empty_line_selected()) note_match(f, 0, 0, {});
  }

  // The reassembler ended a flow. With regexes each direction's unterminated last line is
  // scanned first, as a last piece: its factors decide which regexes are asked (asking
  // every one at every flow's end cost more than the whole scan with thousands).
  void flow_closing(std::uint64_t flow) {
    auto it = flows_.find(flow);
    if (report_ != nullptr) {
      const bool ordered = ending_idle_ && it != flows_.end();
      report_->key(ordered ? EventKey{event_index_, 1, it->second.seen, it->second.touched}
                           : EventKey{event_index_, ending_idle_ ? std::uint8_t{1} : std::uint8_t{0}, 0, event_order_++});
    }
    if (regex_ != nullptr && it != flows_.end()) {
      for (int d = 0; d < 2; ++d) {
        const std::string& tail = it->second.carry[d];
        if (tail.empty()) continue;
        pieces_.push_back(Piece{it->second.bytes[d] - tail.size(), true});
        records_.add((flow << 2) | static_cast<std::uint64_t>(d),
                     std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(tail.data()), tail.size()));
      }
    }
    records_.add((flow << 2) | kFlowEnd, {});
  }

  void note_match(Flow& f, int direction, std::uint64_t offset, std::span<const std::uint32_t> ids) {
    if (!f.matched) {
      f.matched = true;
      f.match_direction = direction;
      f.match_offset = offset;
      if (single_pass_out_ && !o_.invert && !f.written) start_writing(f);
    }
    f.patterns.insert(ids.begin(), ids.end());
  }

  // A piece of one direction's stream came back: what it found joins its flow's.
  void flow_piece_scanned(std::uint64_t flow, int direction, Piece piece, std::string_view bytes,
                          std::span<const Occurrence> occurrences) {
    auto it = flows_.find(flow);
    if (it == flows_.end()) return;
    Flow& f = it->second;
    const std::uint64_t record_offset = piece.offset;
    if (names_wanted_) f.excerpts.piece(direction, record_offset, bytes, budget_);
    if (regex_ != nullptr) {
      // The complete lines; the rest comes again with the next piece (or as the last one).
      const std::size_t end = piece.last ? bytes.size() : bytes.rfind('\n') + 1;  // npos + 1: none
      if (end == 0 || !select_.lines(bytes, end, occurrences)) return;
      note_match(f, direction, record_offset + (select_.matches().empty() ? 0 : select_.matches().front().offset),
                 select_.ids());
    } else if (o_.whole_line) {
      whole_candidate(f, direction, record_offset, bytes, occurrences);
      return;
    } else {
      if (!select_.fixed(bytes, occurrences)) return;
      std::size_t first = bytes.size();
      for (const Occurrence& o : occurrences) first = std::min<std::size_t>(first, o.position);
      note_match(f, direction, record_offset + first, select_.ids());  // may start in the carried overlap: still exact
    }
    if (!names_wanted_) return;
    for (const PacketMatch& m : select_.matches()) {
      // Regexes: the region starts no earlier than the match's line (a piece starts at a
      // line's start, so only that line's bytes before the match are sure to be in it).
      const std::size_t line = regex_ == nullptr || m.offset == 0 ? 0 : bytes.rfind('\n', m.offset - 1) + 1;
      f.excerpts.match(direction, record_offset, bytes, m.offset, m.offset + m.length, m.pattern, line, budget_);
    }
  }

  using Clock = std::chrono::steady_clock;

  const cli::Options& o_;
  const PatternTable& table_;
  const PatternSet& patterns_;
  Output& out_;
  StopSignal& stop_;
  Notices& notices_;
  std::vector<PacketPattern> names_;  // how the output names each pattern
  RecordScan records_;
  std::unique_ptr<PacketSink> sink_;
  std::size_t carry_ = 0;
  RegexLines* regex_ = nullptr;  // -E/-G/-P: the records' lines decide (else fixed strings)
  bool names_wanted_ = true;     // the output names the patterns a record matched
  PacketSelect select_;
  ExcerptBudget budget_;         // --stream: all open flows' excerpts together
  std::uint64_t before_packets_ = 0;  // -B: packets printed before a selected one
  std::uint64_t after_packets_ = 0;   // -A: and after it

  std::string name_;
  int link_type_ = 0;
  bool nano_ = false;
  std::unique_ptr<PcapWriter> writer_;
  int writer_link_type_ = -1;
  bool single_pass_out_ = false;
  std::unique_ptr<TcpReassembler> reassembler_;
  std::unordered_map<std::uint64_t, Flow> flows_;
  std::deque<Piece> pieces_;  // the flow pieces being scanned, in order
  std::deque<Pending> pending_;
  std::unordered_set<std::uint64_t> matched_flows_;
  std::unordered_set<std::uint64_t> selected_packets_;
  std::deque<Pending> behind_;        // -B: the last packets not selected
  std::uint64_t after_left_ = 0;      // -A: packets still to print after a selected one
  std::uint64_t last_printed_ = 0;    // frame number, for grep's "--" between groups
  std::optional<Clock::time_point> waiting_since_;  // live: the oldest packet not yet scanned
  std::chrono::milliseconds batch_timeout_{std::max<std::uint64_t>(1, o_.batch_timeout_ms)};
  std::uint64_t packets_ = 0;
  std::uint64_t selected_total_ = 0;
  std::uint64_t selected_input_ = 0;
  std::size_t held_total_ = 0;    // single-pass --pcap-out: bytes held by undecided flows
  std::uint64_t flows_cut_ = 0;   // selected flows whose early packets were beyond the limits
  std::optional<PcapPieces::Cursor> cursor_;  // a mapped capture file's packets, when it is one
  std::size_t released_ = 0;                  // the mapping's bytes given back so far
  std::unique_ptr<PacketFarmParts> farm_;  // capture files on many threads, when they can be
  std::uint64_t farm_bytes_ = 0;           // scanned by it (or by the flow farm)
  const CaptureThreads* flow_threads_ = nullptr;  // --stream on many threads: how, when they can be
  std::optional<Colors> colors_;                  // for the flow farm's shards
  std::unique_ptr<FlowFarm> flow_farm_;           // the flows of the capture being read, when on many threads
  double farm_cpu_start_ = 0;                     // this thread's CPU seconds when it started
  struct FarmTime {
    std::size_t threads = 0;
    double reading_cpu = 0, main_cpu = 0, waited_for_reading = 0, waited_for_threads = 0;
    double threads_cpu_max = 0, threads_cpu_sum = 0;
  } farm_time_;
  std::unique_ptr<PacketsAhead> ahead_;           // with it, the mapping read and decoded on a thread
  FlowShardReport* report_ = nullptr;             // a shard's: told when its events are decided
  std::uint64_t event_index_ = 0;                 // a shard's: the packet its events happen at,
  std::uint32_t event_order_ = 0;                 // how many of them so far,
  bool ending_idle_ = false;                      // and whether they end idle flows (after it)
  bool done_ = false;
  bool input_done_ = false;          // -l/-L, -m: this capture is decided
  bool draining_ = false;            // -m reached: only the -A packets after it print
  bool read_failed_ = false;         // this capture's reading stopped at an error, reported
  bool read_limit_reached_ = false;  // --max-packets
  bool trouble_ = false;
};

// A FlowFarm thread's share of --stream: a capture run of its own (with a twin of the
// scanner and a copy of the regexes) fed the reader's events instead of packets.
class ShardRun final : public FlowShard {
 public:
  ShardRun(const cli::Options& o, std::unique_ptr<Scanner> scanner, std::unique_ptr<RegexLines> regexes,
           const PatternSet& patterns, Output& out, const std::optional<Colors>& colors, StopSignal& stop,
           Notices& notices, FlowShardReport& report, const CaptureInput& input)
      : scanner_(std::move(scanner)),
        regexes_(std::move(regexes)),
        run_(o, *scanner_, patterns, regexes_.get(), out, colors, stop, notices) {
    run_.serve(report, input);
  }
  void segment(const RawPacket& raw, const PacketInfo& info, const FlowKey& key) override {
    run_.shard_segment(raw, info, key);
  }
  void prefetch(const FlowKey& key) override { run_.shard_prefetch(key); }
  void packet(const RawPacket& raw, const PacketInfo& info) override { run_.shard_packet(raw, info); }
  void expire(std::int64_t seconds, std::uint64_t index) override { run_.shard_expire(seconds, index); }
  void finish() override { run_.shard_finish(); }
  void end_round(std::uint64_t round) override { run_.end_round(round); }
  void flush() override { run_.flush_records(); }
  std::uint64_t selected() const override { return run_.selected(); }
  std::uint64_t bytes_scanned() const override { return run_.bytes_scanned(); }

 private:
  std::unique_ptr<Scanner> scanner_;
  std::unique_ptr<RegexLines> regexes_;
  CaptureRun run_;
};

std::unique_ptr<FlowShard> make_shard(const cli::Options& o, const CaptureThreads& threads, const PatternSet& patterns,
                                      Output& out, const std::optional<Colors>& colors, StopSignal& stop,
                                      Notices& notices, FlowShardReport& report, const CaptureInput& input) {
  std::unique_ptr<Scanner> scanner = threads.scanner();
  if (!scanner) throw Error("the engine has no scanner for another thread");
  std::unique_ptr<RegexLines> regexes = threads.regexes != nullptr ? threads.regexes->copy() : nullptr;
  return std::make_unique<ShardRun>(o, std::move(scanner), std::move(regexes), patterns, out, colors, stop, notices,
                                    report, input);
}

}  // namespace

CaptureResult run_captures(const cli::Options& o, Scanner& scanner, const PatternSet& patterns, RegexLines* regex,
                           Output& out, const std::optional<Colors>& colors, const CaptureThreads* threads,
                           StopSignal& stop, Notices& notices) {
  CaptureRun run(o, scanner, patterns, regex, out, colors, stop, notices);
  if (threads != nullptr && threads->threads > 1 && packet_farm_applies(o)) run.use_farm(*threads, colors);
  if (threads != nullptr && threads->threads > 1 && flow_farm_applies(o)) run.use_flow_farm(*threads, colors);
  return run.run();
}

}  // namespace gpufilter
