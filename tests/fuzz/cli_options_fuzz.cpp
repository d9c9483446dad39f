// cli_options_fuzz: the command line parser (cli/options.cpp), getopt_long included.
//
// The input is argv after argv[0], its words separated by NUL bytes. UsageError (a bad
// command line) and SourceError (an unreadable -f file) are the expected failures; any
// other exception, a crash or a sanitizer report is a bug. A command line that parses is
// parsed a second time and must give the same options: parse() resets getopt's global
// state itself, and a parser that leaked state from one call into the next would differ.
// A refused one must name the word or option character that was wrong.
//
// -f reads files, so parse() runs in a directory of the target's own with two pattern
// files ("p" and an empty "e"), and '/' in the input becomes '_': no word can name a file
// outside it (or /dev/zero). Standard input is /dev/null, for -f -. The working directory
// is changed only around each parse, so libFuzzer's own relative paths keep their meaning.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "gpufilter/cli/options.hpp"
#include "gpufilter/core/errors.hpp"

#include "fuzz_support.hpp"

namespace {

using gpufilter::cli::Options;

const gpufilter::fuzz::ScratchDir* g_dir = nullptr;  // two pattern files: "p" and an empty "e"

std::string optional_text(const std::optional<std::uint64_t>& v) { return v ? std::to_string(*v) : "-"; }

// Everything parse() decides, as text, to compare two parses of one command line.
std::string describe(const Options& o) {
  std::string s;
  for (const std::string& p : o.patterns.patterns()) s += "pattern[" + p + "]";
  for (const std::string& f : o.files) s += "file[" + f + "]";
  for (const std::string& l : o.listen) s += "listen[" + l + "]";
  for (const std::string& p : o.pcaps) s += "pcap[" + p + "]";
  const bool flags[] = {o.ignore_case, o.invert,   o.word,       o.whole_line,    o.count,        o.quiet,
                        o.no_messages, o.line_numbers, o.byte_offset, o.only_matching, o.line_buffered,
                        o.negative_max_count, o.pattern_counts, o.list_devices, o.stats, o.follow, o.from_start,
                        o.json, o.match_frame, o.hex_patterns, o.escapes, o.stream, o.hexdump, o.help, o.version};
  for (const bool f : flags) s += f ? '1' : '0';
  s += " list=" + std::to_string(static_cast<int>(o.list));
  s += " with_filename=" + std::string(o.with_filename ? (*o.with_filename ? "H" : "h") : "-");
  s += " m=" + optional_text(o.max_count) + " B=" + optional_text(o.before) + " A=" + optional_text(o.after) +
       " C=" + optional_text(o.context);
  s += " color=" + std::to_string(static_cast<int>(o.color));
  s += " label=" + (o.label ? "[" + *o.label + "]" : std::string("-"));
  s += " binary=" + std::to_string(static_cast<int>(o.binary_files));
  s += " sep=" + (o.group_separator ? "[" + *o.group_separator + "]" : std::string("-"));
  s += " device=[" + o.device + "] chunk=" + std::to_string(o.chunk_bytes) + " slots=" + std::to_string(o.slots);
  s += " engine=" + std::to_string(static_cast<int>(o.engine)) + " batch=" + std::to_string(o.batch_timeout_ms);
  s += " host_below=" + optional_text(o.host_scan_below) + " state=[" + o.state_path + "]";
  s += " poll=" + optional_text(o.poll_interval_ms) + " max_line=" + std::to_string(o.max_line_bytes);
  s += " max_conn=" + std::to_string(o.max_connections) + " iface=[" + o.interface + "] bpf=[" + o.bpf + "]";
  s += " pcap_out=[" + o.pcap_out + "]";
  return s;
}

// A message about an option names what was given: "unrecognized option 'ARG'" and
// "option 'ARG' is ambiguous; possibilities: ..." quote a whole word of the command line,
// "invalid option -- 'C'" a character of a word that starts with '-' (getopt's optind
// tells which word failed only in some cases; a message from the wrong word would fail
// here). Other messages can start with the user's text ("ARG: invalid context length
// argument"), so only messages of exactly these forms are checked.
void check_message(const std::string& message, const std::vector<std::string>& words) {
  const auto any_word = [&](auto&& is_it) { return std::any_of(words.begin(), words.end(), is_it); };
  const auto fail = [&](const char* why) {
    std::fprintf(stderr, "the message \"%s\" %s\n", message.c_str(), why);
    __builtin_trap();
  };
  if (message.empty() || message.back() != '\'') return;
  const std::string unrecognized = "unrecognized option '";
  if (message.rfind(unrecognized, 0) == 0 &&
      !any_word([&](const std::string& w) { return message == unrecognized + w + "'"; }))
    fail("quotes no word of the command line");
  if (message.rfind("option '", 0) == 0 && message.find("' is ambiguous; possibilities: '--") != std::string::npos &&
      !any_word([&](const std::string& w) {
        return message.rfind("option '" + w + "' is ambiguous; possibilities: '--", 0) == 0;
      }))
    fail("quotes no word of the command line");
  const std::string invalid = "invalid option -- '";
  if (message.rfind(invalid, 0) == 0 && message.size() == invalid.size() + 2) {
    const char c = message[invalid.size()];
    if (!any_word([&](const std::string& w) { return w.size() > 1 && w[0] == '-' && w.find(c, 1) != std::string::npos; }))
      fail("names a character no option word holds");
  }
}

// One parse of `words` (argv[1...]) on fresh, writable copies: getopt permutes argv.
// Returns false for an expected failure.
bool parse(const std::vector<std::string>& words, Options& out) {
  std::vector<std::vector<char>> storage;
  storage.reserve(words.size() + 1);
  storage.emplace_back(std::begin("gpufilter"), std::end("gpufilter"));
  for (const std::string& w : words) {
    storage.emplace_back(w.begin(), w.end());
    storage.back().push_back('\0');
  }
  std::vector<char*> argv;
  for (auto& s : storage) argv.push_back(s.data());
  argv.push_back(nullptr);
  bool parsed = false;
  std::optional<std::string> usage_error;
  g_dir->run([&] {
    try {
      out = gpufilter::cli::parse(static_cast<int>(storage.size()), argv.data());
      parsed = true;
    } catch (const gpufilter::cli::UsageError& e) {
      usage_error = e.what();
    } catch (const gpufilter::SourceError&) {
    }
  });
  if (usage_error) check_message(*usage_error, words);
  return parsed;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  static const gpufilter::fuzz::ScratchDir dir("cli", {{"p", "alpha\nbeta\n\nde:ad\n"}, {"e", ""}});
  g_dir = &dir;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> words(1);
  for (std::size_t i = 0; i < size; ++i) {
    const char c = static_cast<char>(data[i]);
    if (c == '\0') words.emplace_back();
    else words.back().push_back(c == '/' ? '_' : c);
  }
  if (size == 0) words.clear();

  Options first;
  if (!parse(words, first)) return 0;
  Options second;
  if (!parse(words, second)) {
    std::fprintf(stderr, "the second parse of one command line failed\n");
    __builtin_trap();
  }
  const std::string a = describe(first);
  const std::string b = describe(second);
  if (a != b) {
    std::fprintf(stderr, "two parses of one command line differ:\n%s\n%s\n", a.c_str(), b.c_str());
    __builtin_trap();
  }
  // What main() does next with the patterns (-X, --escapes).
  try {
    (void)gpufilter::cli::decode_patterns(first.patterns, first.hex_patterns, first.escapes);
  } catch (const gpufilter::cli::UsageError&) {
  }
  return 0;
}
