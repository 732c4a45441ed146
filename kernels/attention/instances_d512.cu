// Tile-kernel instances for head_dim 512.
#include "kernels/attention/tile_instances.cuh"

namespace gemma::kernels::attention {

const KernelTable& TableD512() {
  static const KernelTable table = MakeTable<512>();
  return table;
}

}  // namespace gemma::kernels::attention
