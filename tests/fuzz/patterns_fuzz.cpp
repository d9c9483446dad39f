// patterns_fuzz: pattern files and their decoding, then the compiled pattern table.
//
// Input: one flags byte, then the contents of a pattern file. The file goes through the
// real path: cli::parse with -f FILE (read_pattern_file, PatternSet::add_file_contents:
// empty lines, CRLF, duplicates, NUL bytes), or with -e (PatternSet::add_list), then
// cli::decode_patterns for -X/--hex and --escapes as main() calls it, then PatternTable.
//   flags bit 0: -X      bit 1: --escapes      bit 2: -i      bit 3: -e instead of -f
// UsageError from decoding is expected. Checked:
//  * hex: every decoded pattern is the pattern's hex digits, read two at a time;
//    escapes: a decoded pattern written back with \xHH escapes decodes to itself;
//  * the table: one unique id per distinct folded non-empty pattern, its bytes and length,
//    the empty pattern and NUL flags, the longest length; every pattern is found by the
//    trie at position 0 of itself;
//  * the trie walk (PatternTable::for_each_at) at every position of the file's contents
//    finds exactly the occurrences of the plain reference matcher, and sort_occurrences
//    puts a shuffled, repeated list of them back into PatternTable::before order (its
//    radix path too).
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "gpufilter/cli/options.hpp"
#include "gpufilter/core/errors.hpp"
#include "gpufilter/patterns/pattern_set.hpp"
#include "gpufilter/patterns/pattern_table.hpp"
#include "reference_matcher.hpp"

#include "fuzz_support.hpp"

namespace {

using gpufilter::Occurrence;
using gpufilter::PatternSet;
using gpufilter::PatternTable;

int g_file = -1;  // a memfd holding the pattern file
std::string g_path;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "patterns_fuzz: %s\n", what.c_str());
  __builtin_trap();
}

std::string shown(std::string_view s) { return "'" + gpufilter::fuzz::printable(s) + "'"; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string folded(std::string_view s, bool ignore_case) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(gpufilter::fold_byte(static_cast<unsigned char>(c), ignore_case));
  return out;
}

bool same(const std::vector<Occurrence>& a, const std::vector<Occurrence>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](const Occurrence& x, const Occurrence& y) { return x.position == y.position && x.pattern == y.pattern; });
}

void check_decoding(const PatternSet& given, const PatternSet& decoded, bool hex, bool escapes) {
  if (decoded.size() != given.size()) fail("decoding changed the number of patterns");
  for (std::size_t i = 0; i < given.size(); ++i) {
    const std::string& in = given[i];
    const std::string& out = decoded[i];
    if (hex) {
      // ngrep's form: one leading 0x (or 0X) before the digits (cli/options.cpp).
      std::string_view rest = in;
      if (rest.size() >= 2 && rest[0] == '0' && (rest[1] == 'x' || rest[1] == 'X')) rest.remove_prefix(2);
      std::string digits;
      for (const char c : rest)
        if (c != ':' && c != ' ' && c != '-') digits.push_back(c);
      if (digits.size() != 2 * out.size()) fail("hex " + shown(in) + " decoded to " + shown(out));
      for (std::size_t k = 0; k < out.size(); ++k) {
        const int value = hex_value(digits[2 * k]) << 4 | hex_value(digits[2 * k + 1]);
        if (static_cast<unsigned char>(out[k]) != value) fail("hex " + shown(in) + " decoded to " + shown(out));
      }
    } else if (escapes) {
      if (out.size() > in.size()) fail("escapes made " + shown(in) + " longer: " + shown(out));
      std::string written;
      for (const char c : out) {
        char e[8];
        std::snprintf(e, sizeof e, "\\x%02X", static_cast<unsigned char>(c));
        written += e;
      }
      PatternSet again;
      again.add(written);
      const PatternSet back = gpufilter::cli::decode_patterns(again, false, true);
      if (back.size() != 1 || back[0] != out) fail("escapes do not round-trip " + shown(out));
    }
  }
}

void check_table(const PatternSet& patterns, const PatternTable& table, bool ignore_case) {
  if (table.pattern_count() != patterns.size()) fail("pattern_count");
  std::set<std::string> distinct;
  std::size_t longest = 0;
  bool empty = false;
  bool nul = false;
  for (std::size_t i = 0; i < patterns.size(); ++i) {
    const std::string f = folded(patterns[i], ignore_case);
    longest = std::max(longest, f.size());
    nul = nul || f.find('\0') != std::string::npos;
    const std::uint32_t id = table.unique_of(i);
    if (f.empty()) {
      empty = true;
      if (id != PatternTable::kNoPattern) fail("the empty pattern has a unique id");
      continue;
    }
    distinct.insert(f);
    if (id >= table.unique_count()) fail("pattern " + std::to_string(i) + " has no unique id");
    if (table.unique_pattern(id) != f || table.unique_length(id) != f.size())
      fail("unique pattern " + std::to_string(id) + " is " + shown(table.unique_pattern(id)) + ", expected " + shown(f));
    bool found = false;
    table.for_each_at(patterns[i], [&](std::uint32_t hit) {
      if (hit >= table.unique_count()) fail("for_each_at reported an unknown id");
      found = found || hit == id;
    });
    if (!found) fail("the trie does not find " + shown(patterns[i]) + " at position 0 of itself");
  }
  if (table.unique_count() != distinct.size()) fail("unique_count");
  if (table.has_empty_pattern() != empty) fail("has_empty_pattern");
  if (table.has_nul_byte() != nul) fail("has_nul_byte");
  if (table.max_length() != longest) fail("max_length");
  if (table.matches_nothing() != (distinct.empty() && !empty)) fail("matches_nothing");
}

// The trie against the reference matcher over `text`, then sort_occurrences.
void check_occurrences(const PatternSet& patterns, const PatternTable& table, std::string_view text) {
  // The reference compares every pattern at every position: keep its work bounded.
  std::size_t work = 0;
  for (const std::string& p : patterns.patterns()) work += p.size() + 1;
  if (work * text.size() > (std::size_t{1} << 22)) return;

  const std::vector<Occurrence> expected = gpufilter::reference_occurrences(patterns, table, text);
  std::vector<Occurrence> walked;
  for (std::size_t at = 0; at < text.size(); ++at) {
    const std::size_t first = walked.size();
    table.for_each_at(text.substr(at), [&](std::uint32_t id) { walked.push_back({static_cast<std::uint32_t>(at), id}); });
    // The walk meets shorter patterns first; before() wants the longest first.
    std::reverse(walked.begin() + static_cast<std::ptrdiff_t>(first), walked.end());
  }
  if (!same(expected, walked))
    fail("the trie finds " + std::to_string(walked.size()) + " occurrences, the reference " +
         std::to_string(expected.size()));
  if (expected.empty()) return;

  // Repeated copies, shifted by the text's length, up to the radix sort's threshold and a
  // little past it; shuffled, then sorted again.
  std::vector<Occurrence> sorted;
  for (std::size_t copy = 0; sorted.size() < 600 && copy < 64; ++copy)
    for (const Occurrence& o : expected)
      sorted.push_back({static_cast<std::uint32_t>(o.position + copy * text.size()), o.pattern});
  std::vector<Occurrence> shuffled = sorted;
  std::mt19937 rng(static_cast<std::uint32_t>(sorted.size()));
  std::shuffle(shuffled.begin(), shuffled.end(), rng);
  std::vector<Occurrence> buffer;
  gpufilter::sort_occurrences(shuffled, buffer, table);
  if (!same(sorted, shuffled)) fail("sort_occurrences disagrees with PatternTable::before");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_file = ::memfd_create("patterns_fuzz", MFD_CLOEXEC);
  if (g_file < 0) std::abort();
  g_path = "/proc/self/fd/" + std::to_string(g_file);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const unsigned flags = data[0];
  const bool hex = (flags & 1) != 0;
  const bool escapes = (flags & 2) != 0;
  const bool ignore_case = (flags & 4) != 0;
  const bool inline_list = (flags & 8) != 0;
  const std::string contents(reinterpret_cast<const char*>(data) + 1, size - 1);

  std::vector<std::string> words = {"gpufilter"};
  if (hex) words.insert(words.end(), {"-X", "--pcap", "capture.pcap"});  // -X is for captures
  if (escapes) words.push_back("--escapes");
  if (ignore_case) words.push_back("-i");
  if (inline_list) {
    words.insert(words.end(), {"-e", contents.substr(0, contents.find('\0'))});  // argv ends at NUL
  } else {
    if (::ftruncate(g_file, 0) != 0 || ::pwrite(g_file, contents.data(), contents.size(), 0) !=
                                            static_cast<ssize_t>(contents.size()))
      std::abort();
    words.insert(words.end(), {"-f", g_path});
  }
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  gpufilter::cli::Options options;
  try {
    options = gpufilter::cli::parse(static_cast<int>(words.size()), argv.data());
  } catch (const gpufilter::Error& e) {
    fail(std::string("parse refused a valid command line: ") + e.what());
  }
  if (options.ignore_case != ignore_case || options.hex_patterns != hex || options.escapes != escapes)
    fail("parse lost a flag");

  PatternSet decoded;
  try {
    decoded = gpufilter::cli::decode_patterns(options.patterns, options.hex_patterns, options.escapes);
  } catch (const gpufilter::cli::UsageError&) {
    return 0;
  }
  check_decoding(options.patterns, decoded, hex, escapes && !hex);
  const PatternTable table(decoded, gpufilter::MatchOptions{.ignore_case = ignore_case});
  check_table(decoded, table, ignore_case);
  check_occurrences(decoded, table, contents);
  return 0;
}
