// Alternative builds of the decode kernel for head_dims 256 and 512 (the
// 31B's), next to KernelTable::decode's. Over an E4M3 cache: the tile kernel
// with fewer warps splitting head_dim (each warp's partial S is reduced
// through shared memory and each warp repeats the softmax, which dominate
// the instructions per key), longer key tiles, deeper pipelines. Over both
// caches: the key-rows kernel (decode_key_rows.cuh, "kr-", and "kr2-" with
// warp pairs splitting head_dim), whose warps own whole keys instead.
// Benchmarks and tests launch them by index (LaunchDecodeAttentionVariant);
// two key-rows builds are the engine's E4M3 default (Fp8DecodeDefault). Their
// own translation unit: they compile in parallel with the head_dim tables.
#include <vector>

#include "kernels/attention/decode_default.h"
#include "kernels/attention/decode_key_rows.cuh"
#include "kernels/attention/tile_instances.cuh"

namespace gemma::kernels::attention {
namespace {

// A decode build's name: WD warps splitting head_dim, BN keys per tile,
// STAGES deep, MINB blocks per multiprocessor.
std::string DecodeName(int wd, int bn, int stages, int minb) {
  return "w" + std::to_string(wd) + "n" + std::to_string(bn) + "s" + std::to_string(stages) + "b" +
         std::to_string(minb);
}

// WD warps splitting head_dim, BN keys per tile, STAGES deep, MINB blocks
// per multiprocessor (launch bounds, and the split count's block slots).
template <int D, int WD, int BN, int STAGES, int MINB>
KernelEntry Fp8Decode() {
  using S = TileShape<D, 1, WD, BN, STAGES, 1, 0, 1>;
  static_assert(MINB * (S::kSmemBytes + 1024) <= 228 * 1024, "the blocks do not fit a multiprocessor");
  KernelEntry e = DescribeTile<S>(BN, STAGES, WD);
  e.name = DecodeName(WD, BN, STAGES, MINB);
  AddFp8Build<D, 1, WD, BN, STAGES, 1, 0, MINB>(e);
  return e;
}

// The tile kernel over a bf16 cache: its keys-from-values build, and the
// plain one where MINB blocks of it fit a multiprocessor.
template <int D, int WD, int BN, int STAGES, int MINB>
KernelEntry Bf16Decode() {
  using S = TileShape<D, 1, WD, BN, STAGES, 1, 0, 2>;
  using Kfv = typename TileConfig<D, 1, WD, BN, STAGES, 1, 0, false, false, true>::S;
  static_assert(MINB * (Kfv::kSmemBytes + 1024) <= 228 * 1024, "the blocks do not fit a multiprocessor");
  KernelEntry e = DescribeTile<Kfv>(BN, STAGES, WD);  // the build it always has
  e.name = DecodeName(WD, BN, STAGES, MINB);
  if constexpr (MINB * (S::kSmemBytes + 1024) <= 228 * 1024) {
    e.setup = &SetUpTile<D, 1, WD, BN, STAGES, 1, 0, false, MINB>;
    e.launch = &LaunchTile<D, 1, WD, BN, STAGES, 1, 0, false, MINB>;
  }
  e.setup_kfv = &SetUpTile<D, 1, WD, BN, STAGES, 1, 0, false, MINB, false, true>;
  e.launch_kfv = &LaunchTile<D, 1, WD, BN, STAGES, 1, 0, false, MINB, false, true>;
  e.kfv_max_pairs = D / 8;
  e.bf16_blocks_per_sm = MINB;
  return e;
}

// The key-rows kernel: WARPS warps (SPLIT = 2: pairs splitting head_dim) of
// 16 keys each, STAGES deep, MINB blocks per multiprocessor; over an E4M3
// cache (F8) or a bf16 one.
// Over a bf16 cache at head_dim 512 also the keys-from-values build, and the
// one reading K whole only where MINB blocks of it fit a multiprocessor.
template <int D, int WARPS, int STAGES, int MINB, bool F8, int SPLIT = 1>
KernelEntry KeyRows() {
  using S = KeyRowsShape<D, WARPS, STAGES, F8, SPLIT>;
  using Kfv = KeyRowsShape<D, WARPS, STAGES, F8, SPLIT, !F8 && D == 512>;
  constexpr bool kWholeFits = MINB * (S::kSmemBytes + 1024) <= 228 * 1024;
  static_assert(kWholeFits || MINB * (Kfv::kSmemBytes + 1024) <= 228 * 1024, "the blocks do not fit a multiprocessor");
  KernelEntry e;
  e.name = std::string(SPLIT > 1 ? "kr2-w" : "kr-w") + std::to_string(WARPS) + "s" + std::to_string(STAGES) + "b" +
           std::to_string(MINB);
  e.block_m = 16;
  e.block_n = S::kBN;
  e.warps = WARPS;
  e.stages = STAGES;
  e.d_split = SPLIT;
  e.threads = WARPS * 32;
  e.smem_bytes = S::kSmemBytes;
  if constexpr (F8) {
    e.setup_fp8 = &SetUpKeyRows<D, WARPS, STAGES, MINB, true, SPLIT>;
    e.launch_fp8 = &LaunchKeyRows<D, WARPS, STAGES, MINB, true, SPLIT>;
    e.fp8_blocks_per_sm = MINB;
  } else {
    if constexpr (kWholeFits) {
      e.setup = &SetUpKeyRows<D, WARPS, STAGES, MINB, false, SPLIT>;
      e.launch = &LaunchKeyRows<D, WARPS, STAGES, MINB, false, SPLIT>;
    }
    if constexpr (D == 512) {
      e.setup_kfv = &SetUpKeyRows<D, WARPS, STAGES, MINB, false, SPLIT, true>;
      e.launch_kfv = &LaunchKeyRows<D, WARPS, STAGES, MINB, false, SPLIT, true>;
      e.kfv_max_pairs = D / 8;
    }
    e.bf16_blocks_per_sm = MINB;
  }
  return e;
}

}  // namespace

const std::vector<KernelEntry>& DecodeVariantTable(int head_dim, bool kv_fp8) {
  static const std::vector<KernelEntry> e4m3_512 = {
      Fp8Decode<512, 4, 32, 2, 2>(),  // half the warps: 64 accumulator registers
      Fp8Decode<512, 8, 64, 2, 1>(),  // twice the keys per barrier and exchange
      Fp8Decode<512, 4, 64, 2, 1>(),
      Fp8Decode<512, 8, 32, 3, 1>(),  // one block, three stages
      KeyRows<512, 2, 3, 2, true>(),
      KeyRows<512, 2, 2, 3, true>(),
      KeyRows<512, 4, 2, 1, true>(),
      KeyRows<512, 4, 3, 2, true, 2>(),  // pairs splitting head_dim: 64 accumulator registers
      KeyRows<512, 8, 2, 1, true, 2>(),
  };
  static const std::vector<KernelEntry> e4m3_256 = {
      Fp8Decode<256, 2, 32, 2, 4>(),  // 64 accumulator registers, two warps
      Fp8Decode<256, 4, 64, 2, 2>(),
      Fp8Decode<256, 2, 64, 2, 2>(),
      KeyRows<256, 2, 3, 4, true>(),
      KeyRows<256, 4, 2, 3, true>(),
  };
  // bf16: each build's splits count its blocks per multiprocessor
  // (bf16_blocks_per_sm).
  static const std::vector<KernelEntry> bf16_512 = {
      Bf16Decode<512, 4, 32, 2, 2>(),  // keys from values only: the default there
      KeyRows<512, 2, 3, 1, false>(),
      KeyRows<512, 2, 2, 1, false>(),
      KeyRows<512, 4, 3, 1, false, 2>(),
      KeyRows<512, 4, 2, 2, false, 2>(),  // keys from values only: compact K stages, two blocks
      KeyRows<512, 2, 2, 2, false>(),     // the same
  };
  static const std::vector<KernelEntry> bf16_256 = {
      KeyRows<256, 2, 3, 1, false>(),
      KeyRows<256, 4, 2, 1, false>(),
  };
  static const std::vector<KernelEntry> none;
  if (head_dim == 512) return kv_fp8 ? e4m3_512 : bf16_512;
  if (head_dim == 256) return kv_fp8 ? e4m3_256 : bf16_256;
  return none;
}

// attention-bench --batch-decode on the H200, µs per layer of the 31B (E4M3
// cache; the tile kernel's build -> this one):
//   global D512, batch 1 @131 072: 211.3 -> 146.7; batch 1 @8 192: 28.4 -> 25.6;
//   batch 64 @1 024: 101.7 -> 73.0 (kr2-w4s3b2);
//   sliding D256, batch 64 @1 024: 176.1 -> 141.9; batch 1: 11.1 -> 11.0
//   (kr-w4s2b3).
// Over a bf16 cache the tile kernel stays faster (the key-rows builds were
// 7-70 % slower), so only the E4M3 builds change.
const KernelEntry* Fp8DecodeDefault(int head_dim, int group) {
  const char* name = head_dim == 512 ? "kr2-w4s3b2" : head_dim == 256 ? "kr-w4s2b3" : nullptr;
  if (name == nullptr || group > kKeyRowsMaxGroup) return nullptr;
  for (const KernelEntry& e : DecodeVariantTable(head_dim, true)) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

// attention-bench --batch-decode on the H200, µs per layer of the 31B's
// global layer over a bf16 cache, the tile kernel's decode (33 splits at
// batch 1) -> keys from values on w4n32s2b2 (compact K stages, two blocks
// per multiprocessor, 66 splits, the second bf16 terms of kv_weight * Q in
// the m16 tile's rows 8-15): batch 1 @131 072 278.3 -> 203.0, @8 192
// 28.0 -> 28.9, @512 9.4 -> 11.0. The same tiles reading K whole did not
// fit two blocks per multiprocessor; w4n16s2b2, which does, took 259.4
// @131 072.
const KernelEntry* KeysFromValuesDecodeDefault(int head_dim) {
  // Looked up once: decode launches and split counts ask for it per layer.
  static const KernelEntry* const entry = []() -> const KernelEntry* {
    for (const KernelEntry& e : DecodeVariantTable(512, false)) {
      if (e.name == kKeysFromValuesDefault) return &e;
    }
    return nullptr;
  }();
  return head_dim == 512 ? entry : nullptr;
}

bool ServesKeysFromValues(const KernelEntry& e, const AttentionParams& params) {
  return !params.kv_fp8 && params.keys_from_values != nullptr && e.launch_kfv != nullptr &&
         params.rope_pairs % 8 == 0 && params.rope_pairs <= e.kfv_max_pairs &&
         params.num_heads <= kKeysFromValuesMaxGroup * params.num_kv_heads;
}

bool DecodeBuildServesGroup(const KernelEntry& e, int group) {
  return e.name.rfind("kr", 0) != 0 || group <= kKeyRowsMaxGroup;
}

}  // namespace gemma::kernels::attention
