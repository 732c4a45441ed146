#include "kernels/attention/kernel_params.h"

namespace gemma::kernels::attention {

const KernelTable& TableD32();
const KernelTable& TableD64();
const KernelTable& TableD128();
const KernelTable& TableD256();
const KernelTable& TableD512();

const KernelTable* TableForHeadDim(int head_dim) {
  switch (head_dim) {
    case 32: return &TableD32();
    case 64: return &TableD64();
    case 128: return &TableD128();
    case 256: return &TableD256();
    case 512: return &TableD512();
    default: return nullptr;
  }
}

const KernelTable* PaddedTableForHeadDim(int head_dim) {
  if (head_dim <= 0 || head_dim % 16 != 0 || head_dim > kMaxHeadDim || TableForHeadDim(head_dim) != nullptr)
    return nullptr;
  int d = 32;
  while (d < head_dim) d *= 2;
  return TableForHeadDim(d);
}

}  // namespace gemma::kernels::attention
