// Capture mode: --pcap FILE... or --interface IFACE. Packets from libpcap are decoded
// (sources/packet.hpp); each packet's transport payload (or its whole frame, with
// --match-frame) is one record, packed with many others into a chunk and scanned at once
// (pipeline/scan/record_scan.hpp), so a match never spans two packets. With --stream, TCP
// payloads are reassembled per flow and direction instead and scanned as byte streams,
// each piece overlapping the last by the longest pattern - 1 bytes, so a pattern split
// across segments is found exactly once. Selected packets (or flows) are written in the
// ngrep style, as JSON, and/or to a capture file (--pcap-out). docs/CAPTURES.md.
#pragma once

#include <cstdint>

#include "gpufilter/cli/options.hpp"
#include "gpufilter/patterns/pattern_set.hpp"
#include "gpufilter/engines/scanner.hpp"
#include "gpufilter/sinks/output.hpp"
#include "gpufilter/core/notices.hpp"
#include "gpufilter/core/stop_signal.hpp"

namespace gpufilter {

struct CaptureResult {
  std::uint64_t selected = 0;  // packets (flows with --stream) selected
  std::uint64_t packets = 0;   // read
  std::uint64_t bytes = 0;     // scanned
  bool trouble = false;        // an input failed (reported through `notices`)
};

// `patterns`: as given (decoded), for the output's pattern texts. An input that cannot be
// read is reported and the next one taken (`trouble`); a failed write ends the run at
// once: OutputError for standard output, an Error whose message is
// "FILE: write error: REASON" for the --pcap-out file (a full disk, RLIMIT_FSIZE).
CaptureResult run_captures(const cli::Options& o, Scanner& scanner, const PatternSet& patterns, Output& out,
                           StopSignal& stop, Notices& notices);

}  // namespace gpufilter
