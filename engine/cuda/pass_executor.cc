// Running a Forward on the CUDA backend: chunk validation, one pass at a
// time (decode passes replay a graph), logits or ids back to the host, and
// sampling on the device (backend_impl.h).
#include <algorithm>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "engine/cuda/backend_impl.h"
#include "spdlog/spdlog.h"
#include "kernels/sampling/sample.h"

namespace gemma {

absl::Status CudaBackend::Impl::Validate(std::span<const SequenceChunk> chunks) const {
  std::set<int> seen;
  for (const SequenceChunk& c : chunks) {
    if (c.slot < 0 || c.slot >= options.max_slots)
      return absl::InvalidArgumentError(absl::StrCat("cuda: slot ", c.slot, " out of range"));
    if (!seen.insert(c.slot).second)
      return absl::InvalidArgumentError(absl::StrCat("cuda: slot ", c.slot, " appears twice"));
    if (c.token_ids.empty()) return absl::InvalidArgumentError("cuda: empty chunk");
    if (c.start_position < 0)
      return absl::InvalidArgumentError(absl::StrCat("cuda: slot ", c.slot, ": start_position ", c.start_position));
    if (c.start_position + static_cast<int64_t>(c.token_ids.size()) > max_context)
      return absl::OutOfRangeError(absl::StrCat("cuda: slot ", c.slot, " would exceed max_context ",
                                                max_context));
    GEMMA_STATUS_RETURN_IF_ERROR(ValidateTables(c));
    for (int32_t id : c.token_ids) {
      if (id < 0 || id >= config.vocab_size)
        return absl::InvalidArgumentError(absl::StrCat("cuda: token id ", id, " out of range"));
    }
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::Impl::EnqueueDecode(int batch) {
  if (!options.use_cuda_graphs || !decode_ran_eagerly.count(batch) || !graphs.Has(batch)) {
    GEMMA_STATUS_RETURN_IF_ERROR(forward->EnqueueLayers({batch, batch, 1}, stream));
    GEMMA_STATUS_RETURN_IF_ERROR(forward->EnqueueLogits(0, batch, /*argmax=*/true, stream));
    if (!options.use_cuda_graphs) return absl::OkStatus();
    decode_ran_eagerly.insert(batch);
    GEMMA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    return graphs.Capture(*forward, batch, stream);
  }
  return graphs.Replay(batch, stream);
}

absl::Status CudaBackend::Impl::RunPass(cuda::PassPlan& plan, const PassOutput& want) {
  const int rows = plan.num_real_rows();
  // Decode passes whose rows are exactly the batch replay the graph of their
  // bucket, padded.
  const bool graph_pass = plan.is_decode() && rows == plan.num_tokens();
  int batch = plan.num_tokens();
  if (graph_pass && options.use_cuda_graphs) {
    batch = DecodeBucket(batch);
    plan.PadDecodeTo(batch);
  }
  const int used = plan.WriteTo(forward->layout(), host_meta.get<int32_t>());
  GEMMA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(forward->metadata(), host_meta.get(), used * sizeof(int32_t),
                                             cudaMemcpyHostToDevice, stream));
  const bool sampling = !want.rows.empty();
  if (graph_pass) {
    GEMMA_STATUS_RETURN_IF_ERROR(EnqueueDecode(batch));  // logits and argmax of every row
    if (sampling) return Sample(plan, 0, rows, want);
    return Collect(plan, 0, rows, want.argmax() ? forward->ids() : nullptr, want);
  }
  GEMMA_STATUS_RETURN_IF_ERROR(
      forward->EnqueueLayers({plan.num_tokens(), plan.num_seqs(), plan.max_q_len}, stream));
  for (int begin = 0; begin < rows; begin += forward->max_logit_rows()) {
    const int count = std::min(rows - begin, forward->max_logit_rows());
    GEMMA_STATUS_RETURN_IF_ERROR(forward->EnqueueLogits(begin, count, want.argmax(), stream));
    if (sampling) {
      GEMMA_STATUS_RETURN_IF_ERROR(Sample(plan, begin, count, want));
    } else {
      GEMMA_STATUS_RETURN_IF_ERROR(Collect(plan, begin, count, want.argmax() ? forward->ids() : nullptr, want));
    }
  }
  return cuda::CudaStatus(cudaStreamSynchronize(stream), "forward pass");
}

// Draws logits rows [begin, begin + count) (in the forward's logits buffer)
// with their chunks' parameters on the device, then collects the ids.
absl::Status CudaBackend::Impl::Sample(const cuda::PassPlan& plan, int begin, int count, const PassOutput& want) {
  auto* host_rows = host_sample_rows.get<kernels::SampleRowParams>();
  for (int r = 0; r < count; ++r) host_rows[r] = want.rows[plan.dest_rows[begin + r]];
  GEMMA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(sample_rows.get(), host_rows, count * sizeof(kernels::SampleRowParams),
                                             cudaMemcpyHostToDevice, stream));
  kernels::SampleParams sp;
  sp.logits = forward->logits();
  sp.rows = sample_rows.get<kernels::SampleRowParams>();
  sp.out = sample_ids.get<int32_t>();
  sp.num_rows = count;
  sp.vocab = config.vocab_size;
  GEMMA_KERNEL_RETURN_IF_ERROR(kernels::LaunchSample(sp, stream));
  return Collect(plan, begin, count, sample_ids.get<int32_t>(), want);
}

// Copies logits rows [begin, begin + count) when the result wants logits,
// and their ids from `device_ids` when given, to their rows of the result.
absl::Status CudaBackend::Impl::Collect(const cuda::PassPlan& plan, int begin, int count, const int32_t* device_ids,
                                        const PassOutput& want) {
  const size_t vocab = config.vocab_size;
  if (device_ids != nullptr) {
    GEMMA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_ids.get(), device_ids, count * sizeof(int32_t),
                                               cudaMemcpyDeviceToHost, stream));
  }
  if (want.logits != nullptr) {
    GEMMA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_logits.get(), forward->logits(),
                                               count * vocab * sizeof(float), cudaMemcpyDeviceToHost,
                                               stream));
  }
  GEMMA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  for (int r = 0; r < count; ++r) {
    const int dest = plan.dest_rows[begin + r];
    if (device_ids != nullptr) want.ids[dest] = host_ids.get<int32_t>()[r];
    if (want.logits != nullptr)
      std::memcpy(want.logits + dest * vocab, host_logits.get<float>() + r * vocab, vocab * sizeof(float));
  }
  return absl::OkStatus();
}

// Every chunk's logits rows, copied to the host; with `argmax` also each
// chunk's argmax id from the device (per logits row, then each chunk's last).
absl::Status CudaBackend::Impl::ForwardLogits(std::span<const SequenceChunk> chunks, bool argmax,
                                              ForwardResult* result) {
  int total_rows = 0;
  result->first_row = cuda::FirstRows(chunks, &total_rows);
  result->logits.assign(static_cast<size_t>(total_rows) * config.vocab_size, 0.0f);
  std::vector<int32_t> row_ids(argmax ? total_rows : 0);
  PassOutput want;
  want.logits = result->logits.data();
  if (argmax) want.ids = row_ids.data();
  for (cuda::PassPlan& plan : cuda::PlanPasses(chunks, chunk_tokens, cache.block_size())) {
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

// Greedy or sampled ids of every chunk's last position.
absl::Status CudaBackend::Impl::ForwardIds(std::span<const SequenceChunk> chunks, const PassOutput& want,
                                           std::vector<int32_t>* next_ids) {
  std::vector<SequenceChunk> last_only(chunks.begin(), chunks.end());
  for (SequenceChunk& c : last_only) c.all_logits = false;
  next_ids->assign(chunks.size(), 0);
  PassOutput w = want;
  w.ids = next_ids->data();
  for (cuda::PassPlan& plan : cuda::PlanPasses(last_only, chunk_tokens, cache.block_size())) {
    GEMMA_STATUS_RETURN_IF_ERROR(RunPass(plan, w));
  }
  return absl::OkStatus();
}

}  // namespace gemma
