#include "engine/cuda/linear/tuner.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/cuda/common/cuda_util.h"
#include "kernels/gemv/gemv.h"
#include "kernels/init/random_init.h"
#include "spdlog/spdlog.h"

namespace gemma::cuda {

absl::Status LinearTuner::Run(std::span<const TunedMatrix> mats, int max_slots, int max_m,
                              float lm_head_softcap) {
  GEMMA_STATUS_RETURN_IF_ERROR(TuneGemv(mats, max_slots));
  return TuneWgmma(mats, max_m, lm_head_softcap);
}

absl::Status LinearTuner::TuneGemv(std::span<const TunedMatrix> mats, int max_slots) {
  std::set<std::pair<int, int>> shapes;  // (n, k)
  int max_k = 0, max_n = 0;
  for (const auto& m : mats) {
    max_n = std::max(max_n, m.n);
    max_k = std::max(max_k, m.k);
  }
  const int max_batch = std::min(max_slots, kernels::kGemvMaxBatch);
  DeviceBuffer x, out;
  GEMMA_STATUS_RETURN_IF_ERROR(x.Allocate(size_t{8} * max_k * 2));
  GEMMA_STATUS_RETURN_IF_ERROR(out.Allocate(size_t{8} * max_n * 4));
  kernels::RandomFillParams rp;  // timing on zeros would flatter the kernel
  rp.out_bf16 = x.get<__nv_bfloat16>();
  rp.count = int64_t{8} * max_k;
  rp.stddev = 1.0f;
  GEMMA_KERNEL_RETURN_IF_ERROR(kernels::LaunchRandomFill(rp, stream_));
  for (const auto& m : mats) {
    if (!shapes.insert({m.n, m.k}).second) continue;
    for (int b = 1; b <= max_batch; ++b) {
      GEMMA_STATUS_RETURN_IF_ERROR(
          linear_.Autotune(m.n, m.k, b, m.w, x.get<__nv_bfloat16>(), out.get<float>(), stream_));
    }
  }
  spdlog::info("cuda: GEMV autotuned for {} shapes x {} batch sizes", shapes.size(), max_batch);
  if (const std::string fp8 = linear_.Fp8TuningSummary(1); !fp8.empty()) spdlog::info("cuda: fp8 GEMV at batch 1:\n{}", fp8);
  return absl::OkStatus();
}

// Decode batches, fp8 matrices with a TMA descriptor: the wgmma FP8 linear
// against the tuned GEMV (batches up to kGemvMaxBatch) and cuBLASLt (above)
// (wgmma_path.h), per shape over every layer's copy of it (so the timed
// weights stream from HBM, as in a step).
// Its scratch is reserved here, before the paged pool takes what is left.
// A tuning failure that leaves the device usable only costs the wgmma path.
absl::Status LinearTuner::TuneWgmma(std::span<const TunedMatrix> mats, int max_m, float lm_head_softcap) {
  // (n, k, LM head, codes given) -> the matrices of that shape.
  std::map<std::tuple<int, int, bool, bool>, std::vector<DeviceMatrix>> groups;
  int max_n = 0;
  for (const TunedMatrix& m : mats) {
    if (!m.w.fp8() || m.w.wgmma == nullptr) continue;
    groups[{m.n, m.k, m.lm_head, m.codes_given}].push_back(m.w);
    max_n = std::max(max_n, m.n);
  }
  if (groups.empty()) return absl::OkStatus();
  absl::Status st = linear_.ReserveWgmmaFp8(max_n);
  for (const auto& [shape, group] : groups) {
    if (!st.ok()) break;
    const auto [n, k, lm_head, codes_given] = shape;
    st = linear_.AutotuneWgmmaFp8(group, n, k, max_m, lm_head, lm_head ? lm_head_softcap : 0.0f,
                                  codes_given, stream_);
  }
  if (st.ok()) return absl::OkStatus();
  GEMMA_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());  // a device fault is fatal
  spdlog::warn("cuda: wgmma fp8 tuning failed ({}): fp8 decode runs the GEMV and cuBLASLt", st.ToString());
  linear_.DisableWgmmaFp8();
  return absl::OkStatus();
}

}  // namespace gemma::cuda
