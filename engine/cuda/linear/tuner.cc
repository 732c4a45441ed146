#include "engine/cuda/linear/tuner.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/cuda/common/cuda_util.h"
#include "engine/cuda/linear/linear.h"
#include "kernels/attention/autotune.h"
#include "kernels/gemv/gemv.h"
#include "kernels/gemv/gemv_w4a16.h"
#include "kernels/init/random_init.h"
#include "spdlog/spdlog.h"

namespace gemma::cuda {

Tuner::Tuner(const TuningSwitches& switches) : switches_(switches) {
  kernels::attention::AutotuneCache::Get().Configure(switches.autotune, switches.autotune_cache);
  kernels::ConfigurePrefillWgmma(switches.prefill_wgmma);
}

absl::Status Tuner::TuneLinears(LinearDispatcher& linear, std::span<const TunedMatrix> mats, int max_slots,
                                int max_m, float lm_head_softcap, cudaStream_t stream) {
  GEMMA_STATUS_RETURN_IF_ERROR(TuneGemv(linear, mats, max_slots, stream));
  return TuneWgmma(linear, mats, max_m, lm_head_softcap, stream);
}

absl::Status Tuner::TuneGemv(LinearDispatcher& linear, std::span<const TunedMatrix> mats, int max_slots,
                             cudaStream_t stream) {
  std::set<std::pair<int, int>> shapes;  // (n, k)
  int max_k = 0, max_n = 0;
  for (const auto& m : mats) {
    max_n = std::max(max_n, m.n);
    max_k = std::max(max_k, m.k);
  }
  const int max_batch = std::min(max_slots, kernels::kGemvMaxBatch);
  // int4 matrices: the W4A16 kernel also serves the decode buckets above 8.
  std::vector<int> w4_buckets;
  for (int b = 16; b <= std::min(max_slots, kernels::kW4MaxBatch); b *= 2) w4_buckets.push_back(b);
  if (max_slots > kernels::kGemvMaxBatch && max_slots <= kernels::kW4MaxBatch &&
      std::find(w4_buckets.begin(), w4_buckets.end(), max_slots) == w4_buckets.end()) {
    w4_buckets.push_back(max_slots);
  }
  const int rows = w4_buckets.empty() ? 8 : std::max(8, w4_buckets.back());
  DeviceBuffer x, out;
  GEMMA_STATUS_RETURN_IF_ERROR(x.Allocate(size_t(rows) * max_k * 2));
  GEMMA_STATUS_RETURN_IF_ERROR(out.Allocate(size_t(rows) * max_n * 4));
  kernels::RandomFillParams rp;  // timing on zeros would flatter the kernel
  rp.out_bf16 = x.get<__nv_bfloat16>();
  rp.count = int64_t{rows} * max_k;
  rp.stddev = 1.0f;
  GEMMA_KERNEL_RETURN_IF_ERROR(kernels::LaunchRandomFill(rp, stream));
  std::map<std::pair<int, int>, std::vector<DeviceMatrix>> int4_copies;  // every layer's, per shape
  for (const auto& m : mats) {
    if (m.w.int4()) int4_copies[{m.n, m.k}].push_back(m.w);
  }
  for (const auto& m : mats) {
    if (!shapes.insert({m.n, m.k}).second) continue;
    std::vector<int> batches;
    for (int b = 1; b <= max_batch; ++b) batches.push_back(b);
    if (m.w.int4()) batches.insert(batches.end(), w4_buckets.begin(), w4_buckets.end());
    for (int b : batches) {
      if (m.w.int4() && LinearDispatcher::Int4UsesFp8Copy(m.w, b)) continue;  // the copy's wgmma choice instead
      if (m.w.int4()) {
        GEMMA_STATUS_RETURN_IF_ERROR(linear.AutotuneInt4(m.n, m.k, b, int4_copies[{m.n, m.k}],
                                                         x.get<__nv_bfloat16>(), out.get<float>(), stream,
                                                         m.partial_sums && b == 1));
        continue;
      }
      GEMMA_STATUS_RETURN_IF_ERROR(
          linear.Autotune(m.n, m.k, b, m.w, x.get<__nv_bfloat16>(), out.get<float>(), stream));
    }
  }
  spdlog::info("cuda: GEMV autotuned for {} shapes x {} batch sizes", shapes.size(), max_batch);
  if (const std::string fp8 = linear.Fp8TuningSummary(1); !fp8.empty()) spdlog::info("cuda: fp8 GEMV at batch 1:\n{}", fp8);
  return absl::OkStatus();
}

// Decode batches, fp8 matrices (and int4 ones' fp8 copies) with a TMA
// descriptor: the wgmma FP8 linear
// against the tuned GEMV (batches up to kGemvMaxBatch) and cuBLASLt (above)
// (wgmma_path.h), per shape over every layer's copy of it (so the timed
// weights stream from HBM, as in a step).
// Its scratch is reserved here, before the paged pool takes what is left.
// A tuning failure that leaves the device usable only costs the wgmma path.
absl::Status Tuner::TuneWgmma(LinearDispatcher& linear, std::span<const TunedMatrix> mats, int max_m,
                              float lm_head_softcap, cudaStream_t stream) {
  // (n, k, LM head, codes given, scales left) -> the matrices of that shape.
  std::map<std::tuple<int, int, bool, bool, bool>, std::vector<DeviceMatrix>> groups;
  int max_n = 0;
  for (const TunedMatrix& m : mats) {
    // int4 matrices with an fp8 copy run the copy above kMaxW4RowsWithFp8Copy
    // rows (linear_int4.cc): its wgmma choice is tuned like fp8 weights'.
    const DeviceMatrix w = m.w.int4() && m.w.w4_fp8 != nullptr ? m.w.Fp8Copy() : m.w;
    if (!w.fp8() || w.wgmma == nullptr) continue;
    groups[{m.n, m.k, m.lm_head, m.codes_given, m.scales_left}].push_back(w);
    max_n = std::max(max_n, m.n);
  }
  if (groups.empty()) return absl::OkStatus();
  absl::Status st = linear.ReserveWgmmaFp8(max_n);
  for (const auto& [shape, group] : groups) {
    if (!st.ok()) break;
    const auto [n, k, lm_head, codes_given, scales_left] = shape;
    st = linear.AutotuneWgmmaFp8(group, n, k, max_m, lm_head, lm_head ? lm_head_softcap : 0.0f,
                                  codes_given, scales_left, stream);
  }
  if (st.ok()) return absl::OkStatus();
  GEMMA_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());  // a device fault is fatal
  spdlog::warn("cuda: wgmma fp8 tuning failed ({}): fp8 decode runs the GEMV and cuBLASLt", st.ToString());
  linear.DisableWgmmaFp8();
  return absl::OkStatus();
}

}  // namespace gemma::cuda
