// Start-up of the CUDA backend after the pools exist: every decode bucket's
// graph captured, and one full prefill pass run, so no request pays for a
// capture or a first-use tuning (backend_impl.h).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <set>

#include "absl/strings/str_join.h"
#include "engine/cuda/backend_impl.h"
#include "spdlog/spdlog.h"

namespace gemma {

// Decode batches run as the graph of the next bucket (1, 2, 4, ..., capped
// at max_slots and at the pass size, which bounds every activation buffer),
// padded with empty sequences.
int CudaBackend::Impl::DecodeBucket(int batch) const {
  int bucket = 1;
  while (bucket < batch) bucket *= 2;
  return std::min({bucket, options.max_slots, chunk_tokens});
}

// Every bucket's decode graph at start-up, so no request pays for a capture.
absl::Status CudaBackend::Impl::CaptureDecodeGraphs() {
  std::set<int> buckets;
  for (int b = 1; b <= options.max_slots; ++b) buckets.insert(DecodeBucket(b));
  for (int bucket : buckets) {
    cuda::PassPlan plan;
    plan.max_q_len = 1;
    plan.PadDecodeTo(bucket);  // all padding: no attention work, no cache writes
    const int used = plan.WriteTo(forward->layout(), host_meta.get<int32_t>());
    GEMMA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(forward->metadata(), host_meta.get(), used * sizeof(int32_t),
                                               cudaMemcpyHostToDevice, stream));
    GEMMA_STATUS_RETURN_IF_ERROR(EnqueueDecode(bucket));  // runs it eagerly, then captures it
    GEMMA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  }
  spdlog::info("cuda: decode graphs captured for batch buckets {}", absl::StrJoin(buckets, ", "));
  return absl::OkStatus();
}

// One full prefill pass at start-up, so the attention tiles and the GEMM
// algorithms of the pass size are tuned before the first request (not in
// its time to first token). Its tokens write no KV (row -1) and read block
// 0 of each pool, which holds finite values (zeros or another sequence's
// keys: the logits are discarded).
absl::Status CudaBackend::Impl::WarmUpPrefill() {
  const auto start = std::chrono::steady_clock::now();
  cuda::PassPlan plan;
  const int n = chunk_tokens, block = cache.block_size();
  plan.seq_slot = {0};
  plan.q_pos0 = {0};
  plan.q_offsets = {0, n};
  plan.global_table_offsets = {0};
  plan.sliding_table_offsets = {0};
  plan.tables.assign(static_cast<size_t>((n + block - 1) / block), 0);
  for (int t = 0; t < n; ++t) {
    plan.token_ids.push_back(3 + t % (config.vocab_size - 3));
    plan.positions.push_back(t);
    plan.token_slot.push_back(0);
    plan.kv_row_global.push_back(-1);
    plan.kv_row_sliding.push_back(-1);
  }
  plan.logit_rows = {n - 1};
  plan.dest_rows = {0};
  plan.max_q_len = n;
  int32_t id = 0;
  PassOutput want;
  want.ids = &id;  // argmax
  GEMMA_STATUS_RETURN_IF_ERROR(RunPass(plan, want));
  spdlog::info("cuda: prefill pass of {} tokens warmed up in {:.2f} s", n,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return absl::OkStatus();
}

}  // namespace gemma
