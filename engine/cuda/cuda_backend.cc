#include "engine/cuda/cuda_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_util.h"
#include "engine/cuda/decode_graphs.h"
#include "engine/cuda/device_weights.h"
#include "engine/cuda/kv_cache.h"
#include "engine/cuda/linear.h"
#include "engine/cuda/model_runner.h"
#include "engine/cuda/step_plan.h"
#include "engine/model/weights.h"
#include "kernels/gemv/gemv.h"
#include "kernels/init/random_init.h"
#include "spdlog/spdlog.h"

namespace gemma {

using cuda::DeviceBuffer;

namespace {

// sqrt(H) in the compute dtype (see CudaTuning::exact_embed_scale).
float EmbedScale(const ModelConfig& config, const CudaTuning& t) {
  const float exact = static_cast<float>(std::sqrt(static_cast<double>(config.hidden_size)));
  return t.exact_embed_scale ? exact : Bf16ToFloat(FloatToBf16(exact));
}

// The widest attention output (o_proj's k) over the layers.
int MaxQueryWidth(const ModelConfig& config) {
  int widest = 0;
  for (const LayerSpec& s : config.layers) widest = std::max(widest, config.num_heads * s.head_dim);
  return widest;
}

}  // namespace

struct CudaBackend::Impl {
  BackendOptions options;
  CudaTuning tuning;
  ModelConfig config;
  int max_context = 0;
  int chunk_tokens = 0;
  cudaStream_t stream = nullptr;
  std::unique_ptr<cuda::DeviceWeights> weights;
  cuda::KvCache cache;
  std::unique_ptr<cuda::LinearRunner> linear;
  std::unique_ptr<cuda::ModelRunner> runner;
  cuda::DecodeGraphs graphs;
  std::set<int> decode_ran_eagerly;  // batch sizes safe to capture
  DeviceBuffer host_meta, host_logits, host_ids;  // pinned
  std::vector<int> lengths;                       // cached tokens per slot

  ~Impl() {
    if (stream) {
      cudaStreamSynchronize(stream);
      cudaStreamDestroy(stream);
    }
  }
  absl::Status Init(const BackendOptions& o, const CudaTuning& t);
  absl::Status LoadWeights();
  absl::Status AutotuneGemv();
  absl::Status Validate(std::span<const SequenceChunk> chunks) const;
  absl::Status RunPass(const cuda::PassPlan& plan, bool greedy, float* logits, int32_t* ids);
  absl::Status EnqueueDecode(int batch);
  absl::Status Collect(const cuda::PassPlan& plan, int begin, int count, bool greedy, float* logits,
                       int32_t* ids);
  void Commit(std::span<const SequenceChunk> chunks) {
    for (const SequenceChunk& c : chunks) lengths[c.slot] += static_cast<int>(c.token_ids.size());
  }
};

absl::Status CudaBackend::Impl::LoadWeights() {
  if (options.random_weights) {
    auto parsed = LoadModelConfig(options.model_dir);
    if (!parsed.ok()) return parsed.status();
    config = *parsed;
    auto w = cuda::DeviceWeights::Random(config, tuning.random_seed, stream, options.weights);
    if (!w.ok()) return w.status();
    weights = std::move(*w);
    return absl::OkStatus();
  }
  auto model = LoadModel(options.model_dir);
  if (!model.ok()) return model.status();
  config = (*model)->config;
  auto w = cuda::DeviceWeights::Upload(config, (*model)->weights, stream, options.weights);
  if (!w.ok()) return w.status();
  weights = std::move(*w);
  return absl::OkStatus();
}

absl::Status CudaBackend::Impl::Init(const BackendOptions& o, const CudaTuning& t) {
  options = o;
  tuning = t;
  if (o.max_slots < 1) return absl::InvalidArgumentError("cuda: max_slots must be >= 1");
  if (o.max_context < 1) return absl::InvalidArgumentError("cuda: max_context must be >= 1");
  if (t.max_chunk_tokens < 1) return absl::InvalidArgumentError("cuda: max_chunk_tokens must be >= 1");
  GEMMA_CUDA_RETURN_IF_ERROR(cudaSetDevice(0));
  GEMMA_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  GEMMA_STATUS_RETURN_IF_ERROR(LoadWeights());
  max_context = std::min(o.max_context, config.max_position_embeddings);
  chunk_tokens = std::min(t.max_chunk_tokens, max_context);
  auto cache_or = cuda::KvCache::Create(config, o.max_slots, max_context, chunk_tokens);
  if (!cache_or.ok()) return cache_or.status();
  cache = std::move(*cache_or);
  auto linear_or = cuda::LinearRunner::Create(t.autotune_gemv, chunk_tokens);
  if (!linear_or.ok()) return linear_or.status();
  linear = std::move(*linear_or);
  if (weights->dtype() == WeightDType::kFP8) {
    const int max_k = std::max({config.hidden_size, config.intermediate_size, MaxQueryWidth(config)});
    GEMMA_STATUS_RETURN_IF_ERROR(linear->ReserveFp8(std::max(chunk_tokens, kernels::kGemvMaxBatch), max_k));
  }
  // Logits rows per pass: bounded by memory (fp32 [rows, vocab]), at least a
  // full decode batch so a decode graph computes all its rows at once.
  const int64_t by_memory = (256LL << 20) / (4LL * config.vocab_size);
  const int logit_rows = static_cast<int>(std::clamp<int64_t>(
      by_memory, std::max(o.max_slots, kernels::kGemvMaxBatch), chunk_tokens));
  auto runner_or = cuda::ModelRunner::Create(config, weights.get(), &cache, linear.get(), chunk_tokens,
                                             std::max(logit_rows, 1), t.decode_splits,
                                             t.length_aware, EmbedScale(config, t));
  if (!runner_or.ok()) return runner_or.status();
  runner = std::move(*runner_or);
  const auto& layout = runner->layout();
  GEMMA_STATUS_RETURN_IF_ERROR(host_meta.Allocate(layout.total * sizeof(int32_t), true));
  GEMMA_STATUS_RETURN_IF_ERROR(host_logits.Allocate(
      static_cast<size_t>(runner->max_logit_rows()) * config.vocab_size * sizeof(float), true));
  GEMMA_STATUS_RETURN_IF_ERROR(host_ids.Allocate(runner->max_logit_rows() * sizeof(int32_t), true));
  lengths.assign(o.max_slots, 0);
  if (t.autotune_gemv) GEMMA_STATUS_RETURN_IF_ERROR(AutotuneGemv());
  spdlog::info("cuda: ready: {} weights {:.2f} GB, KV cache {:.2f} GB ({} slots x {} tokens), chunk {}",
               WeightDTypeName(weights->dtype()), weights->bytes() / 1e9, cache.bytes() / 1e9, o.max_slots, max_context, chunk_tokens);
  return absl::OkStatus();
}

absl::Status CudaBackend::Impl::AutotuneGemv() {
  std::set<std::pair<int, int>> shapes;  // (n, k)
  const int h = config.hidden_size, inter = config.intermediate_size;
  std::vector<std::pair<cuda::DeviceMatrix, std::pair<int, int>>> mats;
  for (size_t l = 0; l < config.layers.size(); ++l) {
    const auto& w = weights->layers()[l];
    const int q_width = config.num_heads * config.layers[l].head_dim;
    mats.push_back({w.qkv, {w.qkv_rows, h}});
    mats.push_back({w.o_proj, {h, q_width}});
    mats.push_back({w.gate_up, {2 * inter, h}});
    mats.push_back({w.down_proj, {h, inter}});
  }
  mats.push_back({weights->embed(), {config.vocab_size, h}});
  int max_k = 0, max_n = 0;
  for (const auto& m : mats) {
    max_n = std::max(max_n, m.second.first);
    max_k = std::max(max_k, m.second.second);
  }
  const int max_batch = std::min(options.max_slots, kernels::kGemvMaxBatch);
  DeviceBuffer x, out;
  GEMMA_STATUS_RETURN_IF_ERROR(x.Allocate(size_t{8} * max_k * 2));
  GEMMA_STATUS_RETURN_IF_ERROR(out.Allocate(size_t{8} * max_n * 4));
  kernels::RandomFillParams rp;  // timing on zeros would flatter the kernel
  rp.out_bf16 = x.get<__nv_bfloat16>();
  rp.count = int64_t{8} * max_k;
  rp.stddev = 1.0f;
  GEMMA_KERNEL_RETURN_IF_ERROR(kernels::LaunchRandomFill(rp, stream));
  for (const auto& m : mats) {
    if (!shapes.insert(m.second).second) continue;
    for (int b = 1; b <= max_batch; ++b) {
      GEMMA_STATUS_RETURN_IF_ERROR(linear->Autotune(m.second.first, m.second.second, b, m.first,
                                                    x.get<__nv_bfloat16>(), out.get<float>(), stream));
    }
  }
  spdlog::info("cuda: GEMV autotuned for {} shapes x {} batch sizes", shapes.size(), max_batch);
  return absl::OkStatus();
}

absl::Status CudaBackend::Impl::Validate(std::span<const SequenceChunk> chunks) const {
  std::set<int> seen;
  for (const SequenceChunk& c : chunks) {
    if (c.slot < 0 || c.slot >= options.max_slots)
      return absl::InvalidArgumentError(absl::StrCat("cuda: slot ", c.slot, " out of range"));
    if (!seen.insert(c.slot).second)
      return absl::InvalidArgumentError(absl::StrCat("cuda: slot ", c.slot, " appears twice"));
    if (c.token_ids.empty()) return absl::InvalidArgumentError("cuda: empty chunk");
    if (c.start_position != lengths[c.slot])
      return absl::InvalidArgumentError(absl::StrCat("cuda: slot ", c.slot, " holds ", lengths[c.slot],
                                                     " tokens, chunk starts at ", c.start_position));
    if (c.start_position + static_cast<int64_t>(c.token_ids.size()) > max_context)
      return absl::OutOfRangeError(absl::StrCat("cuda: slot ", c.slot, " would exceed max_context ",
                                                max_context));
    for (int32_t id : c.token_ids) {
      if (id < 0 || id >= config.vocab_size)
        return absl::InvalidArgumentError(absl::StrCat("cuda: token id ", id, " out of range"));
    }
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::Impl::EnqueueDecode(int batch) {
  if (!options.use_cuda_graphs || !decode_ran_eagerly.count(batch) || !graphs.Has(batch)) {
    GEMMA_STATUS_RETURN_IF_ERROR(runner->EnqueueLayers({batch, batch, 1}, stream));
    GEMMA_STATUS_RETURN_IF_ERROR(runner->EnqueueLogits(0, batch, /*argmax=*/true, stream));
    if (!options.use_cuda_graphs) return absl::OkStatus();
    decode_ran_eagerly.insert(batch);
    GEMMA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    return graphs.Capture(*runner, batch, stream);
  }
  return graphs.Replay(batch, stream);
}

absl::Status CudaBackend::Impl::RunPass(const cuda::PassPlan& plan, bool greedy, float* logits,
                                        int32_t* ids) {
  plan.WriteTo(runner->layout(), host_meta.get<int32_t>());
  GEMMA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(runner->metadata(), host_meta.get(), host_meta.bytes(),
                                             cudaMemcpyHostToDevice, stream));
  const int rows = static_cast<int>(plan.logit_rows.size());
  // Decode passes whose rows are exactly the batch can replay a graph.
  if (plan.is_decode() && plan.num_tokens() <= kernels::kGemvMaxBatch && rows == plan.num_tokens()) {
    GEMMA_STATUS_RETURN_IF_ERROR(EnqueueDecode(plan.num_tokens()));
    return Collect(plan, 0, rows, greedy, logits, ids);
  }
  GEMMA_STATUS_RETURN_IF_ERROR(
      runner->EnqueueLayers({plan.num_tokens(), plan.num_seqs(), plan.max_q_len}, stream));
  for (int begin = 0; begin < rows; begin += runner->max_logit_rows()) {
    const int count = std::min(rows - begin, runner->max_logit_rows());
    GEMMA_STATUS_RETURN_IF_ERROR(runner->EnqueueLogits(begin, count, greedy, stream));
    GEMMA_STATUS_RETURN_IF_ERROR(Collect(plan, begin, count, greedy, logits, ids));
  }
  return cuda::CudaStatus(cudaStreamSynchronize(stream), "forward pass");
}

// Copies logits rows [begin, begin + count) (or their ids) to their StepOutput rows.
absl::Status CudaBackend::Impl::Collect(const cuda::PassPlan& plan, int begin, int count, bool greedy,
                                        float* logits, int32_t* ids) {
  const size_t vocab = config.vocab_size;
  if (greedy) {
    GEMMA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_ids.get(), runner->ids(), count * sizeof(int32_t),
                                               cudaMemcpyDeviceToHost, stream));
  } else {
    GEMMA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_logits.get(), runner->logits(),
                                               count * vocab * sizeof(float), cudaMemcpyDeviceToHost,
                                               stream));
  }
  GEMMA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  for (int r = 0; r < count; ++r) {
    const int dest = plan.dest_rows[begin + r];
    if (greedy) {
      ids[dest] = host_ids.get<int32_t>()[r];
    } else {
      std::memcpy(logits + dest * vocab, host_logits.get<float>() + r * vocab, vocab * sizeof(float));
    }
  }
  return absl::OkStatus();
}

CudaBackend::CudaBackend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaBackend::~CudaBackend() = default;
const ModelConfig& CudaBackend::config() const { return impl_->config; }
int CudaBackend::max_slots() const { return impl_->options.max_slots; }
int CudaBackend::max_context() const { return impl_->max_context; }
int64_t CudaBackend::weight_bytes() const { return impl_->weights->bytes(); }
int64_t CudaBackend::kv_cache_bytes() const { return static_cast<int64_t>(impl_->cache.bytes()); }

std::optional<size_t> CudaBackend::device_memory_used_bytes() const {
  size_t free_bytes = 0, total_bytes = 0;
  // The calling thread (a metrics scrape) may not have the device selected.
  if (cudaSetDevice(0) != cudaSuccess || cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    return std::nullopt;
  }
  return total_bytes - free_bytes;
}

void CudaBackend::ResetSlot(int slot) {
  if (slot >= 0 && slot < max_slots()) impl_->lengths[slot] = 0;
}

absl::Status CudaBackend::Forward(std::span<const SequenceChunk> chunks, StepOutput* out) {
  GEMMA_STATUS_RETURN_IF_ERROR(impl_->Validate(chunks));
  int total_rows = 0;
  out->first_row = cuda::FirstRows(chunks, &total_rows);
  out->logits.assign(static_cast<size_t>(total_rows) * impl_->config.vocab_size, 0.0f);
  for (const cuda::PassPlan& plan : cuda::PlanPasses(chunks, impl_->chunk_tokens)) {
    GEMMA_STATUS_RETURN_IF_ERROR(impl_->RunPass(plan, false, out->logits.data(), nullptr));
  }
  impl_->Commit(chunks);
  return absl::OkStatus();
}

absl::Status CudaBackend::ForwardGreedy(std::span<const SequenceChunk> chunks,
                                        std::vector<int32_t>* next_ids) {
  GEMMA_STATUS_RETURN_IF_ERROR(impl_->Validate(chunks));
  std::vector<SequenceChunk> last_only(chunks.begin(), chunks.end());
  for (SequenceChunk& c : last_only) c.all_logits = false;
  next_ids->assign(chunks.size(), 0);
  for (const cuda::PassPlan& plan : cuda::PlanPasses(last_only, impl_->chunk_tokens)) {
    GEMMA_STATUS_RETURN_IF_ERROR(impl_->RunPass(plan, true, nullptr, next_ids->data()));
  }
  impl_->Commit(chunks);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CudaBackend>> CreateCudaBackendWithTuning(const BackendOptions& options,
                                                                        const CudaTuning& tuning) {
  if (!CudaDeviceAvailable()) return absl::FailedPreconditionError("cuda: no CUDA device visible");
  auto impl = std::make_unique<CudaBackend::Impl>();
  GEMMA_STATUS_RETURN_IF_ERROR(impl->Init(options, tuning));
  return std::unique_ptr<CudaBackend>(new CudaBackend(std::move(impl)));
}

absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const BackendOptions& options) {
  auto b = CreateCudaBackendWithTuning(options, CudaTuning{});
  if (!b.ok()) return b.status();
  return std::unique_ptr<Backend>(std::move(*b));
}

bool CudaDeviceAvailable() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

}  // namespace gemma
