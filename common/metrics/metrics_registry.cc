#include "common/metrics/metrics_registry.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace pdserve {
namespace {

bool IsValidName(absl::string_view name) {
  if (name.empty() || absl::ascii_isdigit(name[0])) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return absl::ascii_isalnum(c) || c == '_' || c == ':'; });
}

void AppendSeriesName(absl::string_view name, const MetricLabels& labels,
                      const std::pair<std::string, std::string>* extra, std::string* out) {
  absl::StrAppend(out, name);
  if (labels.empty() && extra == nullptr) return;
  out->push_back('{');
  bool first = true;
  auto append = [&](const std::pair<std::string, std::string>& l) {
    if (!first) out->push_back(',');
    first = false;
    absl::StrAppend(out, l.first, "=\"", EscapeLabelValue(l.second), "\"");
  };
  for (const auto& l : labels) append(l);
  if (extra != nullptr) append(*extra);
  out->push_back('}');
}

void AppendSample(absl::string_view name, const MetricLabels& labels, double value,
                  std::string* out, const std::pair<std::string, std::string>* extra = nullptr) {
  AppendSeriesName(name, labels, extra, out);
  absl::StrAppend(out, " ", FormatMetricValue(value), "\n");
}

const char* TypeName(int type) {
  static const char* const kNames[] = {"counter", "gauge", "histogram"};
  return kNames[type];
}

}  // namespace

void Counter::Increment(double amount) {
  if (!(amount > 0.0)) return;  // also drops NaN
  value_.fetch_add(amount, std::memory_order_relaxed);
}

void Gauge::Add(double delta) { value_.fetch_add(delta, std::memory_order_relaxed); }

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {
  for (size_t i = 0; i < bounds_.size(); ++i) {
    CHECK(std::isfinite(bounds_[i])) << "histogram bound must be finite";
    CHECK(i == 0 || bounds_[i - 1] < bounds_[i]) << "histogram bounds must increase";
  }
}

void Histogram::Observe(double v) {
  // "le" buckets: v lands in the first bucket whose bound is >= v.
  const size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin();
  absl::MutexLock lock(&mu_);
  ++counts_[i];
  sum_ += v;
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  s.bounds = bounds_;
  absl::MutexLock lock(&mu_);
  s.cumulative.reserve(counts_.size());
  for (uint64_t c : counts_) {
    s.count += c;
    s.cumulative.push_back(s.count);
  }
  s.sum = sum_;
  return s;
}

MetricsRegistry::Series& MetricsRegistry::GetSeries(absl::string_view name,
                                                    absl::string_view help, Type type,
                                                    const MetricLabels& labels) {
  CHECK(IsValidName(name)) << "invalid metric name \"" << name << "\"";
  for (const auto& l : labels) {
    CHECK(IsValidName(l.first) && l.first.find(':') == std::string::npos && l.first != "le")
        << "invalid label name \"" << l.first << "\" on " << name;
  }
  auto it = families_.find(name);
  if (it == families_.end()) {
    it = families_.emplace(std::string(name), Family{type, std::string(help), {}, {}}).first;
  }
  CHECK(it->second.type == type) << "metric " << name << " registered with two types";
  return it->second.series[labels];
}

Counter* MetricsRegistry::GetCounter(absl::string_view name, absl::string_view help,
                                     const MetricLabels& labels) {
  absl::MutexLock lock(&mu_);
  Series& s = GetSeries(name, help, Type::kCounter, labels);
  CHECK(s.callback == nullptr) << name << " is already a callback counter";
  if (s.counter == nullptr) s.counter = std::make_unique<Counter>();
  return s.counter.get();
}

Gauge* MetricsRegistry::GetGauge(absl::string_view name, absl::string_view help,
                                 const MetricLabels& labels) {
  absl::MutexLock lock(&mu_);
  Series& s = GetSeries(name, help, Type::kGauge, labels);
  CHECK(s.callback == nullptr) << name << " is already a callback gauge";
  if (s.gauge == nullptr) s.gauge = std::make_unique<Gauge>();
  return s.gauge.get();
}

void MetricsRegistry::AddCallbackGauge(absl::string_view name, absl::string_view help,
                                       std::function<double()> fn, const MetricLabels& labels) {
  CHECK(fn != nullptr);
  absl::MutexLock lock(&mu_);
  Series& s = GetSeries(name, help, Type::kGauge, labels);
  CHECK(s.gauge == nullptr) << name << " is already a plain gauge";
  s.callback = std::move(fn);
}

void MetricsRegistry::AddCallbackCounter(absl::string_view name, absl::string_view help,
                                         std::function<double()> fn, const MetricLabels& labels) {
  CHECK(fn != nullptr);
  absl::MutexLock lock(&mu_);
  Series& s = GetSeries(name, help, Type::kCounter, labels);
  CHECK(s.counter == nullptr) << name << " is already a plain counter";
  s.callback = std::move(fn);
}

Histogram* MetricsRegistry::GetHistogram(absl::string_view name, absl::string_view help,
                                         const std::vector<double>& bounds,
                                         const MetricLabels& labels) {
  absl::MutexLock lock(&mu_);
  Series& s = GetSeries(name, help, Type::kHistogram, labels);
  Family& f = families_.find(name)->second;
  if (f.series.size() == 1 && s.histogram == nullptr) f.bounds = bounds;
  if (s.histogram == nullptr) s.histogram = std::make_unique<Histogram>(f.bounds);
  return s.histogram.get();
}

std::string MetricsRegistry::Expose() const {
  std::string out;
  absl::MutexLock lock(&mu_);
  for (const auto& [name, f] : families_) {
    absl::StrAppend(&out, "# HELP ", name, " ", EscapeHelp(f.help), "\n");
    absl::StrAppend(&out, "# TYPE ", name, " ", TypeName(static_cast<int>(f.type)), "\n");
    for (const auto& [labels, s] : f.series) {
      if (s.counter != nullptr) AppendSample(name, labels, s.counter->value(), &out);
      if (s.gauge != nullptr) AppendSample(name, labels, s.gauge->value(), &out);
      if (s.callback != nullptr) AppendSample(name, labels, s.callback(), &out);
      if (s.histogram == nullptr) continue;
      const Histogram::Snapshot h = s.histogram->snapshot();
      const std::string bucket = absl::StrCat(name, "_bucket");
      for (size_t i = 0; i < h.cumulative.size(); ++i) {
        const std::pair<std::string, std::string> le(
            "le", i < h.bounds.size() ? FormatMetricValue(h.bounds[i]) : "+Inf");
        AppendSample(bucket, labels, static_cast<double>(h.cumulative[i]), &out, &le);
      }
      AppendSample(absl::StrCat(name, "_sum"), labels, h.sum, &out);
      AppendSample(absl::StrCat(name, "_count"), labels, static_cast<double>(h.count), &out);
    }
  }
  return out;
}

std::string FormatMetricValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[32];
  const std::to_chars_result r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

std::string EscapeLabelValue(absl::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string EscapeHelp(absl::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::vector<double> LatencySecondsBuckets() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
}

}  // namespace pdserve
