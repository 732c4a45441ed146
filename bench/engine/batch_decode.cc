#include "bench/engine/batch_decode.h"

#include <cuda_profiler_api.h>

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace gemma {
namespace {

using Clock = std::chrono::steady_clock;

// Sequence s owns global blocks [s * G, (s + 1) * G) and a ring of R sliding
// blocks reused cyclically: a window never spans more than R consecutive
// blocks, so live positions never share one (R = the pool's share per slot,
// which the backend sizes as ceil((window - 1) / B) + 2).
struct Tables {
  std::vector<std::vector<int32_t>> global, sliding;
  Tables(int num_seqs, int blocks_per_seq, int ring) : global(num_seqs), sliding(num_seqs) {
    for (int s = 0; s < num_seqs; ++s)
      for (int b = 0; b < blocks_per_seq; ++b) {
        global[s].push_back(s * blocks_per_seq + b);
        sliding[s].push_back(s * ring + b % ring);
      }
  }
};

std::vector<int32_t> Ids(int n, int vocab, uint32_t seed) {
  std::vector<int32_t> ids(n);
  for (int32_t& id : ids) {
    seed = seed * 1664525u + 1013904223u;
    id = 3 + static_cast<int32_t>((seed >> 8) % static_cast<uint32_t>(vocab - 3));
  }
  return ids;
}

}  // namespace

absl::StatusOr<std::vector<BatchDecodeRow>> RunBatchDecode(CudaBackend& backend, const std::vector<int>& batches,
                                                           const std::vector<int>& contexts, int steps) {
  const KvCacheSpec kv = backend.kv_cache_spec();
  if (kv.block_size <= 0) return absl::FailedPreconditionError("--batches needs the paged KV cache");
  const int max_batch = *std::max_element(batches.begin(), batches.end());
  const int max_len = *std::max_element(contexts.begin(), contexts.end()) + steps + 2;
  const int blocks_per_seq = (max_len + kv.block_size - 1) / kv.block_size;
  const int ring = kv.num_sliding_blocks / std::max(1, backend.max_slots());
  if (int64_t{max_batch} * blocks_per_seq > kv.num_global_blocks || max_batch > backend.max_slots())
    return absl::InvalidArgumentError(
        absl::StrCat("--batches: ", max_batch, " sequences of ", max_len, " tokens do not fit the pool (",
                     kv.num_global_blocks, " global blocks, ", backend.max_slots(), " slots): at most ",
                     std::min<int64_t>(kv.num_global_blocks / blocks_per_seq, backend.max_slots()),
                     " sequences of that length"));
  const Tables tables(max_batch, blocks_per_seq, ring);
  const int vocab = backend.config().vocab_size;
  std::vector<BatchDecodeRow> rows;
  for (int context : contexts) {
    for (int batch : batches) {
      std::vector<std::vector<int32_t>> prompts;
      std::vector<SequenceChunk> chunks;
      for (int s = 0; s < batch; ++s) prompts.push_back(Ids(context, vocab, 1000u * s + context));
      for (int s = 0; s < batch; ++s) {
        SequenceChunk c{s, prompts[s], 0, false};
        c.global_blocks = tables.global[s];
        c.sliding_blocks = tables.sliding[s];
        chunks.push_back(c);
      }
      ForwardResult next;
      if (absl::Status st = backend.Forward(chunks, {}, &next); !st.ok()) return st;
      std::vector<int32_t> feed = next.next_ids;
      Clock::time_point start;
      for (int i = 0; i < steps + 2; ++i) {
        if (i == 2) {
          start = Clock::now();
          cudaProfilerStart();  // profilers started with their capture off see the timed steps only
        }
        for (int s = 0; s < batch; ++s) {
          chunks[s].token_ids = std::span<const int32_t>(&feed[s], 1);
          chunks[s].start_position = context + i;
        }
        if (absl::Status st = backend.Forward(chunks, {}, &next); !st.ok()) return st;
        feed = next.next_ids;
      }
      const double ms = 1e3 * std::chrono::duration<double>(Clock::now() - start).count() / steps;
      cudaProfilerStop();
      rows.push_back({batch, context, ms, batch * 1e3 / ms});
      spdlog::info("bench: batch {} at context {}: {:.2f} ms/step, {:.0f} tok/s", batch, context, ms,
                   batch * 1e3 / ms);
    }
  }
  return rows;
}

}  // namespace gemma
