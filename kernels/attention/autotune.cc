#include "kernels/attention/autotune.h"

#include <cuda_runtime.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

namespace gemma::kernels::attention {
namespace {

// Until configured (programs that use the kernels without the engine's
// Tuner): the two switches' documented meaning, read here.
std::string DefaultPath() {
  if (const char* p = std::getenv("GEMMA_AUTOTUNE_CACHE"); p != nullptr && *p != '\0') return p;
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : ".") + "/.cache/gemma-serve/autotune.txt";
}

bool DefaultEnabled() {
  const char* v = std::getenv("GEMMA_AUTOTUNE");
  return v == nullptr || std::string(v) != "0";
}

std::string DeviceName() {
  static std::mutex mu;
  static std::map<int, std::string> names;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return "unknown-gpu";
  std::lock_guard<std::mutex> lock(mu);
  auto it = names.find(device);
  if (it != names.end()) return it->second;
  cudaDeviceProp prop{};
  std::string name = cudaGetDeviceProperties(&prop, device) == cudaSuccess ? prop.name : "unknown-gpu";
  for (char& c : name)
    if (c == ' ' || c == '\t' || c == '/') c = '_';
  names.emplace(device, name);
  return name;
}

}  // namespace

AutotuneCache& AutotuneCache::Get() {
  static AutotuneCache* cache = new AutotuneCache();  // never destroyed: used at exit
  return *cache;
}

AutotuneCache::AutotuneCache() : enabled_(DefaultEnabled()), path_(DefaultPath()) {}

void AutotuneCache::Configure(bool enabled, const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  enabled_ = enabled;
  if (path == path_) return;
  path_ = path;
  loaded_ = false;
  entries_.clear();
}

bool AutotuneCache::enabled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return enabled_;
}

std::string AutotuneCache::Key(const char* kernel, int head_dim, const std::string& bucket) {
  return DeviceName() + "/" + kernel + "/D" + std::to_string(head_dim) + "/" + bucket;
}

std::string AutotuneCache::Key(const char* kernel, const std::string& bucket) {
  return DeviceName() + "/" + kernel + "/" + bucket;
}

void AutotuneCache::LoadLocked() {
  loaded_ = true;
  std::ifstream in(path_);
  std::string line;
  while (std::getline(in, line)) {
    const size_t tab = line.find('\t');
    if (tab == std::string::npos || tab == 0 || tab + 1 == line.size()) continue;
    entries_[line.substr(0, tab)] = line.substr(tab + 1);  // later lines win
  }
}

std::optional<std::string> AutotuneCache::Lookup(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!loaded_) LoadLocked();
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

void AutotuneCache::Store(const std::string& key, const std::string& config) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!loaded_) LoadLocked();
  entries_[key] = config;
  std::error_code ec;
  const std::filesystem::path path(path_);
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  std::ofstream out(path_, std::ios::app);
  if (out) out << key << '\t' << config << '\n';
}

}  // namespace gemma::kernels::attention
