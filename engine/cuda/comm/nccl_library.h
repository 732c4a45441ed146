// NCCL, loaded at run time: the build and CI need no NCCL package, and a
// machine without it runs everything but NCCL all-reduces. The handful of
// entry points and types the server uses are declared here (their C ABI:
// enums passed as int, the communicator an opaque pointer).
//
// The library is $GEMMA_NCCL_LIBRARY when set, else libnccl.so.2 from the
// loader's search path (Debian's libnccl2, or the nvidia-nccl-cu* wheel's
// lib/ directory on LD_LIBRARY_PATH).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"

namespace gemma::cuda {

struct NcclApi {
  using Comm = struct NcclComm*;
  // nccl.h's ncclDataType_t / ncclRedOp_t values.
  static constexpr int kBfloat16 = 9;
  static constexpr int kFloat32 = 7;
  static constexpr int kSum = 0;

  int (*get_version)(int* version) = nullptr;
  int (*comm_init_all)(Comm* comms, int count, const int* devices) = nullptr;
  int (*comm_destroy)(Comm comm) = nullptr;
  int (*all_reduce)(const void* send, void* recv, size_t count, int dtype, int op, Comm comm,
                    cudaStream_t stream) = nullptr;
  const char* (*get_error_string)(int result) = nullptr;
  int version = 0;       // e.g. 22703 for 2.27.3
  std::string path;      // the library that was loaded

  // An NCCL result as a status naming the call; OK for ncclSuccess (0).
  absl::Status Check(int result, const char* what) const;
};

// Loads the library once per process (later calls return the same API or
// the same error, which names the library and how to provide it).
absl::StatusOr<const NcclApi*> LoadNccl();

}  // namespace gemma::cuda
