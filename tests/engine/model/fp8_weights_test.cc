// FP8 checkpoints: linear weights stored as F8_E4M3 with a
// per-output-channel `weight_scale` (llm-compressor FP8 / FP8_DYNAMIC,
// compressed-tensors; vLLM quant_method "fp8"). The fortunes checkpoint is
// rewritten with one FP8 matrix and broken scales; errors name the tensor,
// the file and the expected shape or dtype. Also the --weights parser.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "engine/core/backend_options.h"
#include "engine/model/weights.h"
#include "tests/engine/model/test_util.h"

namespace gemma {
namespace {

using ::testing::HasSubstr;
#define EXPECT_ERROR(status, needle) EXPECT_THAT(std::string((status).message()), HasSubstr(needle))

constexpr char kQ[] = "model.layers.3.self_attn.q_proj.weight";  // [512, 256] in fortunes

class Fp8WeightsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    blobs_ = test::ReadBlobs(test::FortunesDir() + "/model.safetensors");
    test::Blob& q = *test::FindBlob(blobs_, kQ);
    q.dtype = "F8_E4M3";
    q.bytes = std::string(q.bytes.size() / 2, '\x38');  // 1.0 in E4M3
  }
  void AddScale(std::string dtype, std::vector<int64_t> shape, size_t elem_bytes) {
    size_t n = 1;
    for (int64_t d : shape) n *= d;
    blobs_.push_back({std::string(kQ) + "_scale", std::move(dtype), std::move(shape), std::string(n * elem_bytes, '\0')});
  }
  absl::StatusOr<std::unique_ptr<LoadedModel>> Load() {
    test::WriteModelDir(test::FortunesDir(), dir_.path(), blobs_);
    return LoadModel(dir_.path());
  }
  std::string File() const { return dir_.path() + "/model.safetensors"; }

  test::TempDir dir_;
  std::vector<test::Blob> blobs_;
};

TEST_F(Fp8WeightsTest, PerChannelScaleLoads) {
  AddScale("F32", {512, 1}, 4);
  auto model = Load();
  ASSERT_TRUE(model.ok()) << model.status();
  const ModelWeights& w = (*model)->weights;
  EXPECT_TRUE(w.has_fp8);
  EXPECT_EQ(w.layers[3].q_proj.info->dtype, DType::kF8E4M3);
  ASSERT_NE(w.layers[3].q_proj_scale.info, nullptr);
  EXPECT_EQ(w.layers[3].q_proj_scale.info->shape, (std::vector<int64_t>{512, 1}));
  EXPECT_EQ(w.layers[3].k_proj_scale.info, nullptr);  // still bf16
}

TEST_F(Fp8WeightsTest, FlatPerTensorAndBf16ScalesLoad) {
  for (auto shape : {std::vector<int64_t>{512}, std::vector<int64_t>{}, std::vector<int64_t>{1}}) {
    SetUp();
    AddScale("BF16", shape, 2);
    auto model = Load();
    EXPECT_TRUE(model.ok()) << model.status();
  }
}

TEST_F(Fp8WeightsTest, StaticInputScaleIsAcceptedAndIgnored) {
  AddScale("F32", {512, 1}, 4);
  blobs_.push_back({"model.layers.3.self_attn.q_proj.input_scale", "F32", {1}, std::string(4, '\0')});
  EXPECT_TRUE(Load().ok());
}

TEST_F(Fp8WeightsTest, MissingScale) {
  auto status = Load().status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_ERROR(status, std::string("tensor ") + kQ + " is FP8 (F8_E4M3) but its scale " + kQ +
                           "_scale is missing (expected shape [512, 1] (per output channel) or [] (per tensor))");
}

TEST_F(Fp8WeightsTest, ScaleWrongShape) {
  AddScale("F32", {256, 1}, 4);
  EXPECT_ERROR(Load().status(), std::string("tensor ") + kQ + "_scale in " + File() +
                                    ": expected shape [512, 1] (per output channel) or [] (per tensor), got [256, 1]");
}

TEST_F(Fp8WeightsTest, ScaleWrongRank) {
  AddScale("F32", {512, 1, 1}, 4);
  EXPECT_ERROR(Load().status(), "got [512, 1, 1]");
}

TEST_F(Fp8WeightsTest, ScaleWrongDType) {
  AddScale("I32", {512, 1}, 4);
  EXPECT_ERROR(Load().status(), std::string("tensor ") + kQ + "_scale in " + File() +
                                    ": dtype I32, expected F32, BF16 or F16");
}

TEST_F(Fp8WeightsTest, Fp8ScaleIsNotAFloatScale) {
  AddScale("F8_E4M3", {512, 1}, 1);
  EXPECT_ERROR(Load().status(), "dtype F8_E4M3, expected F32, BF16 or F16");
}

TEST_F(Fp8WeightsTest, ScaleOfABf16WeightIsUnexpected) {
  AddScale("F32", {512, 1}, 4);
  blobs_.push_back({"model.layers.3.self_attn.k_proj.weight_scale", "F32", {256, 1}, std::string(1024, '\0')});
  EXPECT_ERROR(Load().status(), "unexpected tensor model.layers.3.self_attn.k_proj.weight_scale");
}

TEST_F(Fp8WeightsTest, Fp8NormIsRejected) {
  AddScale("F32", {512, 1}, 4);
  test::Blob& norm = *test::FindBlob(blobs_, "model.norm.weight");
  norm.dtype = "F8_E4M3";
  norm.bytes.resize(norm.bytes.size() / 2);
  EXPECT_ERROR(Load().status(), "tensor model.norm.weight in " + File() +
                                    ": dtype F8_E4M3, expected BF16, F16 or F32");
}

TEST(WeightDTypeFlagTest, ParsesAndNamesBadValues) {
  EXPECT_EQ(*ParseWeightDType("--weights", "bf16"), WeightDType::kBF16);
  EXPECT_EQ(*ParseWeightDType("--weights", "fp8"), WeightDType::kFP8);
  EXPECT_EQ(*ParseWeightDType("--weights", "int4"), WeightDType::kINT4);
  EXPECT_ERROR(ParseWeightDType("--weights", "fp16").status(), "--weights must be bf16, fp8 or int4, got 'fp16'");
  EXPECT_EQ(WeightDTypeName(WeightDType::kFP8), "fp8");
  EXPECT_EQ(WeightDTypeName(WeightDType::kINT4), "int4");
}

TEST(KvCacheDTypeFlagTest, ParsesVllmNamesAndNamesBadValues) {
  EXPECT_EQ(*ParseKvCacheDType("--kv-cache-dtype", "auto"), KvCacheDType::kBF16);
  EXPECT_EQ(*ParseKvCacheDType("--kv-cache-dtype", "bf16"), KvCacheDType::kBF16);
  EXPECT_EQ(*ParseKvCacheDType("--kv-cache-dtype", "fp8"), KvCacheDType::kFP8);
  EXPECT_EQ(*ParseKvCacheDType("--kv-cache-dtype", "fp8_e4m3"), KvCacheDType::kFP8);
  EXPECT_ERROR(ParseKvCacheDType("--kv-cache-dtype", "fp8_e5m2").status(),
               "--kv-cache-dtype must be auto, bf16, fp8 or fp8_e4m3, got 'fp8_e5m2'");
  EXPECT_EQ(KvCacheDTypeName(KvCacheDType::kFP8), "fp8");
}

}  // namespace
}  // namespace gemma
