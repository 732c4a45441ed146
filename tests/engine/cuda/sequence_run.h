// One sequence through a backend the way the CPU-reference parity tests
// drive it: block tables as the engine keeps them (engine/core/slot_tables.h;
// both backends are paged), all prompt logits then one row per decode step,
// the CPU's own greedy continuation, and the row comparison (relative error
// bound, argmax where the reference's top-2 margin is at least 0.1). The
// whole prompt goes in one Forward: a CUDA backend needs max_tokens_per_step
// >= the prompt, so its sliding pool holds it.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "engine/core/backend.h"
#include "engine/core/slot_tables.h"
#include "tests/common/gpu_test_util.h"

namespace gemma::gpu_test {

// Slot 0's next chunk: `ids` after what `tables` holds, with logits.
inline SequenceChunk NextChunk(const SlotTables& tables, std::span<const int32_t> ids, bool all_logits) {
  SequenceChunk c{0, ids, tables.length(0), all_logits};
  c.return_logits = true;  // the parity tests compare logits
  return c;
}

// All prompt logits, then one row per token of `feed`, fed back one decode
// step at a time.
inline std::vector<float> PrefillThenDecode(Backend& b, const std::vector<int32_t>& prompt,
                                            const std::vector<int32_t>& feed) {
  auto tables = SlotTables::For(b);
  EXPECT_TRUE(tables.ok()) << tables.status();
  if (!tables.ok()) return {};
  ForwardResult out;
  SequenceChunk c = NextChunk(*tables, prompt, true);
  absl::Status st = tables->Forward(b, {&c, 1}, {}, &out);
  EXPECT_TRUE(st.ok()) << st;
  std::vector<float> rows = out.logits;
  for (size_t s = 0; s < feed.size() && st.ok(); ++s) {
    SequenceChunk d = NextChunk(*tables, {&feed[s], 1}, false);
    st = tables->Forward(b, {&d, 1}, {}, &out);
    EXPECT_TRUE(st.ok()) << st;
    rows.insert(rows.end(), out.logits.begin(), out.logits.end());
  }
  return rows;
}

// `steps` greedy tokens of `b` after `prompt`.
inline std::vector<int32_t> GreedyContinuation(Backend& b, const std::vector<int32_t>& prompt, int steps) {
  std::vector<int32_t> feed(steps, prompt.back());
  auto tables = SlotTables::For(b);
  EXPECT_TRUE(tables.ok()) << tables.status();
  if (!tables.ok()) return feed;
  ForwardResult out;
  SequenceChunk c = NextChunk(*tables, prompt, false);
  absl::Status st = tables->Forward(b, {&c, 1}, {}, &out);
  EXPECT_TRUE(st.ok()) << st;
  for (int s = 0; s < steps && st.ok(); ++s) {
    feed[s] = int32_t(std::max_element(out.logits.begin(), out.logits.end()) - out.logits.begin());
    SequenceChunk d = NextChunk(*tables, {&feed[s], 1}, false);
    st = tables->Forward(b, {&d, 1}, {}, &out);
    EXPECT_TRUE(st.ok()) << st;
  }
  return feed;
}

// Every row of `got` within `tol` of `ref` (relative error) and on its
// argmax where the reference's top-2 margin is at least 0.1 and at least six
// times the row's RMS deviation: a flip needs the deviations of two logits to
// add up past the margin, and bf16 compute deviates by ~0.05 on logits of
// ~13 (an H200 flipped a 0.134 margin at a 0.019 row error). At least half
// the rows must keep the check. Returns the worst error.
inline double ExpectRowsMatch(const std::vector<float>& got, const std::vector<float>& ref, int vocab, double tol) {
  EXPECT_EQ(got.size(), ref.size());
  double worst = 0;
  size_t rows = std::min(got.size(), ref.size()) / vocab, checked = 0;
  for (size_t r = 0; r < rows; ++r) {
    const float* g = got.data() + r * vocab;
    const float* e = ref.data() + r * vocab;
    const double err = RelErrPtr(g, e, vocab);
    worst = std::max(worst, err);
    EXPECT_LT(err, tol) << "row " << r;
    double dev2 = 0;
    for (int i = 0; i < vocab; ++i) dev2 += double(g[i] - e[i]) * double(g[i] - e[i]);
    const double margin_floor = std::max(0.1, 6.0 * std::sqrt(dev2 / vocab));
    std::vector<float> top(e, e + vocab);
    std::partial_sort(top.begin(), top.begin() + 2, top.end(), std::greater<float>());
    if (top[0] - top[1] >= margin_floor) {
      ++checked;
      const int64_t gi = std::max_element(g, g + vocab) - g, ei = std::max_element(e, e + vocab) - e;
      EXPECT_EQ(gi, ei) << "row " << r << ": reference margin " << top[0] - top[1] << ", token " << ei
                        << " reference " << e[ei] << " got " << g[ei] << ", token " << gi << " reference "
                        << e[gi] << " got " << g[gi] << " (floor " << margin_floor << ")";
    }
  }
  std::printf("argmax held on %zu of %zu rows\n", checked, rows);
  // Most rows keep the check (87 % of the long-context rows and at least 42
  // of 48 head-dim rows when measured): deviations large enough to lift the
  // floor over most margins would make it say nothing.
  EXPECT_GE(2 * checked, rows) << "the argmax check covered too few rows";
  return worst;
}

}  // namespace gemma::gpu_test
