// Tile-kernel instances for head_dim 256.
#include "kernels/attention/hopper_prefill.h"
#include "kernels/attention/tile_instances.cuh"

namespace gemma::kernels::attention {

const KernelTable& TableD256() {
  static const KernelTable table = [] {
    KernelTable t = MakeTable<256>();
    AddHopperPrefill(256, t);  // wgmma candidates next to the tile kernel's
    return t;
  }();
  return table;
}

}  // namespace gemma::kernels::attention
