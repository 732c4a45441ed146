#include "engine/cuda/pass_executor.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "kernels/sampling/sample.h"

namespace gemma::cuda {

absl::StatusOr<std::unique_ptr<PassExecutor>> PassExecutor::Create(const ModelConfig& config, const Limits& limits,
                                                                   ModelForward* forward, const KvPools* pools,
                                                                   DecodeGraphCache* graphs, cudaStream_t stream) {
  std::unique_ptr<PassExecutor> e(new PassExecutor(config, limits, forward, pools, graphs, stream));
  GEMMA_STATUS_RETURN_IF_ERROR(e->Allocate());
  return e;
}

absl::Status PassExecutor::Allocate() {
  const size_t rows = forward_->max_logit_rows();
  GEMMA_STATUS_RETURN_IF_ERROR(host_meta_.Allocate(forward_->layout().total * sizeof(int32_t), true));
  GEMMA_STATUS_RETURN_IF_ERROR(host_logits_.Allocate(rows * config_.vocab_size * sizeof(float), true));
  GEMMA_STATUS_RETURN_IF_ERROR(host_ids_.Allocate(rows * sizeof(int32_t), true));
  const size_t sample_rows_bytes = rows * sizeof(kernels::SampleRowParams);
  GEMMA_STATUS_RETURN_IF_ERROR(host_sample_rows_.Allocate(sample_rows_bytes, true));
  GEMMA_STATUS_RETURN_IF_ERROR(sample_rows_.Allocate(sample_rows_bytes));
  return sample_ids_.Allocate(rows * sizeof(int32_t));
}

absl::Status PassExecutor::Validate(std::span<const SequenceChunk> chunks) const {
  std::set<int> seen;
  for (const SequenceChunk& c : chunks) {
    if (c.slot < 0 || c.slot >= limits_.max_slots)
      return absl::InvalidArgumentError(absl::StrCat("cuda: slot ", c.slot, " out of range"));
    if (!seen.insert(c.slot).second)
      return absl::InvalidArgumentError(absl::StrCat("cuda: slot ", c.slot, " appears twice"));
    if (c.token_ids.empty()) return absl::InvalidArgumentError("cuda: empty chunk");
    if (c.start_position < 0)
      return absl::InvalidArgumentError(absl::StrCat("cuda: slot ", c.slot, ": start_position ", c.start_position));
    if (c.start_position + static_cast<int64_t>(c.token_ids.size()) > limits_.max_context)
      return absl::OutOfRangeError(absl::StrCat("cuda: slot ", c.slot, " would exceed max_context ",
                                                limits_.max_context));
    GEMMA_STATUS_RETURN_IF_ERROR(pools_->CheckTables(c));
    for (int32_t id : c.token_ids) {
      if (id < 0 || id >= config_.vocab_size)
        return absl::InvalidArgumentError(absl::StrCat("cuda: token id ", id, " out of range"));
    }
  }
  return absl::OkStatus();
}

absl::Status PassExecutor::Upload(const PassPlan& plan) {
  const int used = plan.WriteTo(forward_->layout(), host_meta_.get<int32_t>());
  return CudaStatus(cudaMemcpyAsync(forward_->metadata(), host_meta_.get(), used * sizeof(int32_t),
                                    cudaMemcpyHostToDevice, stream_),
                    "metadata upload");
}

absl::Status PassExecutor::RunPass(PassPlan& plan, const PassOutput& want) {
  const int rows = plan.num_real_rows();
  // Decode passes whose rows are exactly the batch replay the graph of their
  // bucket, padded.
  const bool graph_pass = plan.is_decode() && rows == plan.num_tokens();
  int batch = plan.num_tokens();
  if (graph_pass && graphs_->enabled()) {
    batch = graphs_->Bucket(batch);
    plan.PadDecodeTo(batch);
  }
  GEMMA_STATUS_RETURN_IF_ERROR(Upload(plan));
  const bool sampling = !want.rows.empty();
  if (graph_pass) {
    GEMMA_STATUS_RETURN_IF_ERROR(graphs_->Run(*forward_, batch, stream_));  // logits and argmax of every row
    if (sampling) return Sample(plan, 0, rows, want);
    return Collect(plan, 0, rows, want.argmax() ? forward_->ids() : nullptr, want);
  }
  GEMMA_STATUS_RETURN_IF_ERROR(
      forward_->EnqueueLayers({plan.num_tokens(), plan.num_seqs(), plan.max_q_len, plan.q_pos0, plan.q_offsets}, stream_));
  for (int begin = 0; begin < rows; begin += forward_->max_logit_rows()) {
    const int count = std::min(rows - begin, forward_->max_logit_rows());
    GEMMA_STATUS_RETURN_IF_ERROR(forward_->EnqueueLogits(begin, count, want.argmax(), stream_));
    if (sampling) {
      GEMMA_STATUS_RETURN_IF_ERROR(Sample(plan, begin, count, want));
    } else {
      GEMMA_STATUS_RETURN_IF_ERROR(
          Collect(plan, begin, count, want.argmax() ? forward_->ids() : nullptr, want));
    }
  }
  return CudaStatus(cudaStreamSynchronize(stream_), "forward pass");
}

absl::Status PassExecutor::Sample(const PassPlan& plan, int begin, int count, const PassOutput& want) {
  auto* host_rows = host_sample_rows_.get<kernels::SampleRowParams>();
  for (int r = 0; r < count; ++r) host_rows[r] = want.rows[plan.dest_rows[begin + r]];
  GEMMA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(sample_rows_.get(), host_rows,
                                             count * sizeof(kernels::SampleRowParams), cudaMemcpyHostToDevice,
                                             stream_));
  kernels::SampleParams sp;
  sp.logits = forward_->logits();
  sp.rows = sample_rows_.get<kernels::SampleRowParams>();
  sp.out = sample_ids_.get<int32_t>();
  sp.num_rows = count;
  sp.vocab = config_.vocab_size;
  GEMMA_KERNEL_RETURN_IF_ERROR(kernels::LaunchSample(sp, stream_));
  return Collect(plan, begin, count, sample_ids_.get<int32_t>(), want);
}

absl::Status PassExecutor::Collect(const PassPlan& plan, int begin, int count, const int32_t* device_ids,
                                   const PassOutput& want) {
  const size_t vocab = config_.vocab_size;
  if (device_ids != nullptr) {
    GEMMA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_ids_.get(), device_ids, count * sizeof(int32_t),
                                               cudaMemcpyDeviceToHost, stream_));
  }
  if (want.logits != nullptr) {
    GEMMA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_logits_.get(), forward_->logits(),
                                               count * vocab * sizeof(float), cudaMemcpyDeviceToHost,
                                               stream_));
  }
  GEMMA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  for (int r = 0; r < count; ++r) {
    const int dest = plan.dest_rows[begin + r];
    if (device_ids != nullptr) want.ids[dest] = host_ids_.get<int32_t>()[r];
    if (want.logits != nullptr)
      std::memcpy(want.logits + dest * vocab, host_logits_.get<float>() + r * vocab, vocab * sizeof(float));
  }
  return absl::OkStatus();
}

// With `argmax` the device's argmax of every logits row, then each chunk's last.
absl::Status PassExecutor::ForwardLogits(std::span<const SequenceChunk> chunks, bool argmax, ForwardResult* result) {
  int total_rows = 0;
  result->first_row = FirstRows(chunks, &total_rows);
  result->logits.assign(static_cast<size_t>(total_rows) * config_.vocab_size, 0.0f);
  std::vector<int32_t> row_ids(argmax ? total_rows : 0);
  PassOutput want;
  want.logits = result->logits.data();
  if (argmax) want.ids = row_ids.data();
  for (PassPlan& plan : PlanPasses(chunks, limits_.pass_tokens, pools_->cache().block_size())) {
    GEMMA_STATUS_RETURN_IF_ERROR(RunPass(plan, want));
  }
  result->next_ids.clear();
  if (!argmax) return absl::OkStatus();
  for (size_t i = 0; i < chunks.size(); ++i) {
    const size_t last = chunks[i].all_logits ? chunks[i].token_ids.size() - 1 : 0;
    result->next_ids.push_back(row_ids[result->first_row[i] + last]);
  }
  return absl::OkStatus();
}

absl::Status PassExecutor::ForwardIds(std::span<const SequenceChunk> chunks, std::span<const RowSampling> rows,
                                      std::vector<int32_t>* next_ids) {
  std::vector<SequenceChunk> last_only(chunks.begin(), chunks.end());
  for (SequenceChunk& c : last_only) c.all_logits = false;
  next_ids->assign(chunks.size(), 0);
  PassOutput want;
  want.ids = next_ids->data();
  want.rows = rows;
  for (PassPlan& plan : PlanPasses(last_only, limits_.pass_tokens, pools_->cache().block_size())) {
    GEMMA_STATUS_RETURN_IF_ERROR(RunPass(plan, want));
  }
  return absl::OkStatus();
}

}  // namespace gemma::cuda
