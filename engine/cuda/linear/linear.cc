#include "engine/cuda/linear/linear.h"

#include <algorithm>
#include <functional>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "engine/cuda/common/launch_timer.h"
#include "kernels/attention/autotune.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/gemv/gemv.h"
#include "kernels/gemv/gemv_fp8.h"
#include "kernels/quant/fp8_quant.h"
#include "spdlog/spdlog.h"

namespace gemma::cuda {
namespace {

constexpr size_t kGemmWorkspaceBytes = 32u << 20;

// A GEMV variant's index from its name; -1 when this build has no such
// variant (a stale cache entry: the shape is re-timed).
int VariantByName(bool fp8, const std::string& name) {
  const int count = fp8 ? kernels::NumGemvFp8Variants() : kernels::NumGemvVariants();
  for (int v = 0; v < count; ++v) {
    if (name == (fp8 ? kernels::GemvFp8VariantName(v) : kernels::GemvVariantName(v))) return v;
  }
  return -1;
}

}  // namespace

absl::StatusOr<std::unique_ptr<LinearDispatcher>> LinearDispatcher::Create(Tuner* tuner, bool autotune,
                                                                            int tune_m) {
  std::unique_ptr<LinearDispatcher> r(new LinearDispatcher(*tuner));
  GEMMA_STATUS_RETURN_IF_ERROR(r->workspace_.Allocate(kGemmWorkspaceBytes));
  auto gemm = LtGemm::Create(r->workspace_.get(), kGemmWorkspaceBytes, autotune, tune_m, *tuner);
  if (!gemm.ok()) return gemm.status();
  r->gemm_ = std::move(*gemm);
  return r;
}

absl::Status LinearDispatcher::ReserveFp8(int max_m, int max_k) {
  if (max_m <= fp8_max_m_ && max_k <= fp8_max_k_) return absl::OkStatus();
  GEMMA_STATUS_RETURN_IF_ERROR(x_fp8_.Allocate(static_cast<size_t>(max_m) * max_k));
  GEMMA_STATUS_RETURN_IF_ERROR(x_scale_.Allocate(static_cast<size_t>(max_m) * sizeof(float)));
  fp8_max_m_ = max_m;
  fp8_max_k_ = max_k;
  return absl::OkStatus();
}

int LinearDispatcher::VariantFor(int n, int k, int batch) const {
  const auto& best = tuner_.choices().gemv_bf16;
  auto it = best.find({n, k, batch});
  return it == best.end() ? -1 : it->second;
}

int LinearDispatcher::Fp8VariantFor(int n, int k, int m, bool have_codes, bool have_bf16) const {
  const auto& best = tuner_.choices().gemv_fp8;
  auto it = best.find({n, k, m});
  if (it == best.end()) return -1;
  const Fp8GemvChoice& c = it->second;
  const float e4m3_ms = c.e4m3_ms + (have_codes ? 0.0f : c.quant_ms);
  return c.a16 >= 0 && have_bf16 && (c.e4m3 < 0 || c.a16_ms < e4m3_ms) ? c.a16 : c.e4m3;
}

bool LinearDispatcher::TakesFp8Input(const DeviceMatrix& w, int m, int n, int k) const {
  if (w.int4()) return Int4UsesFp8Copy(w, m) && TakesFp8Input(w.Fp8Copy(), m, n, k);
  if (!w.fp8()) return false;
  if (m > kernels::kGemvMaxBatch || wgmma_.ChoiceFor(w, n, k, m) != nullptr) return true;
  return !kernels::GemvFp8VariantTakesBf16(Fp8VariantFor(n, k, m, true, true));
}

std::string LinearDispatcher::LaunchGemvVariant(const LinearArgs& a, int variant, cudaStream_t stream) {
  if (a.w.fp8()) {
    kernels::GemvFp8Params p;
    p.w = a.w.e4m3();
    p.w_scale = a.w.row_scale;
    if (kernels::GemvFp8VariantTakesBf16(variant)) {
      p.x_bf16 = a.x;
    } else {
      p.x = a.x_fp8;
      p.x_scale = a.x_scale;
    }
    p.out_bf16 = a.out_bf16;
    p.out_f32 = a.out_f32;
    p.n = a.n;
    p.k = a.k;
    p.batch = a.m;
    p.softcap = a.softcap;
    p.variant = variant;
    return kernels::LaunchGemvFp8(p, stream);
  }
  kernels::GemvParams p;
  p.w = a.w.bf16();
  p.x = a.x;
  p.out_bf16 = a.out_bf16;
  p.out_f32 = a.out_f32;
  p.n = a.n;
  p.k = a.k;
  p.batch = a.m;
  p.softcap = a.softcap;
  p.variant = variant;
  return kernels::LaunchGemv(p, stream);
}

absl::Status LinearDispatcher::QuantizeX(const __nv_bfloat16* x, int m, int k, cudaStream_t stream) {
  if (m > fp8_max_m_ || k > fp8_max_k_) {
    return absl::InternalError(absl::StrCat("fp8 linear: ", m, " x ", k, " activations exceed the reserved ",
                                            fp8_max_m_, " x ", fp8_max_k_, " (ReserveFp8)"));
  }
  return KernelStatus(
      kernels::LaunchQuantizeRowsFp8({x, x_fp8_.get<uint8_t>(), x_scale_.get<float>(), m, k}, stream));
}

absl::Status LinearDispatcher::PrepareFp8Input(LinearArgs& a, cudaStream_t stream) {
  if (a.x_fp8 != nullptr) {
    return a.x_scale != nullptr ? absl::OkStatus() : absl::InternalError("fp8 linear: x_fp8 without x_scale");
  }
  GEMMA_STATUS_RETURN_IF_ERROR(QuantizeX(a.x, a.m, a.k, stream));
  a.x_fp8 = x_fp8_.get<uint8_t>();
  a.x_scale = x_scale_.get<float>();
  return absl::OkStatus();
}

absl::Status LinearDispatcher::RunFp8(LinearArgs a, cudaStream_t stream, LeftScales* left) {
  if (const WgmmaChoice* c = wgmma_.ChoiceFor(a.w, a.n, a.k, a.m)) {
    GEMMA_STATUS_RETURN_IF_ERROR(PrepareFp8Input(a, stream));
    const std::string err = wgmma_.Launch(a, *c, stream);
    if (err.empty()) return absl::OkStatus();
    // Refused before any device work (e.g. an unaligned x_fp8): the GEMV or
    // cuBLASLt computes it instead; a request never fails for the wgmma path.
    if (!wgmma_failed_) spdlog::warn("cuda: wgmma fp8 {}x{}x{}: {}; the baseline instead", a.m, a.n, a.k, err);
    wgmma_failed_ = true;
  }
  return RunFp8Baseline(a, stream, left);
}

absl::Status LinearDispatcher::RunFp8Baseline(LinearArgs a, cudaStream_t stream, LeftScales* left) {
  if (a.m <= kernels::kGemvMaxBatch) {
    const int variant = Fp8VariantFor(a.n, a.k, a.m, a.x_fp8 != nullptr, a.x != nullptr);
    if (!kernels::GemvFp8VariantTakesBf16(variant)) GEMMA_STATUS_RETURN_IF_ERROR(PrepareFp8Input(a, stream));
    return KernelStatus(LaunchGemvVariant(a, variant, stream));
  }
  GEMMA_STATUS_RETURN_IF_ERROR(PrepareFp8Input(a, stream));
  return RunFp8Gemm(a, stream, left);
}

absl::Status LinearDispatcher::RunFp8Gemm(const LinearArgs& a, cudaStream_t stream, LeftScales* left) {
  // cuBLASLt applies the per-row weight and per-token activation scales when
  // it offers the outer-vector scale mode; else it multiplies the E4M3 codes
  // and a small kernel scales the result in place.
  void* out = a.out_f32 ? static_cast<void*>(a.out_f32) : static_cast<void*>(a.out_bf16);
  auto scaled = gemm_->RunFp8(a.w.data, a.w.row_scale, a.x_fp8, a.x_scale, out,
                              a.out_f32 != nullptr, a.m, a.n, a.k, stream);
  if (!scaled.ok()) return scaled.status();
  if (*scaled) return a.softcap > 0.0f ? Softcap(a, stream) : absl::OkStatus();
  // The consumer scales as it reads, 8 columns (two 16-byte loads of
  // weight scales) at a time.
  if (left != nullptr && a.out_bf16 != nullptr && a.n % 8 == 0 &&
      reinterpret_cast<uintptr_t>(a.w.row_scale) % 16 == 0) {
    *left = {a.w.row_scale, a.x_scale};
    return absl::OkStatus();
  }
  kernels::ScaleFp8GemmParams sp;
  sp.out_bf16 = a.out_bf16;
  sp.out_f32 = a.out_f32;
  sp.weight_scale = a.w.row_scale;
  sp.token_scale = a.x_scale;
  sp.m = a.m;
  sp.n = a.n;
  sp.softcap = a.softcap;
  return KernelStatus(kernels::LaunchScaleFp8Gemm(sp, stream));
}

absl::Status LinearDispatcher::Softcap(const LinearArgs& a, cudaStream_t stream) {
  kernels::SoftcapParams sp;
  sp.x = a.out_f32;
  sp.count = static_cast<int64_t>(a.m) * a.n;
  sp.cap = a.softcap;
  return KernelStatus(kernels::LaunchSoftcap(sp, stream));
}

absl::Status LinearDispatcher::Run(const LinearArgs& a, cudaStream_t stream, LeftScales* left) {
  if (left != nullptr) *left = {};
  if (a.w.int4()) return RunInt4(a, stream, left);
  if (a.gelu_gate) return absl::InvalidArgumentError("linear: gelu_gate needs int4 weights (FusesGeluGate)");
  if (a.w.fp8()) return RunFp8(a, stream, left);
  if (a.m <= kernels::kGemvMaxBatch) {
    return KernelStatus(LaunchGemvVariant(a, VariantFor(a.n, a.k, a.m), stream));
  }
  void* out = a.out_f32 ? static_cast<void*>(a.out_f32) : static_cast<void*>(a.out_bf16);
  GEMMA_STATUS_RETURN_IF_ERROR(gemm_->Run(a.w.data, a.x, out, a.out_f32 != nullptr, a.m, a.n, a.k, stream));
  return a.softcap > 0.0f ? Softcap(a, stream) : absl::OkStatus();
}

// The key names the build's tiling count: a build with other tilings re-times.
std::string LinearDispatcher::GemvCacheKey(bool fp8, int n, int k, int batch) const {
  const int tilings = fp8 ? kernels::NumGemvFp8Variants() : kernels::NumGemvVariants();
  return kernels::attention::AutotuneCache::Key(
      fp8 ? "gemv-fp8" : "gemv",
      absl::StrCat(n, "x", k, "/b", batch, "/t", tilings, fp8 && !a16_ ? "/no-a16" : ""));
}

// Cache entries: bf16 "<variant>"; fp8 "<e4m3 variant> <ns> <a16 variant>
// <ns> <quant ns>" (the times decide between the two input paths per call;
// whole nanoseconds, as kept in memory, so a cached choice decides alike).
bool LinearDispatcher::LoadTuned(bool fp8, int n, int k, int batch) {
  auto& cache = kernels::attention::AutotuneCache::Get();
  if (!cache.enabled()) return false;
  const auto hit = cache.Lookup(GemvCacheKey(fp8, n, k, batch));
  if (!hit) return false;
  const std::vector<std::string> f = absl::StrSplit(*hit, ' ', absl::SkipEmpty());
  if (!fp8) {
    const int v = f.size() == 1 ? VariantByName(false, f[0]) : -1;
    if (v < 0 || !kernels::GemvVariantSupportsBatch(v, batch)) return false;
    tuner_.choices().gemv_bf16[{n, k, batch}] = v;
    ++cache_hits_;
    return true;
  }
  if (f.size() != 5) return false;
  Fp8GemvChoice c;
  c.e4m3 = VariantByName(true, f[0]);
  c.a16 = f[2] == "-" ? -1 : VariantByName(true, f[2]);
  int64_t ns[3] = {0, 0, 0};
  if (!absl::SimpleAtoi(f[1], &ns[0]) || !absl::SimpleAtoi(f[3], &ns[1]) || !absl::SimpleAtoi(f[4], &ns[2]) ||
      ns[0] < 0 || ns[1] < 0 || ns[2] < 0) {
    return false;
  }
  c.e4m3_ms = NsToMs(ns[0]);
  c.a16_ms = NsToMs(ns[1]);
  c.quant_ms = NsToMs(ns[2]);
  // Each family's entry must name a tiling of that family (a stale or edited
  // line must not hand E4M3 codes to an a16 kernel or the reverse).
  if (c.e4m3 < 0 || kernels::GemvFp8VariantTakesBf16(c.e4m3)) return false;
  if (f[2] != "-" && (c.a16 < 0 || !kernels::GemvFp8VariantTakesBf16(c.a16))) return false;
  tuner_.choices().gemv_fp8[{n, k, batch}] = c;
  ++cache_hits_;
  return true;
}

void LinearDispatcher::StoreTuned(bool fp8, int n, int k, int batch) const {
  auto& cache = kernels::attention::AutotuneCache::Get();
  if (!cache.enabled()) return;
  if (!fp8) {
    cache.Store(GemvCacheKey(false, n, k, batch),
                kernels::GemvVariantName(tuner_.choices().gemv_bf16.at({n, k, batch})));
    return;
  }
  const Fp8GemvChoice& c = tuner_.choices().gemv_fp8.at({n, k, batch});
  cache.Store(GemvCacheKey(true, n, k, batch),
              absl::StrCat(kernels::GemvFp8VariantName(c.e4m3), " ", MsToNs(c.e4m3_ms), " ",
                           c.a16 >= 0 ? kernels::GemvFp8VariantName(c.a16) : "-", " ", MsToNs(c.a16_ms), " ",
                           MsToNs(c.quant_ms)));
}

absl::Status LinearDispatcher::Autotune(int n, int k, int batch, const DeviceMatrix& w,
                                    const __nv_bfloat16* x, float* out, cudaStream_t stream) {
  if (w.int4()) return AutotuneInt4(n, k, batch, std::span<const DeviceMatrix>(&w, 1), x, out, stream);
  const bool fp8 = w.fp8();
  if (LoadTuned(fp8, n, k, batch)) return absl::OkStatus();
  auto timer = LaunchTimer::Create();
  if (!timer.ok()) return timer.status();
  // Mean ms of `launch` over kReps back-to-back runs after a warm-up.
  auto time_ms = [&](const std::function<std::string()>& launch) -> absl::StatusOr<float> {
    constexpr int kReps = 10;
    return (*timer)->MeanMs([&](int) { return launch(); }, kReps, stream);
  };
  LinearArgs a;
  a.w = w;
  a.x = x;
  a.out_f32 = out;
  a.m = batch;
  a.n = n;
  a.k = k;
  if (fp8) GEMMA_STATUS_RETURN_IF_ERROR(PrepareFp8Input(a, stream));
  // bf16: CUDA-core tilings and, for batch >= 2, the tensor-core ones; fp8:
  // its E4M3-input and bf16-input tilings, the fastest of each kept. The
  // fastest wins, so adding candidates never makes a tuned shape slower.
  const int num_variants = fp8 ? kernels::NumGemvFp8Variants() : kernels::NumGemvVariants();
  float best_ms[2] = {1e30f, 1e30f};  // [bf16 input] (fp8: E4M3 x, bf16 x; bf16: [0])
  int best[2] = {-1, -1};
  for (int v = 0; v < num_variants; ++v) {
    if (!fp8 && !kernels::GemvVariantSupportsBatch(v, batch)) continue;
    if (fp8 && !a16_ && kernels::GemvFp8VariantTakesBf16(v)) continue;
    auto ms = time_ms([&] { return LaunchGemvVariant(a, v, stream); });
    if (!ms.ok()) return ms.status();
    const int family = fp8 && kernels::GemvFp8VariantTakesBf16(v) ? 1 : 0;
    if (*ms < best_ms[family]) {
      best_ms[family] = *ms;
      best[family] = v;
    }
  }
  if (fp8) {
    auto quant_ms = time_ms([&] {
      const absl::Status st = QuantizeX(x, batch, k, stream);
      return st.ok() ? std::string() : std::string(st.message());
    });
    if (!quant_ms.ok()) return quant_ms.status();
    tuner_.choices().gemv_fp8[{n, k, batch}] =
        Fp8GemvChoice{best[0], RoundToNs(best_ms[0]), best[1], RoundToNs(best_ms[1]), RoundToNs(*quant_ms)};
  } else {
    tuner_.choices().gemv_bf16[{n, k, batch}] = best[0];
  }
  StoreTuned(fp8, n, k, batch);
  return absl::OkStatus();
}

absl::Status LinearDispatcher::AutotuneWgmmaFp8(std::span<const DeviceMatrix> mats, int n, int k, int max_m,
                                            bool out_f32, float softcap, bool codes_given, bool scales_left,
                                            cudaStream_t stream) {
  wgmma_.set_gemv_key_suffix(a16_ ? "" : "/no-a16");
  wgmma_.set_lt_key_suffix(scales_left ? "/left" : "");
  wgmma_.set_lt_margin_ms(scales_left ? WgmmaPath::kLeftScalesLtMarginMs : 0.0f);
  return wgmma_.Autotune(
      mats, n, k, max_m, out_f32, softcap, codes_given,
      [&](const LinearArgs& a) {
        LeftScales left;  // the reader scales: no scaling kernel to time
        return RunFp8Baseline(a, stream, scales_left ? &left : nullptr);
      },
      [&](LinearArgs& a) { return PrepareFp8Input(a, stream); }, stream);
}

std::string LinearDispatcher::Fp8TuningSummary(int batch) const {
  std::string s;
  for (const auto& [key, c] : tuner_.choices().gemv_fp8) {
    const auto [n, k, b] = key;
    if (b != batch) continue;
    absl::StrAppend(&s, s.empty() ? "" : "\n", "  fp8 GEMV ", n, " x ", k, " b", b, ": ",
                    kernels::GemvFp8VariantName(c.e4m3), " ", c.e4m3_ms * 1e3f, " us + quant ", c.quant_ms * 1e3f,
                    " us | ", kernels::GemvFp8VariantName(c.a16), " ", c.a16_ms * 1e3f, " us");
  }
  return s;
}

}  // namespace gemma::cuda
