// Tile-kernel instances for head_dim 128.
#include "kernels/attention/tile_instances.cuh"

namespace gemma::kernels::attention {

const KernelTable& TableD128() {
  static const KernelTable table = MakeTable<128>();
  return table;
}

}  // namespace gemma::kernels::attention
