// Process-wide cache of autotuned kernel configurations, keyed by
// (GPU name, kernel, head_dim, shape bucket), backed by a small text file so a
// restart skips the timing (and picks the same kernels: a re-timed choice
// can differ between start-ups and, with it, the summation order). Also used
// by the decode GEMVs' tuning (engine/cuda/linear.cc). One line per entry: "<key>\t<config name>".
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

  // False when env GEMMA_AUTOTUNE is "0" (fixed default configurations).
  bool enabled() const { return enabled_; }

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

  const bool enabled_;
  const std::string path_;
  std::mutex mu_;
  bool loaded_ = false;
  std::unordered_map<std::string, std::string> entries_;
};

}  // namespace gemma::kernels::attention
