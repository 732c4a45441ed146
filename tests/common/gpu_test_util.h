// Helpers for GPU tests: skipping without a device, device arrays, bf16
// conversion and the relative-norm comparison used throughout.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace gemma::gpu_test {

inline bool HaveDevice() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

#define GEMMA_REQUIRE_GPU() \
  if (!::gemma::gpu_test::HaveDevice()) GTEST_SKIP() << "no CUDA device"

#define CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr

// Owns a device array; Upload/Download copy whole vectors.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t n) : n_(n) {
    if (cudaMalloc(&ptr_, n * sizeof(T)) != cudaSuccess) ptr_ = nullptr;
  }
  explicit DeviceArray(const std::vector<T>& v) : DeviceArray(v.size()) { Upload(v); }
  ~DeviceArray() { cudaFree(ptr_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* get() const { return ptr_; }
  void Upload(const std::vector<T>& v) { cudaMemcpy(ptr_, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice); }
  std::vector<T> Download() const {
    std::vector<T> v(n_);
    cudaDeviceSynchronize();
    cudaMemcpy(v.data(), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost);
    return v;
  }
  // Poison with 0xFF bytes (a NaN in bf16 and fp32) to catch unwritten output.
  void Poison() { cudaMemset(ptr_, 0xFF, n_ * sizeof(T)); }

 private:
  T* ptr_ = nullptr;
  size_t n_ = 0;
};

inline float ToF(__nv_bfloat16 v) { return __bfloat162float(v); }
inline __nv_bfloat16 ToB(float v) { return __float2bfloat16(v); }

// Fresh random values every run (seeded from random_device), printed on failure
// through the test's SCOPED_TRACE by callers that want it.
inline std::mt19937& Rng() {
  static std::mt19937 rng(std::random_device{}());
  return rng;
}

inline std::vector<float> RandomFloats(size_t n, float mean = 0.0f, float stddev = 1.0f) {
  std::normal_distribution<float> d(mean, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = d(Rng());
  return v;
}

// Values rounded to bf16 (so the CPU reference sees what the GPU sees).
inline std::vector<__nv_bfloat16> ToBf16(const std::vector<float>& v) {
  std::vector<__nv_bfloat16> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = ToB(v[i]);
  return out;
}
inline std::vector<float> ToFloat(const std::vector<__nv_bfloat16>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = ToF(v[i]);
  return out;
}

// ||out - ref|| / ||ref|| over [begin, begin + n); NaN in out gives +inf.
template <typename A, typename B>
double RelErr(const A& out, const B& ref, size_t begin, size_t n) {
  double num = 0, den = 0;
  for (size_t i = begin; i < begin + n; ++i) {
    const double o = static_cast<double>(out[i]), r = static_cast<double>(ref[i]);
    if (!std::isfinite(o)) return INFINITY;
    num += (o - r) * (o - r);
    den += r * r;
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

// Same over two pointers of n elements each.
template <typename A, typename B>
double RelErrPtr(const A* out, const B* ref, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    const double o = static_cast<double>(out[i]), r = static_cast<double>(ref[i]);
    if (!std::isfinite(o)) return INFINITY;
    num += (o - r) * (o - r);
    den += r * r;
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

}  // namespace gemma::gpu_test
