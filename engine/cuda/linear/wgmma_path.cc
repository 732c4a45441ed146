#include "engine/cuda/linear/wgmma_path.h"

#include <cublasLt.h>

#include <algorithm>
#include <iterator>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "engine/cuda/common/launch_timer.h"
#include "engine/cuda/linear/linear.h"
#include "engine/cuda/linear/lt_gemm.h"
#include "kernels/attention/autotune.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/gemv/gemv.h"
#include "kernels/gemv/gemv_fp8.h"
#include "kernels/gemv/wgmma_fp8.h"
#include "kernels/init/random_init.h"
#include "kernels/quant/fp8_quant.h"
#include "spdlog/spdlog.h"

namespace gemma::cuda {
namespace {

// Launches per timing: at least this many, and one per matrix of the shape
// up to kMaxReps (a sweep over every layer's copy, so the weights come from
// HBM; 60 layers of the 31B: 60 launches).
constexpr int kMinReps = 20;
constexpr int kMaxReps = 64;

int VariantByName(const std::string& name) {
  for (int v = 0; v < kernels::NumWgmmaFp8Variants(); ++v) {
    if (name == kernels::WgmmaFp8VariantName(v)) return v;
  }
  return -1;
}

}  // namespace

std::string WgmmaPath::Name(const WgmmaChoice& c) {
  return c.streamk_per_sm > 0 ? absl::StrCat(kernels::WgmmaFp8VariantName(c.variant), " sk", c.streamk_per_sm)
                              : absl::StrCat(kernels::WgmmaFp8VariantName(c.variant), " x", c.splits);
}

std::string FormatWgmmaCacheEntry(const WgmmaChoice& c) {
  return absl::StrCat(c.variant >= 0 ? kernels::WgmmaFp8VariantName(c.variant) : "-", " ", c.splits, " ",
                      c.streamk_per_sm, " ", MsToNs(c.wgmma_ms), " ", MsToNs(c.baseline_ms));
}

std::optional<WgmmaChoice> ParseWgmmaCacheEntry(const std::string& value, int bucket, bool fast_accum) {
  const std::vector<std::string> f = absl::StrSplit(value, ' ', absl::SkipEmpty());
  if (f.size() != 5) return std::nullopt;
  WgmmaChoice c;
  int64_t wgmma_ns = 0, baseline_ns = 0;
  if (!absl::SimpleAtoi(f[1], &c.splits) || !absl::SimpleAtoi(f[2], &c.streamk_per_sm) ||
      !absl::SimpleAtoi(f[3], &wgmma_ns) || !absl::SimpleAtoi(f[4], &baseline_ns) || wgmma_ns < 0 || baseline_ns < 0) {
    return std::nullopt;
  }
  if (c.splits < 1 || c.splits > kernels::kWgmmaFp8MaxSplits) return std::nullopt;
  if (c.streamk_per_sm < 0 || c.streamk_per_sm > WgmmaPath::kMaxStreamKPerSm ||
      (c.streamk_per_sm > 0 && c.splits != 1)) {
    return std::nullopt;
  }
  c.wgmma_ms = NsToMs(wgmma_ns);
  c.baseline_ms = NsToMs(baseline_ns);
  if (f[0] == "-") return c;  // no candidate could run: the baseline
  c.variant = VariantByName(f[0]);
  if (c.variant < 0 || !kernels::WgmmaFp8VariantSupportsM(c.variant, bucket)) return std::nullopt;
  if ((!fast_accum || bucket <= kernels::kGemvMaxBatch) && !kernels::WgmmaFp8VariantPromotes(c.variant)) {
    return std::nullopt;
  }
  return c;
}

WgmmaPath::WgmmaPath(Tuner& tuner)
    : choices_(tuner.choices().wgmma),
      preference_(tuner.switches().fp8_wgmma),
      fast_accum_(tuner.switches().fp8_fast_accum),
      only_shapes_(tuner.switches().fp8_wgmma_shapes),
      max_m_(tuner.switches().fp8_wgmma_max_m) {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&num_sms_, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    cudaGetLastError();
    num_sms_ = 0;  // no split candidates (see Autotune)
  }
}

absl::Status WgmmaPath::Reserve(int max_n) {
  if (preference_ == WgmmaPreference::kOff || max_n <= 0) return absl::OkStatus();
  const int counters = kernels::WgmmaFp8RowTiles(-1, max_n);
  // Autotune tries at most kMaxCtasPerSm CTAs per SM of split launches, so
  // their partials never exceed that many CTAs' worth of the largest tile.
  size_t per_cta = 0;
  for (int v = 0; v < kernels::NumWgmmaFp8Variants(); ++v) {
    per_cta = std::max(per_cta, static_cast<size_t>(kernels::WgmmaFp8RowsPerCta(v)) * kernels::WgmmaFp8VariantMaxM(v));
  }
  const size_t split_floats =
      std::min(per_cta * kMaxCtasPerSm * static_cast<size_t>(num_sms_),
               kernels::WgmmaFp8WorkspaceFloats(-1, max_n, kSplits[std::size(kSplits) - 1]));
  const size_t floats =
      std::min(kMaxWorkspaceBytes / sizeof(float),
               std::max(split_floats, kernels::WgmmaFp8StreamKWorkspaceFloats(-1, kMaxStreamKPerSm * num_sms_)));
  if (counters <= num_counters_ && floats <= workspace_floats_) return absl::OkStatus();
  GEMMA_STATUS_RETURN_IF_ERROR(workspace_.Allocate(floats * sizeof(float)));
  GEMMA_STATUS_RETURN_IF_ERROR(counters_.Allocate(static_cast<size_t>(counters) * sizeof(int)));
  // Every launch leaves the counters zero again; they start zero here.
  GEMMA_CUDA_RETURN_IF_ERROR(cudaMemset(counters_.get(), 0, counters_.bytes()));
  GEMMA_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  workspace_floats_ = floats;
  num_counters_ = counters;
  return absl::OkStatus();
}

void WgmmaPath::Disable() {
  preference_ = WgmmaPreference::kOff;
  workspace_.Reset();
  counters_.Reset();
  workspace_floats_ = 0;
  num_counters_ = 0;
}

std::vector<int> WgmmaPath::Buckets(int max_m) {
  std::set<int> buckets;
  for (int b = 1; b <= std::min(max_m, kernels::kGemvMaxBatch); ++b) buckets.insert(b);
  for (int b : {16, 32, kMaxM}) {
    const int capped = std::min(b, max_m);
    if (capped > kernels::kGemvMaxBatch) buckets.insert(capped);
  }
  return {buckets.begin(), buckets.end()};
}

bool WgmmaPath::Fits(const WgmmaChoice& c, int n) const {
  if (c.splits == 1 && c.streamk_per_sm == 0) return true;
  const size_t floats = c.streamk_per_sm > 0
                            ? kernels::WgmmaFp8StreamKWorkspaceFloats(c.variant, c.streamk_per_sm * num_sms_)
                            : kernels::WgmmaFp8WorkspaceFloats(c.variant, n, c.splits);
  return floats <= workspace_floats_ && kernels::WgmmaFp8RowTiles(c.variant, n) <= num_counters_;
}

// The key names what the cached choice depends on besides the GPU: the
// build's variants, the accumulation allowed, and the baseline it was timed
// against (the build's GEMV tilings, or the cuBLASLt version).
std::string WgmmaPath::CacheKey(int n, int k, int bucket, bool codes_given) const {
  const std::string baseline = bucket <= kernels::kGemvMaxBatch
                                   ? absl::StrCat("/gemv", kernels::NumGemvFp8Variants(), gemv_key_suffix_,
                                                  codes_given ? "" : "/quant")
                                   : absl::StrCat("/lt", cublasLtGetVersion(), lt_key_suffix_);
  return kernels::attention::AutotuneCache::Key(
      "wgmma-fp8", absl::StrCat(n, "x", k, "/m", bucket, "/v", kernels::NumWgmmaFp8Variants(), "/sk",
                                fast_accum_ ? "/fast" : "/fp32acc", baseline));
}

bool WgmmaPath::Load(int n, int k, int bucket, bool codes_given) {
  auto& cache = kernels::attention::AutotuneCache::Get();
  if (!cache.enabled()) return false;
  const auto hit = cache.Lookup(CacheKey(n, k, bucket, codes_given));
  if (!hit) return false;
  const std::optional<WgmmaChoice> c = ParseWgmmaCacheEntry(*hit, bucket, fast_accum_);
  if (!c || (c->variant >= 0 && !Fits(*c, n))) return false;
  choices_[{n, k, bucket}] = *c;
  ++cache_hits_;
  return true;
}

void WgmmaPath::Store(int n, int k, int bucket, bool codes_given) const {
  auto& cache = kernels::attention::AutotuneCache::Get();
  if (cache.enabled()) {
    cache.Store(CacheKey(n, k, bucket, codes_given), FormatWgmmaCacheEntry(choices_.at({n, k, bucket})));
  }
}

absl::Status WgmmaPath::Autotune(std::span<const DeviceMatrix> mats, int n, int k, int max_m, bool out_f32,
                                 float softcap, bool codes_given,
                                 const std::function<absl::Status(const LinearArgs&)>& baseline,
                                 const std::function<absl::Status(LinearArgs&)>& quantize, cudaStream_t stream) {
  if (preference_ == WgmmaPreference::kOff || mats.empty()) return absl::OkStatus();
  for (const DeviceMatrix& w : mats) {
    if (!w.fp8() || w.wgmma == nullptr) return absl::InvalidArgumentError("wgmma autotune: fp8 matrices with descriptors only");
  }
  const std::vector<int> buckets = Buckets(max_m);
  std::vector<int> untuned;
  for (int b : buckets) {
    if (!Load(n, k, b, codes_given)) untuned.push_back(b);
  }
  if (!untuned.empty()) {
    // x: random rows (zeros would flatter the kernels) quantized per token.
    const int rows = untuned.back();
    DeviceBuffer x, x8, xs, out;
    GEMMA_STATUS_RETURN_IF_ERROR(x.Allocate(static_cast<size_t>(rows) * k * 2));
    GEMMA_STATUS_RETURN_IF_ERROR(x8.Allocate(static_cast<size_t>(rows) * k));
    GEMMA_STATUS_RETURN_IF_ERROR(xs.Allocate(static_cast<size_t>(rows) * sizeof(float)));
    GEMMA_STATUS_RETURN_IF_ERROR(out.Allocate(static_cast<size_t>(rows) * n * (out_f32 ? 4 : 2)));
    kernels::RandomFillParams rp;
    rp.out_bf16 = x.get<__nv_bfloat16>();
    rp.count = static_cast<int64_t>(rows) * k;
    rp.stddev = 1.0f;
    GEMMA_KERNEL_RETURN_IF_ERROR(kernels::LaunchRandomFill(rp, stream));
    GEMMA_KERNEL_RETURN_IF_ERROR(
        kernels::LaunchQuantizeRowsFp8({x.get<__nv_bfloat16>(), x8.get<uint8_t>(), xs.get<float>(), rows, k}, stream));
    auto timer = LaunchTimer::Create();
    if (!timer.ok()) return timer.status();
    const int count = static_cast<int>(mats.size());
    const int reps = std::clamp(count, kMinReps, kMaxReps);
    const int k_tiles = (k + 127) / 128;
    // The best candidate of the first GEMV bucket timed: the same launches
    // serve every GEMV batch (re-timed per batch below).
    WgmmaChoice gemv_bucket_best;
    for (int bucket : untuned) {
      const bool gemv_bucket = bucket <= kernels::kGemvMaxBatch;
      // Wider token tiles than the narrowest that covers the bucket only
      // multiply zero rows.
      int tile = 0;
      for (int v = 0; v < kernels::NumWgmmaFp8Variants(); ++v) {
        const int t = kernels::WgmmaFp8VariantMaxM(v);
        if (t >= bucket && (tile == 0 || t < tile)) tile = t;
      }
      LinearArgs a;
      a.x = x.get<__nv_bfloat16>();  // the a16 GEMVs read bf16 x
      if (codes_given) {
        a.x_fp8 = x8.get<uint8_t>();
        a.x_scale = xs.get<float>();
      }
      if (out_f32) {
        a.out_f32 = out.get<float>();
      } else {
        a.out_bf16 = out.get<__nv_bfloat16>();
      }
      a.m = bucket;
      a.n = n;
      a.k = k;
      a.softcap = softcap;
      // Launch i of a sequence reads the i-th matrix (mod count). Above the
      // GEMV batches each launch is followed by a PDL stand-in kernel, as a
      // decode step follows each linear with a small kernel: a wgmma
      // launch's partial last wave then costs what it costs in a step
      // instead of hiding behind the next launch's weight prefetch (cuBLASLt
      // launches without PDL, so back to back it alone paid for its tail).
      auto stand_in = [&](std::string err) {
        return err.empty() && !gemv_bucket ? kernels::LaunchPdlStandIn(stream) : err;
      };
      auto time_baseline = [&] {
        return (*timer)->MeanMs(
            [&](int i) {
              a.w = mats[i % count];
              const absl::Status st = baseline(a);
              return stand_in(st.ok() ? std::string() : std::string(st.message()));
            },
            reps, stream);
      };
      auto time_wgmma = [&](const WgmmaChoice& c) {
        return (*timer)->MeanMs(
            [&](int i) {
              LinearArgs q = a;
              q.w = mats[i % count];
              if (!codes_given) {
                if (const absl::Status st = quantize(q); !st.ok()) return std::string(st.message());
              }
              return stand_in(Launch(q, c, stream));
            },
            reps, stream);
      };
      auto base_ms = time_baseline();
      if (!base_ms.ok()) return base_ms.status();
      WgmmaChoice best = gemv_bucket ? gemv_bucket_best : WgmmaChoice{};
      float best_ms = 1e30f;
      for (int v = 0; v < kernels::NumWgmmaFp8Variants(); ++v) {
        if (kernels::WgmmaFp8VariantMaxM(v) != tile || (gemv_bucket && gemv_bucket_best.variant >= 0)) continue;
        if ((!fast_accum_ || gemv_bucket) && !kernels::WgmmaFp8VariantPromotes(v)) continue;
        const int tiles = kernels::WgmmaFp8RowTiles(v, n);
        std::vector<WgmmaChoice> candidates;
        for (int splits : kSplits) {
          if (splits > 1 && (splits > k_tiles || tiles * splits > kMaxCtasPerSm * num_sms_)) continue;
          candidates.push_back({.variant = v, .splits = splits});
        }
        // Stream-K fills every slot: fewer CTAs than slots let the block
        // scheduler stack two on one SM (kernels/gemv/wgmma_fp8.h).
        if (const int fit = kernels::WgmmaFp8CtasPerSm(v); fit >= 1 && fit <= kMaxStreamKPerSm && num_sms_ > 0) {
          candidates.push_back({.variant = v, .streamk_per_sm = fit});
        }
        for (const WgmmaChoice& c : candidates) {
          if (!Fits(c, n)) continue;
          auto ms = time_wgmma(c);
          if (!ms.ok()) {
            // A variant this GPU or driver cannot launch (rejected before
            // any device work) is no candidate; a device fault is an error.
            GEMMA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
            spdlog::debug("cuda: wgmma {} on {}x{}: {}", Name(c), n, k, ms.status().ToString());
            continue;
          }
          if (*ms < best_ms) {
            best_ms = *ms;
            best = c;
          }
        }
      }
      if (gemv_bucket && gemv_bucket_best.variant < 0) gemv_bucket_best = best;
      // The fastest of many noisy timings is biased low: re-time it and
      // the baseline once more and decide on those.
      if (best.variant >= 0) {
        auto again = time_wgmma(best);
        if (!again.ok()) return again.status();
        best.wgmma_ms = RoundToNs(*again);
        base_ms = time_baseline();
        if (!base_ms.ok()) return base_ms.status();
      }
      best.baseline_ms = RoundToNs(*base_ms);
      choices_[{n, k, bucket}] = best;
      Store(n, k, bucket, codes_given);
    }
  }
  for (int b : buckets) {
    if (b > kernels::kGemvMaxBatch) choices_.at({n, k, b}).baseline_margin_ms = lt_margin_ms_;
  }
  std::string line = absl::StrCat("cuda: fp8 ", n, " x ", k, " (", mats.size(), " matrices)");
  for (int b : buckets) {
    const WgmmaChoice& c = choices_.at({n, k, b});
    const bool cached = std::find(untuned.begin(), untuned.end(), b) == untuned.end();
    absl::StrAppend(&line, "; m", b, ": ");
    if (c.variant >= 0) absl::StrAppend(&line, Name(c), " ", c.wgmma_ms * 1e3f, " us vs ");
    const char* base = b <= kernels::kGemvMaxBatch ? "GEMV" : "cuBLASLt";
    absl::StrAppend(&line, base, " ", c.baseline_ms * 1e3f, " us",
                    c.baseline_margin_ms > 0.0f ? absl::StrCat(" + ", c.baseline_margin_ms * 1e3f, " us margin") : "",
                    " -> ", c.variant >= 0 && c.wgmma_ms < c.baseline_ms + c.baseline_margin_ms ? "wgmma" : base,
                    cached ? " (cached)" : "");
  }
  spdlog::info("{}", line);
  return absl::OkStatus();
}

const WgmmaChoice* WgmmaPath::ChoiceFor(const DeviceMatrix& w, int n, int k, int m) const {
  if (preference_ == WgmmaPreference::kOff || w.wgmma == nullptr || m < 1 || m > max_m_) return nullptr;
  if (!only_shapes_.empty() && !only_shapes_.contains(absl::StrCat(n, "x", k))) return nullptr;
  // The descriptor must describe this very matrix (a DeviceMatrix copied
  // with another data pointer would otherwise read the wrong weights).
  if (w.wgmma->w != w.e4m3() || w.wgmma->n != n || w.wgmma->k != k) return nullptr;
  // A GEMV batch takes its own bucket only (its baseline was that batch's
  // GEMV); above, the smallest tuned bucket >= m.
  const auto it = m <= kernels::kGemvMaxBatch ? choices_.find({n, k, m}) : choices_.lower_bound({n, k, m});
  if (it == choices_.end() || std::get<0>(it->first) != n || std::get<1>(it->first) != k) return nullptr;
  const WgmmaChoice& c = it->second;
  if (c.variant < 0 || !kernels::WgmmaFp8VariantSupportsM(c.variant, m)) return nullptr;
  return preference_ == WgmmaPreference::kForce || c.wgmma_ms < c.baseline_ms + c.baseline_margin_ms ? &c : nullptr;
}

std::string WgmmaPath::Launch(const LinearArgs& a, const WgmmaChoice& c, cudaStream_t stream) {
  const bool split = c.splits > 1 || c.streamk_per_sm > 0;
  if (split && !Fits(c, a.n)) return "wgmma_fp8: split-K / stream-K scratch not reserved for this shape";
  return kernels::LaunchWgmmaFp8({.w = a.w.wgmma,
                                  .w_scale = a.w.row_scale,
                                  .x = a.x_fp8,
                                  .x_scale = a.x_scale,
                                  .out_bf16 = a.out_bf16,
                                  .out_f32 = a.out_f32,
                                  .n = a.n,
                                  .k = a.k,
                                  .m = a.m,
                                  .softcap = a.softcap,
                                  .variant = c.variant,
                                  .splits = c.splits,
                                  .workspace = split ? workspace_.get<float>() : nullptr,
                                  .counters = split ? counters_.get<int>() : nullptr,
                                  .streamk_ctas = c.streamk_per_sm * num_sms_},
                                 stream);
}

std::string WgmmaPath::Describe(const DeviceMatrix& w, int n, int k, int m) const {
  const WgmmaChoice* c = ChoiceFor(w, n, k, m);
  if (c) return Name(*c);
  return m <= kernels::kGemvMaxBatch ? "GEMV" : "cuBLASLt";
}

}  // namespace gemma::cuda
