// Megatron-style tensor parallelism: which slice of every weight, KV head and
// vocabulary row each of N ranks owns.
//
// Per layer, rank r computes a contiguous run of query heads (QKV sharded by
// output) and the KV heads those heads read; o_proj is sharded by input (its
// columns follow the query heads), so each rank's o_proj output is a partial
// sum over its heads and the ranks' partials add up (the all-reduce after
// o_proj). gate/up are sharded by output (intermediate columns) and down_proj
// by input, so down's output is another partial sum (the second all-reduce).
// The tied embedding is sharded by vocabulary row: the lookup of an id is done
// by the rank that owns it (the others contribute zeros, summed), and the LM
// head's logits are the concatenation of the ranks' vocabulary slices.
//
// KV heads: when N divides a layer's KV heads, each rank holds its own
// num_kv_heads / N; when the layer has fewer KV heads than ranks (and divides
// N), each rank holds a copy of the one KV head its query heads share.
// Norms, layer scalars and the residual stream are replicated.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/config.h"

namespace gemma::parallel {

// A contiguous run [begin, begin + size) of heads, columns or rows.
struct Range {
  int64_t begin = 0;
  int64_t size = 0;
  int64_t end() const { return begin + size; }
  bool Contains(int64_t i) const { return i >= begin && i < end(); }
  bool operator==(const Range&) const = default;
};

struct LayerShard {
  Range q_heads;   // query heads (rows of q_proj by head, columns of o_proj)
  Range kv_heads;  // KV heads held (rows of k_proj / v_proj, the KV pool's heads)
};

struct RankShard {
  int rank = 0;
  std::vector<LayerShard> layers;  // per decoder layer
  Range intermediate;              // rows of gate_proj / up_proj, columns of down_proj
  Range vocab;                     // rows of the tied embedding / LM head
};

struct ShardPlan {
  int size = 1;                  // N, the tensor-parallel size
  std::vector<RankShard> ranks;  // ranks[r].rank == r
};

// The sizes a server accepts for --tensor-parallel-size: 1, 2 or 4.
absl::Status CheckTensorParallelSize(int size);

// The plan for `size` ranks. Errors name the shape that does not split:
// num_attention_heads and intermediate_size must be divisible by size; each
// layer's KV heads must be divisible by size or divide it. The vocabulary
// splits unevenly when it must (the first V % size ranks get one more row).
absl::StatusOr<ShardPlan> MakeShardPlan(const ModelConfig& config, int size);

}  // namespace gemma::parallel
