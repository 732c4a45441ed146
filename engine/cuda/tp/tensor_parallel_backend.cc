#include "engine/cuda/tp/tensor_parallel_backend.h"

#include <algorithm>
#include <barrier>
#include <cstdlib>
#include <set>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "engine/cuda/comm/all_reduce.h"
#include "engine/cuda/common/cuda_util.h"
#include "engine/cuda/tp/rank_thread.h"
#include "engine/parallel/rank_model.h"
#include "engine/parallel/shard_plan.h"

namespace gemma {
namespace {

using cuda::AllReduceGroup;
using cuda::RankThread;

class TensorParallelBackend final : public Backend {
 public:
  const ModelConfig& config() const override { return config_; }
  std::string name() const override { return "cuda"; }
  int max_slots() const override { return ranks_[0]->max_slots(); }
  int max_context() const override { return ranks_[0]->max_context(); }
  // Block ids below every rank's pool sizes are valid on every rank.
  KvCacheSpec kv_cache_spec() const override {
    KvCacheSpec spec = ranks_[0]->kv_cache_spec();
    for (const auto& r : ranks_) {
      spec.num_global_blocks = std::min(spec.num_global_blocks, r->kv_cache_spec().num_global_blocks);
      spec.num_sliding_blocks = std::min(spec.num_sliding_blocks, r->kv_cache_spec().num_sliding_blocks);
    }
    return spec;
  }
  int64_t kv_cache_bytes() const override {
    int64_t bytes = 0;
    for (const auto& r : ranks_) bytes += r->kv_cache_bytes();
    return bytes;
  }
  std::optional<size_t> device_memory_used_bytes() const override { return ranks_[0]->device_memory_used_bytes(); }
  bool can_sample_on_device() const override { return true; }
  void ResetSlot(int slot) override {
    OnEveryRank([&](int r) {
      ranks_[r]->ResetSlot(slot);
      return absl::OkStatus();
    }).IgnoreError();
  }
  absl::Status Forward(std::span<const SequenceChunk> chunks, std::span<const RowSampling> rows,
                       ForwardResult* result) override {
    std::vector<ForwardResult> results(ranks_.size());
    GEMMA_STATUS_RETURN_IF_ERROR(OnEveryRank([&](int r) { return ranks_[r]->Forward(chunks, rows, &results[r]); }));
    *result = std::move(results[0]);
    return absl::OkStatus();
  }

  ~TensorParallelBackend() override {
    // Each rank's device state is released on its own thread, before the
    // communicators it used.
    OnEveryRank([&](int r) {
      if (static_cast<size_t>(r) < ranks_.size()) ranks_[r].reset();
      return absl::OkStatus();
    }).IgnoreError();
    OnEveryRank([&](int r) {
      if (static_cast<size_t>(r) < comm_.size()) comm_[r].reset();
      return absl::OkStatus();
    }).IgnoreError();
  }

  static absl::StatusOr<std::unique_ptr<Backend>> Create(const BackendOptions& options, const CudaTuning& tuning,
                                                         const TensorParallelCudaOptions& tp);

 private:
  // Runs fn(rank) on every rank's thread at once; the first error wins.
  template <typename Fn>
  absl::Status OnEveryRank(Fn fn) {
    std::vector<absl::Status> status(threads_.size());
    for (size_t r = 0; r < threads_.size(); ++r) threads_[r]->Post([&, r] { status[r] = fn(static_cast<int>(r)); });
    for (auto& t : threads_) t->Wait();
    for (size_t r = 0; r < status.size(); ++r)
      if (!status[r].ok()) return absl::Status(status[r].code(), absl::StrCat("rank ", r, ": ", status[r].message()));
    return absl::OkStatus();
  }
  absl::Status Communicators(const std::vector<int>& devices, int64_t max_count, int64_t oneshot_max_count);

  ModelConfig config_;
  std::vector<std::unique_ptr<RankThread>> threads_;
  AllReduceGroup comm_;
  std::vector<std::unique_ptr<CudaBackend>> ranks_;
};

// NCCL for large messages when every rank has its own GPU and the library
// loads; the one-shot kernel for small ones (or for all, without NCCL).
absl::Status TensorParallelBackend::Communicators(const std::vector<int>& devices, int64_t max_count,
                                                  int64_t oneshot_max_count) {
  const bool distinct = std::set<int>(devices.begin(), devices.end()).size() == devices.size();
  absl::StatusOr<AllReduceGroup> nccl =
      distinct ? cuda::CreateNcclGroup(devices) : absl::FailedPreconditionError("ranks share a GPU");
  const int64_t peer_count = nccl.ok() ? oneshot_max_count : max_count;
  absl::StatusOr<AllReduceGroup> peer = cuda::CreatePeerGroup(devices, (peer_count + 7) / 8 * 8);
  if (!peer.ok()) {
    if (!nccl.ok()) return peer.status();
    comm_ = *std::move(nccl);  // no peer access: NCCL for every size
    return absl::OkStatus();
  }
  comm_ = nccl.ok() ? cuda::CombineBySize(*std::move(peer), *std::move(nccl), oneshot_max_count) : *std::move(peer);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Backend>> TensorParallelBackend::Create(const BackendOptions& options,
                                                                       const CudaTuning& tuning,
                                                                       const TensorParallelCudaOptions& tp) {
  const int n = static_cast<int>(tp.devices.size());
  if (n != options.tensor_parallel_size)
    return absl::InvalidArgumentError(
        absl::StrCat("tensor parallel: ", n, " devices for --tensor-parallel-size ", options.tensor_parallel_size));
  const bool shared = std::set<int>(tp.devices.begin(), tp.devices.end()).size() < tp.devices.size();
  if (shared && options.num_kv_blocks <= 0)
    return absl::InvalidArgumentError("tensor parallel: ranks sharing a GPU need num_kv_blocks set (pools cannot be "
                                      "sized from free memory that another rank is filling)");
  // A kernel loaded lazily (at its first launch) waits for the GPU, where
  // another rank's all-reduce may be waiting for this rank: a deadlock.
  const char* loading = std::getenv("CUDA_MODULE_LOADING");
  if (shared && (loading == nullptr || std::string_view(loading) != "EAGER"))
    return absl::FailedPreconditionError("tensor parallel: ranks sharing a GPU need CUDA_MODULE_LOADING=EAGER "
                                         "(set before the first CUDA call)");
  std::unique_ptr<LoadedModel> full;
  ModelConfig config;
  if (options.random_weights) {
    absl::StatusOr<ModelConfig> c = LoadModelConfig(options.model_dir);
    if (!c.ok()) return c.status();
    config = *c;
  } else {
    absl::StatusOr<std::unique_ptr<LoadedModel>> m = LoadModel(options.model_dir);
    if (!m.ok()) return m.status();
    full = *std::move(m);
    config = full->config;
  }
  absl::StatusOr<parallel::ShardPlan> plan = parallel::MakeShardPlan(config, n);
  if (!plan.ok()) return plan.status();
  std::vector<std::unique_ptr<parallel::RankModel>> shards;
  for (const parallel::RankShard& shard : plan->ranks) {
    if (full) {
      absl::StatusOr<std::unique_ptr<parallel::RankModel>> s = parallel::ShardModel(*full, shard);
      if (!s.ok()) return s.status();
      shards.push_back(*std::move(s));
    } else {
      auto s = std::make_unique<parallel::RankModel>();
      s->model.config = parallel::RankConfig(config, shard);
      shards.push_back(std::move(s));
    }
  }
  std::unique_ptr<TensorParallelBackend> b(new TensorParallelBackend());
  b->config_ = config;
  for (int d : tp.devices) b->threads_.push_back(std::make_unique<RankThread>(d));
  // The largest message: a full pass of hidden rows (each rank's backend
  // picks its pass size; with none given, at most kMaxAutoChunkTokens) or a
  // decode batch.
  const int pass = tuning.max_chunk_tokens > 0       ? tuning.max_chunk_tokens
                   : options.max_tokens_per_step > 0 ? std::min(options.max_tokens_per_step, kMaxAutoChunkTokens)
                                                     : kMaxAutoChunkTokens;
  const int64_t max_tokens = std::max({pass, options.max_slots, 4096});
  GEMMA_STATUS_RETURN_IF_ERROR(
      b->Communicators(tp.devices, max_tokens * config.hidden_size, tp.oneshot_max_bytes / 2));
  // Every rank starts at once: start-up runs passes (decode graphs, the
  // warm-up prefill) whose all-reduces need all ranks.
  // They meet before their first pass (CudaTuning::before_first_pass); one
  // that fails before it drops out, so the others are not held.
  BackendOptions rank_options = options;
  rank_options.tensor_parallel_size = 1;
  b->ranks_.resize(n);
  std::barrier<> start(n);
  GEMMA_STATUS_RETURN_IF_ERROR(b->OnEveryRank([&](int r) -> absl::Status {
    CudaTuning t = tuning;
    t.device = tp.devices[r];
    t.model = &shards[r]->model;
    t.all_reduce = b->comm_[r].get();
    bool arrived = false;
    t.before_first_pass = [&start, &arrived] {
      arrived = true;
      start.arrive_and_wait();
    };
    absl::StatusOr<std::unique_ptr<CudaBackend>> rank = CreateCudaBackendWithTuning(rank_options, t);
    if (!arrived) start.arrive_and_drop();
    if (!rank.ok()) return rank.status();
    b->ranks_[r] = *std::move(rank);
    return absl::OkStatus();
  }));
  return std::unique_ptr<Backend>(std::move(b));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> CreateTensorParallelCudaBackend(const BackendOptions& options,
                                                                         const CudaTuning& tuning,
                                                                         const TensorParallelCudaOptions& tp) {
  return TensorParallelBackend::Create(options, tuning, tp);
}

}  // namespace gemma
