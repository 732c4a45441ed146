// AllReduce by the one-shot peer-access kernel: each rank owns a staging
// buffer and a signal block on its device; every endpoint knows all ranks'
// pointers (peer pointers under unified addressing).
#include <cuda_runtime.h>

#include "absl/strings/str_cat.h"
#include "engine/cuda/comm/all_reduce.h"
#include "engine/cuda/common/cuda_util.h"
#include "kernels/comm/oneshot_allreduce.h"

namespace gemma::cuda {
namespace {

// The buffers of every rank, shared by the group's endpoints.
struct PeerBuffers {
  std::vector<int> devices;
  std::vector<DeviceBuffer> staging, signals;  // [rank], on devices[rank]
  int64_t capacity = 0;
  ~PeerBuffers() {
    for (size_t r = 0; r < devices.size(); ++r) {
      cudaSetDevice(devices[r]);
      staging[r].Reset();
      signals[r].Reset();
    }
  }
};

class PeerAllReduce final : public AllReduce {
 public:
  PeerAllReduce(std::shared_ptr<PeerBuffers> buffers, int rank) : buffers_(std::move(buffers)) {
    params_.rank = rank;
    params_.num_ranks = static_cast<int>(buffers_->devices.size());
    params_.capacity = buffers_->capacity;
    for (int r = 0; r < params_.num_ranks; ++r) {
      params_.staging[r] = buffers_->staging[r].get<__nv_bfloat16>();
      params_.signals[r] = buffers_->signals[r].get<uint32_t>();
    }
  }
  absl::Status SumBf16(const __nv_bfloat16* in, __nv_bfloat16* out, int64_t count, cudaStream_t stream) override {
    kernels::OneShotAllReduceParams p = params_;
    p.in = in;
    p.out = out;
    p.count = count;
    return KernelStatus(kernels::LaunchOneShotAllReduce(p, stream));
  }
  std::string_view name() const override { return "oneshot"; }

 private:
  std::shared_ptr<PeerBuffers> buffers_;
  kernels::OneShotAllReduceParams params_;
};

absl::Status EnablePeerAccess(std::span<const int> devices) {
  for (int a : devices) {
    for (int b : devices) {
      if (a == b) continue;
      int can = 0;
      GEMMA_CUDA_RETURN_IF_ERROR(cudaDeviceCanAccessPeer(&can, a, b));
      if (!can)
        return absl::FailedPreconditionError(
            absl::StrCat("one-shot all-reduce: GPU ", a, " cannot access GPU ", b, "'s memory (no peer access)"));
      GEMMA_CUDA_RETURN_IF_ERROR(cudaSetDevice(a));
      const cudaError_t err = cudaDeviceEnablePeerAccess(b, 0);
      if (err == cudaErrorPeerAccessAlreadyEnabled) {
        cudaGetLastError();  // clear the sticky-free error
      } else {
        GEMMA_CUDA_RETURN_IF_ERROR(err);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<AllReduceGroup> CreatePeerGroup(std::span<const int> devices, int64_t max_count) {
  if (devices.empty() || devices.size() > static_cast<size_t>(kernels::kAllReduceMaxRanks))
    return absl::InvalidArgumentError(
        absl::StrCat("one-shot all-reduce: ", devices.size(), " ranks, want 1..", kernels::kAllReduceMaxRanks));
  if (max_count <= 0 || max_count % 8 != 0)
    return absl::InvalidArgumentError(
        absl::StrCat("one-shot all-reduce: max_count ", max_count, " must be a positive multiple of 8"));
  int current = 0;
  GEMMA_CUDA_RETURN_IF_ERROR(cudaGetDevice(&current));
  GEMMA_STATUS_RETURN_IF_ERROR(EnablePeerAccess(devices));
  auto buffers = std::make_shared<PeerBuffers>();
  buffers->devices.assign(devices.begin(), devices.end());
  buffers->capacity = max_count;
  buffers->staging.resize(devices.size());
  buffers->signals.resize(devices.size());
  for (size_t r = 0; r < devices.size(); ++r) {
    GEMMA_CUDA_RETURN_IF_ERROR(cudaSetDevice(devices[r]));
    GEMMA_STATUS_RETURN_IF_ERROR(buffers->staging[r].Allocate(max_count * sizeof(__nv_bfloat16)));
    GEMMA_STATUS_RETURN_IF_ERROR(buffers->signals[r].Allocate(kernels::OneShotSignalBytes()));
    GEMMA_CUDA_RETURN_IF_ERROR(cudaMemset(buffers->signals[r].get(), 0, kernels::OneShotSignalBytes()));
    GEMMA_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  }
  GEMMA_CUDA_RETURN_IF_ERROR(cudaSetDevice(current));
  AllReduceGroup group;
  for (size_t r = 0; r < devices.size(); ++r)
    group.push_back(std::make_unique<PeerAllReduce>(buffers, static_cast<int>(r)));
  return group;
}

}  // namespace gemma::cuda
