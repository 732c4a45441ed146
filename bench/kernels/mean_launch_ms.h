// Mean milliseconds of `launch` on the default stream over `reps` runs,
// after `warmup` untimed ones (the benches' shared timer).
#pragma once

#include <cuda_runtime.h>

namespace gemma::kernels::bench {

template <typename F>
double MeanLaunchMs(F&& launch, int warmup, int reps) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  for (int i = 0; i < warmup; ++i) launch();
  cudaEventRecord(a);
  for (int i = 0; i < reps; ++i) launch();
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms / reps;
}

}  // namespace gemma::kernels::bench
