// gpufilterd's YAML configuration: a complete file parses into what it says, and every
// kind of mistake is refused with the file, the line and the key in the message.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>

#include "gpufilter/daemon/config.hpp"
#include "gpufilter/core/errors.hpp"
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
  // Mode 0644 whatever the umask: the loader refuses files others may write.
  std::string write(const std::string& name, const std::string& text, mode_t mode = 0644) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    EXPECT_EQ(::chmod(path.c_str(), mode), 0);
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
  // A configuration whose last lines are a webhook output (more keys may follow).
  static std::string head_webhook() {
    return "sources: [{stdin: true}]\nrules: [{name: a, patterns: [x]}]\noutputs:\n  - type: webhook\n"
           "    url: http://127.0.0.1:9/hook\n";
  }
  std::string dir_;
};

TEST_F(Config, CompleteFileParses) {
  write("ssh.txt", "# brute force\nFailed password\n\nInvalid user\n");
  write("hook.token", "s3cret-token\n", 0600);
  ::setenv("HOOK_TOKEN", "t0ken", 1);  // read at parse time, as at the start
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
    retry_backoff: 50ms
    retry_max_backoff: 2s
  - type: webhook
    name: file-hook
    url: http://127.0.0.1:8080/other
    bearer_token_file: hook.token
server: 127.0.0.1:0
reload_endpoint: true
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
  ASSERT_EQ(c.outputs.size(), 4u);
  EXPECT_EQ(c.outputs[0].path, dir_ + "/alerts.jsonl");
  EXPECT_EQ(c.outputs[1].kind, OutputConfig::Kind::kAlertmanager);
  EXPECT_EQ(c.outputs[1].resend_interval, Millis(30000));
  EXPECT_EQ(c.outputs[2].name, "ops-hook");
  EXPECT_EQ(c.outputs[2].bearer_token_env, "HOOK_TOKEN");
  EXPECT_EQ(c.outputs[2].queue, 100u);
  EXPECT_EQ(c.outputs[2].retry_backoff, Millis(50));
  EXPECT_EQ(c.outputs[2].retry_max_backoff, Millis(2000));
  EXPECT_EQ(c.outputs[1].retry_backoff, Millis(200));  // the defaults
  EXPECT_EQ(c.outputs[1].retry_max_backoff, Millis(30000));
  EXPECT_EQ(c.outputs[3].bearer_token_file, dir_ + "/hook.token");
  EXPECT_EQ(c.outputs[3].bearer_token_env, "");
  EXPECT_EQ(read_bearer_token(c.outputs[3]), "s3cret-token");  // the newline trimmed
  EXPECT_TRUE(c.reload_endpoint);
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
  // Security defaults: the operations endpoint on loopback, and read-only.
  EXPECT_EQ(c.server, "127.0.0.1:9464");
  EXPECT_FALSE(c.reload_endpoint);
}

// A journal source's matches read as a jail's journalmatch: shell words (a quoted value
// keeps its spaces), a string's lines ORed, a list's strings joined.
TEST_F(Config, JournalMatchesAreReadAsFail2bansJournalmatch) {
  const DaemonConfig c = load_config(write("c.yaml", R"(
sources:
  - journal: {matches: "_SYSTEMD_UNIT=sshd.service + _COMM=sshd\nMESSAGE='a b'"}
  - journal: {matches: ["_COMM=sshd", "_PID=\"7\""]}
rules: [{name: a, patterns: [x]}]
)"));
  ASSERT_EQ(c.sources.size(), 2u);
  EXPECT_EQ(c.sources[0].journal.matches,
            (std::vector<std::string>{"_SYSTEMD_UNIT=sshd.service", "+", "_COMM=sshd", "+", "MESSAGE=a b"}));
  EXPECT_EQ(c.sources[1].journal.matches, (std::vector<std::string>{"_COMM=sshd", "_PID=7"}));
  EXPECT_NE(error_of("sources: [{journal: {matches: \"_COMM=sshd 'no equals'\"}}]\nrules: [{name: a, patterns: [x]}]\n")
                .find("\"no equals\" is not FIELD=VALUE"),
            std::string::npos);
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
      {"sources:\n  - tail: x\nrules: [{name: a, patterns: [x]}]\n",
       "2: sources[0]: a source needs one of follow, listen, stdin, pcap, interface, kafka or journal"},
      {"rules: [{name: a, patterns: [x]}]\n", "sources: missing"},
      {"sources: [{stdin: true}]\n", "rules: missing"},
      {"sources: [{stdin: true}]\nrules: [{name: a, patterns: [x]}\n", "c.yaml:"},  // YAML syntax
      {"sources: [{stdin: true}]\nrules: {name: a}\n", "rules: expected a non-empty list"},
      {"sources: [{stdin: true}]\nrules: [{name: a, patterns: [x]}]\nextra: 1\n", "3: extra: unknown key"},
      {"sources:\n  - listen: tcp//127.0.0.1:5140\nrules: [{name: a, patterns: [x]}]\n",
       "2: sources[0].listen: tcp//127.0.0.1:5140: expected tcp://HOST:PORT"},
      {"sources:\n  - listen: tcp://127.0.0.1:99999\nrules: [{name: a, patterns: [x]}]\n",
       "sources[0].listen: tcp://127.0.0.1:99999: the port must be"},
      {head + "  - name: a\n    patterns: [x]\noutputs:\n  - type: webhook\n    url: http://h/\n    retry_backoff: 0ms\n",
       "outputs[0].retry_backoff: must be at least 1ms"},
      {head + "  - name: a\n    patterns: [x]\noutputs:\n  - type: jsonl\n    retry_backoff: 5s\n    retry_max_backoff: 1s\n",
       "outputs[0].retry_max_backoff: retry_max_backoff must not be below retry_backoff"},
      {head + "  - name: a\n    patterns: [x]\nreload_endpoint: sometimes\n", "reload_endpoint: \"sometimes\" is not"},
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
  try {
    load_config(dir_ + "/nope.yaml");
    FAIL() << "loaded a missing file";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), dir_ + "/nope.yaml: cannot read: No such file or directory");
  }
}

// A FIFO (or a device) in a file's place is refused at once: opening a FIFO to read waits
// for a writer, which left a reload stuck for good (and SIGTERM with it).
TEST_F(Config, FifoIsRefusedWithoutWaitingForAWriter) {
  const std::string fifo = dir_ + "/fifo.yaml";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  try {
    load_config(fifo);
    FAIL() << "loaded a FIFO";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), fifo + ": cannot read: it is not a regular file");
  }
}

// ---------------------------------------------------------------------------------------
// Security: file permissions (like ssh's StrictModes) and secrets

const std::string kMinimal = "sources: [{stdin: true}]\nrules: [{name: a, patterns: [x]}]\n";

// A configuration that group or others may write is refused, naming the file, the mode
// and the fix; read-only for them (or private) is fine.
TEST_F(Config, AFileOthersMayWriteIsRefusedWithTheFix) {
  for (const mode_t mode : {0664, 0646, 0666, 0620, 0602}) {
    const std::string path = write("c.yaml", kMinimal, mode);
    char octal[8];
    std::snprintf(octal, sizeof octal, "%04o", static_cast<unsigned>(mode));
    try {
      load_config(path);
      ADD_FAILURE() << "loaded a file of mode " << octal;
    } catch (const ConfigError& e) {
      EXPECT_EQ(std::string(e.what()), path + ": refused: group or others may write it (mode " + octal +
                                           "); fix: chmod go-w " + path);
    }
  }
  for (const mode_t mode : {0644, 0600, 0400, 0444, 0640}) {
    EXPECT_NO_THROW(load_config(write("c.yaml", kMinimal, mode))) << std::oct << mode;
  }
}

TEST_F(Config, APatternsFileOthersMayWriteIsRefused) {
  write("p.txt", "Failed password\n", 0664);
  const std::string message =
      error_of("sources: [{stdin: true}]\nrules:\n  - name: a\n    patterns_file: p.txt\n");
  EXPECT_NE(message.find(dir_ + "/c.yaml:4: rules[0].patterns_file: " + dir_ +
                         "/p.txt: refused: group or others may write it (mode 0664); fix: chmod go-w " + dir_ + "/p.txt"),
            std::string::npos)
      << message;
  write("p.txt", "Failed password\n", 0644);
  EXPECT_EQ(error_of("sources: [{stdin: true}]\nrules:\n  - name: a\n    patterns_file: p.txt\n"), "");
}

// Owned by someone else (not root, not us): refused, as that user could change it. Making
// such a file takes root (chown); as another user there is no file to test with.
TEST_F(Config, AFileOwnedByAnotherUserIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a file to another user";
  const std::string path = write("c.yaml", kMinimal, 0644);
  write("p.txt", "x\n", 0644);
  write("t.token", "tok\n", 0600);
  for (const std::string& file : {path, dir_ + "/p.txt", dir_ + "/t.token"}) {
    ASSERT_EQ(::chown(file.c_str(), 65534, 65534), 0);
  }
  try {
    load_config(path);
    FAIL() << "loaded a file owned by uid 65534";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), path + ": refused: it is owned by uid 65534, neither root nor the user gpufilterd "
                                            "runs as (uid 0), who could change it; fix: chown 0 " + path);
  }
  ASSERT_EQ(::chown(path.c_str(), 0, 0), 0);
  EXPECT_NE(error_of("sources: [{stdin: true}]\nrules:\n  - name: a\n    patterns_file: p.txt\n")
                .find("p.txt: refused: it is owned by uid 65534"),
            std::string::npos);
  OutputConfig hook;
  hook.kind = OutputConfig::Kind::kWebhook;
  hook.bearer_token_file = dir_ + "/t.token";
  try {
    read_bearer_token(hook);
    FAIL() << "read a token file owned by uid 65534";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("t.token: refused: it is owned by uid 65534"), std::string::npos) << e.what();
  }
}

// A token file must be private (no access for group or others at all), holds one token
// (the trailing newline is not part of it), and no message ever quotes the token.
TEST_F(Config, TokenFilesArePrivateAndNeverQuoted) {
  const std::string secret = "tok-9f8e7d6c5b4a";
  const auto config = [&](const std::string& file) {
    return head_webhook() + "    bearer_token_file: " + file + "\n";
  };
  for (const mode_t mode : {0640, 0604, 0644, 0660, 0610}) {
    write("t.token", secret + "\n", mode);
    char octal[8];
    std::snprintf(octal, sizeof octal, "%04o", static_cast<unsigned>(mode));
    const std::string message = error_of(config("t.token"));
    EXPECT_NE(message.find("outputs[0].bearer_token_file: " + dir_ + "/t.token: refused: group or others may read or "
                           "write this secret (mode " + octal + "); fix: chmod 600 " + dir_ + "/t.token"),
              std::string::npos)
        << message;
    EXPECT_EQ(message.find(secret), std::string::npos) << message;
  }
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"\n", "t.token: holds no token"},
      {"", "t.token: holds no token"},
      {secret + " more\n", "t.token: the token holds a space or a control character"},
      {secret + "\nsecond-line\n", "t.token: the token holds a space or a control character"},
      {"Bearer\t" + secret, "t.token: the token holds a space or a control character"},
  };
  for (const auto& [content, expected] : bad) {
    write("t.token", content, 0600);
    const std::string message = error_of(config("t.token"));
    EXPECT_NE(message.find(expected), std::string::npos) << message;
    EXPECT_EQ(message.find(secret), std::string::npos) << message;
  }
  EXPECT_NE(error_of(config("absent.token")).find("absent.token: cannot read: No such file or directory"),
            std::string::npos);
  for (const std::string& content : {secret, secret + "\n", secret + "\r\n", secret + "\n\n"}) {
    write("t.token", content, 0600);
    const DaemonConfig c = load_config(write("c.yaml", config("t.token")));
    EXPECT_EQ(read_bearer_token(c.outputs[0]), secret);
  }
  write("t.token", secret, 0400);
  EXPECT_EQ(read_bearer_token(load_config(write("c.yaml", config("t.token"))).outputs[0]), secret);
}

TEST_F(Config, TokensFromTheEnvironment) {
  const std::string secret = "env-tok-0a1b2c3d";
  ::setenv("GPUFILTERD_TEST_TOKEN", secret.c_str(), 1);
  const DaemonConfig c = load_config(write("c.yaml", head_webhook() + "    bearer_token_env: GPUFILTERD_TEST_TOKEN\n"));
  EXPECT_EQ(read_bearer_token(c.outputs[0]), secret);
  ::setenv("GPUFILTERD_TEST_TOKEN", "", 1);
  try {
    read_bearer_token(c.outputs[0]);
    FAIL() << "an empty variable gave a token";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "output webhook: bearer_token_env GPUFILTERD_TEST_TOKEN is not set (or empty)");
  }
  ::unsetenv("GPUFILTERD_TEST_TOKEN");
  EXPECT_THROW(read_bearer_token(c.outputs[0]), ConfigError);
  // A value that is no variable name may be the token pasted in the wrong place: refused,
  // and not quoted.
  const std::string message = error_of(head_webhook() + "    bearer_token_env: \"" + secret + "-x.y\"\n");
  EXPECT_NE(message.find("outputs[0].bearer_token_env: is not the name of an environment variable"), std::string::npos)
      << message;
  EXPECT_EQ(message.find(secret), std::string::npos) << message;
}

// A secret written into the configuration itself is refused with advice, wherever it is,
// and the value is never quoted back.
TEST_F(Config, InlineSecretsAreRefusedWithoutQuotingThem) {
  const std::string secret = "inline-9a8b7c6d";
  const std::string advice =
      "secrets are not accepted in the configuration file: put the token in a file only gpufilterd can read "
      "(bearer_token_file: PATH, mode 0600) or in the environment (bearer_token_env: VARIABLE)";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {head_webhook() + "    bearer_token: " + secret + "\n", "6: outputs[0].bearer_token: "},
      {head_webhook() + "    token: " + secret + "\n", "outputs[0].token: "},
      {head_webhook() + "    Authorization: \"Bearer " + secret + "\"\n", "outputs[0].Authorization: "},
      {head_webhook() + "    password: " + secret + "\n", "outputs[0].password: "},
      {head_webhook() + "    api_key: " + secret + "\n", "outputs[0].api_key: "},
      {kMinimal + "secret: " + secret + "\n", "3: secret: "},
  };
  for (const auto& [yaml, where] : cases) {
    const std::string message = error_of(yaml);
    EXPECT_NE(message.find(where + advice), std::string::npos) << message;
    EXPECT_EQ(message.find(secret), std::string::npos) << message;
  }
  // Token keys belong to webhooks, and one source at a time.
  EXPECT_NE(error_of(kMinimal + "outputs:\n  - type: jsonl\n    bearer_token_env: X\n")
                .find("outputs[0].bearer_token_env: only a webhook output sends a token"),
            std::string::npos);
  write("t.token", secret, 0600);
  EXPECT_NE(error_of(head_webhook() + "    bearer_token_env: X\n    bearer_token_file: t.token\n")
                .find("set bearer_token_env or bearer_token_file, not both"),
            std::string::npos);
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

// from_chars reads "inf", "nan" and "1e300" as doubles, whose conversion to milliseconds
// was undefined behaviour (UBSan: "inf is outside the range of representable values"),
// as daemon_config_fuzz reports on tests/fuzz/regressions/daemon_config_fuzz/.
TEST(Duration, NotFiniteOrHugeIsNoDuration) {
  for (const char* text : {"inf", "infs", "nan", "NAN", "1e300", "1e300ms", "9e15", "36501d", "876025h"})
    EXPECT_FALSE(parse_duration(text).has_value()) << text;
  EXPECT_EQ(parse_duration("36500d"), Millis(36500LL * 86'400'000));
  EXPECT_EQ(parse_duration("0"), Millis(0));
  // A finite duration past 100 years is "out of range", not "not a duration".
  for (const char* text : {"1e300", "36501d", "10000000000000s"}) EXPECT_TRUE(duration_too_long(text)) << text;
  for (const char* text : {"inf", "nan", "36500d", "5m", "x"}) EXPECT_FALSE(duration_too_long(text)) << text;
}

// yaml-cpp keeps both of two equal keys and answers the first: a second `rules:` was
// silently ignored. A repeated key is refused at any depth, naming it and both lines.
TEST_F(Config, DuplicateKeysAreRefusedAnywhere) {
  const std::string head = "sources: [{stdin: true}]\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {head + "rules: [{name: a, patterns: [x]}]\nrules: [{name: b, patterns: [y]}]\n",
       "c.yaml:3: rules: duplicate key (first on line 2)"},
      {head + "rules:\n  - name: a\n    patterns: [x]\n    patterns: [y]\n",
       "c.yaml:5: rules[0].patterns: duplicate key (first on line 4)"},
      {head + "rules:\n  - name: a\n    name: b\n    patterns: [x]\n",
       "c.yaml:4: rules[0].name: duplicate key (first on line 3)"},
      {head + "rules:\n  - name: a\n    patterns: [x]\n    invert: true\n    invert: false\n",
       "c.yaml:6: rules[0].invert: duplicate key (first on line 5)"},
      {head + "rules: [{name: a, patterns: [x]}]\nserver: 127.0.0.1:1\nserver: 127.0.0.1:2\n",
       "c.yaml:4: server: duplicate key (first on line 3)"},
      {head + "rules:\n  - name: a\n    patterns: [x]\n    threshold:\n      count: 2\n      window: 1m\n"
              "      count: 3\n",
       "c.yaml:8: rules[0].threshold.count: duplicate key (first on line 6)"},
      {head + "rules:\n  - name: a\n    patterns: [x]\n    labels: {team: a, team: b}\n",
       "c.yaml:5: rules[0].labels.team: duplicate key (first on line 5)"},
      {head + "rules: [{name: a, patterns: [x]}]\noutputs:\n  - {type: jsonl, path: a.jsonl, path: b.jsonl}\n",
       "c.yaml:4: outputs[0].path: duplicate key (first on line 4)"},
  };
  for (const auto& [yaml, expected] : cases) EXPECT_NE(error_of(yaml).find(expected), std::string::npos) << error_of(yaml);
}

// Aliases expanded without a bound: 2,000 aliases of a 100 KB string (a 108 KB file) took
// 201 MB to check, and nested aliases of lists grow exponentially. Both are refused before
// anything is converted, quickly and in little memory, naming the file and why.
std::string laughs_of_strings() {  // 2,000 aliases of a 100 KB string
  std::string yaml = "sources: [{stdin: true}]\nbig: &big " + std::string(100'000, 'x') + "\nrules:\n";
  yaml += "  - name: a\n    patterns:\n";
  for (int i = 0; i < 2000; ++i) yaml += "      - *big\n";
  return yaml;
}
std::string laughs_of_lists() {  // 10 levels of lists of 10 aliases: 10^10 scalars
  std::string yaml = "sources: [{stdin: true}]\nrules: [{name: a, patterns: [x]}]\nl0: &l0 [lol]\n";
  for (int level = 1; level <= 10; ++level) {
    const std::string name = std::to_string(level), prev = std::to_string(level - 1);
    yaml.append("l").append(name).append(": &l").append(name).append(" [");
    for (int i = 0; i < 10; ++i) yaml.append(i > 0 ? ", *l" : "*l").append(prev);
    yaml += "]\n";
  }
  return yaml;
}

TEST_F(Config, AliasBombsAreRefusedQuicklyNamingTheFile) {
  const auto started = std::chrono::steady_clock::now();
  const std::string strings = error_of(laughs_of_strings());
  EXPECT_NE(strings.find(dir_ + "/c.yaml: aliases expand to more than 64 MiB of text (limit"), std::string::npos)
      << strings;
  const std::string lists = error_of(laughs_of_lists());
  EXPECT_NE(lists.find(dir_ + "/c.yaml: aliases expand to more than"), std::string::npos) << lists;
  // parse_config (the text already read) names the path it is given.
  try {
    parse_config(laughs_of_lists(), "/etc/gpufilterd.yaml");
    ADD_FAILURE() << "parsed";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("/etc/gpufilterd.yaml: aliases expand to more than", 0), 0u) << e.what();
  }
  // Many aliases of a small node: refused by their number before the text adds up.
  std::string many = kMinimal + "x: &x y\nz: [";
  for (int i = 0; i < 100'001; ++i) many += i == 0 ? "*x" : ",*x";
  EXPECT_NE(error_of(many + "]\n").find("c.yaml: more than 100000 alias uses (limit"), std::string::npos);
  // An alias of a node from inside it: yaml-cpp builds a cycle, which every walk would follow.
  EXPECT_NE(error_of(kMinimal + "x: &x [a, *x]\n").find("c.yaml:3: an alias of a node from inside that node"),
            std::string::npos)
      << error_of(kMinimal + "x: &x [a, *x]\n");
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(2));
}

// Before the bound, `gpufilterd --check` of laughs_of_strings() peaked at 201 MB. Measured
// against a child that loads a minimal file: what the process holds anyway (a sanitizer's
// shadow memory, the libraries) is not the bomb's.
TEST_F(Config, AliasBombsAreRefusedInLittleMemory) {
  const auto peak_kib = [](const std::string& path, int expected_exit) -> long {
    const pid_t pid = ::fork();
    if (pid < 0) return -1;
    if (pid == 0) {
      try {
        load_config(path);
      } catch (const ConfigError&) {
        ::_exit(2);
      }
      ::_exit(0);
    }
    int status = 0;
    rusage usage{};
    if (::wait4(pid, &status, 0, &usage) != pid || !WIFEXITED(status)) return -1;
    EXPECT_EQ(WEXITSTATUS(status), expected_exit) << path;
    return usage.ru_maxrss;
  };
  const long baseline = peak_kib(write("minimal.yaml", kMinimal), 0);
  const long bomb = peak_kib(write("c.yaml", laughs_of_strings()), 2);
  ASSERT_GT(baseline, 0);
  ASSERT_GT(bomb, 0);
  EXPECT_LT(bomb - baseline, 48 * 1024) << "KiB over the baseline of " << baseline;  // far below 201 MB
}

// Aliases a real configuration uses (shared labels, patterns, a threshold) still load, and
// read as what they name.
TEST_F(Config, ConfigurationsWithAFewAliasesLoad) {
  const DaemonConfig c = load_config(write("c.yaml", R"(
sources: [{stdin: true}]
rules:
  - name: a
    patterns: &common [timeout, refused]
    labels: &team {team: infra}
    threshold: &burst {count: 3, window: 1m}
  - name: b
    patterns: *common
    labels: *team
    threshold: *burst
  - name: c
    labels: {owner: &name y}
    patterns: [x, *name]
)"));
  ASSERT_EQ(c.rules.size(), 3u);
  EXPECT_EQ(c.rules[1].patterns, c.rules[0].patterns);
  EXPECT_EQ(c.rules[1].labels, c.rules[0].labels);
  EXPECT_EQ(c.rules[2].patterns, (std::vector<std::string>{"x", "y"}));
}

// What the outputs refuse when they are made is refused by the validation itself, so that
// --check and a reload refuse it too, with the file and line.
TEST_F(Config, OutputUrlsAreHttpOrHttpsWithAHostAndAPort) {
  const std::string head = "sources: [{stdin: true}]\nrules: [{name: a, patterns: [x]}]\noutputs:\n";
  for (const std::string url : {"ftp://127.0.0.1/", "http://h:99999/", "http://h:-1/", "http://h:80abc/",
                                "http://:80/", "http://[::1:9/x", "http://h/a b", "https://:443/"}) {
    for (const std::string type : {"webhook", "alertmanager"}) {
      const std::string e = error_of(head + "  - type: " + type + "\n    url: \"" + url + "\"\n");
      EXPECT_NE(e.find("c.yaml:5: outputs[0].url: URL \"" + url + "\": "), std::string::npos) << e;
    }
  }
  const std::string crlf = error_of(head + "  - type: webhook\n    url: \"http://h/\\r\\nX: y\"\n");
  EXPECT_NE(crlf.find("URL \"http://h/\\x0d\\x0aX: y\": contains a space or a control character"),
            std::string::npos) << crlf;
  EXPECT_EQ(error_of(head + "  - type: webhook\n    url: https://h/\n"), "");
  EXPECT_EQ(error_of(head + "  - type: webhook\n    url: http://[::1]:9/x?y\n"), "");
}

// tls: belongs to an https:// alertmanager or webhook; its files are read at validation,
// so --check and a reload name a missing or unusable one with the line.
TEST_F(Config, TlsBlocksAreCheckedWithTheirFiles) {
  const std::string head = "sources: [{stdin: true}]\nrules: [{name: a, patterns: [x]}]\noutputs:\n";
  const auto with = [&](const std::string& url, const std::string& tls) {
    return error_of(head + "  - type: webhook\n    url: " + url + "\n    tls: " + tls + "\n");
  };
  write("not-pem.txt", "hello\n");
  EXPECT_NE(with("http://h/", "{verify_hostname: false}").find("outputs[0].tls: is for an https:// url"),
            std::string::npos);
  EXPECT_NE(with("https://h/", "{ca_file: missing.pem}").find("tls: ca_file " + dir_ + "/missing.pem" +
                                                               ": No such file or directory"),
            std::string::npos) << with("https://h/", "{ca_file: missing.pem}");
  EXPECT_NE(with("https://h/", "{ca_file: not-pem.txt}").find("not PEM CA certificates"), std::string::npos)
      << with("https://h/", "{ca_file: not-pem.txt}");
  EXPECT_NE(with("https://h/", "{cert_file: not-pem.txt}").find("cert_file and key_file go together"),
            std::string::npos);
  EXPECT_NE(with("https://h/", "{verify_hostname: maybe}").find("is not true or false"), std::string::npos);
  EXPECT_NE(with("https://h/", "{ca: x}").find("unknown key"), std::string::npos);
  EXPECT_NE(error_of(head + "  - type: jsonl\n    tls: {verify_hostname: false}\n").find("only an alertmanager or webhook"),
            std::string::npos);
  EXPECT_EQ(with("https://h/", "{verify_hostname: false}"), "");
}

// A kafka source: what librdkafka refuses is named with the file and line; secrets belong
// in secrets_file (private), never in settings, and are never quoted.
TEST_F(Config, MultilineIsForFollowStdinAndKafkaWithRegexesThatCompile) {
  const std::string tail = "rules: [{name: a, patterns: [x]}]\n";
  EXPECT_EQ(error_of("sources:\n  - stdin: true\n    multiline: {start: '^\\S', max_lines: 50, timeout: 2s}\n" + tail), "");
  std::string e = error_of("sources:\n  - listen: tcp://127.0.0.1:0\n    multiline: {start: '^x'}\n" + tail);
  EXPECT_NE(e.find("c.yaml:3: sources[0].multiline: joins the lines of follow, stdin and kafka sources only"),
            std::string::npos) << e;
  e = error_of("sources:\n  - stdin: true\n    multiline: {start: '(unclosed'}\n" + tail);
  EXPECT_NE(e.find("sources[0].multiline: does not compile: "), std::string::npos) << e;
  e = error_of("sources:\n  - stdin: true\n    multiline: {max_lines: 5}\n" + tail);
  EXPECT_NE(e.find("needs start or continuation"), std::string::npos) << e;
  e = error_of("sources:\n  - stdin: true\n    multiline: {start: x, max_lines: 0}\n" + tail);
  EXPECT_NE(e.find("out of range"), std::string::npos) << e;
}

TEST_F(Config, JsonFormatAndFieldRules) {
  const std::string rules = "rules: [{name: a, field: message, patterns: [x], labels: {s: \"{{json.service}}\"}}]\n";
  EXPECT_EQ(error_of("sources:\n  - stdin: true\n    format: json\n    json_max_bytes: 65536\n" + rules), "");
  std::string e = error_of("sources:\n  - listen: tcp://127.0.0.1:0\n    format: json\n" + rules);
  EXPECT_NE(e.find("sources[0].format: is for follow, stdin and kafka sources only"), std::string::npos) << e;
  e = error_of("sources:\n  - stdin: true\n    format: xml\n" + rules);
  EXPECT_NE(e.find("\"xml\" is not json or text"), std::string::npos) << e;
  e = error_of("sources:\n  - stdin: true\n    json_max_bytes: 10\n" + rules);
  EXPECT_NE(e.find("applies to format: json"), std::string::npos) << e;
  e = error_of("sources: [{stdin: true}]\nrules: [{name: a, field: '', patterns: [x]}]\n");
  EXPECT_NE(e.find("names no field"), std::string::npos) << e;
}

// {{kafka.key}} and the other record fields need no regex; a misspelt one is refused.
TEST_F(Config, RulesMayReadKafkaRecordFields) {
  const std::string head = "sources: [{stdin: true}]\nrules:\n";
  const DaemonConfig c = load_config(write("c.yaml", head + "  - name: a\n    patterns: [x]\n"
                                                     "    labels: {tenant: \"{{kafka.key}}\", h: \"{{kafka.header.trace-id}}\"}\n"
                                                     "    threshold: {group_by: {capture: kafka.partition}}\n"));
  EXPECT_TRUE(reads_kafka_fields(c.rules));
  EXPECT_FALSE(reads_kafka_fields(load_config(write("c.yaml", head + "  - {name: a, patterns: [x]}\n")).rules));
  const std::string e = error_of(head + "  - {name: a, patterns: [x], labels: {k: \"{{kafka.keys}}\"}}\n");
  EXPECT_NE(e.find("\"kafka.keys\" is no Kafka record field"), std::string::npos) << e;
}

TEST_F(Config, KafkaSourcesAreCheckedByLibrdkafkaAndKeepSecretsOut) {
  const std::string tail = "rules: [{name: a, patterns: [x]}]\n";
  const auto with = [&](const std::string& kafka) { return error_of("sources:\n  - kafka: " + kafka + "\n" + tail); };
  EXPECT_EQ(with("{brokers: \"k1:9092\", topics: logs, group_id: g}"), "");
  EXPECT_EQ(with("{brokers: [k1:9092, k2:9092], topics: [a, b], group_id: g, settings: {fetch.max.bytes: \"1048576\"}}"),
            "");
  std::string e = with("{brokers: k:9092, topics: logs, group_id: g, settings: {session.timeout.ms: soon}}");
  EXPECT_NE(e.find("c.yaml:2: sources[0].kafka: settings: session.timeout.ms: "), std::string::npos) << e;
  e = with("{brokers: k:9092, topics: logs, group_id: g, settings: {no.such.thing: \"1\"}}");
  EXPECT_NE(e.find("no.such.thing"), std::string::npos) << e;
  e = with("{brokers: k:9092, topics: logs}");
  EXPECT_NE(e.find("needs a group_id"), std::string::npos) << e;
  e = with("{topics: logs, group_id: g}");
  EXPECT_NE(e.find("needs brokers"), std::string::npos) << e;
  e = with("{brokers: k:9092, topics: logs, group_id: g, partitions: 3}");
  EXPECT_NE(e.find("unknown key"), std::string::npos) << e;
  e = with("{brokers: k:9092, topics: logs, group_id: g, settings: {sasl.password: hunter2-secret}}");
  EXPECT_NE(e.find("sources[0].kafka.settings.sasl.password: secrets are not accepted"), std::string::npos) << e;
  EXPECT_EQ(e.find("hunter2-secret"), std::string::npos) << e;
  write("kafka.secrets", "# SASL\nsasl.username=svc\nsasl.password=hunter2-secret\n", 0644);
  e = with("{brokers: k:9092, topics: logs, group_id: g, secrets_file: kafka.secrets}");
  EXPECT_NE(e.find("chmod 600"), std::string::npos) << e;
  EXPECT_EQ(e.find("hunter2-secret"), std::string::npos) << e;
  write("kafka.secrets", "# SASL\nsasl.username=svc\nsasl.password=hunter2-secret\n", 0600);
  const DaemonConfig c = load_config(
      write("c.yaml", "sources:\n  - kafka: {brokers: k:9092, topics: logs, group_id: g, secrets_file: kafka.secrets}\n" + tail));
  const auto secrets = kafka_secrets(c.sources[0].kafka);
  ASSERT_EQ(secrets.size(), 2u);
  EXPECT_EQ(secrets[1], (std::pair<std::string, std::string>{"sasl.password", "hunter2-secret"}));
  write("kafka.secrets", "session.timeout.ms=hunter2-secret\n", 0600);
  e = with("{brokers: k:9092, topics: logs, group_id: g, secrets_file: kafka.secrets}");
  EXPECT_NE(e.find("secrets_file: session.timeout.ms: refused by librdkafka"), std::string::npos) << e;
  EXPECT_EQ(e.find("hunter2-secret"), std::string::npos) << e;
  e = with("{brokers: k:9092, topics: logs, group_id: g, settings: {ssl.key.pem: PRIVATE}}");
  EXPECT_NE(e.find("secrets are not accepted"), std::string::npos) << e;
  // A kafka output: the producer's properties are checked the same way.
  const std::string head = "sources: [{stdin: true}]\nrules: [{name: a, patterns: [x]}]\noutputs:\n";
  EXPECT_EQ(error_of(head + "  - {type: kafka, brokers: k:9092, topic: alerts, key_label: host, queue: 1000}\n"), "");
  e = error_of(head + "  - {type: kafka, brokers: k:9092}\n");
  EXPECT_NE(e.find("outputs[0]: a kafka output needs a topic"), std::string::npos) << e;
  // A fail2ban_filter rule: the filter is loaded at validation; grouped by host.
  const DaemonConfig jail = load_config(write(
      "j.yaml", "sources: [{stdin: true}]\nrules:\n  - {name: ssh, fail2ban_filter: sshd, fail2ban_options: {mode: aggressive}}\n"));
  EXPECT_EQ(jail.rules[0].fail2ban_filter, "sshd");
  EXPECT_EQ(jail.rules[0].fail2ban_options.at("mode"), "aggressive");
  EXPECT_EQ(jail.rules[0].threshold.capture, "host");
  e = error_of("sources: [{stdin: true}]\nrules:\n  - {name: ssh, fail2ban_filter: no-such-filter}\n");
  EXPECT_NE(e.find("rules[0].fail2ban_filter: "), std::string::npos) << e;
  EXPECT_NE(e.find("no-such-filter"), std::string::npos) << e;
  e = error_of("sources: [{stdin: true}]\nrules:\n  - {name: ssh, fail2ban_filter: sshd, patterns: [x]}\n");
  EXPECT_NE(e.find("rules[0].patterns: a fail2ban_filter rule takes its matching from the filter"), std::string::npos) << e;
  e = error_of("sources: [{stdin: true}]\nfail2ban_dir: /nonexistent\nrules:\n  - {name: ssh, fail2ban_filter: sshd}\n");
  EXPECT_NE(e.find("/nonexistent"), std::string::npos) << e;
  // What it sends: alerts (default), records, or both; only records have a record_key.
  const DaemonConfig both = load_config(write(
      "o.yaml", head + "  - {type: kafka, brokers: k:9092, topic: t, send: [alerts, records], record_key: '{{u}}'}\n"));
  EXPECT_TRUE(both.outputs[0].send_alerts && both.outputs[0].send_records);
  EXPECT_EQ(both.outputs[0].record_key, "{{u}}");
  const DaemonConfig records = load_config(write("o.yaml", head + "  - {type: kafka, brokers: k:9092, topic: t, send: records}\n"));
  EXPECT_TRUE(!records.outputs[0].send_alerts && records.outputs[0].send_records);
  e = error_of(head + "  - {type: kafka, brokers: k:9092, topic: t, send: lines}\n");
  EXPECT_NE(e.find("outputs[0].send: \"lines\" is neither alerts nor records"), std::string::npos) << e;
  e = error_of(head + "  - {type: kafka, brokers: k:9092, topic: t, send: []}\n");
  EXPECT_NE(e.find("outputs[0].send: a kafka output sends alerts, records or both"), std::string::npos) << e;
  e = error_of(head + "  - {type: kafka, brokers: k:9092, topic: t, record_key: x}\n");
  EXPECT_NE(e.find("outputs[0].record_key: only records have a record_key"), std::string::npos) << e;
  e = error_of(head + "  - {type: kafka, brokers: k:9092, topic: alerts, settings: {acks: some}}\n");
  EXPECT_NE(e.find("outputs[0]: settings: acks: "), std::string::npos) << e;
  e = error_of(head + "  - {type: kafka, brokers: k:9092, topic: alerts, url: http://x:1/}\n");
  EXPECT_NE(e.find("unknown key"), std::string::npos) << e;
  e = error_of(head + "  - {type: kafka, brokers: k:9092, topic: a, settings: {sasl.password: hunter2-secret}}\n");
  EXPECT_NE(e.find("secrets are not accepted"), std::string::npos) << e;
  EXPECT_EQ(e.find("hunter2-secret"), std::string::npos) << e;
  write("kafka.secrets", "sasl.password hunter2-secret\n", 0600);
  e = with("{brokers: k:9092, topics: logs, group_id: g, secrets_file: kafka.secrets}");
  EXPECT_NE(e.find("kafka.secrets:1: expected key=value"), std::string::npos) << e;
  EXPECT_EQ(e.find("hunter2-secret"), std::string::npos) << e;
}

// An alerts file or a state file whose directory cannot exist (a file in its way) or that
// is a directory is refused by the validation, not at the first write.
TEST_F(Config, FilesThatCannotBeCreatedAreRefused) {
  write("blocker", "a file\n");
  const std::string head = "sources: [{stdin: true}]\nrules: [{name: a, patterns: [x]}]\n";
  std::string e = error_of(head + "outputs: [{type: jsonl, path: blocker/sub/alerts.jsonl}]\n");
  EXPECT_NE(e.find("outputs[0].path: " + dir_ + "/blocker/sub/alerts.jsonl: cannot be created: " + dir_ +
                   "/blocker is not a directory"),
            std::string::npos) << e;
  e = error_of(head + "outputs: [{type: jsonl, path: " + dir_ + "}]\n");
  EXPECT_NE(e.find("outputs[0].path: " + dir_ + ": is a directory"), std::string::npos) << e;
  e = error_of("sources: [{follow: a.log, state: blocker/x.state}]\nrules: [{name: a, patterns: [x]}]\n");
  EXPECT_NE(e.find("sources[0].state: " + dir_ + "/blocker/x.state: cannot be created"), std::string::npos) << e;
  EXPECT_EQ(error_of(head + "outputs: [{type: jsonl, path: new/dir/alerts.jsonl}]\n"), "");
  e = error_of(head + "server: \"127.0.0.1:99999\"\n");
  EXPECT_NE(e.find("c.yaml:3: server: server address 127.0.0.1:99999: "), std::string::npos) << e;
}

}  // namespace

namespace {

// regex:, regex_file:, syntax: and time: load; what they get wrong is named with the key
// and the reason, PCRE2's or grep's message for a regex that does not compile.
TEST_F(Config, RegexRules) {
  write("ssh.re", "# comment\nFailed password for .* from <HOST> port \\d+\n");
  const std::string loads = R"(sources: [{stdin: true}]
rules:
  - name: ssh
    regex: 'Failed password for .* from <HOST> port \d+ ssh2\s*$'
    threshold: {count: 3, window: 1m, group_by: {capture: host}}
    labels: {address: "{{host}}"}
  - name: ere
    regex: ['(disk|fan) (full|stopped)', 'overheat(ed|ing)']
    syntax: extended
  - name: file
    regex_file: ssh.re
  - name: replayed
    regex: '^(?P<ts>\w{3} [ \d]\d \d\d:\d\d:\d\d) .*Failed password'
    time: {capture: ts, format: "%b %d %H:%M:%S"}
)";
  ASSERT_EQ(error_of(loads), "");
  const DaemonConfig c = load_config(dir_ + "/c.yaml");
  ASSERT_EQ(c.rules.size(), 4u);
  ASSERT_TRUE(c.rules[3].event_time.has_value());
  EXPECT_EQ(c.rules[3].event_time->format, "%b %d %H:%M:%S");
  EXPECT_EQ(c.rules[0].syntax, regex::Syntax::kPerl);
  EXPECT_EQ(c.rules[0].threshold.group_by, ThresholdConfig::GroupBy::kCapture);
  EXPECT_EQ(c.rules[0].threshold.capture, "host");
  EXPECT_EQ(c.rules[1].regexes.size(), 2u);
  EXPECT_EQ(c.rules[1].syntax, regex::Syntax::kExtended);
  EXPECT_EQ(c.rules[2].regexes, std::vector<std::string>{"Failed password for .* from <HOST> port \\d+"});

  const std::string head = "sources: [{stdin: true}]\nrules:\n  - name: a\n";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {head + "    regex: 'a(b'\n", "rules[0].regex: \"a(b\" does not compile: missing closing parenthesis"},
      {head + "    regex: 'a(b'\n    syntax: extended\n", "does not compile: Unmatched ( or \\("},
      {head + "    regex: x\n    patterns: [y]\n", "has patterns and regexes"},
      {head + "    regex: 'from <HOST>'\n    syntax: basic\n", "<HOST> needs syntax: perl"},
      {head + "    regex: 'from (?P<ip>\\S+)'\n    threshold: {group_by: {capture: host}}\n",
       "has no group named \"host\""},
      {head + "    regex: 'from <HOST>'\n    labels: {who: \"{{user}}\"}\n", "has no group named \"user\""},
      {head + "    patterns: [x]\n    threshold: {group_by: {capture: host}}\n", "names the group \"host\" but has no regex"},
      {head + "    regex: 'from <HOST>'\n    invert: true\n    threshold: {group_by: {capture: host}}\n",
       "an invert rule matches lines its regexes do not"},
      {head + "    regex: x\n    syntax: python\n", "\"python\" is not perl, extended or basic"},
      {head + "    patterns: [x]\n    syntax: perl\n", "applies to regex and regex_file"},
      {head + "    regex: '(?P<ts>\\S+) x'\n    time: {capture: ts}\n", "needs capture (a named group) and format"},
      {head + "    regex: 'from <HOST> and <HOST>'\n", "does not compile: two named subpatterns have the same name"},
  };
  for (const auto& [yaml, expected] : bad) {
    const std::string message = error_of(yaml);
    EXPECT_NE(message.find(expected), std::string::npos) << "expected '" << expected << "' in: " << message << "\n" << yaml;
  }
}

// pcap: and interface: sources: the file is resolved and opened (its header read) and the
// BPF filter compiled when the configuration is read, so --check and a reload refuse a
// missing file, something that is no capture, or a filter libpcap rejects, with the file,
// the line and the key.
TEST_F(Config, CaptureSources) {
  const std::string smtp = test::corpus_path("pcap/smtp.pcap");
  ASSERT_EQ(::symlink(smtp.c_str(), (dir_ + "/smtp.pcap").c_str()), 0);
  const std::string rules = "rules: [{name: a, patterns: [x]}]\n";
  ASSERT_EQ(error_of("sources:\n  - pcap: smtp.pcap\n    bpf: tcp port 25\n    stream: true\n"
                     "  - interface: lo\n    bpf: udp\n  - pcap: " + smtp + "\n" + rules),
            "");
  const DaemonConfig c = load_config(dir_ + "/c.yaml");
  ASSERT_EQ(c.sources.size(), 3u);
  EXPECT_EQ(c.sources[0].kind, SourceConfig::Kind::kPcap);
  EXPECT_EQ(c.sources[0].capture, dir_ + "/smtp.pcap");
  EXPECT_EQ(c.sources[0].bpf, "tcp port 25");
  EXPECT_TRUE(c.sources[0].stream);
  EXPECT_EQ(c.sources[1].kind, SourceConfig::Kind::kInterface);
  EXPECT_EQ(c.sources[1].capture, "lo");
  EXPECT_EQ(c.sources[1].bpf, "udp");
  EXPECT_FALSE(c.sources[1].stream);
  EXPECT_EQ(c.sources[2].capture, smtp);
  EXPECT_TRUE(c.sources[2].bpf.empty());

  write("text.pcap", "not a capture\n");
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"sources:\n  - pcap: missing.pcap\n",
       "c.yaml:2: sources[0].pcap: " + dir_ + "/missing.pcap: No such file or directory"},
      {"sources:\n  - pcap: smtp.pcap\n    bpf: tcp prot 25\n", "c.yaml:3: sources[0].bpf: tcp prot 25: "},
      {"sources:\n  - interface: lo\n    bpf: \"port 99999\"\n", "c.yaml:3: sources[0].bpf: port 99999: "},
      {"sources:\n  - pcap: text.pcap\n", "c.yaml:2: sources[0].pcap: " + dir_ + "/text.pcap: "},
      {"sources:\n  - pcap: " + dir_ + "\n", "c.yaml:2: sources[0].pcap: " + dir_ + ": Is a directory"},
      {"sources:\n  - pcap: \"-\"\n", "c.yaml:2: sources[0].pcap: standard input is not read as a capture"},
      {"sources:\n  - pcap: \"\"\n", "c.yaml:2: sources[0].pcap: names no file"},
      {"sources:\n  - interface: \"\"\n", "c.yaml:2: sources[0].interface: names no interface"},
      {"sources:\n  - pcap: smtp.pcap\n    stream: maybe\n", "c.yaml:3: sources[0].stream: \"maybe\" is not true or false"},
      {"sources:\n  - pcap: smtp.pcap\n    state: x.state\n", "c.yaml:3: sources[0].state: unknown key"},
      {"sources:\n  - pcap: smtp.pcap\n    interface: lo\n", "c.yaml:3: sources[0].interface: unknown key"},
      {"sources:\n  - interface: lo\n    from_start: true\n", "c.yaml:3: sources[0].from_start: unknown key"},
  };
  for (const auto& [yaml, expected] : bad) {
    const std::string message = error_of(yaml + rules);
    EXPECT_NE(message.find(dir_ + "/" + expected), std::string::npos)
        << "expected '" << expected << "' in: " << message << "\n" << yaml;
  }
}

}  // namespace
