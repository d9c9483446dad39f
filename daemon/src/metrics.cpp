// Metrics: counters, gauges and histograms behind one mutex, rendered in the Prometheus
// text exposition format 0.0.4 (metrics.hpp):
//   # HELP gpufilterd_lines_total Lines scanned.
//   # TYPE gpufilterd_lines_total counter
//   gpufilterd_lines_total{source="app.log"} 42
// Updates come per batch, not per line, so one mutex is cheap enough and keeps render()
// a consistent snapshot.
#include "gpufilter/daemon/metrics.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <iterator>

namespace gpufilter::daemon {

namespace {

// Prometheus client libraries' default buckets (seconds), for a histogram observed
// before anyone described it.
const std::vector<double> kDefaultBuckets = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};

// One label set is one series whatever order the caller wrote the labels in, so the map
// key is the set sorted by label name.
Labels normalized(const Labels& labels) {
  Labels sorted = labels;
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return sorted;
}

// 42, 0.25, 1e+300, +Inf, NaN: integral values without a decimal point (what people and
// dashboards expect for counts), anything else in its shortest round-trip form.
std::string format_number(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // 2^53: beyond it not every integer is a double, and the exponent form is shorter.
  if (value == std::trunc(value) && std::fabs(value) < 9007199254740992.0) {
    return std::to_string(static_cast<std::int64_t>(value));
  }
  char text[64];
  const auto result = std::to_chars(std::begin(text), std::end(text), value);
  return std::string(text, result.ptr);
}

// HELP text: backslash and newline escaped (quotes are literal there).
std::string escape_help(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

// Label values: backslash, double quote and newline escaped.
std::string escape_label_value(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

// {a="1",b="2"} with `extra` (le="0.5") last; empty when there is nothing to print.
std::string format_labels(const Labels& labels, const std::pair<std::string, std::string>* extra = nullptr) {
  if (labels.empty() && extra == nullptr) return {};
  std::string out = "{";
  bool first = true;
  const auto append = [&](const std::string& name, const std::string& value) {
    if (!first) out += ',';
    first = false;
    out += name;
    out += "=\"";
    out += escape_label_value(value);
    out += '"';
  };
  for (const auto& [name, value] : labels) append(name, value);
  if (extra != nullptr) append(extra->first, extra->second);
  out += '}';
  return out;
}

const char* type_name(Metrics::Type type) {
  switch (type) {
    case Metrics::Type::kCounter:
      return "counter";
    case Metrics::Type::kGauge:
      return "gauge";
    case Metrics::Type::kHistogram:
      return "histogram";
  }
  return "untyped";
}

}  // namespace

void Metrics::describe(const std::string& name, Type type, const std::string& help, std::vector<double> buckets) {
  if (type == Type::kHistogram) {
    // Bounds must be increasing and +Inf is implied; a NaN bound would match nothing.
    std::erase_if(buckets, [](double b) { return std::isnan(b) || std::isinf(b); });
    std::sort(buckets.begin(), buckets.end());
    buckets.erase(std::unique(buckets.begin(), buckets.end()), buckets.end());
    if (buckets.empty()) buckets = kDefaultBuckets;
  } else {
    buckets.clear();
  }
  std::lock_guard lock(mutex_);
  Family& family = families_[name];
  // Describing again keeps what fits the new shape: counter and gauge series carry over
  // (a family first used undescribed, then described, loses nothing); histogram series
  // survive only the same bounds, since their bucket counts are per bound.
  if (type == Type::kHistogram) {
    family.values.clear();
    if (family.type != Type::kHistogram || family.buckets != buckets) family.histograms.clear();
  } else {
    family.histograms.clear();
  }
  family.type = type;
  family.help = help;
  family.buckets = std::move(buckets);
}

// add/set/observe on a name nobody described still work: the family is described on the
// spot (a gauge for add and set, since a gauge may go either way; a histogram with the
// default buckets for observe) with the name as its help text. A metric is never lost
// to a forgotten describe(), and the daemon never fails over its own telemetry. A call
// of the wrong kind (add on a histogram, observe on a counter) is ignored for the same
// reason; value() in the tests is what catches it.

void Metrics::add(const std::string& name, const Labels& labels, double delta) {
  std::lock_guard lock(mutex_);
  auto [it, inserted] = families_.try_emplace(name);
  Family& family = it->second;
  if (inserted) {
    family.type = Type::kGauge;
    family.help = name;
  }
  if (family.type == Type::kHistogram) return;
  // A counter that goes down reads as a process restart to rate(): refuse it.
  if (family.type == Type::kCounter && !(delta >= 0)) return;
  family.values[normalized(labels)] += delta;
}

void Metrics::set(const std::string& name, const Labels& labels, double value) {
  std::lock_guard lock(mutex_);
  auto [it, inserted] = families_.try_emplace(name);
  Family& family = it->second;
  if (inserted) {
    family.type = Type::kGauge;
    family.help = name;
  }
  if (family.type == Type::kHistogram) return;
  family.values[normalized(labels)] = value;
}

void Metrics::observe(const std::string& name, const Labels& labels, double value) {
  std::lock_guard lock(mutex_);
  auto [it, inserted] = families_.try_emplace(name);
  Family& family = it->second;
  if (inserted) {
    family.type = Type::kHistogram;
    family.help = name;
    family.buckets = kDefaultBuckets;
  }
  if (family.type != Type::kHistogram) return;
  Histogram& histogram = family.histograms[normalized(labels)];
  if (histogram.counts.size() != family.buckets.size()) histogram.counts.assign(family.buckets.size(), 0);
  // le is "less than or equal"; a value above every bound only counts in +Inf (count).
  const auto bucket = std::lower_bound(family.buckets.begin(), family.buckets.end(), value);
  if (bucket != family.buckets.end()) histogram.counts[static_cast<std::size_t>(bucket - family.buckets.begin())] += 1;
  histogram.sum += value;
  histogram.count += 1;
}

std::string Metrics::render() const {
  std::lock_guard lock(mutex_);
  std::string out;
  for (const auto& [name, family] : families_) {
    out += "# HELP ";
    out += name;
    if (!family.help.empty()) {
      out += ' ';
      out += escape_help(family.help);
    }
    out += "\n# TYPE ";
    out += name;
    out += ' ';
    out += type_name(family.type);
    out += '\n';
    if (family.type != Type::kHistogram) {
      for (const auto& [labels, value] : family.values) {
        out += name + format_labels(labels) + ' ' + format_number(value) + '\n';
      }
      continue;
    }
    for (const auto& [labels, histogram] : family.histograms) {
      double cumulative = 0;
      for (std::size_t i = 0; i < family.buckets.size(); ++i) {
        cumulative += i < histogram.counts.size() ? histogram.counts[i] : 0;
        const std::pair<std::string, std::string> le{"le", format_number(family.buckets[i])};
        out += name + "_bucket" + format_labels(labels, &le) + ' ' + format_number(cumulative) + '\n';
      }
      const std::pair<std::string, std::string> inf{"le", "+Inf"};
      out += name + "_bucket" + format_labels(labels, &inf) + ' ' + format_number(histogram.count) + '\n';
      out += name + "_sum" + format_labels(labels) + ' ' + format_number(histogram.sum) + '\n';
      out += name + "_count" + format_labels(labels) + ' ' + format_number(histogram.count) + '\n';
    }
  }
  return out;
}

double Metrics::value(const std::string& name, const Labels& labels) const {
  std::lock_guard lock(mutex_);
  const auto family = families_.find(name);
  if (family == families_.end()) return 0;
  const Labels key = normalized(labels);
  // A histogram series answers with its number of observations.
  if (family->second.type == Type::kHistogram) {
    const auto series = family->second.histograms.find(key);
    return series == family->second.histograms.end() ? 0 : series->second.count;
  }
  const auto series = family->second.values.find(key);
  return series == family->second.values.end() ? 0 : series->second;
}

}  // namespace gpufilter::daemon
