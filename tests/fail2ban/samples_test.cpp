// fail2ban's own sample logs (tests/files/logs/, `# failJSON:` annotations) replayed as
// its tests/samplestestcase.py replays them: every failregex tried (checkAllRegex), time
// fixed at TEST_NOW in fail2ban's test time zone, each annotation's match, host, time and
// other fields checked, and every failregex required to match some sample.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <arpa/inet.h>

#include "gpufilter/fail2ban/filter.hpp"

namespace gpufilter::fail2ban {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kPackage = "/usr/lib/python3/dist-packages/fail2ban";
const std::string kLogs = kPackage + "/tests/files/logs";
constexpr double kTestNow = 1124013600;  // tests/utils.py TEST_NOW
constexpr int kMinFilesHeld = 89;        // what holds now, of the 93 entries

struct FileResult {
  int annotations = 0, held = 0, failed = 0, refused = 0;
  std::string reason;
  std::vector<std::string> messages;
  void fail(const std::string& m) {
    ++failed;
    if (messages.size() < 8) messages.push_back(m);
  }
};

struct FilterRun {
  Filter filter;
  std::set<std::size_t> used;
};

struct Refusal {
  std::string reason;
};

// The two kinds of Python expression the samples use: name == 'x', opts.get('k') ==/!= 'v'.
bool evaluate(const std::string& expr, const std::string& name, const json& opts) {
  static const std::regex by_name(R"(^\s*name\s*==\s*'([^']*)'\s*$)");
  static const std::regex by_opt(R"(^\s*opts\.get\('([^']*)'\)\s*(==|!=)\s*'([^']*)'\s*$)");
  std::smatch m;
  if (std::regex_match(expr, m, by_name)) return name == m[1].str();
  if (std::regex_match(expr, m, by_opt)) {
    const std::string value = opts.contains(m[1].str()) ? opts[m[1].str()].get<std::string>() : std::string("\x01");
    return (value == m[3].str()) == (m[2].str() == "==");
  }
  throw Refusal{"constraint not understood: " + expr};
}

double json_time(const std::string& t) {  // time.mktime(strptime(t)) + microseconds
  std::tm tm{};
  const char* rest = strptime(t.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  tm.tm_isdst = -1;
  double v = static_cast<double>(std::mktime(&tm));
  if (rest != nullptr && *rest == '.') v += std::stod("0" + std::string(rest));
  return v;
}

std::string normal_ip(const std::string& s) {  // IPAddr equality: parsed addresses compare
  unsigned char b[16];
  char out[INET6_ADDRSTRLEN];
  if (inet_pton(AF_INET, s.c_str(), b) == 1) return inet_ntop(AF_INET, b, out, sizeof out);
  if (inet_pton(AF_INET6, s.c_str(), b) == 1) return inet_ntop(AF_INET6, b, out, sizeof out);
  return s;
}

std::string text_of(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

class SampleFile {
 public:
  SampleFile(std::string name, std::string basedir) : name_(std::move(name)), basedir_(std::move(basedir)) {}
  FileResult run();

 private:
  FilterRun& read_filter(const std::string& flt_name, const json& opts);
  void filter_options(const json& data, const json& common);
  void check(const std::string& line, const json& faildata, const std::string& where);
  void check_one(FilterRun& run, const json& opts, const std::string& line, const json& faildata, const std::string& where);

  std::string name_, basedir_;
  std::map<std::string, std::unique_ptr<FilterRun>> filters_;
  std::vector<std::tuple<std::string, FilterRun*, json>> tests_;
  bool ignore_block_ = false;
  std::set<std::string> used_regex_;  // regexsUsedRe: a regex used by any option combination counts
  FileResult result_;
};

FilterRun& SampleFile::read_filter(const std::string& flt_name, const json& opts) {
  if (auto it = filters_.find(flt_name); it != filters_.end()) return *it->second;
  FilterOptions o;
  o.config_dir = basedir_;
  o.check_all_regex = true;
  o.now = kTestNow;
  for (const auto& [k, v] : opts.items()) o.values[k] = text_of(v);
  try {
    auto run = std::make_unique<FilterRun>(FilterRun{Filter::load(name_, o), {}});
    return *(filters_[flt_name] = std::move(run));
  } catch (const Fail2banError& e) {
    throw Refusal{e.what()};
  }
}

void SampleFile::filter_options(const json& data, const json& common) {
  tests_.clear();
  ignore_block_ = false;
  for (json opts : (data.is_array() ? data : json::array({data}))) {
    if (!common.empty()) {
      json merged = common;
      merged.update(opts);
      opts = merged;
    }
    if (opts.contains("test.condition")) ignore_block_ = !evaluate(opts["test.condition"], name_, opts);
    if (ignore_block_) continue;
    json flt_opts = json::object();
    for (const auto& [k, v] : opts.items()) {
      if (k.rfind("test.", 0) != 0) flt_opts[k] = v;
    }
    // Python names a combination by str(dict); any unique text will do here.
    std::string flt_name = opts.contains("test.filter-name") ? opts["test.filter-name"].get<std::string>()
                                                              : (flt_opts.empty() ? "" : flt_opts.dump());
    flt_name = name_ + flt_name;
    tests_.emplace_back(flt_name, &read_filter(flt_name, flt_opts), opts);
  }
}

void SampleFile::check_one(FilterRun& run, const json& opts, const std::string& line, const json& faildata,
                           const std::string& where) {
  ++result_.annotations;
  Filter::Outcome outcome = opts.value("logtype", "") == "journal"
                                ? run.filter.line(opts.value("test.prefix-line", "") + line, kTestNow)
                                : run.filter.line(line);
  std::vector<Filter::Failure> found;
  for (auto& f : outcome.failures) {
    run.used.insert(f.failregex);
    used_regex_.insert(run.filter.failregex()[f.failregex]);
    if (!f.pending && !f.nofail) found.push_back(f);
  }
  const bool expect = faildata.value("match", false);
  if (found.empty() || !expect) {
    if (found.empty() != !expect) return result_.fail(where + ": " + (expect ? "not matched" : "matched") + ": " + line);
    ++result_.held;
    return;
  }
  if (found.size() != 1) return result_.fail(where + ": several failregex matched: " + line);
  const Filter::Failure& f = found.front();
  for (const auto& [k, v] : faildata.items()) {
    if (k == "time" || k == "match" || k == "desc" || k == "constraint") continue;
    std::string got;
    if (k == "users") {
      std::vector<std::string> want = v.get<std::vector<std::string>>(), have = f.users ? *f.users : std::vector<std::string>();
      std::sort(want.begin(), want.end());
      std::sort(have.begin(), have.end());
      if (want != have) return result_.fail(where + ": users differ: " + line);
      continue;
    }
    if (f.fields.count(k)) {
      got = f.fields.at(k);
    } else if (k == "host") {
      got = f.id;
    } else if (k == "attempts") {
      got = std::to_string(f.attempts);
    } else if (v.is_null()) {
      continue;
    } else {
      return result_.fail(where + ": no " + k + " in the failure: " + line);
    }
    const std::string want = text_of(v);
    if (k == "host" ? normal_ip(got) != normal_ip(want) : got != want) {
      return result_.fail(where + ": " + k + " is " + got + ", not " + want + ": " + line);
    }
  }
  if (faildata.contains("time")) {
    const double want = json_time(faildata["time"]);
    if (!f.time || *f.time != want) {
      return result_.fail(where + ": time " + (f.time ? std::to_string(*f.time) : "none") + " != " + std::to_string(want) +
                          ": " + line);
    }
  }
  ++result_.held;
}

void SampleFile::check(const std::string& line, const json& faildata, const std::string& where) {
  if (tests_.empty()) tests_.emplace_back(name_, &read_filter(name_, json::object()), json::object());
  for (auto& [flt_name, run, opts] : tests_) {
    if (faildata.contains("constraint") && !evaluate(faildata["constraint"], name_, opts)) continue;
    check_one(*run, opts, line, faildata, flt_name + " " + where);
  }
}

FileResult SampleFile::run() {
  static const std::regex annotation(R"(^#+ ?(failJSON|(?:file|filter)Options|addFILE):(.+)$)");
  std::vector<std::string> files{name_};
  json common = json::object();
  try {
    for (std::size_t i = 0; i < files.size(); ++i) {
      std::ifstream in(kLogs + "/" + files[i]);
      std::vector<std::string> lines;
      for (std::string l; std::getline(in, l);) lines.push_back(l);
      for (std::size_t n = 0; n < lines.size(); ++n) {
        std::string line = lines[n];
        while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.pop_back();
        std::smatch m;
        json faildata = json::object();
        if (std::regex_match(line, m, annotation)) {
          faildata = json::parse(m[2].str());
          if (m[1] == "fileOptions") { common = faildata; continue; }
          if (m[1] == "filterOptions") { filter_options(faildata, common); continue; }
          if (m[1] == "addFILE") { files.push_back(faildata.get<std::string>()); continue; }
          if (++n >= lines.size()) break;
          line = lines[n];
          while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.pop_back();
        } else if (ignore_block_ || line.rfind('#', 0) == 0 || line.find_first_not_of(" \t\r\n") == std::string::npos) {
          continue;
        }
        if (ignore_block_) continue;
        check(line, faildata, files[i] + ":" + std::to_string(n + 1));
      }
    }
  } catch (const Refusal& r) {
    result_.refused = std::max(1, result_.annotations - result_.held - result_.failed);
    result_.reason = r.reason;
    return result_;
  }
  for (const auto& [flt_name, run] : filters_) {
    for (std::size_t i = 0; i < run->filter.failregex().size(); ++i) {
      if (!run->used.count(i) && !used_regex_.count(run->filter.failregex()[i])) result_.fail(flt_name + ": failregex " + std::to_string(i) + " has no samples");
    }
  }
  return result_;
}

TEST(Fail2banSamples, EveryAnnotationHolds) {
  ASSERT_TRUE(fs::is_directory(kLogs)) << kLogs << " is missing: install Debian's fail2ban 1.0.2 (README's set-up)";
  // tests/utils.py: fail2ban's tests run in Europe/Zurich, given as a POSIX rule.
  setenv("TZ", "CET-01CEST-02,M3.5.0,M10.5.0", 1);
  tzset();
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(kLogs)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  int files_held = 0, annotations = 0, held = 0, failed = 0, refused = 0;
  for (const std::string& name : names) {
    const std::string basedir = name.rfind("zzz-", 0) == 0 ? kPackage + "/tests/config" : "/etc/fail2ban";
    FileResult r;
    if (fs::is_directory(kLogs + "/" + name)) {
      r.refused = 1;
      r.reason = "a folder of logs, no filter reads it in samplestestcase";
    } else if (!fs::exists(basedir + "/filter.d/" + name + ".conf")) {
      r.refused = 1;
      r.reason = "no filter of that name (samplestestcase reads it only through another file's addFILE)";
    } else {
      r = SampleFile(name, basedir).run();
    }
    std::cout << name << ": " << r.annotations << " annotations, " << r.held << " held, " << r.failed << " failed, "
              << r.refused << " refused" << (r.reason.empty() ? "" : " (" + r.reason + ")") << "\n";
    for (const auto& m : r.messages) std::cout << "    " << m << "\n";
    files_held += (r.failed == 0 && r.refused == 0) ? 1 : 0;
    annotations += r.annotations;
    held += r.held;
    failed += r.failed;
    refused += r.refused;
  }
  std::cout << "TOTAL: " << names.size() << " files, " << files_held << " held entirely; " << annotations
            << " annotations, " << held << " held, " << failed << " failed, " << refused << " refused\n";
  EXPECT_EQ(failed, 0);
  EXPECT_GE(files_held, kMinFilesHeld);
}

}  // namespace
}  // namespace gpufilter::fail2ban
