// Metrics: gpufilterd's counters, gauges and histograms, rendered in the Prometheus text
// exposition format (version 0.0.4) for GET /metrics. Thread-safe: updated from the scan
// thread (per batch, not per line), the I/O thread and the output threads.
#pragma once

#include <initializer_list>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpufilter::daemon {

using Labels = std::vector<std::pair<std::string, std::string>>;

class Metrics {
 public:
  enum class Type { kCounter, kGauge, kHistogram };
  // Declares a metric family once: its type, help text and (histograms) bucket bounds.
  void describe(const std::string& name, Type type, const std::string& help, std::vector<double> buckets = {});
  void add(const std::string& name, const Labels& labels, double delta);   // counter or gauge
  void set(const std::string& name, const Labels& labels, double value);   // gauge (or counter to a total)
  void observe(const std::string& name, const Labels& labels, double value);  // histogram
  // Every family, HELP and TYPE lines first, series sorted by labels; label values escaped.
  std::string render() const;
  // The current value of a counter or gauge series (0 when absent): for tests and logs.
  double value(const std::string& name, const Labels& labels) const;

 private:
  struct Histogram {
    std::vector<double> counts;  // per bucket (cumulative when rendered)
    double sum = 0;
    double count = 0;
  };
  struct Family {
    Type type = Type::kCounter;
    std::string help;
    std::vector<double> buckets;
    std::map<Labels, double> values;
    std::map<Labels, Histogram> histograms;
  };
  mutable std::mutex mutex_;
  std::map<std::string, Family> families_;
};

}  // namespace gpufilter::daemon
