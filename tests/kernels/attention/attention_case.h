// Test support for the attention kernels: a random problem (queries, a KV
// cache, sequences), its device copy, a float64 host reference and the error
// measure. Inputs are bf16 bit patterns; the reference reads the same bits.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/attention/attention.h"

namespace gemma::kernels::testing {

inline uint16_t FloatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);                       // round to nearest even
  return static_cast<uint16_t>(u >> 16);
}
inline float Bf16ToFloat(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

#define CUDA_OK(expr)                                                        \
  do {                                                                       \
    const cudaError_t err_ = (expr);                                         \
    ASSERT_EQ(err_, cudaSuccess) << #expr << ": " << cudaGetErrorString(err_); \
  } while (0)

inline bool HaveGpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

// Owns one device allocation.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (cudaMalloc(&ptr_, bytes_ == 0 ? 1 : bytes_) != cudaSuccess) ptr_ = nullptr;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  template <typename T>
  T* as() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

struct AttentionCase {
  int head_dim = 0, num_heads = 0, num_kv_heads = 0;
  int window = 0, capacity = 0, num_slots = 1;
  bool ring = false;
  std::vector<int> q_lens, q_pos0, slots;  // per sequence
  float q_range = 0.5f;                    // queries uniform in [-q_range, q_range]
  // Cache rows at positions >= a sequence's length (or outside its window)
  // hold NaN instead of random data: the kernel must never let them matter.
  bool poison_unused_cache = false;
  // K and V rounded to E4M3 values (exact in bf16): the same cache then
  // exists as E4M3 codes (AttentionProblem::Fp8), and an fp8-cache kernel
  // must compute the very bits of the bf16 one.
  bool e4m3_values = false;
  // >= 0: the cache of a k_eq_v layer with this many rotated pairs: K's
  // unrotated dims are bf16(w * V) for a random weight w (with e4m3_values:
  // powers of two, so exact) (AttentionProblem::KeysFromValues).
  int keys_from_values_pairs = -1;
  uint32_t seed = 1;
};

// A decode batch: one query per sequence, the new token at position
// lens[i] - 1 of slot slots[i] (capacity, window, ring left to the caller).
inline AttentionCase DecodeCase(int d, int heads, int kv, std::vector<int> lens, std::vector<int> slots) {
  AttentionCase c{.head_dim = d, .num_heads = heads, .num_kv_heads = kv};
  for (int len : lens) {
    c.q_lens.push_back(1);
    c.q_pos0.push_back(len - 1);
  }
  c.slots = std::move(slots);
  c.num_slots = static_cast<int>(c.slots.size());
  return c;
}

// Host and device copies of one random problem.
class AttentionProblem {
 public:
  explicit AttentionProblem(const AttentionCase& c);

  // Params for the device buffers (out is poisoned with NaN by Poison()).
  AttentionParams Params() const;
  // The same problem through a paged cache: every sequence's keys copied to
  // scrambled blocks of `block_size` in a NaN-filled pool; table entries of
  // blocks wholly before a sequence's first window are -1 (released), as
  // the engine's block manager leaves them. The reference is unchanged.
  AttentionParams PagedParams(int block_size);
  // `p` (Params() or PagedParams()) reading an E4M3 copy of its K / V
  // buffers (kv_fp8). Needs e4m3_values, so that the copy is exact.
  AttentionParams Fp8(const AttentionParams& p);
  // `p` with keys_from_values set (needs keys_from_values_pairs >= 0) and,
  // with poison_unrotated_keys, reading a copy of its K buffer whose
  // unrotated dims are all NaN (what a kernel that reads only K's rotated
  // dims never sees); `p` may be an Fp8() view.
  AttentionParams KeysFromValues(const AttentionParams& p, bool poison_unrotated_keys);
  cudaError_t Poison() const;
  // out as floats; NaN where the kernel did not write.
  std::vector<float> Output() const;
  // float64 reference, [num_tokens, num_heads, head_dim] (keys_from_values_pairs
  // >= 0: keys w * V in the unrotated dims, exactly).
  std::vector<double> Reference() const;
  int num_tokens() const { return offsets_.back(); }

  // Replaces the sequences' positions on the device (same q_lens): for graph
  // replay at another depth.
  cudaError_t SetPositions(const std::vector<int>& q_pos0);

  const AttentionCase& c() const { return c_; }
  // Element offset, in the slot cache of Params() (and its Fp8() copy), of
  // sequence i's row (all KV heads) at its last query position: the row a
  // decode step's QKV-RoPE writes.
  size_t NewestRow(int i) const;

 private:
  size_t CacheIndex(int slot, int idx, int kv_head) const;

  AttentionCase c_;
  std::vector<int> offsets_;
  std::vector<uint16_t> q_, k_, v_;
  DeviceBuffer d_q_, d_out_, d_k_, d_v_, d_slot_, d_offsets_, d_pos0_;
  DeviceBuffer d_paged_k_, d_paged_v_, d_tables_, d_table_offsets_;
  DeviceBuffer d_k8_, d_v8_;
  std::vector<float> kv_weight_;  // keys_from_values_pairs >= 0
  DeviceBuffer d_kv_weight_, d_k_poisoned_;
};

struct ErrorReport {
  double rel_error = 0;      // ||out - ref|| / ||ref||
  long num_not_finite = 0;   // NaN/Inf in out (unwritten or broken)
};
ErrorReport Compare(const std::vector<float>& out, const std::vector<double>& ref);

}  // namespace gemma::kernels::testing
