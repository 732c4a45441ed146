// The CPU reference backend on the int4 fixtures (tests/data, written by
// make_fortunes_int4.py). A W4A16 checkpoint needs no --weights: the fp32
// backend runs its codes times its scales, which are exact in fp32, so
//   - the group-32 checkpoint gives bit for bit the logits of the on-grid
//     bf16 checkpoint it dequantizes to (every golden prompt, prefill and
//     decode);
//   - the group-128 checkpoint (llm-compressor's rule on the original
//     weights) stays within the int4 quality bounds of the float64 golden
//     (the bounds the CUDA int4 path is held to: row rel. error mean < 0.25,
//     worst < 0.9, top-1 agreement on 80 % of confident rows);
// and a conflicting --weights (or tensor parallelism) is refused by name.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "engine/factory/backend_factory.h"
#include "tests/common/golden.h"

namespace gemma {
namespace {

using ::testing::HasSubstr;

const std::string kFortunes = GEMMA_MODELS_DIR "/gemma4-fortunes";
const std::string kOnGrid = GEMMA_TEST_DATA "/gemma4-fortunes-q4_0";
const std::string kG32 = GEMMA_TEST_DATA "/gemma4-fortunes-w4a16-g32";
const std::string kG128 = GEMMA_TEST_DATA "/gemma4-fortunes-w4a16-g128";

absl::StatusOr<std::unique_ptr<Backend>> Cpu(const std::string& dir, std::optional<WeightDType> weights = {}) {
  BackendOptions o;
  o.backend = "cpu";
  o.model_dir = dir;
  o.max_slots = 1;
  o.max_context = 512;
  o.weights = weights;
  return CreateBackend(o);
}

// Per golden prompt: the prefill logits of every position, then one decode
// step per golden token (the golden tokens fed back).
std::vector<std::vector<float>> Logits(Backend& b, const testing::Golden& golden) {
  std::vector<std::vector<float>> out;
  std::vector<int32_t> blocks(512 / 16);
  for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = static_cast<int32_t>(i);
  for (const testing::GoldenPrompt& g : golden.prompts) {
    b.ResetSlot(0);
    SequenceChunk c;
    c.token_ids = g.ids;
    c.all_logits = true;
    c.return_logits = true;
    c.global_blocks = blocks;
    c.sliding_blocks = blocks;
    ForwardResult r;
    EXPECT_TRUE(b.Forward({&c, 1}, {}, &r).ok());
    std::vector<float> rows = r.logits;
    for (size_t s = 0; s + 1 < g.greedy.size(); ++s) {
      SequenceChunk d;
      d.token_ids = {&g.greedy[s], 1};
      d.start_position = static_cast<int32_t>(g.ids.size() + s);
      d.return_logits = true;
      d.global_blocks = blocks;
      d.sliding_blocks = blocks;
      EXPECT_TRUE(b.Forward({&d, 1}, {}, &r).ok());
      rows.insert(rows.end(), r.logits.begin(), r.logits.end());
    }
    out.push_back(std::move(rows));
  }
  return out;
}

TEST(CpuInt4Test, Group32EqualsTheOnGridBf16CheckpointBitForBit) {
  auto ct = Cpu(kG32);  // no --weights: detected from config.json
  ASSERT_TRUE(ct.ok()) << ct.status();
  auto grid = Cpu(kOnGrid);
  ASSERT_TRUE(grid.ok()) << grid.status();
  const testing::Golden golden = testing::LoadGolden(kFortunes, 1024);
  ASSERT_FALSE(golden.prompts.empty());
  const auto want = Logits(**grid, golden), got = Logits(**ct, golden);
  ASSERT_EQ(got.size(), want.size());
  for (size_t p = 0; p < want.size(); ++p) {
    ASSERT_FALSE(want[p].empty());
    EXPECT_EQ(got[p], want[p]) << "prompt " << p;
  }
}

TEST(CpuInt4Test, Group128IsWithinTheInt4QualityBoundsOfTheGolden) {
  auto ct = Cpu(kG128, WeightDType::kINT4);  // --weights int4 agrees with the checkpoint
  ASSERT_TRUE(ct.ok()) << ct.status();
  const int vocab = 1024;
  const testing::Golden golden = testing::LoadGolden(kFortunes, vocab);
  const auto got = Logits(**ct, golden);
  double worst = 0, sum = 0;
  int rows = 0, confident = 0, agree = 0;
  for (size_t p = 0; p < golden.prompts.size(); ++p) {
    const testing::GoldenPrompt& g = golden.prompts[p];
    // Prefill rows, then step rows 1.. (row 0 of step_logits is the last prefill row).
    std::vector<const float*> refs;
    for (size_t t = 0; t < g.ids.size(); ++t) refs.push_back(&g.prefill_logits[t * vocab]);
    for (size_t s = 1; s < g.greedy.size(); ++s) refs.push_back(&g.step_logits[s * vocab]);
    ASSERT_EQ(got[p].size(), refs.size() * vocab);
    for (size_t r = 0; r < refs.size(); ++r) {
      const float* o = &got[p][r * vocab];
      double num = 0, den = 0;
      for (int v = 0; v < vocab; ++v) {
        num += (double(o[v]) - refs[r][v]) * (double(o[v]) - refs[r][v]);
        den += double(refs[r][v]) * refs[r][v];
      }
      const double err = std::sqrt(num / den);
      worst = std::max(worst, err);
      sum += err;
      ++rows;
      std::vector<float> top(refs[r], refs[r] + vocab);
      std::partial_sort(top.begin(), top.begin() + 2, top.end(), std::greater<float>());
      if (top[0] - top[1] < 1.0) continue;
      ++confident;
      agree += std::max_element(o, o + vocab) - o == std::max_element(refs[r], refs[r] + vocab) - refs[r];
    }
  }
  std::printf(
      "cpu int4 (W4A16 group 128) vs float64: rows %d, row rel. error mean %.4f worst %.4f, "
      "top-1 agreement %d/%d confident rows\n",
      rows, sum / rows, worst, agree, confident);
  EXPECT_LT(sum / rows, 0.25);
  EXPECT_LT(worst, 0.9);
  EXPECT_GE(agree, 0.8 * confident);
}

TEST(CpuInt4Test, ConflictingWeightsFlagsAreRefusedByName) {
  for (WeightDType d : {WeightDType::kBF16, WeightDType::kFP8}) {
    auto b = Cpu(kG32, d);
    ASSERT_FALSE(b.ok());
    EXPECT_THAT(std::string(b.status().message()),
                HasSubstr("--weights " + std::string(WeightDTypeName(d)) +
                          ": the checkpoint is compressed-tensors pack-quantized W4A16"));
  }
  // Tensor-parallel ranks slice float tensors, not packed ones.
  BackendOptions tp;
  tp.backend = "cpu";
  tp.model_dir = kG32;
  tp.tensor_parallel_size = 2;
  auto sharded = CreateBackend(tp);
  ASSERT_FALSE(sharded.ok());
  EXPECT_THAT(std::string(sharded.status().message()),
              HasSubstr("--tensor-parallel-size 2: a compressed-tensors W4A16 checkpoint runs on one GPU"));
  // Quantizing a float checkpoint at load time is the cuda backend's.
  auto q = Cpu(kOnGrid, WeightDType::kINT4);
  ASSERT_FALSE(q.ok());
  EXPECT_THAT(std::string(q.status().message()), HasSubstr("--weights int4 is supported by the cuda backend only"));
}

}  // namespace
}  // namespace gemma
