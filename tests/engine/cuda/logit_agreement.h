// Row-by-row comparison of logits against a reference (the quality tests of
// the quantized weight paths): relative error per row (mean, worst) and top-1
// agreement on the rows where the reference is confident (top-2 margin at
// least `margin_floor` logits).
#pragma once

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "tests/common/gpu_test_util.h"

namespace gemma::gpu_test {

inline int Argmax(const float* row, int vocab) { return int(std::max_element(row, row + vocab) - row); }

struct Agreement {
  double worst = 0, sum = 0;
  int rows = 0, confident = 0, agree = 0;
  void Add(const float* got, const float* ref, int vocab, double margin_floor) {
    const double err = RelErrPtr(got, ref, vocab);
    worst = std::max(worst, err);
    sum += err;
    ++rows;
    std::vector<float> top(ref, ref + vocab);
    std::partial_sort(top.begin(), top.begin() + 2, top.end(), std::greater<float>());
    if (top[0] - top[1] < margin_floor) return;
    ++confident;
    agree += Argmax(got, vocab) == Argmax(ref, vocab);
  }
  double mean() const { return sum / std::max(rows, 1); }
  // "<tag> <what>: rows N, row rel. error mean M worst W, top-1 agreement A/C confident rows"
  void Print(const std::string& tag, const std::string& what) const {
    std::printf("%s %s: rows %d, row rel. error mean %.4f worst %.4f, top-1 agreement %d/%d confident rows\n",
                tag.c_str(), what.c_str(), rows, mean(), worst, agree, confident);
  }
};

}  // namespace gemma::gpu_test
