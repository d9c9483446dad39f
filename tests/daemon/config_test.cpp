// gpufilterd's YAML configuration: a complete file parses into what it says, and every
// kind of mistake is refused with the file, the line and the key in the message.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "gpufilter/daemon/config.hpp"
#include "gpufilter/pipeline/errors.hpp"
#include "testutil/testutil.hpp"

namespace {

using namespace gpufilter;
using namespace gpufilter::daemon;
using namespace std::chrono_literals;

class Config : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/gpufilterd-config-XXXXXX";
    dir_ = ::mkdtemp(pattern);
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  std::string write(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  // The ConfigError message for `yaml`, or "" when it loads.
  std::string error_of(const std::string& yaml) {
    try {
      load_config(write("c.yaml", yaml));
      return "";
    } catch (const ConfigError& e) {
      return e.what();
    }
  }
  std::string dir_;
};

TEST_F(Config, CompleteFileParses) {
  write("ssh.txt", "# brute force\nFailed password\n\nInvalid user\n");
  const DaemonConfig c = load_config(write("c.yaml", R"(
sources:
  - follow: [auth.log, /var/log/secure]
    state: follow.state
    from_start: true
    poll_interval: 250ms
  - listen: tcp://127.0.0.1:5140
  - stdin: true
rules:
  - name: ssh-bruteforce
    patterns_file: ssh.txt
    threshold: {count: 5, window: 1m, group_by: {field_after: "from "}}
    severity: critical
    labels: {team: security}
    annotations: {summary: "SSH brute force"}
    cooldown: 5m
    resolve_after: 10m
  - name: kernel
    patterns: ["Kernel panic", oops]
    ignore_case: yes
    word: true
  - name: quiet
    patterns: heartbeat
    invert: true
    threshold: {count: 2, window: 30, group_by: source}
outputs:
  - type: jsonl
    path: alerts.jsonl
  - type: alertmanager
    url: http://127.0.0.1:9093
    resend_interval: 30s
  - type: webhook
    name: ops-hook
    url: http://127.0.0.1:8080/hook
    bearer_token_env: HOOK_TOKEN
    queue: 100
server: 127.0.0.1:0
log_format: json
engine: cpu
max_line_bytes: 65536
drain_timeout: 3s
)"));
  ASSERT_EQ(c.sources.size(), 3u);
  EXPECT_EQ(c.sources[0].kind, SourceConfig::Kind::kFollow);
  EXPECT_EQ(c.sources[0].paths, (std::vector<std::string>{dir_ + "/auth.log", "/var/log/secure"}));
  EXPECT_EQ(c.sources[0].state, dir_ + "/follow.state");
  EXPECT_TRUE(c.sources[0].from_start);
  EXPECT_EQ(c.sources[0].poll_interval, Millis(250));
  EXPECT_EQ(c.sources[1].url, "tcp://127.0.0.1:5140");
  EXPECT_EQ(c.sources[2].kind, SourceConfig::Kind::kStdin);
  ASSERT_EQ(c.rules.size(), 3u);
  EXPECT_EQ(c.rules[0].patterns, (std::vector<std::string>{"Failed password", "Invalid user"}));
  EXPECT_EQ(c.rules[0].threshold.count, 5u);
  EXPECT_EQ(c.rules[0].threshold.window, Millis(60000));
  EXPECT_EQ(c.rules[0].threshold.group_by, ThresholdConfig::GroupBy::kField);
  EXPECT_EQ(c.rules[0].threshold.field_after, "from ");
  EXPECT_EQ(c.rules[0].severity, "critical");
  EXPECT_EQ(c.rules[0].labels.at("team"), "security");
  EXPECT_EQ(c.rules[0].cooldown, Millis(300000));
  EXPECT_EQ(c.rules[0].resolve_after, Millis(600000));
  EXPECT_TRUE(c.rules[1].ignore_case);
  EXPECT_TRUE(c.rules[1].word);
  EXPECT_EQ(c.rules[1].cooldown, Millis(60000));  // the default
  EXPECT_TRUE(c.rules[2].invert);
  EXPECT_EQ(c.rules[2].patterns, std::vector<std::string>{"heartbeat"});
  EXPECT_EQ(c.rules[2].threshold.window, Millis(30000));
  EXPECT_EQ(c.rules[2].threshold.group_by, ThresholdConfig::GroupBy::kSource);
  ASSERT_EQ(c.outputs.size(), 3u);
  EXPECT_EQ(c.outputs[0].path, dir_ + "/alerts.jsonl");
  EXPECT_EQ(c.outputs[1].kind, OutputConfig::Kind::kAlertmanager);
  EXPECT_EQ(c.outputs[1].resend_interval, Millis(30000));
  EXPECT_EQ(c.outputs[2].name, "ops-hook");
  EXPECT_EQ(c.outputs[2].bearer_token_env, "HOOK_TOKEN");
  EXPECT_EQ(c.outputs[2].queue, 100u);
  EXPECT_EQ(c.server, "127.0.0.1:0");
  EXPECT_EQ(c.log_format, Log::Format::kJson);
  EXPECT_EQ(c.engine, "cpu");
  EXPECT_EQ(c.max_line_bytes, 65536u);
  EXPECT_EQ(c.drain_timeout, Millis(3000));
  EXPECT_EQ(c.generator_url, "");  // main fills in the bound server's address
}

TEST_F(Config, DefaultsToJsonLinesOnStandardOutput) {
  const DaemonConfig c = load_config(write("c.yaml", "sources: [{stdin: true}]\nrules: [{name: a, patterns: [x]}]\n"));
  ASSERT_EQ(c.outputs.size(), 1u);
  EXPECT_EQ(c.outputs[0].kind, OutputConfig::Kind::kJsonl);
  EXPECT_EQ(c.outputs[0].path, "-");
  EXPECT_EQ(c.server, "127.0.0.1:9464");
}

// Each mistake: the message names the file, the line and the key.
TEST_F(Config, MistakesNameFileLineAndKey) {
  const std::string head = "sources:\n  - stdin: true\nrules:\n";
  struct Case {
    std::string yaml;
    std::string expected;  // a part of the message after "FILE:"
  };
  const std::vector<Case> cases = {
      {head + "  - name: a\n    patterns: [x]\n    colour: red\n", "6: rules[0].colour: unknown key"},
      {head + "  - name: a\n    patterns: [x]\n    threshold: {count: 5, window: 5x}\n",
       "rules[0].threshold.window: \"5x\" is not a duration"},
      {head + "  - name: a\n    patterns: [x]\n    threshold: {count: many}\n",
       "rules[0].threshold.count: \"many\" is not a whole number"},
      {head + "  - name: a\n    patterns: [x]\n    threshold: {count: 3}\n", "a count above 1 needs a window"},
      {head + "  - name: a\n    patterns: [x]\n    ignore_case: maybe\n",
       "6: rules[0].ignore_case: \"maybe\" is not true or false"},
      {head + "  - name: a\n    patterns: [\"\"]\n", "an empty pattern would match every line"},
      {head + "  - name: a\n", "rule \"a\" has no patterns"},
      {head + "  - patterns: [x]\n", "4: rules[0]: a rule needs a name"},
      {head + "  - name: a\n    patterns: [x]\n  - name: a\n    patterns: [y]\n", "is used twice"},
      {head + "  - name: a\n    patterns: [x]\n    patterns_file: missing.txt\n", "cannot read"},
      {head + "  - name: a\n    patterns: [x]\n    labels: [a, b]\n", "rules[0].labels: expected a mapping"},
      {head + "  - name: a\n    patterns: [x]\noutputs:\n  - type: pager\n", "outputs[0].type: \"pager\" is not"},
      {head + "  - name: a\n    patterns: [x]\noutputs:\n  - type: webhook\n", "a webhook output needs a url"},
      {head + "  - name: a\n    patterns: [x]\nengine: quantum\n", "engine: \"quantum\" is not auto, gpu or cpu"},
      {"sources:\n  - tail: x\nrules: [{name: a, patterns: [x]}]\n", "2: sources[0]: a source needs one of"},
      {"rules: [{name: a, patterns: [x]}]\n", "sources: missing"},
      {"sources: [{stdin: true}]\n", "rules: missing"},
      {"sources: [{stdin: true}]\nrules: [{name: a, patterns: [x]}\n", "c.yaml:"},  // YAML syntax
      {"sources: [{stdin: true}]\nrules: {name: a}\n", "rules: expected a non-empty list"},
      {"sources: [{stdin: true}]\nrules: [{name: a, patterns: [x]}]\nextra: 1\n", "3: extra: unknown key"},
  };
  for (const Case& c : cases) {
    const std::string message = error_of(c.yaml);
    EXPECT_NE(message.find(dir_ + "/c.yaml:"), std::string::npos) << "no file in: " << message << "\n" << c.yaml;
    EXPECT_NE(message.find(c.expected), std::string::npos) << "expected '" << c.expected << "' in: " << message
                                                           << "\n" << c.yaml;
  }
  EXPECT_NE(error_of("").find("expected a mapping"), std::string::npos);
}

TEST_F(Config, MissingFileIsAnError) {
  EXPECT_THROW(load_config(dir_ + "/nope.yaml"), ConfigError);
}

TEST(Duration, Units) {
  EXPECT_EQ(parse_duration("250ms"), Millis(250));
  EXPECT_EQ(parse_duration("30s"), Millis(30000));
  EXPECT_EQ(parse_duration("30"), Millis(30000));
  EXPECT_EQ(parse_duration("1.5s"), Millis(1500));
  EXPECT_EQ(parse_duration("5m"), Millis(300000));
  EXPECT_EQ(parse_duration("2h"), Millis(7200000));
  EXPECT_EQ(parse_duration("1d"), Millis(86400000));
  EXPECT_FALSE(parse_duration("").has_value());
  EXPECT_FALSE(parse_duration("-1s").has_value());
  EXPECT_FALSE(parse_duration("5x").has_value());
  EXPECT_FALSE(parse_duration("s").has_value());
}

}  // namespace
