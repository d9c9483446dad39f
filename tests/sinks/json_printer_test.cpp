// JsonPrinter in memory: rg's JSON Lines, exact bytes and parsed back with nlohmann-json.
// begin before an input's first record, match and context records with the line's
// terminator, text or base64 bytes, end with the input's stats, the summary over all;
// -c, -o and streams (no begin/end).
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gpufilter/sinks/json_printer.hpp"

namespace gpufilter {
namespace {

std::vector<nlohmann::json> parsed(const std::string& text) {
  std::vector<nlohmann::json> records;
  for (std::size_t begin = 0; begin < text.size();) {
    const std::size_t end = text.find('\n', begin);
    records.push_back(nlohmann::json::parse(text.substr(begin, end - begin)));
    begin = end + 1;
  }
  return records;
}

TEST(JsonPrinter, RipgrepRecordsForOneInput) {
  StringWriter w;
  Output out(w);
  JsonPrinter printer(out, {{0, "ERROR"}, {3, "\xff"}}, JsonPrinter::Options{});
  const std::vector<std::uint32_t> ids = {0, 1};
  const std::vector<MatchSpan> spans = {{0, 5}, {10, 11}};
  printer.begin(InputInfo{"app.log"});
  printer.matched(LineMatch{"ERROR \"x\"\t\xff", 345, 12, spans, "app.log", ids, {}});
  printer.context(LineMatch{"next\r", 357, 13, {}, "app.log", {}, {}, false});
  InputSummary summary;
  summary.selected_lines = 1;
  summary.bytes_searched = 400;
  printer.finish(summary);
  printer.flush();
  const std::string text = w.text();
  const std::string expected =
      "{\"type\":\"begin\",\"data\":{\"path\":{\"text\":\"app.log\"}}}\n"
      "{\"type\":\"match\",\"data\":{\"path\":{\"text\":\"app.log\"},\"lines\":{\"bytes\":\"RVJST1IgIngiCf8K\"},"
      "\"line_number\":12,\"absolute_offset\":345,\"submatches\":[{\"match\":{\"text\":\"ERROR\"},\"start\":0,"
      "\"end\":5},{\"match\":{\"bytes\":\"/w==\"},\"start\":10,\"end\":11}],\"patterns\":[{\"id\":0,\"text\":"
      "\"ERROR\"},{\"id\":3,\"text\":\"\xef\xbf\xbd\",\"text_base64\":\"/w==\"}]}}\n"
      "{\"type\":\"context\",\"data\":{\"path\":{\"text\":\"app.log\"},\"lines\":{\"text\":\"next\\r\"},"
      "\"line_number\":13,\"absolute_offset\":357,\"submatches\":[],\"patterns\":[]}}\n";
  ASSERT_EQ(text.substr(0, expected.size()), expected);
  const std::vector<nlohmann::json> r = parsed(text);
  ASSERT_EQ(r.size(), 4u);
  const nlohmann::json& end = r[3];
  EXPECT_EQ(end["type"], "end");
  EXPECT_EQ(end["data"]["path"]["text"], "app.log");
  EXPECT_TRUE(end["data"]["binary_offset"].is_null());
  const nlohmann::json& stats = end["data"]["stats"];
  EXPECT_EQ(stats["searches"], 1);
  EXPECT_EQ(stats["searches_with_match"], 1);
  EXPECT_EQ(stats["bytes_searched"], 400);
  EXPECT_EQ(stats["bytes_printed"], expected.size());  // begin, match and context, not end itself
  EXPECT_EQ(stats["matched_lines"], 1);
  EXPECT_EQ(stats["matches"], 2);
  EXPECT_TRUE(stats["elapsed"].contains("human"));
}

TEST(JsonPrinter, NoBeginOrEndForAnInputWithoutRecordsAndTheSummaryCountsEveryInput) {
  StringWriter w;
  Output out(w);
  JsonPrinter printer(out, {{0, "x"}}, JsonPrinter::Options{});
  printer.begin(InputInfo{"none"});
  InputSummary summary;
  summary.bytes_searched = 10;
  printer.finish(summary);
  const std::string name("a\0b\xff", 4);
  printer.begin(InputInfo{name});
  const std::vector<MatchSpan> spans = {{0, 1}};
  printer.matched(LineMatch{std::string_view("x\0", 2), 0, 1, spans, name, {}, {}});
  summary.selected_lines = 1;
  summary.bytes_searched = 3;
  printer.finish(summary);
  printer.summary(std::chrono::milliseconds(1500));
  printer.flush();
  const std::vector<nlohmann::json> r = parsed(w.text());
  ASSERT_EQ(r.size(), 4u) << w.text();
  EXPECT_EQ(r[0]["type"], "begin");
  EXPECT_EQ(r[0]["data"]["path"]["bytes"], "YQBi/w==");  // not UTF-8
  EXPECT_EQ(r[2]["data"]["binary_offset"], 1);          // the NUL of the line written
  const nlohmann::json& s = r[3];
  const std::string head = "{\"data\":{\"elapsed_total\":{\"human\":\"1.500000s\",\"nanos\":500000000,\"secs\":1},";
  EXPECT_EQ(w.text().substr(w.text().rfind("{\"data\""), head.size()), head);
  EXPECT_EQ(s["type"], "summary");
  EXPECT_EQ(s["data"]["stats"]["searches"], 2);
  EXPECT_EQ(s["data"]["stats"]["searches_with_match"], 1);
  EXPECT_EQ(s["data"]["stats"]["bytes_searched"], 13);
  EXPECT_EQ(s["data"]["stats"]["matches"], 1);
}

TEST(JsonPrinter, CountOnlyMatchingAndStreams) {
  const std::vector<MatchSpan> spans = {{2, 5}, {6, 9}};
  const LineMatch line{"a foo foo", 100, 7, spans, "in", {}, {}};
  {  // -c: begin and end for every input, the count in stats, no line records
    StringWriter w;
    Output out(w);
    JsonPrinter printer(out, {{0, "foo"}}, JsonPrinter::Options{true, false, true});
    printer.begin(InputInfo{"in"});
    printer.matched(line);
    printer.finish(InputSummary{});
    printer.begin(InputInfo{"empty"});
    printer.finish(InputSummary{});
    out.flush();
    const std::vector<nlohmann::json> r = parsed(w.text());
    ASSERT_EQ(r.size(), 4u) << w.text();
    EXPECT_EQ(r[1]["data"]["stats"]["matched_lines"], 1);
    EXPECT_EQ(r[1]["data"]["stats"]["matches"], 2);
    EXPECT_EQ(r[2]["data"]["path"]["text"], "empty");
    EXPECT_EQ(r[3]["data"]["stats"]["matched_lines"], 0);
  }
  {  // -o: a record per part, at the part's offset
    StringWriter w;
    Output out(w);
    JsonPrinter printer(out, {{0, "foo"}}, JsonPrinter::Options{true, true, false});
    printer.begin(InputInfo{"in"});
    printer.matched(line);
    out.flush();
    const std::vector<nlohmann::json> r = parsed(w.text());
    ASSERT_EQ(r.size(), 3u) << w.text();
    EXPECT_EQ(r[2]["data"]["lines"]["text"], "foo");
    EXPECT_EQ(r[2]["data"]["absolute_offset"], 106);
    EXPECT_EQ(r[2]["data"]["submatches"], nlohmann::json::parse(R"([{"match":{"text":"foo"},"start":0,"end":3}])"));
  }
  {  // streams: records only, each naming its stream
    StringWriter w;
    Output out(w);
    JsonPrinter printer(out, {{0, "foo"}}, JsonPrinter::Options{false, false, false});
    printer.begin(InputInfo{"in"});
    printer.matched(line);
    printer.finish(InputSummary{});
    out.flush();
    const std::vector<nlohmann::json> r = parsed(w.text());
    ASSERT_EQ(r.size(), 1u) << w.text();
    EXPECT_EQ(r[0]["type"], "match");
    EXPECT_EQ(r[0]["data"]["lines"]["text"], "a foo foo\n");
  }
}

}  // namespace
}  // namespace gpufilter
