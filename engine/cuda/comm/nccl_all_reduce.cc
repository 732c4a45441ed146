// AllReduce through NCCL communicators created together (ncclCommInitAll):
// one process, one thread per rank, so no unique id needs to travel.
#include "absl/strings/str_cat.h"
#include "engine/cuda/comm/all_reduce.h"
#include "engine/cuda/comm/nccl_library.h"

namespace gemma::cuda {
namespace {

class NcclAllReduce final : public AllReduce {
 public:
  NcclAllReduce(const NcclApi* api, NcclApi::Comm comm) : api_(api), comm_(comm) {}
  ~NcclAllReduce() override { api_->comm_destroy(comm_); }
  absl::Status SumBf16(const __nv_bfloat16* in, __nv_bfloat16* out, int64_t count, cudaStream_t stream) override {
    if (count <= 0) return absl::InvalidArgumentError(absl::StrCat("NCCL all-reduce of ", count, " elements"));
    return api_->Check(api_->all_reduce(in, out, static_cast<size_t>(count), NcclApi::kBfloat16, NcclApi::kSum,
                                        comm_, stream),
                       "ncclAllReduce");
  }
  std::string_view name() const override { return "nccl"; }

 private:
  const NcclApi* api_;
  NcclApi::Comm comm_;
};

}  // namespace

absl::StatusOr<AllReduceGroup> CreateNcclGroup(std::span<const int> devices) {
  absl::StatusOr<const NcclApi*> api = LoadNccl();
  if (!api.ok()) return api.status();
  if (devices.empty()) return absl::InvalidArgumentError("NCCL group of no devices");
  std::vector<NcclApi::Comm> comms(devices.size(), nullptr);
  if (absl::Status s = (*api)->Check(
          (*api)->comm_init_all(comms.data(), static_cast<int>(devices.size()), devices.data()), "ncclCommInitAll");
      !s.ok())
    return s;
  AllReduceGroup group;
  for (NcclApi::Comm c : comms) group.push_back(std::make_unique<NcclAllReduce>(*api, c));
  return group;
}

}  // namespace gemma::cuda
