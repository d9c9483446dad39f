// --decompress against `TOOL -dc FILE | grep --label=FILE ...` (and zgrep for the exit
// status): files made here by the Debian tools (gzip, zstd, xz, bzip2, lz4), concatenated
// members and frames, truncated and corrupt streams, standard input, binary content, and
// -r over a tree of rotations, compressed ones with and without an extension.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "differential.hpp"
#include "testutil/testutil.hpp"

namespace gpufilter::test {
namespace {

struct Format {
  std::string tool;       // compresses standard input to standard output with `tool -c`
  std::string extension;  // what the tool would name the file; the test does not need it
};
const std::vector<Format>& formats() {
  static const std::vector<Format> all = {
      {"gzip", ".gz"}, {"zstd", ".zst"}, {"xz", ".xz"}, {"bzip2", ".bz2"}, {"lz4", ".lz4"}};
  return all;
}

// Log lines of which some match "status=500" and "host3".
std::string log_text(int lines, int seed) {
  std::ostringstream s;
  for (int i = 0; i < lines; ++i)
    s << "2026-11-27T12:" << (i / 60) % 60 << ':' << i % 60 << " host" << (i * 7 + seed) % 10 << " svc[" << i
      << "]: request " << i * 31 + seed << " status=" << ((i + seed) % 13 == 0 ? 500 : 200) << '\n';
  return s.str();
}

// `text` compressed by `tool` (gzip -c, zstd -c, ...).
std::string compressed(const TempDir& dir, const std::string& tool, const std::string& text,
                       const std::string& level = "") {
  const std::string plain = dir.write("plain.tmp", text);
  const std::string out = dir.file("out.tmp");
  command_output(tool + " -q -c " + level + " < " + shell_quote(plain) + " > " + shell_quote(out));
  return read_file(out);
}

// grep -F on the decompressed bytes, as read from standard input under the file's name.
GrepRun oracle(const Args& args, const std::string& decompressed, const std::string& name) {
  return run_grep(Args{"--label=" + name} + args + Args{"-"}, decompressed);
}

// grep's messages as gpufilter words them: its name ("/bin/grep") replaced.
std::string as_gpufilter(const std::string& grep_err) {
  std::string out;
  std::istringstream in(grep_err);
  for (std::string line; std::getline(in, line);) {
    const std::size_t colon = line.find(": ");
    out += (colon != std::string::npos ? "gpufilter" + line.substr(colon) : line) + "\n";
  }
  return out;
}

void expect_same_as_grep(const Args& args, const std::string& path, const std::string& decompressed,
                         const std::string& note) {
  const GrepRun want = oracle(args, decompressed, path);
  for (const Knobs& k : {Knobs{}, Knobs{"4096", "2", "cpu"}}) {
    const GrepRun got = run_gpufilter(Args{"--decompress"} + args + Args{path}, {}, k);
    EXPECT_EQ(got.status, want.status) << note << " " << describe_args(args) << " " << k.describe();
    EXPECT_EQ(got.out, want.out) << note << " " << describe_args(args) << " " << k.describe() << "\n"
                                 << first_difference(want.out, got.out);
    EXPECT_EQ(got.err, as_gpufilter(want.err)) << note;  // "binary file matches" included
  }
}

class Decompress : public ::testing::Test {
 protected:
  TempDir dir;
  std::string text = log_text(40000, 1);  // about 2.5 MB: several decoded blocks
};

const std::vector<Args>& flag_sets() {
  static const std::vector<Args> all = {{"status=500"}, {"-c", "status=500"}, {"-n", "host3"},
                                        {"-b", "status=500"}, {"-H", "-n", "status=500"}, {"-l", "host3"},
                                        {"-L", "host3"}, {"-v", "-c", "host3"}, {"-o", "-b", "host3"},
                                        {"-m", "5", "-n", "status=500"}, {"-c", "no such thing"},
                                        {"-T", "-n", "-H", "status=500"}, {"-C", "2", "-n", "status=500"}};
  return all;
}

TEST_F(Decompress, EveryFormatAsGrepOnTheDecompressedBytes) {
  SweepShare share;
  for (const Format& f : formats()) {
    const std::string path = dir.write("app.log" + f.extension, compressed(dir, f.tool, text));
    for (const Args& flags : flag_sets())
      if (share.take()) expect_same_as_grep(flags, path, text, f.tool);
  }
}

TEST_F(Decompress, FormatsAreToldByMagicNotByName) {
  // A rotation without an extension, and a name that says another format.
  for (const Format& f : formats()) {
    const std::string path = dir.write("app.log.2", compressed(dir, f.tool, text));
    expect_same_as_grep({"-c", "status=500"}, path, text, f.tool + " as app.log.2");
    const std::string liar = dir.write("app.log.gz.zst", compressed(dir, f.tool, text));
    expect_same_as_grep({"-n", "host3"}, liar, text, f.tool + " as app.log.gz.zst");
  }
}

TEST_F(Decompress, ConcatenatedMembersAndFramesReadAsOne) {
  const std::string second = log_text(3000, 5);
  for (const Format& f : formats()) {
    // Three streams: the second one empty, as `cat a.gz empty.gz b.gz` gives.
    const std::string joined = compressed(dir, f.tool, text) + compressed(dir, f.tool, "") + compressed(dir, f.tool, second);
    const std::string path = dir.write("joined", joined);
    EXPECT_EQ(command_output(f.tool + " -dc < " + shell_quote(path)), text + second) << f.tool;
    for (const Args& flags : {Args{"-c", "status=500"}, Args{"-n", "host3"}, Args{"-b", "-H", "status=500"}})
      expect_same_as_grep(flags, path, text + second, f.tool + " concatenated");
  }
}

// What follows a whole gzip or bzip2 stream and cannot begin another (zero padding, text
// appended) is ignored, as gzip -d and bzip2 -d ignore it with a warning and zgrep and rg -z
// search on: it was a corrupt stream, exit status 2.
TEST_F(Decompress, TrailingGarbageAfterAGzipOrBzip2StreamIsIgnored) {
  for (const std::string& tool : std::vector<std::string>{"gzip", "bzip2"}) {
    for (const std::string& tail : {std::string(4, '\0'), std::string("garbage\n"), std::string(70000, '\0'), std::string("BZhX tail\n")}) {
      const std::string path = dir.write("tail", compressed(dir, tool, text) + tail);
      expect_same_as_grep({"-c", "status=500"}, path, text, tool + " with a tail");
      expect_same_as_grep({"-n", "host3"}, path, text, tool + " with a tail");
    }
  }
}

TEST_F(Decompress, StandardInputOfEveryFormat) {
  for (const Format& f : formats()) {
    const std::string packed = compressed(dir, f.tool, text);
    for (const Args& flags : {Args{"-c", "status=500"}, Args{"-n", "host3"}, Args{"-H", "status=500"}}) {
      const GrepRun want = run_grep(flags, text);
      const GrepRun got = run_gpufilter(Args{"--decompress"} + flags, packed);
      EXPECT_EQ(got.status, want.status) << f.tool;
      EXPECT_EQ(got.out, want.out) << f.tool << " " << first_difference(want.out, got.out);
    }
  }
}

TEST_F(Decompress, InputsThatAreNotCompressedAreReadAsWithout) {
  // Beginnings that agree with a magic for a while (gzip's 1f, "BZh9" without bzip2's
  // block marker) and inputs shorter than any magic.
  const std::vector<std::string> inputs = {"",          "x",         "\x1f",   "\x1f\x8b", "BZh",
                                           "BZh9 words\nstatus=500\n", "\x28\xb5 status=500\n",
                                           text};
  for (const std::string& input : inputs) {
    const std::string path = dir.write("plain", input);
    for (const Args& flags : {Args{"-c", "status=500"}, Args{"-n", "-b", "status=500"}, Args{"-H", "-a", "x"}}) {
      const GrepRun want = run_grep(flags + Args{path});
      EXPECT_EQ(run_gpufilter(Args{"--decompress"} + flags + Args{path}).out, want.out) << escape(input, 20);
      const GrepRun piped = run_grep(flags, input);
      const GrepRun got = run_gpufilter(Args{"--decompress"} + flags, input);
      EXPECT_EQ(got.out, piped.out) << "stdin " << escape(input, 20);
      EXPECT_EQ(got.status, piped.status) << "stdin " << escape(input, 20);
    }
  }
}

TEST_F(Decompress, UnreadableInputsAreReportedAsWithout) {
  // A directory read as a file (-d read) fails at its first read: grep still prints its
  // count or its name (-L), then the message; a missing file is reported in its place.
  const std::string folder = dir.make_dir("folder");
  const std::string packed = dir.write("p.gz", compressed(dir, "gzip", text));
  for (const Args& flags : {Args{"-d", "read", "-c", "status=500"}, Args{"-d", "read", "-L", "status=500"},
                            Args{"-d", "read", "status=500"}}) {
    const Args args = flags + Args{folder, dir.file("missing"), packed};
    const GrepRun without = run_gpufilter(args);
    const GrepRun got = run_gpufilter(Args{"--decompress"} + args);
    const GrepRun want = run_grep(flags + Args{folder, dir.file("missing"), "-"}, text);
    EXPECT_EQ(got.status, without.status) << describe_args(flags);
    EXPECT_EQ(got.status, want.status) << describe_args(flags);
    EXPECT_EQ(got.err, without.err) << describe_args(flags);
    // grep names standard input "(standard input)" where gpufilter read p.gz.
    std::string expected = want.out;
    for (std::size_t at; (at = expected.find("(standard input)")) != std::string::npos;)
      expected.replace(at, 16, packed);
    EXPECT_EQ(got.out, expected) << describe_args(flags);
  }
}

TEST_F(Decompress, BinaryDecompressedContentAsGrep) {
  const std::string binary = std::string("head status=500\n\0 binary\n", 26) + text;
  for (const Format& f : formats()) {
    const std::string path = dir.write("bin", compressed(dir, f.tool, binary));
    for (const Args& flags : {Args{"status=500"}, Args{"-c", "status=500"}, Args{"-a", "-n", "status=500"},
                              Args{"-I", "status=500"}, Args{"--binary-files=without-match", "-l", "status=500"}})
      expect_same_as_grep(flags, path, binary, f.tool + " binary");
  }
}

// The lines of `out` but its last (which a cut stream may have left incomplete).
std::string without_last_line(const std::string& out) {
  if (out.empty()) return out;
  const std::size_t end = out.rfind('\n', out.size() - 2);
  return end == std::string::npos ? std::string() : out.substr(0, end + 1);
}

TEST_F(Decompress, TruncatedStreamKeepsTheLinesBeforeItAndExits2) {
  const std::string second = log_text(30000, 9);
  for (const Format& f : formats()) {
    const std::string whole = compressed(dir, f.tool, text);
    const std::string next = compressed(dir, f.tool, second);
    const std::string cut = whole + next.substr(0, next.size() / 2);
    const std::string path = dir.write("app.log.1", cut);
    const GrepRun got = run_gpufilter({"--decompress", "-n", "status=500", path});
    EXPECT_EQ(got.status, 2) << f.tool;
    EXPECT_NE(got.err.find(path + ": truncated " + f.tool + " data"), std::string::npos) << f.tool << ": " << got.err;
    EXPECT_NE(got.err.find("at byte " + std::to_string(cut.size())), std::string::npos) << f.tool << ": " << got.err;
    // Every line of the whole first stream, then lines of the second up to the cut.
    const std::string first_lines = run_grep({"-n", "status=500"}, text).out;
    const std::string all_lines = run_grep({"-n", "status=500"}, text + second).out;
    EXPECT_EQ(got.out.substr(0, first_lines.size()), first_lines) << f.tool;
    EXPECT_EQ(all_lines.substr(0, without_last_line(got.out).size()), without_last_line(got.out)) << f.tool;
    // At least what the tool itself decodes before it gives up.
    const std::string tool_lines =
        command_output(f.tool + " -dc < " + shell_quote(path) + " 2>/dev/null | grep -n status=500");
    EXPECT_GE(got.out.size() + 200, tool_lines.size()) << f.tool;
  }
}

TEST_F(Decompress, CorruptStreamNamesTheFileAndOffsetAndExits2) {
  const std::string second = log_text(30000, 9);
  for (const Format& f : formats()) {
    const std::string whole = compressed(dir, f.tool, text);
    std::string bad = compressed(dir, f.tool, second);
    // The second stream's header: every format checks it, so the error is certain. After a
    // gzip or bzip2 stream, bytes without the magic are trailing garbage, ignored (as by
    // gzip -d): there, the header after the magic (bzip2's: after "BZh" and the level).
    const std::size_t first = f.tool == "gzip" ? 2 : f.tool == "bzip2" ? 4 : 0;
    for (std::size_t i = first; i < first + 2; ++i) bad[i] = static_cast<char>(~bad[i]);
    const std::string path = dir.write("app.log.3", whole + bad);
    const GrepRun got = run_gpufilter({"--decompress", "-c", "status=500", path});
    EXPECT_EQ(got.status, 2) << f.tool;
    EXPECT_NE(got.err.find(path + ": corrupt " + f.tool + " data at byte "), std::string::npos) << f.tool << ": "
                                                                                              << got.err;
    EXPECT_EQ(got.out, run_grep({"-c", "status=500"}, text).out) << f.tool;
    // Corruption inside a stream: the lines before it still come, the status is 2. With
    // -a: garbage decoded before the check fails may hold a NUL, and grep stops reading a
    // binary file at its first match (`bzip2 -dc | grep` exits 0 there too).
    std::string inside = whole;
    for (std::size_t i = inside.size() * 3 / 4; i < inside.size() * 3 / 4 + 64; ++i) inside[i] ^= 0x55;
    const std::string path2 = dir.write("app.log.4", inside);
    const GrepRun got2 = run_gpufilter({"--decompress", "-a", "-n", "status=500", path2});
    EXPECT_EQ(got2.status, 2) << f.tool << " " << got2.err;
    EXPECT_NE(got2.err.find(path2 + ": "), std::string::npos) << f.tool << ": " << got2.err;
    EXPECT_NE(got2.err.find("byte "), std::string::npos) << f.tool << ": " << got2.err;
  }
}

// The libraries are loaded when a format is met (decoders.cpp): one that cannot be is
// that input's error, with the library and Debian's package named, and the other inputs
// are searched. An empty file of the library's name, found first through
// LD_LIBRARY_PATH, stands for a broken installation.
TEST_F(Decompress, ALibraryThatCannotBeLoadedIsTheErrorOfItsInputAlone) {
  const std::map<std::string, std::string> library = {{"gzip", "libz.so.1"},
                                                      {"zstd", "libzstd.so.1"},
                                                      {"xz", "liblzma.so.5"},
                                                      {"bzip2", "libbz2.so.1.0"},
                                                      {"lz4", "liblz4.so.1"}};
  const std::string plain = dir.write("plain.log", text);
  for (const Format& f : formats()) {
    const std::string broken = dir.file("broken-" + f.tool);
    std::filesystem::create_directories(broken);
    std::ofstream(broken + "/" + library.at(f.tool)).flush();
    const std::string path = dir.write("app.log.5", compressed(dir, f.tool, text));
    const GrepRun got =
        run_gpufilter({"--decompress", "-c", "status=500", path, plain}, {}, {}, {"LD_LIBRARY_PATH=" + broken});
    EXPECT_EQ(got.status, 2) << f.tool;
    EXPECT_NE(got.err.find(path + ": reading " + f.tool + " data needs " + library.at(f.tool) + " (Debian: "),
              std::string::npos)
        << f.tool << ": " << got.err;
    EXPECT_EQ(got.out, plain + ":" + run_grep({"-c", "status=500"}, text).out) << f.tool;
  }
}

TEST_F(Decompress, ExitStatusAsZgrep) {
  const std::string whole = compressed(dir, "gzip", text);
  const std::string good = dir.write("good.gz", whole);
  const std::string cut = dir.write("cut.gz", whole.substr(0, whole.size() / 2));
  for (const std::string& path : {good, cut}) {
    for (const char* pattern : {"status=500", "no such thing"}) {
      const ProcessResult zgrep = run_process({"/bin/sh", "-c", std::string("exec zgrep -F -c ") + shell_quote(pattern) + " " + path});
      const GrepRun got = run_gpufilter({"--decompress", "-c", pattern, path});
      EXPECT_EQ(got.status, zgrep.status) << path << " " << pattern;
    }
  }
}

TEST_F(Decompress, ManyFilesInParallelAsOneByOne) {
  Args files;
  std::string expected;
  for (int i = 0; i < 12; ++i) {
    const Format& f = formats()[static_cast<std::size_t>(i) % formats().size()];
    const std::string part = log_text(2000 + i * 100, i);
    std::string name = "f";  // (not "f" + to_string: GCC 12 warns of a false -Wrestrict there)
    name += std::to_string(i);
    files.push_back(dir.write(name, i % 6 == 5 ? part : compressed(dir, f.tool, part)));
    expected += oracle({"-H", "-n", "status=500"}, part, files.back()).out;
  }
  const GrepRun got = run_gpufilter(Args{"--decompress", "-n", "status=500"} + files);
  EXPECT_EQ(got.status, 0);
  EXPECT_EQ(got.out, expected) << first_difference(expected, got.out);
}

TEST_F(Decompress, RecursiveRotationsAreSearchedLikeTheirPlainSiblings) {
  // The same tree twice: plain text, and with the older rotations compressed.
  const std::vector<std::string> names = {"app.log", "app.log.1", "app.log.2.gz", "app.log.3.zst",
                                          "app.log.4", "app.log.5.bz2", "app.log.6.lz4", "app.log.7"};
  const std::vector<std::string> tools = {"", "", "gzip", "zstd", "xz", "bzip2", "lz4", "gzip"};
  for (const std::string top : {"plain", "packed"}) {
    dir.make_dir(top);
    dir.make_dir(top + "/logs");
    dir.make_dir(top + "/logs/old");
  }
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::string part = log_text(1500, static_cast<int>(i));
    const std::string at = (i >= 6 ? "/logs/old/" : "/logs/") + names[i];
    dir.write("plain" + at, part);
    dir.write("packed" + at, tools[i].empty() ? part : compressed(dir, tools[i], part));
  }
  auto lines = [](const std::string& out) {
    std::vector<std::string> v;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) v.push_back(line);
    std::sort(v.begin(), v.end());
    return v;
  };
  for (const Args& flags : {Args{"-r", "status=500"}, Args{"-rc", "host3"}, Args{"-rn", "status=500"},
                            Args{"-rl", "host3"}, Args{"-rL", "host3"}, Args{"-rh", "-b", "status=500"}}) {
    std::string joined;
    for (const std::string& a : flags) joined.append(" ").append(shell_quote(a));
    const ProcessResult want =
        run_process({"/bin/sh", "-c", "cd " + shell_quote(dir.file("plain")) + " && exec " + grep_binary() + " -F" + joined + " logs"});
    const ProcessResult got = run_process({"/bin/sh", "-c", "cd " + shell_quote(dir.file("packed")) + " && exec " +
                                                                gpufilter_binary() + " --decompress" + joined + " logs"});
    EXPECT_EQ(got.status, want.status) << describe_args(flags);
    EXPECT_EQ(lines(got.out), lines(want.out)) << describe_args(flags);
    EXPECT_EQ(got.err, want.err);
  }
}

TEST_F(Decompress, MemoryStaysBoundedWhateverTheInputExpandsTo) {
  // 512 MiB of log lines from a few KB of zstd: the decoder must wait for the scan.
  const std::string bomb = dir.file("bomb.zst");
  command_output("yes 'a line of a log that repeats status=200' 2>/dev/null | head -c 512M | zstd -q -1 -c > " + shell_quote(bomb));
  const std::uint64_t size = 512ull << 20;
  const std::uint64_t line = std::string("a line of a log that repeats status=200\n").size();
  const std::uint64_t count = size / line + (size % line >= line - 1 ? 1 : 0);  // a cut last line may still match
  const GrepRun want{std::to_string(count) + "\n", "", 0};
  const ProcessResult got = run_process_measured({gpufilter_binary(), "--decompress", "--engine=cpu", "-c", "status=200", bomb});
  EXPECT_EQ(got.out, want.out);
  EXPECT_EQ(got.status, 0);
  EXPECT_LT(got.max_rss_kb, 400 * 1024) << "peak resident set of a 512 MiB decoded input";
}

TEST_F(Decompress, InterruptEndsAReadThatWaitsForACompressedPipe) {
  // Lines of a gzip stream whose writer stalls: SIGINT ends the search cleanly (status 0,
  // the lines decoded so far printed), as it ends one of plain text.
  const std::string packed = compressed(dir, "gzip", text);
  const SpawnedProcess child = spawn_process({gpufilter_binary(), "--decompress", "--engine=cpu", "-c", "status=500"});
  const std::size_t half = packed.size() / 2;
  ASSERT_EQ(::write(child.in, packed.data(), half), static_cast<ssize_t>(half));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ::kill(child.pid, SIGINT);
  const auto start = std::chrono::steady_clock::now();
  int status = 0;
  while (::waitpid(child.pid, &status, WNOHANG) == 0 && std::chrono::steady_clock::now() - start < std::chrono::seconds(10))
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const bool ended = std::chrono::steady_clock::now() - start < std::chrono::seconds(10);
  if (!ended) ::kill(child.pid, SIGKILL), ::waitpid(child.pid, &status, 0);
  ::close(child.in);
  char out[64] = {};
  const ssize_t n = ::read(child.out, out, sizeof out - 1);
  ::close(child.out);
  ::close(child.err);
  ASSERT_TRUE(ended) << "SIGINT did not end a read waiting for the decoder";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_GT(n, 1) << "the count of what was decoded before the stop";
}

TEST_F(Decompress, RefusedWithStreams) {
  const GrepRun got = run_gpufilter({"--decompress", "--follow", "x", dir.write("f", "x\n")});
  EXPECT_EQ(got.status, 2);
  EXPECT_NE(got.err.find("--decompress"), std::string::npos);
}

}  // namespace
}  // namespace gpufilter::test
