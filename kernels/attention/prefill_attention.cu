// Prefill launcher: picks a tile configuration (autotuned per GPU, head_dim
// and shape bucket) and launches the tile kernel with one head per block.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <span>
#include <tuple>

#include "kernels/attention/attention.h"
#include "kernels/attention/autotune.h"
#include "kernels/attention/prefill_tuning.h"
#include "kernels/attention/kernel_params.h"
#include "kernels/attention/launch_common.h"
#include "kernels/common/launch.h"

namespace gemma::kernels {
namespace {

using attention::AutotuneCache;
using attention::KernelEntry;
using attention::KernelTable;

constexpr int kTimedBudgetMs = 50;  // per configuration, after one warm-up

// Raises every configuration's shared-memory limit, once per head_dim (the
// autotuner calls this first; a launch with autotuning off does it itself).
// The instances of one cache dtype only: a bf16 launch never depends on the
// E4M3 builds (nor loads them).
std::string SetUpEntries(int head_dim, std::span<const KernelEntry> entries, bool kv_fp8) {
  static std::mutex mu;
  // (device, head_dim, fp8) -> "" or the error: the limits belong to one device's context.
  static std::map<std::tuple<int, int, bool>, std::string> results;
  std::lock_guard<std::mutex> lock(mu);
  const std::tuple<int, int, bool> key{CurrentDevice(), head_dim, kv_fp8};
  auto it = results.find(key);
  if (it != results.end()) return it->second;
  std::string error;
  for (const KernelEntry& e : entries) {
    cudaError_t (*setup)() = kv_fp8 ? e.setup_fp8 : e.setup;
    if (setup == nullptr) continue;
    if (cudaError_t err = setup(); err != cudaSuccess && error.empty())
      error = "prefill attention: cannot set shared memory of " + e.name + ": " + cudaGetErrorString(err);
  }
  results.emplace(key, error);
  return error;
}

std::string SetUpTable(int head_dim, const KernelTable& table, bool kv_fp8) {
  return SetUpEntries(head_dim, table.prefill, kv_fp8);
}

// Shape bucket: chunks of >= 8192 tokens behave alike (the kernel is in its
// steady state), so 128K prefill reuses what a cheap 8K timing found.
std::string Bucket(const AttentionParams& p) {
  int q = 64;
  while (q < p.max_q_len && q < 8192) q *= 2;
  return "q" + std::to_string(q) + "-g" + std::to_string(p.num_heads / p.num_kv_heads) + "-w" +
         (p.window > 0 ? "1" : "0") + (p.kv_fp8 ? "-fp8" : "");
}

std::string Launch(const KernelEntry& e, const AttentionParams& p, cudaStream_t stream) {
  attention::KernelParams k = attention::ToKernelParams(p);
  k.heads_per_block = 1;
  k.tokens_per_block = e.block_m;
  const int m_tiles = (p.max_q_len + e.block_m - 1) / e.block_m;
  if (m_tiles > 65535) return "prefill attention: max_q_len " + std::to_string(p.max_q_len) + " too long";
  const auto launch = p.kv_fp8 ? e.launch_fp8 : e.launch;
  if (launch == nullptr) return "prefill attention: configuration " + e.name + " has no E4M3-cache build";
  launch(k, dim3(p.num_heads, m_tiles, p.num_seqs), stream);
  return attention::LastLaunchError("prefill attention");
}

// A head_dim without an instance of its own runs the next larger instance's
// padded build: one configuration, nothing to tune. nullptr for the others.
const KernelEntry* Padded(int head_dim) {
  const KernelTable* t = attention::PaddedTableForHeadDim(head_dim);
  return t != nullptr ? &t->padded : nullptr;
}

std::string LaunchPadded(const KernelEntry& e, const AttentionParams& p, cudaStream_t stream) {
  if (std::string err = SetUpEntries(p.head_dim, {&e, 1}, p.kv_fp8); !err.empty()) return err;
  return Launch(e, p, stream);
}

// The default configuration for the cache's dtype: E4M3 takes the first
// entry that has an E4M3 build.
const KernelEntry* Default(const KernelTable& t, bool kv_fp8) {
  if (!kv_fp8) return &t.prefill[t.default_prefill];
  for (const KernelEntry& e : t.prefill)
    if (e.launch_fp8 != nullptr) return &e;
  return nullptr;
}

const KernelEntry* FindByName(const KernelTable& t, const std::string& name, bool kv_fp8) {
  if (name == "default") return Default(t, kv_fp8);
  for (const KernelEntry& e : t.prefill)
    if (e.name == name) return &e;
  return nullptr;
}

bool Capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  return cudaStreamIsCapturing(stream, &status) != cudaSuccess ||
         status != cudaStreamCaptureStatusNone;
}

// The best of up to 5 timed launches (about kTimedBudgetMs in all) after one
// warm-up, so a one-off hiccup cannot crown a slow configuration.
std::string TimeConfig(const KernelEntry& e, const AttentionParams& p, cudaStream_t stream,
                       float* best_ms) {
  cudaEvent_t start, stop;
  if (cudaEventCreate(&start) != cudaSuccess) return "prefill autotune: cudaEventCreate failed";
  if (cudaEventCreate(&stop) != cudaSuccess) {
    cudaEventDestroy(start);
    return "prefill autotune: cudaEventCreate failed";
  }
  std::string err;
  *best_ms = 1e30f;
  int reps = 1;
  for (int i = 0; i <= reps && err.empty(); ++i) {
    cudaEventRecord(start, stream);
    err = Launch(e, p, stream);
    cudaEventRecord(stop, stream);
    if (!err.empty()) break;
    if (cudaEventSynchronize(stop) != cudaSuccess) {
      err = "prefill autotune: " + e.name + " failed: " + cudaGetErrorString(cudaGetLastError());
      break;
    }
    float ms = 0.f;
    cudaEventElapsedTime(&ms, start, stop);
    if (i == 0) {
      reps = std::clamp(static_cast<int>(kTimedBudgetMs / std::max(ms, 1e-3f)), 1, 5);
    } else {
      *best_ms = std::min(*best_ms, ms);
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return err;
}

// The fastest configuration of `table` on `p`, into *best.
std::string TimeTable(const AttentionParams& p, const KernelTable& table, cudaStream_t stream,
                      const KernelEntry** best) {
  if (std::string err = SetUpTable(p.head_dim, table, p.kv_fp8); !err.empty()) return err;
  int device = 0;
  int smem_optin = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  *best = nullptr;
  float best_ms = 0.f;
  for (const KernelEntry& e : table.prefill) {
    if (e.smem_bytes > smem_optin || (p.kv_fp8 && e.launch_fp8 == nullptr)) continue;
    float ms = 0.f;
    if (std::string err = TimeConfig(e, p, stream, &ms); !err.empty()) return err;
    if (*best == nullptr || ms < best_ms) *best = &e, best_ms = ms;
  }
  if (*best == nullptr) return "prefill autotune: no configuration fits this GPU's shared memory";
  return "";
}

std::string Tune(const AttentionParams& p, const KernelTable& table, const std::string& key,
                 cudaStream_t stream) {
  const KernelEntry* best = nullptr;
  if (std::string err = TimeTable(p, table, stream, &best); !err.empty()) return err;
  AutotuneCache::Get().Store(key, best->name);
  return "";
}

}  // namespace

std::string PrefillAttentionBucket(const AttentionParams& params) { return Bucket(params); }

namespace {
std::atomic<int> prefill_wgmma{-1};  // -1: not configured
}  // namespace

void ConfigurePrefillWgmma(bool enabled) { prefill_wgmma.store(enabled ? 1 : 0); }

bool PrefillWgmmaEnabled() {
  const int configured = prefill_wgmma.load();
  if (configured >= 0) return configured == 1;
  const char* v = std::getenv("GEMMA_PREFILL_WGMMA");
  return v == nullptr || std::string(v) != "0";
}

std::string TimePrefillAttention(const AttentionParams& params, cudaStream_t stream, std::string* best) {
  best->clear();
  if (std::string err = attention::ValidateParams(params, false); !err.empty()) return err;
  if (Capturing(stream)) return "prefill autotune: the stream is capturing a graph";
  if (Padded(params.head_dim) != nullptr) return "";
  const KernelEntry* e = nullptr;
  if (std::string err = TimeTable(params, *attention::TableForHeadDim(params.head_dim), stream, &e); !err.empty())
    return err;
  *best = e->name;
  return "";
}

std::vector<std::string> PrefillAttentionConfigs(int head_dim, bool kv_fp8) {
  std::vector<std::string> names;
  if (const KernelEntry* e = Padded(head_dim)) return {e->name};
  if (const KernelTable* t = attention::TableForHeadDim(head_dim))
    for (const KernelEntry& e : t->prefill)
      if (!kv_fp8 || e.launch_fp8 != nullptr) names.push_back(e.name);
  return names;
}

std::string AutotunePrefillAttention(const AttentionParams& params, cudaStream_t stream) {
  if (std::string err = attention::ValidateParams(params, false); !err.empty()) return err;
  if (Capturing(stream)) return "prefill autotune: the stream is capturing a graph";
  if (Padded(params.head_dim) != nullptr) return "";
  AutotuneCache& cache = AutotuneCache::Get();
  if (!cache.enabled()) return "";
  const std::string key = AutotuneCache::Key("prefill", params.head_dim, Bucket(params));
  if (cache.Lookup(key)) return "";
  return Tune(params, *attention::TableForHeadDim(params.head_dim), key, stream);
}

std::string LaunchPrefillAttentionWithConfig(const AttentionParams& params,
                                             const std::string& config, cudaStream_t stream) {
  if (std::string err = attention::ValidateParams(params, false); !err.empty()) return err;
  if (const KernelEntry* e = Padded(params.head_dim); e != nullptr && (config == "default" || config == e->name))
    return LaunchPadded(*e, params, stream);
  const KernelTable* own = attention::TableForHeadDim(params.head_dim);
  const KernelEntry* e = own != nullptr ? FindByName(*own, config, params.kv_fp8) : nullptr;
  if (e == nullptr)
    return "prefill attention: no configuration '" + config + "' for head_dim " +
           std::to_string(params.head_dim);
  if (std::string err = SetUpTable(params.head_dim, *own, params.kv_fp8); !err.empty()) return err;
  return Launch(*e, params, stream);
}

std::string LaunchPrefillAttention(const AttentionParams& params, cudaStream_t stream) {
  if (std::string err = attention::ValidateParams(params, false); !err.empty()) return err;
  if (const KernelEntry* e = Padded(params.head_dim)) return LaunchPadded(*e, params, stream);
  const KernelTable& table = *attention::TableForHeadDim(params.head_dim);
  if (std::string err = SetUpTable(params.head_dim, table, params.kv_fp8); !err.empty()) return err;
  AutotuneCache& cache = AutotuneCache::Get();
  const KernelEntry* e = Default(table, params.kv_fp8);
  if (e == nullptr) return "prefill attention: no configuration has an E4M3-cache build";
  if (cache.enabled()) {
    const std::string key = AutotuneCache::Key("prefill", params.head_dim, Bucket(params));
    std::optional<std::string> name = cache.Lookup(key);
    if (!name && !Capturing(stream)) {
      if (std::string err = Tune(params, table, key, stream); !err.empty()) return err;
      name = cache.Lookup(key);
    }
    // A cached name this build cannot run over the cache's dtype (an older
    // build's choice) leaves the default.
    if (name)
      if (const KernelEntry* tuned = FindByName(table, *name, params.kv_fp8);
          tuned != nullptr && (!params.kv_fp8 || tuned->launch_fp8 != nullptr))
        e = tuned;
  }
  return Launch(*e, params, stream);
}

}  // namespace gemma::kernels
