// PacketSink: what selected packets and TCP flows of a capture become, and its printers.
//
// PacketTextPrinter writes ngrep's layout: a header line per packet (kind, time, endpoints,
// TCP flags, frame number, the patterns that matched), then its payload on one line with
// non-printables as dots, or with --hexdump as rows of 16 bytes (offset, hex, text), and
// an empty line; a flow (--stream) is one summary line. PacketJsonPrinter writes one JSON
// object per packet or flow in the envelope of rg's JSON Lines that --json writes for
// text ({"type":"packet","data":{...}}, "flow"); docs/CAPTURES.md has the fields. PacketCountPrinter writes -c's count at the end of each capture.
//
// Lifecycle per capture: begin() once, then packet()/flow() for each selected record in
// the order they are decided, then finish() once, unless the capture could not be opened.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpufilter/core/packet.hpp"
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

// A selected packet. Valid only during the call.
struct PacketRecord {
  const RawPacket& raw;      // frame number, time, lengths
  const PacketInfo& info;    // what the decoder found
  std::string_view record;   // the bytes scanned: the transport payload, or the frame (--match-frame)
  std::span<const std::uint32_t> patterns;  // unique ids matched under -w/-x, ascending
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

struct PacketTextOptions {
  bool with_filename = false;  // each header starts with "NAME:"
  bool hexdump = false;        // --hexdump
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
  void pattern_list(std::span<const std::uint32_t> ids);
  void payload(std::string_view bytes);
  void hexdump(std::string_view bytes);

  Output& out_;
  std::vector<PacketPattern> patterns_;
  PacketTextOptions options_;
  CaptureInput input_;
};

class PacketJsonPrinter final : public PacketSink {
 public:
  PacketJsonPrinter(Output& out, const std::vector<PacketPattern>& patterns);
  void begin(const CaptureInput& input) override { input_ = input; }
  void packet(const PacketRecord& packet) override;
  void flow(const FlowRecord& flow) override;

 private:
  void pattern_list(std::span<const std::uint32_t> ids);
  void emit();

  Output& out_;
  std::vector<std::string> pattern_json_;  // per unique id: the ready {"id":..,"text":..} object
  CaptureInput input_;
  std::string buffer_;
};

class PacketCountPrinter final : public PacketSink {
 public:
  PacketCountPrinter(Output& out, bool with_filename) : out_(out), with_filename_(with_filename) {}
  void finish(const CaptureSummary& summary) override;

 private:
  Output& out_;
  bool with_filename_;
};

}  // namespace gpufilter
