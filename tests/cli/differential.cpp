#include "differential.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

#include "testutil/testutil.hpp"

namespace gpufilter::test {

std::string Knobs::describe() const {
  return "--chunk-size=" + (chunk.empty() ? std::string("(default)") : chunk) +
         " --slots=" + (slots.empty() ? std::string("(default)") : slots) +
         " --engine=" + (engine.empty() ? std::string("(default)") : engine) +
         (map.empty() ? std::string() : " GPUFILTER_MAP_FILES=" + map);
}

const std::vector<Knobs>& small_knobs() {
  static const std::vector<Knobs> knobs = {
      {"5", "1", "gpu"}, {"5", "3", "cpu"}, {"17", "2", "gpu"}, {"64", "3", "cpu"},
      {"4096", "1", "gpu"}, {"4096", "2", "cpu"}, {"", "", ""},
  };
  return knobs;
}

std::vector<Knobs> rotating_knobs(std::size_t count) {
  // Every chunk size meets every slot count and both engines over twelve calls; the
  // default always runs.
  static const std::vector<Knobs> cycle = {
      {"5", "1", "gpu"}, {"17", "2", "gpu"}, {"64", "3", "gpu"}, {"4096", "1", "gpu"},
      {"5", "3", "cpu", "1"}, {"17", "1", "cpu", "0"}, {"64", "2", "cpu", "1"}, {"4096", "3", "cpu", "0"},
      {"5", "2", "gpu"}, {"17", "3", "cpu", "1"}, {"64", "1", "gpu"}, {"4096", "2", "cpu", "0"},
  };
  static std::size_t next = 0;
  std::vector<Knobs> knobs;
  for (std::size_t i = 0; i + 1 < count; ++i) knobs.push_back(cycle[next++ % cycle.size()]);
  knobs.push_back({"", "", ""});
  return knobs;
}

const std::vector<Knobs>& large_knobs() {
  static const std::vector<Knobs> knobs = {{"4093", "2", "gpu"}, {"64K", "1", "cpu", "1"}, {"", "3", "", "0"}};
  return knobs;
}

std::vector<Knobs> random_knobs(std::mt19937& rng, int count, int max_chunk) {
  std::vector<Knobs> knobs;
  for (int i = 0; i < count; ++i) {
    Knobs k;
    const int kind = std::uniform_int_distribution<int>(0, 9)(rng);
    if (kind == 0) {
      k.chunk.clear();  // default
    } else if (kind <= 3) {
      k.chunk = std::to_string(std::uniform_int_distribution<int>(1, 16)(rng));
    } else {
      k.chunk = std::to_string(std::uniform_int_distribution<int>(1, max_chunk)(rng));
    }
    const int slots = std::uniform_int_distribution<int>(0, 3)(rng);
    k.slots = slots == 0 ? std::string() : std::to_string(slots);
    const int engine = std::uniform_int_distribution<int>(0, 2)(rng);
    k.engine = engine == 0 ? std::string() : engine == 1 ? "gpu" : "cpu";
    knobs.push_back(k);
  }
  return knobs;
}

std::string escape(std::string_view bytes, std::size_t limit) {
  std::string s;
  std::size_t i = 0;
  for (; i < bytes.size() && s.size() < limit; ++i) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    switch (c) {
      case '\n': s += "\\n"; break;
      case '\r': s += "\\r"; break;
      case '\t': s += "\\t"; break;
      case '\\': s += "\\\\"; break;
      case '"': s += "\\\""; break;
      default:
        if (c < 0x20 || c >= 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", c);
          s += buf;
        } else {
          s.push_back(static_cast<char>(c));
        }
    }
  }
  if (i < bytes.size()) s += "...(" + std::to_string(bytes.size()) + " bytes in all)";
  return s;
}

Args operator+(Args a, const Args& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::string describe_args(const std::vector<std::string>& args) {
  std::string s;
  for (const auto& a : args) {
    if (!s.empty()) s += ' ';
    s += '"' + escape(a, 200) + '"';
  }
  return s;
}

namespace {

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) {
      lines.push_back(text.substr(start));
      break;
    }
    lines.push_back(text.substr(start, nl - start + 1));
    start = nl + 1;
  }
  return lines;
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

// grep names itself by its path in messages (argv[0]) and "grep" in its usage lines.
std::string normalise_grep_stderr(std::string err) {
  replace_all(err, grep_binary() + ":", "gpufilter:");
  // gnulib's c-stack names the program by its base name.
  if (err == "grep: stack overflow\n") err = "gpufilter: stack overflow\n";
  replace_all(err, "Usage: grep ", "Usage: gpufilter ");
  replace_all(err, "Try 'grep --help'", "Try 'gpufilter --help'");
  return err;
}

}  // namespace

std::string first_difference(std::string_view expected, std::string_view actual) {
  if (expected == actual) return {};
  const auto e = split_lines(expected);
  const auto a = split_lines(actual);
  std::size_t i = 0;
  while (i < e.size() && i < a.size() && e[i] == a[i]) ++i;
  std::ostringstream s;
  s << "first difference at line " << (i + 1) << " (grep: " << e.size() << " lines, " << expected.size()
    << " bytes; gpufilter: " << a.size() << " lines, " << actual.size() << " bytes)\n";
  if (i > 0) s << "    same   : \"" << escape(e[i - 1], 300) << "\"\n";
  const auto show = [&s](const std::vector<std::string_view>& lines, std::size_t k) {
    if (k < lines.size()) s << '"' << escape(lines[k], 300) << '"';
    else s << "(end of output)";
    s << "\n";
  };
  s << "    grep   : ";
  show(e, i);
  s << "    gpufilt: ";
  show(a, i);
  return s.str();
}

std::string pattern_file(const std::vector<std::string>& patterns) {
  std::string s;
  for (const auto& p : patterns) {
    s += p;
    s += '\n';
  }
  return s;
}

GrepRun run_grep(const std::vector<std::string>& args, const std::string& input,
                 const std::vector<std::string>& env) {
  std::vector<std::string> argv = {grep_binary(), "-F"};
  argv.insert(argv.end(), args.begin(), args.end());
  ProcessResult r = run_process(argv, input, env);
  return {std::move(r.out), std::move(r.err), r.status};
}

GrepRun run_gpufilter(const std::vector<std::string>& args, const std::string& input, const Knobs& knobs,
                      const std::vector<std::string>& env) {
  // The knobs go after the arguments (getopt permutes them there too), or first when a "--"
  // among the arguments would make them file names.
  std::vector<std::string> knob_args;
  if (!knobs.chunk.empty()) knob_args.push_back("--chunk-size=" + knobs.chunk);
  if (!knobs.slots.empty()) knob_args.push_back("--slots=" + knobs.slots);
  if (!knobs.engine.empty()) knob_args.push_back("--engine=" + knobs.engine);
  std::vector<std::string> argv = {gpufilter_binary()};
  const bool end_of_options = std::find(args.begin(), args.end(), "--") != args.end();
  if (end_of_options) argv.insert(argv.end(), knob_args.begin(), knob_args.end());
  argv.insert(argv.end(), args.begin(), args.end());
  if (!end_of_options) argv.insert(argv.end(), knob_args.begin(), knob_args.end());
  std::vector<std::string> environment = env;
  if (!knobs.map.empty()) environment.push_back("GPUFILTER_MAP_FILES=" + knobs.map);
  ProcessResult r = run_process(argv, input, environment);
  return {std::move(r.out), std::move(r.err), r.status};
}

namespace {

constexpr const char* kRefusedConstructs[] = {"repeating an anchor or a word assertion",
                                              "inside an expression is not supported with -z",
                                              "beside a bracket expression in a UTF-8 locale",
                                              "repeats too much for the regex matcher",
                                              "of what can match the empty string too deep for the regex matcher",
                                              "of a group that holds \\< or \\>",
                                              "beside other text in a repeated group"};

// Runs `grep grep_matcher args...` once and `gpufilter [matcher] args...` per knob set and
// reports each difference; `matcher` empty: gpufilter gets none.
bool compare_runs(const std::string& grep_matcher, const std::string& matcher, const std::vector<std::string>& args,
                  const std::string& input, const std::vector<Knobs>& knob_list, const std::string& note,
                  const std::vector<std::string>& env) {
  std::vector<std::string> grep_argv = {grep_binary(), grep_matcher};
  grep_argv.insert(grep_argv.end(), args.begin(), args.end());
  const ProcessResult expected = run_process(grep_argv, input, env);
  const std::string expected_err = normalise_grep_stderr(expected.err);
  std::vector<std::string> gpufilter_args;
  if (!matcher.empty()) gpufilter_args.push_back(matcher);
  gpufilter_args.insert(gpufilter_args.end(), args.begin(), args.end());
  std::vector<Knobs> knobs = knob_list.empty() ? rotating_knobs() : knob_list;
  // GPUFILTER_TEST_KNOBS=N runs only the first N knob sets of each case: on a machine where
  // every gpufilter start opens a GPU context, the full sweep (done on PoCL in CI) is slow.
  if (const char* limit = std::getenv("GPUFILTER_TEST_KNOBS"); limit != nullptr && std::atoi(limit) > 0)
    knobs.resize(std::min<std::size_t>(knobs.size(), static_cast<std::size_t>(std::atoi(limit))));
  // Under a sanitizer each case runs one of its knob sets, the next in its list from one
  // case to the next: every case is still compared with grep, and every knob set a test
  // names meets some of its cases, in a third of the time (SweepShare, testutil.hpp).
  static std::size_t turn = 0;
  if (!whole_sweeps() && knobs.size() > 1) knobs = {knobs[turn++ % knobs.size()]};
  bool all_same = true;
  for (const Knobs& k : knobs) {
    const GrepRun actual = run_gpufilter(gpufilter_args, input, k, env);
    // A construct gpufilter refuses by design (docs/grep-compatibility.md) rather than
    // answer unlike grep: exit 2 with its message is the expected answer.
    if (actual.status == 2 && actual.out.empty() &&
        std::any_of(std::begin(kRefusedConstructs), std::end(kRefusedConstructs),
                    [&](const char* refused) { return actual.err.find(refused) != std::string::npos; }))
      continue;
    const bool out_same = actual.out == expected.out;
    const bool status_same = actual.status == expected.status;
    const bool err_same = actual.err == expected_err;
    if (out_same && status_same && err_same) continue;
    all_same = false;
    std::ostringstream m;
    m << "gpufilter differs from grep " << grep_matcher << "\n  args : " << describe_args(args)
      << "\n  knobs: " << k.describe() << "\n";
    if (!env.empty()) m << "  env  : " << describe_args(env) << "\n";
    if (!note.empty()) m << "  note : " << note << "\n";
    if (!input.empty() || args.empty()) m << "  stdin: \"" << escape(input, 600) << "\"\n";
    if (!status_same) m << "  exit status: grep " << expected.status << ", gpufilter " << actual.status << "\n";
    if (!out_same) m << "  stdout " << first_difference(expected.out, actual.out);
    if (!err_same)
      m << "  stderr: grep \"" << escape(expected_err, 600) << "\"\n          gpufilter \"" << escape(actual.err, 600)
        << "\"\n";
    else if (!actual.err.empty())
      m << "  stderr (both): \"" << escape(actual.err, 300) << "\"\n";
    ADD_FAILURE() << m.str();
  }
  return all_same;
}

}  // namespace

bool expect_same(const std::vector<std::string>& args, const std::string& input, const std::vector<Knobs>& knob_list,
                 const std::string& note, const std::vector<std::string>& env) {
  return compare_runs("-F", "-F", args, input, knob_list, note, env);
}

bool expect_same_with(const std::string& matcher, const std::vector<std::string>& args, const std::string& input,
                      const std::vector<Knobs>& knob_list, const std::string& note, const std::vector<std::string>& env) {
  return compare_runs(matcher, matcher, args, input, knob_list, note, env);
}

}  // namespace gpufilter::test
