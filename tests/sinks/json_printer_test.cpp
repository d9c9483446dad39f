// JsonPrinter in memory: one match and one context record, exact bytes and parsed back
// with nlohmann-json; a pattern and a line that are not UTF-8 carry their base64.
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gpufilter/sinks/json_printer.hpp"

namespace gpufilter {
namespace {

TEST(JsonPrinter, OneRecordPerLine) {
  StringWriter w;
  Output out(w);
  JsonPrinter printer(out, {{0, "ERROR"}, {3, "\xff"}});
  const std::vector<std::uint32_t> ids = {0, 1};
  printer.matched(LineMatch{"ERROR \"x\"\t\xff", 345, 12, {}, "app.log", ids, {}});
  printer.context(LineMatch{"next", 357, 13, {}, "app.log", {}, {}});
  printer.flush();
  const std::string expected =
      "{\"type\":\"match\",\"source\":\"app.log\",\"line_number\":12,\"offset\":345,\"patterns\":["
      "{\"id\":0,\"text\":\"ERROR\"},{\"id\":3,\"text\":\"\xef\xbf\xbd\",\"text_base64\":\"/w==\"}],"
      "\"line\":\"ERROR \\\"x\\\"\\t\xef\xbf\xbd\",\"line_base64\":\"RVJST1IgIngiCf8=\"}\n"
      "{\"type\":\"context\",\"source\":\"app.log\",\"line_number\":13,\"offset\":357,\"patterns\":[],"
      "\"line\":\"next\"}\n";
  EXPECT_EQ(w.text(), expected);

  const std::string first = w.text().substr(0, w.text().find('\n'));
  const nlohmann::json j = nlohmann::json::parse(first);
  EXPECT_EQ(j["type"], "match");
  EXPECT_EQ(j["line_number"], 12);
  EXPECT_EQ(j["offset"], 345);
  ASSERT_EQ(j["patterns"].size(), 2u);
  EXPECT_EQ(j["patterns"][1]["id"], 3);
  EXPECT_EQ(j["patterns"][1]["text_base64"], "/w==");
  EXPECT_EQ(j["line"], "ERROR \"x\"\t\xef\xbf\xbd");
}

}  // namespace
}  // namespace gpufilter
