// Decode (split-K) attention against a float64 host reference: the 31B
// shapes, split counts from one to more splits than tiles, window edges, ring
// wrap, length-unaware mode, a captured graph replayed at other depths, and the
// in-kernel merge's counters: every launch repeated (bit-identical, so the
// counters were reset), sequences without a query, and one workspace shared by
// launches of different shapes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "kernels/attention/attention.h"
#include "tests/kernels/attention_case.h"

namespace gemma::kernels::testing {
namespace {

constexpr double kTolerance = 1e-2;

class DecodeAttentionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  }

  // Every split count on one workspace zeroed once (as the engine does), each
  // launch twice: the second must match the first bit for bit, which it
  // cannot if the first left a counter non-zero (no block would merge).
  void Check(const AttentionCase& c, std::initializer_list<int> splits, bool length_aware = true) {
    AttentionProblem prob(c);
    const std::vector<double> ref = prob.Reference();
    const int num_seqs = static_cast<int>(c.q_lens.size());
    size_t ws_bytes = 0;
    for (int s : splits)
      ws_bytes = std::max(ws_bytes, DecodeWorkspaceBytes(num_seqs, c.num_heads, c.head_dim, s));
    DeviceBuffer ws(ws_bytes);
    CUDA_OK(cudaMemset(ws.as<void>(), 0, std::max<size_t>(ws_bytes, 1)));
    // Slot caches, then (length-aware only) the same keys through scrambled
    // paged blocks of 16.
    const AttentionParams paged = length_aware ? prob.PagedParams(16) : AttentionParams{};
    for (int view = 0; view < (length_aware ? 2 : 1); ++view)
    for (int num_splits : splits) {
      SCOPED_TRACE("splits " + std::to_string(num_splits) +
                   (length_aware ? "" : " length-unaware") + (view ? " paged" : ""));
      AttentionParams p = view ? paged : prob.Params();
      p.length_aware = length_aware;
      std::vector<float> first;
      for (int rep = 0; rep < 2; ++rep) {
        CUDA_OK(prob.Poison());
        ASSERT_EQ(LaunchDecodeAttention(p, ws.as<void>(), ws_bytes, num_splits, nullptr), "");
        CUDA_OK(cudaDeviceSynchronize());
        const std::vector<float> out = prob.Output();
        if (rep == 1) {
          ASSERT_EQ(out.size(), first.size());
          EXPECT_EQ(std::memcmp(out.data(), first.data(), out.size() * sizeof(float)), 0)
              << "a repeated launch differs";
          break;
        }
        const ErrorReport r = Compare(out, ref);
        EXPECT_EQ(r.num_not_finite, 0);
        EXPECT_LT(r.rel_error, kTolerance);
        first = out;
      }
    }
  }
};

AttentionCase Decode(int d, int heads, int kv, std::vector<int> lens, std::vector<int> slots) {
  AttentionCase c{.head_dim = d, .num_heads = heads, .num_kv_heads = kv};
  for (int len : lens) {
    c.q_lens.push_back(1);
    c.q_pos0.push_back(len - 1);  // the new token is at position len - 1
  }
  c.slots = std::move(slots);
  c.num_slots = static_cast<int>(c.slots.size());
  return c;
}

TEST_F(DecodeAttentionTest, Global31BGqa8) {
  AttentionCase c = Decode(512, 32, 4, {1, 777, 2000}, {1, 2, 0});
  c.capacity = 2048;
  Check(c, {1, 2, 7, 33, 64});
}

TEST_F(DecodeAttentionTest, Sliding31BWindowRing) {
  AttentionCase c = Decode(256, 32, 16, {1030, 1024, 1025, 500, 3001}, {4, 0, 3, 1, 2});
  c.window = 1024;
  c.capacity = 1024;
  c.ring = true;
  c.seed = 2;
  Check(c, {1, 2, 7, 9, 16});
}

TEST_F(DecodeAttentionTest, WindowBoundary15_16_17) {
  AttentionCase c = Decode(64, 8, 2, {15, 16, 17, 41}, {2, 3, 0, 1});
  c.window = 16;
  c.capacity = 16;
  c.ring = true;
  c.seed = 3;
  Check(c, {1, 2, 5});
}

TEST_F(DecodeAttentionTest, FixtureHeadDims) {
  for (int d : {32, 64, 128}) {
    for (int kv : {1, 2, 4}) {
      SCOPED_TRACE("head_dim " + std::to_string(d) + " kv heads " + std::to_string(kv));
      AttentionCase c = Decode(d, 4, kv, {1, 33, 300}, {2, 0, 1});
      c.capacity = 320;
      c.seed = 10 + d + kv;
      Check(c, {1, 4});
    }
  }
}

TEST_F(DecodeAttentionTest, LengthUnawareSweepsCapacityAndIgnoresGarbage) {
  AttentionCase c = Decode(512, 32, 4, {1, 300, 1000}, {0, 2, 1});
  c.capacity = 1100;
  c.poison_unused_cache = true;  // NaN rows past each length
  c.seed = 4;
  Check(c, {1, 16}, /*length_aware=*/false);
  Check(c, {16}, /*length_aware=*/true);

  AttentionCase r = Decode(256, 32, 16, {5, 1500}, {1, 0});
  r.window = 1024;
  r.capacity = 1100;
  r.ring = true;
  r.poison_unused_cache = true;
  r.seed = 5;
  Check(r, {1, 8}, /*length_aware=*/false);
}

TEST_F(DecodeAttentionTest, GraphReplaysAtAnyDepth) {
  AttentionCase c = Decode(512, 32, 4, {10, 20}, {1, 0});
  c.capacity = 4096;
  AttentionProblem prob(c);
  const int splits = 32;
  const size_t ws_bytes = DecodeWorkspaceBytes(2, 32, 512, splits);
  DeviceBuffer ws(ws_bytes);
  CUDA_OK(cudaMemset(ws.as<void>(), 0, ws_bytes));
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreate(&stream));
  cudaGraph_t graph;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const std::string err = LaunchDecodeAttention(prob.Params(), ws.as<void>(), ws_bytes, splits, stream);
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  ASSERT_EQ(err, "");
  cudaGraphExec_t exec;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (const std::vector<int>& pos : {std::vector<int>{9, 19}, {4095, 100}, {0, 2500}}) {
    SCOPED_TRACE("positions " + std::to_string(pos[0]) + ", " + std::to_string(pos[1]));
    CUDA_OK(prob.SetPositions(pos));
    CUDA_OK(prob.Poison());
    CUDA_OK(cudaGraphLaunch(exec, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    const ErrorReport r = Compare(prob.Output(), prob.Reference());
    EXPECT_EQ(r.num_not_finite, 0);
    EXPECT_LT(r.rel_error, kTolerance);
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

// Padded decode-graph rows: sequences without a query get no output, and
// their split blocks leave the counters alone: a launch of the same batch
// with every query present, on the same workspace, must still merge.
TEST_F(DecodeAttentionTest, SequencesWithoutQuery) {
  for (int d : {512, 256}) {
    SCOPED_TRACE("head_dim " + std::to_string(d));
    const int kv = d == 512 ? 4 : 16;
    AttentionCase empty{.head_dim = d, .num_heads = 32, .num_kv_heads = kv, .capacity = 1600};
    empty.q_lens = {0, 1, 0, 1, 0};
    empty.q_pos0 = {0, 699, 40, 1499, 0};
    empty.slots = {0, 1, 2, 3, 0};
    empty.num_slots = 4;
    empty.seed = 20 + d;
    AttentionCase full = empty;
    full.q_lens = {1, 1, 1, 1, 1};
    full.seed = 30 + d;
    Check(empty, {1, 2, 7, 64});

    AttentionProblem a(empty), b(full);
    const std::vector<double> ref_b = b.Reference();
    const size_t ws_bytes = DecodeWorkspaceBytes(5, 32, d, 64);
    DeviceBuffer ws(ws_bytes);
    CUDA_OK(cudaMemset(ws.as<void>(), 0, ws_bytes));
    for (int splits : {7, 64}) {
      SCOPED_TRACE("splits " + std::to_string(splits));
      ASSERT_EQ(LaunchDecodeAttention(a.Params(), ws.as<void>(), ws_bytes, splits, nullptr), "");
      CUDA_OK(b.Poison());
      ASSERT_EQ(LaunchDecodeAttention(b.Params(), ws.as<void>(), ws_bytes, splits, nullptr), "");
      CUDA_OK(cudaDeviceSynchronize());
      const ErrorReport r = Compare(b.Output(), ref_b);
      EXPECT_EQ(r.num_not_finite, 0);
      EXPECT_LT(r.rel_error, kTolerance);
    }
  }
}

// One workspace for every layer, as in the engine (sized for the largest
// launch, all terms with the same max_seqs and num_heads): a global launch,
// sliding launches of another batch, head_dim and split count in between
// (their partials land where the global one's were, their counters elsewhere),
// then the global launch again must reproduce its first output bit for bit.
TEST_F(DecodeAttentionTest, LayersShareOneWorkspace) {
  AttentionCase global = Decode(512, 32, 4, {1, 900, 2000}, {1, 2, 0});
  global.capacity = 2048;
  AttentionCase sliding = Decode(256, 32, 16, {1030, 5, 3001, 77, 1024}, {4, 0, 3, 1, 2});
  sliding.window = 1024;
  sliding.capacity = 1024;
  sliding.ring = true;
  sliding.seed = 6;
  AttentionProblem g(global), sl(sliding);
  const std::vector<double> ref_g = g.Reference(), ref_s = sl.Reference();
  constexpr int kMaxSeqs = 5;
  size_t ws_bytes = 0;
  for (int d : {256, 512})
    for (int s : {2, 7, 64}) ws_bytes = std::max(ws_bytes, DecodeWorkspaceBytes(kMaxSeqs, 32, d, s));
  DeviceBuffer ws(ws_bytes);
  CUDA_OK(cudaMemset(ws.as<void>(), 0, ws_bytes));
  auto run = [&](AttentionProblem& prob, int splits, const std::vector<double>& ref) {
    std::vector<float> out;
    EXPECT_EQ(prob.Poison(), cudaSuccess);
    EXPECT_EQ(LaunchDecodeAttention(prob.Params(), ws.as<void>(), ws_bytes, splits, nullptr), "");
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    out = prob.Output();
    const ErrorReport r = Compare(out, ref);
    EXPECT_EQ(r.num_not_finite, 0);
    EXPECT_LT(r.rel_error, kTolerance);
    return out;
  };
  const std::vector<float> first = run(g, 64, ref_g);
  run(sl, 7, ref_s);
  run(sl, 2, ref_s);
  run(g, 7, ref_g);
  const std::vector<float> again = run(g, 64, ref_g);
  ASSERT_EQ(again.size(), first.size());
  EXPECT_EQ(std::memcmp(again.data(), first.data(), first.size() * sizeof(float)), 0);
}

TEST_F(DecodeAttentionTest, RejectsBadParams) {
  AttentionCase c = Decode(512, 32, 4, {10}, {0});
  c.capacity = 16;
  AttentionProblem prob(c);
  AttentionParams p = prob.Params();
  EXPECT_NE(LaunchDecodeAttention(p, nullptr, 0, 4, nullptr).find("workspace"), std::string::npos);
  DeviceBuffer ws(DecodeWorkspaceBytes(1, 32, 512, 4));
  EXPECT_NE(LaunchDecodeAttention(p, ws.as<void>(), ws.bytes() / 2, 4, nullptr).find("workspace"),
            std::string::npos);
  EXPECT_NE(LaunchDecodeAttention(p, ws.as<char>() + 4, ws.bytes() - 4, 4, nullptr).find("aligned"),
            std::string::npos);
  EXPECT_NE(LaunchDecodeAttention(p, nullptr, 0, 0, nullptr), "");
  p.max_q_len = 2;
  EXPECT_NE(LaunchDecodeAttention(p, nullptr, 0, 1, nullptr).find("q_len"), std::string::npos);
  p = prob.Params();
  p.num_kv_heads = 1;  // group 32 > 16
  EXPECT_NE(LaunchDecodeAttention(p, nullptr, 0, 1, nullptr), "");
}

}  // namespace
}  // namespace gemma::kernels::testing
