// PacketFarm: the packets of a classic pcap file matched on every core at once (per
// packet; not --stream, whose flows cross pieces). The calling thread cuts the mapped file
// (sources/pcap_pieces.hpp) into pieces of whole records, a window ahead of the writing,
// by walking the record headers; each thread takes the next piece, applies the BPF
// filter, decodes its packets, scans their records with a scanner of its own (a twin of
// the host engine's, sharing its compiled database: RecordScan), selects them with a
// PacketSelect of its own (its own copy of the regexes) and prints the selected ones into
// the piece's own output. The calling thread writes the pieces' outputs in file order,
// so the output is byte for byte what one packet after another gives. At most two
// pieces per thread are cut and not yet written: a thread that runs ahead waits, and the
// pages of written pieces are given back. A record PcapPieces does not read (cut short,
// over the snaplen) ends the cutting: what came before is written, and the result says
// where libpcap reads on (PcapReader::resume_at).
//
// It applies where nothing carries over from one packet to the next: not with -m, -q,
// -l/-L, -A/-B/-C, --pcap-out, --time=relative or delta (packet_farm_applies()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "gpufilter/cli/options.hpp"
#include "gpufilter/core/stop_signal.hpp"
#include "gpufilter/engines/scanner.hpp"
#include "gpufilter/grep/regex_lines.hpp"
#include "gpufilter/patterns/pattern_table.hpp"
#include "gpufilter/sinks/output.hpp"
#include "gpufilter/sinks/packet_printer.hpp"
#include "gpufilter/sources/pcap_pieces.hpp"
#include "gpufilter/sources/pcap_reader.hpp"

namespace gpufilter {

struct PacketFarmParts {
  std::size_t threads = 1;
  // A scanner for the calling thread (a twin of the host engine's); null: none.
  std::function<std::unique_ptr<Scanner>()> scanner;
  const RegexLines* regexes = nullptr;  // copied by each thread (null: fixed strings)
  // A printer writing into `out`, for one thread (null result: nothing is printed, -c).
  std::function<std::unique_ptr<PacketSink>(Output& out)> printer;
  bool show = true;  // the printer names the patterns and shows the matches
};

// What the capture is, as PcapReader read its header.
struct FarmCapture {
  const PcapPieces& pieces;
  CaptureInput input;
  int link_type = 0;
  const BpfFilter* filter = nullptr;  // the reader's, run on each packet (null: none)
};

struct FarmResult {
  bool ran = false;           // false: the farm could not start (the caller reads the file itself)
  std::uint64_t selected = 0;
  std::uint64_t packets = 0;  // that passed the BPF filter
  std::uint64_t bytes = 0;    // scanned
  std::string error;          // a thread failed: its message (what was written stays)
  // Not 0: the farm stopped before the record at this file offset, numbered resume_index.
  std::uint64_t resume_offset = 0;
  std::uint64_t resume_index = 0;
};

bool packet_farm_applies(const cli::Options& o);
// --stream on many threads (cli/flow_farm.hpp): where packet_farm_applies() would without it.
bool flow_farm_applies(const cli::Options& o);

// Throws OutputError when writing `out` fails (after the threads ended).
FarmResult run_packet_farm(const cli::Options& o, const PatternTable& table, const PacketFarmParts& parts,
                           const FarmCapture& capture, Output& out, StopSignal& stop);

}  // namespace gpufilter
