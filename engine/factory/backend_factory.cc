#include "engine/factory/backend_factory.h"

#include "absl/strings/str_cat.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/model/weights.h"
#include "engine/parallel/tp_check.h"
#ifdef GEMMA_HAVE_CUDA
#include <cuda_runtime.h>

#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/tp/tensor_parallel_backend.h"
#endif

namespace gemma {

bool CudaAvailable() {
#ifdef GEMMA_HAVE_CUDA
  return CudaDeviceAvailable();
#else
  return false;
#endif
}

#ifdef GEMMA_HAVE_CUDA
namespace {

int VisibleGpus() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
  return n;
}

// --tensor-parallel-size N > 1: the refusals from config.json alone (before
// any weight is read), then one rank per GPU 0..N-1.
absl::StatusOr<std::unique_ptr<Backend>> CreateCudaTensorParallel(const BackendOptions& options) {
  absl::StatusOr<ModelConfig> config = LoadModelConfig(options.model_dir);
  if (!config.ok()) return config.status();
  if (absl::Status s = parallel::CheckTensorParallel(options.tensor_parallel_size, *config, "cuda", VisibleGpus());
      !s.ok())
    return s;
  TensorParallelCudaOptions tp;
  for (int r = 0; r < options.tensor_parallel_size; ++r) tp.devices.push_back(r);
  return CreateTensorParallelCudaBackend(options, CudaTuning{}, tp);
}

}  // namespace
#endif

int DefaultMaxTokensPerStep(const BackendOptions& options) {
  const bool cuda = options.backend == "cuda" || (options.backend == "auto" && CudaAvailable());
  if (!cuda) return 512;
#ifdef GEMMA_HAVE_CUDA
  return OnLargeCudaDevice() ? 8192 : 2048;
#else
  return 512;
#endif
}

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const BackendOptions& options) {
  std::string kind = options.backend;
  if (kind == "auto") kind = CudaAvailable() ? "cuda" : "cpu";
  if (kind == "cuda") {
#ifdef GEMMA_HAVE_CUDA
    if (!CudaDeviceAvailable()) return absl::FailedPreconditionError("backend cuda: no CUDA device is visible");
    if (options.tensor_parallel_size != 1) return CreateCudaTensorParallel(options);
    return CreateCudaBackend(options);
#else
    return absl::FailedPreconditionError("backend cuda: this build has no CUDA support (nvcc was not found)");
#endif
  }
  if (kind != "cpu")
    return absl::InvalidArgumentError(absl::StrCat("backend must be cpu, cuda or auto, got '", options.backend, "'"));
  if (options.random_weights)
    return absl::InvalidArgumentError("random_weights is supported by the cuda backend only");
  if (options.lm_head.has_value() && *options.lm_head != WeightDType::kBF16)
    return absl::InvalidArgumentError(
        absl::StrCat("--lm-head ", std::string(WeightDTypeName(*options.lm_head)),
                     " is supported by the cuda backend only"));
  if (options.kv_cache_dtype != KvCacheDType::kBF16)
    return absl::InvalidArgumentError("--kv-cache-dtype fp8 is supported by the cuda backend only");
  if (options.kv_block_size < 1)
    return absl::InvalidArgumentError(absl::StrCat(
        "kv_block_size ", options.kv_block_size, ": the cpu backend is always paged (blocks of >= 1 token); "
        "0 (one fixed cache per sequence) is cuda-only"));
  absl::StatusOr<std::unique_ptr<LoadedModel>> model = LoadModel(options.model_dir);
  if (!model.ok()) return model.status();
  if (absl::Status s = parallel::CheckTensorParallel(options.tensor_parallel_size, (*model)->config, "cpu", 0);
      !s.ok())
    return s;
  // A W4A16 checkpoint's codes are exact in fp32: this fp32 backend runs it
  // dequantized. Quantizing a float checkpoint (--weights fp8 / int4) is the
  // cuda backend's.
  const bool int4_checkpoint = (*model)->config.int4_checkpoint.has_value();
  absl::StatusOr<WeightDType> weights = ResolveWeightDType(options.weights, int4_checkpoint);
  if (!weights.ok()) return weights.status();
  if (*weights != WeightDType::kBF16 && !int4_checkpoint)
    return absl::InvalidArgumentError(absl::StrCat("--weights ", std::string(WeightDTypeName(*weights)),
                                                   " is supported by the cuda backend only"));
  if ((*model)->weights.has_fp8) {
    return absl::InvalidArgumentError(
        "the checkpoint's linear weights are FP8 (F8_E4M3): only the cuda backend reads them");
  }
  CpuBackendOptions cpu_options;
  cpu_options.max_slots = options.max_slots;
  cpu_options.max_context = options.max_context;
  cpu_options.num_threads = options.num_threads;
  cpu_options.block_size = options.kv_block_size;
  cpu_options.num_blocks = options.num_kv_blocks;
  cpu_options.tensor_parallel_size = options.tensor_parallel_size;
  return CreateCpuBackend(**model, cpu_options);
}

}  // namespace gemma
