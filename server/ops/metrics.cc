#include "server/ops/metrics.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "fmt/format.h"

namespace gemma::server::ops {
namespace {

const char* TypeName(MetricsRegistry::Type type) {
  switch (type) {
    case MetricsRegistry::Type::kCounter:
      return "counter";
    case MetricsRegistry::Type::kGauge:
      return "gauge";
    case MetricsRegistry::Type::kHistogram:
      return "histogram";
  }
  return "untyped";
}

// Label values may hold anything; the format escapes \, " and newline.
std::string EscapeLabelValue(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      default: out += c;
    }
  }
  return out;
}

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", value);
}

// "{a="x",b="y"}" (empty when there are no labels); `extra` is appended
// already rendered (the histogram's le).
std::string RenderLabels(const std::vector<std::string>& names,
                         const std::vector<std::string>& values, const std::string& extra = "") {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    out +=
        fmt::format("{}{}=\"{}\"", out.empty() ? "" : ",", names[i], EscapeLabelValue(values[i]));
  }
  if (!extra.empty()) out += (out.empty() ? "" : ",") + extra;
  return out.empty() ? "" : "{" + out + "}";
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), buckets_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  for (size_t i = 0; i <= bounds_.size(); ++i) buckets_[i].store(0);
}

void Histogram::Observe(double value) {
  const size_t bucket = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  buckets_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
}

std::vector<uint64_t> Histogram::CumulativeCounts() const {
  std::vector<uint64_t> counts(bounds_.size() + 1);
  uint64_t running = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    running += buckets_[i].load(std::memory_order_relaxed);
    counts[i] = running;
  }
  return counts;
}

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  std::vector<double> bounds;
  double bound = start;
  for (int i = 0; i < count; ++i, bound *= factor) bounds.push_back(bound);
  return bounds;
}

void MetricsRegistry::AddFamily(const std::string& name, Type type, const std::string& help,
                                std::vector<std::string> label_names,
                                std::vector<double> histogram_bounds) {
  std::lock_guard<std::mutex> lock(mu_);
  Family& family = families_[name];
  family.type = type;
  family.help = help;
  family.label_names = std::move(label_names);
  family.bounds = std::move(histogram_bounds);
}

MetricsRegistry::Child& MetricsRegistry::GetChild(const std::string& name, Type type,
                                                  const std::vector<std::string>& values) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = families_.find(name);
  // A programming error (names are compile-time constants), not bad input.
  if (it == families_.end() || it->second.type != type ||
      it->second.label_names.size() != values.size()) {
    throw std::logic_error("metric " + name + ": unknown, wrong type or wrong labels");
  }
  std::unique_ptr<Child>& child = it->second.children[values];
  if (child == nullptr) {
    child = std::make_unique<Child>();
    if (type == Type::kHistogram) child->histogram = std::make_unique<Histogram>(it->second.bounds);
  }
  return *child;
}

Counter& MetricsRegistry::GetCounter(const std::string& name,
                                     const std::vector<std::string>& values) {
  return GetChild(name, Type::kCounter, values).counter;
}

Gauge& MetricsRegistry::GetGauge(const std::string& name, const std::vector<std::string>& values) {
  return GetChild(name, Type::kGauge, values).gauge;
}

Histogram& MetricsRegistry::GetHistogram(const std::string& name,
                                         const std::vector<std::string>& values) {
  return *GetChild(name, Type::kHistogram, values).histogram;
}

void MetricsRegistry::RenderFamily(const std::string& name, const Family& family,
                                   std::string* out) {
  *out +=
      fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, family.help, name, TypeName(family.type));
  for (const auto& [values, child] : family.children) {
    const std::vector<std::string>& names = family.label_names;
    if (family.type == Type::kCounter) {
      *out += fmt::format("{}{} {}\n", name, RenderLabels(names, values),
                          FormatValue(child->counter.value()));
    } else if (family.type == Type::kGauge) {
      *out += fmt::format("{}{} {}\n", name, RenderLabels(names, values),
                          FormatValue(child->gauge.value()));
    } else {
      const Histogram& h = *child->histogram;
      const std::vector<uint64_t> counts = h.CumulativeCounts();
      for (size_t i = 0; i < counts.size(); ++i) {
        const double bound = i < h.bounds().size() ? h.bounds()[i] : INFINITY;
        const std::string le = fmt::format("le=\"{}\"", FormatValue(bound));
        *out += fmt::format("{}_bucket{} {}\n", name, RenderLabels(names, values, le), counts[i]);
      }
      *out += fmt::format("{}_sum{} {}\n", name, RenderLabels(names, values), FormatValue(h.sum()));
      // The +Inf bucket, not count(): equal by definition even while an
      // Observe races with the scrape.
      *out += fmt::format("{}_count{} {}\n", name, RenderLabels(names, values), counts.back());
    }
  }
}

std::string MetricsRegistry::Render() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  for (const auto& [name, family] : families_) RenderFamily(name, family, &out);
  return out;
}

}  // namespace gemma::server::ops
