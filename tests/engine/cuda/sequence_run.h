// One sequence through a backend the way the CPU-reference parity tests
// drive it: identity block tables (the CPU backend is paged; the CUDA
// backend's slot caches ignore them), all prompt logits then one row per
// decode step, the CPU's own greedy continuation, and the row comparison
// (relative error bound, argmax where the reference's top-2 margin is at
// least 0.1).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "engine/core/backend.h"
#include "tests/common/gpu_test_util.h"

namespace gemma::gpu_test {

// Blocks 0 .. n - 1 (n <= 65536).
inline std::span<const int32_t> IdentityBlocks(int n) {
  static const std::vector<int32_t> blocks = [] {
    std::vector<int32_t> b(1 << 16);
    for (int i = 0; i < static_cast<int>(b.size()); ++i) b[i] = i;
    return b;
  }();
  return std::span<const int32_t>(blocks).first(n);
}

// A chunk of slot 0 with identity tables of `context` one-token blocks.
inline SequenceChunk IdentityChunk(std::span<const int32_t> ids, int32_t start, bool all_logits, int context) {
  SequenceChunk c{0, ids, start, all_logits, {}, {}};
  c.return_logits = true;  // the parity tests compare logits
  c.global_blocks = IdentityBlocks(context);
  c.sliding_blocks = IdentityBlocks(context);
  return c;
}

// All prompt logits, then one row per token of `feed`, fed back one decode
// step at a time.
inline std::vector<float> PrefillThenDecode(Backend& b, const std::vector<int32_t>& prompt,
                                            const std::vector<int32_t>& feed, int context) {
  ForwardResult out;
  SequenceChunk c = IdentityChunk(prompt, 0, true, context);
  EXPECT_TRUE(b.Forward({&c, 1}, {}, &out).ok());
  std::vector<float> rows = out.logits;
  for (size_t s = 0; s < feed.size(); ++s) {
    SequenceChunk d = IdentityChunk({&feed[s], 1}, int32_t(prompt.size() + s), false, context);
    EXPECT_TRUE(b.Forward({&d, 1}, {}, &out).ok());
    rows.insert(rows.end(), out.logits.begin(), out.logits.end());
  }
  return rows;
}

// `steps` greedy tokens of `b` after `prompt` (slot 0, reset afterwards).
inline std::vector<int32_t> GreedyContinuation(Backend& b, const std::vector<int32_t>& prompt, int steps,
                                               int context) {
  std::vector<int32_t> feed(steps, prompt.back());
  ForwardResult out;
  SequenceChunk c = IdentityChunk(prompt, 0, false, context);
  const absl::Status st = b.Forward({&c, 1}, {}, &out);
  EXPECT_TRUE(st.ok()) << st;
  for (int s = 0; s < steps && st.ok(); ++s) {
    feed[s] = int32_t(std::max_element(out.logits.begin(), out.logits.end()) - out.logits.begin());
    SequenceChunk d = IdentityChunk({&feed[s], 1}, int32_t(prompt.size()) + s, false, context);
    EXPECT_TRUE(b.Forward({&d, 1}, {}, &out).ok());
  }
  b.ResetSlot(0);
  return feed;
}

// Every row of `got` within `tol` of `ref` (relative error) and on its
// argmax where the reference's margin is >= 0.1; returns the worst error.
inline double ExpectRowsMatch(const std::vector<float>& got, const std::vector<float>& ref, int vocab, double tol) {
  EXPECT_EQ(got.size(), ref.size());
  double worst = 0;
  for (size_t r = 0; r < std::min(got.size(), ref.size()) / vocab; ++r) {
    const float* g = got.data() + r * vocab;
    const float* e = ref.data() + r * vocab;
    const double err = RelErrPtr(g, e, vocab);
    worst = std::max(worst, err);
    EXPECT_LT(err, tol) << "row " << r;
    std::vector<float> top(e, e + vocab);
    std::partial_sort(top.begin(), top.begin() + 2, top.end(), std::greater<float>());
    if (top[0] - top[1] >= 0.1f) {
      EXPECT_EQ(std::max_element(g, g + vocab) - g, std::max_element(e, e + vocab) - e) << "row " << r;
    }
  }
  return worst;
}

}  // namespace gemma::gpu_test
