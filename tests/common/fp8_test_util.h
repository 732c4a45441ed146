// Helpers shared by the FP8 kernel tests: the 31B linear shapes plus odd
// ones, a quantized weight matrix with its host copy, and the host E4M3
// decoder the double references use.
#pragma once

#include <cuda_bf16.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/init/random_init.h"
#include "kernels/quant/fp8_quant.h"
#include "tests/common/gpu_test_util.h"

namespace gemma::fp8_test {

struct Shape {
  int n, k;
};

// 31B: QKV sliding / global, o_proj sliding / global, gate|up, down; odd
// shapes: rows not a multiple of a block, k not a multiple of the 64-k step.
inline const Shape kShapes[] = {{16384, 5376}, {18432, 5376}, {5376, 8192}, {5376, 16384}, {43008, 5376},
                                {5376, 21504}, {1000, 528},   {7, 16},      {33, 272},     {4099, 1040}};

// A quantized weight matrix on the device and its host copy.
struct Fp8Matrix {
  Fp8Matrix(const Shape& s, uint64_t seed) : w8(size_t(s.n) * s.k), ws(s.n) {
    gpu_test::DeviceArray<__nv_bfloat16> w(size_t(s.n) * s.k);
    kernels::RandomFillParams rp;
    rp.out_bf16 = w.get();
    rp.count = int64_t(s.n) * s.k;
    rp.seed = seed;
    rp.stddev = 0.02f;
    EXPECT_EQ(kernels::LaunchRandomFill(rp, nullptr), "");
    EXPECT_EQ(kernels::LaunchQuantizeRowsFp8({w.get(), w8.get(), ws.get(), s.n, s.k}, nullptr), "");
    codes = w8.Download();
    scales = ws.Download();
  }
  gpu_test::DeviceArray<uint8_t> w8;
  gpu_test::DeviceArray<float> ws;
  std::vector<uint8_t> codes;
  std::vector<float> scales;
};

// E4M3 code -> value (the host decoder, tabulated: the reference loops are long).
inline float Decode(uint8_t code) {
  static const std::vector<float> table = [] {
    std::vector<float> t(256);
    for (int c = 0; c < 256; ++c) t[c] = kernels::Fp8E4M3ToFloat(uint8_t(c));
    return t;
  }();
  return table[code];
}

}  // namespace gemma::fp8_test
