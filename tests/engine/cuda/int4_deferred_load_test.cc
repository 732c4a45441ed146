// The deferred int4 load (DeviceWeights::Upload / Random with
// defer_int4_linears): the layer matrices get no bf16 place at load and are
// read or drawn one at a time as QuantizeLinearsInt4 quantizes them. The
// result must be the load that held every matrix in bf16 first, bit for bit:
// the tiled codes and scales, the fp8 copies and their row scales, the
// embedding and the norms; from the random init, from the fortunes
// checkpoint, and from the compressed-tensors W4A16 fixtures (whose ignored
// module stays bf16 in both). And it needs less device memory.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "engine/cuda/device_weights.h"
#include "engine/model/weights.h"
#include "kernels/quant/w4_layout.h"
#include "tests/common/gpu_test_util.h"

namespace gemma {
namespace {

std::string ModelsDir() {
  const char* v = std::getenv("GEMMA_MODELS_DIR");
  return std::string(v && *v ? v : GEMMA_MODELS_DIR);
}
std::string DataDir() {
  const char* v = std::getenv("GEMMA_TEST_DATA");
  return std::string(v && *v ? v : GEMMA_TEST_DATA);
}

template <typename T>
std::vector<uint8_t> Bytes(const T* p, int64_t bytes) {
  std::vector<uint8_t> out(static_cast<size_t>(bytes));
  if (bytes > 0) {
    EXPECT_EQ(cudaMemcpy(out.data(), p, out.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  }
  return out;
}

// Every byte the forward reads of a layer matrix.
void ExpectSameMatrix(const cuda::DeviceMatrix& a, const cuda::DeviceMatrix& b, int64_t n, int k,
                      const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_EQ(a.int4(), b.int4());
  if (!a.int4()) {  // a bf16 matrix (a W4A16 checkpoint's ignored module)
    EXPECT_EQ(Bytes(a.bf16(), n * k * 2), Bytes(b.bf16(), n * k * 2));
    return;
  }
  EXPECT_EQ(a.w4_paired, b.w4_paired);
  EXPECT_EQ(Bytes(a.data, kernels::W4TiledCodeBytes(n, k)), Bytes(b.data, kernels::W4TiledCodeBytes(n, k)));
  EXPECT_EQ(Bytes(a.w4_scales, kernels::W4TiledScaleBytes(n, k)),
            Bytes(b.w4_scales, kernels::W4TiledScaleBytes(n, k)));
  ASSERT_EQ(a.w4_fp8 != nullptr, b.w4_fp8 != nullptr);
  if (a.w4_fp8 != nullptr) {
    EXPECT_EQ(Bytes(a.w4_fp8, n * k), Bytes(b.w4_fp8, n * k));
    EXPECT_EQ(Bytes(a.w4_fp8_scale, n * 4), Bytes(b.w4_fp8_scale, n * 4));
  }
}

void ExpectSameWeights(const ModelConfig& c, const cuda::DeviceWeights& a, const cuda::DeviceWeights& b) {
  EXPECT_EQ(Bytes(a.embed(), int64_t{c.vocab_size} * c.hidden_size * 2),
            Bytes(b.embed(), int64_t{c.vocab_size} * c.hidden_size * 2));
  EXPECT_EQ(Bytes(a.final_norm(), c.hidden_size * 4), Bytes(b.final_norm(), c.hidden_size * 4));
  for (int l = 0; l < c.num_layers; ++l) {
    const cuda::DeviceLayer &x = a.layers()[l], &y = b.layers()[l];
    const int h = c.hidden_size, inter = c.intermediate_size, q_width = c.num_heads * c.layers[l].head_dim;
    const std::string at = "layer " + std::to_string(l);
    ASSERT_EQ(x.qkv_rows, y.qkv_rows);
    ExpectSameMatrix(x.qkv, y.qkv, x.qkv_rows, h, at + " qkv");
    ExpectSameMatrix(x.o_proj, y.o_proj, h, q_width, at + " o_proj");
    ExpectSameMatrix(x.gate_up, y.gate_up, 2 * int64_t{inter}, h, at + " gate_up");
    ExpectSameMatrix(x.down_proj, y.down_proj, h, inter, at + " down_proj");
    EXPECT_EQ(Bytes(x.input_norm, h * 4), Bytes(y.input_norm, h * 4)) << at;
    EXPECT_EQ(Bytes(x.layer_scalar, 4), Bytes(y.layer_scalar, 4)) << at;
  }
}

size_t FreeDeviceBytes() {
  size_t free = 0, total = 0;
  EXPECT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
  return free;
}

// Loads `model` (or random weights of `config` when null) twice, deferred
// and bf16 first, quantized with `copy`, and compares them.
void CheckDeferredLoad(const ModelConfig& config, const LoadedModel* model, cuda::Int4Copy copy) {
  cudaStream_t stream = nullptr;
  auto load = [&](bool defer) {
    return model ? cuda::DeviceWeights::Upload(config, model->weights, stream, WeightDType::kINT4, defer)
                 : cuda::DeviceWeights::Random(config, 7, stream, WeightDType::kINT4, defer);
  };
  const size_t before = FreeDeviceBytes();
  auto first = load(false);
  ASSERT_TRUE(first.ok()) << first.status();
  const size_t loaded_first = before - FreeDeviceBytes();
  ASSERT_TRUE((*first)->QuantizeLinearsInt4(config, model ? &model->weights : nullptr, copy, true, stream).ok());
  const size_t mid = FreeDeviceBytes();
  auto deferred = load(true);
  ASSERT_TRUE(deferred.ok()) << deferred.status();
  const size_t loaded_deferred = mid - FreeDeviceBytes();
  const auto status = (*deferred)->QuantizeLinearsInt4(config, model ? &model->weights : nullptr, copy, true, stream);
  ASSERT_TRUE(status.ok()) << status;
  // The deferred load holds no bf16 layer matrices before quantizing.
  EXPECT_LT(loaded_deferred, loaded_first) << "deferred " << loaded_deferred << " bytes, bf16 first " << loaded_first;
  ExpectSameWeights(config, **first, **deferred);
}

TEST(Int4DeferredLoad, RandomWeightsSameAsBf16First) {
  GEMMA_REQUIRE_GPU();
  auto model = LoadModel(ModelsDir() + "/gemma4-fortunes");
  ASSERT_TRUE(model.ok()) << model.status();
  for (cuda::Int4Copy copy : {cuda::Int4Copy::kFp8, cuda::Int4Copy::kNone}) {
    SCOPED_TRACE(copy == cuda::Int4Copy::kFp8 ? "fp8 copy" : "no copy");
    CheckDeferredLoad((*model)->config, nullptr, copy);
  }
}

TEST(Int4DeferredLoad, CheckpointSameAsBf16First) {
  GEMMA_REQUIRE_GPU();
  for (const std::string& dir : {ModelsDir() + "/gemma4-fortunes", DataDir() + "/gemma4-fortunes-w4a16-g32",
                                DataDir() + "/gemma4-fortunes-w4a16-g128"}) {
    SCOPED_TRACE(dir);
    auto model = LoadModel(dir);
    ASSERT_TRUE(model.ok()) << model.status();
    CheckDeferredLoad((*model)->config, model->get(), cuda::Int4Copy::kFp8);
  }
}

TEST(Int4DeferredLoad, RefusesABf16CopyOfDeferredMatrices) {
  GEMMA_REQUIRE_GPU();
  auto model = LoadModel(ModelsDir() + "/gemma4-fortunes");
  ASSERT_TRUE(model.ok()) << model.status();
  auto w = cuda::DeviceWeights::Random((*model)->config, 7, nullptr, WeightDType::kINT4, true);
  ASSERT_TRUE(w.ok()) << w.status();
  const auto status = (*w)->QuantizeLinearsInt4((*model)->config, nullptr, cuda::Int4Copy::kBf16, true, nullptr);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("bf16 copy"), std::string::npos) << status;
}

}  // namespace
}  // namespace gemma
