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

Result RunGenerate(const std::string& args) {
  const std::string cmd = std::string(GEMMA_BIN_DIR) + "/gemma-generate --backend cpu " + args + " 2>/dev/null";
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
  EXPECT_EQ(r.out, g.greedy_text + "\n");
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

}  // namespace
}  // namespace gemma
