#include "tests/kernels/attention/attention_case.h"

#include <cuda_fp8.h>

#include <algorithm>

namespace gemma::kernels::testing {
namespace {

std::vector<uint16_t> RandomBf16(size_t n, float range, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-range, range);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = FloatToBf16(dist(rng));
  return v;
}

template <typename T>
DeviceBuffer Upload(const std::vector<T>& host) {
  DeviceBuffer d(host.size() * sizeof(T));
  if (d.as<void>() != nullptr)
    cudaMemcpy(d.as<void>(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
  return d;
}

bool RotatedDim(int d, int head_dim, int rope_pairs) {
  return d < rope_pairs || (d >= head_dim / 2 && d < head_dim / 2 + rope_pairs);
}

}  // namespace

AttentionProblem::AttentionProblem(const AttentionCase& c) : c_(c) {
  std::mt19937 rng(c.seed);
  offsets_.push_back(0);
  for (int len : c.q_lens) offsets_.push_back(offsets_.back() + len);
  const size_t q_elems = static_cast<size_t>(num_tokens()) * c.num_heads * c.head_dim;
  const size_t kv_elems =
      static_cast<size_t>(c.num_slots) * c.capacity * c.num_kv_heads * c.head_dim;
  q_ = RandomBf16(q_elems, c.q_range, rng);
  k_ = RandomBf16(kv_elems, 1.0f, rng);
  v_ = RandomBf16(kv_elems, 1.0f, rng);
  if (c.e4m3_values) {
    for (auto* kv : {&k_, &v_}) {
      for (uint16_t& x : *kv) x = FloatToBf16(float(__nv_fp8_e4m3(Bf16ToFloat(x))));
    }
  }
  if (c.keys_from_values_pairs >= 0) {
    // E4M3 values: powers of two, so that w * V is one too.
    std::uniform_real_distribution<float> wdist(0.25f, 2.0f);
    std::uniform_int_distribution<int> pow2(0, 2);
    std::vector<float> w(c.head_dim);
    for (float& x : w) x = c.e4m3_values ? static_cast<float>(1 << pow2(rng)) : wdist(rng);
    for (size_t row = 0; row < k_.size() / c.head_dim; ++row) {
      for (int d = 0; d < c.head_dim; ++d) {
        if (RotatedDim(d, c.head_dim, c.keys_from_values_pairs)) continue;
        const size_t e = row * c.head_dim + d;
        k_[e] = FloatToBf16(w[d] * Bf16ToFloat(v_[e]));
      }
    }
    d_kv_weight_ = Upload(w);
    kv_weight_ = std::move(w);
  }
  if (c.poison_unused_cache) {
    // Mark every cache index some sequence reads as live; the rest is NaN.
    std::vector<char> live(static_cast<size_t>(c.num_slots) * c.capacity, 0);
    for (size_t i = 0; i < c.q_lens.size(); ++i) {
      const int hi = c.q_pos0[i] + c.q_lens[i];
      const int lo = c.window > 0 ? std::max(0, c.q_pos0[i] - c.window + 1) : 0;
      for (int u = lo; u < hi; ++u)
        live[static_cast<size_t>(c.slots[i]) * c.capacity + (c.ring ? u % c.capacity : u)] = 1;
    }
    for (size_t row = 0; row < live.size(); ++row) {
      if (live[row]) continue;
      for (int e = 0; e < c.num_kv_heads * c.head_dim; ++e) {
        k_[row * c.num_kv_heads * c.head_dim + e] = 0x7fc0;
        v_[row * c.num_kv_heads * c.head_dim + e] = 0x7fc0;
      }
    }
  }
  d_q_ = Upload(q_);
  d_k_ = Upload(k_);
  d_v_ = Upload(v_);
  d_out_ = DeviceBuffer(q_elems * 2);
  d_slot_ = Upload(c.slots);
  d_offsets_ = Upload(offsets_);
  d_pos0_ = Upload(c.q_pos0);
}

AttentionParams AttentionProblem::Params() const {
  AttentionParams p;
  p.q = d_q_.as<__nv_bfloat16>();
  p.out = d_out_.as<__nv_bfloat16>();
  p.k_cache = d_k_.as<__nv_bfloat16>();
  p.v_cache = d_v_.as<__nv_bfloat16>();
  p.num_slots = c_.num_slots;
  p.capacity = c_.capacity;
  p.ring = c_.ring;
  p.num_heads = c_.num_heads;
  p.num_kv_heads = c_.num_kv_heads;
  p.head_dim = c_.head_dim;
  p.window = c_.window;
  p.scale = 1.0f;
  p.num_seqs = static_cast<int>(c_.q_lens.size());
  p.seq_slot = d_slot_.as<int>();
  p.q_offsets = d_offsets_.as<int>();
  p.q_pos0 = d_pos0_.as<int>();
  p.max_q_len = *std::max_element(c_.q_lens.begin(), c_.q_lens.end());
  return p;
}

AttentionParams AttentionProblem::PagedParams(int block_size) {
  std::mt19937 rng(c_.seed + 99);
  const size_t row_elems = static_cast<size_t>(c_.num_kv_heads) * c_.head_dim;
  std::vector<int> tables, table_offsets;
  int num_blocks = 0;
  for (size_t i = 0; i < c_.q_lens.size(); ++i) {
    table_offsets.push_back(static_cast<int>(tables.size()));
    const int end = c_.q_pos0[i] + c_.q_lens[i];
    for (int b = 0; b * block_size < end; ++b) tables.push_back(num_blocks++);
  }
  // Scramble which pool block backs which table entry.
  std::vector<int> perm(num_blocks);
  for (int b = 0; b < num_blocks; ++b) perm[b] = b;
  std::shuffle(perm.begin(), perm.end(), rng);
  for (int& t : tables) t = perm[t];
  std::vector<uint16_t> pk(static_cast<size_t>(num_blocks) * block_size * row_elems, 0x7fc0);
  std::vector<uint16_t> pv(pk.size(), 0x7fc0);
  for (size_t i = 0; i < c_.q_lens.size(); ++i) {
    const int end = c_.q_pos0[i] + c_.q_lens[i];
    const int lo = c_.window > 0 ? std::max(0, c_.q_pos0[i] - c_.window + 1) : 0;
    for (int u = lo; u < end; ++u) {
      const size_t src = CacheIndex(c_.slots[i], c_.ring ? u % c_.capacity : u, 0);
      const size_t dst = (static_cast<size_t>(tables[table_offsets[i] + u / block_size]) * block_size +
                          u % block_size) * row_elems;
      std::copy_n(k_.begin() + src, row_elems, pk.begin() + dst);
      std::copy_n(v_.begin() + src, row_elems, pv.begin() + dst);
    }
    for (int b = 0; b < lo / block_size; ++b) tables[table_offsets[i] + b] = -1;  // left the window
  }
  d_paged_k_ = Upload(pk);
  d_paged_v_ = Upload(pv);
  d_tables_ = Upload(tables);
  d_table_offsets_ = Upload(table_offsets);
  AttentionParams p = Params();
  p.k_cache = d_paged_k_.as<__nv_bfloat16>();
  p.v_cache = d_paged_v_.as<__nv_bfloat16>();
  p.ring = false;
  p.seq_slot = nullptr;
  p.block_tables = d_tables_.as<int>();
  p.table_offsets = d_table_offsets_.as<int>();
  p.block_size = block_size;
  p.num_blocks = num_blocks;
  return p;
}

AttentionParams AttentionProblem::Fp8(const AttentionParams& p) {
  const size_t rows = p.block_tables != nullptr ? static_cast<size_t>(p.num_blocks) * p.block_size
                                                : static_cast<size_t>(p.num_slots) * p.capacity;
  const size_t n = rows * p.num_kv_heads * p.head_dim;
  auto convert = [&](const void* bf16) {
    std::vector<uint16_t> host(n);
    std::vector<uint8_t> codes(n);
    cudaMemcpy(host.data(), bf16, n * 2, cudaMemcpyDeviceToHost);
    for (size_t i = 0; i < n; ++i) {
      const float f = Bf16ToFloat(host[i]);
      const __nv_fp8_e4m3 e(f);
      // Exact by construction (NaN poison stays NaN).
      EXPECT_TRUE(std::isnan(f) || float(e) == f) << "element " << i << " = " << f << " is no E4M3 value";
      codes[i] = e.__x;
    }
    return Upload(codes);
  };
  d_k8_ = convert(p.k_cache);
  d_v8_ = convert(p.v_cache);
  AttentionParams f = p;
  f.k_cache = d_k8_.as<void>();
  f.v_cache = d_v8_.as<void>();
  f.kv_fp8 = true;
  return f;
}

AttentionParams AttentionProblem::KeysFromValues(const AttentionParams& p, bool poison_unrotated_keys) {
  EXPECT_GE(c_.keys_from_values_pairs, 0) << "the case has no keys_from_values_pairs";
  AttentionParams f = p;
  f.keys_from_values = d_kv_weight_.as<float>();
  f.rope_pairs = c_.keys_from_values_pairs;
  if (!poison_unrotated_keys) return f;
  const size_t rows = p.block_tables != nullptr ? static_cast<size_t>(p.num_blocks) * p.block_size
                                                : static_cast<size_t>(p.num_slots) * p.capacity;
  const size_t n = rows * p.num_kv_heads * p.head_dim;
  auto poison = [&](auto nan) {  // bf16 0x7fc0 or E4M3 0x7f
    std::vector<decltype(nan)> host(n);
    cudaMemcpy(host.data(), p.k_cache, n * sizeof(nan), cudaMemcpyDeviceToHost);
    for (size_t i = 0; i < n; ++i) {
      if (!RotatedDim(static_cast<int>(i % p.head_dim), p.head_dim, f.rope_pairs)) host[i] = nan;
    }
    d_k_poisoned_ = Upload(host);
  };
  if (p.kv_fp8) {
    poison(uint8_t{0x7f});
  } else {
    poison(uint16_t{0x7fc0});
  }
  f.k_cache = d_k_poisoned_.as<void>();
  return f;
}

cudaError_t AttentionProblem::Poison() const {
  return cudaMemset(d_out_.as<void>(), 0xff, d_out_.bytes());  // bf16 0xffff is NaN
}

std::vector<float> AttentionProblem::Output() const {
  std::vector<uint16_t> raw(d_out_.bytes() / 2);
  std::vector<float> out(raw.size(), NAN);
  if (cudaMemcpy(raw.data(), d_out_.as<void>(), d_out_.bytes(), cudaMemcpyDeviceToHost) !=
      cudaSuccess)
    return out;
  for (size_t i = 0; i < raw.size(); ++i) out[i] = Bf16ToFloat(raw[i]);
  return out;
}

cudaError_t AttentionProblem::SetPositions(const std::vector<int>& q_pos0) {
  c_.q_pos0 = q_pos0;
  return cudaMemcpy(d_pos0_.as<void>(), q_pos0.data(), q_pos0.size() * sizeof(int),
                    cudaMemcpyHostToDevice);
}

size_t AttentionProblem::NewestRow(int i) const {
  const int u = c_.q_pos0[i] + c_.q_lens[i] - 1;
  return CacheIndex(c_.slots[i], c_.ring ? u % c_.capacity : u, 0);
}

size_t AttentionProblem::CacheIndex(int slot, int idx, int kv_head) const {
  return ((static_cast<size_t>(slot) * c_.capacity + idx) * c_.num_kv_heads + kv_head) *
         c_.head_dim;
}

std::vector<double> AttentionProblem::Reference() const {
  const int D = c_.head_dim, H = c_.num_heads, group = c_.num_heads / c_.num_kv_heads;
  std::vector<double> ref(static_cast<size_t>(num_tokens()) * H * D, 0.0);
  std::vector<double> scores, qf(D);
  for (size_t i = 0; i < c_.q_lens.size(); ++i) {
    for (int j = 0; j < c_.q_lens[i]; ++j) {
      const int t = c_.q_pos0[i] + j;
      const int lo = c_.window > 0 ? std::max(0, t - c_.window + 1) : 0;
      for (int h = 0; h < H; ++h) {
        const size_t row = (static_cast<size_t>(offsets_[i] + j) * H + h) * D;
        for (int d = 0; d < D; ++d) qf[d] = Bf16ToFloat(q_[row + d]);
        scores.assign(t - lo + 1, 0.0);
        double mx = -INFINITY;
        for (int u = lo; u <= t; ++u) {
          const size_t kr = CacheIndex(c_.slots[i], c_.ring ? u % c_.capacity : u, h / group);
          double s = 0;
          for (int d = 0; d < D; ++d) {
            // A k_eq_v cache: the math's key is w * V, of which K holds the
            // bf16 rounding in its unrotated dims.
            const bool from_v = !kv_weight_.empty() && !RotatedDim(d, D, c_.keys_from_values_pairs);
            s += qf[d] * (from_v ? double(kv_weight_[d]) * Bf16ToFloat(v_[kr + d]) : Bf16ToFloat(k_[kr + d]));
          }
          scores[u - lo] = s;  // scale 1.0
          mx = std::max(mx, s);
        }
        double sum = 0;
        for (double& s : scores) sum += (s = std::exp(s - mx));
        for (int u = lo; u <= t; ++u) {
          const size_t vr = CacheIndex(c_.slots[i], c_.ring ? u % c_.capacity : u, h / group);
          const double w = scores[u - lo] / sum;
          for (int d = 0; d < D; ++d) ref[row + d] += w * Bf16ToFloat(v_[vr + d]);
        }
      }
    }
  }
  return ref;
}

ErrorReport Compare(const std::vector<float>& out, const std::vector<double>& ref) {
  ErrorReport r;
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (i >= out.size() || !std::isfinite(out[i])) {
      ++r.num_not_finite;
      continue;
    }
    num += (out[i] - ref[i]) * (out[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  r.rel_error = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  return r;
}

}  // namespace gemma::kernels::testing
