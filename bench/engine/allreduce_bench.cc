// allreduce-bench: latency of one tensor-parallel all-reduce (bf16, in place)
// per message size, for each implementation the machine allows: NCCL with one
// rank, the one-shot peer kernel with 1, 2 and 4 ranks sharing GPU 0 (a
// stand-in for the barrier and the reads: peer reads over NVLink cost more),
// and, with 2 or 4 GPUs, NCCL and the one-shot kernel across them. Each rank
// replays a CUDA graph of `--calls` back-to-back all-reduces, as decode
// graphs would hold them; the time is the slowest rank's, per call.
//
//   allreduce-bench [--calls 100] [--repeats 5]
// Prints one line per (implementation, ranks, size): op ranks gpus elements
// bytes us_per_call.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "engine/cuda/comm/all_reduce.h"
#include "engine/cuda/comm/nccl_library.h"

namespace gemma::cuda {
namespace {

int g_calls = 100, g_repeats = 5;

// Per-call microseconds of `calls` all-reduces of `count` elements, the
// slowest rank's best repeat.
double TimeGroup(AllReduceGroup& group, const std::vector<int>& devices, int64_t count) {
  const int n = static_cast<int>(devices.size());
  std::barrier sync(n);
  std::vector<double> best(n, 1e30);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      cudaSetDevice(devices[r]);
      cudaStream_t stream;
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
      void* buf = nullptr;
      cudaMalloc(&buf, count * sizeof(__nv_bfloat16));
      cudaMemset(buf, 0, count * sizeof(__nv_bfloat16));
      cudaDeviceSynchronize();
      // No rank synchronizes its device while another captures (ranks may
      // share a GPU).
      sync.arrive_and_wait();
      cudaGraph_t graph;
      cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
      bool ok = true;
      for (int i = 0; i < g_calls; ++i) {
        auto* p = static_cast<__nv_bfloat16*>(buf);
        ok = ok && group[r]->SumBf16(p, p, count, stream).ok();
      }
      cudaStreamEndCapture(stream, &graph);
      cudaGraphExec_t exec = nullptr;
      if (!ok || cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) {
        std::fprintf(stderr, "rank %d: capture failed\n", r);
        std::_Exit(1);
      }
      for (int rep = -1; rep < g_repeats; ++rep) {  // -1: warm-up
        sync.arrive_and_wait();
        const auto start = std::chrono::steady_clock::now();
        cudaGraphLaunch(exec, stream);
        cudaStreamSynchronize(stream);
        const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
        if (rep >= 0) best[r] = std::min(best[r], us / g_calls);
      }
      sync.arrive_and_wait();  // every rank done before any frees (a device-wide sync)
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(graph);
      cudaFree(buf);
      cudaStreamDestroy(stream);
    });
  }
  for (std::thread& t : threads) t.join();
  return *std::max_element(best.begin(), best.end());
}

const std::vector<int64_t> kCounts = {5376, 2 * 5376, 8 * 5376, 32 * 5376, 64 * 5376, 128 * 5376, 512 * 5376};

void Run(const char* op, const std::function<absl::StatusOr<AllReduceGroup>(const std::vector<int>&)>& make,
         const std::vector<int>& devices, int gpus) {
  absl::StatusOr<AllReduceGroup> group = make(devices);
  if (!group.ok()) {
    std::printf("%-8s %d ranks: %s\n", op, static_cast<int>(devices.size()), std::string(group.status().message()).c_str());
    return;
  }
  for (int64_t count : kCounts)
    std::printf("%-8s %5zu %4d %9lld %10lld %10.2f\n", op, devices.size(), gpus, static_cast<long long>(count),
                static_cast<long long>(count * 2), TimeGroup(*group, devices, count));
  std::fflush(stdout);
}

}  // namespace
}  // namespace gemma::cuda

int main(int argc, char** argv) {
  using namespace gemma::cuda;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--calls")) g_calls = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--repeats")) g_repeats = std::atoi(argv[i + 1]);
  }
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0) {
    std::printf("no CUDA device\n");
    return 0;
  }
  absl::StatusOr<const NcclApi*> nccl = LoadNccl();
  std::printf("NCCL: %s\n", nccl.ok() ? ((*nccl)->path + " version " + std::to_string((*nccl)->version)).c_str()
                                      : std::string(nccl.status().message()).c_str());
  std::printf("%-8s %5s %4s %9s %10s %10s\n", "op", "ranks", "gpus", "elements", "bytes", "us/call");
  const int64_t cap = 512 * 5376;
  auto peer = [cap](const std::vector<int>& d) { return CreatePeerGroup(d, cap); };
  auto nccl_group = [](const std::vector<int>& d) { return CreateNcclGroup(d); };
  if (nccl.ok()) Run("nccl", nccl_group, {0}, 1);
  for (int n : {1, 2, 4}) Run("oneshot", peer, std::vector<int>(n, 0), 1);
  for (int n : {2, 4}) {
    if (gpus < n) continue;
    std::vector<int> devices(n);
    for (int r = 0; r < n; ++r) devices[r] = r;
    if (nccl.ok()) Run("nccl", nccl_group, devices, n);
    Run("oneshot", peer, devices, n);
  }
  return 0;
}
