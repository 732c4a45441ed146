// Device sampling (kernels/sampling/sample.cu) against its host twin
// (engine/sampling/row_sampler.cc) at the real vocabulary (262,144): the same
// (seed, step) must pick the same token. Thresholds and Gumbel noise use
// expf/logf on both sides but not bit-identical ones, so a row whose two best
// scores are within an ulp may differ: allowed for at most 2 of 192 rows.
#include <gtest/gtest.h>

#include "engine/sampling/row_sampler.h"
#include "kernels/sampling/sample.h"
#include "tests/common/gpu_test_util.h"

namespace gemma {
namespace {

TEST(DeviceSample, MatchesTheHostRuleAtTheRealVocabulary) {
  GEMMA_REQUIRE_GPU();
  constexpr int kVocab = 262144, kRows = 192;
  std::vector<float> logits = gpu_test::RandomFloats(size_t{kRows} * kVocab, 0.0f, 3.0f);
  for (int r = 0; r < kRows; r += 7) logits[size_t(r) * kVocab + 17] = 20.0f;  // some peaked rows
  std::vector<kernels::SampleRowParams> rows(kRows);
  for (int r = 0; r < kRows; ++r) {
    kernels::SampleRowParams& p = rows[r];
    p.temperature = r % 12 == 0 ? 0.0f : 0.3f + 0.1f * (r % 11);
    p.top_k = (r % 3 == 0) ? 0 : (r % 3 == 1 ? 1 + r : 50);
    p.top_p = (r % 4 == 0) ? 1.0f : 0.5f + 0.1f * (r % 5);
    p.min_p = (r % 5 == 0) ? 0.05f : 0.0f;
    p.seed = 1000 + r;
    p.step = r * 3;
  }
  gpu_test::DeviceArray<float> d_logits(logits);
  gpu_test::DeviceArray<kernels::SampleRowParams> d_rows(rows);
  gpu_test::DeviceArray<int32_t> d_out(kRows);
  kernels::SampleParams p{d_logits.get(), d_rows.get(), d_out.get(), kRows, kVocab};
  ASSERT_EQ(kernels::LaunchSample(p, nullptr), "");
  const std::vector<int32_t> got = d_out.Download();
  int mismatches = 0;
  for (int r = 0; r < kRows; ++r) {
    const kernels::SampleRowParams& k = rows[r];
    const int32_t want = SampleRow(std::span<const float>(logits).subspan(size_t(r) * kVocab, kVocab), k);
    if (k.temperature == 0.0f) {
      EXPECT_EQ(got[r], want) << "greedy row " << r;
    } else if (got[r] != want) {
      ++mismatches;
      std::printf("row %d: device %d host %d\n", r, got[r], want);
    }
  }
  EXPECT_LE(mismatches, 2);
  // Same inputs, same tokens: the kernel is deterministic.
  ASSERT_EQ(kernels::LaunchSample(p, nullptr), "");
  EXPECT_EQ(d_out.Download(), got);
  // Bad launches are refused by name.
  kernels::SampleParams bad = p;
  bad.vocab = 0;
  EXPECT_NE(kernels::LaunchSample(bad, nullptr).find("vocab"), std::string::npos);
}

}  // namespace
}  // namespace gemma
