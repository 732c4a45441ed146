#include "engine/cuda/decode_graph_cache.h"

#include <algorithm>

namespace gemma::cuda {

DecodeGraphCache::~DecodeGraphCache() {
  for (auto& [batch, exec] : graphs_) cudaGraphExecDestroy(exec);
}

int DecodeGraphCache::Bucket(int batch) const {
  if (!enabled_) return batch;
  int bucket = 1;
  while (bucket < batch) bucket *= 2;
  return std::min({bucket, max_slots_, max_pass_tokens_});
}

std::set<int> DecodeGraphCache::Buckets() const {
  std::set<int> buckets;
  for (int b = 1; b <= max_slots_; ++b) buckets.insert(Bucket(b));
  return buckets;
}

absl::Status DecodeGraphCache::Run(ModelForward& forward, int batch, cudaStream_t stream) {
  if (auto it = graphs_.find(batch); it != graphs_.end())
    return CudaStatus(cudaGraphLaunch(it->second, stream), "cudaGraphLaunch");
  GEMMA_STATUS_RETURN_IF_ERROR(forward.EnqueueLayers({batch, batch, 1}, stream));
  GEMMA_STATUS_RETURN_IF_ERROR(forward.EnqueueLogits(0, batch, /*argmax=*/true, stream));
  if (!enabled_) return absl::OkStatus();
  GEMMA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return Capture(forward, batch, stream);
}

absl::Status DecodeGraphCache::Capture(ModelForward& forward, int batch, cudaStream_t stream) {
  GEMMA_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  PassShape shape{batch, batch, 1};
  absl::Status st = forward.EnqueueLayers(shape, stream);
  if (st.ok()) st = forward.EnqueueLogits(0, batch, /*argmax=*/true, stream);
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(stream, &graph);
  if (!st.ok()) {
    if (graph) cudaGraphDestroy(graph);
    return st;
  }
  GEMMA_CUDA_RETURN_IF_ERROR(end);
  cudaGraphExec_t exec = nullptr;
  const cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  GEMMA_CUDA_RETURN_IF_ERROR(inst);
  graphs_[batch] = exec;
  return absl::OkStatus();
}

}  // namespace gemma::cuda
