// Tile-kernel instances for head_dim 256.
#include "kernels/attention/tile_instances.cuh"

namespace gemma::kernels::attention {

const KernelTable& TableD256() {
  static const KernelTable table = MakeTable<256>();
  return table;
}

}  // namespace gemma::kernels::attention
