#include "engine/cuda/cuda_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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
#include "kernels/sampling/sample.h"
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
  bool paged = false;  // block pools driven by the engine's tables, else per-slot caches
  cudaStream_t stream = nullptr;
  std::unique_ptr<cuda::DeviceWeights> weights;
  cuda::KvCache cache;
  std::unique_ptr<cuda::LinearRunner> linear;
  std::unique_ptr<cuda::ModelRunner> runner;
  cuda::DecodeGraphs graphs;
  std::set<int> decode_ran_eagerly;  // batch sizes safe to capture
  DeviceBuffer host_meta, host_logits, host_ids;  // pinned
  DeviceBuffer host_sample_rows, sample_rows, sample_ids;  // per logits row
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
  absl::Status CreatePagedCache();
  absl::Status CaptureDecodeGraphs();
  int DecodeBucket(int batch) const;
  absl::Status Validate(std::span<const SequenceChunk> chunks) const;
  absl::Status ValidateTables(const SequenceChunk& c) const;
  // What a pass returns: logits rows, argmax ids, or ids drawn with `rows`.
  struct PassOutput {
    float* logits = nullptr;
    int32_t* ids = nullptr;
    bool greedy = false;
    std::span<const RowSampling> rows;  // sampling when non-empty (per chunk)
  };
  absl::Status RunPass(cuda::PassPlan& plan, const PassOutput& want);
  absl::Status Sample(const cuda::PassPlan& plan, int begin, int count, const PassOutput& want);
  absl::Status ForwardIds(std::span<const SequenceChunk> chunks, const PassOutput& want, std::vector<int32_t>* next_ids);
  absl::Status EnqueueDecode(int batch);
  absl::Status Collect(const cuda::PassPlan& plan, int begin, int count, const int32_t* device_ids,
                       const PassOutput& want);
  void Commit(std::span<const SequenceChunk> chunks) {
    if (paged) return;
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
  if (o.kv_block_size < 0 || (o.kv_block_size & (o.kv_block_size - 1)) != 0)
    return absl::InvalidArgumentError(
        absl::StrCat("kv_block_size must be 0 (per-slot caches) or a power of two, got ", o.kv_block_size));
  if (!(o.gpu_memory_utilization > 0.0 && o.gpu_memory_utilization <= 1.0))
    return absl::InvalidArgumentError(
        absl::StrCat("gpu_memory_utilization must be in (0, 1], got ", o.gpu_memory_utilization));
  paged = o.kv_block_size > 0;
  if (paged && !t.length_aware)
    return absl::InvalidArgumentError("cuda: a paged KV cache is always read length-aware (use kv_block_size 0)");
  GEMMA_CUDA_RETURN_IF_ERROR(cudaSetDevice(0));
  GEMMA_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  GEMMA_STATUS_RETURN_IF_ERROR(LoadWeights());
  max_context = std::min(o.max_context, config.max_position_embeddings);
  chunk_tokens = std::min(t.max_chunk_tokens, max_context);
  if (!paged) {
    auto cache_or = cuda::KvCache::Create(config, o.max_slots, max_context, chunk_tokens);
    if (!cache_or.ok()) return cache_or.status();
    cache = std::move(*cache_or);
  }
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
  const int64_t min_rows = std::max(o.max_slots, kernels::kGemvMaxBatch);
  const int logit_rows = static_cast<int>(
      std::clamp<int64_t>(by_memory, min_rows, std::max<int64_t>(chunk_tokens, min_rows)));
  // Paged: every sequence's global and sliding tables for a full context.
  const int table_entries = paged ? 2 * o.max_slots * ((max_context + o.kv_block_size - 1) / o.kv_block_size) : 0;
  auto runner_or = cuda::ModelRunner::Create(config, weights.get(), &cache, linear.get(), chunk_tokens,
                                             o.max_slots, std::max(logit_rows, 1), t.decode_splits,
                                             t.length_aware, EmbedScale(config, t), table_entries);
  if (!runner_or.ok()) return runner_or.status();
  runner = std::move(*runner_or);
  const auto& layout = runner->layout();
  GEMMA_STATUS_RETURN_IF_ERROR(host_meta.Allocate(layout.total * sizeof(int32_t), true));
  GEMMA_STATUS_RETURN_IF_ERROR(host_logits.Allocate(
      static_cast<size_t>(runner->max_logit_rows()) * config.vocab_size * sizeof(float), true));
  GEMMA_STATUS_RETURN_IF_ERROR(host_ids.Allocate(runner->max_logit_rows() * sizeof(int32_t), true));
  const size_t sample_rows_bytes = runner->max_logit_rows() * sizeof(kernels::SampleRowParams);
  GEMMA_STATUS_RETURN_IF_ERROR(host_sample_rows.Allocate(sample_rows_bytes, true));
  GEMMA_STATUS_RETURN_IF_ERROR(sample_rows.Allocate(sample_rows_bytes));
  GEMMA_STATUS_RETURN_IF_ERROR(sample_ids.Allocate(runner->max_logit_rows() * sizeof(int32_t)));
  lengths.assign(o.max_slots, 0);
  if (t.autotune_gemv) GEMMA_STATUS_RETURN_IF_ERROR(AutotuneGemv());
  if (paged) {
    // Last, so the pool gets what weights, activations and tuning left.
    GEMMA_STATUS_RETURN_IF_ERROR(CreatePagedCache());
    if (o.use_cuda_graphs) GEMMA_STATUS_RETURN_IF_ERROR(CaptureDecodeGraphs());
    spdlog::info("cuda: ready: {} weights {:.2f} GB, paged KV cache {:.2f} GB (block {} tokens: {} global "
                 "blocks = {} tokens, {} sliding blocks), {} slots x {} tokens, chunk {}",
                 WeightDTypeName(weights->dtype()), weights->bytes() / 1e9, cache.bytes() / 1e9, cache.block_size(), cache.num_global_blocks(),
                 static_cast<int64_t>(cache.num_global_blocks()) * cache.block_size(),
                 cache.num_sliding_blocks(), o.max_slots, max_context, chunk_tokens);
    return absl::OkStatus();
  }
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
  if (const std::string fp8 = linear->Fp8TuningSummary(1); !fp8.empty()) spdlog::info("cuda: fp8 GEMV at batch 1:\n{}", fp8);
  return absl::OkStatus();
}

// Sizes the two block pools from free device memory (or num_kv_blocks):
// the sliding pool holds every slot's window plus one step's chunk; the
// global pool gets the rest of gpu_memory_utilization * total memory.
absl::Status CudaBackend::Impl::CreatePagedCache() {
  const int block = options.kv_block_size;
  bool any_global = false, any_sliding = false;
  for (const LayerSpec& l : config.layers) (l.is_global() ? any_global : any_sliding) = true;
  const size_t global_bytes = cuda::KvCache::BlockBytes(config, block, true);
  const size_t sliding_bytes = cuda::KvCache::BlockBytes(config, block, false);
  const int per_seq_global = (max_context + block - 1) / block;
  // A sequence reads window - 1 positions back; one chunk's pass adds its
  // own tokens, and block boundaries one more block on each side.
  const int window_blocks = (config.sliding_window - 1 + block - 1) / block + 2;
  const int min_sliding = any_sliding ? window_blocks + (chunk_tokens + block - 1) / block : 0;
  int num_sliding = any_sliding ? options.max_slots * window_blocks + (chunk_tokens + block - 1) / block : 0;
  int num_global = 0;
  if (options.num_kv_blocks > 0) {
    num_global = any_global ? options.num_kv_blocks : 0;
  } else {
    size_t free_bytes = 0, total_bytes = 0;
    GEMMA_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
    // Kept back for graphs, cuBLAS workspaces and the CUDA context's growth.
    constexpr double kReserve = 1.0e9;
    const double used = static_cast<double>(total_bytes - free_bytes);
    const double budget = options.gpu_memory_utilization * static_cast<double>(total_bytes) - used - kReserve;
    const double one_sequence = double(any_global ? per_seq_global : 0) * global_bytes + double(min_sliding) * sliding_bytes;
    if (budget < one_sequence)
      return absl::ResourceExhaustedError(absl::StrCat(
          "gpu_memory_utilization ", options.gpu_memory_utilization, " leaves ", budget / 1e9,
          " GB for the KV cache (", used / 1e9, " GB in use of ", total_bytes / 1e9,
          " GB); one sequence of max_context ", max_context, " tokens needs ", one_sequence / 1e9, " GB"));
    const double for_global = any_global ? double(per_seq_global) * global_bytes : 0.0;
    // Too little for every slot's window: shrink the sliding pool (fewer
    // sequences run at once) before the global pool drops below one sequence.
    const double sliding_cap = std::max<double>(min_sliding, (budget - for_global) / std::max<size_t>(sliding_bytes, 1));
    num_sliding = static_cast<int>(std::min<double>(num_sliding, sliding_cap));
    num_global = any_global ? static_cast<int>((budget - double(num_sliding) * sliding_bytes) / global_bytes) : 0;
  }
  if (any_global && num_global < 1)
    return absl::InvalidArgumentError(absl::StrCat("num_kv_blocks must be >= 1, got ", num_global));
  auto cache_or = cuda::KvCache::CreatePaged(config, block, num_global, num_sliding);
  if (!cache_or.ok()) return cache_or.status();
  cache = std::move(*cache_or);
  return absl::OkStatus();
}

// Decode batches run as the graph of the next bucket (1, 2, 4, ..., capped
// at max_slots), padded with empty sequences.
int CudaBackend::Impl::DecodeBucket(int batch) const {
  int bucket = 1;
  while (bucket < batch) bucket *= 2;
  return std::min(bucket, options.max_slots);
}

// Every bucket's decode graph at start-up, so no request pays for a capture.
absl::Status CudaBackend::Impl::CaptureDecodeGraphs() {
  std::set<int> buckets;
  for (int b = 1; b <= options.max_slots; ++b) buckets.insert(DecodeBucket(b));
  for (int bucket : buckets) {
    cuda::PassPlan plan;
    plan.max_q_len = 1;
    plan.PadDecodeTo(bucket);  // all padding: no attention work, no cache writes
    const int used = plan.WriteTo(runner->layout(), host_meta.get<int32_t>());
    GEMMA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(runner->metadata(), host_meta.get(), used * sizeof(int32_t),
                                               cudaMemcpyHostToDevice, stream));
    GEMMA_STATUS_RETURN_IF_ERROR(EnqueueDecode(bucket));
    GEMMA_STATUS_RETURN_IF_ERROR(EnqueueDecode(bucket));  // the first ran eagerly
    GEMMA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  }
  spdlog::info("cuda: decode graphs captured for batch buckets {}", absl::StrJoin(buckets, ", "));
  return absl::OkStatus();
}

absl::Status CudaBackend::Impl::ValidateTables(const SequenceChunk& c) const {
  const int block = cache.block_size();
  const int end = c.start_position + static_cast<int>(c.token_ids.size());
  const int needed = (end + block - 1) / block;
  auto check = [&](std::span<const int32_t> table, int first, int num_blocks, const char* name) -> absl::Status {
    if (num_blocks == 0) return absl::OkStatus();  // the model has no such layer
    if (static_cast<int>(table.size()) < needed)
      return absl::InvalidArgumentError(absl::StrCat("cuda: slot ", c.slot, ": ", name, " table has ", table.size(),
                                                     " blocks, positions up to ", end, " need ", needed));
    for (int b = first; b < needed; ++b) {
      if (table[b] < 0 || table[b] >= num_blocks)
        return absl::InvalidArgumentError(absl::StrCat("cuda: slot ", c.slot, ": ", name, " block ", table[b],
                                                       " at table index ", b, " is not in [0, ", num_blocks, ")"));
    }
    return absl::OkStatus();
  };
  GEMMA_STATUS_RETURN_IF_ERROR(check(c.global_blocks, 0, cache.num_global_blocks(), "global"));
  const int first_live = std::max(0, c.start_position - config.sliding_window + 1) / block;
  return check(c.sliding_blocks, first_live, cache.num_sliding_blocks(), "sliding");
}

absl::Status CudaBackend::Impl::Validate(std::span<const SequenceChunk> chunks) const {
  std::set<int> seen;
  for (const SequenceChunk& c : chunks) {
    if (c.slot < 0 || c.slot >= options.max_slots)
      return absl::InvalidArgumentError(absl::StrCat("cuda: slot ", c.slot, " out of range"));
    if (!seen.insert(c.slot).second)
      return absl::InvalidArgumentError(absl::StrCat("cuda: slot ", c.slot, " appears twice"));
    if (c.token_ids.empty()) return absl::InvalidArgumentError("cuda: empty chunk");
    if (paged) {
      if (c.start_position < 0)
        return absl::InvalidArgumentError(absl::StrCat("cuda: slot ", c.slot, ": start_position ", c.start_position));
    } else if (c.start_position != lengths[c.slot])
      return absl::InvalidArgumentError(absl::StrCat("cuda: slot ", c.slot, " holds ", lengths[c.slot],
                                                     " tokens, chunk starts at ", c.start_position));
    if (c.start_position + static_cast<int64_t>(c.token_ids.size()) > max_context)
      return absl::OutOfRangeError(absl::StrCat("cuda: slot ", c.slot, " would exceed max_context ",
                                                max_context));
    if (paged) GEMMA_STATUS_RETURN_IF_ERROR(ValidateTables(c));
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

absl::Status CudaBackend::Impl::RunPass(cuda::PassPlan& plan, const PassOutput& want) {
  const int rows = plan.num_real_rows();
  // Decode passes whose rows are exactly the batch can replay a graph (slot
  // caches: the GEMV batch sizes; paged: every bucket, padded).
  const bool graph_pass = plan.is_decode() && rows == plan.num_tokens() &&
                          (paged || plan.num_tokens() <= kernels::kGemvMaxBatch);
  int batch = plan.num_tokens();
  if (graph_pass && paged && options.use_cuda_graphs) {
    batch = DecodeBucket(batch);
    plan.PadDecodeTo(batch);
  }
  const int used = plan.WriteTo(runner->layout(), host_meta.get<int32_t>());
  GEMMA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(runner->metadata(), host_meta.get(), used * sizeof(int32_t),
                                             cudaMemcpyHostToDevice, stream));
  const bool sampling = !want.rows.empty();
  if (graph_pass) {
    GEMMA_STATUS_RETURN_IF_ERROR(EnqueueDecode(batch));  // logits and argmax of every row
    if (sampling) return Sample(plan, 0, rows, want);
    return Collect(plan, 0, rows, want.greedy ? runner->ids() : nullptr, want);
  }
  GEMMA_STATUS_RETURN_IF_ERROR(
      runner->EnqueueLayers({plan.num_tokens(), plan.num_seqs(), plan.max_q_len}, stream));
  for (int begin = 0; begin < rows; begin += runner->max_logit_rows()) {
    const int count = std::min(rows - begin, runner->max_logit_rows());
    GEMMA_STATUS_RETURN_IF_ERROR(runner->EnqueueLogits(begin, count, want.greedy, stream));
    if (sampling) {
      GEMMA_STATUS_RETURN_IF_ERROR(Sample(plan, begin, count, want));
    } else {
      GEMMA_STATUS_RETURN_IF_ERROR(Collect(plan, begin, count, want.greedy ? runner->ids() : nullptr, want));
    }
  }
  return cuda::CudaStatus(cudaStreamSynchronize(stream), "forward pass");
}

// Draws logits rows [begin, begin + count) (in the runner's logits buffer)
// with their chunks' parameters on the device, then collects the ids.
absl::Status CudaBackend::Impl::Sample(const cuda::PassPlan& plan, int begin, int count, const PassOutput& want) {
  auto* host_rows = host_sample_rows.get<kernels::SampleRowParams>();
  for (int r = 0; r < count; ++r) {
    const RowSampling& rs = want.rows[plan.dest_rows[begin + r]];
    host_rows[r] = {rs.temperature, rs.top_k, rs.top_p, rs.min_p, rs.seed, rs.step};
  }
  GEMMA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(sample_rows.get(), host_rows, count * sizeof(kernels::SampleRowParams),
                                             cudaMemcpyHostToDevice, stream));
  kernels::SampleParams sp;
  sp.logits = runner->logits();
  sp.rows = sample_rows.get<kernels::SampleRowParams>();
  sp.out = sample_ids.get<int32_t>();
  sp.num_rows = count;
  sp.vocab = config.vocab_size;
  GEMMA_KERNEL_RETURN_IF_ERROR(kernels::LaunchSample(sp, stream));
  return Collect(plan, begin, count, sample_ids.get<int32_t>(), want);
}

// Copies logits rows [begin, begin + count), or their ids from `device_ids`,
// to their StepOutput rows.
absl::Status CudaBackend::Impl::Collect(const cuda::PassPlan& plan, int begin, int count, const int32_t* device_ids,
                                        const PassOutput& want) {
  const size_t vocab = config.vocab_size;
  if (device_ids != nullptr) {
    GEMMA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_ids.get(), device_ids, count * sizeof(int32_t),
                                               cudaMemcpyDeviceToHost, stream));
  } else {
    GEMMA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_logits.get(), runner->logits(),
                                               count * vocab * sizeof(float), cudaMemcpyDeviceToHost,
                                               stream));
  }
  GEMMA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  for (int r = 0; r < count; ++r) {
    const int dest = plan.dest_rows[begin + r];
    if (device_ids != nullptr) {
      want.ids[dest] = host_ids.get<int32_t>()[r];
    } else {
      std::memcpy(want.logits + dest * vocab, host_logits.get<float>() + r * vocab, vocab * sizeof(float));
    }
  }
  return absl::OkStatus();
}

// Greedy or sampled ids of every chunk's last position.
absl::Status CudaBackend::Impl::ForwardIds(std::span<const SequenceChunk> chunks, const PassOutput& want,
                                           std::vector<int32_t>* next_ids) {
  GEMMA_STATUS_RETURN_IF_ERROR(Validate(chunks));
  std::vector<SequenceChunk> last_only(chunks.begin(), chunks.end());
  for (SequenceChunk& c : last_only) c.all_logits = false;
  next_ids->assign(chunks.size(), 0);
  PassOutput w = want;
  w.ids = next_ids->data();
  for (cuda::PassPlan& plan : cuda::PlanPasses(last_only, chunk_tokens, cache.block_size())) {
    GEMMA_STATUS_RETURN_IF_ERROR(RunPass(plan, w));
  }
  Commit(chunks);
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

KvCacheSpec CudaBackend::kv_cache_spec() const {
  if (!impl_->paged) return {};
  return {impl_->cache.block_size(), impl_->cache.num_global_blocks(), impl_->cache.num_sliding_blocks()};
}

void CudaBackend::ResetSlot(int slot) {
  if (slot >= 0 && slot < max_slots()) impl_->lengths[slot] = 0;
}

absl::Status CudaBackend::Forward(std::span<const SequenceChunk> chunks, StepOutput* out) {
  GEMMA_STATUS_RETURN_IF_ERROR(impl_->Validate(chunks));
  int total_rows = 0;
  out->first_row = cuda::FirstRows(chunks, &total_rows);
  out->logits.assign(static_cast<size_t>(total_rows) * impl_->config.vocab_size, 0.0f);
  Impl::PassOutput want;
  want.logits = out->logits.data();
  for (cuda::PassPlan& plan : cuda::PlanPasses(chunks, impl_->chunk_tokens, impl_->cache.block_size())) {
    GEMMA_STATUS_RETURN_IF_ERROR(impl_->RunPass(plan, want));
  }
  impl_->Commit(chunks);
  return absl::OkStatus();
}

absl::Status CudaBackend::ForwardGreedy(std::span<const SequenceChunk> chunks,
                                        std::vector<int32_t>* next_ids) {
  Impl::PassOutput want;
  want.greedy = true;
  return impl_->ForwardIds(chunks, want, next_ids);
}

absl::Status CudaBackend::ForwardSample(std::span<const SequenceChunk> chunks, std::span<const RowSampling> rows,
                                        std::vector<int32_t>* next_ids) {
  if (rows.size() != chunks.size())
    return absl::InvalidArgumentError(
        absl::StrCat("cuda: ", rows.size(), " sampling rows for ", chunks.size(), " chunks"));
  Impl::PassOutput want;
  want.rows = rows;
  return impl_->ForwardIds(chunks, want, next_ids);
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
