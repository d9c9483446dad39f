// Differential testing of the gpufilter binary against GNU grep -F (LC_ALL=C): the same
// arguments go to `/bin/grep -F ARGS...` and to `gpufilter ARGS... --chunk-size=C --slots=S`
// (the knobs first when ARGS hold a "--") for several chunk sizes and slot counts; stdout
// bytes, the exit status and stderr (up to the program name) must be equal.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "testutil/testutil.hpp"

namespace gpufilter::test {

// gpufilter's own knobs for one run; an empty string means "not passed" (the default).
struct Knobs {
  std::string chunk;
  std::string slots;
  std::string engine;  // gpu (the OpenCL device), cpu (the host engine), or auto
  // "1" or "0": regular files mapped always or never (GPUFILTER_MAP_FILES), so that both
  // paths are tested whichever this machine's measure picks; empty: as measured.
  std::string map = "";
  std::string describe() const;
};

// 5, 17, 64 and 4096 byte chunks and the default, with 1, 2 and 3 slots, on both engines:
// for small inputs.
const std::vector<Knobs>& small_knobs();
// count - 1 of the small knob sets (rotating from call to call) and the default;
// expect_same() uses rotating_knobs(3) when given no knobs.
std::vector<Knobs> rotating_knobs(std::size_t count = 3);
// Chunk sizes that stay fast on inputs of hundreds of KB.
const std::vector<Knobs>& large_knobs();
// `count` random knob sets (chunk sizes 1..max_chunk, or the default) for random cases.
std::vector<Knobs> random_knobs(std::mt19937& rng, int count, int max_chunk);

// Runs `grep -F args...` once and gpufilter once per knob set (empty: rotating_knobs()), with
// `input` on standard input and `env` added to the environment. Adds a gtest failure for each
// run whose stdout, exit status or stderr (up to the program name) differs, with the args,
// knobs, `note` (seed, case description) and the first differing line. Returns true when all
// runs agree.
bool expect_same(const std::vector<std::string>& args, const std::string& input = {},
                 const std::vector<Knobs>& knobs = {}, const std::string& note = {},
                 const std::vector<std::string>& env = {});

// As expect_same(), with MATCHER ("-G", "-E", "-P" or "-F") in front of the arguments of
// both tools: `grep MATCHER args...` against `gpufilter MATCHER args... knobs`. The
// environment's entries replace inherited ones of the same name ("LC_ALL=C.UTF-8" runs both
// in that locale). Failures say "differs from grep MATCHER".
bool expect_same_with(const std::string& matcher, const std::vector<std::string>& args,
                      const std::string& input = {}, const std::vector<Knobs>& knobs = {},
                      const std::string& note = {}, const std::vector<std::string>& env = {});

// The outputs of `grep -F args...` (LC_ALL=C).
struct GrepRun {
  std::string out;
  std::string err;
  int status;
};
GrepRun run_grep(const std::vector<std::string>& args, const std::string& input = {},
                 const std::vector<std::string>& env = {});
GrepRun run_gpufilter(const std::vector<std::string>& args, const std::string& input = {},
                      const Knobs& knobs = {}, const std::vector<std::string>& env = {});

// Readable rendering of bytes: C escapes for control bytes and bytes >= 0x80, cut at `limit`.
std::string escape(std::string_view bytes, std::size_t limit = 400);
std::string describe_args(const std::vector<std::string>& args);
// A command line, and two joined: Args{"-r"} + Args{"foo", dir}.
using Args = std::vector<std::string>;
Args operator+(Args a, const Args& b);
// A readable diff: the first differing line (1-based) of `expected` and `actual`, with the
// line before it, or "" when equal.
std::string first_difference(std::string_view expected, std::string_view actual);

// Joins patterns with '\n' (a -f file's contents; adds a final newline).
std::string pattern_file(const std::vector<std::string>& patterns);

// How many of a randomized test's `cases` to run: the first half in a sanitizer build (3-4
// times slower; SweepShare in testutil.hpp says why and where every case runs), so that
// CI's time goes to what only the sanitizers find.
inline int case_count(int cases) { return whole_sweeps() ? cases : (cases + 1) / 2; }

}  // namespace gpufilter::test
