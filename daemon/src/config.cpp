#include "gpufilter/daemon/config.hpp"
#include "fail2ban_jails.hpp"
#include "gpufilter/fail2ban/filter.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>
#include <vector>

#include "gpufilter/core/errors.hpp"
#include "gpufilter/daemon/outputs.hpp"
#include "gpufilter/regex/capture_regex.hpp"
#include "gpufilter/sources/capture_source.hpp"
#include "gpufilter/sources/file_trust.hpp"
#include "gpufilter/sources/kafka_source.hpp"
#include "gpufilter/sources/listener.hpp"

namespace gpufilter::daemon {
namespace {

// Bounds on what is read into memory: far above any real file, far below trouble.
constexpr std::size_t kConfigLimit = 16u << 20;
constexpr std::size_t kPatternsFileLimit = 256u << 20;
constexpr std::size_t kTokenFileLimit = 64u << 10;

// A key that would hold a secret inline ("bearer_token: ...", "password: ..."). Such a key
// is refused with advice rather than as merely unknown: a secret in the configuration is
// in every copy, backup and review of it. The value is never quoted in the message.
bool looks_like_secret(const std::string& key) {
  std::string k;
  for (const char c : key) k += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* word : {"token", "password", "passwd", "secret", "authorization", "api_key", "apikey", "credential",
                           "bearer"}) {
    if (k.find(word) != std::string::npos) return true;
  }
  return false;
}

// POSIX's portable variable names: letters, digits and '_', not starting with a digit.
bool is_variable_name(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

// A node with where it came from: every error names the file, the line and the key.
struct At {
  const std::string& file;
  YAML::Node node;
  std::string key;  // "rules[2].threshold.window"

  [[noreturn]] void fail(const std::string& why) const {
    const int line = node.Mark().line >= 0 ? node.Mark().line + 1 : 0;
    throw ConfigError(file + ":" + std::to_string(line) + ": " + (key.empty() ? "" : key + ": ") + why);
  }
  At child(const std::string& name) const { return At{file, node[name], key.empty() ? name : key + "." + name}; }
  At item(std::size_t i) const { return At{file, node[i], key + "[" + std::to_string(i) + "]"}; }

  void require_map(const std::set<std::string>& allowed) const {
    if (!node.IsMap()) fail("expected a mapping (key: value lines)");
    for (const auto& kv : node) {
      const std::string name = kv.first.as<std::string>();
      if (allowed.count(name) == 0) {
        std::string list;
        for (const std::string& a : allowed) list += (list.empty() ? "" : ", ") + a;
        const At at{file, kv.first, key.empty() ? name : key + "." + name};
        if (looks_like_secret(name)) {
          at.fail("secrets are not accepted in the configuration file: put the token in a file only gpufilterd "
                  "can read (bearer_token_file: PATH, mode 0600) or in the environment (bearer_token_env: VARIABLE)");
        }
        at.fail("unknown key (expected one of: " + list + ")");
      }
    }
  }
  bool has(const std::string& name) const { return node.IsMap() && node[name].IsDefined() && !node[name].IsNull(); }

  std::string text() const {
    if (!node.IsScalar()) fail("expected a single value");
    return node.Scalar();
  }
  bool boolean() const {
    const std::string t = text();
    if (t == "true" || t == "yes" || t == "on") return true;
    if (t == "false" || t == "no" || t == "off") return false;
    fail("\"" + t + "\" is not true or false");
  }
  std::uint64_t number(std::uint64_t min, std::uint64_t max) const {
    const std::string t = text();
    std::uint64_t v = 0;
    const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (ec != std::errc() || p != t.data() + t.size()) fail("\"" + t + "\" is not a whole number");
    if (v < min || v > max) fail(t + " is out of range (" + std::to_string(min) + " to " + std::to_string(max) + ")");
    return v;
  }
  Millis duration() const {
    const std::string t = text();
    const std::optional<Millis> d = parse_duration(t);
    if (!d && duration_too_long(t)) fail(t + " is out of range (at most 36500d, 100 years)");
    if (!d) fail("\"" + t + "\" is not a duration (like 30s, 5m, 250ms, or a number of seconds)");
    return *d;
  }
  std::vector<std::string> strings() const {
    std::vector<std::string> v;
    if (node.IsScalar()) {
      v.push_back(node.Scalar());
      return v;
    }
    if (!node.IsSequence()) fail("expected a list of strings");
    for (std::size_t i = 0; i < node.size(); ++i) v.push_back(item(i).text());
    return v;
  }
  std::map<std::string, std::string> string_map() const {
    if (!node.IsMap()) fail("expected a mapping of names to strings");
    std::map<std::string, std::string> m;
    for (const auto& kv : node) m[kv.first.as<std::string>()] = child(kv.first.as<std::string>()).text();
    return m;
  }
};

// yaml-cpp keeps both of two equal keys and node[key] answers the first, so a second
// `rules:` (or `patterns:`, `name:`, `server:` ...) would be silently ignored. Every
// mapping, at any depth, is refused when a key repeats. `budget` bounds the walk: aliases
// can make a small file a huge tree (without them every node costs at least a byte). It is
// only a backstop: refuse_alias_bombs has already bounded the expanded nodes (and refused
// cycles) before this walk runs.
void refuse_duplicate_keys(const At& at, std::size_t& budget) {
  if (budget == 0) at.fail("the document expands to too many nodes (aliases?)");
  --budget;
  if (at.node.IsSequence()) {
    for (std::size_t i = 0; i < at.node.size(); ++i) refuse_duplicate_keys(at.item(i), budget);
    return;
  }
  if (!at.node.IsMap()) return;
  std::map<std::string, int> first_line;  // key -> its first line
  for (const auto& kv : at.node) {
    if (!kv.first.IsScalar()) continue;  // a complex key: refused as unknown by require_map
    const std::string name = kv.first.Scalar();
    const int line = kv.first.Mark().line + 1;
    const std::string key = at.key.empty() ? name : at.key + "." + name;
    const auto [it, inserted] = first_line.emplace(name, line);
    if (!inserted) At{at.file, kv.first, key}.fail("duplicate key (first on line " + std::to_string(it->second) + ")");
    refuse_duplicate_keys(At{at.file, kv.second, key}, budget);
  }
}

// Aliases make a small file a huge document ("billion laughs": ten anchors, each a list of
// ten aliases of the one before, read as 10^10 scalars). yaml-cpp shares an aliased node
// rather than copying it, but every reader of the tree (the duplicate-key walk, as<>(),
// the rules' patterns) expands it again. So before YAML::Load, yaml-cpp's event parser
// reads the document once and keeps, for each anchor, the size of its subtree as it reads
// when every alias in it is expanded; an alias adds that size. It stops at the first bound
// passed, and refuses an alias of a node from inside that node (yaml-cpp would build a
// cycle, and the walk would recurse until the stack runs out).
//
// The bounds, generous for real files: a configuration with 10,000 rules of 20 patterns is
// about 9 MB of text and under 10^6 nodes, and without aliases a file reads as at most its
// own size in scalar bytes and about one node per byte (`{a,b}`: 5 bytes, 5 nodes), so
// no alias-free file is ever refused, and aliases may multiply a file 16 times over:
//   - scalar bytes after expansion: 64 MiB or 16x the file size, whichever is larger
//     (the file itself is at most kConfigLimit, 16 MiB);
//   - nodes after expansion: 1 Mi or 2x the file size + 16, whichever is larger (this
//     also bounds the duplicate-key walk, which visits each expanded node once);
//   - alias uses: 100,000 (each is cheap for yaml-cpp; this bounds the bookkeeping and
//     is far above the few shared anchors a configuration names per rule).
constexpr std::size_t kExpandedBytesFloor = 64u << 20;
constexpr std::size_t kExpandedBytesFactor = 16;
constexpr std::size_t kExpandedNodesFloor = 1u << 20;
constexpr std::size_t kMaxAliasUses = 100'000;

class AliasBudget : public YAML::EventHandler {
 public:
  AliasBudget(const std::string& path, std::size_t file_size)
      : path_(path),
        max_bytes_(std::max(kExpandedBytesFloor, kExpandedBytesFactor * file_size)),
        max_nodes_(std::max(kExpandedNodesFloor, 2 * file_size + 16)) {}

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t anchor) override { leaf(anchor, 0); }
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t anchor, const std::string& value) override {
    leaf(anchor, value.size());
  }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    const auto it = sizes_.find(anchor);
    if (it == sizes_.end()) {
      throw ConfigError(path_ + ":" + std::to_string(mark.line + 1) +
                        ": an alias of a node from inside that node (a cycle) is not supported");
    }
    if (++aliases_ > kMaxAliasUses) {
      throw ConfigError(path_ + ": more than " + std::to_string(kMaxAliasUses) +
                        " alias uses (limit; a configuration needs far fewer)");
    }
    add(it->second);
  }
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    open(anchor);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t anchor, YAML::EmitterStyle::value) override {
    open(anchor);
  }
  void OnMapEnd() override { close(); }

 private:
  struct Size {
    std::size_t bytes = 0;
    std::size_t nodes = 0;
  };
  struct Open {
    YAML::anchor_t anchor;
    Size at_start;
  };

  void add(const Size& s) {
    // Both stay below their bounds before the addition, and s is at most the total read so
    // far (an anchored subtree is part of it), so the sums cannot overflow.
    total_.bytes += s.bytes;
    total_.nodes += s.nodes;
    if (total_.bytes > max_bytes_) {
      throw ConfigError(path_ + ": aliases expand to more than " + std::to_string(max_bytes_ >> 20) +
                        " MiB of text (limit; a configuration needs far less)");
    }
    if (total_.nodes > max_nodes_) {
      throw ConfigError(path_ + ": aliases expand to more than " + std::to_string(max_nodes_) +
                        " nodes (limit; a configuration needs far fewer)");
    }
  }
  void leaf(YAML::anchor_t anchor, std::size_t bytes) {
    const Size s{bytes, 1};
    add(s);
    if (anchor != YAML::NullAnchor) sizes_[anchor] = s;
  }
  void open(YAML::anchor_t anchor) {
    add(Size{0, 1});
    // The collection node itself is counted in its own size: at_start is taken before it.
    stack_.push_back(Open{anchor, Size{total_.bytes, total_.nodes - 1}});
  }
  void close() {
    if (stack_.empty()) return;
    const Open o = stack_.back();
    stack_.pop_back();
    if (o.anchor != YAML::NullAnchor) {
      sizes_[o.anchor] = Size{total_.bytes - o.at_start.bytes, total_.nodes - o.at_start.nodes};
    }
  }

  const std::string& path_;
  const std::size_t max_bytes_;
  const std::size_t max_nodes_;
  std::size_t aliases_ = 0;
  Size total_;
  std::vector<Open> stack_;
  std::unordered_map<YAML::anchor_t, Size> sizes_;  // anchor id -> its expanded size, once closed
};

// Throws ConfigError when the first document (the one YAML::Load reads) expands past the
// bounds above; a syntax error is left to YAML::Load, which reports it the same way.
void refuse_alias_bombs(const std::string& yaml, const std::string& path) {
  std::istringstream in(yaml);
  YAML::Parser parser(in);
  AliasBudget budget(path, yaml.size());
  parser.HandleNextDocument(budget);
}

// Refuses a file that cannot be opened for appending once its missing directories are
// made (as the build steps do): an existing part of the path that is no directory, a
// directory in the file's place, or no permission. The start would refuse it later, with
// another message; here --check and a reload refuse it too.
void check_writable_path(const At& at, const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path file(path);
  const fs::file_status st = fs::status(file, ec);
  if (fs::is_directory(st)) at.fail(path + ": is a directory");
  if (fs::exists(st)) {
    if (::access(path.c_str(), W_OK) != 0) at.fail(path + ": cannot be written: " + std::strerror(errno));
    return;
  }
  // The nearest existing directory above it must be one, and writable, to make the rest.
  for (fs::path dir = file.parent_path(); !dir.empty(); dir = dir.parent_path()) {
    const fs::file_status d = fs::status(dir, ec);
    if (!fs::exists(d)) {
      const bool missing = ec == std::errc::no_such_file_or_directory || ec == std::errc::not_a_directory;
      if (ec && !missing) at.fail(dir.string() + ": " + ec.message());
      if (dir == dir.parent_path()) break;
      continue;
    }
    if (!fs::is_directory(d)) at.fail(path + ": cannot be created: " + dir.string() + " is not a directory");
    if (::access(dir.c_str(), W_OK | X_OK) != 0)
      at.fail(path + ": cannot be created in " + dir.string() + ": " + std::strerror(errno));
    return;
  }
}

// "" for a file in the working directory: its relative paths stay as written.
std::string directory_of(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return "";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string resolve(const std::string& base_dir, const std::string& path) {
  if (path.empty() || path.front() == '/' || base_dir.empty()) return path;
  return base_dir.back() == '/' ? base_dir + path : base_dir + "/" + path;
}

// `pcap: FILE` or `interface: IFACE`, with `bpf` and `stream`. The file is opened and its
// header read, and the filter compiled (for the file's link type; for Ethernet on an
// interface, whose own link type is known once it is opened at the start), so that --check
// and a reload see a missing file or a bad filter with the file and line.
void parse_capture(const At& at, const std::string& dir, SourceConfig& s) {
  const bool file = at.has("pcap");
  const std::string key = file ? "pcap" : "interface";
  at.require_map({key, "bpf", "stream"});
  s.kind = file ? SourceConfig::Kind::kPcap : SourceConfig::Kind::kInterface;
  s.capture = at.child(key).text();
  if (s.capture.empty()) at.child(key).fail(file ? "names no file" : "names no interface");
  // libpcap would read "-" as standard input, which the stdin source reads as lines.
  if (file && s.capture == "-") at.child(key).fail("standard input is not read as a capture; name a file");
  if (file) s.capture = resolve(dir, s.capture);
  if (at.has("bpf")) s.bpf = at.child("bpf").text();
  if (at.has("stream")) s.stream = at.child("stream").boolean();
  try {
    if (file) check_capture_file(s.capture, s.bpf);
    else check_bpf(s.bpf);
  } catch (const ConfigError& e) {
    at.child("bpf").fail(e.what());
  } catch (const Error& e) {
    at.child(key).fail(e.what());
  }
}

bool is_kafka_field(const std::string& n) {
  return n == "kafka.topic" || n == "kafka.partition" || n == "kafka.offset" || n == "kafka.key" ||
         (n.starts_with("kafka.header.") && n.size() > 13);
}

// librdkafka's properties that hold a secret (kafka_source.hpp decides), or look like one.
bool kafka_secret(const std::string& key) { return looks_like_secret(key) || kafka_secret_property(key); }

// What a kafka source and a kafka output share: brokers (one or a list), settings (no
// secrets: they belong in secrets_file) and secrets_file.
void parse_kafka_client(const At& k, const std::string& dir, KafkaClientConfig& c) {
  if (!k.has("brokers")) k.fail("needs brokers (HOST:PORT, or a list of them)");
  for (const std::string& b : k.child("brokers").strings()) c.brokers += (c.brokers.empty() ? "" : ",") + b;
  if (k.has("settings")) {
    c.settings = k.child("settings").string_map();
    for (const auto& [key, value] : c.settings)
      if (kafka_secret(key))
        k.child("settings").child(key).fail("secrets are not accepted in the configuration file: put it in "
                                            "secrets_file (key=value lines, mode 0600)");
  }
  if (k.has("secrets_file")) c.secrets_file = resolve(dir, k.child("secrets_file").text());
}

// librdkafka's message without our "kafka: " prefix.
std::string librdkafka_why(const ConfigError& e) {
  std::string why = e.what();
  if (why.starts_with("kafka: ")) why.erase(0, 7);
  return why;
}

// `kafka: {brokers, topics, group_id, settings, secrets_file}`. librdkafka checks every
// property now (without connecting), so that --check and a reload see a bad one with the
// file and line; a setting that looks like a secret belongs in secrets_file.
void parse_kafka(const At& at, const std::string& dir, SourceConfig& s) {
  at.require_map({"kafka", "multiline", "format", "json_max_bytes"});
  const At k = at.child("kafka");
  k.require_map({"brokers", "topics", "group_id", "settings", "secrets_file"});
  s.kind = SourceConfig::Kind::kKafka;
  KafkaClientConfig& c = s.kafka;
  parse_kafka_client(k, dir, c);
  if (!k.has("topics")) k.fail("needs topics (a name or a list of names)");
  c.topics = k.child("topics").strings();
  for (std::size_t i = 0; i < c.topics.size(); ++i)
    if (c.topics[i].empty()) k.child("topics").fail("an empty topic name");
  if (k.has("group_id")) c.group_id = k.child("group_id").text();
  if (c.group_id.empty()) k.fail("needs a group_id: the instances of one group share the topics' partitions");
  try {
    KafkaConfig check;
    check.brokers = c.brokers;
    check.topics = c.topics;
    check.group_id = c.group_id;
    check.settings.assign(c.settings.begin(), c.settings.end());
    check.secrets = kafka_secrets(c);
    check_kafka(check);
  } catch (const ConfigError& e) {
    k.fail(librdkafka_why(e));
  }
}

// `journal: {matches, files, directory, system, namespace, since, from_start, follow,
// journalctl}` (or `journal: true`): journalctl's own options, checked when it runs.
void parse_journal(const At& at, const std::string& dir, SourceConfig& s) {
  at.require_map({"journal"});
  s.kind = SourceConfig::Kind::kJournal;
  JournalSourceConfig& j = s.journal;
  const At o = at.child("journal");
  if (!o.node.IsMap()) {
    if (!o.boolean()) o.fail("only \"journal: true\" or a map of options means something");
    return;
  }
  o.require_map({"matches", "files", "directory", "system", "namespace", "since", "from_start", "follow", "journalctl"});
  if (o.has("matches")) {
    // fail2ban's journalmatch syntax, as a jail's: each string's lines shell-split into
    // words (quotes keep a value's spaces), its lines ORed; a list's strings joined (by
    // journalctl's rules: different fields ANDed, one field's values ORed).
    for (const std::string& text : o.child("matches").strings()) {
      for (std::string& m : journal_matches(text)) {
        if (m != "+" && m.find('=') == std::string::npos)
          o.child("matches").fail("\"" + m + "\" is not FIELD=VALUE or +");
        j.matches.push_back(std::move(m));
      }
    }
  }
  if (o.has("files"))
    for (const std::string& f : o.child("files").strings()) j.files.push_back(resolve(dir, f));
  if (o.has("directory")) j.directory = resolve(dir, o.child("directory").text());
  if (!j.files.empty() && !j.directory.empty()) o.fail("takes files or a directory, not both");
  if (o.has("system")) j.system_only = o.child("system").boolean();
  if (o.has("namespace")) j.ns = o.child("namespace").text();
  if (o.has("since")) j.since = o.child("since").duration();
  if (o.has("from_start")) j.from_start = o.child("from_start").boolean();
  if (o.has("follow")) j.follow = o.child("follow").boolean();
  if (o.has("journalctl")) j.journalctl = o.child("journalctl").text();
  if (j.journalctl.empty()) o.child("journalctl").fail("is empty");
}

// `multiline: {start, continuation, max_lines, max_bytes, timeout}`: the regexes are
// compiled now, so that --check names one that does not.
MultilineConfig parse_multiline(const At& at) {
  at.require_map({"start", "continuation", "max_lines", "max_bytes", "timeout"});
  MultilineConfig m;
  if (at.has("start")) m.start = at.child("start").text();
  if (at.has("continuation")) m.continuation = at.child("continuation").text();
  if (m.start.empty() && m.continuation.empty()) at.fail("needs start or continuation (a regex), or both");
  if (at.has("max_lines")) m.max_lines = at.child("max_lines").number(1, 100'000);
  if (at.has("max_bytes")) m.max_bytes = at.child("max_bytes").number(1, 64u << 20);
  if (at.has("timeout")) m.timeout = at.child("timeout").duration();
  try {
    (void)Multiline(m);
  } catch (const regex::RegexError& e) {
    std::string why;
    for (const std::string& message : e.messages()) why += (why.empty() ? "" : "; ") + message;
    at.fail("does not compile: " + why);
  }
  return m;
}

// The sources whose streams carry their origin (BatchEntry::origin): only their records
// can be joined (multiline:) or parsed (format:).
bool shapes_records(const At& at) { return at.has("follow") || at.has("stdin") || at.has("kafka"); }

// `format: json` (and `json_max_bytes`), for follow, stdin and kafka sources.
void parse_format(const At& at, SourceConfig& s) {
  if (at.has("format")) {
    if (!shapes_records(at)) at.child("format").fail("is for follow, stdin and kafka sources only");
    const std::string f = at.child("format").text();
    if (f == "json") s.json = true;
    else if (f != "text") at.child("format").fail("\"" + f + "\" is not json or text");
  }
  if (at.has("json_max_bytes")) {
    if (!s.json) at.child("json_max_bytes").fail("applies to format: json");
    s.json_max_bytes = at.child("json_max_bytes").number(1, 64u << 20);
  }
}

SourceConfig parse_source(const At& at, const std::string& dir) {
  SourceConfig s;
  if (at.has("multiline")) {
    if (!shapes_records(at)) at.child("multiline").fail("joins the lines of follow, stdin and kafka sources only");
    s.multiline = parse_multiline(at.child("multiline"));
  }
  parse_format(at, s);
  if (at.has("follow")) {
    at.require_map({"follow", "state", "from_start", "poll_interval", "multiline", "format", "json_max_bytes"});
    s.kind = SourceConfig::Kind::kFollow;
    for (const std::string& p : at.child("follow").strings()) s.paths.push_back(resolve(dir, p));
    if (s.paths.empty()) at.child("follow").fail("names no file");
    if (at.has("state")) {
      s.state = resolve(dir, at.child("state").text());
      check_writable_path(at.child("state"), s.state);
    }
    if (at.has("from_start")) s.from_start = at.child("from_start").boolean();
    if (at.has("poll_interval")) s.poll_interval = at.child("poll_interval").duration();
  } else if (at.has("listen")) {
    at.require_map({"listen"});
    s.kind = SourceConfig::Kind::kListen;
    s.url = at.child("listen").text();
    // Refused before the parser, whose messages quote the URL: no password may reach them.
    if ((s.url.starts_with("tcp://") || s.url.starts_with("udp://")) && redact_url(s.url) != s.url)
      at.child("listen").fail(redact_url(s.url) + ": user information is not supported");
    // The same parser as gpufilter --listen (and as the daemon's start), so that --check
    // and a reload see a bad address too, with the file and line.
    try {
      (void)parse_listen_url(s.url);
    } catch (const ConfigError& e) {
      std::string why = e.what();
      if (why.starts_with("--listen ")) why.erase(0, 9);
      at.child("listen").fail(why);
    }
  } else if (at.has("stdin")) {
    at.require_map({"stdin", "multiline", "format", "json_max_bytes"});
    s.kind = SourceConfig::Kind::kStdin;
    if (!at.child("stdin").boolean()) at.child("stdin").fail("only \"stdin: true\" means something");
  } else if (at.has("pcap") || at.has("interface")) {
    parse_capture(at, dir, s);
  } else if (at.has("kafka")) {
    parse_kafka(at, dir, s);
  } else if (at.has("journal")) {
    parse_journal(at, dir, s);
  } else {
    at.fail("a source needs one of follow, listen, stdin, pcap, interface, kafka or journal");
  }
  return s;
}

ThresholdConfig parse_threshold(const At& at) {
  at.require_map({"count", "window", "group_by"});
  ThresholdConfig t;
  if (at.has("count")) t.count = at.child("count").number(1, 1'000'000);
  if (at.has("window")) t.window = at.child("window").duration();
  if (t.count > 1 && t.window.count() == 0) at.fail("a count above 1 needs a window");
  if (at.has("group_by")) {
    const At g = at.child("group_by");
    if (g.node.IsScalar()) {
      const std::string v = g.text();
      if (v == "source") t.group_by = ThresholdConfig::GroupBy::kSource;
      else if (v == "none") t.group_by = ThresholdConfig::GroupBy::kNone;
      else g.fail("\"" + v + "\" is not source, none, {field_after: PREFIX} or {capture: NAME}");
    } else if (g.has("capture")) {
      g.require_map({"capture"});
      t.group_by = ThresholdConfig::GroupBy::kCapture;
      t.capture = g.child("capture").text();
      if (t.capture.empty()) g.child("capture").fail("must not be empty");
    } else {
      g.require_map({"field_after"});
      t.group_by = ThresholdConfig::GroupBy::kField;
      t.field_after = g.child("field_after").text();
      if (t.field_after.empty()) g.child("field_after").fail("must not be empty");
    }
  }
  return t;
}

std::vector<std::string> read_patterns_file(const At& at, const std::string& path) {
  std::string text;
  try {
    text = read_checked_file(path, FileTrust::kConfig, kPatternsFileLimit);
  } catch (const ConfigError& e) {
    at.fail(e.what());
  }
  std::vector<std::string> patterns;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    start = end + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line.front() == '#') continue;  // comments and blank lines
    patterns.push_back(std::move(line));
  }
  return patterns;
}

// The {{NAME}} references of a label or annotation template, in order.
std::vector<std::string> template_names(const std::string& text) {
  std::vector<std::string> names;
  for (std::size_t at = text.find("{{"); at != std::string::npos; at = text.find("{{", at + 2)) {
    const std::size_t end = text.find("}}", at + 2);
    if (end == std::string::npos) break;
    names.push_back(text.substr(at + 2, end - at - 2));
  }
  return names;
}

// regex:, regex_file:, syntax: and time:, each regex compiled as the rule engine will, and
// every named group the rule uses (group_by, {{NAME}} in labels and annotations, time)
// defined by every regex of the rule.
void parse_rule_regexes(const At& at, const std::string& dir, RuleConfig& r) {
  if (at.has("regex")) r.regexes = at.child("regex").strings();
  if (at.has("regex_file")) {
    const std::vector<std::string> more = read_patterns_file(at.child("regex_file"), resolve(dir, at.child("regex_file").text()));
    r.regexes.insert(r.regexes.end(), more.begin(), more.end());
  }
  if (at.has("syntax")) {
    const std::string v = at.child("syntax").text();
    if (v == "perl") r.syntax = regex::Syntax::kPerl;
    else if (v == "extended") r.syntax = regex::Syntax::kExtended;
    else if (v == "basic") r.syntax = regex::Syntax::kBasic;
    else at.child("syntax").fail("\"" + v + "\" is not perl, extended or basic");
    if (r.regexes.empty()) at.child("syntax").fail("applies to regex and regex_file, which this rule lacks");
  }
  if (at.has("time")) {
    const At t = at.child("time");
    t.require_map({"capture", "format"});
    if (!t.has("capture") || !t.has("format")) t.fail("needs capture (a named group) and format (strptime's)");
    r.event_time = EventTimeConfig{t.child("capture").text(), t.child("format").text()};
  }
  // A fail2ban rule's {{NAME}} are its failures' fields (host, ip, user, F-* groups).
  if (!r.fail2ban_filter.empty()) return;
  const At where = at.has("regex") ? at.child("regex") : at.has("regex_file") ? at.child("regex_file") : at;
  std::vector<std::string> used;
  if (r.threshold.group_by == ThresholdConfig::GroupBy::kCapture) used.push_back(r.threshold.capture);
  if (r.event_time) used.push_back(r.event_time->capture);
  for (const auto* m : {&r.labels, &r.annotations})
    for (const auto& [key, value] : *m)
      for (const std::string& n : template_names(value)) used.push_back(n);
  // "kafka.key" and the like are a Kafka record's fields, "json.NAME" a JSON record's:
  // not groups of a regex.
  std::erase_if(used, [&](const std::string& n) {
    if (n.starts_with("json.") && n.size() > 5) return true;
    if (!n.starts_with("kafka.")) return false;
    if (!is_kafka_field(n))
      at.fail("\"" + n + "\" is no Kafka record field (kafka.topic, kafka.partition, kafka.offset, kafka.key, "
              "kafka.header.NAME)");
    return true;
  });
  if (!used.empty() && r.regexes.empty()) at.fail("names the group \"" + used.front() + "\" but has no regex");
  if (!used.empty() && r.invert) at.fail("an invert rule matches lines its regexes do not: it has no groups to use");
  for (std::size_t i = 0; i < r.regexes.size(); ++i) {
    const std::string& p = r.regexes[i];
    if (p.find('\n') != std::string::npos) where.fail("a regex holds a newline");
    if (r.syntax != regex::Syntax::kPerl && p.find(regex::kHostTag) != std::string::npos)
      where.fail("<HOST> needs syntax: perl");
    try {
      const std::string text = r.syntax == regex::Syntax::kPerl ? regex::with_host_tags(p) : p;
      const regex::CaptureRegex compiled(text, r.syntax, r.ignore_case, r.word);
      for (const std::string& n : used)
        if (std::find(compiled.names().begin(), compiled.names().end(), n) == compiled.names().end())
          where.fail("\"" + p + "\" has no group named \"" + n + "\" (write (?P<" + n + ">...))");
    } catch (const regex::RegexError& e) {
      std::string why;
      for (const std::string& m : e.messages()) why += (why.empty() ? "" : "; ") + m;
      where.fail("\"" + p + "\" does not compile: " + why);
    }
  }
}

// `fail2ban_filter: NAME` (and fail2ban_options): the filter is loaded now, so that --check
// and a reload refuse one fail2ban cannot read; its failures are grouped by their address.
void parse_fail2ban_rule(const At& at, const std::string& dir, const std::string& fail2ban_dir, RuleConfig& r) {
  for (const char* key : {"patterns", "patterns_file", "regex", "regex_file", "syntax", "time", "ignore_case", "word",
                          "invert", "field"})
    if (at.has(key)) at.child(key).fail("a fail2ban_filter rule takes its matching from the filter");
  r.fail2ban_filter = at.child("fail2ban_filter").text();
  if (r.fail2ban_filter.find('/') != std::string::npos) r.fail2ban_filter = resolve(dir, r.fail2ban_filter);
  if (at.has("fail2ban_options")) r.fail2ban_options = at.child("fail2ban_options").string_map();
  r.fail2ban_dir = fail2ban_dir;
  try {
    fail2ban::FilterOptions options;
    options.config_dir = r.fail2ban_dir;
    options.values = r.fail2ban_options;
    (void)fail2ban::Filter::load(r.fail2ban_filter, options);
  } catch (const std::exception& e) {
    at.child("fail2ban_filter").fail(e.what());
  }
  if (r.threshold.group_by == ThresholdConfig::GroupBy::kNone && !at.has("threshold")) {
    r.threshold.group_by = ThresholdConfig::GroupBy::kCapture;
    r.threshold.capture = "host";
  }
}

// `fail2ban: {jails: DIR, only: [NAMES], from_start: BOOL, state: FILE}`: fail2ban's
// jails as sources and rules (fail2ban_jails.hpp), read now, so that --check and a reload
// refuse a jail fail2ban would refuse, naming the jail, the file and the reason.
void parse_fail2ban_jails(const At& at, const std::string& dir, const std::string& fail2ban_dir, DaemonConfig& c) {
  at.require_map({"jails", "only", "from_start", "state"});
  JailsConfig jails;
  jails.dir = at.has("jails") ? resolve(dir, at.child("jails").text()) : fail2ban_dir;
  if (at.has("only")) jails.only = at.child("only").strings();
  if (at.has("from_start")) jails.from_start = at.child("from_start").boolean();
  if (at.has("state")) {
    jails.state = resolve(dir, at.child("state").text());
    check_writable_path(at.child("state"), jails.state);
  }
  try {
    add_fail2ban_jails(jails, c);
  } catch (const ConfigError& e) {
    at.fail(e.what());
  }
}

RuleConfig parse_rule(const At& at, const std::string& dir, const std::string& fail2ban_dir) {
  at.require_map({"name", "patterns", "patterns_file", "regex", "regex_file", "syntax", "time", "ignore_case", "word",
                  "invert", "threshold", "severity", "labels", "annotations", "cooldown", "resolve_after", "field",
                  "fail2ban_filter", "fail2ban_options"});
  RuleConfig r;
  r.where = at.file + ":" + std::to_string(at.node.Mark().line + 1);
  if (!at.has("name")) at.fail("a rule needs a name");
  r.name = at.child("name").text();
  if (r.name.empty()) at.child("name").fail("must not be empty");
  if (at.has("threshold")) r.threshold = parse_threshold(at.child("threshold"));
  if (at.has("fail2ban_filter")) parse_fail2ban_rule(at, dir, fail2ban_dir, r);
  if (at.has("patterns")) r.patterns = at.child("patterns").strings();
  if (at.has("patterns_file")) {
    const std::vector<std::string> more =
        read_patterns_file(at.child("patterns_file"), resolve(dir, at.child("patterns_file").text()));
    r.patterns.insert(r.patterns.end(), more.begin(), more.end());
  }
  const bool regexes = at.has("regex") || at.has("regex_file");
  if (regexes && !r.patterns.empty()) at.fail("rule \"" + r.name + "\" has patterns and regexes: give one kind (a rule per kind)");
  if (r.patterns.empty() && !regexes && r.fail2ban_filter.empty())
    at.fail("rule \"" + r.name + "\" has no patterns (patterns, patterns_file, regex, regex_file or fail2ban_filter)");
  for (std::size_t i = 0; i < r.patterns.size(); ++i) {
    if (r.patterns[i].empty()) at.child("patterns").fail("an empty pattern would match every line");
    if (r.patterns[i].find('\n') != std::string::npos) at.child("patterns").fail("a pattern holds a newline");
  }
  if (at.has("ignore_case")) r.ignore_case = at.child("ignore_case").boolean();
  if (at.has("word")) r.word = at.child("word").boolean();
  if (at.has("invert")) r.invert = at.child("invert").boolean();
  if (at.has("field")) {
    r.field = at.child("field").text();
    if (r.field.empty()) at.child("field").fail("names no field");
  }
  if (at.has("severity")) r.severity = at.child("severity").text();
  if (at.has("labels")) r.labels = at.child("labels").string_map();
  if (at.has("annotations")) r.annotations = at.child("annotations").string_map();
  if (at.has("cooldown")) r.cooldown = at.child("cooldown").duration();
  if (at.has("resolve_after")) r.resolve_after = at.child("resolve_after").duration();
  parse_rule_regexes(at, dir, r);
  if (regexes && r.regexes.empty()) at.fail("rule \"" + r.name + "\" has no regex (regex_file holds none)");
  return r;
}

// An https:// output's tls: block: files resolved against the configuration's folder and
// loaded now, so that --check and a reload refuse what the output would.
void parse_output_tls(const At& at, const std::string& dir, OutputConfig& o) {
  at.require_map({"ca_file", "cert_file", "key_file", "verify_hostname"});
  if (o.kind == OutputConfig::Kind::kJsonl) at.fail("only an alertmanager or webhook output speaks TLS");
  std::string scheme = o.url.substr(0, 8);
  for (char& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (scheme != "https://") at.fail("is for an https:// url");
  for (const auto& [key, field] : {std::pair{"ca_file", &TlsConfig::ca_file}, std::pair{"cert_file", &TlsConfig::cert_file},
                                   std::pair{"key_file", &TlsConfig::key_file}})
    if (at.has(key)) o.tls.*field = resolve(dir, at.child(key).text());
  if (at.has("verify_hostname")) o.tls.verify_hostname = at.child("verify_hostname").boolean();
  try {
    check_tls(o.tls);
  } catch (const ConfigError& e) {
    at.fail(e.what());
  }
}

// `send: alerts | records | [alerts, records]`: what a kafka output produces.
void parse_kafka_send(const At& at, OutputConfig& o) {
  o.send_alerts = false;
  const auto one = [&](const At& item) {
    const std::string what = item.text();
    if (what == "alerts") o.send_alerts = true;
    else if (what == "records") o.send_records = true;
    else item.fail("\"" + what + "\" is neither alerts nor records");
  };
  if (at.node.IsSequence()) {
    for (std::size_t i = 0; i < at.node.size(); ++i) one(at.item(i));
  } else {
    one(at);
  }
  if (!o.send_alerts && !o.send_records) at.fail("a kafka output sends alerts, records or both");
}

// `type: kafka`: alerts produced to `topic`, keyed by the group or by `key_label`; and/or
// the selected records, keyed by `record_key`.
OutputConfig parse_kafka_output(const At& at, const std::string& dir) {
  at.require_map({"type", "name", "brokers", "topic", "key_label", "send", "record_key", "settings", "secrets_file",
                  "queue", "timeout"});
  OutputConfig o;
  o.kind = OutputConfig::Kind::kKafka;
  o.name = at.has("name") ? at.child("name").text() : "kafka";
  parse_kafka_client(at, dir, o.kafka);
  if (!at.has("topic")) at.fail("a kafka output needs a topic");
  o.kafka.topics = {at.child("topic").text()};
  if (at.has("key_label")) o.key_label = at.child("key_label").text();
  if (at.has("send")) parse_kafka_send(at.child("send"), o);
  if (at.has("record_key")) {
    if (!o.send_records) at.child("record_key").fail("only records have a record_key (send: records)");
    o.record_key = at.child("record_key").text();
  }
  if (at.has("queue")) o.queue = at.child("queue").number(1, 10'000'000);
  o.timeout = Millis(30000);
  if (at.has("timeout")) o.timeout = at.child("timeout").duration();
  try {
    check_kafka_output(kafka_output_config(o));
  } catch (const ConfigError& e) {
    at.fail(e.what());
  }
  return o;
}

// `queue`, `retry_backoff` and `retry_max_backoff`: the delivery queue of every output but kafka.
void parse_output_queue(const At& at, OutputConfig& o) {
  if (at.has("queue")) o.queue = at.child("queue").number(1, 10'000'000);
  if (at.has("retry_backoff")) {
    o.retry_backoff = at.child("retry_backoff").duration();
    if (o.retry_backoff < Millis(1)) at.child("retry_backoff").fail("must be at least 1ms");
  }
  if (at.has("retry_max_backoff")) o.retry_max_backoff = at.child("retry_max_backoff").duration();
  if (o.retry_max_backoff < o.retry_backoff) {
    at.child(at.has("retry_max_backoff") ? "retry_max_backoff" : "retry_backoff")
        .fail("retry_max_backoff must not be below retry_backoff");
  }
}

// `fire:` or `resolve:` of an exec output: a list, the program then its arguments (a
// string alone is refused: no shell would split it); the program is found now
// (find_exec_command), so that --check and a reload refuse a missing one.
std::vector<std::string> parse_exec_command(const At& at, const std::string& dir) {
  if (!at.node.IsSequence())
    at.fail("expected a list: the program, then its arguments, one item each (no shell splits a string)");
  std::vector<std::string> argv = at.strings();
  if (argv.empty()) at.fail("names no command (a list: the program, then its arguments)");
  const At program = at.item(0);
  if (argv[0].find('<') != std::string::npos || argv[0].find("{{") != std::string::npos)
    program.fail("the program itself cannot hold a tag");
  try {
    argv[0] = find_exec_command(argv[0], dir);
  } catch (const ConfigError& e) {
    program.fail(e.what());
  }
  return argv;
}

// `type: exec`: fail2ban-style actions, a program run per firing (`fire`) and resolved
// (`resolve`) alert with its arguments filled from the alert (outputs.hpp).
OutputConfig parse_exec_output(const At& at, const std::string& dir) {
  at.require_map({"type", "name", "fire", "resolve", "timeout", "concurrency", "queue", "retry_backoff",
                  "retry_max_backoff"});
  OutputConfig o;
  o.kind = OutputConfig::Kind::kExec;
  o.name = at.has("name") ? at.child("name").text() : "exec";
  if (!at.has("fire")) at.fail("an exec output needs fire: the program to run for each firing alert, as a list");
  o.fire = parse_exec_command(at.child("fire"), dir);
  if (at.has("resolve")) o.resolve = parse_exec_command(at.child("resolve"), dir);
  o.timeout = Millis(10000);
  if (at.has("timeout")) {
    o.timeout = at.child("timeout").duration();
    if (o.timeout < Millis(1)) at.child("timeout").fail("must be at least 1ms");
  }
  if (at.has("concurrency")) o.concurrency = at.child("concurrency").number(1, 1024);
  parse_output_queue(at, o);
  return o;
}

OutputConfig parse_output(const At& at, const std::string& dir) {
  if (at.has("type") && at.child("type").node.IsScalar() && at.child("type").text() == "kafka")
    return parse_kafka_output(at, dir);
  if (at.has("type") && at.child("type").node.IsScalar() && at.child("type").text() == "exec")
    return parse_exec_output(at, dir);
  at.require_map({"type", "name", "path", "url", "resend_interval", "timeout", "bearer_token_env", "bearer_token_file",
                  "queue", "retry_backoff", "retry_max_backoff", "tls"});
  OutputConfig o;
  if (!at.has("type")) at.fail("an output needs a type (jsonl, alertmanager, webhook, kafka, exec)");
  const std::string type = at.child("type").text();
  if (type == "jsonl") o.kind = OutputConfig::Kind::kJsonl;
  else if (type == "alertmanager") o.kind = OutputConfig::Kind::kAlertmanager;
  else if (type == "webhook") o.kind = OutputConfig::Kind::kWebhook;
  else at.child("type").fail("\"" + type + "\" is not jsonl, alertmanager, webhook, kafka or exec");
  o.name = at.has("name") ? at.child("name").text() : type;
  if (at.has("path")) {
    if (o.kind != OutputConfig::Kind::kJsonl) at.child("path").fail("only a jsonl output has a path");
    o.path = at.child("path").text();
    if (o.path != "-") {
      o.path = resolve(dir, o.path);
      check_writable_path(at.child("path"), o.path);
    }
  }
  if (o.kind != OutputConfig::Kind::kJsonl) {
    if (!at.has("url")) at.fail("a " + type + " output needs a url");
    o.url = at.child("url").text();
    // The outputs' own parser: the start refuses nothing here that --check let pass.
    try {
      check_http_url(o.url);
    } catch (const ConfigError& e) {
      at.child("url").fail(e.what());
    }
  } else if (at.has("url")) {
    at.child("url").fail("a jsonl output has a path, not a url");
  }
  if (at.has("resend_interval")) o.resend_interval = at.child("resend_interval").duration();
  if (at.has("timeout")) o.timeout = at.child("timeout").duration();
  for (const char* key : {"bearer_token_env", "bearer_token_file"}) {
    if (at.has(key) && o.kind != OutputConfig::Kind::kWebhook) at.child(key).fail("only a webhook output sends a token");
  }
  if (at.has("bearer_token_env") && at.has("bearer_token_file")) {
    at.child("bearer_token_file").fail("set bearer_token_env or bearer_token_file, not both");
  }
  if (at.has("bearer_token_env")) {
    o.bearer_token_env = at.child("bearer_token_env").text();
    // Not quoted: a value that is no variable name may well be the token itself.
    if (!is_variable_name(o.bearer_token_env)) {
      at.child("bearer_token_env").fail("is not the name of an environment variable (letters, digits and _); the "
                                        "token itself goes into that variable, or into bearer_token_file");
    }
  }
  if (at.has("bearer_token_file")) o.bearer_token_file = resolve(dir, at.child("bearer_token_file").text());
  // Read now so that --check and a reload refuse a missing, empty or exposed token, as the
  // start would; main reads it again when it builds the output (and at every reload).
  for (const char* key : {"bearer_token_env", "bearer_token_file"}) {
    if (!at.has(key)) continue;
    try {
      (void)read_bearer_token(o);
    } catch (const ConfigError& e) {
      at.child(key).fail(e.what());
    }
  }
  if (at.has("tls")) parse_output_tls(at.child("tls"), dir, o);
  parse_output_queue(at, o);
  return o;
}

}  // namespace

bool RuleConfig::same_as(const RuleConfig& o) const {
  return name == o.name && patterns == o.patterns && regexes == o.regexes && syntax == o.syntax &&
         event_time == o.event_time && ignore_case == o.ignore_case && word == o.word &&
         invert == o.invert && threshold == o.threshold && severity == o.severity && labels == o.labels &&
         annotations == o.annotations && cooldown == o.cooldown && resolve_after == o.resolve_after &&
         field == o.field && fail2ban_filter == o.fail2ban_filter && fail2ban_options == o.fail2ban_options &&
         fail2ban_dir == o.fail2ban_dir && ignore_hosts == o.ignore_hosts && only_sources == o.only_sources;
}

bool reads_kafka_fields(const std::vector<RuleConfig>& rules) {
  for (const RuleConfig& r : rules) {
    if (r.threshold.group_by == ThresholdConfig::GroupBy::kCapture && r.threshold.capture.starts_with("kafka."))
      return true;
    for (const auto* m : {&r.labels, &r.annotations})
      for (const auto& [key, value] : *m)
        for (const std::string& n : template_names(value))
          if (n.starts_with("kafka.")) return true;
  }
  return false;
}

KafkaOutputConfig kafka_output_config(const OutputConfig& o) {
  KafkaOutputConfig k;
  k.brokers = o.kafka.brokers;
  k.topic = o.kafka.topics.empty() ? std::string() : o.kafka.topics[0];
  k.key_label = o.key_label;
  k.alerts = o.send_alerts;
  k.records = o.send_records;
  k.record_key = o.record_key;
  k.settings.assign(o.kafka.settings.begin(), o.kafka.settings.end());
  k.secrets = kafka_secrets(o.kafka);
  k.queue = o.queue;
  k.timeout = o.timeout;
  return k;
}

std::vector<std::pair<std::string, std::string>> kafka_secrets(const KafkaClientConfig& kafka) {
  std::vector<std::pair<std::string, std::string>> all;
  if (kafka.secrets_file.empty()) return all;
  const std::string text = read_checked_file(kafka.secrets_file, FileTrust::kSecret, 1u << 20);
  std::size_t begin = 0;
  for (int line = 1; begin < text.size(); ++line) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    std::string_view l(text.data() + begin, end - begin);
    begin = end + 1;
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    const std::size_t first = l.find_first_not_of(" \t");
    if (first == std::string_view::npos || l[first] == '#') continue;
    const std::size_t eq = l.find('=');
    if (eq == std::string_view::npos || eq == 0)
      throw ConfigError(kafka.secrets_file + ":" + std::to_string(line) + ": expected key=value");
    all.emplace_back(std::string(l.substr(0, eq)), std::string(l.substr(eq + 1)));
  }
  return all;
}

namespace {

// The milliseconds a duration's text names, unbounded (nullopt: not a duration's text).
std::optional<double> duration_ms(const std::string& text) {
  if (text.empty()) return std::nullopt;
  double value = 0;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  const auto [p, ec] = std::from_chars(begin, end, value);
  if (ec != std::errc() || value < 0) return std::nullopt;
  const std::string unit(p, end);
  double ms;
  if (unit.empty() || unit == "s") ms = value * 1000;
  else if (unit == "ms") ms = value;
  else if (unit == "m") ms = value * 60'000;
  else if (unit == "h") ms = value * 3'600'000;
  else if (unit == "d") ms = value * 86'400'000;
  else return std::nullopt;
  return ms;
}

// inf, nan and huge values ("1e300") are no durations: converting them to an integer is
// undefined, and past 100 years the nanoseconds of the clocks they are added to overflow.
constexpr double kMaxDurationMs = 36500.0 * 86'400'000;

}  // namespace

std::optional<Millis> parse_duration(const std::string& text) {
  const std::optional<double> ms = duration_ms(text);
  if (!ms || !(*ms <= kMaxDurationMs)) return std::nullopt;
  return Millis(static_cast<std::int64_t>(*ms));
}

bool duration_too_long(const std::string& text) {
  const std::optional<double> ms = duration_ms(text);
  return ms && std::isfinite(*ms) && *ms > kMaxDurationMs;
}

std::string read_checked_file(const std::string& path, FileTrust trust, std::size_t limit) {
  const auto fail = [&](const std::string& why) { return ConfigError(path + ": " + why); };
  // O_NONBLOCK: opening a FIFO would wait for a writer (a reload stuck for good).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) throw fail(std::string("cannot read: ") + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  // The checks look at the file that was opened, and the bytes come from it: renaming
  // another file into its place after the check changes nothing.
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw fail(std::string("cannot read: ") + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) throw fail("cannot read: it is a directory");
  if (!S_ISREG(st.st_mode)) throw fail("cannot read: it is not a regular file");
  const uid_t me = ::geteuid();
  if (st.st_uid != 0 && st.st_uid != me) {
    throw fail("refused: it is owned by uid " + std::to_string(st.st_uid) + ", neither root nor the user gpufilterd " +
               "runs as (uid " + std::to_string(me) + "), who could change it; fix: chown " +
               std::to_string(me) + " " + path);
  }
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  if (trust == FileTrust::kSecret && (st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    throw fail(std::string("refused: group or others may read or write this secret (mode ") + mode +
               "); fix: chmod 600 " + path);
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    throw fail(std::string("refused: group or others may write it (mode ") + mode + "); fix: chmod go-w " + path);
  }
  // And no other user may swap it for a file of theirs through a directory above it.
  check_directories_trust(path, me);
  std::string text;
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw fail(std::string("cannot read: ") + std::strerror(errno));
    }
    if (n == 0) break;
    if (text.size() + static_cast<std::size_t>(n) > limit) {
      throw fail("larger than " + std::to_string(limit) + " bytes; not read");
    }
    text.append(buffer, static_cast<std::size_t>(n));
  }
  return text;
}

std::string read_bearer_token(const OutputConfig& output) {
  std::string token;
  std::string where;
  if (!output.bearer_token_env.empty()) {
    where = "output " + output.name + ": bearer_token_env " + output.bearer_token_env;
    const char* value = std::getenv(output.bearer_token_env.c_str());
    if (value == nullptr || *value == '\0') throw ConfigError(where + " is not set (or empty)");
    token = value;
  } else if (!output.bearer_token_file.empty()) {
    where = output.bearer_token_file;
    token = read_checked_file(output.bearer_token_file, FileTrust::kSecret, kTokenFileLimit);
  } else {
    return {};
  }
  // `echo TOKEN > file` and editors end the file with a newline; it is not the token's.
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
  if (token.empty()) throw ConfigError(where + ": holds no token");
  for (const char c : token) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f) {
      throw ConfigError(where + ": the token holds a space or a control character (it is sent in an HTTP header)");
    }
  }
  return token;
}

DaemonConfig load_config(const std::string& path) {
  return parse_config(read_checked_file(path, FileTrust::kConfig, kConfigLimit), path);
}

DaemonConfig parse_config(const std::string& yaml, const std::string& path) {
  YAML::Node root;
  try {
    refuse_alias_bombs(yaml, path);  // before anything expands an alias
    root = YAML::Load(yaml);
  } catch (const YAML::ParserException& e) {
    throw ConfigError(path + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  DaemonConfig c;
  c.path = path;
  const std::string dir = directory_of(path);
  try {
    const At top{path, root, ""};
    std::size_t budget = kConfigLimit;
    refuse_duplicate_keys(top, budget);
    top.require_map({"sources", "rules", "outputs", "server", "reload_endpoint", "generator_url", "log_format",
                     "engine", "device", "max_line_bytes", "max_connections", "drain_timeout", "alert_state",
                     "fail2ban_dir", "fail2ban"});
    // fail2ban's jails bring their own sources and rules: then neither list is required.
    const bool jails = top.has("fail2ban");
    if (!top.has("sources") && !jails) top.fail("sources: missing (followed files, listen sockets, stdin or captures)");
    const At sources = top.child("sources");
    if (top.has("sources") && (!sources.node.IsSequence() || sources.node.size() == 0))
      sources.fail("expected a non-empty list");
    for (std::size_t i = 0; top.has("sources") && i < sources.node.size(); ++i)
      c.sources.push_back(parse_source(sources.item(i), dir));
    if (!top.has("rules") && !jails) top.fail("rules: missing");
    const std::string fail2ban_dir =
        top.has("fail2ban_dir") ? resolve(dir, top.child("fail2ban_dir").text()) : std::string("/etc/fail2ban");
    const At rules = top.child("rules");
    if (top.has("rules") && (!rules.node.IsSequence() || rules.node.size() == 0)) rules.fail("expected a non-empty list");
    std::set<std::string> names;
    for (std::size_t i = 0; top.has("rules") && i < rules.node.size(); ++i) {
      c.rules.push_back(parse_rule(rules.item(i), dir, fail2ban_dir));
      if (!names.insert(c.rules.back().name).second)
        rules.item(i).child("name").fail("rule name \"" + c.rules.back().name + "\" is used twice");
    }
    if (jails) parse_fail2ban_jails(top.child("fail2ban"), dir, fail2ban_dir, c);
    if (top.has("outputs")) {
      const At outputs = top.child("outputs");
      if (!outputs.node.IsSequence()) outputs.fail("expected a list");
      for (std::size_t i = 0; i < outputs.node.size(); ++i) c.outputs.push_back(parse_output(outputs.item(i), dir));
    } else {
      c.outputs.push_back(OutputConfig{});  // JSON lines on standard output
    }
    if (top.has("server")) {
      c.server = top.child("server").text();
      try {
        (void)parse_host_port(c.server, "server address " + c.server);  // as the OpsServer parses it
      } catch (const ConfigError& e) {
        top.child("server").fail(e.what());
      }
    }
    if (top.has("reload_endpoint")) c.reload_endpoint = top.child("reload_endpoint").boolean();
    if (top.has("alert_state")) {
      c.alert_state = resolve(dir, top.child("alert_state").text());
      check_writable_path(top.child("alert_state"), c.alert_state);
    }
    if (top.has("generator_url")) {
      c.generator_url = top.child("generator_url").text();
      // The link goes into every alert, to every receiver: no password may ride along.
      if (redact_url(c.generator_url) != c.generator_url)
        top.child("generator_url").fail("\"" + redact_url(c.generator_url) + "\": user information is not supported");
    }
    if (top.has("log_format")) {
      const std::string f = top.child("log_format").text();
      if (f == "logfmt") c.log_format = Log::Format::kLogfmt;
      else if (f == "json") c.log_format = Log::Format::kJson;
      else top.child("log_format").fail("\"" + f + "\" is not logfmt or json");
    }
    if (top.has("engine")) {
      c.engine = top.child("engine").text();
      // opencl and host are the names gpufilter's --engine documents; gpu and cpu stay.
      if (c.engine == "opencl") c.engine = "gpu";
      if (c.engine == "host") c.engine = "cpu";
      if (c.engine != "auto" && c.engine != "gpu" && c.engine != "cpu")
        top.child("engine").fail("\"" + c.engine + "\" is not auto, gpu or cpu");
    }
    if (top.has("device")) c.device = top.child("device").text();
    if (top.has("max_line_bytes")) c.max_line_bytes = top.child("max_line_bytes").number(16, 1u << 30);
    if (top.has("max_connections")) c.max_connections = top.child("max_connections").number(1, 1'000'000);
    if (top.has("drain_timeout")) c.drain_timeout = top.child("drain_timeout").duration();
  } catch (const YAML::Exception& e) {
    throw ConfigError(path + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  return c;
}

}  // namespace gpufilter::daemon
