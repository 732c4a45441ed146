// The fused decode step (kernels/attention/decode_fused.h) against the three
// kernels it replaces and a float64 reference: the newest K / V rows it
// writes are the bits QKV-RoPE writes (the rest of the cache untouched), and
// its output is within rounding of the split kernel's and 1e-2 of float64
// attention over the cache it leaves. Paged caches of scrambled blocks
// filled with NaN where no live key lives, sliding windows and depths
// around the chunk, block and window edges, padding sequences, GQA groups
// of 2, 3 and 8, every split count, a captured graph replayed at other
// depths, and the refusals.
#include "kernels/attention/decode_fused.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/attention/attention.h"
#include "kernels/rope/qkv_rope.h"
#include "tests/kernels/attention/attention_case.h"

namespace gemma::kernels::testing {
namespace {

constexpr int kD = 256;

struct FusedCase {
  int num_heads = 32, num_kv_heads = 16, window = 1024;
  bool k_eq_v = false;
  int block = 16;         // paged block size
  int rope_pairs = 128;   // of 128
  std::vector<int> lens;  // per sequence (0: a padding sequence, no query)
  uint32_t seed = 1;
};

template <typename T>
DeviceBuffer Upload(const std::vector<T>& v) {
  DeviceBuffer b(v.size() * sizeof(T));
  if (!v.empty()) {
    EXPECT_EQ(cudaMemcpy(b.as<void>(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  return b;
}
template <typename T>
std::vector<T> Download(const DeviceBuffer& b) {
  std::vector<T> v(b.bytes() / sizeof(T));
  EXPECT_EQ(cudaMemcpy(v.data(), b.as<void>(), b.bytes(), cudaMemcpyDeviceToHost), cudaSuccess);
  return v;
}

std::vector<float> ToFloats(const std::vector<uint16_t>& bits) {
  std::vector<float> f;
  for (uint16_t b : bits) f.push_back(Bf16ToFloat(b));
  return f;
}

// One decode step's inputs: the QKV projection's rows, the norms, a paged
// pool holding every sequence's earlier keys (NaN elsewhere) and the step's
// metadata as the engine lays it out.
class FusedProblem {
 public:
  explicit FusedProblem(const FusedCase& c) : c_(c) {
    std::mt19937 rng(c.seed);
    std::normal_distribution<float> normal(0.f, 1.f);
    // Norm weights of 0.2..0.4: scores (scale 1) spread ~1.5, so the
    // softmax weighs many keys and a key dropped or counted twice shows.
    std::uniform_real_distribution<float> weight(0.2f, 0.4f);
    const int kv_parts = c.k_eq_v ? 1 : 2;
    width_ = (c.num_heads + kv_parts * c.num_kv_heads) * kD;
    int tokens = 0;
    for (int len : c.lens) tokens += len > 0 ? 1 : 0;
    num_tokens_ = std::max(tokens, 1);
    std::vector<uint16_t> qkv(static_cast<size_t>(num_tokens_) * width_);
    for (uint16_t& x : qkv) x = FloatToBf16(normal(rng));
    std::vector<float> q_norm(kD), k_norm(kD);
    for (float& w : q_norm) w = weight(rng);
    for (float& w : k_norm) w = weight(rng);
    // Blocks: each sequence's table covers positions [0, len); blocks wholly
    // before the window are released (-1), the rest scrambled over the pool.
    int blocks = 0;
    const int kBlock = c.block;
    for (int len : c.lens) blocks += (len + kBlock - 1) / kBlock;
    num_blocks_ = blocks + 3;
    std::vector<int> ids(num_blocks_);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    const size_t row = static_cast<size_t>(c.num_kv_heads) * kD;
    pool_k_.assign(static_cast<size_t>(num_blocks_) * kBlock * row,
                   0x7fc0);  // NaN
    pool_v_ = pool_k_;
    int next = 0, token = 0;
    for (int len : c.lens) {
      table_offsets_.push_back(static_cast<int>(tables_.size()));
      q_offsets_.push_back(token);
      q_pos0_.push_back(std::max(len - 1, 0));
      const int first_live = c.window > 0 ? std::max(0, len - c.window) : 0;
      for (int b = 0; b < (len + kBlock - 1) / kBlock; ++b) {
        const int id = ids[next++];
        tables_.push_back((b + 1) * kBlock <= first_live ? -1 : id);
        for (int i = 0; i < kBlock; ++i) {
          const int u = b * kBlock + i;
          if (u < first_live || u >= len - 1) continue;  // outside the window, or the newest (made by the step)
          for (size_t e = 0; e < row; ++e) {
            pool_k_[(static_cast<size_t>(id) * kBlock + i) * row + e] = FloatToBf16(normal(rng));
            pool_v_[(static_cast<size_t>(id) * kBlock + i) * row + e] = FloatToBf16(normal(rng));
          }
        }
      }
      if (len > 0) {
        const int pos = len - 1;
        kv_rows_.push_back(tables_[table_offsets_.back() + pos / kBlock] * kBlock + pos % kBlock);
        positions_.push_back(pos);
        ++token;
      }
    }
    q_offsets_.push_back(token);
    if (tables_.empty()) tables_.push_back(0);
    while (static_cast<int>(kv_rows_.size()) < num_tokens_) kv_rows_.push_back(-1), positions_.push_back(0);
    d_qkv_ = Upload(qkv);
    d_q_norm_ = Upload(q_norm);
    d_k_norm_ = Upload(k_norm);
    d_positions_ = Upload(positions_);
    d_token_slot_ = Upload(std::vector<int>(num_tokens_, 0));
    d_kv_rows_ = Upload(kv_rows_);
    d_q_offsets_ = Upload(q_offsets_);
    d_q_pos0_ = Upload(q_pos0_);
    d_seq_slot_ = Upload(std::vector<int>(c.lens.size(), 0));
    d_tables_ = Upload(tables_);
    d_table_offsets_ = Upload(table_offsets_);
    d_q_ = DeviceBuffer(static_cast<size_t>(num_tokens_) * c.num_heads * kD * 2);
  }

  // A fresh copy of the pool and an output buffer poisoned with NaN.
  struct Run {
    DeviceBuffer k, v, out;
  };
  Run NewRun() const {
    Run r{Upload(pool_k_), Upload(pool_v_), DeviceBuffer(static_cast<size_t>(num_tokens_) * c_.num_heads * kD * 2)};
    EXPECT_EQ(cudaMemset(r.out.as<void>(), 0xff, r.out.bytes()), cudaSuccess);
    return r;
  }

  QkvRopeParams Rope(const Run& r) const {
    QkvRopeParams p;
    p.qkv = d_qkv_.as<__nv_bfloat16>();
    p.q_norm = d_q_norm_.as<float>();
    p.k_norm = d_k_norm_.as<float>();
    p.positions = d_positions_.as<int>();
    p.token_slot = d_token_slot_.as<int>();
    p.q_out = d_q_.as<__nv_bfloat16>();
    p.k_cache = r.k.as<void>();
    p.v_cache = r.v.as<void>();
    p.num_tokens = num_tokens_;
    p.num_heads = c_.num_heads;
    p.num_kv_heads = c_.num_kv_heads;
    p.head_dim = kD;
    p.k_eq_v = c_.k_eq_v;
    p.num_slots = 1;
    p.capacity = num_blocks_ * c_.block;
    p.rope_pairs = c_.rope_pairs;
    p.rope_theta = 10000.f;
    p.eps = 1e-6f;
    p.kv_rows = d_kv_rows_.as<int>();
    return p;
  }
  AttentionParams Attention(const Run& r) const {
    AttentionParams a;
    a.q = d_q_.as<__nv_bfloat16>();
    a.out = r.out.as<__nv_bfloat16>();
    a.k_cache = r.k.as<void>();
    a.v_cache = r.v.as<void>();
    a.num_slots = 1;
    a.capacity = num_blocks_ * c_.block;
    a.num_heads = c_.num_heads;
    a.num_kv_heads = c_.num_kv_heads;
    a.head_dim = kD;
    a.window = c_.window;
    a.num_seqs = static_cast<int>(c_.lens.size());
    a.seq_slot = d_seq_slot_.as<int>();
    a.q_offsets = d_q_offsets_.as<int>();
    a.q_pos0 = d_q_pos0_.as<int>();
    a.max_q_len = 1;
    a.block_tables = d_tables_.as<int>();
    a.table_offsets = d_table_offsets_.as<int>();
    a.block_size = c_.block;
    a.num_blocks = num_blocks_;
    return a;
  }

  // float64 attention of every live sequence over the pool `k` / `v` (after
  // a step wrote the newest rows) with the queries QKV-RoPE wrote.
  std::vector<double> Reference(const std::vector<uint16_t>& k, const std::vector<uint16_t>& v) const {
    const std::vector<uint16_t> q = Download<uint16_t>(d_q_);
    const int group = c_.num_heads / c_.num_kv_heads;
    const size_t row = static_cast<size_t>(c_.num_kv_heads) * kD;
    std::vector<double> out(static_cast<size_t>(num_tokens_) * c_.num_heads * kD, 0.0);
    for (size_t s = 0; s < c_.lens.size(); ++s) {
      const int len = c_.lens[s];
      if (len == 0) continue;
      const int token = q_offsets_[s], pos = len - 1;
      const int lo = c_.window > 0 ? std::max(0, pos - c_.window + 1) : 0;
      for (int h = 0; h < c_.num_heads; ++h) {
        const int kvh = h / group;
        std::vector<double> score;
        std::vector<size_t> rows;
        for (int u = lo; u <= pos; ++u) {
          const size_t r = static_cast<size_t>(tables_[table_offsets_[s] + u / c_.block]) * c_.block + u % c_.block;
          double dot = 0;
          for (int d = 0; d < kD; ++d)
            dot += double(Bf16ToFloat(q[(static_cast<size_t>(token) * c_.num_heads + h) * kD + d])) *
                   Bf16ToFloat(k[r * row + kvh * kD + d]);
          score.push_back(dot);
          rows.push_back(r);
        }
        const double mx = *std::max_element(score.begin(), score.end());
        double sum = 0;
        for (double& x : score) sum += (x = std::exp(x - mx));
        for (int d = 0; d < kD; ++d) {
          double o = 0;
          for (size_t i = 0; i < rows.size(); ++i) o += score[i] * Bf16ToFloat(v[rows[i] * row + kvh * kD + d]);
          out[(static_cast<size_t>(token) * c_.num_heads + h) * kD + d] = o / sum;
        }
      }
    }
    return out;
  }

  // The live sequences' rows of an output (others are never written), as
  // they are (bf16 bits, or the reference's float64 values).
  template <typename T>
  std::vector<T> LiveRows(const std::vector<T>& out) const {
    std::vector<T> f;
    for (size_t s = 0; s < c_.lens.size(); ++s) {
      if (c_.lens[s] == 0) continue;
      const size_t base = static_cast<size_t>(q_offsets_[s]) * c_.num_heads * kD;
      f.insert(f.end(), out.begin() + base, out.begin() + base + static_cast<size_t>(c_.num_heads) * kD);
    }
    return f;
  }
  // Each live sequence's newest V row, per query head (its KV head's), as
  // bf16 bits: a one-key window's output.
  std::vector<uint16_t> NewestValues(const std::vector<uint16_t>& v) const {
    std::vector<uint16_t> rows;
    const int group = c_.num_heads / c_.num_kv_heads;
    const size_t row = static_cast<size_t>(c_.num_kv_heads) * kD;
    for (size_t s = 0; s < c_.lens.size(); ++s) {
      if (c_.lens[s] == 0) continue;
      const size_t r = static_cast<size_t>(kv_rows_[q_offsets_[s]]);
      for (int h = 0; h < c_.num_heads; ++h)
        for (int d = 0; d < kD; ++d) rows.push_back(v[r * row + (h / group) * kD + d]);
    }
    return rows;
  }

 private:
  FusedCase c_;
  int width_ = 0, num_tokens_ = 0, num_blocks_ = 0;
  std::vector<uint16_t> pool_k_, pool_v_;
  std::vector<int> tables_, table_offsets_, q_offsets_, q_pos0_, kv_rows_, positions_;
  DeviceBuffer d_qkv_, d_q_norm_, d_k_norm_, d_positions_, d_token_slot_, d_kv_rows_, d_q_offsets_, d_q_pos0_,
      d_seq_slot_, d_tables_, d_table_offsets_, d_q_;
};

class DecodeFusedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  }

  // The three kernels, then the fused one at each split count, each on a
  // fresh pool.
  void Check(const FusedCase& c, std::initializer_list<int> splits) {
    FusedProblem prob(c);
    FusedProblem::Run three = prob.NewRun();
    const QkvRopeParams rope3 = prob.Rope(three);
    const AttentionParams attn3 = prob.Attention(three);
    ASSERT_EQ(LaunchQkvRope(rope3, nullptr), "");
    DeviceBuffer ws(DecodeWorkspaceBytes(static_cast<int>(c.lens.size()), c.num_heads, kD, 16));
    ASSERT_EQ(LaunchDecodeAttention(attn3, ws.as<void>(), 16, nullptr), "");
    CUDA_OK(cudaDeviceSynchronize());
    const std::vector<uint16_t> k3 = Download<uint16_t>(three.k), v3 = Download<uint16_t>(three.v);
    const std::vector<float> out3 = ToFloats(prob.LiveRows(Download<uint16_t>(three.out)));
    const std::vector<double> ref = prob.LiveRows(prob.Reference(k3, v3));
    const ErrorReport r3 = Compare(out3, ref);
    ASSERT_EQ(r3.num_not_finite, 0);
    for (int n : splits) {
      SCOPED_TRACE("splits " + std::to_string(n));
      FusedProblem::Run fused = prob.NewRun();
      ASSERT_EQ(FusedDecodeRefusal(prob.Rope(fused), prob.Attention(fused)), "");
      ASSERT_EQ(LaunchFusedDecode(prob.Rope(fused), prob.Attention(fused), n, nullptr), "");
      CUDA_OK(cudaDeviceSynchronize());
      // The cache: the very bits QKV-RoPE leaves (NaN rows included).
      EXPECT_TRUE(Download<uint16_t>(fused.k) == k3);
      EXPECT_TRUE(Download<uint16_t>(fused.v) == v3);
      const std::vector<uint16_t> out_bits = prob.LiveRows(Download<uint16_t>(fused.out));
      const std::vector<float> out = ToFloats(out_bits);
      const ErrorReport r = Compare(out, ref);
      EXPECT_EQ(r.num_not_finite, 0);
      EXPECT_LT(r.rel_error, 1e-2);
      // Every element within rounding of the split kernel's (both round P to
      // bf16, at different running maxima).
      float scale = 0.f, worst = 0.f;
      for (size_t i = 0; i < out.size(); ++i) {
        scale = std::max(scale, std::fabs(out3[i]));
        worst = std::max(worst, std::fabs(out[i] - out3[i]));
      }
      EXPECT_LE(worst, scale / 128) << "largest |fused - three kernels| " << worst << " of " << scale;
      // A window of one key: the output is that key's V row, exactly.
      if (c.window == 1) EXPECT_TRUE(prob.NewestValues(Download<uint16_t>(fused.v)) == out_bits);
      std::printf("fused decode: splits %d rel error %.2e (three kernels %.2e)\n", n, r.rel_error, r3.rel_error);
    }
  }
};

TEST_F(DecodeFusedTest, Sliding31BDepthsAroundEdges) {
  for (std::vector<int> lens : {std::vector<int>{1, 2}, {15, 16}, {17, 33}, {512, 1024}, {1025}, {1030, 3001}}) {
    Check({.lens = lens, .seed = static_cast<uint32_t>(lens[0])}, {1, 3, 8});
  }
}

TEST_F(DecodeFusedTest, BatchOneAtTheBenchmarksDepths) {
  Check({.lens = {512}, .seed = 3}, {8});
  Check({.lens = {8192}, .seed = 4}, {8});
}

TEST_F(DecodeFusedTest, PaddingSequencesAndOtherGroups) {
  Check({.lens = {700, 0}, .seed = 5}, {2, 8});
  Check({.lens = {0, 40}, .seed = 10}, {8});
  Check({.num_heads = 12, .num_kv_heads = 4, .window = 64, .lens = {200, 64}, .seed = 6}, {1, 5});
  Check({.num_heads = 12, .num_kv_heads = 4, .window = 64, .lens = {65}, .seed = 11}, {2});
  Check({.num_heads = 8, .num_kv_heads = 1, .window = 4096, .lens = {5000}, .seed = 7}, {8});
  Check({.num_heads = 8, .num_kv_heads = 4, .window = 128, .k_eq_v = true, .lens = {300, 129}, .seed = 8}, {4});
}

// GQA groups of 1, 4 and 7, split counts 6 and 7, paged blocks of 1, 32 and
// 256 rows, a partial RoPE, windows of 8 and of 1 (the output is then the
// newest V row, bit for bit).
TEST_F(DecodeFusedTest, GroupsBlocksRopeAndSmallWindows) {
  Check({.num_heads = 4, .num_kv_heads = 4, .lens = {300}, .seed = 12}, {6, 7});
  Check({.num_heads = 8, .num_kv_heads = 2, .block = 32, .lens = {777, 20}, .seed = 13}, {7});
  Check({.num_heads = 7, .num_kv_heads = 1, .block = 256, .lens = {1500}, .seed = 14}, {8});
  Check({.num_heads = 8, .num_kv_heads = 4, .block = 1, .lens = {90}, .seed = 15}, {3});
  Check({.rope_pairs = 32, .lens = {700}, .seed = 16}, {8});
  Check({.window = 8, .lens = {5, 100}, .seed = 17}, {1, 8});
  Check({.window = 1, .lens = {1, 64}, .seed = 18}, {1, 8});
}

// Captured once at depth 600, replayed with the sequence at other depths
// (the same buffers, new metadata): each replay gives the bits of a direct
// launch at that depth.
TEST_F(DecodeFusedTest, GraphReplaysAtOtherDepths) {
  FusedProblem prob({.lens = {600}, .seed = 9});
  FusedProblem::Run run = prob.NewRun();
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreate(&stream));
  const QkvRopeParams rope = prob.Rope(run);
  const AttentionParams attn = prob.Attention(run);
  // The newest row is left unwritten (kv_rows -1), so every launch sees the
  // same cache.
  const int no_row = -1;
  CUDA_OK(cudaMemcpy(const_cast<int*>(rope.kv_rows), &no_row, sizeof(int), cudaMemcpyHostToDevice));
  ASSERT_EQ(LaunchFusedDecode(rope, attn, 8, stream),
            "");  // sets the shared-memory limit outside capture
  CUDA_OK(cudaStreamSynchronize(stream));
  cudaGraph_t graph;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  ASSERT_EQ(LaunchFusedDecode(rope, attn, 8, stream), "");
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (int pos : {40, 300, 599}) {
    SCOPED_TRACE("position " + std::to_string(pos));
    CUDA_OK(cudaMemcpy(const_cast<int*>(attn.q_pos0), &pos, sizeof(int), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(run.out.as<void>(), 0xff, run.out.bytes()));
    CUDA_OK(cudaGraphLaunch(exec, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    const std::vector<uint16_t> replayed = Download<uint16_t>(run.out);
    const std::vector<float> rows = ToFloats(prob.LiveRows(replayed));
    EXPECT_TRUE(std::all_of(rows.begin(), rows.end(), [](float v) { return std::isfinite(v); }));
    CUDA_OK(cudaMemset(run.out.as<void>(), 0xff, run.out.bytes()));
    ASSERT_EQ(LaunchFusedDecode(rope, attn, 8, stream), "");
    CUDA_OK(cudaStreamSynchronize(stream));
    EXPECT_TRUE(Download<uint16_t>(run.out) == replayed);
  }
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
  CUDA_OK(cudaStreamDestroy(stream));
}

// What it does not serve is refused by name, before any launch.
TEST(DecodeFusedRefusal, NamesWhatItDoesNotServe) {
  alignas(16) static char buf[64];
  static int ints[4] = {0, 1, 0, 0};
  QkvRopeParams rope;
  rope.qkv = reinterpret_cast<const __nv_bfloat16*>(buf);
  rope.q_norm = rope.k_norm = reinterpret_cast<const float*>(buf);
  rope.kv_rows = ints;
  rope.num_heads = 32, rope.num_kv_heads = 16, rope.head_dim = 256, rope.rope_pairs = 128;
  AttentionParams a;
  a.out = reinterpret_cast<__nv_bfloat16*>(buf);
  a.k_cache = a.v_cache = buf;
  rope.k_cache = rope.v_cache = buf;
  a.num_heads = 32, a.num_kv_heads = 16, a.head_dim = 256, a.num_seqs = 1, a.max_q_len = 1, a.window = 1024;
  a.q_offsets = a.q_pos0 = a.block_tables = a.table_offsets = ints;
  a.block_size = 16;
  EXPECT_EQ(FusedDecodeRefusal(rope, a), "");
  auto refused = [&](auto edit, const std::string& what) {
    QkvRopeParams r2 = rope;
    AttentionParams a2 = a;
    edit(r2, a2);
    const std::string why = FusedDecodeRefusal(r2, a2);
    EXPECT_NE(why.find(what), std::string::npos) << why;
    EXPECT_NE(LaunchFusedDecode(r2, a2, 8, nullptr).find(what), std::string::npos);
  };
  refused([](QkvRopeParams&, AttentionParams& x) { x.kv_fp8 = true; }, "E4M3");
  refused([](QkvRopeParams& r, AttentionParams& x) { r.head_dim = x.head_dim = 512; }, "head_dim 512");
  refused([](QkvRopeParams&, AttentionParams& x) { x.block_tables = nullptr; }, "slot cache");
  refused([](QkvRopeParams&, AttentionParams& x) { x.max_q_len = 2; }, "max_q_len 2");
  refused([](QkvRopeParams& r, AttentionParams& x) { r.num_kv_heads = x.num_kv_heads = 2; },
          "32 query heads over 2 KV heads");
  refused([](QkvRopeParams&, AttentionParams& x) { x.num_seqs = kFusedDecodeMaxSeqs + 1; },
          std::to_string(kFusedDecodeMaxSeqs + 1) + " sequences");
  refused([](QkvRopeParams&, AttentionParams& x) { x.block_size = 12; }, "block_size 12");
  refused([](QkvRopeParams&, AttentionParams& x) { x.window = 0; }, "window 0");
  refused([](QkvRopeParams& r, AttentionParams&) { r.rope_pairs = 129; }, "rope_pairs 129");
  refused([](QkvRopeParams& r, AttentionParams&) { r.qkv = nullptr; }, "null pointer");
  refused([](QkvRopeParams&, AttentionParams& x) { x.length_aware = false; }, "length-unaware");
  refused([](QkvRopeParams& r, AttentionParams&) { r.num_heads = 16; }, "head counts that differ");
  refused(
      [](QkvRopeParams& r, AttentionParams& x) {
        r.num_heads = x.num_heads = 24;
        r.num_kv_heads = x.num_kv_heads = 16;
      },
      "24 query heads over 16 KV heads");
  refused([](QkvRopeParams& r, AttentionParams&) { r.k_cache = buf + 32; }, "different caches");
  refused(
      [](QkvRopeParams& r, AttentionParams& x) {
        r.k_cache = buf + 2;
        x.k_cache = buf + 2;
      },
      "16-byte aligned");
  refused([](QkvRopeParams&, AttentionParams& x) { x.window = kFusedDecodeMaxWindow + 1; },
          "window " + std::to_string(kFusedDecodeMaxWindow + 1));
  refused([](QkvRopeParams&, AttentionParams& x) { x.keys_from_values = reinterpret_cast<const float*>(buf); },
          "keys from values");
  EXPECT_NE(LaunchFusedDecode(rope, a, 9, nullptr).find("num_splits must be in [1, 8], got 9"), std::string::npos);
  EXPECT_EQ(FusedDecodeSplits(1, 16, 132), 8);
  EXPECT_EQ(FusedDecodeSplits(2, 16, 132), 4);
  EXPECT_EQ(FusedDecodeSplits(8, 16, 132), 1);
  EXPECT_EQ(FusedDecodeSplits(1, 1, 132), 8);
}

}  // namespace
}  // namespace gemma::kernels::testing
