#include "server/ops/server_status.h"

namespace gemma::server::ops {

void FillServerStatus(const EngineStats& s, v1::ServerStatus* out) {
  out->set_num_requests_running(s.running);
  out->set_num_requests_waiting(s.waiting);
  out->set_kv_block_size(s.kv_block_size);
  out->set_kv_total_blocks(s.kv_total_blocks);
  out->set_kv_free_blocks(s.kv_free_blocks);
  out->set_kv_cache_usage(s.kv_total_blocks > 0
                              ? static_cast<double>(s.kv_total_blocks - s.kv_free_blocks) /
                                    s.kv_total_blocks
                              : 0.0);
  out->set_prefix_cache_queries(s.prefix_cache_queries);
  out->set_prefix_cache_hits(s.prefix_cache_hits);
  out->set_max_batch(s.total_slots);
  out->set_prompt_tokens(s.prompt_tokens);
  out->set_generated_tokens(s.generated_tokens);
  out->set_preemptions(s.preemptions);
}

}  // namespace gemma::server::ops
