// --json against GNU grep: every record is parsed by a real JSON parser (nlohmann::json)
// and its match records checked field by field against `grep -n -b` on the same input
// (path, line number, byte offset, bytes of the line with its terminator) and against a
// plain search for which given patterns occur in the line (ids, texts, -i, -w). Lines hold
// invalid UTF-8, control bytes, NUL, CR and quotes; their exact bytes must come back from
// rg's "text" or "bytes". rg_json_test.cpp compares the records with rg's own.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "differential.hpp"
#include "json_records.hpp"
#include "testutil/testutil.hpp"

namespace gpufilter::test {
namespace {

using json = nlohmann::json;

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  for (std::size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1)
    lines.push_back(text.substr(start, nl - start));
  if (start < text.size()) lines.push_back(text.substr(start));
  return lines;
}

bool is_word(unsigned char c) { return std::isalnum(c) != 0 || c == '_'; }

std::string fold(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
  return s;
}

// The ids of the given patterns that occur in `line` (first id of duplicates).
std::set<std::size_t> expected_ids(const std::string& line, const std::vector<std::string>& patterns, bool icase,
                                   bool word) {
  std::set<std::size_t> ids;
  std::set<std::string> seen;
  const std::string hay = icase ? fold(line) : line;
  for (std::size_t i = 0; i < patterns.size(); ++i) {
    const std::string needle = icase ? fold(patterns[i]) : patterns[i];
    if (needle.empty() || !seen.insert(needle).second) continue;
    for (std::size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1)) {
      const bool left_ok = at == 0 || !is_word(static_cast<unsigned char>(hay[at - 1]));
      const std::size_t end = at + needle.size();
      const bool right_ok = end == hay.size() || !is_word(static_cast<unsigned char>(hay[end]));
      if (!word || (left_ok && right_ok)) {
        ids.insert(i);
        break;
      }
    }
  }
  return ids;
}

struct Case {
  std::vector<std::string> flags;
  std::vector<std::string> patterns;
};

// Runs gpufilter --json and grep -n -b with `flags` over the files and compares.
void check_against_grep(const Case& c, const std::vector<std::string>& files, const TempDir& dir,
                        const std::string& note) {
  const std::string pattern_path = dir.write("patterns", pattern_file(c.patterns));
  std::vector<std::string> args = c.flags;
  args.insert(args.end(), {"-f", pattern_path});
  std::vector<std::string> grep_args = args;
  grep_args.insert(grep_args.end(), {"-n", "-b", "-a", "-H"});
  grep_args.insert(grep_args.end(), files.begin(), files.end());
  std::vector<std::string> json_args = args;
  json_args.push_back("--json");
  json_args.insert(json_args.end(), files.begin(), files.end());
  const GrepRun grep = run_grep(grep_args);
  const GrepRun ours = run_gpufilter(json_args);
  ASSERT_EQ(ours.status, grep.status) << note << "\n" << ours.err;
  std::vector<json> records;
  ASSERT_NO_THROW(records = records_of(json_records(ours.out), "match")) << note << ": " << escape(ours.out);
  // grep -H -n -b: "FILE:LINE:OFFSET:TEXT" for selected lines (no '-' context lines here).
  const std::vector<std::string> expected = split_lines(grep.out);
  ASSERT_EQ(records.size(), expected.size()) << note;
  const bool icase = std::find(c.flags.begin(), c.flags.end(), "-i") != c.flags.end();
  const bool word = std::find(c.flags.begin(), c.flags.end(), "-w") != c.flags.end();
  const bool invert = std::find(c.flags.begin(), c.flags.end(), "-v") != c.flags.end();
  for (std::size_t i = 0; i < records.size(); ++i) {
    const json& r = records[i].at("data");
    const std::string& g = expected[i];
    std::size_t file_index = 0;
    while (file_index < files.size() && g.rfind(files[file_index] + ":", 0) != 0) ++file_index;
    ASSERT_LT(file_index, files.size()) << g;
    std::size_t p = files[file_index].size() + 1;
    const std::size_t c1 = g.find(':', p);
    const std::size_t c2 = g.find(':', c1 + 1);
    const std::uint64_t number = std::stoull(g.substr(p, c1 - p));
    const std::uint64_t offset = std::stoull(g.substr(c1 + 1, c2 - c1 - 1));
    const std::string text = g.substr(c2 + 1);
    EXPECT_EQ(r.at("path").at("text"), files[file_index]) << note;
    EXPECT_EQ(r.at("line_number").get<std::uint64_t>(), number) << note;
    EXPECT_EQ(r.at("absolute_offset").get<std::uint64_t>(), offset) << note;
    // The exact bytes with the '\n', which only an unterminated last line lacks.
    const bool last = offset + text.size() == std::filesystem::file_size(files[file_index]);
    EXPECT_EQ(data_bytes(r.at("lines")), last ? text : text + "\n") << note << " record " << i;
    // The submatches are the line's bytes at their places, none under -v.
    if (invert) {
      EXPECT_TRUE(r.at("submatches").empty()) << note;
    }
    for (const json& m : r.at("submatches")) {
      const std::size_t start = m.at("start").get<std::size_t>();
      EXPECT_EQ(data_bytes(m.at("match")), text.substr(start, m.at("end").get<std::size_t>() - start)) << note;
    }
    // Which patterns matched.
    std::set<std::size_t> ids;
    for (const json& m : r.at("patterns")) {
      const std::size_t id = m.at("id").get<std::size_t>();
      ids.insert(id);
      ASSERT_LT(id, c.patterns.size());
      const std::string given = m.contains("text_base64") ? base64_decode(m.at("text_base64").get<std::string>())
                                                          : m.at("text").get<std::string>();
      EXPECT_EQ(given, c.patterns[id]) << note;
    }
    const std::set<std::size_t> want = invert ? std::set<std::size_t>{} : expected_ids(text, c.patterns, icase, word);
    EXPECT_EQ(ids, want) << note << " line: " << escape(text);
  }
}

TEST(Json, RecordsAgreeWithGrepOnRandomInputs) {
  std::mt19937 rng(90);
  TempDir dir;
  const std::string alphabet = "abAB _\"\\\t\r\x01\x7f\xc3\xa9\xff\xe2\x82";
  for (int round = 0; round < 12; ++round) {
    std::vector<std::string> files;
    for (int f = 0; f < 1 + round % 3; ++f) {
      std::string text;
      const std::size_t lines = 1 + rng() % 200;
      for (std::size_t i = 0; i < lines; ++i) text += random_string(rng, alphabet, rng() % 40) + "\n";
      if (round % 4 == 3) text.pop_back();  // no final newline
      files.push_back(dir.write("in" + std::to_string(f) + ".log", text));
    }
    std::vector<std::string> patterns;
    for (std::size_t i = 0, n = 1 + rng() % 6; i < n; ++i) patterns.push_back(random_string(rng, "abAB _\xc3\xa9\"", 1 + rng() % 3));
    if (round % 3 == 0) patterns.push_back(patterns.front());  // a duplicate: listed once, first id
    static const std::vector<std::vector<std::string>> flag_sets = {{}, {"-i"}, {"-w"}, {"-v"}, {"-i", "-w"}, {"-m", "3"}};
    for (const auto& flags : flag_sets)
      check_against_grep(Case{flags, patterns}, files, dir, "round " + std::to_string(round));
  }
}

TEST(Json, CorpusLogAgreesWithGrep) {
  TempDir dir;
  const std::string path = corpus_path("loghub/OpenSSH_2k.log");
  check_against_grep(Case{{}, {"Failed password", "Invalid user", "root", "Failed"}}, {path}, dir, "OpenSSH");
}

TEST(Json, ContextLinesAndEscapes) {
  TempDir dir;
  const std::string file = dir.write("x.log", std::string("before\nhit \"q\" \\ \x01\tend\nafter\n\xff\xfe hit\n"));
  const GrepRun r = run_gpufilter({"--json", "-A", "1", "hit", file});
  ASSERT_EQ(r.status, 0) << r.err;
  const std::vector<json> records = json_records(r.out);
  ASSERT_EQ(records.size(), 6u) << r.out;  // begin, 3 lines, end, summary
  EXPECT_EQ(records[0].at("type"), "begin");
  const json& a = records[1].at("data");
  const json& b = records[2].at("data");
  const json& c = records[3].at("data");
  EXPECT_EQ(a.at("lines").at("text"), "hit \"q\" \\ \x01\tend\n");
  EXPECT_EQ(split_lines(r.out)[1].find('\t'), std::string::npos);  // escaped, not raw
  EXPECT_EQ(records[2].at("type"), "context");
  EXPECT_EQ(b.at("lines").at("text"), "after\n");
  EXPECT_EQ(b.at("line_number"), 3);
  EXPECT_EQ(records[3].at("type"), "match");
  EXPECT_EQ(base64_decode(c.at("lines").at("bytes").get<std::string>()), "\xff\xfe hit\n");
  EXPECT_EQ(c.at("patterns"), json::parse(R"([{"id":0,"text":"hit"}])"));
  EXPECT_EQ(records[4].at("type"), "end");
  EXPECT_EQ(records[5].at("type"), "summary");
}

// -v with only the empty pattern selects nothing but still reads (rg prints its summary;
// -c its begin and end); the empty pattern is never listed, under -w either (whose joined
// walk selects the line for all patterns together: each is listed only where it occurs);
// the matching lines printed as context after -m's last carry their submatches.
TEST(Json, RecordsWhereNothingOrEverythingMatches) {
  TempDir dir;
  const std::string file = dir.write("t.txt", "a foo b\nnext\n");
  for (const char* locale : {"LC_ALL=C", "LC_ALL=C.UTF-8"}) {
    GrepRun r = run_gpufilter({"--json", "-v", "-e", "", file}, {}, {}, {locale});
    EXPECT_EQ(r.status, 1) << r.err;
    std::vector<json> records = json_records(r.out);
    ASSERT_EQ(records.size(), 1u) << r.out;
    EXPECT_EQ(records[0].at("type"), "summary");
    r = run_gpufilter({"--json", "-c", "-v", "-e", "", file}, {}, {}, {locale});
    records = json_records(r.out);
    ASSERT_EQ(records.size(), 3u) << r.out;
    EXPECT_EQ(records[1].at("data").at("stats").at("matched_lines"), 0);

    const std::string words = dir.write("w.txt", "foobar baz\n\n");
    r = run_gpufilter({"--json", "-w", "-e", "foo", "-e", "baz", "-e", "", words}, {}, {}, {locale});
    records = records_of(json_records(r.out), "match");
    ASSERT_EQ(records.size(), 2u) << locale << r.out;
    EXPECT_EQ(records[0].at("data").at("patterns"), json::parse(R"([{"id":1,"text":"baz"}])")) << locale;
    EXPECT_EQ(records[1].at("data").at("patterns"), json::parse("[]")) << locale;

    const std::string twice = dir.write("m.txt", "foo 1\nfoo 2\nbar\n");
    r = run_gpufilter({"--json", "-m1", "-A1", "foo", twice}, {}, {}, {locale});
    records = records_of(json_records(r.out), "context");
    ASSERT_EQ(records.size(), 1u) << r.out;
    EXPECT_EQ(records[0].at("data").at("submatches"),
              json::parse(R"([{"match":{"text":"foo"},"start":0,"end":3}])")) << locale;
  }
}

TEST(Json, RefusedWithFileLists) {
  for (const char* flag : {"-l", "-L"}) {
    const GrepRun r = run_gpufilter({"--json", flag, "x"}, "x\n");
    EXPECT_EQ(r.status, 2) << flag;
    EXPECT_NE(r.err.find("--json"), std::string::npos) << r.err;
  }
}

// -i in UTF-8: a line found through a pattern's case variants beyond ASCII names the
// pattern, once, in the order given, however many of its variants the line holds.
TEST(Json, CaseVariantsInUtf8NameTheirPatternOnce) {
  const GrepRun r = run_gpufilter({"--json", "-F", "-i", "-e", "sshd", "-e", "\xc5\xbf", "-e", "x"},
                                  "\xc5\xbfshd Sshd\nx \xc5\xbf\n", {}, {"LC_ALL=C.UTF-8"});
  const std::vector<json> matches = records_of(json_records(r.out), "match");
  ASSERT_EQ(matches.size(), 2u) << r.out;
  EXPECT_EQ(matches[0].at("data").at("patterns").dump(), R"([{"id":0,"text":"sshd"},{"id":1,"text":"ſ"}])");
  EXPECT_EQ(matches[1].at("data").at("patterns").dump(), R"([{"id":1,"text":"ſ"},{"id":2,"text":"x"}])");
}

// -c: an end record for every input, its count in stats.matched_lines (grep -c's); -o: a
// match record per part, at the part's offset (grep -o -b's), its text the part.
TEST(Json, CountAndOnlyMatchingAgreeWithGrep) {
  TempDir dir;
  const std::string log = corpus_path("loghub/OpenSSH_2k.log");
  const std::string other = dir.write("other.log", "root root\nnone\nx root\r\nroot");
  const std::string empty = dir.write("empty.log", "nothing here\n");
  const std::vector<std::string> files = {log, other, empty};
  for (const std::vector<std::string>& flags : std::vector<std::vector<std::string>>{{}, {"-v"}, {"-m", "5"}}) {
    std::vector<std::string> args = flags;
    args.insert(args.end(), {"-e", "root", "-e", "Failed"});
    args.insert(args.end(), files.begin(), files.end());
    std::vector<std::string> count_args = {"--json", "-c"};
    count_args.insert(count_args.end(), args.begin(), args.end());
    const GrepRun ours = run_gpufilter(count_args);
    std::vector<std::string> grep_args = {"-c", "-H"};
    grep_args.insert(grep_args.end(), args.begin(), args.end());
    std::string counts;
    for (const json& end : records_of(json_records(ours.out), "end"))
      counts += end.at("data").at("path").at("text").get<std::string>() + ":" +
                std::to_string(end.at("data").at("stats").at("matched_lines").get<std::uint64_t>()) + "\n";
    EXPECT_EQ(counts, run_grep(grep_args).out) << describe_args(count_args);
    EXPECT_TRUE(records_of(json_records(ours.out), "match").empty());
  }
  std::vector<std::string> only_args = {"--json", "-o", "-e", "root", "-e", "Failed"};
  only_args.insert(only_args.end(), files.begin(), files.end());
  std::string parts;
  for (const json& m : records_of(json_records(run_gpufilter(only_args).out), "match")) {
    const json& d = m.at("data");
    EXPECT_EQ(d.at("submatches").size(), 1u);
    parts += d.at("path").at("text").get<std::string>() + ":" + std::to_string(d.at("line_number").get<std::uint64_t>()) +
             ":" + std::to_string(d.at("absolute_offset").get<std::uint64_t>()) + ":" + data_bytes(d.at("lines")) + "\n";
  }
  std::vector<std::string> grep_args = {"-o", "-n", "-b", "-H", "-e", "root", "-e", "Failed"};
  grep_args.insert(grep_args.end(), files.begin(), files.end());
  EXPECT_EQ(parts, run_grep(grep_args).out);
}

}  // namespace
}  // namespace gpufilter::test
