#include "engine/cuda/cuda_backend.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "engine/cuda/common/cuda_util.h"
#include "engine/cuda/decode_graph_cache.h"
#include "engine/cuda/device_weights.h"
#include "engine/cuda/head_dim_check.h"
#include "engine/cuda/kv_pools.h"
#include "engine/cuda/linear/linear.h"
#include "engine/cuda/linear/tuner.h"
#include "engine/cuda/model_forward.h"
#include "engine/cuda/pass_executor.h"
#include "engine/model/weights.h"
#include "kernels/gemv/gemv.h"
#include "spdlog/spdlog.h"

namespace gemma {

// The backend's owned parts, composed: the weights, the linears
// (linear/), the forward enqueuer, the paged KV pools, the decode graph
// cache and the pass executor, on one stream. Set up by Init; the Backend
// methods below delegate to the parts.
struct CudaBackend::Impl {
  BackendOptions options;
  CudaTuning tuning;
  ModelConfig config;
  int max_context = 0;
  int chunk_tokens = 0;
  cudaStream_t stream = nullptr;
  std::unique_ptr<cuda::DeviceWeights> weights;
  std::unique_ptr<cuda::Tuner> tuner;  // every autotuned choice, the GEMMA_* switches
  std::unique_ptr<cuda::LinearDispatcher> linear;
  cuda::KvPools pools;
  std::unique_ptr<cuda::ModelForward> forward;
  std::unique_ptr<cuda::DecodeGraphCache> graphs;
  std::unique_ptr<cuda::PassExecutor> executor;

  ~Impl() {
    if (stream) {
      cudaStreamSynchronize(stream);
      cudaStreamDestroy(stream);
    }
  }
  absl::Status Init(const BackendOptions& o, const CudaTuning& t);
  // The weights on the device; int4: the layers quantized, or a W4A16
  // checkpoint's uploaded as they are (while the checkpoint is open).
  absl::Status LoadWeights();
  // options.weights from the flag and the checkpoint's config
  // (ResolveWeightDType: a W4A16 checkpoint is int4).
  absl::Status ResolveWeights();
  // The LM head's dtype under the resolved weights, checked.
  absl::StatusOr<WeightDType> LmHeadDType() const;
  absl::Status CreateLinear(WeightDType lm_head);
  absl::Status CreateForward();
};

namespace {

absl::Status CheckOptions(const BackendOptions& o, const CudaTuning& t) {
  if (o.max_slots < 1) return absl::InvalidArgumentError("cuda: max_slots must be >= 1");
  if (o.max_context < 1) return absl::InvalidArgumentError("cuda: max_context must be >= 1");
  if (t.max_chunk_tokens < 0)
    return absl::InvalidArgumentError(absl::StrCat("cuda: max_chunk_tokens must be >= 0, got ", t.max_chunk_tokens));
  if (o.kv_block_size < 1 || (o.kv_block_size & (o.kv_block_size - 1)) != 0)
    return absl::InvalidArgumentError(
        absl::StrCat("cuda: kv_block_size must be a power of two, got ", o.kv_block_size));
  if (!(o.gpu_memory_utilization > 0.0 && o.gpu_memory_utilization <= 1.0))
    return absl::InvalidArgumentError(
        absl::StrCat("gpu_memory_utilization must be in (0, 1], got ", o.gpu_memory_utilization));
  return absl::OkStatus();
}

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

// Tokens per prefill pass: about 4096 on a large GPU (OnLargeCudaDevice),
// about 2048 on smaller ones. Longer passes leave fewer partial waves and per-pass
// costs in the GEMMs (H200, 31B shape, prefill @8K, passes of 2112 / 4224:
// bf16 8 969 / 9 215 tok/s, fp8 13 906 / 14 846, int4 13 796 / 14 570,
// 2026-12-02); the activations they need come out of the KV pool.
// Prefill attention of a global layer runs (chunk / 64) x num_heads blocks
// of the D=512 tile, one block per multiprocessor; a chunk whose block count
// is a multiple of the SM count leaves no partial last wave. On the H200
// (132 SMs, 32 heads) that is 4224 tokens instead of 4096.
int AutoChunkTokens(const ModelConfig& config) {
  constexpr int kTile = 64;
  int device = 0, num_sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || num_sms <= 0) {
    cudaGetLastError();
    return 2048;
  }
  const int base = OnLargeCudaDevice() ? 4096 : 2048;
  static_assert(4096 + 4096 / 4 <= kMaxAutoChunkTokens);
  for (int chunk = base; chunk <= base + base / 4; chunk += kTile)
    if ((chunk / kTile) * config.num_heads % num_sms == 0) return chunk;
  return base;
}

// Every linear: the layers' in order, the LM head last. `left_scales`:
// decode hands the scales of gate|up to the gelu gate, and, when
// `to_norms`, those of o_proj and down to the residual norms
// (ModelForward::EnqueueLayer). `split_k`: when `to_norms`, the norms also
// add o_proj's and down's partial sums (TunedMatrix::partial_sums).
std::vector<cuda::TunedMatrix> LinearMatrices(const ModelConfig& config, const cuda::DeviceWeights& weights,
                                              bool left_scales = false, bool to_norms = false,
                                              bool split_k = false) {
  const int h = config.hidden_size, inter = config.intermediate_size;
  const bool norms = left_scales && to_norms;
  const bool partials = split_k && to_norms;
  std::vector<cuda::TunedMatrix> mats;
  for (size_t l = 0; l < config.layers.size(); ++l) {
    const auto& w = weights.layers()[l];
    const int q_width = config.num_heads * config.layers[l].head_dim;
    mats.push_back({w.qkv, w.qkv_rows, h, false, true});
    mats.push_back({w.o_proj, h, q_width, false, false, norms, partials});
    mats.push_back({w.gate_up, 2 * inter, h, false, true, left_scales});
    mats.push_back({w.down_proj, h, inter, false, true, norms, partials});
  }
  mats.push_back({weights.lm_head(), config.vocab_size, h, true, false});
  return mats;
}

}  // namespace

bool OnLargeCudaDevice() {
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return total_bytes >= (size_t{70} << 30);
}

absl::Status CudaBackend::Impl::LoadWeights() {
  const WeightDType dtype = *options.weights;
  std::unique_ptr<LoadedModel> model;  // open until the int4 layers are uploaded
  const ModelWeights* checkpoint = nullptr;
  if (tuning.model != nullptr) {  // a tensor-parallel rank's shard
    config = tuning.model->config;
    if (!options.random_weights) checkpoint = &tuning.model->weights;
  } else if (!options.random_weights) {  // else config: Init parsed it
    auto loaded = LoadModel(options.model_dir);
    if (!loaded.ok()) return loaded.status();
    model = std::move(*loaded);
    config = model->config;
    checkpoint = &model->weights;
  }
  GEMMA_STATUS_RETURN_IF_ERROR(cuda::CheckHeadDims(config));
  const cuda::Int4Copy int4_copy = tuner->switches().int4_fp8_copy    ? cuda::Int4Copy::kFp8
                                   : tuner->switches().int4_bf16_copy ? cuda::Int4Copy::kBf16
                                                                      : cuda::Int4Copy::kNone;
  // Without a bf16 copy the int4 layer matrices are read one at a time as
  // they are quantized: never all of them in bf16 at once.
  const bool defer = dtype == WeightDType::kINT4 && int4_copy != cuda::Int4Copy::kBf16;
  auto w = checkpoint ? cuda::DeviceWeights::Upload(config, *checkpoint, stream, dtype, defer)
                      : cuda::DeviceWeights::Random(config, tuning.random_seed, stream, dtype, defer);
  if (!w.ok()) return w.status();
  weights = std::move(*w);
  if (dtype == WeightDType::kINT4) {
    GEMMA_STATUS_RETURN_IF_ERROR(weights->QuantizeLinearsInt4(config, checkpoint, int4_copy,
                                                              tuner->switches().int4_gelu_gate, stream));
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::Impl::ResolveWeights() {
  auto dtype = ResolveWeightDType(options.weights, config.int4_checkpoint.has_value());
  if (!dtype.ok()) return dtype.status();
  options.weights = *dtype;
  return absl::OkStatus();
}

absl::StatusOr<WeightDType> CudaBackend::Impl::LmHeadDType() const {
  // int4 weights keep an fp8 LM head by default (vLLM leaves it unquantized;
  // fp8 halves the largest matrix a decode step reads), except a W4A16
  // checkpoint's: its quantization_config decides (an ignored lm_head stays
  // bf16, as the format says; otherwise Q4_0 of the tied embedding).
  WeightDType fallback = *options.weights == WeightDType::kINT4 ? WeightDType::kFP8 : *options.weights;
  if (config.int4_checkpoint.has_value()) {
    fallback = quant::IsIgnored(*config.int4_checkpoint, "lm_head") ? WeightDType::kBF16 : WeightDType::kINT4;
  }
  const WeightDType lm_head = options.lm_head.value_or(fallback);
  if (lm_head == WeightDType::kFP8 && options.weights == WeightDType::kBF16)
    return absl::InvalidArgumentError("cuda: --lm-head fp8 needs --weights fp8 or int4 (got --weights bf16)");
  if (lm_head == WeightDType::kINT4 && options.weights != WeightDType::kINT4)
    return absl::InvalidArgumentError("cuda: --lm-head int4 needs --weights int4");
  return lm_head;
}

// The dispatcher and the scratch its dtypes need.
absl::Status CudaBackend::Impl::CreateLinear(WeightDType lm_head) {
  auto linear_or = cuda::LinearDispatcher::Create(tuner.get(), tuning.autotune_gemv, chunk_tokens);
  if (!linear_or.ok()) return linear_or.status();
  linear = std::move(*linear_or);
  if (options.weights == WeightDType::kINT4) {
    // int4 matrices without a bf16 copy: passes of more rows than the W4A16
    // kernel takes dequantize the matrix into a scratch (the largest one's).
    int64_t most = 0;
    for (const cuda::TunedMatrix& m : LinearMatrices(config, *weights)) {
      if (m.w.int4() && m.w.w4_bf16 == nullptr && m.w.w4_fp8 == nullptr) most = std::max(most, int64_t{m.n} * m.k);
    }
    if (most > 0) GEMMA_STATUS_RETURN_IF_ERROR(linear->ReserveInt4(most));
  }
  if (weights->dtype() == WeightDType::kFP8 || lm_head == WeightDType::kFP8 ||
      (weights->dtype() == WeightDType::kINT4 && tuner->switches().int4_fp8_copy)) {
    const int max_k = std::max({config.hidden_size, config.intermediate_size, MaxQueryWidth(config)});
    // Rows: a prefill pass, or a decode batch's logits (the LM head may be fp8).
    const int rows = std::max({chunk_tokens, kernels::kGemvMaxBatch, options.max_slots});
    GEMMA_STATUS_RETURN_IF_ERROR(linear->ReserveFp8(rows, max_k));
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::Impl::CreateForward() {
  // Logits rows per pass: bounded by memory (fp32 [rows, vocab]), at least a
  // full decode batch so a decode graph computes all its rows at once.
  const int64_t by_memory = (256LL << 20) / (4LL * config.vocab_size);
  const int64_t min_rows = std::max(options.max_slots, kernels::kGemvMaxBatch);
  const int logit_rows = static_cast<int>(
      std::clamp<int64_t>(by_memory, min_rows, std::max<int64_t>(chunk_tokens, min_rows)));
  // Every sequence's global and sliding tables for a full context.
  const int block = options.kv_block_size;
  const int table_entries = 2 * options.max_slots * ((max_context + block - 1) / block);
  auto forward_or = cuda::ModelForward::Create(config, weights.get(), pools.mutable_cache(), linear.get(),
                                               tuner.get(), chunk_tokens, options.max_slots, std::max(logit_rows, 1),
                                               tuning.decode_splits, EmbedScale(config, tuning), table_entries,
                                               {max_context, block, options.kv_cache_dtype == KvCacheDType::kFP8});
  if (!forward_or.ok()) return forward_or.status();
  forward = std::move(*forward_or);
  forward->set_all_reduce(tuning.all_reduce);
  forward->set_omitted_launches(tuning.omit);
  graphs = std::make_unique<cuda::DecodeGraphCache>(options.max_slots, chunk_tokens, options.use_cuda_graphs);
  auto executor_or = cuda::PassExecutor::Create(config, {options.max_slots, max_context, chunk_tokens},
                                                forward.get(), &pools, graphs.get(), stream);
  if (!executor_or.ok()) return executor_or.status();
  executor = std::move(*executor_or);
  return absl::OkStatus();
}

absl::Status CudaBackend::Impl::Init(const BackendOptions& o, const CudaTuning& t) {
  options = o;
  tuning = t;
  GEMMA_STATUS_RETURN_IF_ERROR(CheckOptions(o, t));
  // The config decides the weights' dtype (a W4A16 checkpoint is int4), so
  // flag conflicts fail before any weight is read.
  if (t.model != nullptr) {
    config = t.model->config;
  } else {
    auto parsed = LoadModelConfig(options.model_dir);
    if (!parsed.ok()) return parsed.status();
    config = *parsed;
  }
  GEMMA_STATUS_RETURN_IF_ERROR(ResolveWeights());
  auto lm_head = LmHeadDType();
  if (!lm_head.ok()) return lm_head.status();
  GEMMA_CUDA_RETURN_IF_ERROR(cudaSetDevice(t.device));
  tuner = std::make_unique<cuda::Tuner>(cuda::TuningSwitches::FromEnv());
  GEMMA_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  GEMMA_STATUS_RETURN_IF_ERROR(LoadWeights());
  if (*lm_head == WeightDType::kFP8) GEMMA_STATUS_RETURN_IF_ERROR(weights->QuantizeLmHead(stream));
  if (*lm_head == WeightDType::kINT4) GEMMA_STATUS_RETURN_IF_ERROR(weights->QuantizeLmHeadInt4(stream));
  max_context = std::min(o.max_context, config.max_position_embeddings);
  chunk_tokens = std::min(t.max_chunk_tokens > 0 ? t.max_chunk_tokens : AutoChunkTokens(config), max_context);
  // The engine never runs more tokens in a step than its budget: a longer pass
  // would only hold activations, sliding blocks and all-reduce room unused.
  if (o.max_tokens_per_step > 0) chunk_tokens = std::min(chunk_tokens, o.max_tokens_per_step);
  GEMMA_STATUS_RETURN_IF_ERROR(CreateLinear(*lm_head));
  GEMMA_STATUS_RETURN_IF_ERROR(CreateForward());
  if (t.autotune_gemv) {
    const auto mats = LinearMatrices(config, *weights, tuner->switches().fp8_left_scales, t.all_reduce == nullptr,
                                     tuner->switches().int4_split_k != cuda::TuningSwitches::Int4SplitK::kOff);
    GEMMA_STATUS_RETURN_IF_ERROR(tuner->TuneLinears(*linear, mats, o.max_slots,
                                                    std::min(o.max_slots, chunk_tokens),
                                                    config.final_logit_softcap, stream));
  }
  // Last, so the pool gets what weights, activations and tuning left.
  GEMMA_STATUS_RETURN_IF_ERROR(pools.Allocate(config, o, max_context, chunk_tokens));
  if (t.before_first_pass) t.before_first_pass();
  if (o.use_cuda_graphs) GEMMA_STATUS_RETURN_IF_ERROR(executor->CaptureDecodeGraphs());
  GEMMA_STATUS_RETURN_IF_ERROR(executor->WarmUpPrefill());
  const cuda::KvCache& cache = pools.cache();
  spdlog::info("cuda: ready: {} weights {:.2f} GB, paged {} KV cache {:.2f} GB (block {} tokens: {} global "
               "blocks = {} tokens, {} sliding blocks: {} sequences of {} tokens at once, {} of {}), {} slots x {} "
               "tokens, chunk {}",
               WeightDTypeName(weights->dtype()), weights->bytes() / 1e9, KvCacheDTypeName(o.kv_cache_dtype),
               cache.bytes() / 1e9, cache.block_size(), cache.num_global_blocks(),
               static_cast<int64_t>(cache.num_global_blocks()) * cache.block_size(), cache.num_sliding_blocks(),
               pools.ConcurrentSequences(max_context), max_context,
               pools.ConcurrentSequences(std::min(max_context, cuda::kKvSplitRequestTokens)),
               std::min(max_context, cuda::kKvSplitRequestTokens), o.max_slots, max_context, chunk_tokens);
  return absl::OkStatus();
}

CudaBackend::CudaBackend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaBackend::~CudaBackend() = default;
const ModelConfig& CudaBackend::config() const { return impl_->config; }
int CudaBackend::max_slots() const { return impl_->options.max_slots; }
int CudaBackend::max_context() const { return impl_->max_context; }
int CudaBackend::chunk_tokens() const { return impl_->chunk_tokens; }
int64_t CudaBackend::weight_bytes() const { return impl_->weights->bytes(); }
int64_t CudaBackend::kv_cache_bytes() const { return static_cast<int64_t>(impl_->pools.bytes()); }

std::optional<size_t> CudaBackend::device_memory_used_bytes() const {
  size_t free_bytes = 0, total_bytes = 0;
  // The calling thread (a metrics scrape) may not have the device selected.
  if (cudaSetDevice(0) != cudaSuccess || cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    return std::nullopt;
  }
  return total_bytes - free_bytes;
}

KvCacheSpec CudaBackend::kv_cache_spec() const { return impl_->pools.spec(); }

void CudaBackend::ResetSlot(int) {}  // the engine's block manager owns the KV

absl::Status CudaBackend::Forward(std::span<const SequenceChunk> chunks, std::span<const RowSampling> rows,
                                  ForwardResult* result) {
  GEMMA_STATUS_RETURN_IF_ERROR(CheckRows(chunks, rows));
  GEMMA_STATUS_RETURN_IF_ERROR(impl_->executor->Validate(chunks));
  const bool greedy = std::all_of(rows.begin(), rows.end(), [](const RowSampling& r) { return IsGreedy(r); });
  if (WantsLogits(chunks)) {
    // Greedy ids come from the device's argmax; sampled rows are drawn on the
    // host from the logits by the same rule (the engine's mixed steps).
    GEMMA_STATUS_RETURN_IF_ERROR(impl_->executor->ForwardLogits(chunks, greedy, result));
    if (!greedy) PickOnHost(chunks, rows, result);
    return absl::OkStatus();
  }
  result->logits.clear();
  result->first_row.clear();
  return impl_->executor->ForwardIds(chunks, greedy ? std::span<const RowSampling>() : rows, &result->next_ids);
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
