// MetricsRegistry: a tiny Prometheus metrics registry (counters, gauges,
// callback gauges evaluated at scrape time, fixed-bucket histograms) and
// its exposition in the Prometheus text format 0.0.4.
//
// Deliberately small: metric families are registered once at start-up,
// series (label sets) are created on first use and live as long as the
// registry. Updating a metric never takes the registry's lock.
//
// Thread-safety: everything is thread-safe. Callback gauges run on the
// scraping thread with the registry locked, so they must be cheap and must
// not call back into the registry.
#ifndef PDSERVE_COMMON_METRICS_METRICS_REGISTRY_H_
#define PDSERVE_COMMON_METRICS_METRICS_REGISTRY_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace pdserve {

// Label name/value pairs of one series, in the order they are printed.
using MetricLabels = std::vector<std::pair<std::string, std::string>>;

// Monotonic; Increment() with a negative amount is ignored.
class Counter {
 public:
  void Increment(double amount = 1.0);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Add(double delta);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Histogram {
 public:
  // `bounds`: the buckets' upper bounds (inclusive, "le"), strictly
  // increasing, finite; +Inf is implicit.
  explicit Histogram(std::vector<double> bounds);

  void Observe(double v);

  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;  // per bound, then +Inf (== count)
    double sum = 0.0;
    uint64_t count = 0;
  };
  Snapshot snapshot() const;

 private:
  const std::vector<double> bounds_;
  mutable absl::Mutex mu_;
  // Per-bucket (not cumulative) counts; the last one is (bounds_.back(), +Inf].
  std::vector<uint64_t> counts_ ABSL_GUARDED_BY(mu_);
  double sum_ ABSL_GUARDED_BY(mu_) = 0.0;
};

class MetricsRegistry {
 public:
  MetricsRegistry() = default;
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // Get-or-create: the same name and labels return the same series. A name
  // reused with another type, or an invalid name, is a programming error
  // (CHECK). The first registration of a name sets its help text.
  Counter* GetCounter(absl::string_view name, absl::string_view help,
                      const MetricLabels& labels = {});
  Gauge* GetGauge(absl::string_view name, absl::string_view help,
                  const MetricLabels& labels = {});
  // Histograms of one family share the bounds of its first series.
  Histogram* GetHistogram(absl::string_view name, absl::string_view help,
                          const std::vector<double>& bounds, const MetricLabels& labels = {});
  // `fn` is evaluated at every scrape. Registering the same series twice
  // replaces the callback.
  void AddCallbackGauge(absl::string_view name, absl::string_view help,
                        std::function<double()> fn, const MetricLabels& labels = {});
  // A counter whose value `fn` reads at every scrape from a cumulative
  // count kept elsewhere (e.g. published by an engine thread); `fn` must
  // never decrease.
  void AddCallbackCounter(absl::string_view name, absl::string_view help,
                          std::function<double()> fn, const MetricLabels& labels = {});

  // All families, sorted by name, in text format 0.0.4.
  std::string Expose() const;

 private:
  enum class Type { kCounter, kGauge, kHistogram };
  struct Series {
    std::unique_ptr<Counter> counter;
    std::unique_ptr<Gauge> gauge;
    std::function<double()> callback;
    std::unique_ptr<Histogram> histogram;
  };
  struct Family {
    Type type;
    std::string help;
    std::vector<double> bounds;
    std::map<MetricLabels, Series> series;
  };

  Series& GetSeries(absl::string_view name, absl::string_view help, Type type,
                    const MetricLabels& labels) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::map<std::string, Family, std::less<>> families_ ABSL_GUARDED_BY(mu_);
};

// Exposition helpers, exposed for tests.
// A sample value: shortest round-trip decimal, "+Inf", "-Inf" or "NaN".
std::string FormatMetricValue(double v);
// Label values escape \, " and newline; help text escapes \ and newline.
std::string EscapeLabelValue(absl::string_view v);
std::string EscapeHelp(absl::string_view v);

// Bucket bounds for request latencies in seconds: 5 ms .. 2 min.
std::vector<double> LatencySecondsBuckets();

}  // namespace pdserve

#endif  // PDSERVE_COMMON_METRICS_METRICS_REGISTRY_H_
