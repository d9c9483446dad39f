// PyRegex against Python's own `re` (python3, which Debian's fail2ban runs on): each
// pattern searched in each subject by both, the match's span and every group's compared
// as byte offsets. ASCII subjects take the pattern's byte-mode twin where its text is
// ASCII, the others the UTF-8 pattern: the patterns are those whose classes, case
// folding and escapes could read an ASCII character otherwise in the two modes (\s and
// Python's \x1c-\x1f, the Kelvin sign and the long s under (?i), \x escapes above 127,
// lookbehind lengths), so that a twin answering unlike Python fails here.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>

#include "gpufilter/fail2ban/pyregex.hpp"

namespace gpufilter::fail2ban {
namespace {

using nlohmann::json;

const std::vector<std::string> kPatterns = {
    R"(\w+)",         R"(\s+)",           R"(\S+\s\S+)",       R"(\d+)",          R"(\W)",
    R"(\b\w\b)",      R"(\B\w+)",         R"((?i)k+)",         R"((?i)S\w)",      R"((?i)\u212a)",
    R"((?i)\u017f)",  R"([^\x00-\x7f]+)", R"([\x80-\xff])",    R"(\x85|\xa0)",    R"((?<=a)b)",
    R"((?<!\w)x)",    R"(.{3}$)",         R"(^\s*(?P<n>\d+)(?P<r>.*?)$)",         R"([[:punct:]]+)",
    R"((?i)[a-z]+)",  R"((?i)MICRO|\xb5)", R"(\x1c|\x1f)",     R"([\s\x1d]+)",    R"((?u)\w+)",
    R"((?P<a>.)(?P=a))", R"(a(?=\s)|b(?!\w))", R"((?i)ss)",      R"(\Z|\A\w)"};

const std::vector<std::string> kSubjects = {
    "kK s S ab12_ -!x",   "a\x1c" "b\x1d" "c\x1f" "d e\tf",  "ab abba  x1 2x",    "MICRO micro 123 4",
    "no match here?",     "x\x7f y\x01z",        "k\xe2\x84\xaa s\xc5\xbf",  "caf\xc3\xa9 \xc2\xb5 \xc2\xa0x",
    "",                   "   42 rest of it",    "[x] (y) {z}: ~`",   "aab b  bb"};

// Python's answer for every pair: null, or [start, end] of group 0 and then of each group
// (null where it took no part), as byte offsets of the UTF-8 subject.
json python_answers() {
  char dir[] = "/tmp/gpufilter-pyregex-XXXXXX";
  if (mkdtemp(dir) == nullptr) return nullptr;
  const std::string input = std::string(dir) + "/input.json", script = std::string(dir) + "/answers.py";
  std::ofstream(input) << json{{"patterns", kPatterns}, {"subjects", kSubjects}}.dump();
  std::ofstream(script) << "import json, re, sys, warnings\n"
                           "warnings.simplefilter('ignore')\n"
                           "d = json.load(open(sys.argv[1]))\n"
                           "def b(s, i): return len(s[:i].encode())\n"
                           "out = []\n"
                           "for p in d['patterns']:\n"
                           "  r = re.compile(p)\n"
                           "  for s in d['subjects']:\n"
                           "    m = r.search(s)\n"
                           "    out.append(None if m is None else [[b(s, m.start(g)), b(s, m.end(g))]\n"
                           "                                       if m.start(g) >= 0 else None for g in range(r.groups + 1)])\n"
                           "print(json.dumps(out))\n";
  std::string text;
  if (FILE* pipe = popen(("python3 " + script + " " + input + " 2>/dev/null").c_str(), "r")) {
    char buf[4096];
    while (std::fgets(buf, sizeof buf, pipe) != nullptr) text += buf;
    pclose(pipe);
  }
  std::remove(input.c_str());
  std::remove(script.c_str());
  rmdir(dir);
  return text.empty() ? json(nullptr) : json::parse(text);
}

TEST(PyRegex, SearchesAsPythonsReOnAsciiAndUtf8Subjects) {
  const json expected = python_answers();
  if (expected.is_null()) GTEST_SKIP() << "python3 is not installed";
  ASSERT_EQ(expected.size(), kPatterns.size() * kSubjects.size());
  std::size_t k = 0;
  for (const std::string& p : kPatterns) {
    const PyRegex re(p);
    for (const std::string& s : kSubjects) {
      const PyRegex::Match m = re.search(s);
      const json& want = expected[k++];
      json got = nullptr;
      if (m) {
        got = json::array();
        for (const PyRegex::Span& g : m.groups)
          got.push_back(g.set() ? json::array({g.start, g.end}) : json(nullptr));
      }
      EXPECT_EQ(got, want) << "pattern " << p << " on \"" << s << "\"";
    }
  }
}

}  // namespace
}  // namespace gpufilter::fail2ban
