// PacketSink: what selected packets and TCP flows of a capture become, and its printers.
//
// PacketTextPrinter writes ngrep's layout: a header line per packet (kind, time, endpoints,
// TCP flags, frame number, the patterns that matched), then its payload on one line with
// non-printables as dots (--byline: a line per payload line; --hexdump: rows of 16 bytes),
// the matches coloured with --color, only the matches with -o, offsets with -b, and an
// empty line. Context packets (-A/-B) carry "(context)" and groups are parted by grep's
// "--". A flow (--stream) is a summary line, then its regions: the bytes around its
// matches (or, with -o, the matches), each named by direction and stream offset.
// PacketJsonPrinter writes one JSON object per packet or flow in the envelope of rg's JSON
// Lines that --json writes for text ({"type":"packet","data":{...}}, "flow"), matches with
// their offsets; docs/CAPTURES.md has the fields. PacketCountPrinter writes -c's count at
// the end of each capture, PacketListPrinter -l's or -L's name.
//
// Lifecycle per capture: begin() once, then packet()/flow() for each selected record in
// the order they are decided, then finish() once, unless the capture could not be opened.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpufilter/core/packet.hpp"
#include "gpufilter/sinks/colors.hpp"
#include "gpufilter/sinks/output.hpp"

namespace gpufilter {

// How the output names unique pattern u (PatternTable id): the index and text of the
// first given pattern that became it.
struct PacketPattern {
  std::uint32_t id;
  std::string text;
};

struct CaptureInput {
  std::string name;         // the path, "(standard input)" or the interface
  bool nanosecond = false;  // timestamps are written with 9 fraction digits, else 6
};

// Regexes: a match names no one pattern (the line's regexes decide together).
inline constexpr std::uint32_t kAnyPattern = UINT32_MAX;

// A match in a packet's record: grep's -o spans (leftmost-longest, not overlapping).
struct PacketMatch {
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  std::uint32_t pattern = kAnyPattern;  // unique id (fixed strings)
};

// A selected packet, or one printed around it (-A/-B: `context`, with no patterns or
// matches). Valid only during the call.
struct PacketRecord {
  const RawPacket& raw;      // frame number, time, lengths
  const PacketInfo& info;    // what the decoder found
  std::string_view record;   // the bytes scanned: the transport payload, or the frame (--match-frame)
  std::span<const std::uint32_t> patterns;  // unique ids matched under -w/-x, ascending
  std::span<const PacketMatch> matches;     // in the record, ascending
  bool context = false;
  bool after_gap = false;  // packets were left out since the last one printed (grep's "--")
};

// A match in a flow: its direction, its offset in that direction's byte stream, its bytes.
struct FlowMatch {
  bool from_server = false;
  std::uint64_t offset = 0;
  std::string bytes;  // its first 4 KiB at most: a longer match is cut (`length` says)
  std::uint64_t length = 0;
  std::uint32_t pattern = kAnyPattern;
};

// A flow's bytes around matches of one direction (the context bytes of -B/-A with
// --stream, 64 each by default).
struct FlowRegion {
  bool from_server = false;
  std::uint64_t offset = 0;  // in the direction's byte stream
  std::string bytes;
};

// A selected TCP flow (--stream), once it ended. Valid only during the call.
struct FlowRecord {
  std::uint64_t flow;      // the reassembler's flow number
  const PacketInfo& first; // its first client packet: client is the source, server the destination
  std::int64_t seconds;    // that packet's time
  std::uint32_t nanoseconds;
  std::uint64_t packets;
  std::uint64_t bytes_client;  // reassembled bytes of each direction
  std::uint64_t bytes_server;
  std::span<const std::uint32_t> patterns;  // unique ids found anywhere in the flow, ascending
  bool matched;                // some pattern was found (false for a flow selected by -v)
  bool match_from_server;      // the first match's direction
  std::uint64_t match_offset;  // its offset in that direction's byte stream
  std::span<const FlowMatch> matches;  // the first ones, in the order found per direction
  std::span<const FlowRegion> regions;
  std::uint64_t matches_left_out;      // past the limits (docs/CAPTURES.md)
  std::int64_t last_seconds = 0;       // its last packet's time
  std::uint32_t last_nanoseconds = 0;
  // Set: called where the flow's number belongs, instead of writing `flow` (a FlowFarm's
  // thread leaves the place to the farm, which knows the number only when it writes).
  std::function<void()> place_number{};
};

struct CaptureSummary {
  std::string name;
  std::uint64_t selected = 0;  // packets (flows with --stream) selected, capped by -m
};

class PacketSink {
 public:
  virtual ~PacketSink() = default;
  virtual void begin(const CaptureInput& input) { (void)input; }
  virtual void packet(const PacketRecord& packet) { (void)packet; }
  virtual void flow(const FlowRecord& flow) { (void)flow; }
  virtual void finish(const CaptureSummary& summary) { (void)summary; }
};

enum class PacketTime { kAbsolute, kRelative, kDelta, kEpoch };

struct PacketTextOptions {
  bool with_filename = false;  // each header starts with "NAME:"
  bool hexdump = false;        // --hexdump
  bool byline = false;         // --byline: the payload's lines as lines
  bool only_matching = false;  // -o: the matches, a line each
  bool byte_offset = false;    // -b: each printed line starts with its offset
  PacketTime time = PacketTime::kAbsolute;  // relative: since the first packet printed; delta: since the last
  std::optional<Colors> colors;             // --color
  std::optional<std::string> group_separator = std::string("--");
};

class PacketTextPrinter final : public PacketSink {
 public:
  // patterns[u]: how unique pattern u is named.
  PacketTextPrinter(Output& out, std::vector<PacketPattern> patterns, PacketTextOptions options);
  void begin(const CaptureInput& input) override { input_ = input; }
  void packet(const PacketRecord& packet) override;
  void flow(const FlowRecord& flow) override;

 private:
  void head(char kind, std::int64_t seconds, std::uint32_t nanoseconds, const PacketInfo& info,
            std::string_view arrow);
  void time(std::int64_t seconds, std::uint32_t nanoseconds);
  void pattern_list(std::span<const std::uint32_t> ids);
  // The bytes of a record or region, laid out as the options say; `base`: the offset of
  // bytes[0]; `prefix`: what starts each line ("  " or "  client ").
  void body(std::string_view bytes, std::uint64_t base, std::span<const PacketMatch> matches,
            std::string_view prefix);
  void text_line(std::string_view bytes, std::size_t from, std::uint64_t base, std::span<const PacketMatch> matches,
                 std::string_view prefix);
  void hexdump(std::string_view bytes, std::uint64_t base, std::string_view prefix);
  void colored(std::string_view sgr, std::string_view text);
  void offset(std::uint64_t at);

  Output& out_;
  std::vector<PacketPattern> patterns_;
  PacketTextOptions options_;
  CaptureInput input_;
  bool printed_ = false;  // a packet of this run was printed (for --time and "--")
  std::int64_t first_seconds_ = 0, last_seconds_ = 0;
  std::uint32_t first_nanoseconds_ = 0, last_nanoseconds_ = 0;
  std::vector<PacketMatch> region_matches_;
};

class PacketJsonPrinter final : public PacketSink {
 public:
  PacketJsonPrinter(Output& out, const std::vector<PacketPattern>& patterns);
  void begin(const CaptureInput& input) override { input_ = input; }
  void packet(const PacketRecord& packet) override;
  void flow(const FlowRecord& flow) override;

 private:
  void pattern_list(std::span<const std::uint32_t> ids);
  void pattern_field(std::uint32_t pattern);
  void emit();

  Output& out_;
  std::vector<std::string> pattern_json_;  // per unique id: the ready {"id":..,"text":..} object
  CaptureInput input_;
  std::string buffer_;
};

// -l: the name of each capture with a selected packet (flow); -L: of each without.
class PacketListPrinter final : public PacketSink {
 public:
  PacketListPrinter(Output& out, bool with_selection, bool null_after_name)
      : out_(out), with_selection_(with_selection), null_after_name_(null_after_name) {}
  void finish(const CaptureSummary& summary) override;

 private:
  Output& out_;
  bool with_selection_;
  bool null_after_name_;
};

class PacketCountPrinter final : public PacketSink {
 public:
  PacketCountPrinter(Output& out, bool with_filename, bool null_after_name)
      : out_(out), with_filename_(with_filename), null_after_name_(null_after_name) {}
  void finish(const CaptureSummary& summary) override;

 private:
  Output& out_;
  bool with_filename_;
  bool null_after_name_;
};

}  // namespace gpufilter
