// The host twin of device sampling (kernels/sampling/sample.h): the same
// truncation rule and the same counter-based Gumbel noise, so a backend
// without a device can draw as the device does (Backend::Forward's rows)
// and tests can check the kernel against it.
#pragma once

#include <cstdint>
#include <span>

#include "kernels/sampling/sample_row.h"

namespace gemma {

// One sequence's sampling (Backend::Forward's rows): the kernels' plain
// struct, so engine and device share one definition. y = logits /
// temperature truncated by top-k, then top-p, then min-p, drawn with
// counter-based noise from (seed, step), so a draw depends on nothing else
// (kernels/sampling/sample.h has the exact rule).
using RowSampling = kernels::SampleRowParams;
// Greedy (argmax, lowest id on ties): temperature below 1e-5, 0 included.
using kernels::IsGreedy;

// The token drawn from one row of fp32 logits.
int32_t SampleRow(std::span<const float> logits, const RowSampling& row);

}  // namespace gemma
