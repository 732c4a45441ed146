// A small Prometheus registry: counters, gauges and histograms with labels,
// rendered in the text exposition format (version 0.0.4).
//
// Families are created once at start-up; children (one per label set) are
// created on first use and live as long as the registry, so the references
// handed out stay valid. Updating a child is lock-free (atomics); creating a
// child and rendering take the registry's mutex.
//
// Thread-safety: every method is safe from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace gemma::server::ops {

// Label name -> value, in the order they are rendered.
using Labels = std::vector<std::pair<std::string, std::string>>;

class Counter {
 public:
  void Inc(double amount = 1.0) { value_.fetch_add(amount, std::memory_order_relaxed); }
  // For counters mirrored from a monotonic source (the engine's totals).
  void Set(double total) { value_.store(total, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Gauge {
 public:
  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Histogram {
 public:
  // `bounds`: upper bounds, strictly increasing; +Inf is implied.
  explicit Histogram(std::vector<double> bounds);
  void Observe(double value);
  // Cumulative counts per bound, then the +Inf count.
  std::vector<uint64_t> CumulativeCounts() const;
  const std::vector<double>& bounds() const { return bounds_; }
  double sum() const { return sum_.load(std::memory_order_relaxed); }
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }

 private:
  const std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // bounds_.size() + 1
  std::atomic<double> sum_{0.0};
  std::atomic<uint64_t> count_{0};
};

// Bucket bounds start, start*factor, ... (`count` of them).
std::vector<double> ExponentialBuckets(double start, double factor, int count);

class MetricsRegistry {
 public:
  enum class Type { kCounter, kGauge, kHistogram };

  // REQUIRES: `name` is a valid metric name, registered once; counters end
  // in "_total". `label_names` fixes the labels each child must give.
  void AddFamily(const std::string& name, Type type, const std::string& help,
                 std::vector<std::string> label_names = {},
                 std::vector<double> histogram_bounds = {});

  // The child of family `name` with these label values (in the order of
  // the family's label names). REQUIRES: the family exists with that type.
  Counter& GetCounter(const std::string& name, const std::vector<std::string>& values = {});
  Gauge& GetGauge(const std::string& name, const std::vector<std::string>& values = {});
  Histogram& GetHistogram(const std::string& name, const std::vector<std::string>& values = {});

  // The whole registry in the text format.
  std::string Render() const;

 private:
  struct Child {
    Counter counter;
    Gauge gauge;
    std::unique_ptr<Histogram> histogram;
  };
  struct Family {
    Type type;
    std::string help;
    std::vector<std::string> label_names;
    std::vector<double> bounds;
    std::map<std::vector<std::string>, std::unique_ptr<Child>> children;
  };
  Child& GetChild(const std::string& name, Type type, const std::vector<std::string>& values);
  static void RenderFamily(const std::string& name, const Family& family, std::string* out);

  mutable std::mutex mu_;
  std::map<std::string, Family> families_;
};

}  // namespace gemma::server::ops
