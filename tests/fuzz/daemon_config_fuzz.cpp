// daemon_config_fuzz: gpufilterd's YAML config loader (daemon/src/config.cpp).
//
// The input is the config file, parsed as load_config parses what it read from c.yaml in a
// directory of the target's own, which holds a patterns file "p" for patterns_file; the
// working directory is that one only while the config loads. '/' and '\' in the input become '_': no path, escaped or not, can
// leave that directory (a patterns_file of /dev/zero would never end). ConfigError is the
// expected failure; any other exception, a crash or a sanitizer report is a bug. A config
// that loads must keep the promises the daemon relies on (checked below).
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

#include "gpufilter/daemon/config.hpp"
#include "gpufilter/core/errors.hpp"

#include "fuzz_support.hpp"

namespace {

using gpufilter::daemon::DaemonConfig;
using gpufilter::daemon::Millis;

const gpufilter::fuzz::ScratchDir* g_dir = nullptr;  // a patterns file "p"

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "daemon_config_fuzz: a loaded config breaks a promise: %s\n", what.c_str());
  __builtin_trap();
}

void check(const DaemonConfig& c) {
  if (c.sources.empty()) fail("no sources");
  for (const auto& s : c.sources) {
    if (s.kind == gpufilter::daemon::SourceConfig::Kind::kFollow && s.paths.empty()) fail("a follow source without files");
    if (s.poll_interval && s.poll_interval->count() < 0) fail("a negative poll interval");
  }
  if (c.rules.empty()) fail("no rules");
  std::set<std::string> names;
  for (const auto& r : c.rules) {
    if (r.name.empty() || !names.insert(r.name).second) fail("a rule name is empty or used twice");
    if (r.patterns.empty()) fail("a rule without patterns");
    for (const std::string& p : r.patterns)
      if (p.empty() || p.find('\n') != std::string::npos) fail("an empty pattern or one with a newline");
    if (r.threshold.count < 1 || r.threshold.count > 1'000'000) fail("threshold count out of range");
    if (r.threshold.count > 1 && r.threshold.window.count() <= 0) fail("a count above 1 without a window");
    if (r.threshold.window.count() < 0 || r.cooldown.count() < 0 || r.resolve_after.count() < 0)
      fail("a negative duration");
    if (r.threshold.group_by == gpufilter::daemon::ThresholdConfig::GroupBy::kField && r.threshold.field_after.empty())
      fail("an empty field_after");
  }
  if (c.outputs.empty()) fail("no outputs");
  for (const auto& o : c.outputs) {
    if (o.kind != gpufilter::daemon::OutputConfig::Kind::kJsonl && o.url.empty()) fail("an HTTP output without a url");
    if (o.queue < 1 || o.queue > 10'000'000) fail("output queue out of range");
    if (o.timeout.count() < 0 || o.resend_interval.count() < 0) fail("a negative output duration");
  }
  if (c.max_line_bytes < 16 || c.max_line_bytes > (1u << 30)) fail("max_line_bytes out of range");
  if (c.max_connections < 1 || c.max_connections > 1'000'000) fail("max_connections out of range");
  if (c.drain_timeout.count() < 0) fail("a negative drain timeout");
  if (c.engine != "auto" && c.engine != "gpu" && c.engine != "cpu") fail("an unknown engine");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  static const gpufilter::fuzz::ScratchDir dir("config", {{"p", "# comment\r\nFailed password\n\nInvalid user\r\n"}});
  g_dir = &dir;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  for (char& c : text)
    if (c == '/' || c == '\\') c = '_';
  g_dir->run([&] {
    try {
      check(gpufilter::daemon::parse_config(text, "c.yaml"));
    } catch (const gpufilter::ConfigError&) {
    }
  });
  // The durations parser on its own, with the input as the text: never UB, never negative.
  const std::optional<Millis> d = gpufilter::daemon::parse_duration(text.substr(0, 64));
  if (d && d->count() < 0) fail("parse_duration gave a negative duration");
  return 0;
}
