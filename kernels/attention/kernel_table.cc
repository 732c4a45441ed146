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

}  // namespace gemma::kernels::attention
