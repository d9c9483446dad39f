// Capture mode: --pcap FILE... or --interface IFACE. Packets from libpcap are decoded
// (sources/packet.hpp); each packet's transport payload (or its whole frame, with
// --match-frame) is one record, packed with many others into a chunk and scanned at once
// (pipeline/scan/record_scan.hpp), so a match never spans two packets. With --stream, TCP
// payloads are reassembled per flow and direction instead and scanned as byte streams,
// each piece overlapping the last by the longest pattern - 1 bytes, so a pattern split
// across segments is found exactly once. Selected packets (or flows) are written in the
// ngrep style, as JSON, and/or to a capture file (--pcap-out). docs/CAPTURES.md.
//
// With -E, -G or -P a record is read as lines (cut at '\n'; an empty record is one empty
// line), each selected as grep selects a line, behind the factors' prefilter (RegexLines);
// a flow carries its unterminated last line (up to kMaxRegexSpan bytes) into the next piece.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <functional>
#include <memory>

#include "gpufilter/cli/options.hpp"
#include "gpufilter/patterns/pattern_set.hpp"
#include "gpufilter/engines/scanner.hpp"
#include "gpufilter/sinks/colors.hpp"
#include "gpufilter/sinks/output.hpp"
#include "gpufilter/core/notices.hpp"
#include "gpufilter/core/stop_signal.hpp"
#include "gpufilter/grep/regex_lines.hpp"

namespace gpufilter {

struct CaptureResult {
  std::uint64_t selected = 0;  // packets (flows with --stream) selected
  std::uint64_t packets = 0;   // read
  std::uint64_t bytes = 0;     // scanned
  bool trouble = false;        // an input failed (reported through `notices`)
  // --stream on many threads (cli/flow_farm.hpp): where the time went, as --stats'
  // "stream_threads" members; empty otherwise.
  std::string stream_stats;
};

// `patterns`: as given (decoded), for the output's pattern texts. An input that cannot be
// read is reported and the next one taken (`trouble`); a failed write ends the run at
// once: OutputError for standard output, an Error whose message is
// "FILE: write error: REASON" for the --pcap-out file (a full disk, RLIMIT_FSIZE).
// `regex`: the patterns are regexes and the scanner looks for their factors (null: fixed
// strings).
// Per packet, a capture file is matched on many threads at once (cli/packet_farm.hpp)
// where the engine has scanners for other threads.
struct CaptureThreads {
  std::size_t threads = 1;
  std::function<std::unique_ptr<Scanner>()> scanner;  // null result: not for this engine
  const RegexLines* regexes = nullptr;                // the copies' prototype (regexes only)
};

// `colors`: --color's, when on. `threads`: null, or how the farm is made.
CaptureResult run_captures(const cli::Options& o, Scanner& scanner, const PatternSet& patterns, RegexLines* regex,
                           Output& out, const std::optional<Colors>& colors, const CaptureThreads* threads,
                           StopSignal& stop, Notices& notices);

// --stream with regexes: a line of a flow longer than this is matched in its last this
// many bytes.
inline constexpr std::size_t kMaxRegexSpan = std::size_t{64} << 10;

}  // namespace gpufilter
