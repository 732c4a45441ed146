// One endpoint that sends each message through the faster of two groups for
// its size (measured: the one-shot kernel wins on latency-bound small
// messages, NCCL's ring on bandwidth-bound large ones).
#include "engine/cuda/comm/all_reduce.h"

namespace gemma::cuda {
namespace {

class BySize final : public AllReduce {
 public:
  BySize(std::unique_ptr<AllReduce> small, std::unique_ptr<AllReduce> large, int64_t max_small_count)
      : small_(std::move(small)), large_(std::move(large)), max_small_count_(max_small_count) {}
  absl::Status SumBf16(const __nv_bfloat16* in, __nv_bfloat16* out, int64_t count, cudaStream_t stream) override {
    return (count <= max_small_count_ ? small_ : large_)->SumBf16(in, out, count, stream);
  }
  std::string_view name() const override { return "by-size"; }

 private:
  std::unique_ptr<AllReduce> small_, large_;
  int64_t max_small_count_;
};

}  // namespace

AllReduceGroup CombineBySize(AllReduceGroup small, AllReduceGroup large, int64_t max_small_count) {
  AllReduceGroup group;
  for (size_t r = 0; r < small.size() && r < large.size(); ++r)
    group.push_back(std::make_unique<BySize>(std::move(small[r]), std::move(large[r]), max_small_count));
  return group;
}

}  // namespace gemma::cuda
