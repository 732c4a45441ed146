// 4-bit weights on the host: GGML Q4_0 numerics (worked by hand from the
// rule), the round trip of on-grid weights (random and the fortunes model's),
// compressed-tensors pack-quantized words and config refusals, and the device
// layout the W4A16 kernels read.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include "engine/model/quantization_config.h"
#include "engine/model/quantization_int4.h"
#include "engine/model/weights.h"
#include "tests/engine/model/test_util.h"

namespace gemma::quant {
namespace {

using ::testing::HasSubstr;

std::vector<float> Random(size_t n, uint32_t seed, float stddev = 0.02f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

TEST(FloatToHalfTest, EveryFiniteHalfRoundTrips) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    if ((bits & 0x7C00) == 0x7C00) continue;  // inf / NaN
    ASSERT_EQ(FloatToHalf(HalfToFloat(static_cast<uint16_t>(bits))), bits) << bits;
  }
}

TEST(FloatToHalfTest, RoundsToNearestEven) {
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3C00);                          // tie -> even
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);                      // tie -> even (up)
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3C01);  // above the tie
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);                                 // smallest subnormal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);                                 // its half: even (zero)
  EXPECT_EQ(FloatToHalf(70000.0f), 0x7C00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xC000);
}

TEST(Q4_0Test, BlockFollowsTheRule) {
  // Largest magnitude 4.0 (positive): d = 4 / -8 = -0.5, x * (1/d) = -2x.
  float x[32] = {};
  x[0] = 4.0f;    // -8 + 8.5 -> 0
  x[1] = -4.0f;   // 8 + 8.5 = 16.5 -> 16, clamped to 15
  x[2] = 1.0f;    // -2 + 8.5 -> 6
  x[3] = 0.75f;   // -1.5 + 8.5 = 7 -> 7
  x[4] = -0.3f;   // 0.6 + 8.5 = 9.1 -> 9
  uint8_t codes[32];
  uint16_t d;
  QuantizeQ4_0Block(x, codes, &d);
  EXPECT_EQ(HalfToFloat(d), -0.5f);
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(codes[1], 15);
  EXPECT_EQ(codes[2], 6);
  EXPECT_EQ(codes[3], 7);
  EXPECT_EQ(codes[4], 9);
  EXPECT_EQ(codes[5], 8);  // zero
  // A negative extreme gives a positive scale.
  x[1] = -5.0f;
  QuantizeQ4_0Block(x, codes, &d);
  EXPECT_EQ(HalfToFloat(d), 0.625f);
  EXPECT_EQ(codes[1], 0);
  // All zeros: d = 0 and every code 8.
  float zeros[32] = {};
  QuantizeQ4_0Block(zeros, codes, &d);
  EXPECT_EQ(HalfToFloat(d), 0.0f);  // -0 (m / -8 with m = 0), as GGML stores it
  for (uint8_t c : codes) EXPECT_EQ(c, 8);
}

void ExpectRoundTripExact(const std::vector<float>& w, int64_t rows, int64_t cols) {
  const std::vector<float> snapped = SnapToQ4_0Grid(w, rows, cols);
  ASSERT_EQ(snapped.size(), w.size());
  auto a = QuantizeQ4_0(snapped, rows, cols);
  ASSERT_TRUE(a.ok()) << a.status();
  const std::vector<float> again = SnapToQ4_0Grid(snapped, rows, cols);
  auto b = QuantizeQ4_0(again, rows, cols);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a->codes, b->codes);
  EXPECT_EQ(a->scales, b->scales);
  EXPECT_EQ(std::memcmp(snapped.data(), again.data(), w.size() * sizeof(float)), 0);
  // On-grid values quantize to themselves, and the grid is close to the original.
  double err = 0, norm = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const size_t i = static_cast<size_t>(r * cols + c);
      ASSERT_EQ(a->Value(r, c), double(snapped[i])) << r << "," << c;
      err += (double(snapped[i]) - w[i]) * (double(snapped[i]) - w[i]);
      norm += double(w[i]) * w[i];
    }
  }
  EXPECT_LT(std::sqrt(err / norm), 0.2);  // 4 bits: ~0.1 relative for Gaussian weights
}

TEST(Q4_0Test, OnGridWeightsRoundTripExactly) {
  ExpectRoundTripExact(Random(37 * 256, 1), 37, 256);
  ExpectRoundTripExact(Random(5 * 96, 2, 30.0f), 5, 96);
}

TEST(Q4_0Test, FortunesWeightsRoundTripExactly) {
  const std::vector<test::Blob> blobs = test::ReadBlobs(test::FortunesDir() + "/model.safetensors");
  int checked = 0;
  for (const test::Blob& b : blobs) {
    if (b.shape.size() != 2 || b.name.find("proj") == std::string::npos) continue;
    ASSERT_EQ(b.dtype, "BF16") << b.name;
    std::vector<float> w(b.bytes.size() / 2);
    for (size_t i = 0; i < w.size(); ++i) {
      uint16_t bits;
      std::memcpy(&bits, b.bytes.data() + 2 * i, 2);
      w[i] = Bf16ToFloat(bits);
    }
    SCOPED_TRACE(b.name);
    ExpectRoundTripExact(w, b.shape[0], b.shape[1]);
    ++checked;
  }
  EXPECT_GE(checked, 8 * 6);
}

TEST(Q4_0Test, Bf16GridSurvivesABf16Cast) {
  const int64_t rows = 19, cols = 320;
  const std::vector<float> w = Random(rows * cols, 5);
  const std::vector<float> snapped = SnapToQ4_0GridBf16(w, rows, cols);
  ASSERT_EQ(snapped.size(), w.size());
  std::vector<float> cast(w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    cast[i] = Bf16ToFloat(FloatToBf16(snapped[i]));
    ASSERT_EQ(cast[i], snapped[i]) << i;  // every value is a bf16 value
  }
  auto q = QuantizeQ4_0(cast, rows, cols);
  ASSERT_TRUE(q.ok());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) ASSERT_EQ(q->Value(r, c), double(snapped[r * cols + c])) << r << "," << c;
  }
  ExpectRoundTripExact(snapped, rows, cols);
}

TEST(Q4_0Test, RefusesBadInput) {
  std::vector<float> w(2 * 48, 0.1f);
  EXPECT_THAT(std::string(QuantizeQ4_0(w, 2, 48).status().message()), HasSubstr("multiple of 32"));
  std::vector<float> v(64, 0.1f);
  v[40] = std::nanf("");
  EXPECT_THAT(std::string(QuantizeQ4_0(v, 1, 64).status().message()), HasSubstr("column 40"));
}

TEST(PackQuantizedTest, WordsFollowThePublishedLayout) {
  // Values [1, 2, -8, 7, 0, 0, 0, 0] stored as q + 8: 9, 10, 0, 15, 8, 8, 8, 8, element i at bits 4i.
  const uint32_t word = 9u | 10u << 4 | 0u << 8 | 15u << 12 | 8u << 16 | 8u << 20 | 8u << 24 | 8u << 28;
  std::vector<int32_t> packed(4, static_cast<int32_t>(0x88888888u));
  packed[0] = static_cast<int32_t>(word);
  std::vector<float> scales = {0.5f};
  auto m = UnpackPackQuantized(packed, scales, 1, 32, 32);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->Value(0, 0), 0.5);
  EXPECT_EQ(m->Value(0, 1), 1.0);
  EXPECT_EQ(m->Value(0, 2), -4.0);
  EXPECT_EQ(m->Value(0, 3), 3.5);
  EXPECT_EQ(m->Value(0, 31), 0.0);
  EXPECT_EQ(PackQuantizedWords(*m), packed);
}

TEST(PackQuantizedTest, RefusesBadShapesAndScalesThatAreNotFp16) {
  std::vector<int32_t> packed(2 * 32, static_cast<int32_t>(0x88888888u));
  std::vector<float> scales(2 * 2, 0.5f);
  EXPECT_THAT(std::string(UnpackPackQuantized(packed, scales, 2, 256, 64).status().message()),
              HasSubstr("group_size 64"));
  EXPECT_THAT(std::string(UnpackPackQuantized(packed, scales, 2, 256, 32).status().message()),
              HasSubstr("weight_scale has 4 values, expected [2, 8]"));
  std::vector<int32_t> short_packed(10, 0);
  EXPECT_THAT(std::string(UnpackPackQuantized(short_packed, scales, 2, 256, 128).status().message()),
              HasSubstr("weight_packed has 10 words"));
  scales[3] = -0.375f;  // signed scales are the format's q * scale: kept
  ASSERT_TRUE(UnpackPackQuantized(packed, scales, 2, 256, 128).ok());
  scales[1] = 1e-9f;  // below fp16's subnormals: the kernels' fp16 scale would change the weights
  EXPECT_THAT(std::string(UnpackPackQuantized(packed, scales, 2, 256, 128).status().message()),
              HasSubstr("weight_scale[0, 1] = 1e-09 is not an fp16 value"));
  scales[1] = 0.5f + std::ldexp(1.0f, -13);  // needs 12 significant bits
  EXPECT_THAT(std::string(UnpackPackQuantized(packed, scales, 2, 256, 128).status().message()),
              HasSubstr("weight_scale[0, 1]"));
  scales[1] = 0.5f;
  scales[2] = std::nanf("");
  EXPECT_THAT(std::string(UnpackPackQuantized(packed, scales, 2, 256, 128).status().message()),
              HasSubstr("weight_scale[1, 0] = nan is not finite"));
}

TEST(PackQuantizedTest, Group128BecomesFourQ4_0BlocksWithItsScale) {
  Int4Matrix m;
  m.rows = 2;
  m.cols = 160;  // one whole group of 128 and a partial one of 32
  m.group = 128;
  std::mt19937 rng(7);
  m.codes.resize(m.rows * m.cols);
  for (uint8_t& c : m.codes) c = rng() % 16;
  m.scales = {FloatToHalf(0.25f), FloatToHalf(-0.125f), FloatToHalf(3.0f), FloatToHalf(0.0f)};
  const Int4Matrix b = ToQ4_0Blocks(m);
  ASSERT_EQ(b.group, 32);
  ASSERT_EQ(b.scales.size(), size_t(2 * 5));
  EXPECT_EQ(b.codes, m.codes);
  for (int64_t r = 0; r < m.rows; ++r) {
    for (int64_t c = 0; c < m.cols; ++c) ASSERT_EQ(b.Value(r, c), m.Value(r, c)) << r << "," << c;
  }
  EXPECT_EQ(b.scales[4], m.scales[1]);  // the partial group's one block
  EXPECT_EQ(b.scales[5], m.scales[2]);
}

TEST(DeviceLayoutTest, EveryCodeAndScaleIsWhereTheKernelsReadIt) {
  for (int group : {32, 128}) {
    Int4Matrix m;
    m.rows = 3;
    m.cols = 160;  // not a multiple of 128: one padded super-chunk
    m.group = group;
    std::mt19937 rng(group);
    m.codes.resize(m.rows * m.cols);
    for (uint8_t& c : m.codes) c = rng() % 16;
    m.scales.resize(m.rows * m.groups_per_row());
    for (uint16_t& s : m.scales) s = FloatToHalf(0.001f * (1 + rng() % 100));
    const W4DeviceMatrix d = PackForDevice(m);
    ASSERT_EQ(d.kpad, 256);
    ASSERT_EQ(d.packed.size(), size_t(3 * 128));
    ASSERT_EQ(d.scales.size(), size_t(3 * 256 / group));
    for (int64_t r = 0; r < m.rows; ++r) {
      for (int64_t c = 0; c < d.kpad; ++c) {
        const int64_t g = c / 32, t = (c % 32) / 8, e = c % 8;
        uint32_t word;
        std::memcpy(&word, d.packed.data() + r * 128 + W4WordOffset(g, static_cast<int>(t)), 4);
        // The kernel's extraction: pair p = (word >> 4p) & 0x000f000f, low half element 2p.
        const uint32_t pair = (word >> (4 * (e / 2))) & 0x000f000fu;
        const uint32_t code = e % 2 == 0 ? pair & 0xF : pair >> 16;
        const uint32_t want = c < m.cols ? m.codes[r * m.cols + c] : 8;
        ASSERT_EQ(code, want) << "group " << group << " row " << r << " col " << c;
        const uint16_t s = d.scales[r * (d.kpad / group) + c / group];
        const uint16_t want_s = c / group < m.groups_per_row() ? m.scales[r * m.groups_per_row() + c / group] : 0;
        ASSERT_EQ(s, want_s);
      }
    }
  }
}

// The loader's direct path (packed words to the device layout, rows over
// threads, words at any alignment) gives exactly what the byte-per-code path
// gives: unpack, Q4_0 blocks, device layout.
TEST(DeviceLayoutTest, PackQuantizedForDeviceEqualsTheUnpackedPath) {
  for (int group : {32, 128}) {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{3, 160}, {130, 384}, {257, 96}}) {
      std::mt19937 rng(static_cast<uint32_t>(group + rows + cols));
      std::vector<int32_t> words(static_cast<size_t>(rows * cols / 8));
      for (int32_t& w : words) w = static_cast<int32_t>(rng());
      std::vector<float> scales(static_cast<size_t>(rows * ((cols + group - 1) / group)));
      for (float& x : scales) x = HalfToFloat(FloatToHalf(0.001f * static_cast<float>(1 + rng() % 200) - 0.05f));
      auto unpacked = UnpackPackQuantized(words, scales, rows, cols, group);
      ASSERT_TRUE(unpacked.ok()) << unpacked.status();
      const W4DeviceMatrix want = PackForDevice(ToQ4_0Blocks(*std::move(unpacked)));
      std::vector<uint8_t> bytes(words.size() * 4 + 1);  // one byte in: unaligned words
      std::memcpy(bytes.data() + 1, words.data(), words.size() * 4);
      for (int threads : {1, 3}) {
        SCOPED_TRACE("group " + std::to_string(group) + " [" + std::to_string(rows) + ", " + std::to_string(cols) +
                     "] threads " + std::to_string(threads));
        auto got = PackQuantizedForDevice({bytes.data() + 1, words.size() * 4}, scales, rows, cols, group, threads);
        ASSERT_TRUE(got.ok()) << got.status();
        EXPECT_EQ(got->rows, want.rows);
        EXPECT_EQ(got->cols, want.cols);
        EXPECT_EQ(got->kpad, want.kpad);
        EXPECT_EQ(got->group, want.group);
        EXPECT_EQ(got->packed, want.packed);
        EXPECT_EQ(got->scales, want.scales);
      }
    }
  }
  std::vector<uint8_t> bytes(2 * 32 * 4 + 2, 0x88);
  std::vector<float> scales(2 * 2, 0.5f);
  EXPECT_THAT(std::string(PackQuantizedForDevice(bytes, scales, 2, 256, 128).status().message()),
              HasSubstr("258 bytes, not whole int32 words"));
  bytes.resize(2 * 32 * 4);
  EXPECT_THAT(std::string(PackQuantizedForDevice(bytes, scales, 2, 256, 32).status().message()),
              HasSubstr("weight_scale has 4 values, expected [2, 8]"));
  scales[2] = std::nanf("");
  EXPECT_THAT(std::string(PackQuantizedForDevice(bytes, scales, 2, 256, 128).status().message()),
              HasSubstr("weight_scale[1, 0] = nan is not finite"));
}

TEST(QuantizationConfigTest, AcceptsW4A16AndRefusesOtherVariantsByName) {
  auto config = [](const std::string& weights, const std::string& extra = "") {
    return R"({"quantization_config": {"quant_method": "compressed-tensors", "format": "pack-quantized",)" + extra +
           R"("config_groups": {"group_0": {"targets": ["Linear"], "input_activations": null, "weights": )" +
           weights + R"(}}, "ignore": ["lm_head", "re:.*vision.*"]}})";
  };
  const std::string ok =
      R"({"num_bits": 4, "type": "int", "symmetric": true, "strategy": "group", "group_size": 128, "dynamic": false, "actorder": null})";
  auto parsed = ParseInt4QuantizationConfig(config(ok));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_TRUE(parsed->has_value());
  EXPECT_EQ((*parsed)->group_size, 128);
  EXPECT_TRUE(IsIgnored(**parsed, "lm_head"));
  EXPECT_TRUE(IsIgnored(**parsed, "model.vision_tower.layers.0.q_proj"));
  EXPECT_FALSE(IsIgnored(**parsed, "model.layers.0.self_attn.q_proj"));

  auto refused = [&](const std::string& weights, const std::string& needle, const std::string& extra = "") {
    auto r = ParseInt4QuantizationConfig(config(weights, extra));
    ASSERT_FALSE(r.ok()) << weights;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(needle));
  };
  refused(R"({"num_bits": 4, "symmetric": false, "strategy": "group", "group_size": 128})", "symmetric = false");
  refused(R"({"num_bits": 8, "symmetric": true, "strategy": "group", "group_size": 128})", "num_bits = 8");
  refused(R"({"num_bits": 4, "symmetric": true, "strategy": "group", "group_size": 64})", "group_size = 64");
  refused(R"({"num_bits": 4, "symmetric": true, "strategy": "channel", "group_size": null})", "strategy = \"channel\"");
  refused(R"({"num_bits": 4, "symmetric": true, "strategy": "group", "group_size": 32, "actorder": "group"})",
          "actorder = \"group\"");
  refused(R"({"num_bits": 4, "type": "float", "symmetric": true, "strategy": "group", "group_size": 32})",
          "type = \"float\"");
  refused(ok, "kv_cache_scheme", R"("kv_cache_scheme": {"num_bits": 8},)");
  refused(ok, "format = \"marlin-24\"", R"("format": "marlin-24",)");
  auto bad_regex = ParseInt4QuantizationConfig(
      R"({"quantization_config": {"quant_method": "compressed-tensors", "format": "pack-quantized",
          "config_groups": {"g": {"targets": ["Linear"], "weights": )" + ok + R"(}}, "ignore": ["re:(unclosed"]}})");
  ASSERT_FALSE(bad_regex.ok());
  EXPECT_THAT(std::string(bad_regex.status().message()), HasSubstr("ignore = \"re:(unclosed\" is not supported"));

  EXPECT_FALSE(ParseInt4QuantizationConfig(R"({"hidden_size": 1})")->has_value());
  EXPECT_FALSE(ParseInt4QuantizationConfig(R"({"quantization_config": {"quant_method": "fp8"}})")->has_value());
}

}  // namespace
}  // namespace gemma::quant
