#include "engine/cuda/decode_graphs.h"

namespace gemma::cuda {

DecodeGraphs::~DecodeGraphs() {
  for (auto& [batch, exec] : graphs_) cudaGraphExecDestroy(exec);
}

absl::Status DecodeGraphs::Capture(ModelForward& forward, int batch, cudaStream_t stream) {
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

absl::Status DecodeGraphs::Replay(int batch, cudaStream_t stream) {
  auto it = graphs_.find(batch);
  if (it == graphs_.end()) return absl::InternalError("no decode graph for this batch size");
  return CudaStatus(cudaGraphLaunch(it->second, stream), "cudaGraphLaunch");
}

}  // namespace gemma::cuda
