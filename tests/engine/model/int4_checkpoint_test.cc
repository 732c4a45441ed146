// compressed-tensors pack-quantized W4A16 checkpoints and the Q4_0 on-grid
// fixture, both written by tests/data/make_fortunes_int4.py from the fortunes
// model:
//   - the on-grid bf16 fixture is what quant::SnapToQ4_0GridBf16 (the C++
//     rule) makes of fortunes, and GGML's quantizer round-trips it exactly;
//   - the group-32 W4A16 fixture loads to exactly the Q4_0 blocks (codes and
//     fp16 scales) that quantizing the on-grid fixture gives, so both
//     dequantize to the same floats;
//   - the group-128 fixture loads as four 32-blocks per group with the
//     group's scale, within half a step of the original weights;
//   - every variant the int4 path does not run is refused by name, and the
//     `ignore` list keeps modules float.
#include "engine/model/int4_checkpoint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "engine/core/backend_options.h"
#include "engine/model/quantization_int4.h"
#include "engine/model/weights.h"
#include "tests/engine/model/test_util.h"

namespace gemma {
namespace {

using ::testing::HasSubstr;
#define EXPECT_ERROR(status, needle) EXPECT_THAT(std::string((status).message()), HasSubstr(needle))

std::string OnGridDir() { return GEMMA_TEST_DATA "/gemma4-fortunes-q4_0"; }
std::string G32Dir() { return GEMMA_TEST_DATA "/gemma4-fortunes-w4a16-g32"; }
std::string G128Dir() { return GEMMA_TEST_DATA "/gemma4-fortunes-w4a16-g128"; }

std::unique_ptr<LoadedModel> MustLoad(const std::string& dir) {
  auto m = LoadModel(dir);
  EXPECT_TRUE(m.ok()) << dir << ": " << m.status();
  return m.ok() ? std::move(*m) : nullptr;
}

// Every linear layer of a layer, float and packed views side by side.
struct Linear {
  std::string name;
  const TensorRef* weight;
  const PackedInt4Ref* packed;
};
std::vector<Linear> Linears(const LayerWeights& w) {
  std::vector<Linear> out = {{"q_proj", &w.q_proj, &w.q_proj_int4},    {"k_proj", &w.k_proj, &w.k_proj_int4},
                             {"o_proj", &w.o_proj, &w.o_proj_int4},    {"gate_proj", &w.gate_proj, &w.gate_proj_int4},
                             {"up_proj", &w.up_proj, &w.up_proj_int4}, {"down_proj", &w.down_proj, &w.down_proj_int4}};
  if (w.v_proj.info != nullptr || w.v_proj_int4.present()) out.push_back({"v_proj", &w.v_proj, &w.v_proj_int4});
  return out;
}

TEST(OnGridFixtureTest, IsTheCxxSnapOfFortunesAndRoundTripsThroughQ4_0) {
  auto grid = MustLoad(OnGridDir());
  auto orig = MustLoad(test::FortunesDir());
  ASSERT_TRUE(grid && orig);
  EXPECT_FALSE(grid->config.int4_checkpoint.has_value());
  int checked = 0;
  for (size_t l = 0; l < grid->weights.layers.size(); ++l) {
    const auto g = Linears(grid->weights.layers[l]), o = Linears(orig->weights.layers[l]);
    for (size_t i = 0; i < g.size(); ++i) {
      SCOPED_TRACE("layer " + std::to_string(l) + " " + g[i].name);
      const int64_t rows = g[i].weight->info->shape[0], cols = g[i].weight->info->shape[1];
      const std::vector<float> w = ToFloatVector(*g[i].weight);
      // The script's snap is the C++ rule's, value for value.
      const std::vector<float> snapped = quant::SnapToQ4_0GridBf16(ToFloatVector(*o[i].weight), rows, cols);
      ASSERT_EQ(snapped, w);
      // GGML's quantizer recovers codes and scales that give back every value.
      auto q = quant::QuantizeQ4_0(w, rows, cols);
      ASSERT_TRUE(q.ok()) << q.status();
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) ASSERT_EQ(q->Value(r, c), double(w[r * cols + c])) << r << "," << c;
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 8 * 6 + 6);  // six layers also have a v_proj (k_eq_v on the global ones)
  // Everything else is fortunes' own bytes.
  EXPECT_EQ(ToFloatVector(grid->weights.embed_tokens), ToFloatVector(orig->weights.embed_tokens));
}

TEST(W4A16FixtureTest, Group32LoadsTheQ4_0BlocksOfTheOnGridFixture) {
  auto ct = MustLoad(G32Dir());
  auto grid = MustLoad(OnGridDir());
  ASSERT_TRUE(ct && grid);
  ASSERT_TRUE(ct->config.int4_checkpoint.has_value());
  EXPECT_EQ(ct->config.int4_checkpoint->group_size, 32);
  EXPECT_TRUE(ct->weights.has_int4);
  for (size_t l = 0; l < ct->weights.layers.size(); ++l) {
    const auto c = Linears(ct->weights.layers[l]), g = Linears(grid->weights.layers[l]);
    ASSERT_EQ(c.size(), g.size());
    for (size_t i = 0; i < c.size(); ++i) {
      SCOPED_TRACE("layer " + std::to_string(l) + " " + c[i].name);
      ASSERT_TRUE(c[i].packed->present());
      EXPECT_EQ(c[i].weight->info, nullptr);
      const int64_t rows = g[i].weight->info->shape[0], cols = g[i].weight->info->shape[1];
      const std::vector<float> w = ToFloatVector(*g[i].weight);
      auto want = quant::QuantizeQ4_0(w, rows, cols);
      auto got = ReadInt4Blocks(*c[i].packed);
      ASSERT_TRUE(want.ok() && got.ok()) << got.status();
      EXPECT_EQ(got->group, 32);
      ASSERT_EQ(got->codes, want->codes);
      ASSERT_EQ(got->scales, want->scales);  // fp16 bits, signs included
      ASSERT_EQ(LinearToFloat(*c[i].weight, *c[i].packed), w);
    }
  }
  EXPECT_EQ(ToFloatVector(ct->weights.embed_tokens), ToFloatVector(grid->weights.embed_tokens));
}

TEST(W4A16FixtureTest, Group128LoadsAsFourBlocksPerGroupWithinHalfAStep) {
  auto ct = MustLoad(G128Dir());
  auto orig = MustLoad(test::FortunesDir());
  ASSERT_TRUE(ct && orig);
  ASSERT_TRUE(ct->config.int4_checkpoint.has_value());
  EXPECT_EQ(ct->config.int4_checkpoint->group_size, 128);
  double err = 0, norm = 0;
  for (size_t l = 0; l < ct->weights.layers.size(); ++l) {
    const auto c = Linears(ct->weights.layers[l]), o = Linears(orig->weights.layers[l]);
    for (size_t i = 0; i < c.size(); ++i) {
      SCOPED_TRACE("layer " + std::to_string(l) + " " + c[i].name);
      auto blocks = ReadInt4Blocks(*c[i].packed);
      ASSERT_TRUE(blocks.ok()) << blocks.status();
      ASSERT_EQ(blocks->group, 32);
      const std::vector<float> w = ToFloatVector(*o[i].weight);
      const std::vector<float> deq = LinearToFloat(*c[i].weight, *c[i].packed);
      const int64_t cols = blocks->cols;
      for (int64_t r = 0; r < blocks->rows; ++r) {
        for (int64_t b = 0; b < cols / 32; ++b) {
          const uint16_t s = blocks->scales[r * (cols / 32) + b];
          ASSERT_EQ(s, blocks->scales[r * (cols / 32) + b / 4 * 4]) << "row " << r << " block " << b;
          // scale = bf16(amax / 7.5): |w - q scale| <= scale / 2, or a little
          // more where +7.5 clamps to 7.
          const double step = std::fabs(HalfToFloat(s));
          for (int64_t k = 32 * b; k < 32 * b + 32; ++k) {
            const size_t at = static_cast<size_t>(r * cols + k);
            ASSERT_EQ(deq[at], blocks->Value(r, k));
            ASSERT_LE(std::fabs(double(deq[at]) - w[at]), 0.53 * step) << r << "," << k;
            err += (double(deq[at]) - w[at]) * (double(deq[at]) - w[at]);
            norm += double(w[at]) * w[at];
          }
        }
      }
    }
  }
  EXPECT_LT(std::sqrt(err / norm), 0.2);
}

// Broken and edge-case W4A16 checkpoints, written from the group-32 fixture.
class W4A16RefusalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    blobs_ = test::ReadBlobs(G32Dir() + "/model.safetensors");
    config_ = test::ReadJson(G32Dir() + "/config.json");
  }
  absl::StatusOr<std::unique_ptr<LoadedModel>> Load() {
    test::WriteModelDir(G32Dir(), dir_.path(), blobs_);
    test::WriteJson(dir_.path() + "/config.json", config_);
    return LoadModel(dir_.path());
  }
  // Replaces module's packed tensors by the on-grid fixture's bf16 weight.
  void MakeFloat(const std::string& module) {
    for (const char* s : {".weight_packed", ".weight_scale", ".weight_shape"}) test::RemoveBlob(blobs_, module + s);
    for (const test::Blob& b : test::ReadBlobs(OnGridDir() + "/model.safetensors")) {
      if (b.name == module + ".weight") blobs_.push_back(b);
    }
  }
  test::TempDir dir_;
  std::vector<test::Blob> blobs_;
  nlohmann::json config_;
};

constexpr char kQ0[] = "model.layers.0.self_attn.q_proj";  // [256, 256]

TEST_F(W4A16RefusalTest, MissingOrMisshapenTensorsAreNamed) {
  test::RemoveBlob(blobs_, std::string(kQ0) + ".weight_scale");
  EXPECT_ERROR(Load().status(), "tensor model.layers.0.self_attn.q_proj.weight_scale is missing");
  SetUp();
  test::FindBlob(blobs_, std::string(kQ0) + ".weight_packed")->shape = {512, 16};
  EXPECT_ERROR(Load().status(), "expected I32 [256, 32], got I32 [512, 16]");
  SetUp();
  test::Blob& scale = *test::FindBlob(blobs_, std::string(kQ0) + ".weight_scale");
  scale.shape = {256, 2};
  scale.bytes.resize(256 * 2 * 2);
  EXPECT_ERROR(Load().status(), "expected BF16, F16 or F32 [256, 8] (group_size 32), got BF16 [256, 2]");
  SetUp();
  test::Blob& shape = *test::FindBlob(blobs_, std::string(kQ0) + ".weight_shape");
  const int64_t wrong[2] = {256, 128};
  std::memcpy(shape.bytes.data(), wrong, 16);
  EXPECT_ERROR(Load().status(), "holds [256, 128], expected [256, 256]");
}

TEST_F(W4A16RefusalTest, OtherVariantsAreRefusedByName) {
  blobs_.push_back({std::string(kQ0) + ".weight_zero_point", "I32", {256, 1}, std::string(256 * 4, '\0')});
  EXPECT_ERROR(Load().status(), "weight_zero_point in");
  EXPECT_ERROR(Load().status(), "asymmetric int4 (zero points) is not supported");
  SetUp();
  blobs_.push_back({std::string(kQ0) + ".weight_g_idx", "I32", {256}, std::string(256 * 4, '\0')});
  EXPECT_ERROR(Load().status(), "activation reordering (g_idx) is not supported");
  SetUp();
  config_["quantization_config"]["config_groups"]["group_0"]["weights"]["symmetric"] = false;
  EXPECT_ERROR(Load().status(), "symmetric = false is not supported");
  SetUp();
  config_["quantization_config"]["config_groups"]["group_0"]["weights"]["group_size"] = 64;
  EXPECT_ERROR(Load().status(), "group_size = 64 is not supported");
  SetUp();
  config_["quantization_config"]["config_groups"]["group_0"]["targets"] = {"re:.*mlp.*"};
  EXPECT_ERROR(Load().status(), "targets = [\"re:.*mlp.*\"] is not supported");
  SetUp();
  config_["quantization_config"]["format"] = "marlin-24";
  EXPECT_ERROR(Load().status(), "format = \"marlin-24\" is not supported");
}

TEST_F(W4A16RefusalTest, ScalesThatAreNotFp16AreRefused) {
  test::Blob& scale = *test::FindBlob(blobs_, std::string(kQ0) + ".weight_scale");
  const uint16_t tiny = FloatToBf16(3.3e-9f);         // far below fp16's subnormals
  std::memcpy(scale.bytes.data() + 2 * 9, &tiny, 2);  // row 1, group 1
  EXPECT_ERROR(Load().status(), "weight_scale[1, 1] = ");
  EXPECT_ERROR(Load().status(), "is not an fp16 value");
}

TEST_F(W4A16RefusalTest, PackedTensorsNeedTheirQuantizationConfig) {
  config_.erase("quantization_config");
  EXPECT_ERROR(Load().status(),
               "model.layers.0.self_attn.q_proj.weight_packed is pack-quantized but config.json has no "
               "compressed-tensors quantization_config");
  SetUp();
  MakeFloat("model.layers.2.mlp.down_proj");  // float, yet not ignored
  EXPECT_ERROR(Load().status(), "tensor model.layers.2.mlp.down_proj.weight_packed is missing");
}

TEST_F(W4A16RefusalTest, IgnoredModulesStayFloatAndFusedMatricesShareOneScheme) {
  config_["quantization_config"]["ignore"] = {"lm_head", "model.layers.0.self_attn.q_proj"};
  EXPECT_ERROR(Load().status(), "the module is in quantization_config.ignore");
  MakeFloat(kQ0);
  EXPECT_ERROR(Load().status(),
               "model.layers.0.self_attn.q_proj is unquantized but model.layers.0.self_attn.k_proj is int4");

  SetUp();
  config_["quantization_config"]["ignore"] = {"lm_head", "re:.*layers\\.0\\.mlp\\..*"};
  for (const char* m : {"gate_proj", "up_proj", "down_proj"}) MakeFloat(std::string("model.layers.0.mlp.") + m);
  auto model = Load();
  ASSERT_TRUE(model.ok()) << model.status();
  const LayerWeights& l0 = (*model)->weights.layers[0];
  EXPECT_FALSE(l0.gate_proj_int4.present());
  ASSERT_NE(l0.gate_proj.info, nullptr);
  EXPECT_TRUE(l0.q_proj_int4.present());
  EXPECT_TRUE((*model)->weights.layers[1].gate_proj_int4.present());
  auto grid = MustLoad(OnGridDir());
  ASSERT_TRUE(grid);
  EXPECT_EQ(LinearToFloat(l0.down_proj, l0.down_proj_int4), ToFloatVector(grid->weights.layers[0].down_proj));
}

TEST(ResolveWeightDTypeTest, AW4A16CheckpointRunsAsInt4AndConflictsAreNamed) {
  EXPECT_EQ(*ResolveWeightDType(std::nullopt, false), WeightDType::kBF16);
  EXPECT_EQ(*ResolveWeightDType(WeightDType::kFP8, false), WeightDType::kFP8);
  EXPECT_EQ(*ResolveWeightDType(std::nullopt, true), WeightDType::kINT4);
  EXPECT_EQ(*ResolveWeightDType(WeightDType::kINT4, true), WeightDType::kINT4);
  for (WeightDType d : {WeightDType::kBF16, WeightDType::kFP8}) {
    const absl::Status s = ResolveWeightDType(d, true).status();
    EXPECT_ERROR(s, "--weights " + std::string(WeightDTypeName(d)));
    EXPECT_ERROR(s, "compressed-tensors pack-quantized W4A16");
  }
}

}  // namespace
}  // namespace gemma
