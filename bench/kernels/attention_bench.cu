// attention-bench: prefill throughput (autotuned vs default tile
// configuration) and decode time per layer (length-aware vs not) at the
// Gemma 4 31B attention shapes. Prints one JSON document, then a table.
//
//   attention-bench [--quick]     (--quick: 8K prefill and 8K decode only)
//   attention-bench --configs [TOKENS,...]   (default 8192,32768,131072)
//     every compiled prefill configuration of both layers (plus, for the
//     global layer, a 2048-token chunk at depth 126976 as gemma-bench's 128K
//     prefill runs it), no autotuning, no decode: one table row per (layer,
//     tokens, configuration) with tok/s, TFLOP/s and the ratio to the default.
//   attention-bench --configs-e4m3 [TOKENS,...]
//     the same over an E4M3 cache, for the configurations built for it.
//   attention-bench --batch-decode B DEPTH
//     decode of B sequences at DEPTH (as a serving step at concurrency B),
//     both layers, bf16 and E4M3 caches: us per layer call and GB/s of
//     K/V read.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/attention/attention.h"

namespace {

using gemma::kernels::AttentionParams;

#define CHECK_CUDA(expr)                                                                  \
  do {                                                                                    \
    cudaError_t err_ = (expr);                                                            \
    if (err_ != cudaSuccess) {                                                            \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #expr,                   \
                   cudaGetErrorString(err_));                                             \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

void CheckLaunch(const std::string& err) {
  if (!err.empty()) {
    std::fprintf(stderr, "launch failed: %s\n", err.c_str());
    std::exit(1);
  }
}

__global__ void FillRandomBf16(__nv_bfloat16* x, size_t n, uint32_t seed, float range) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 0x9E3779B1u ^ seed ^ static_cast<uint32_t>(i >> 32);
    h ^= h >> 15, h *= 0x2C1B3C6Du, h ^= h >> 12, h *= 0x297A2D39u, h ^= h >> 15;
    x[i] = __float2bfloat16((static_cast<float>(h) * 2.3283064e-10f * 2.f - 1.f) * range);
  }
}

// Random E4M3 codes of magnitude below 2 (bit 6 clear: never the NaN code).
__global__ void FillRandomE4m3(unsigned char* x, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 0x9E3779B1u ^ seed;
    h ^= h >> 15, h *= 0x2C1B3C6Du, h ^= h >> 12;
    x[i] = static_cast<unsigned char>(h & 0xBFu);
  }
}

template <typename T>
T* DeviceAlloc(size_t count) {
  void* p = nullptr;
  CHECK_CUDA(cudaMalloc(&p, count * sizeof(T)));
  return static_cast<T*>(p);
}

__nv_bfloat16* RandomBf16(size_t n, uint32_t seed, float range) {
  __nv_bfloat16* p = DeviceAlloc<__nv_bfloat16>(n);
  FillRandomBf16<<<1024, 256>>>(p, n, seed, range);
  CHECK_CUDA(cudaGetLastError());
  return p;
}

// `n` random cache entries in a new device buffer: E4M3 codes
// (FillRandomE4m3) or bf16 values in [-1, 1].
void* RandomCache(size_t n, uint32_t seed, bool fp8) {
  if (!fp8) return RandomBf16(n, seed, 1.f);
  unsigned char* x = DeviceAlloc<unsigned char>(n);
  FillRandomE4m3<<<1024, 256>>>(x, n, seed);
  CHECK_CUDA(cudaGetLastError());
  return x;
}

int* DeviceInts(const std::vector<int>& v) {
  int* p = DeviceAlloc<int>(v.size());
  CHECK_CUDA(cudaMemcpy(p, v.data(), v.size() * sizeof(int), cudaMemcpyHostToDevice));
  return p;
}

struct Layer {
  const char* name;
  int head_dim, num_heads, num_kv_heads, window;
};
constexpr Layer kGlobal{"global D512 GQA8", 512, 32, 4, 0};
constexpr Layer kSliding{"sliding D256 w1024", 256, 32, 16, 1024};

// Median of `reps` event-timed calls of fn (after one warm-up), in ms.
template <typename Fn>
float TimeMs(int reps, Fn fn, bool warm_up = true) {
  cudaEvent_t a, b;
  CHECK_CUDA(cudaEventCreate(&a));
  CHECK_CUDA(cudaEventCreate(&b));
  if (warm_up) fn();
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<float> ms;
  for (int i = 0; i < reps; ++i) {
    CHECK_CUDA(cudaEventRecord(a));
    fn();
    CHECK_CUDA(cudaEventRecord(b));
    CHECK_CUDA(cudaEventSynchronize(b));
    float t = 0;
    CHECK_CUDA(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

struct PrefillResult {
  const Layer* layer;
  int tokens;
  std::string tuned_config;
  float tuned_ms, default_ms, tflops_tuned;
};

// One prefill problem: a sequence of `tokens` queries from position `pos0`
// (its earlier keys already cached), random data.
struct PrefillProblem {
  // fp8: K / V as random E4M3 codes (kv_fp8).
  PrefillProblem(const Layer& L, int tokens, int pos0 = 0, bool fp8 = false);
  PrefillProblem(const PrefillProblem&) = delete;
  PrefillProblem& operator=(const PrefillProblem&) = delete;
  ~PrefillProblem() {
    for (void* ptr : {(void*)q, (void*)k, (void*)v, (void*)out, (void*)slot, (void*)offsets,
                      (void*)pos0})
      cudaFree(ptr);
  }
  double Tflops(float ms) const {
    return 4.0 * layer.head_dim * layer.num_heads * keys / (ms * 1e9);
  }

  const Layer& layer;
  __nv_bfloat16 *q, *out;
  void *k, *v;
  int *slot, *offsets, *pos0;
  double keys = 0;  // sum over queries of keys attended
  AttentionParams p;
};

PrefillProblem::PrefillProblem(const Layer& L, int tokens, int first_pos, bool fp8) : layer(L) {
  const size_t q_elems = static_cast<size_t>(tokens) * L.num_heads * L.head_dim;
  const size_t kv_elems = static_cast<size_t>(first_pos + tokens) * L.num_kv_heads * L.head_dim;
  q = RandomBf16(q_elems, 1, 0.5f);
  k = RandomCache(kv_elems, 2, fp8);
  v = RandomCache(kv_elems, 3, fp8);
  p.kv_fp8 = fp8;
  out = DeviceAlloc<__nv_bfloat16>(q_elems);
  slot = DeviceInts({0});
  offsets = DeviceInts({0, tokens});
  pos0 = DeviceInts({first_pos});
  p.q = q, p.out = out, p.k_cache = k, p.v_cache = v;
  p.num_slots = 1, p.capacity = first_pos + tokens, p.ring = false;
  p.num_heads = L.num_heads, p.num_kv_heads = L.num_kv_heads, p.head_dim = L.head_dim;
  p.window = L.window, p.scale = 1.f;
  p.num_seqs = 1, p.seq_slot = slot, p.q_offsets = offsets, p.q_pos0 = pos0;
  p.max_q_len = tokens;
  for (long t = first_pos; t < first_pos + tokens; ++t)
    keys += L.window > 0 ? std::min<long>(t + 1, L.window) : t + 1;
}

// --configs: every configuration at each size, then (global layer) one
// 2048-token chunk at depth 126K as gemma-bench's chunked 128K prefill runs
// it ("c2048@126976"); the largest sizes get one timed run (the smaller ones
// already warmed every kernel up).
int BenchConfigs(const std::vector<int>& sizes, bool fp8) {
  std::printf("%-20s %13s %-18s %12s %8s %9s\n", "prefill", "tokens", "config", "tok/s", "TFLOP/s",
              "vs default");
  struct Shape {
    const Layer* layer;
    int tokens, pos0;
  };
  std::vector<Shape> shapes;
  for (const Layer* L : {&kGlobal, &kSliding}) {
    for (int tokens : sizes) shapes.push_back({L, tokens, 0});
    if (L == &kGlobal) shapes.push_back({L, 2048, 131072 - 4096});
  }
  for (const Shape& sh : shapes) {
    const Layer* L = sh.layer;
    const int tokens = sh.tokens;
    const std::string label =
        sh.pos0 > 0 ? "c" + std::to_string(tokens) + "@" + std::to_string(sh.pos0)
                    : std::to_string(tokens);
    PrefillProblem prob(*L, tokens, sh.pos0, fp8);
    const int reps = tokens >= 131072 ? 1 : tokens >= 32768 || sh.pos0 > 0 ? 3 : 7;
    const std::vector<std::string> names = gemma::kernels::PrefillAttentionConfigs(L->head_dim, fp8);
    float default_ms = 0;
    for (size_t i = 0; i < names.size(); ++i) {
      auto launch = [&] {
        CheckLaunch(gemma::kernels::LaunchPrefillAttentionWithConfig(prob.p, names[i], nullptr));
      };
      const float ms = TimeMs(reps, launch, tokens < 131072);
      if (i == 0) default_ms = ms;  // the first configuration is the default
      std::printf("%-20s %13s %-18s %12.0f %8.1f %8.3fx\n", L->name, label.c_str(),
                  names[i].c_str(), tokens / (ms * 1e-3), prob.Tflops(ms), default_ms / ms);
      std::fflush(stdout);
    }
  }
  return 0;
}

PrefillResult BenchPrefill(const Layer& L, int tokens) {
  PrefillProblem prob(L, tokens);
  CheckLaunch(gemma::kernels::AutotunePrefillAttention(prob.p, nullptr));
  const int reps = tokens >= 131072 ? 2 : tokens >= 32768 ? 3 : 10;
  PrefillResult r{&L, tokens, "", 0, 0, 0};
  r.tuned_ms =
      TimeMs(reps, [&] { CheckLaunch(gemma::kernels::LaunchPrefillAttention(prob.p, nullptr)); });
  r.default_ms = TimeMs(reps, [&] {
    CheckLaunch(gemma::kernels::LaunchPrefillAttentionWithConfig(prob.p, "default", nullptr));
  });
  r.tflops_tuned = static_cast<float>(prob.Tflops(r.tuned_ms));
  return r;
}

struct DecodeResult {
  const Layer* layer;
  int depth, num_splits;
  float aware_us, unaware_us, aware_gbs;
};

// `batch` sequences (slot i each) at `depth`; a slot holds `capacity`
// positions (global: 128K + 1 at batch 1; sliding: a ring of the window);
// fp8: an E4M3 cache.
// blocks_per_sm: 0 splits as the engine does; else as if a multiprocessor
// held that many decode blocks.
// variant >= 0: that alternative build for the cache's dtype (DecodeVariants).
// rope_pairs >= 0: keys from values with that many rotated pairs (global
// layers; the values stand in for K's unrotated dims, only speed is timed).
DecodeResult BenchDecode(const Layer& L, int depth, int capacity, int num_sms, int batch = 1, bool fp8 = false,
                         int blocks_per_sm = 0, int variant = -1, int rope_pairs = -1) {
  const bool ring = L.window > 0;
  const size_t kv_elems = static_cast<size_t>(batch) * capacity * L.num_kv_heads * L.head_dim;
  const size_t q_elems = static_cast<size_t>(batch) * L.num_heads * L.head_dim;
  __nv_bfloat16* q = RandomBf16(q_elems, 4, 0.5f);
  void* k = RandomCache(kv_elems, 5, fp8);
  void* v = RandomCache(kv_elems, 6, fp8);
  __nv_bfloat16* out = DeviceAlloc<__nv_bfloat16>(q_elems);
  std::vector<int> slots(batch), offsets_h(batch + 1), pos0_h(batch, depth - 1);
  for (int i = 0; i <= batch; ++i) {
    if (i < batch) slots[i] = i;
    offsets_h[i] = i;
  }
  int* slot = DeviceInts(slots);
  int* offsets = DeviceInts(offsets_h);
  int* pos0 = DeviceInts(pos0_h);
  // As the engine splits (engine/cuda/model_forward.cc): global layers fill
  // every block slot of the multiprocessors, sliding ones as for two blocks
  // per multiprocessor.
  const int per_sm = blocks_per_sm > 0  ? blocks_per_sm
                     : L.window == 0    ? gemma::kernels::DecodeBlocksPerSm(L.head_dim, fp8, rope_pairs >= 0)
                                        : 2;
  const int splits = gemma::kernels::DecodeNumSplits(batch, L.num_kv_heads, num_sms, per_sm);
  void* ws = DeviceAlloc<char>(
      std::max<size_t>(1, gemma::kernels::DecodeWorkspaceBytes(batch, L.num_heads, L.head_dim, splits)));
  AttentionParams p;
  p.q = q, p.out = out, p.k_cache = k, p.v_cache = v;
  p.num_slots = batch, p.capacity = capacity, p.ring = ring;
  p.num_heads = L.num_heads, p.num_kv_heads = L.num_kv_heads, p.head_dim = L.head_dim;
  p.window = L.window, p.scale = 1.f;
  p.num_seqs = batch, p.seq_slot = slot, p.q_offsets = offsets, p.q_pos0 = pos0, p.max_q_len = 1;
  p.kv_fp8 = fp8;
  float* kv_weight = nullptr;
  if (rope_pairs >= 0) {
    const std::vector<float> ones(L.head_dim, 1.0f);
    kv_weight = DeviceAlloc<float>(ones.size());
    CHECK_CUDA(cudaMemcpy(kv_weight, ones.data(), ones.size() * sizeof(float), cudaMemcpyHostToDevice));
    p.keys_from_values = kv_weight;
    p.rope_pairs = rope_pairs;
  }

  // Graph of 20 decode launches, as the engine replays them.
  constexpr int kPerGraph = 20;
  auto time_us = [&](bool aware) {
    p.length_aware = aware;
    cudaStream_t s;
    // A variant with no build for this launch (the keys-from-values-only
    // tile build reading K whole) is reported as -1 us.
    if (variant >= 0 && !gemma::kernels::DecodeVariantServes(L.head_dim, fp8, variant, rope_pairs >= 0)) return -1.f;
    CHECK_CUDA(cudaStreamCreate(&s));
    cudaGraph_t g;
    cudaGraphExec_t e;
    CHECK_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < kPerGraph; ++i)
      CheckLaunch(variant >= 0 ? gemma::kernels::LaunchDecodeAttentionVariant(p, ws, splits, variant, s)
                               : gemma::kernels::LaunchDecodeAttention(p, ws, splits, s));
    CHECK_CUDA(cudaStreamEndCapture(s, &g));
    CHECK_CUDA(cudaGraphInstantiate(&e, g, 0));
    const float ms = TimeMs(7, [&] { CHECK_CUDA(cudaGraphLaunch(e, nullptr)); });
    cudaGraphExecDestroy(e);
    cudaGraphDestroy(g);
    cudaStreamDestroy(s);
    return ms * 1000.f / kPerGraph;
  };
  DecodeResult r{&L, depth, splits, 0, 0, 0};
  r.aware_us = time_us(true);
  r.unaware_us = batch == 1 ? time_us(false) : r.aware_us;  // batches: only the length-aware sweep is reported
  const int keys = ring ? std::min(depth, L.window) : depth;
  r.aware_gbs = static_cast<float>(2.0 * batch * keys * L.num_kv_heads * L.head_dim * (fp8 ? 1 : 2) /
                                   (r.aware_us * 1e3));
  for (void* ptr : {(void*)q, (void*)k, (void*)v, (void*)out, (void*)slot, (void*)offsets, (void*)pos0, ws})
    CHECK_CUDA(cudaFree(ptr));
  if (kv_weight != nullptr) CHECK_CUDA(cudaFree(kv_weight));
  return r;
}

}  // namespace

// --batch-decode: both layers, both cache dtypes.
int BenchBatchDecode(int batch, int depth, int num_sms) {
  std::printf("%-20s %6s %6s %6s %6s %10s %8s\n", "decode", "batch", "depth", "cache", "splits", "us", "GB/s");
  for (const Layer* L : {&kGlobal, &kSliding}) {
    const int capacity = L->window > 0 ? L->window : depth;
    for (bool fp8 : {false, true}) {
      // The engine's split count, then the counts of 1, 2 and 4 blocks per
      // multiprocessor where they differ from it.
      int last_splits = -1;
      for (int per_sm : {0, 1, 2, 4}) {
        const int engine_per_sm = L->window > 0 ? 2 : gemma::kernels::DecodeBlocksPerSm(L->head_dim, fp8);
        if (per_sm == engine_per_sm) continue;
        const int splits = gemma::kernels::DecodeNumSplits(batch, L->num_kv_heads, num_sms, per_sm ? per_sm : engine_per_sm);
        if (splits == last_splits) continue;
        last_splits = splits;
        const DecodeResult r = BenchDecode(*L, depth, capacity, num_sms, batch, fp8, per_sm);
        std::printf("%-20s %6d %6d %6s %6d %10.2f %8.0f\n", L->name, batch, depth, fp8 ? "e4m3" : "bf16",
                    r.num_splits, r.aware_us, r.aware_gbs);
        std::fflush(stdout);
      }
      // Global layers: keys from values with K's 64 rotated pairs (the
      // engine's choice over a bf16 cache for long contexts; the E4M3 cache
      // reads K whole); GB/s counts K and V whole.
      if (L->window == 0) {
        const DecodeResult r = BenchDecode(*L, depth, capacity, num_sms, batch, fp8, 0, -1, 64);
        std::printf("%-20s %6d %6d %6s %6d %10.2f %8.0f  keys-from-values\n", L->name, batch, depth, fp8 ? "e4m3" : "bf16",
                    r.num_splits, r.aware_us, r.aware_gbs);
        std::fflush(stdout);
      }
      // The alternative builds for this cache, split as the engine would split them.
      const std::vector<std::string> variants = gemma::kernels::DecodeVariants(L->head_dim, fp8);
      for (int v = 0; v < static_cast<int>(variants.size()); ++v) {
        const int per_sm = L->window > 0 ? 2 : gemma::kernels::DecodeVariantBlocksPerSm(L->head_dim, fp8, v);
        const DecodeResult r = BenchDecode(*L, depth, capacity, num_sms, batch, fp8, per_sm, v);
        std::printf("%-20s %6d %6d %6s %6d %10.2f %8.0f  %s\n", L->name, batch, depth, fp8 ? "e4m3" : "bf16",
                    r.num_splits, r.aware_us, r.aware_gbs, variants[static_cast<size_t>(v)].c_str());
        std::fflush(stdout);
        if (L->window == 0) {
          const DecodeResult k = BenchDecode(*L, depth, capacity, num_sms, batch, fp8, per_sm, v, 64);
          std::printf("%-20s %6d %6d %6s %6d %10.2f %8.0f  %s keys-from-values\n", L->name, batch, depth,
                      fp8 ? "e4m3" : "bf16", k.num_splits, k.aware_us, k.aware_gbs,
                      variants[static_cast<size_t>(v)].c_str());
          std::fflush(stdout);
        }
      }
    }
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--batch-decode") {
    const int batch = argc > 2 ? std::atoi(argv[2]) : 0, depth = argc > 3 ? std::atoi(argv[3]) : 0;
    if (batch < 1 || batch > 1024 || depth < 1 || depth > 131072) {
      std::fprintf(stderr, "--batch-decode B DEPTH: B in [1, 1024], DEPTH in [1, 131072]; got %s %s\n",
                   argc > 2 ? argv[2] : "(none)", argc > 3 ? argv[3] : "(none)");
      return 2;
    }
    // The largest cache it allocates: bf16 K and V of the global layer (or
    // of the sliding layer's window, whichever is larger).
    double cache_bytes = 0;
    for (const Layer* L : {&kGlobal, &kSliding}) {
      const int capacity = L->window > 0 ? L->window : depth;
      cache_bytes = std::max(cache_bytes, 2.0 * 2 * batch * capacity * L->num_kv_heads * L->head_dim);
    }
    size_t free_bytes = 0, total_bytes = 0;
    CHECK_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
    if (cache_bytes > 0.9 * free_bytes) {
      std::fprintf(stderr, "--batch-decode %d %d: its K/V caches need %.1f GB, the GPU has %.1f GB free\n", batch,
                   depth, cache_bytes / 1e9, free_bytes / 1e9);
      return 2;
    }
    cudaDeviceProp prop{};
    CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
    return BenchBatchDecode(batch, depth, prop.multiProcessorCount);
  }
  if (argc > 1 && (std::string(argv[1]) == "--configs" || std::string(argv[1]) == "--configs-e4m3")) {
    std::vector<int> sizes;
    if (argc > 2) {
      for (const char* c = argv[2]; *c != '\0';) {
        char* end = nullptr;
        sizes.push_back(static_cast<int>(std::strtol(c, &end, 10)));
        c = *end == ',' ? end + 1 : end;
        if (sizes.back() <= 0) {
          std::fprintf(stderr, "bad token count list: %s\n", argv[2]);
          return 2;
        }
      }
    } else {
      sizes = {8192, 32768, 131072};
    }
    return BenchConfigs(sizes, std::string(argv[1]) == "--configs-e4m3");
  }
  const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  const char* autotune = std::getenv("GEMMA_AUTOTUNE");
  const std::vector<int> prefill_tokens =
      quick ? std::vector<int>{8192} : std::vector<int>{8192, 32768, 131072};
  const std::vector<int> depths =
      quick ? std::vector<int>{8192} : std::vector<int>{512, 8192, 32768, 131072};

  std::vector<PrefillResult> prefill;
  for (const Layer* L : {&kGlobal, &kSliding})
    for (int t : prefill_tokens) prefill.push_back(BenchPrefill(*L, t));
  std::vector<DecodeResult> decode;
  for (int d : depths) decode.push_back(BenchDecode(kGlobal, d, 131072 + 1, prop.multiProcessorCount));
  for (int d : depths) decode.push_back(BenchDecode(kSliding, d, kSliding.window, prop.multiProcessorCount));

  std::printf("{\"gpu\": \"%s\", \"autotune\": \"%s\", \"prefill\": [", prop.name,
              autotune != nullptr ? autotune : "on");
  for (size_t i = 0; i < prefill.size(); ++i) {
    const PrefillResult& r = prefill[i];
    std::printf("%s\n  {\"layer\": \"%s\", \"tokens\": %d, \"tuned_ms\": %.3f, \"default_ms\": %.3f, "
                "\"tuned_tok_s\": %.0f, \"default_tok_s\": %.0f, \"tuned_tflops\": %.1f}",
                i ? "," : "", r.layer->name, r.tokens, r.tuned_ms, r.default_ms,
                r.tokens / (r.tuned_ms * 1e-3), r.tokens / (r.default_ms * 1e-3), r.tflops_tuned);
  }
  std::printf("],\n \"decode\": [");
  for (size_t i = 0; i < decode.size(); ++i) {
    const DecodeResult& r = decode[i];
    std::printf("%s\n  {\"layer\": \"%s\", \"depth\": %d, \"splits\": %d, \"aware_us\": %.2f, "
                "\"unaware_us\": %.2f, \"aware_GBps\": %.0f}",
                i ? "," : "", r.layer->name, r.depth, r.num_splits, r.aware_us, r.unaware_us,
                r.aware_gbs);
  }
  std::printf("]}\n\n");

  std::printf("%-20s %8s %12s %12s %9s %8s\n", "prefill", "tokens", "tuned tok/s",
              "default tok/s", "speedup", "TFLOP/s");
  for (const PrefillResult& r : prefill)
    std::printf("%-20s %8d %12.0f %12.0f %8.2fx %8.1f\n", r.layer->name, r.tokens,
                r.tokens / (r.tuned_ms * 1e-3), r.tokens / (r.default_ms * 1e-3),
                r.default_ms / r.tuned_ms, r.tflops_tuned);
  std::printf("\n%-20s %8s %6s %12s %12s %9s %8s\n", "decode (batch 1)", "depth", "splits",
              "aware us", "unaware us", "speedup", "GB/s");
  for (const DecodeResult& r : decode)
    std::printf("%-20s %8d %6d %12.2f %12.2f %8.2fx %8.0f\n", r.layer->name, r.depth,
                r.num_splits, r.aware_us, r.unaware_us, r.unaware_us / r.aware_us, r.aware_gbs);
  return 0;
}
