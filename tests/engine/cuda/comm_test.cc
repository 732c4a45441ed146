// The tensor-parallel all-reduces on whatever GPUs are visible: NCCL with one
// rank (identity; captured in a CUDA graph), the one-shot peer kernel with 2
// and 4 ranks sharing GPU 0 (each rank a thread with its own stream and
// buffers; the sum must be the fp32 sum in rank order rounded once to bf16, the
// same bits on every rank), eagerly and replayed from graphs, and the by-size
// combination. With 2+ GPUs, NCCL and the one-shot kernel across GPUs 0 and 1.
#include <cuda_bf16.h>

#include <cstring>
#include <functional>
#include <random>
#include <thread>

#include "engine/cuda/comm/all_reduce.h"
#include "engine/cuda/comm/nccl_library.h"
#include "tests/common/gpu_test_util.h"

namespace gemma::cuda {
namespace {

using gpu_test::DeviceArray;

std::vector<__nv_bfloat16> RandomRow(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<__nv_bfloat16> v(n);
  for (auto& x : v) x = __float2bfloat16(dist(rng));
  return v;
}

// The expected bits: fp32 sum over ranks in rank order, rounded once.
std::vector<__nv_bfloat16> Expected(const std::vector<std::vector<__nv_bfloat16>>& parts) {
  std::vector<__nv_bfloat16> out(parts[0].size());
  for (size_t i = 0; i < out.size(); ++i) {
    float acc = 0.0f;
    for (const auto& p : parts) acc += __bfloat162float(p[i]);
    out[i] = __float2bfloat16(acc);
  }
  return out;
}

bool SameBits(const std::vector<__nv_bfloat16>& a, const std::vector<__nv_bfloat16>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(__nv_bfloat16)) == 0;
}

// Runs fn(rank) on one thread per rank, each on its device.
void OnRanks(const std::vector<int>& devices, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (size_t r = 0; r < devices.size(); ++r)
    threads.emplace_back([&, r] {
      cudaSetDevice(devices[r]);
      fn(static_cast<int>(r));
    });
  for (std::thread& t : threads) t.join();
}

// Every rank sums its own random rows for each count in `counts`, in order,
// `rounds` times (graph: captured once per rank, replayed with new inputs).
void CheckGroup(AllReduceGroup& group, const std::vector<int>& devices, const std::vector<int64_t>& counts,
                int rounds, bool graph) {
  const int n = static_cast<int>(devices.size());
  int64_t max_count = 0;
  for (int64_t c : counts) max_count = std::max(max_count, c);
  std::vector<std::vector<std::vector<__nv_bfloat16>>> results(n);  // [rank][round * counts + i]
  std::vector<std::string> errors(n);
  OnRanks(devices, [&](int r) {
    cudaStream_t stream;
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    std::vector<std::unique_ptr<DeviceArray<__nv_bfloat16>>> bufs;
    for (size_t i = 0; i < counts.size(); ++i) bufs.push_back(std::make_unique<DeviceArray<__nv_bfloat16>>(counts[i]));
    auto enqueue = [&]() -> absl::Status {
      for (size_t i = 0; i < counts.size(); ++i) {
        absl::Status s = group[r]->SumBf16(bufs[i]->get(), bufs[i]->get(), counts[i], stream);
        if (!s.ok()) return s;
      }
      return absl::OkStatus();
    };
    cudaGraphExec_t exec = nullptr;
    if (graph) {
      cudaGraph_t g;
      cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
      const absl::Status s = enqueue();
      cudaStreamEndCapture(stream, &g);
      if (!s.ok() || cudaGraphInstantiate(&exec, g, 0) != cudaSuccess) {
        errors[r] = "capture: " + s.ToString();
        return;
      }
      cudaGraphDestroy(g);
    }
    for (int round = 0; round < rounds; ++round) {
      for (size_t i = 0; i < counts.size(); ++i)
        bufs[i]->Upload(RandomRow(counts[i], 1000 * round + 10 * i + r));
      if (graph) {
        if (cudaGraphLaunch(exec, stream) != cudaSuccess) errors[r] = "graph launch";
      } else if (absl::Status s = enqueue(); !s.ok()) {
        errors[r] = s.ToString();
        return;
      }
      if (cudaStreamSynchronize(stream) != cudaSuccess) {
        errors[r] = std::string("sync: ") + cudaGetErrorString(cudaGetLastError());
        return;
      }
      for (size_t i = 0; i < counts.size(); ++i) results[r].push_back(bufs[i]->Download());
    }
    if (exec) cudaGraphExecDestroy(exec);
    cudaStreamDestroy(stream);
  });
  for (int r = 0; r < n; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
  for (int round = 0; round < rounds; ++round) {
    for (size_t i = 0; i < counts.size(); ++i) {
      std::vector<std::vector<__nv_bfloat16>> parts;
      for (int r = 0; r < n; ++r) parts.push_back(RandomRow(counts[i], 1000 * round + 10 * i + r));
      const std::vector<__nv_bfloat16> want = Expected(parts);
      for (int r = 0; r < n; ++r)
        ASSERT_TRUE(SameBits(results[r][round * counts.size() + i], want))
            << group[r]->name() << " rank " << r << " of " << n << ", round " << round << ", count " << counts[i];
    }
  }
}

// Batch 1, 8 and 64 rows of the 31B's hidden size, and an odd small one.
const std::vector<int64_t> kCounts = {5376, 8, 8 * 5376, 64 * 5376, 1000};

TEST(CommTest, NcclLibraryLoadsOrNamesItself) {
  GEMMA_REQUIRE_GPU();
  absl::StatusOr<const NcclApi*> api = LoadNccl();
  if (!api.ok()) {
    EXPECT_NE(api.status().message().find("libnccl"), std::string::npos) << api.status();
    GTEST_SKIP() << api.status();
  }
  std::printf("NCCL %d from %s\n", (*api)->version, (*api)->path.c_str());
}

TEST(CommTest, NcclOneRankIsIdentityEagerAndInGraphs) {
  GEMMA_REQUIRE_GPU();
  if (!LoadNccl().ok()) GTEST_SKIP() << LoadNccl().status();
  const std::vector<int> devices = {0};
  absl::StatusOr<AllReduceGroup> group = CreateNcclGroup(devices);
  ASSERT_TRUE(group.ok()) << group.status();
  CheckGroup(*group, devices, kCounts, 3, false);
  CheckGroup(*group, devices, kCounts, 3, true);
}

TEST(CommTest, OneShotRanksSharingOneGpuSumInRankOrder) {
  GEMMA_REQUIRE_GPU();
  for (int n : {1, 2, 4}) {
    const std::vector<int> devices(n, 0);
    absl::StatusOr<AllReduceGroup> group = CreatePeerGroup(devices, 64 * 5376);
    ASSERT_TRUE(group.ok()) << group.status();
    CheckGroup(*group, devices, kCounts, 4, false);
    CheckGroup(*group, devices, kCounts, 4, true);
  }
}

TEST(CommTest, CombineBySizeRoutesEachMessage) {
  GEMMA_REQUIRE_GPU();
  const std::vector<int> devices(2, 0);
  absl::StatusOr<AllReduceGroup> small = CreatePeerGroup(devices, 1024);
  absl::StatusOr<AllReduceGroup> large = CreatePeerGroup(devices, 64 * 5376);
  ASSERT_TRUE(small.ok() && large.ok());
  AllReduceGroup group = CombineBySize(*std::move(small), *std::move(large), 1024);
  ASSERT_EQ(group.size(), 2u);
  // 5376 > 1024: only the large group's staging can hold it.
  CheckGroup(group, devices, {8, 1024, 5376, 64 * 5376}, 2, true);
}

TEST(CommTest, OneShotRefusesWhatItCannotSum) {
  GEMMA_REQUIRE_GPU();
  const std::vector<int> devices = {0};
  EXPECT_FALSE(CreatePeerGroup(devices, 1001).ok());
  absl::StatusOr<AllReduceGroup> group = CreatePeerGroup(devices, 1024);
  ASSERT_TRUE(group.ok());
  DeviceArray<__nv_bfloat16> buf(2048);
  absl::Status s = (*group)[0]->SumBf16(buf.get(), buf.get(), 12, nullptr);
  EXPECT_NE(s.message().find("count 12 must be a positive multiple of 8 up to 1024"), std::string::npos) << s;
  s = (*group)[0]->SumBf16(buf.get(), buf.get(), 2048, nullptr);
  EXPECT_FALSE(s.ok());
}

TEST(CommTest, AcrossTwoGpus) {
  GEMMA_REQUIRE_GPU();
  int count = 0;
  cudaGetDeviceCount(&count);
  if (count < 2) GTEST_SKIP() << "needs 2 GPUs, " << count << " visible";
  const std::vector<int> devices = {0, 1};
  absl::StatusOr<AllReduceGroup> peer = CreatePeerGroup(devices, 64 * 5376);
  ASSERT_TRUE(peer.ok()) << peer.status();
  CheckGroup(*peer, devices, kCounts, 4, false);
  CheckGroup(*peer, devices, kCounts, 4, true);
  if (!LoadNccl().ok()) GTEST_SKIP() << LoadNccl().status();
  absl::StatusOr<AllReduceGroup> nccl = CreateNcclGroup(devices);
  ASSERT_TRUE(nccl.ok()) << nccl.status();
  // NCCL's two-rank sum rounds a + b once to bf16: the same bits as the fp32
  // sum rounded (it is exact in fp32 wherever the small side can matter).
  CheckGroup(*nccl, devices, kCounts, 2, false);
  CheckGroup(*nccl, devices, kCounts, 2, true);
}

}  // namespace
}  // namespace gemma::cuda
