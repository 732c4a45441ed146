// gemma-generate, run as a user would: its greedy text for a fixture prompt is
// the golden greedy text, --print-ids gives the golden ids, bad flags exit 2.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

#include "gtest/gtest.h"
#include "tests/common/golden.h"

namespace gemma {
namespace {

struct Result {
  int exit_code = -1;
  std::string out;
};

// `with_stderr`: the output also holds stderr (error messages).
Result RunGenerate(const std::string& args, bool with_stderr = false) {
  const std::string cmd = std::string(GEMMA_BIN_DIR) + "/gemma-generate --backend cpu " + args +
                          (with_stderr ? " 2>&1" : " 2>/dev/null");
  Result r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

const std::string kFortunes = GEMMA_MODELS_DIR "/gemma4-fortunes";

TEST(GenerateCliTest, GreedyTextEqualsGolden) {
  const testing::Golden golden = testing::LoadGolden(kFortunes, 1024);
  ASSERT_FALSE(golden.prompts.empty());
  const testing::GoldenPrompt& g = golden.prompts[0];
  ASSERT_EQ(g.text, "The quick brown fox");
  ASSERT_EQ(testing::FirstLowMarginStep(g, 1e-2), g.greedy.size()) << "every step has a clear margin";
  const Result r = RunGenerate("--model " + kFortunes + " --prompt \"" + g.text + "\" --max-tokens " +
                       std::to_string(g.greedy.size()) + " --greedy");
  ASSERT_EQ(r.exit_code, 0);
  // The text continues the prompt's, so it keeps the space of its first
  // piece ("▁is"); the golden's greedy_text decodes the new ids alone, which
  // drops a leading space.
  EXPECT_EQ(r.out, " " + g.greedy_text + "\n");
}

TEST(GenerateCliTest, PrintIdsEqualsGoldenForIdPrompts) {
  const testing::Golden golden = testing::LoadGolden(kFortunes, 1024);
  for (const testing::GoldenPrompt& g : golden.prompts) {
    std::string ids;
    for (int32_t id : g.ids) ids += (ids.empty() ? "" : ",") + std::to_string(id);
    const size_t exact = testing::FirstLowMarginStep(g, 1e-2);
    const Result r = RunGenerate("--model " + kFortunes + " --prompt-ids " + ids + " --max-tokens " +
                         std::to_string(exact) + " --greedy --print-ids");
    ASSERT_EQ(r.exit_code, 0);
    std::string expected;
    for (size_t s = 0; s < exact; ++s) expected += (s ? " " : "") + std::to_string(g.greedy[s]);
    EXPECT_EQ(r.out, expected + "\n");
  }
}

// The CPU backend's simulated tensor-parallel ranks give the golden ids too.
TEST(GenerateCliTest, TensorParallelRanksPrintTheGoldenIds) {
  const testing::Golden golden = testing::LoadGolden(kFortunes, 1024);
  const testing::GoldenPrompt& g = golden.prompts[0];
  std::string ids;
  for (int32_t id : g.ids) ids += (ids.empty() ? "" : ",") + std::to_string(id);
  const size_t exact = testing::FirstLowMarginStep(g, 1e-2);
  std::string expected;
  for (size_t s = 0; s < exact; ++s) expected += (s ? " " : "") + std::to_string(g.greedy[s]);
  for (int tp : {2, 4}) {
    const Result r = RunGenerate("--model " + kFortunes + " --prompt-ids " + ids + " --max-tokens " +
                                 std::to_string(exact) + " --greedy --print-ids --tensor-parallel-size " +
                                 std::to_string(tp));
    ASSERT_EQ(r.exit_code, 0) << "tp " << tp;
    EXPECT_EQ(r.out, expected + "\n") << "tp " << tp;
  }
  EXPECT_EQ(RunGenerate("--model " + kFortunes + " --prompt x --tensor-parallel-size 3").exit_code, 2);
}

TEST(GenerateCliTest, BadFlagsExitWithCode2) {
  EXPECT_EQ(RunGenerate("--prompt x --max-tokens 0").exit_code, 2);
  EXPECT_EQ(RunGenerate("--prompt x --top-p 1.5").exit_code, 2);
  EXPECT_EQ(RunGenerate("--prompt-ids 2,abc").exit_code, 2);
  EXPECT_EQ(RunGenerate("--max-tokens 3").exit_code, 2);          // no prompt
  EXPECT_EQ(RunGenerate("--prompt x --no-such-flag").exit_code, 2);
  EXPECT_EQ(RunGenerate("--prompt x --prompt-ids 2").exit_code, 2);
  EXPECT_EQ(RunGenerate("--prompt x --backend tpu").exit_code, 2);
}

TEST(GenerateCliTest, MissingModelIsARuntimeError) {
  EXPECT_EQ(RunGenerate("--model /nonexistent --prompt x").exit_code, 1);
}

// FP8 options are CUDA-only: the cpu backend refuses them by name instead of
// silently running bf16.
TEST(GenerateCliTest, Fp8OptionsOnTheCpuBackendAreRefusedByName) {
  const Result head = RunGenerate("--model " + kFortunes + " --prompt x --max-tokens 1 --lm-head fp8", true);
  EXPECT_EQ(head.exit_code, 1) << head.out;
  EXPECT_NE(head.out.find("--lm-head fp8 is supported by the cuda backend only"), std::string::npos) << head.out;
  const Result weights = RunGenerate("--model " + kFortunes + " --prompt x --max-tokens 1 --weights fp8", true);
  EXPECT_EQ(weights.exit_code, 1) << weights.out;
  EXPECT_NE(weights.out.find("--weights fp8 is supported by the cuda backend only"), std::string::npos)
      << weights.out;
  const Result kv = RunGenerate("--model " + kFortunes + " --prompt x --max-tokens 1 --kv-cache-dtype fp8", true);
  EXPECT_EQ(kv.exit_code, 1) << kv.out;
  EXPECT_NE(kv.out.find("--kv-cache-dtype fp8 is supported by the cuda backend only"), std::string::npos) << kv.out;
  const Result bad_kv = RunGenerate("--model " + kFortunes + " --prompt x --kv-cache-dtype fp16", true);
  EXPECT_EQ(bad_kv.exit_code, 2) << bad_kv.out;
  EXPECT_NE(bad_kv.out.find("--kv-cache-dtype"), std::string::npos) << bad_kv.out;
  const Result bad = RunGenerate("--model " + kFortunes + " --prompt x --lm-head fp16", true);
  EXPECT_EQ(bad.exit_code, 2) << bad.out;
  EXPECT_NE(bad.out.find("--lm-head"), std::string::npos) << bad.out;
}

}  // namespace
}  // namespace gemma
