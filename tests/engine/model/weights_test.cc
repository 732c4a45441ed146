// BindWeights / LoadModel on the fixtures, broken weight sets, and the
// bf16/f16 conversions.
#include "engine/model/weights.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "tests/engine/model/test_util.h"

namespace gemma {
namespace {

using ::testing::HasSubstr;

#define EXPECT_ERROR(status, needle) EXPECT_THAT(std::string((status).message()), HasSubstr(needle))

int64_t SumElements(const ModelWeights& w) {
  int64_t total = w.embed_tokens.info->num_elements() + w.final_norm.info->num_elements();
  for (const LayerWeights& l : w.layers) {
    for (const TensorRef* t :
         {&l.q_proj, &l.k_proj, &l.v_proj, &l.o_proj, &l.q_norm, &l.k_norm, &l.input_layernorm,
          &l.post_attention_layernorm, &l.pre_feedforward_layernorm, &l.post_feedforward_layernorm,
          &l.gate_proj, &l.up_proj, &l.down_proj, &l.layer_scalar}) {
      if (t->info != nullptr) total += t->info->num_elements();
    }
  }
  return total;
}

TEST(LoadModelTest, Fortunes) {
  auto model = LoadModel(test::FortunesDir());
  ASSERT_TRUE(model.ok()) << model.status();
  const ModelWeights& w = (*model)->weights;
  ASSERT_EQ(w.layers.size(), 8u);
  EXPECT_EQ(w.embed_tokens.info->name, "model.embed_tokens.weight");
  EXPECT_EQ(w.layers[3].v_proj.info, nullptr);  // global, k_eq_v
  ASSERT_NE(w.layers[2].v_proj.info, nullptr);
  EXPECT_EQ(w.layers[2].v_proj.info->name, "model.layers.2.self_attn.v_proj.weight");
  EXPECT_EQ(SumElements(w), (*model)->config.num_parameters());
  EXPECT_NEAR((*model)->config.num_parameters() / 1e6, 5.2, 0.05);  // fixtures README
}

TEST(LoadModelTest, TinyRandomSkipsVisionTensors) {
  auto model = LoadModel(test::TinyRandomDir());
  ASSERT_TRUE(model.ok()) << model.status();
  const ModelWeights& w = (*model)->weights;
  ASSERT_EQ(w.layers.size(), 12u);
  EXPECT_EQ(w.final_norm.info->name, "model.language_model.norm.weight");
  EXPECT_EQ(w.layers[5].v_proj.info, nullptr);
  EXPECT_EQ(w.layers[11].v_proj.info, nullptr);
  EXPECT_NE((*model)->checkpoint->Find("model.vision_tower.patch_embedder.input_proj.weight"),
            nullptr);
  EXPECT_EQ(SumElements(w), (*model)->config.num_parameters());
}

// The fortunes checkpoint rewritten with edits, loaded from a temp dir.
class BrokenWeightsTest : public ::testing::Test {
 protected:
  void SetUp() override { blobs_ = test::ReadBlobs(test::FortunesDir() + "/model.safetensors"); }
  absl::Status Load() {
    test::WriteModelDir(test::FortunesDir(), dir_.path(), blobs_);
    return LoadModel(dir_.path()).status();
  }
  test::Blob& Get(const std::string& name) { return *test::FindBlob(blobs_, name); }

  test::TempDir dir_;
  std::vector<test::Blob> blobs_;
};

TEST_F(BrokenWeightsTest, RoundTripLoads) { EXPECT_TRUE(Load().ok()); }

TEST_F(BrokenWeightsTest, WrongShape) {
  Get("model.layers.3.self_attn.q_proj.weight").shape = {256, 512};
  auto status = Load();
  EXPECT_ERROR(status, "tensor model.layers.3.self_attn.q_proj.weight in " + dir_.path() +
                           "/model.safetensors: expected shape [512, 256], got [256, 512]");
}

TEST_F(BrokenWeightsTest, WrongRank) {
  Get("model.layers.0.layer_scalar").shape = {};
  EXPECT_ERROR(Load(), "model.layers.0.layer_scalar in");
  EXPECT_ERROR(Load(), "expected shape [1], got []");
}

TEST_F(BrokenWeightsTest, MissingWeight) {
  test::RemoveBlob(blobs_, "model.layers.6.mlp.up_proj.weight");
  auto status = Load();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_ERROR(status,
               "tensor model.layers.6.mlp.up_proj.weight is missing from the checkpoint "
               "(expected shape [512, 256])");
}

TEST_F(BrokenWeightsTest, MissingEmbedding) {
  test::RemoveBlob(blobs_, "model.embed_tokens.weight");
  EXPECT_ERROR(Load(), "tensor model.embed_tokens.weight is missing");
}

TEST_F(BrokenWeightsTest, NonFloatDType) {
  test::Blob& scalar = Get("model.layers.1.layer_scalar");
  scalar.dtype = "I32";
  scalar.bytes = std::string(4, '\0');
  EXPECT_ERROR(Load(), "tensor model.layers.1.layer_scalar in " + dir_.path() +
                           "/model.safetensors: dtype I32, expected BF16, F16 or F32");
}

TEST_F(BrokenWeightsTest, VProjOnKEqVLayerIsUnexpected) {
  test::Blob v = Get("model.layers.2.self_attn.v_proj.weight");
  v.name = "model.layers.3.self_attn.v_proj.weight";
  blobs_.push_back(v);
  EXPECT_ERROR(Load(), "unexpected tensor model.layers.3.self_attn.v_proj.weight in");
}

TEST_F(BrokenWeightsTest, UntiedLmHeadIsUnexpected) {
  test::Blob head = Get("model.embed_tokens.weight");
  head.name = "lm_head.weight";
  blobs_.push_back(head);
  EXPECT_ERROR(Load(), "unexpected tensor lm_head.weight");
}

TEST_F(BrokenWeightsTest, ExtraLayerIsUnexpected) {
  test::Blob extra = Get("model.layers.0.input_layernorm.weight");
  extra.name = "model.layers.8.input_layernorm.weight";
  blobs_.push_back(extra);
  EXPECT_ERROR(Load(), "unexpected tensor model.layers.8.input_layernorm.weight");
}

TEST_F(BrokenWeightsTest, VisionTensorsAreSkipped) {
  blobs_.push_back({"model.vision_tower.x.weight", "U8", {3}, "abc"});
  blobs_.push_back({"model.embed_vision.y.weight", "F64", {1}, std::string(8, '\0')});
  EXPECT_TRUE(Load().ok());
}

TEST_F(BrokenWeightsTest, ConfigHiddenSizeDisagreesWithWeights) {
  test::WriteModelDir(test::FortunesDir(), dir_.path(), blobs_);
  nlohmann::json config = test::ReadJson(dir_.File("config.json"));
  config["intermediate_size"] = 1024;
  test::WriteJson(dir_.File("config.json"), config);
  EXPECT_ERROR(LoadModel(dir_.path()).status(),
               "model.layers.0.mlp.gate_proj.weight in " + dir_.path() +
                   "/model.safetensors: expected shape [1024, 256], got [512, 256]");
}

TEST_F(BrokenWeightsTest, F32AndF16WeightsConvert) {
  test::Blob& norm = Get("model.norm.weight");
  test::Blob& scalar = Get("model.layers.0.layer_scalar");
  std::vector<float> norm_ref, scalar_ref;
  std::string f32, f16;
  for (size_t k = 0; k < norm.bytes.size(); k += 2) {
    uint16_t bits;
    std::memcpy(&bits, norm.bytes.data() + k, 2);
    const float v = Bf16ToFloat(bits);
    norm_ref.push_back(v);
    f32.append(reinterpret_cast<const char*>(&v), 4);
  }
  norm.dtype = "F32";
  norm.bytes = f32;
  const uint16_t half_three = 0x4200;  // 3.0 in IEEE half
  scalar.dtype = "F16";
  scalar.bytes = std::string(reinterpret_cast<const char*>(&half_three), 2);
  ASSERT_TRUE(Load().ok());
  auto model = LoadModel(dir_.path());
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(ToFloatVector((*model)->weights.final_norm), norm_ref);
  EXPECT_EQ(ToFloatVector((*model)->weights.layers[0].layer_scalar), std::vector<float>{3.0f});
}

TEST(ConvertTest, Bf16MatchesManualDecode) {
  auto model = LoadModel(test::FortunesDir());
  ASSERT_TRUE(model.ok()) << model.status();
  const TensorRef& embed = (*model)->weights.embed_tokens;
  std::vector<float> values = ToFloatVector(embed);
  ASSERT_EQ(values.size(), 1024u * 256u);
  for (size_t k : {size_t{0}, size_t{1}, size_t{777}, values.size() - 1}) {
    uint16_t bits;
    std::memcpy(&bits, embed.data() + 2 * k, 2);
    uint32_t wide = uint32_t{bits} << 16;
    float expected;
    std::memcpy(&expected, &wide, 4);
    EXPECT_EQ(values[k], expected) << k;
  }
}

TEST(ConvertTest, Bf16Conversions) {
  EXPECT_EQ(Bf16ToFloat(0x3F80), 1.0f);
  EXPECT_EQ(Bf16ToFloat(0xC000), -2.0f);
  EXPECT_EQ(FloatToBf16(1.0f), 0x3F80);
  EXPECT_EQ(FloatToBf16(73.32f), 0x4293);  // sqrt(5376) rounds to 73.5 in bf16
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(std::sqrt(5376.0f))), 73.5f);
  // Ties round to even: 1 + 2^-8 is halfway between 1 and 1 + 2^-7.
  EXPECT_EQ(FloatToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);
  EXPECT_EQ(FloatToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);
  EXPECT_EQ(FloatToBf16(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(FloatToBf16(std::numeric_limits<float>::max()), 0x7F80);  // overflows to inf
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(std::numeric_limits<float>::quiet_NaN()))));
  // A NaN whose payload lives only in the low bits must stay NaN, not become inf.
  uint32_t low_nan_bits = 0x7F800001;
  float low_nan;
  std::memcpy(&low_nan, &low_nan_bits, 4);
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(low_nan))));
}

TEST(ConvertTest, HalfConversions) {
  EXPECT_EQ(HalfToFloat(0x3C00), 1.0f);
  EXPECT_EQ(HalfToFloat(0xC000), -2.0f);
  EXPECT_EQ(HalfToFloat(0x7BFF), 65504.0f);
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(HalfToFloat(0x03FF), std::ldexp(1023.0f, -24));
  EXPECT_EQ(HalfToFloat(0x0400), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_TRUE(std::signbit(HalfToFloat(0x8000)));
  EXPECT_EQ(HalfToFloat(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(HalfToFloat(0xFC00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7E00)));
}

}  // namespace
}  // namespace gemma
