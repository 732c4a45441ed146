// FP8 E4M3 linear for decode batches of up to 64 (and 128) tokens on Hopper
// (sm_90a):
//   out[b, j] = w_scale[j] * x_scale[b] * sum_k w[j, k] x[b, k]
// with w [n, k] and x [m, k] both E4M3 row-major (k contiguous), fp32 scales
// per weight row and per token, fp32 accumulation in the tensor cores'
// native FP8 instruction (wgmma.mma_async ... .e4m3.e4m3), bf16 output or
// fp32 output with an optional softcap cap * tanh(v / cap).
//
// Swap-AB: the weight rows are the instruction's M side (64 per wgmma), the
// tokens its N side (16, 32, 64 or 128 per variant; tokens past m are TMA
// zero fill and never stored). A producer warp streams 64-row x 128-byte
// weight boxes and the matching x box through a ring of shared-memory stages
// with TMA (cp.async.bulk.tensor, 128-byte swizzle); one or two consumer
// warpgroups multiply them. K may be split across CTAs, either in equal
// splits per row tile or stream-K (a persistent grid, each CTA an equal run
// of (row tile, k-tile) units): each CTA holding part of a row tile writes
// fp32 partials to a workspace and the last to arrive sums them in CTA order
// (deterministic) and stores.
//
// The weights' TMA descriptor (CUtensorMap) is built once per matrix on the
// host (MakeWgmmaFp8Weights, e.g. at model load) and handed to every launch;
// the activations' descriptor is encoded on the host at each launch (a few
// hundred ns of host work, nothing on the device; CUDA graphs keep it as a
// kernel argument). Nothing here links libcuda: cuTensorMapEncodeTiled is
// taken from the driver through the runtime's entry-point query.
//
// Launchers validate, never allocate or synchronize, and return an error
// message ("" on success). Launched with programmatic stream serialization
// (kernels/common/pdl.cuh): the producer starts the weight stream before
// waiting for the previous kernel. No engine types.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace gemma::kernels {

constexpr int kWgmmaFp8MaxM = 128;      // the widest variant's token tile
constexpr int kWgmmaFp8MaxSplits = 16;  // K split across CTAs
// Rows of one weight TMA box; a CTA's row tile is a multiple of it.
constexpr int kWgmmaFp8BoxRows = 64;

// An opaque TMA descriptor: the 128 bytes of a CUtensorMap (cuda.h), kept
// out of this header so that includers need not see the driver API.
struct alignas(128) WgmmaFp8TensorMap {
  uint64_t opaque[16];
};

// The TMA descriptor of one E4M3 weight matrix [n, k] (64-row x 128-byte
// boxes, 128-byte swizzle, out-of-bounds boxes zero-filled). Build once per
// matrix (host only, no device work) and keep it as long as the matrix lives.
struct WgmmaFp8Weights {
  WgmmaFp8TensorMap map = {};
  const uint8_t* w = nullptr;  // what the map points at, for validation
  int n = 0;
  int k = 0;
};

// Fills *out for w [n, k] (16-byte aligned, k a positive multiple of 16).
std::string MakeWgmmaFp8Weights(const uint8_t* w, int n, int k, WgmmaFp8Weights* out);

struct WgmmaFp8Params {
  const WgmmaFp8Weights* w = nullptr;  // host object (its map is copied into the launch)
  const float* w_scale = nullptr;      // [n]
  const uint8_t* x = nullptr;          // [m, k] E4M3, 16-byte aligned
  const float* x_scale = nullptr;      // [m]
  __nv_bfloat16* out_bf16 = nullptr;   // [m, n], or
  float* out_f32 = nullptr;            // [m, n] (exactly one of the two)
  int n = 0;                           // must match w->n, w->k
  int k = 0;
  int m = 0;                           // 1..WgmmaFp8VariantMaxM(variant)
  float softcap = 0.0f;                // > 0: out = cap * tanh(out / cap) (fp32 out only)
  int variant = -1;                    // 0..NumWgmmaFp8Variants()-1; -1: the default for m
  int splits = 1;                      // K split across CTAs, 1..kWgmmaFp8MaxSplits
  // splits > 1 only: fp32 partials of WgmmaFp8WorkspaceFloats(variant, n,
  // splits) floats, and one arrival counter per row tile (WgmmaFp8RowTiles),
  // zeroed once when allocated: every launch leaves them zero again, so
  // CUDA-graph replays start clean. Launches sharing them must be ordered
  // (one stream).
  float* workspace = nullptr;
  int* counters = nullptr;
  // > 0: stream-K instead of a grid of row tiles x splits (splits must be
  // 1): this many CTAs (capped at row tiles x k-tiles; meant to be
  // WgmmaFp8CtasPerSm x the SM count: one full wave. With fewer, the block
  // scheduler may stack two CTAs on one SM beside the previous kernel's
  // blocks and leave another idle; the pair then finishes last — seen on
  // the H200 as a 2-per-SM variant at 1 CTA per SM timing 68 us alone and
  // costing ~13 us more inside decode steps) each take an equal,
  // contiguous run of the (row tile, 128-k tile) units, crossing row tiles;
  // a row tile shared by several CTAs is summed through the workspace
  // (WgmmaFp8StreamKWorkspaceFloats floats) and counters as above. No
  // partial last wave, and every SM busy on shapes with few row tiles.
  int streamk_ctas = 0;
};

int NumWgmmaFp8Variants();
// "wg-" / "wgp-" + "n<token tile>c<consumer warpgroups>t<64-row tiles per
// warpgroup>s<stages>"; "default" for -1 or an unknown variant.
const char* WgmmaFp8VariantName(int variant);
// "wgp-" variants (and the defaults) add each 128-k tile's tensor-core sum
// to fp32 registers; "wg-" variants let the tensor cores accumulate all of
// K, whose FP8 accumulation keeps only ~14 bits (like cuBLASLt's fast
// accumulation: ~1e-3 relative error at k = 8192 instead of ~1e-5).
bool WgmmaFp8VariantPromotes(int variant);
// The token tile N of a variant (the most tokens it takes); -1: the widest;
// 0 for an unknown variant.
int WgmmaFp8VariantMaxM(int variant);
bool WgmmaFp8VariantSupportsM(int variant, int m);
// The variant taken for variant -1 at m tokens.
int WgmmaFp8DefaultVariant(int m);
// Weight rows per CTA (64 x warpgroups x tiles); -1: the smallest of any
// variant.
int WgmmaFp8RowsPerCta(int variant);
// CTAs along n (= counters a split launch needs); variant -1: the most of
// any variant, enough for every choice.
int WgmmaFp8RowTiles(int variant, int n);
// Workspace floats a split launch of `variant` needs (0 when splits == 1);
// variant -1: enough for every variant.
size_t WgmmaFp8WorkspaceFloats(int variant, int n, int splits);
// Workspace floats a stream-K launch of `variant` over `ctas` CTAs needs;
// variant -1: enough for every variant.
size_t WgmmaFp8StreamKWorkspaceFloats(int variant, int ctas);
// CTAs of `variant` one multiprocessor holds at once (shared memory); 0 for
// an unknown variant or one this GPU cannot run. Needs a current device.
int WgmmaFp8CtasPerSm(int variant);
std::string LaunchWgmmaFp8(const WgmmaFp8Params& p, cudaStream_t stream);

}  // namespace gemma::kernels
