#include "gpufilter/cli/options.hpp"
#include "patterns_mode.hpp"

#include "gpufilter/core/unique_fd.hpp"

#include <fcntl.h>
#include <getopt.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <deque>
#include <memory>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace gpufilter::cli {
namespace {

enum LongOnly {
  kBinaryFilesOption = 256,
  kColorOption,
  kLabelOption,
  kLineBufferedOption,
  kGroupSeparatorOption,
  kNoGroupSeparatorOption,
  kNoIgnoreCaseOption,
  kHelpOption,
  kPatternCountsOption,
  kListDevicesOption,
  kDeviceOption,
  kChunkSizeOption,
  kSlotsOption,
  kBatchTimeoutOption,
  kEngineOption,
  kStatsOption,
  kHostScanBelowOption,
  kFollowOption,
  kFromStartOption,
  kStateOption,
  kPollIntervalOption,
  kListenOption,
  kKafkaOption,
  kMaxLineBytesOption,
  kMaxConnectionsOption,
  kJsonOption,
  kNoProgressOption,
  kDecompressOption,
  kPcapOption,
  kInterfaceOption,
  kBpfOption,
  kMatchFrameOption,
  kEscapesOption,
  kStreamOption,
  kPcapOutOption,
  kHexdumpOption,
  kBylineOption,
  kTimeOption,
  kMaxPacketsOption,
  kIncludeOption,
  kExcludeOption,
  kExcludeFromOption,
  kExcludeDirOption,
};

constexpr const char* kShortOptions = "0123456789A:B:C:D:EFGHIPTUVXabcd:e:f:hij:Llm:noqRrsuvwxyZz";

const option kLongOptions[] = {
    {"basic-regexp", no_argument, nullptr, 'G'},
    {"extended-regexp", no_argument, nullptr, 'E'},
    {"fixed-regexp", no_argument, nullptr, 'F'},
    {"fixed-strings", no_argument, nullptr, 'F'},
    {"perl-regexp", no_argument, nullptr, 'P'},
    {"after-context", required_argument, nullptr, 'A'},
    {"before-context", required_argument, nullptr, 'B'},
    {"binary-files", required_argument, nullptr, kBinaryFilesOption},
    {"byte-offset", no_argument, nullptr, 'b'},
    {"context", required_argument, nullptr, 'C'},
    {"color", optional_argument, nullptr, kColorOption},
    {"colour", optional_argument, nullptr, kColorOption},
    {"count", no_argument, nullptr, 'c'},
    {"devices", required_argument, nullptr, 'D'},
    {"directories", required_argument, nullptr, 'd'},
    {"file", required_argument, nullptr, 'f'},
    {"files-with-matches", no_argument, nullptr, 'l'},
    {"files-without-match", no_argument, nullptr, 'L'},
    {"group-separator", required_argument, nullptr, kGroupSeparatorOption},
    {"no-group-separator", no_argument, nullptr, kNoGroupSeparatorOption},
    {"help", no_argument, nullptr, kHelpOption},
    {"ignore-case", no_argument, nullptr, 'i'},
    {"no-ignore-case", no_argument, nullptr, kNoIgnoreCaseOption},
    {"initial-tab", no_argument, nullptr, 'T'},
    {"label", required_argument, nullptr, kLabelOption},
    {"line-buffered", no_argument, nullptr, kLineBufferedOption},
    {"line-number", no_argument, nullptr, 'n'},
    {"line-regexp", no_argument, nullptr, 'x'},
    {"max-count", required_argument, nullptr, 'm'},
    {"no-filename", no_argument, nullptr, 'h'},
    {"no-messages", no_argument, nullptr, 's'},
    {"null", no_argument, nullptr, 'Z'},
    {"unix-byte-offsets", no_argument, nullptr, 'u'},
    {"null-data", no_argument, nullptr, 'z'},
    {"only-matching", no_argument, nullptr, 'o'},
    {"quiet", no_argument, nullptr, 'q'},
    {"recursive", no_argument, nullptr, 'r'},
    {"dereference-recursive", no_argument, nullptr, 'R'},
    {"regexp", required_argument, nullptr, 'e'},
    {"invert-match", no_argument, nullptr, 'v'},
    {"silent", no_argument, nullptr, 'q'},
    {"text", no_argument, nullptr, 'a'},
    {"binary", no_argument, nullptr, 'U'},
    {"version", no_argument, nullptr, 'V'},
    {"with-filename", no_argument, nullptr, 'H'},
    {"word-regexp", no_argument, nullptr, 'w'},
    {"include", required_argument, nullptr, kIncludeOption},
    {"exclude", required_argument, nullptr, kExcludeOption},
    {"exclude-from", required_argument, nullptr, kExcludeFromOption},
    {"exclude-dir", required_argument, nullptr, kExcludeDirOption},
    // gpufilter's own from here on (kGrepLongOptions).
    {"pattern-counts", no_argument, nullptr, kPatternCountsOption},
    {"list-devices", no_argument, nullptr, kListDevicesOption},
    {"device", required_argument, nullptr, kDeviceOption},
    {"chunk-size", required_argument, nullptr, kChunkSizeOption},
    {"slots", required_argument, nullptr, kSlotsOption},
    {"batch-timeout", required_argument, nullptr, kBatchTimeoutOption},
    {"engine", required_argument, nullptr, kEngineOption},
    {"stats", no_argument, nullptr, kStatsOption},
    {"host-scan-below", required_argument, nullptr, kHostScanBelowOption},
    {"follow", no_argument, nullptr, kFollowOption},
    {"from-start", no_argument, nullptr, kFromStartOption},
    {"state", required_argument, nullptr, kStateOption},
    {"poll-interval", required_argument, nullptr, kPollIntervalOption},
    {"listen", required_argument, nullptr, kListenOption},
    {"kafka", required_argument, nullptr, kKafkaOption},
    {"max-line-bytes", required_argument, nullptr, kMaxLineBytesOption},
    {"max-connections", required_argument, nullptr, kMaxConnectionsOption},
    {"json", no_argument, nullptr, kJsonOption},
    {"no-progress", no_argument, nullptr, kNoProgressOption},
    {"threads", required_argument, nullptr, 'j'},
    {"decompress", no_argument, nullptr, kDecompressOption},
    {"pcap", required_argument, nullptr, kPcapOption},
    {"interface", required_argument, nullptr, kInterfaceOption},
    {"bpf", required_argument, nullptr, kBpfOption},
    {"match-frame", no_argument, nullptr, kMatchFrameOption},
    {"hex", no_argument, nullptr, 'X'},
    {"escapes", no_argument, nullptr, kEscapesOption},
    {"stream", no_argument, nullptr, kStreamOption},
    {"pcap-out", required_argument, nullptr, kPcapOutOption},
    {"hexdump", no_argument, nullptr, kHexdumpOption},
    {"byline", no_argument, nullptr, kBylineOption},
    {"time", required_argument, nullptr, kTimeOption},
    {"max-packets", required_argument, nullptr, kMaxPacketsOption},
    {nullptr, 0, nullptr, 0},
};

// grep 3.8's long options: the first entries of kLongOptions.
std::size_t grep_long_options() {
  std::size_t n = 0;
  while (std::string_view(kLongOptions[n].name) != "pattern-counts") ++n;
  return n;
}
const std::size_t kGrepLongOptions = grep_long_options();

bool parse_number(std::string_view text, std::uint64_t& value) {
  if (text.empty()) return false;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc::result_out_of_range) {
    value = UINT64_MAX;  // grep treats huge counts as "no limit"
    return ptr == text.data() + text.size();
  }
  return ec == std::errc() && ptr == text.data() + text.size();
}

// A number as grep reads -m, -A, -B and -C (xstrtoimax): blanks first, a sign, digits,
// nothing after. `negative`: a '-' before a value other than zero.
bool parse_grep_integer(std::string_view text, std::uint64_t& value, bool& negative) {
  while (!text.empty() && (text.front() == ' ' || (text.front() >= '\t' && text.front() <= '\r'))) text.remove_prefix(1);
  negative = false;
  if (!text.empty() && (text.front() == '+' || text.front() == '-')) {
    negative = text.front() == '-';
    text.remove_prefix(1);
  }
  if (text.empty() || text.front() < '0' || text.front() > '9' || !parse_number(text, value)) return false;
  if (value == 0) negative = false;
  return true;
}

TimeFormat time_argument(std::string_view arg) {
  if (arg == "absolute") return TimeFormat::kAbsolute;
  if (arg == "relative") return TimeFormat::kRelative;
  if (arg == "delta") return TimeFormat::kDelta;
  if (arg == "epoch") return TimeFormat::kEpoch;
  throw UsageError("invalid argument '" + std::string(arg) +
                       "' for '--time'; valid arguments are 'absolute', 'relative', 'delta' and 'epoch'",
                   true);
}

std::uint64_t context_length(const char* arg) {
  std::uint64_t value = 0;
  bool negative = false;
  if (!parse_grep_integer(arg, value, negative) || negative)
    throw UsageError(std::string(arg) + ": invalid context length argument", false);
  return value;
}

// Size with an optional K, M or G suffix (binary units).
std::uint64_t size_argument(const char* arg, const char* option) {
  std::string_view text(arg);
  std::uint64_t scale = 1;
  if (!text.empty()) {
    switch (text.back()) {
      case 'K': case 'k': scale = 1ull << 10; break;
      case 'M': case 'm': scale = 1ull << 20; break;
      case 'G': case 'g': scale = 1ull << 30; break;
      default: break;
    }
    if (scale != 1) text.remove_suffix(1);
  }
  std::uint64_t value = 0;
  if (!parse_number(text, value) || value == 0)
    throw UsageError(std::string("invalid ") + option + " argument '" + arg + "'", true);
  return value * scale;
}

// A pattern file (-f, --exclude-from) is read whole; past this size it is refused, not read
// until memory runs out (`-f /dev/zero` took 2 GB in 5 s, grep 3.8 7 GB): a million
// patterns are 17 MB.
constexpr std::size_t kMostPatternFileBytes = std::size_t{1} << 30;

std::string read_pattern_file(const char* path) {
  const bool standard_input = std::strcmp(path, "-") == 0;
  const UniqueFd opened(standard_input ? -1 : ::open(path, O_RDONLY | O_CLOEXEC));  // closed however this ends
  const int fd = standard_input ? STDIN_FILENO : opened.get();
  if (fd < 0) throw SourceError(path, errno);
  std::string contents;
  // A regular file's size reserved at once (a million patterns are 17 MB, else copied at
  // every doubling).
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
    contents.reserve(std::min(static_cast<std::size_t>(st.st_size), kMostPatternFileBytes));
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      throw SourceError(path, errno);
    }
    if (contents.size() + static_cast<std::size_t>(n) > kMostPatternFileBytes)
      throw SourceError(path, 0, std::string(path) + ": pattern file larger than 1 GiB");
    contents.append(buffer, static_cast<std::size_t>(n));
  }
  return contents;
}

// The error for `arg` ("--NAME" or "--NAME=VALUE"), which getopt_long refused: a known
// option without its argument or with one it does not take (`known`), an abbreviation of
// several options that differ, or no option at all. Abbreviations resolve as getopt_long
// resolves them.
// The long options "--NAME" may stand for, in table order: the one named exactly, else
// every one NAME begins (`grep_only`: of grep's alone).
std::vector<const option*> prefix_matches(std::string_view name, bool grep_only = false) {
  std::vector<const option*> matches;
  for (std::size_t i = 0; kLongOptions[i].name != nullptr; ++i) {
    const option* o = &kLongOptions[i];
    if (std::string_view(o->name).substr(0, name.size()) != name) continue;
    if (name.size() == std::strlen(o->name)) return {o};  // an exact match wins over abbreviations
    if (!grep_only || i < kGrepLongOptions) matches.push_back(o);
  }
  return matches;
}

// Whether getopt_long takes the matches as options that differ (an abbreviation of
// several names of one option is not ambiguous).
bool ambiguous(const std::vector<const option*>& matches) {
  return std::any_of(matches.begin(), matches.end(), [&](const option* o) {
    return o->has_arg != matches.front()->has_arg || o->val != matches.front()->val;
  });
}

UsageError long_option_error(const char* arg, bool known) {
  const std::string_view name = std::string_view(arg + 2).substr(0, std::strcspn(arg + 2, "="));
  const std::vector<const option*> matches = prefix_matches(name);
  if (known && !matches.empty()) {
    const std::string named = std::string("option '--") + matches.front()->name + "'";
    if (matches.front()->has_arg == no_argument && std::strchr(arg, '=') != nullptr)
      return UsageError(named + " doesn't allow an argument", true);
    return UsageError(named + " requires an argument", true);
  }
  if (!ambiguous(matches)) return UsageError(std::string("unrecognized option '") + arg + "'", true);
  std::string message = std::string("option '") + arg + "' is ambiguous; possibilities:";
  for (const option* o : matches) message += std::string(" '--") + o->name + "'";
  return UsageError(message, true);
}

// Captures: grep's options that have no meaning for packets are refused by name (never
// silently ignored); docs/CAPTURES.md says what the others mean for packets and flows.
void check_capture_options(const Options& o) {
  if (!o.pcaps.empty() && !o.interface.empty()) throw UsageError("give --pcap or --interface, not both", true);
  if (std::count(o.pcaps.begin(), o.pcaps.end(), "-") > 1) throw UsageError("--pcap - can be given once", true);
  if (o.line_numbers)
    throw UsageError("-n (--line-number): packets are numbered by frame (#N); to stop after NUM packets use "
                     "--max-packets=NUM",
                     true);
  const std::pair<const char*, bool> refused[] = {
      {"--pattern-counts", o.pattern_counts},
      {"-T (--initial-tab)", o.initial_tab},
      {"-r, -R and -d (directories)", o.directories != Directories::kRead},
      {"--include, --exclude and --exclude-from", !o.file_globs.empty() || o.exclude_from_given},
      {"--exclude-dir", !o.exclude_dirs.empty()},
      {"-D (--devices)", o.devices != Devices::kCommandLine},
      {"-a, -I and --binary-files (payloads are printed with non-printable bytes as dots)",
       o.binary_files != BinaryFiles::kBinary},
  };
  for (const auto& [option, given] : refused)
    if (given) throw UsageError(std::string(option) + " does not apply to captures", true);
  if (o.hexdump && o.byline) throw UsageError("--hexdump and --byline are two layouts: give one", true);
}

// Options that make no sense together are refused before anything is read.
void check_combinations(const Options& o) {
  const bool streams = o.follow || !o.listen.empty() || !o.kafka.empty();
  if (o.follow && o.files.empty()) throw UsageError("--follow needs FILE operands to follow", true);
  if (o.max_connections_given && o.listen.empty())
    throw UsageError("--max-connections works with --listen only", true);
  if (!o.follow) {
    if (o.from_start) throw UsageError("--from-start works with --follow only", true);
    if (!o.state_path.empty()) throw UsageError("--state works with --follow only", true);
    if (o.poll_interval_ms) throw UsageError("--poll-interval works with --follow only", true);
    if (o.max_line_bytes_given && o.listen.empty() && o.kafka.empty())
      throw UsageError("--max-line-bytes works with --follow, --listen or --kafka only", true);
    if ((!o.listen.empty() || !o.kafka.empty()) && !o.files.empty())
      throw UsageError(std::string("FILE operands with ") + (o.listen.empty() ? "--kafka" : "--listen") +
                           " are followed: add --follow",
                       true);
  }
  if (o.follow && std::find(o.files.begin(), o.files.end(), "-") != o.files.end())
    throw UsageError("--follow cannot follow standard input; name files", true);
  if (o.max_line_bytes > (std::uint64_t{1} << 30)) throw UsageError("--max-line-bytes: at most 1G", true);
  if (o.json) {
    // -c and -o have a JSON form (json_printer.hpp); a list of names has none.
    if (o.list != ListMode::kNone) throw UsageError("--json cannot be combined with -l or -L", true);
  }
  if (streams && o.pattern_counts)
    throw UsageError("--pattern-counts cannot be combined with --follow, --listen or --kafka", true);
  if (streams && o.null_data) throw UsageError("-z (--null-data) cannot be combined with --follow, --listen or --kafka", true);
  const bool captures = o.captures();
  if (o.decompress && (streams || captures))
    throw UsageError("--decompress reads FILE operands and standard input: not with --follow, --listen, --kafka or captures",
                     true);
  if (captures) {
    if (streams) throw UsageError("--pcap and --interface cannot be combined with --follow, --listen or --kafka", true);
    if (o.null_data) throw UsageError("-z (--null-data) cannot be combined with --pcap or --interface", true);
    check_capture_options(o);
  } else {
    const std::pair<const char*, bool> only_captures[] = {
        {"--bpf", !o.bpf.empty()},         {"--match-frame", o.match_frame},
        {"--stream", o.stream},            {"--pcap-out", !o.pcap_out.empty()},
        {"--hexdump", o.hexdump},          {"-X/--hex", o.hex_patterns},
        {"--byline", o.byline},            {"--time", o.time != TimeFormat::kAbsolute},
        {"--max-packets", o.max_packets.has_value()},
    };
    for (const auto& [option, given] : only_captures)
      if (given) throw UsageError(std::string(option) + " works with --pcap or --interface only", true);
  }
  if (o.stream && o.match_frame) throw UsageError("--stream matches reassembled payloads; drop --match-frame", true);
}

}  // namespace

namespace {

// ngrep's habit: with --pcap or --interface, the operands after the patterns are a BPF
// expression (`gpufilter --pcap x.pcap GET tcp port 80`), joined with --bpf's by "and".
void take_bpf_operands(Options& o) {
  if (!o.captures() || o.files.empty()) return;
  std::string expression;
  for (const std::string& word : o.files) expression += (expression.empty() ? "" : " ") + word;
  o.bpf = o.bpf.empty() ? expression : "(" + o.bpf + ") and (" + expression + ")";
  o.files.clear();
}

}  // namespace

const char* const kUsageLine = "Usage: gpufilter [OPTION]... PATTERNS [FILE]...";

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string decode_hex(std::string_view text) {
  std::string out;
  int high = -1;
  // ngrep's form: one leading 0x (or 0X) before the digits.
  std::string_view digits = text;
  if (digits.size() >= 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) digits.remove_prefix(2);
  for (const char c : digits) {
    if (c == ':' || c == ' ' || c == '-') continue;
    const int d = hex_digit(c);
    if (d < 0) throw UsageError("-X: '" + std::string(text) + "' is not hex ('" + std::string(1, c) + "')", false);
    if (high < 0) {
      high = d;
    } else {
      out.push_back(static_cast<char>(high << 4 | d));
      high = -1;
    }
  }
  if (high >= 0) throw UsageError("-X: '" + std::string(text) + "' has an odd number of hex digits", false);
  return out;
}

std::string decode_escapes(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\' || i + 1 == text.size()) {
      out.push_back(text[i]);
      continue;
    }
    const char c = text[++i];
    switch (c) {
      case 'n': out.push_back('\n'); break;
      case 'r': out.push_back('\r'); break;
      case 't': out.push_back('\t'); break;
      case '0': out.push_back('\0'); break;
      case '\\': out.push_back('\\'); break;
      case 'x': {
        const int h = i + 1 < text.size() ? hex_digit(text[i + 1]) : -1;
        const int l = i + 2 < text.size() ? hex_digit(text[i + 2]) : -1;
        if (h < 0 || l < 0)
          throw UsageError("--escapes: '\\x' needs two hex digits in '" + std::string(text) + "'", false);
        out.push_back(static_cast<char>(h << 4 | l));
        i += 2;
        break;
      }
      default: throw UsageError("--escapes: unknown escape '\\" + std::string(1, c) + "' in '" + std::string(text) + "'", false);
    }
  }
  return out;
}

}  // namespace

PatternSet decode_patterns(const PatternSet& patterns, bool hex, bool escapes) {
  if (!hex && !escapes) return patterns;
  PatternSet decoded;
  for (const std::string& p : patterns.patterns()) decoded.add(hex ? decode_hex(p) : decode_escapes(p));
  return decoded;
}

namespace {

// -E, -F, -G, -P: grep refuses two different ones.
void set_syntax(Options& o, regex::Syntax syntax) {
  if (o.syntax_given && o.syntax != syntax) throw UsageError("conflicting matchers specified", false);
  o.syntax = syntax;
  o.syntax_given = true;
}

// -d ACTION as grep reads it (gnulib's argmatch): a whole word or an unambiguous prefix;
// else grep's message, the valid words and the usage lines. grep then exits 1, as if no
// line were selected; gpufilter exits 2 (docs/grep-compatibility.md).
Directories directories_action(std::string_view action) {
  static constexpr std::pair<std::string_view, Directories> kActions[] = {
      {"read", Directories::kRead}, {"recurse", Directories::kRecurse}, {"skip", Directories::kSkip}};
  int found = -1;
  bool ambiguous = false;
  for (int i = 0; i < 3; ++i) {
    if (kActions[i].first == action) return kActions[i].second;
    if (kActions[i].first.substr(0, action.size()) == action) {
      ambiguous = found >= 0;
      found = i;
    }
  }
  if (found >= 0 && !ambiguous) return kActions[found].second;
  const bool utf8 = utf8_locale();
  const auto quoted = [&](std::string_view s) {
    return (utf8 ? "\u2018" : "'") + std::string(s) + (utf8 ? "\u2019" : "'");
  };
  std::string message = std::string(ambiguous ? "ambiguous" : "invalid") + " argument " + quoted(action) + " for " +
                        quoted("--directories") + "\nValid arguments are:";
  for (const auto& [word, value] : kActions) message += "\n  - " + quoted(word);
  throw UsageError(message, true);
}

// grep's own options (those gpufilter takes or refuses as grep's); false: not one of them.
bool grep_option(int c, Options& o, bool& patterns_given) {
  switch (c) {
    case 'A': o.after = context_length(::optarg); break;
    case 'B': o.before = context_length(::optarg); break;
    case 'C': o.context = context_length(::optarg); break;
    case 'E': set_syntax(o, regex::Syntax::kExtended); break;
    case 'G': set_syntax(o, regex::Syntax::kBasic); break;
    case 'P': set_syntax(o, regex::Syntax::kPerl); break;
    case 'F': set_syntax(o, regex::Syntax::kFixed); break;
    case 'H': o.with_filename = true; break;
    case 'h': o.with_filename = false; break;
    case 'I': o.binary_files = BinaryFiles::kWithoutMatch; break;
    case 'a': o.binary_files = BinaryFiles::kText; break;
    case 'U': break;  // no CR stripping happens on this platform anyway
    case 'V': o.version = true; break;
    case 'b': o.byte_offset = true; break;
    case 'c': o.count = true; break;
    case 'e':
      o.patterns.add_list(::optarg);
      o.origins.resize(o.patterns.size());
      patterns_given = true;
      break;
    case 'f': {
      const std::size_t first = o.patterns.size();
      o.patterns.add_file_contents(read_pattern_file(::optarg));
      const auto file = std::make_shared<const std::string>(::optarg);
      o.origins.reserve(o.patterns.size());
      for (std::size_t i = first; i < o.patterns.size(); ++i) o.origins.push_back(regex::PatternOrigin{file, i - first + 1});
      patterns_given = true;
      break;
    }
    case 'i': case 'y': o.ignore_case = true; break;
    case kNoIgnoreCaseOption: o.ignore_case = false; break;
    case 'L': o.list = ListMode::kFilesWithoutMatch; break;
    case 'l': o.list = ListMode::kFilesWithMatches; break;
    case 'm': {
      std::uint64_t value = 0;
      bool negative = false;
      if (!parse_grep_integer(::optarg, value, negative)) throw UsageError("invalid max count", false);
      if (negative) {
        // A negative count means no limit (grep 3.8).
        o.max_count.reset();
        o.negative_max_count = true;
      } else {
        o.negative_max_count = false;
        o.max_count = value;
      }
      break;
    }
    case 'n': o.line_numbers = true; break;
    case 'o': o.only_matching = true; break;
    case 'q': o.quiet = true; break;
    case 's': o.no_messages = true; break;
    case 'v': o.invert = true; break;
    case 'w': o.word = true; break;
    case 'x': o.whole_line = true; break;
    case kBinaryFilesOption:
      if (std::strcmp(::optarg, "binary") == 0) o.binary_files = BinaryFiles::kBinary;
      else if (std::strcmp(::optarg, "text") == 0) o.binary_files = BinaryFiles::kText;
      else if (std::strcmp(::optarg, "without-match") == 0) o.binary_files = BinaryFiles::kWithoutMatch;
      else throw UsageError("unknown binary-files type", false);
      break;
    case kColorOption: {
      // grep compares WHEN without regard to ASCII case (c_strcasecmp).
      const std::string_view when = ::optarg != nullptr ? ::optarg : "auto";
      const auto is = [&](std::string_view word) {
        return when.size() == word.size() && std::equal(when.begin(), when.end(), word.begin(), [](char a, char b) {
                 return (a >= 'A' && a <= 'Z' ? a + 32 : a) == b;
               });
      };
      if (is("always") || is("yes") || is("force")) o.color = ColorWhen::kAlways;
      else if (is("never") || is("no") || is("none")) o.color = ColorWhen::kNever;
      else if (is("auto") || is("tty") || is("if-tty")) o.color = ColorWhen::kAuto;
      else throw UsageError("invalid argument '" + std::string(when) + "' for '--color'; valid arguments are 'always', 'never' and 'auto'", true);
      break;
    }
    case kLabelOption: o.label = ::optarg; break;
    case kLineBufferedOption: o.line_buffered = true; break;
    case kGroupSeparatorOption: o.group_separator = ::optarg; break;
    case kNoGroupSeparatorOption: o.group_separator.reset(); break;
    default: return false;
  }
  return true;
}

// gpufilter's own options; false: not one of them.
bool gpufilter_option(int c, Options& o) {
  switch (c) {
    case kHelpOption: o.help = true; break;
    case kPatternCountsOption: o.pattern_counts = true; break;
    case kListDevicesOption: o.list_devices = true; break;
    case kDeviceOption: o.device += (o.device.empty() ? "" : ",") + std::string(::optarg); break;  // several: a list
    case kChunkSizeOption: o.chunk_bytes = size_argument(::optarg, "--chunk-size"); break;
    case kSlotsOption: o.slots = size_argument(::optarg, "--slots"); break;
    case kBatchTimeoutOption: {
      if (!parse_number(::optarg, o.batch_timeout_ms))
        throw UsageError(std::string("invalid --batch-timeout argument '") + ::optarg + "'", true);
      break;
    }
    case kEngineOption: {
      const std::string_view e = ::optarg;
      if (e == "auto") o.engine = Engine::kAuto;
      else if (e == "gpu" || e == "opencl") o.engine = Engine::kOpenCL;
      else if (e == "cpu" || e == "host") o.engine = Engine::kHost;
      else if (e == "both") o.engine = Engine::kBoth;
      else throw UsageError(std::string("invalid --engine argument '") + ::optarg + "' (auto, opencl, host or both)", true);
      break;
    }
    case kStatsOption: o.stats = true; break;
    case kNoProgressOption: o.no_progress = true; break;
    case 'j': {
      if (!parse_number(::optarg, o.threads) || o.threads == 0)
        throw UsageError(std::string("invalid --threads argument '") + ::optarg + "'", true);
      break;
    }
    case kHostScanBelowOption: {
      // 0 is allowed here: never scan on the host.
      if (std::strcmp(::optarg, "0") == 0) o.host_scan_below = 0;
      else o.host_scan_below = size_argument(::optarg, "--host-scan-below");
      break;
    }
    case kFollowOption: o.follow = true; break;
    case kFromStartOption: o.from_start = true; break;
    case kStateOption: o.state_path = ::optarg; break;
    case kPollIntervalOption: {
      std::uint64_t ms = 0;
      if (!parse_number(::optarg, ms) || ms == 0 || ms > 3'600'000)
        throw UsageError(std::string("invalid --poll-interval argument '") + ::optarg + "' (milliseconds, 1 to 3600000)", true);
      o.poll_interval_ms = ms;
      break;
    }
    case kListenOption: o.listen.emplace_back(::optarg); break;
    case kKafkaOption: o.kafka.emplace_back(::optarg); break;
    case kMaxLineBytesOption:
      o.max_line_bytes = size_argument(::optarg, "--max-line-bytes");
      o.max_line_bytes_given = true;
      break;
    case kMaxConnectionsOption:
      o.max_connections = size_argument(::optarg, "--max-connections");
      o.max_connections_given = true;
      break;
    case kJsonOption: o.json = true; break;
    case kDecompressOption: o.decompress = true; break;
    case kPcapOption: o.pcaps.emplace_back(::optarg); break;
    case kInterfaceOption: o.interface = ::optarg; break;
    case kBpfOption: o.bpf = ::optarg; break;
    case kMatchFrameOption: o.match_frame = true; break;
    case 'X': o.hex_patterns = true; break;
    case kEscapesOption: o.escapes = true; break;
    case kStreamOption: o.stream = true; break;
    case kPcapOutOption: o.pcap_out = ::optarg; break;
    case kHexdumpOption: o.hexdump = true; break;
    case kBylineOption: o.byline = true; break;
    case kTimeOption: o.time = time_argument(::optarg); break;
    case kMaxPacketsOption: {
      std::uint64_t n = 0;
      if (!parse_number(::optarg, n) || n == 0)
        throw UsageError(std::string("--max-packets: '") + ::optarg + "' is not a positive number", false);
      o.max_packets = n;
      break;
    }
    case 'r': o.directories = Directories::kRecurse; break;  // after -R, still -R's walk (grep)
    case 'R': o.directories = Directories::kRecurse; o.dereference = true; break;
    case 'd': o.directories = directories_action(::optarg); break;
    case 'D': {
      const std::string_view action = ::optarg;
      if (action == "read") o.devices = Devices::kRead;
      else if (action == "skip") o.devices = Devices::kSkip;
      else throw UsageError("unknown devices method", false);
      break;
    }
    case kIncludeOption: o.file_globs.push_back({::optarg, true}); break;
    case kExcludeOption: o.file_globs.push_back({::optarg, false}); break;
    case kExcludeFromOption: {
      // One pattern a line, as grep's add_exclude_file (gnulib's add_exclude_fp): trailing
      // white space trimmed, blank lines skipped; a file that cannot be read is an error.
      const std::string contents = read_pattern_file(::optarg);
      o.exclude_from_given = true;
      std::size_t at = 0;
      while (at < contents.size()) {
        const std::size_t end = std::min(contents.find('\n', at), contents.size());
        std::size_t last = end;
        while (last > at && std::string_view(" \t\v\f\r").find(contents[last - 1]) != std::string_view::npos) --last;
        // The pattern is a C string to gnulib: a NUL ends it (after the trimming; an empty
        // one is still a pattern).
        if (last > at) o.file_globs.push_back({contents.substr(at, std::min(last, contents.find('\0', at)) - at), false});
        at = end + 1;
      }
      break;
    }
    case kExcludeDirOption: {
      std::string dir = ::optarg;  // grep strips trailing slashes
      while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
      o.exclude_dirs.push_back(dir);
      break;
    }
    case 'T': o.initial_tab = true; break;
    case 'Z': o.null_after_name = true; break;
    case 'z': o.null_data = true; break;
    case 'u': o.unix_byte_offsets = true; break;
    default: return false;
  }
  return true;
}

// An option getopt_long refused, with glibc's messages.
[[noreturn]] void option_error(char** argv) {
  // getopt_long sets optopt to the character of an unknown short option (and may
  // still be inside its bundle: optind has not moved), to the option's value when a
  // known option lacks its argument or has one it does not take, and to 0 for a long
  // option that is unknown or an ambiguous abbreviation; in those cases optind has
  // moved past the failing argument. The messages are glibc's.
  // (optopt is negative for a byte above 0x7f: getopt stores a plain char.)
  const bool known_char = ::optopt != 0 && ::optopt < 256 && ::optopt != ':' &&
                          std::strchr(kShortOptions, ::optopt) != nullptr;
  if (::optopt != 0 && ::optopt < 256 && !known_char)
    throw UsageError(std::string("invalid option -- '") + static_cast<char>(::optopt) + "'", true);
  const char* arg = argv[::optind - 1];
  if (std::strncmp(arg, "--", 2) == 0) throw long_option_error(arg, ::optopt != 0);
  if (known_char)
    throw UsageError(std::string("option requires an argument -- '") + static_cast<char>(::optopt) + "'", true);
  throw UsageError(std::string("unrecognized option '") + arg + "'", true);
}

// The option "--NAME" stands for as grep 3.8 reads it: exact, else the one its prefix
// names. Where gpufilter's own options make a prefix ambiguous that grep's alone do not
// ("--ma" is grep's --max-count, beside --max-packets and --match-frame), grep's wins.
// Null when the name is unknown or ambiguous among grep's options too.
const option* long_option(std::string_view name, bool& grep_resolved) {
  grep_resolved = false;
  const std::vector<const option*> all = prefix_matches(name);
  if (all.empty() || !ambiguous(all)) return all.empty() ? nullptr : all.front();
  const std::vector<const option*> greps = prefix_matches(name, true);
  if (greps.empty() || ambiguous(greps)) return nullptr;
  grep_resolved = true;
  return greps.front();
}

// Before getopt_long: each "--PREFIX[=VALUE]" that long_option() resolves to grep's option
// over gpufilter's is written out in full (into `storage`), so that getopt_long takes it.
// Option arguments are stepped over as getopt_long reads them.
void resolve_grep_abbreviations(int argc, char** argv, std::deque<std::string>& storage) {
  const bool posix = std::getenv("POSIXLY_CORRECT") != nullptr;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--") return;
    if (arg.size() < 2 || arg[0] != '-') {
      if (posix) return;  // the first operand ends the options
      continue;
    }
    if (arg[1] != '-') {
      // Short options: one that takes an argument takes the rest of this element, or the next.
      for (std::size_t k = 1; k < arg.size(); ++k) {
        const char* spec = std::strchr(kShortOptions, arg[k]);
        if (spec == nullptr || spec[1] != ':') continue;
        if (spec[2] == ':') break;  // an optional argument: only the rest of this element
        if (k + 1 == arg.size()) ++i;
        break;
      }
      continue;
    }
    const std::size_t equals = arg.find('=');
    bool grep_resolved = false;
    const option* o = long_option(arg.substr(2, equals == std::string_view::npos ? arg.npos : equals - 2), grep_resolved);
    if (o == nullptr) continue;  // getopt_long words the error
    if (grep_resolved) {
      storage.push_back(std::string("--") + o->name + std::string(equals == arg.npos ? "" : arg.substr(equals)));
      argv[i] = storage.back().data();
    }
    if (o->has_arg == required_argument && equals == arg.npos) ++i;
  }
}

}  // namespace

Options parse(int argc, char** argv) {
  // Rewritten elements of argv stay valid until the next parse().
  static std::deque<std::string> resolved;
  resolved.clear();
  resolve_grep_abbreviations(argc, argv, resolved);
  Options o;
  bool patterns_given = false;
  std::string digits;
  int digit_argument = -1;  // argv element of the last -NUM digit

  ::opterr = 0;
  ::optind = 0;  // full reinitialisation of getopt, so parse() can be called twice
  for (;;) {
    const int before = std::max(::optind, 1);  // optind 0 asks getopt to start at argv[1]
    const int c = ::getopt_long(argc, argv, kShortOptions, kLongOptions, nullptr);
    if (c == -1) break;
    if (c >= '0' && c <= '9') {
      // -NUM: digits of one argument form one number (grep: "-15" is -C 15).
      const int this_argument = ::optind > before ? before : ::optind;
      if (this_argument != digit_argument) digits.clear();
      digit_argument = this_argument;
      digits.push_back(static_cast<char>(c));
      o.context = context_length(digits.c_str());
      continue;
    }
    digit_argument = -1;
    if (c != '?' && (grep_option(c, o, patterns_given) || gpufilter_option(c, o))) continue;
    option_error(argv);
  }
  if (o.help || o.version || o.list_devices) return o;
  int next = ::optind;
  if (!patterns_given) {
    if (next >= argc) throw UsageError("", true);
    o.patterns.add_list(argv[next++]);
    o.origins.resize(o.patterns.size());
  }
  for (; next < argc; ++next) o.files.emplace_back(argv[next]);
  take_bpf_operands(o);
  check_combinations(o);
  return o;
}

}  // namespace gpufilter::cli
