// Tile-kernel instances for head_dim 64.
#include "kernels/attention/tile_instances.cuh"

namespace gemma::kernels::attention {

const KernelTable& TableD64() {
  static const KernelTable table = MakeTable<64>();
  return table;
}

}  // namespace gemma::kernels::attention
