// Process-wide cache of autotuned kernel configurations, keyed by
// (GPU name, kernel, head_dim, shape bucket), backed by a small text file so a
// restart skips the timing (and picks the same kernels: a re-timed choice
// can differ between start-ups and, with it, the summation order). Also used
// by the engine's linear tuning (engine/cuda/linear/). One line per entry: "<key>\t<config name>".
// Where it lives and whether it is used is configured by its user (the
// engine's Tuner, from its GEMMA_AUTOTUNE / GEMMA_AUTOTUNE_CACHE switches);
// until then (kernel tests and benchmarks) it reads those two variables
// itself, with the same meaning (docs/tuning.md).
// Thread-safe: one mutex around a hash map (a prefill launch does one lookup).
#pragma once

#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace gemma::kernels::attention {

class AutotuneCache {
 public:
  // The process's cache; the file is read at the first lookup.
  static AutotuneCache& Get();

  // Off: fixed default configurations, nothing read or written. A new path
  // drops what was loaded from the old one.
  void Configure(bool enabled, const std::string& path);
  // False when configured off.
  bool enabled() const;

  std::optional<std::string> Lookup(const std::string& key);
  // Remembers and appends to the file; a file that cannot be written only
  // costs a re-tune after restart.
  void Store(const std::string& key, const std::string& config);

  // "<gpu>/<kernel>/D<head_dim>/<bucket>"; the GPU name of the current device
  // with blanks replaced.
  static std::string Key(const char* kernel, int head_dim, const std::string& bucket);
  // "<gpu>/<kernel>/<bucket>", for kernels not keyed by head_dim (the GEMVs).
  static std::string Key(const char* kernel, const std::string& bucket);

 private:
  AutotuneCache();
  void LoadLocked();

  mutable std::mutex mu_;
  bool enabled_ = true;
  std::string path_;
  bool loaded_ = false;
  std::unordered_map<std::string, std::string> entries_;
};

}  // namespace gemma::kernels::attention
