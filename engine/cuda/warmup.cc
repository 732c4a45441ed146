// PassExecutor's start-up runs, after the pools exist: every decode bucket's
// graph captured, and one full prefill pass, so no request pays for a
// capture or a first-use tuning (pass_executor.h).
#include <chrono>
#include <cstdint>

#include "absl/strings/str_join.h"
#include "engine/cuda/pass_executor.h"
#include "spdlog/spdlog.h"

namespace gemma::cuda {

absl::Status PassExecutor::CaptureDecodeGraphs() {
  const std::set<int> buckets = graphs_->Buckets();
  for (int bucket : buckets) {
    PassPlan plan;
    plan.max_q_len = 1;
    plan.PadDecodeTo(bucket);  // all padding: no attention work, no cache writes
    GEMMA_STATUS_RETURN_IF_ERROR(Upload(plan));
    GEMMA_STATUS_RETURN_IF_ERROR(graphs_->Run(*forward_, bucket, stream_));  // eagerly, then captured
    GEMMA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  }
  spdlog::info("cuda: decode graphs captured for batch buckets {}", absl::StrJoin(buckets, ", "));
  return absl::OkStatus();
}

// Its tokens write no KV (row -1) and read block 0 of each pool, which holds
// finite values (zeros or another sequence's keys: the logits are discarded).
absl::Status PassExecutor::WarmUpPrefill() {
  const auto start = std::chrono::steady_clock::now();
  PassPlan plan;
  const int n = limits_.pass_tokens, block = pools_->cache().block_size();
  plan.seq_slot = {0};
  plan.q_pos0 = {0};
  plan.q_offsets = {0, n};
  plan.global_table_offsets = {0};
  plan.sliding_table_offsets = {0};
  plan.tables.assign(static_cast<size_t>((n + block - 1) / block), 0);
  for (int t = 0; t < n; ++t) {
    plan.token_ids.push_back(3 + t % (config_.vocab_size - 3));
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

}  // namespace gemma::cuda
