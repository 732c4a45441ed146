// Instances and launchers of the Hopper prefill kernel (hopper_prefill.cuh).
#include "kernels/attention/hopper_prefill.h"

#include <cstdlib>
#include <string>

#include "kernels/attention/hopper_prefill.cuh"
#include "kernels/attention/prefill_tuning.h"

namespace gemma::kernels::attention {
namespace {

template <int D, int BN, int STAGES, int QR, bool F8>
cudaError_t SetUp() {
  return cudaFuncSetAttribute(HopperPrefillKernel<D, BN, STAGES, QR, F8>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              HopperShape<D, BN, STAGES, QR, F8>::kSmemBytes);
}

template <int D, int BN, int STAGES, int QR, bool F8>
void Launch(const KernelParams& p, dim3 grid, cudaStream_t stream) {
  using H = HopperShape<D, BN, STAGES, QR, F8>;
  HopperPrefillKernel<D, BN, STAGES, QR, F8><<<grid, H::kThreads, H::kSmemBytes, stream>>>(p);
}

// Named "wg-m<BM>n<BN>s<STAGES>[q<QR>]": the tile kernel's names start with "m".
template <int D, int BN, int STAGES, int QR>
KernelEntry Entry() {
  using H = HopperShape<D, BN, STAGES, QR>;
  KernelEntry e;
  e.name = "wg-m" + std::to_string(H::kBM) + "n" + std::to_string(BN) + "s" + std::to_string(STAGES) +
           (QR > 0 ? "q" + std::to_string(QR) : "");
  e.block_m = H::kBM;
  e.block_n = BN;
  e.warps = H::kThreads / 32;
  e.stages = STAGES;
  e.d_split = H::kWD;
  e.threads = H::kThreads;
  e.smem_bytes = H::kSmemBytes;
  e.setup = &SetUp<D, BN, STAGES, QR, false>;
  e.launch = &Launch<D, BN, STAGES, QR, false>;
  // The E4M3-cache build stages the codes in the Q sub-tiles held in
  // registers: QR >= 8 only (same shared memory as the bf16 build).
  if constexpr (QR >= 8) {
    e.setup_fp8 = &SetUp<D, BN, STAGES, QR, true>;
    e.launch_fp8 = &Launch<D, BN, STAGES, QR, true>;
  }
  return e;
}

}  // namespace

void AddHopperPrefill(int head_dim, KernelTable& t) {
  // GEMMA_PREFILL_WGMMA=0: the tile kernel's candidates only (A/B runs).
  if (!PrefillWgmmaEnabled()) return;
  if (head_dim == 512) {
    // Q 64 KB + 2 x 64 KB K/V + 32 KB S exchange; half or 3/4 of Q in registers (all of it spills)
    t.prefill.push_back(Entry<512, 32, 2, 0>());
    t.prefill.push_back(Entry<512, 32, 2, 8>());
    t.prefill.push_back(Entry<512, 32, 2, 12>());
  } else if (head_dim == 256) {
    t.prefill.push_back(Entry<256, 64, 2, 0>());  // Q 64 KB + 2 x 64 KB K/V
    t.prefill.push_back(Entry<256, 64, 2, 8>());
    t.prefill.push_back(Entry<256, 32, 3, 0>());  // Q 64 KB + 3 x 32 KB K/V
  }
}

}  // namespace gemma::kernels::attention
