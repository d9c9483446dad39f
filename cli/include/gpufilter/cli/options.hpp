// The gpufilter command line: GNU grep's options, parsed with
// getopt_long exactly as grep parses them (bundling, permutation, -NUM, --opt=ARG).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpufilter/core/errors.hpp"
#include "gpufilter/patterns/pattern_set.hpp"
#include "gpufilter/grep/searcher.hpp"
#include "gpufilter/regex/line_regex.hpp"
#include "gpufilter/regex/syntax.hpp"

namespace gpufilter::cli {

// A bad command line: main prints it, then grep's usage hint, and exits 2.
class UsageError : public Error {
 public:
  UsageError(const std::string& message, bool show_usage) : Error(message), show_usage_(show_usage) {}
  bool show_usage() const noexcept { return show_usage_; }

 private:
  bool show_usage_;
};

// --time: how a capture's packets are timed in the text output.
enum class TimeFormat { kAbsolute, kRelative, kDelta, kEpoch };
enum class ColorWhen { kNever, kAlways, kAuto };
enum class ListMode { kNone, kFilesWithMatches, kFilesWithoutMatch };
enum class Engine { kAuto, kOpenCL, kHost, kBoth };
// -d ACTION / -r / -R; -D ACTION (grep's default reads devices named on the command line
// and skips those met while recursing).
enum class Directories { kRead, kSkip, kRecurse };
enum class Devices { kCommandLine, kRead, kSkip };
// --include (include) and --exclude / --exclude-from, in the order given.
struct FileGlob {
  std::string pattern;
  bool include = false;
};

struct Options {
  PatternSet patterns;
  // Where each pattern came from (same order): the -f file and line, for grep's
  // "FILE:LINE: " before a compile error; an empty file for -e and the operand.
  std::vector<regex::PatternOrigin> origins;
  regex::Syntax syntax = regex::Syntax::kBasic;  // -G (default), -E, -F, -P
  bool syntax_given = false;
  // -G/-E patterns without an operator taken as fixed strings (regex_lines_for()): grep
  // kept its regex matcher for one of them, whose -o/--color parts leave -x out.
  bool fixed_from_regex = false;
  // -i in a UTF-8 locale: fixed strings' case variants beyond ASCII, scanned after the
  // patterns as given (regex_lines_for()); by each, the given pattern it stands for. Not
  // empty exactly where variants were taken: grep's regex matcher decides such a list.
  std::vector<std::uint32_t> variant_of;
  std::vector<std::string> files;  // empty: standard input (with -r: the working directory)
  Directories directories = Directories::kRead;
  bool dereference = false;  // -R: follow every symbolic link while recursing
  Devices devices = Devices::kCommandLine;
  std::vector<FileGlob> file_globs;
  bool exclude_from_given = false;  // --exclude-from, even of a file of no pattern
  std::vector<std::string> exclude_dirs;  // --exclude-dir

  bool ignore_case = false;
  bool invert = false;
  bool word = false;
  bool whole_line = false;
  bool count = false;
  ListMode list = ListMode::kNone;
  bool quiet = false;
  bool no_messages = false;
  std::optional<bool> with_filename;  // -H true, -h false
  bool line_numbers = false;
  bool byte_offset = false;
  bool only_matching = false;
  bool initial_tab = false;      // -T
  bool null_after_name = false;  // -Z
  bool null_data = false;        // -z: lines (records) end in a NUL byte, not '\n'
  bool unix_byte_offsets = false;  // -u: obsolete in grep 3.8, which warns and goes on
  bool line_buffered = false;
  std::optional<std::uint64_t> max_count;
  bool negative_max_count = false;  // -m -N: no limit, except that grep 3.8 selects nothing with -v
  std::optional<std::uint64_t> before;
  std::optional<std::uint64_t> after;
  std::optional<std::uint64_t> context;  // -C, -NUM
  ColorWhen color = ColorWhen::kNever;
  std::optional<std::string> label;
  BinaryFiles binary_files = BinaryFiles::kBinary;
  std::optional<std::string> group_separator = std::string("--");

  // gpufilter's own.
  bool pattern_counts = false;
  bool list_devices = false;
  std::string device;              // --device, else GPUFILTER_DEVICE
  std::uint64_t chunk_bytes = 0;   // 0: chosen by device type
  std::uint64_t slots = 0;          // 0: chosen by engine
  Engine engine = Engine::kAuto;
  bool stats = false;               // timings as one JSON line on stderr at exit
  bool no_progress = false;         // --no-progress: no progress line on a terminal
  std::uint64_t threads = 0;        // -j, --threads: files searched at once (0: one per core)
  std::uint64_t batch_timeout_ms = 2;
  std::optional<std::uint64_t> host_scan_below;  // --host-scan-below: small chunks scanned on the host

  // Streams (docs/STREAMING.md).
  bool follow = false;             // --follow: FILE operands are followed like tail -F
  bool from_start = false;         // --from-start
  std::string state_path;          // --state FILE
  std::optional<std::uint64_t> poll_interval_ms;  // --poll-interval: poll instead of inotify
  std::vector<std::string> listen;  // --listen URL...
  std::vector<std::string> kafka;   // --kafka URL...
  std::uint64_t max_line_bytes = 1u << 20;
  std::uint64_t max_connections = 1024;
  bool max_line_bytes_given = false;   // the two above were given: streams' options only
  bool max_connections_given = false;
  bool json = false;               // --json: one JSON object per line
  bool decompress = false;         // --decompress: gzip, zstd, xz, bzip2, lz4 inputs by magic

  // Captures (docs/CAPTURES.md).
  std::vector<std::string> pcaps;  // --pcap FILE...
  std::string interface;           // --interface IFACE
  bool captures() const noexcept { return !pcaps.empty() || !interface.empty(); }  // packets, not lines
  std::string bpf;                 // --bpf EXPR
  bool match_frame = false;        // --match-frame: the whole frame is the record
  bool hex_patterns = false;       // -X, --hex
  bool escapes = false;            // --escapes: \xHH, \n, \t, \r, \0, \\ in patterns
  bool stream = false;             // --stream: reassembled TCP streams
  std::string pcap_out;            // --pcap-out FILE
  bool hexdump = false;            // --hexdump
  bool byline = false;             // --byline: a payload's lines as lines (ngrep -W byline)
  TimeFormat time = TimeFormat::kAbsolute;  // --time
  std::optional<std::uint64_t> max_packets;  // --max-packets: read at most NUM packets

  bool help = false;
  bool version = false;

  // The byte that ends a line, for every stage that cuts or prints lines: NUL with -z.
  char eol() const noexcept { return null_data ? '\0' : '\n'; }
};

// Parses argv. Reads -f files (and -f - from standard input). Throws UsageError for a
// bad command line and SourceError for an unreadable -f file.
Options parse(int argc, char** argv);

// -X/--hex and --escapes: the patterns as bytes. Hex: "deadbeef", "de:ad:be:ef" or
// "de ad be ef" (an even number of hex digits). Escapes: \xHH, \0, \n, \r, \t, \\.
// Throws UsageError naming the pattern.
PatternSet decode_patterns(const PatternSet& patterns, bool hex, bool escapes);

const char* help_text();
const char* version_text();
extern const char* const kUsageLine;
// The name gpufilter's messages begin with ("gpufilter: FILE: ...").
inline constexpr const char* kProgram = "gpufilter";

}  // namespace gpufilter::cli
