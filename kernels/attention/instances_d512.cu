// Tile-kernel instances for head_dim 512.
#include "kernels/attention/hopper_prefill.h"
#include "kernels/attention/tile_instances.cuh"

namespace gemma::kernels::attention {

const KernelTable& TableD512() {
  static const KernelTable table = [] {
    KernelTable t = MakeTable<512>();
    AddHopperPrefill(512, t);  // wgmma candidates next to the tile kernel's
    return t;
  }();
  return table;
}

}  // namespace gemma::kernels::attention
