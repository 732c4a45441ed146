// Tile-kernel instances for head_dim 32.
#include "kernels/attention/tile_instances.cuh"

namespace gemma::kernels::attention {

const KernelTable& TableD32() {
  static const KernelTable table = MakeTable<32>();
  return table;
}

}  // namespace gemma::kernels::attention
