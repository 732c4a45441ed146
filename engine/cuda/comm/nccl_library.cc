#include "engine/cuda/comm/nccl_library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "absl/strings/str_cat.h"

namespace gemma::cuda {
namespace {

template <typename F>
bool Bind(void* handle, const char* name, F* fn) {
  *fn = reinterpret_cast<F>(dlsym(handle, name));
  return *fn != nullptr;
}

absl::StatusOr<NcclApi> Open() {
  const char* env = std::getenv("GEMMA_NCCL_LIBRARY");
  NcclApi api;
  api.path = env != nullptr && *env != '\0' ? env : "libnccl.so.2";
  void* handle = dlopen(api.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr)
    return absl::FailedPreconditionError(absl::StrCat(
        "NCCL: cannot load ", api.path, " (", dlerror(),
        "); install libnccl2 or the nvidia-nccl wheel's library, or set GEMMA_NCCL_LIBRARY to its path"));
  if (!Bind(handle, "ncclGetVersion", &api.get_version) || !Bind(handle, "ncclCommInitAll", &api.comm_init_all) ||
      !Bind(handle, "ncclCommDestroy", &api.comm_destroy) || !Bind(handle, "ncclAllReduce", &api.all_reduce) ||
      !Bind(handle, "ncclGetErrorString", &api.get_error_string))
    return absl::FailedPreconditionError(absl::StrCat("NCCL: ", api.path, " lacks an entry point: ", dlerror()));
  if (absl::Status s = api.Check(api.get_version(&api.version), "ncclGetVersion"); !s.ok()) return s;
  // ncclBfloat16 and graph-capturable collectives arrived in 2.10.
  if (api.version < 21000)
    return absl::FailedPreconditionError(
        absl::StrCat("NCCL: ", api.path, " is version ", api.version, "; bf16 all-reduce needs 2.10 or later"));
  return api;
}

}  // namespace

absl::Status NcclApi::Check(int result, const char* what) const {
  if (result == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": NCCL error ", result, " (",
                                          get_error_string ? get_error_string(result) : "?", ")"));
}

absl::StatusOr<const NcclApi*> LoadNccl() {
  static std::once_flag once;
  static absl::StatusOr<NcclApi>* loaded = nullptr;
  std::call_once(once, [] { loaded = new absl::StatusOr<NcclApi>(Open()); });
  if (!loaded->ok()) return loaded->status();
  return &**loaded;
}

}  // namespace gemma::cuda
