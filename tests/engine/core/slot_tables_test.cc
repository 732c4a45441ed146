// SlotTables drives a paged backend without the engine: a sequence fed in
// pieces through a sliding pool far smaller than its length (blocks leaving
// the window are recycled) gives the logits of the same sequence fed whole
// through ample pools, and the tables refuse what the engine would never ask.
#include "engine/core/slot_tables.h"

#include <algorithm>
#include <numeric>

#include "engine/factory/backend_factory.h"
#include "gtest/gtest.h"
#include "tests/engine/core/sliding_pool_backend.h"

namespace gemma {
namespace {

const std::string kModel = GEMMA_MODELS_DIR "/gemma4-fortunes";
constexpr int kBlock = 8;

std::unique_ptr<Backend> MakeCpu(int num_sliding_blocks) {
  BackendOptions bo;
  bo.backend = "cpu";
  bo.model_dir = kModel;
  bo.max_slots = 2;
  bo.max_context = 256;
  bo.kv_block_size = kBlock;
  auto backend = CreateBackend(bo);
  EXPECT_TRUE(backend.ok()) << backend.status();
  if (!backend.ok()) return nullptr;
  return std::make_unique<testing::SlidingPoolBackend>(std::move(*backend), num_sliding_blocks);
}

// Last-position logits of every piece of `ids` fed in pieces of `piece`
// tokens through slot 1.
std::vector<float> FeedInPieces(Backend& b, SlotTables& tables, const std::vector<int32_t>& ids, int piece) {
  std::vector<float> rows;
  for (int at = 0; at < static_cast<int>(ids.size()); at += piece) {
    const int n = std::min<int>(piece, static_cast<int>(ids.size()) - at);
    SequenceChunk c{1, std::span<const int32_t>(ids).subspan(at, n), at, false};
    c.return_logits = true;
    ForwardResult out;
    const absl::Status st = tables.Forward(b, {&c, 1}, {}, &out);
    EXPECT_TRUE(st.ok()) << st;
    rows.insert(rows.end(), out.logits.begin(), out.logits.end());
  }
  return rows;
}

TEST(SlotTables, SmallSlidingPoolGivesTheLogitsOfAmplePools) {
  std::vector<int32_t> ids(200);
  for (int i = 0; i < 200; ++i) ids[i] = 3 + (i * 7919) % 200;
  auto ample = MakeCpu(0);
  ASSERT_TRUE(ample);
  const int window = ample->config().sliding_window;
  // Window plus one piece of 16 tokens, and a block on each side.
  const int small_pool = (window - 1 + 16 + kBlock - 1) / kBlock + 2;
  ASSERT_LT(small_pool * kBlock, static_cast<int>(ids.size()));
  auto small = MakeCpu(small_pool);
  ASSERT_TRUE(small);
  auto ample_tables = SlotTables::For(*ample);
  auto small_tables = SlotTables::For(*small);
  ASSERT_TRUE(ample_tables.ok() && small_tables.ok());
  const std::vector<float> want = FeedInPieces(*ample, *ample_tables, ids, 16);
  const std::vector<float> got = FeedInPieces(*small, *small_tables, ids, 16);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(got, want);  // the CPU forward does not depend on where the KV lives
  EXPECT_EQ(small_tables->length(1), 200);

  // A whole prompt longer than the small pool cannot be backed at once.
  small_tables->Reset(1);
  EXPECT_EQ(small_tables->length(1), 0);
  SequenceChunk whole{1, ids, 0, false};
  EXPECT_EQ(small_tables->Attach(whole).code(), absl::StatusCode::kResourceExhausted);
  // Nor a chunk that skips positions, nor a slot the backend lacks.
  small_tables->Reset(1);
  SequenceChunk gap{1, std::span<const int32_t>(ids).first(4), 4, false};
  EXPECT_EQ(small_tables->Attach(gap).code(), absl::StatusCode::kInvalidArgument);
  SequenceChunk bad_slot{2, std::span<const int32_t>(ids).first(4), 0, false};
  EXPECT_EQ(small_tables->Attach(bad_slot).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gemma
