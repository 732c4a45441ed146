#include "engine/cuda/device_weights.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/init/random_init.h"
#include "spdlog/spdlog.h"

namespace gemma::cuda {
namespace {

constexpr int64_t kAlignElements = 128;          // 256-byte aligned bf16 tensors
constexpr int64_t kStagingBytes = 64LL << 20;    // per pinned staging buffer
constexpr float kMatrixStd = 0.02f;

int64_t AlignUp(int64_t v) { return (v + kAlignElements - 1) / kAlignElements * kAlignElements; }

// Converts `count` elements starting at element `first` of a bf16/f16/f32
// tensor into bf16 bits or fp32.
void ConvertRange(const TensorRef& t, int64_t first, int64_t count, bool to_f32, void* dst) {
  const DType dt = t.info->dtype;
  const std::byte* src = t.data() + first * DTypeSize(dt);
  if (!to_f32 && dt == DType::kBF16) {
    std::memcpy(dst, src, count * 2);
    return;
  }
  for (int64_t i = 0; i < count; ++i) {
    float f;
    if (dt == DType::kF32) {
      std::memcpy(&f, src + 4 * i, 4);
    } else {
      uint16_t bits;
      std::memcpy(&bits, src + 2 * i, 2);
      f = dt == DType::kBF16 ? Bf16ToFloat(bits) : HalfToFloat(bits);
    }
    if (to_f32) {
      static_cast<float*>(dst)[i] = f;
    } else {
      static_cast<uint16_t*>(dst)[i] = FloatToBf16(f);
    }
  }
}

// Logs loading progress at most every two seconds.
class Progress {
 public:
  explicit Progress(int64_t total_bytes) : total_(total_bytes), start_(Clock::now()), last_(start_) {}
  void Add(int64_t bytes) {
    done_ += bytes;
    const auto now = Clock::now();
    if (now - last_ < std::chrono::seconds(2) && done_ < total_) return;
    last_ = now;
    const double secs = std::chrono::duration<double>(now - start_).count();
    const double rate = done_ / std::max(secs, 1e-9);
    spdlog::info("cuda: weights {:.2f}/{:.2f} GB, {:.2f} GB/s, ETA {:.0f} s", done_ / 1e9,
                 total_ / 1e9, rate / 1e9, (total_ - done_) / std::max(rate, 1.0));
  }

 private:
  using Clock = std::chrono::steady_clock;
  int64_t total_;
  int64_t done_ = 0;
  Clock::time_point start_, last_;
};

}  // namespace

// Assigns every source tensor a place in the two arenas. Pieces fused by rows
// (q|k|v, gate|up) sit back to back; every matrix starts 256-byte aligned.
class DeviceWeights::Planner {
 public:
  explicit Planner(std::vector<Piece>* pieces) : pieces_(pieces) {}
  int64_t Rows(const TensorRef* src, int64_t count) {  // appended to the current matrix
    pieces_->push_back({false, bf16_used_, count, src, 0.0f, kMatrixStd});
    const int64_t at = bf16_used_;
    bf16_used_ += count;
    return at;
  }
  int64_t Matrix(const TensorRef* src, int64_t count) {
    const int64_t at = Rows(src, count);
    EndMatrix();
    return at;
  }
  void EndMatrix() { bf16_used_ = AlignUp(bf16_used_); }
  int64_t Vector(const TensorRef* src, int64_t count, float mean, float stddev) {
    pieces_->push_back({true, f32_used_, count, src, mean, stddev});
    const int64_t at = f32_used_;
    f32_used_ = AlignUp(f32_used_ + count);
    return at;
  }
  int64_t bf16_used() const { return bf16_used_; }
  int64_t f32_used() const { return f32_used_; }

 private:
  std::vector<Piece>* pieces_;
  int64_t bf16_used_ = 0, f32_used_ = 0;
};

// Offsets (elements) of one layer's tensors in the arenas.
struct DeviceWeights::LayerOffsets {
  int64_t qkv, o, gate_up, down, qn, kn, in, post_attn, pre_ff, post_ff, scalar;
};

DeviceWeights::LayerOffsets DeviceWeights::PlanLayer(Planner& pl, const ModelConfig& c, int l,
                                                     const LayerWeights* lw) {
  const LayerSpec& s = c.layers[l];
  const int64_t h = c.hidden_size, inter = c.intermediate_size, d = s.head_dim;
  LayerOffsets o;
  o.qkv = pl.Rows(lw ? &lw->q_proj : nullptr, c.num_heads * d * h);
  pl.Rows(lw ? &lw->k_proj : nullptr, s.num_kv_heads * d * h);
  if (!s.k_eq_v) pl.Rows(lw ? &lw->v_proj : nullptr, s.num_kv_heads * d * h);
  pl.EndMatrix();
  o.o = pl.Matrix(lw ? &lw->o_proj : nullptr, h * c.num_heads * d);
  o.gate_up = pl.Rows(lw ? &lw->gate_proj : nullptr, inter * h);
  pl.Rows(lw ? &lw->up_proj : nullptr, inter * h);
  pl.EndMatrix();
  o.down = pl.Matrix(lw ? &lw->down_proj : nullptr, h * inter);
  o.qn = pl.Vector(lw ? &lw->q_norm : nullptr, d, 1.0f, 0.1f);
  o.kn = pl.Vector(lw ? &lw->k_norm : nullptr, d, 1.0f, 0.1f);
  o.in = pl.Vector(lw ? &lw->input_layernorm : nullptr, h, 1.0f, 0.1f);
  o.post_attn = pl.Vector(lw ? &lw->post_attention_layernorm : nullptr, h, 1.0f, 0.1f);
  o.pre_ff = pl.Vector(lw ? &lw->pre_feedforward_layernorm : nullptr, h, 1.0f, 0.1f);
  o.post_ff = pl.Vector(lw ? &lw->post_feedforward_layernorm : nullptr, h, 1.0f, 0.1f);
  o.scalar = pl.Vector(lw ? &lw->layer_scalar : nullptr, 1, 1.0f, 0.02f);
  return o;
}

void DeviceWeights::BindLayer(const ModelConfig& c, int l, const LayerOffsets& o) {
  const LayerSpec& s = c.layers[l];
  __nv_bfloat16* mb = bf16_.get<__nv_bfloat16>();
  float* fb = f32_.get<float>();
  DeviceLayer& d = layers_[l];
  d.qkv = mb + o.qkv;
  d.qkv_rows = (c.num_heads + s.num_kv_heads * (s.k_eq_v ? 1 : 2)) * s.head_dim;
  d.o_proj = mb + o.o;
  d.gate_up = mb + o.gate_up;
  d.down_proj = mb + o.down;
  d.q_norm = fb + o.qn;
  d.k_norm = fb + o.kn;
  d.input_norm = fb + o.in;
  d.post_attention_norm = fb + o.post_attn;
  d.pre_feedforward_norm = fb + o.pre_ff;
  d.post_feedforward_norm = fb + o.post_ff;
  d.layer_scalar = fb + o.scalar;
}

absl::Status DeviceWeights::Plan(const ModelConfig& c, const ModelWeights* w) {
  Planner pl(&pieces_);
  const int64_t embed = pl.Matrix(w ? &w->embed_tokens : nullptr, int64_t{c.vocab_size} * c.hidden_size);
  const int64_t final_norm = pl.Vector(w ? &w->final_norm : nullptr, c.hidden_size, 1.0f, 0.1f);
  std::vector<LayerOffsets> offsets;
  for (int l = 0; l < c.num_layers; ++l) offsets.push_back(PlanLayer(pl, c, l, w ? &w->layers[l] : nullptr));
  GEMMA_STATUS_RETURN_IF_ERROR(bf16_.Allocate(pl.bf16_used() * 2));
  GEMMA_STATUS_RETURN_IF_ERROR(f32_.Allocate(pl.f32_used() * 4));
  embed_ = bf16_.get<__nv_bfloat16>() + embed;
  final_norm_ = f32_.get<float>() + final_norm;
  layers_.resize(c.num_layers);
  for (int l = 0; l < c.num_layers; ++l) BindLayer(c, l, offsets[l]);
  return absl::OkStatus();
}

absl::Status DeviceWeights::CopyPieces(cudaStream_t stream) {
  DeviceBuffer staging[2];
  cudaEvent_t done[2] = {nullptr, nullptr};
  for (int i = 0; i < 2; ++i) {
    GEMMA_STATUS_RETURN_IF_ERROR(staging[i].Allocate(kStagingBytes, /*pinned=*/true));
    GEMMA_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&done[i], cudaEventDisableTiming));
  }
  int64_t total = 0;
  for (const Piece& p : pieces_) total += p.count * (p.f32 ? 4 : 2);
  Progress progress(total);
  absl::Status status;
  int turn = 0;
  for (const Piece& p : pieces_) {
    const int64_t esize = p.f32 ? 4 : 2;
    char* base = p.f32 ? f32_.get<char>() : bf16_.get<char>();
    for (int64_t first = 0; first < p.count && status.ok(); first += kStagingBytes / esize) {
      const int64_t n = std::min(p.count - first, kStagingBytes / esize);
      status.Update(CudaStatus(cudaEventSynchronize(done[turn]), "cudaEventSynchronize"));
      ConvertRange(*p.source, first, n, p.f32, staging[turn].get());
      status.Update(CudaStatus(cudaMemcpyAsync(base + (p.offset + first) * esize, staging[turn].get(),
                                               n * esize, cudaMemcpyHostToDevice, stream),
                               "weight upload"));
      status.Update(CudaStatus(cudaEventRecord(done[turn], stream), "cudaEventRecord"));
      turn ^= 1;
      progress.Add(n * esize);
    }
  }
  status.Update(CudaStatus(cudaStreamSynchronize(stream), "weight upload sync"));
  for (cudaEvent_t e : done) cudaEventDestroy(e);
  return status;
}

absl::Status DeviceWeights::FillRandom(uint64_t seed, cudaStream_t stream) {
  for (size_t i = 0; i < pieces_.size(); ++i) {
    const Piece& p = pieces_[i];
    kernels::RandomFillParams rp;
    rp.count = p.count;
    rp.seed = seed * 1000003ULL + i;
    rp.mean = p.mean;
    rp.stddev = p.stddev;
    if (p.f32) {
      rp.out_f32 = f32_.get<float>() + p.offset;
    } else {
      rp.out_bf16 = bf16_.get<__nv_bfloat16>() + p.offset;
    }
    GEMMA_KERNEL_RETURN_IF_ERROR(kernels::LaunchRandomFill(rp, stream));
  }
  return CudaStatus(cudaStreamSynchronize(stream), "random weights");
}

absl::StatusOr<std::unique_ptr<DeviceWeights>> DeviceWeights::Upload(const ModelConfig& config,
                                                                     const ModelWeights& weights,
                                                                     cudaStream_t stream) {
  std::unique_ptr<DeviceWeights> dw(new DeviceWeights());
  GEMMA_STATUS_RETURN_IF_ERROR(dw->Plan(config, &weights));
  GEMMA_STATUS_RETURN_IF_ERROR(dw->CopyPieces(stream));
  return dw;
}

absl::StatusOr<std::unique_ptr<DeviceWeights>> DeviceWeights::Random(const ModelConfig& config,
                                                                     uint64_t seed,
                                                                     cudaStream_t stream) {
  std::unique_ptr<DeviceWeights> dw(new DeviceWeights());
  GEMMA_STATUS_RETURN_IF_ERROR(dw->Plan(config, nullptr));
  GEMMA_STATUS_RETURN_IF_ERROR(dw->FillRandom(seed, stream));
  spdlog::info("cuda: random weights, {:.2f} GB on the device", dw->bytes() / 1e9);
  return dw;
}

}  // namespace gemma::cuda
