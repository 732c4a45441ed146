#include "engine/cuda/device_weights.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/model/status_macros.h"
#include "kernels/gemv/gemv.h"
#include "kernels/init/random_init.h"
#include "kernels/quant/fp8_quant.h"
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

// Assigns every source tensor a place in the arenas. Pieces fused by rows
// (q|k|v, gate|up) sit back to back (their fp8 row scales too); every matrix
// starts 256-byte aligned.
class DeviceWeights::Planner {
 public:
  Planner(std::vector<Piece>* pieces, bool fp8) : pieces_(pieces), fp8_(fp8) {}
  // Whether the next matrices' rows go to the deferred space (set per matrix).
  void set_deferring(bool on) { deferring_ = on; }
  // Appends `count` elements (rows of `cols`) to the current linear-layer matrix.
  int64_t Rows(const TensorRef* src, const TensorRef* scale, int64_t count, int cols) {
    if (deferring_) {
      const int64_t at = deferred_used_;
      pieces_->push_back({Arena::kDeferred, at, count, cols, 0, src, nullptr, 0.0f, kMatrixStd});
      deferred_used_ += count;
      return at;
    }
    if (!fp8_) return Bf16Rows(src, count);
    const int64_t at = fp8_used_;
    const TensorRef* scale_src = scale && scale->info ? scale : nullptr;
    pieces_->push_back({Arena::kFp8, at, count, cols, f32_used_, src, scale_src, 0.0f, kMatrixStd});
    fp8_used_ += count;
    f32_used_ += count / cols;
    return at;
  }
  int64_t Bf16Matrix(const TensorRef* src, int64_t count) {
    const int64_t at = Bf16Rows(src, count);
    EndMatrix();
    return at;
  }
  // Where the next matrix's rows (and fp8 row scales) will start.
  std::pair<int64_t, int64_t> Next() const {
    return {deferring_ ? deferred_used_ : fp8_ ? fp8_used_ : bf16_used_, f32_used_};
  }
  void EndMatrix() {
    bf16_used_ = AlignUp(bf16_used_);
    deferred_used_ = AlignUp(deferred_used_);
    fp8_used_ = (fp8_used_ + 255) / 256 * 256;  // bytes
    f32_used_ = AlignUp(f32_used_);
  }
  int64_t Vector(const TensorRef* src, int64_t count, float mean, float stddev) {
    pieces_->push_back({Arena::kF32, f32_used_, count, 0, 0, src, nullptr, mean, stddev});
    const int64_t at = f32_used_;
    f32_used_ = AlignUp(f32_used_ + count);
    return at;
  }
  int64_t bf16_used() const { return bf16_used_; }
  int64_t f32_used() const { return f32_used_; }
  int64_t fp8_used() const { return fp8_used_; }

 private:
  int64_t Bf16Rows(const TensorRef* src, int64_t count) {
    pieces_->push_back({Arena::kBf16, bf16_used_, count, 0, 0, src, nullptr, 0.0f, kMatrixStd});
    const int64_t at = bf16_used_;
    bf16_used_ += count;
    return at;
  }
  std::vector<Piece>* pieces_;
  bool fp8_;
  bool deferring_ = false;
  int64_t bf16_used_ = 0, f32_used_ = 0, fp8_used_ = 0, deferred_used_ = 0;
};

// A linear-layer matrix's data offset (bf16 or fp8 arena, or the deferred
// space) and, for fp8, its row scales' offset in the f32 arena.
struct DeviceWeights::MatrixOffsets {
  int64_t data = 0, scale = 0;
  bool deferred = false;
};

// Offsets (elements) of one layer's tensors in the arenas.
struct DeviceWeights::LayerOffsets {
  MatrixOffsets qkv, o, gate_up, down;
  int64_t qn, kn, in, post_attn, pre_ff, post_ff, scalar;
};

DeviceWeights::LayerOffsets DeviceWeights::PlanLayer(Planner& pl, const ModelConfig& c, int l,
                                                     const LayerWeights* lw, bool defer) {
  const LayerSpec& s = c.layers[l];
  const int h = c.hidden_size, inter = c.intermediate_size, d = s.head_dim;
  const int q_width = c.num_heads * d;
  // A W4A16 checkpoint's matrices its ignore list names (no packed parts)
  // stay bf16; the others need no bf16 place at all.
  const bool w4a16 = lw != nullptr && c.int4_checkpoint.has_value();
  auto start = [&](const PackedInt4Ref* packed) {
    const bool deferred = defer && (!w4a16 || packed->present());
    pl.set_deferring(deferred);
    const auto [data, scale] = pl.Next();
    return MatrixOffsets{data, scale, deferred};
  };
  const LayerWeights none;
  const LayerWeights& p = lw ? *lw : none;
  LayerOffsets o;
  o.qkv = start(&p.q_proj_int4);
  pl.Rows(lw ? &lw->q_proj : nullptr, lw ? &lw->q_proj_scale : nullptr, int64_t{q_width} * h, h);
  pl.Rows(lw ? &lw->k_proj : nullptr, lw ? &lw->k_proj_scale : nullptr, int64_t{s.num_kv_heads} * d * h, h);
  if (!s.k_eq_v) pl.Rows(lw ? &lw->v_proj : nullptr, lw ? &lw->v_proj_scale : nullptr, int64_t{s.num_kv_heads} * d * h, h);
  pl.EndMatrix();
  o.o = start(&p.o_proj_int4);
  pl.Rows(lw ? &lw->o_proj : nullptr, lw ? &lw->o_proj_scale : nullptr, int64_t{h} * q_width, q_width);
  pl.EndMatrix();
  o.gate_up = start(&p.gate_proj_int4);
  pl.Rows(lw ? &lw->gate_proj : nullptr, lw ? &lw->gate_proj_scale : nullptr, int64_t{inter} * h, h);
  pl.Rows(lw ? &lw->up_proj : nullptr, lw ? &lw->up_proj_scale : nullptr, int64_t{inter} * h, h);
  pl.EndMatrix();
  o.down = start(&p.down_proj_int4);
  pl.Rows(lw ? &lw->down_proj : nullptr, lw ? &lw->down_proj_scale : nullptr, int64_t{h} * inter, inter);
  pl.EndMatrix();
  pl.set_deferring(false);
  o.qn = pl.Vector(lw ? &lw->q_norm : nullptr, d, 1.0f, 0.1f);
  o.kn = pl.Vector(lw ? &lw->k_norm : nullptr, d, 1.0f, 0.1f);
  o.in = pl.Vector(lw ? &lw->input_layernorm : nullptr, h, 1.0f, 0.1f);
  o.post_attn = pl.Vector(lw ? &lw->post_attention_layernorm : nullptr, h, 1.0f, 0.1f);
  o.pre_ff = pl.Vector(lw ? &lw->pre_feedforward_layernorm : nullptr, h, 1.0f, 0.1f);
  o.post_ff = pl.Vector(lw ? &lw->post_feedforward_layernorm : nullptr, h, 1.0f, 0.1f);
  o.scalar = pl.Vector(lw ? &lw->layer_scalar : nullptr, 1, 1.0f, 0.02f);
  return o;
}

DeviceMatrix DeviceWeights::lm_head() const {
  if (lm_head_int4_.get() != nullptr) return lm_head_int4_matrix_;
  if (lm_head_fp8_.get() != nullptr) {
    return DeviceMatrix(lm_head_fp8_.get<uint8_t>(), lm_head_scale_.get<float>(), lm_head_wgmma_);
  }
  return DeviceMatrix(embed_);
}

absl::Status DeviceWeights::QuantizeLmHead(cudaStream_t stream) {
  if (lm_head_fp8_.get() != nullptr) return absl::OkStatus();
  if (hidden_ % 16 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("fp8 LM head: hidden_size must be a multiple of 16, got ", hidden_));
  }
  GEMMA_STATUS_RETURN_IF_ERROR(lm_head_fp8_.Allocate(static_cast<size_t>(vocab_) * hidden_));
  GEMMA_STATUS_RETURN_IF_ERROR(lm_head_scale_.Allocate(static_cast<size_t>(vocab_) * sizeof(float)));
  GEMMA_KERNEL_RETURN_IF_ERROR(kernels::LaunchQuantizeRowsFp8(
      {embed_, lm_head_fp8_.get<uint8_t>(), lm_head_scale_.get<float>(), vocab_, hidden_}, stream));
  GEMMA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  lm_head_wgmma_ = MakeWgmmaMap(lm_head_fp8_.get<uint8_t>(), vocab_, hidden_);
  spdlog::info("cuda: LM head quantized to fp8 ({:.2f} GB next to the bf16 embedding)",
               lm_head_fp8_.bytes() / 1e9);
  return absl::OkStatus();
}

const kernels::WgmmaFp8Weights* DeviceWeights::MakeWgmmaMap(const uint8_t* w, int n, int k) {
  auto map = std::make_unique<kernels::WgmmaFp8Weights>();
  if (const std::string err = kernels::MakeWgmmaFp8Weights(w, n, k, map.get()); !err.empty()) {
    if (!wgmma_map_failed_) {
      spdlog::warn("cuda: no wgmma TMA descriptor for a {} x {} fp8 matrix ({}): its decode batches run "
                   "the GEMV / cuBLASLt only",
                   n, k, err);
    }
    wgmma_map_failed_ = true;
    return nullptr;
  }
  wgmma_maps_.push_back(std::move(map));
  return wgmma_maps_.back().get();
}

void DeviceWeights::AttachWgmmaMaps(const ModelConfig& c) {
  if (dtype_ != WeightDType::kFP8) return;
  const int h = c.hidden_size, inter = c.intermediate_size;
  int built = 0;
  auto attach = [&](DeviceMatrix& m, int n, int k) {
    m.wgmma = MakeWgmmaMap(m.e4m3(), n, k);
    built += m.wgmma != nullptr;
  };
  for (size_t l = 0; l < layers_.size(); ++l) {
    DeviceLayer& d = layers_[l];
    const int q_width = c.num_heads * c.layers[l].head_dim;
    attach(d.qkv, d.qkv_rows, h);
    attach(d.o_proj, h, q_width);
    attach(d.gate_up, 2 * inter, h);
    attach(d.down_proj, h, inter);
  }
  spdlog::info("cuda: wgmma TMA descriptors for {} of {} fp8 matrices", built, 4 * layers_.size());
}

DeviceMatrix DeviceWeights::BindMatrix(const MatrixOffsets& o) const {
  if (o.deferred) return DeviceMatrix();  // QuantizeLinearsInt4 gives it its int4 view
  if (dtype_ == WeightDType::kFP8) return DeviceMatrix(fp8_.get<uint8_t>() + o.data, f32_.get<float>() + o.scale);
  return DeviceMatrix(bf16_.get<__nv_bfloat16>() + o.data);
}

void DeviceWeights::BindLayer(const ModelConfig& c, int l, const LayerOffsets& o) {
  const LayerSpec& s = c.layers[l];
  float* fb = f32_.get<float>();
  DeviceLayer& d = layers_[l];
  d.qkv = BindMatrix(o.qkv);
  d.qkv_rows = (c.num_heads + s.num_kv_heads * (s.k_eq_v ? 1 : 2)) * s.head_dim;
  d.o_proj = BindMatrix(o.o);
  d.gate_up = BindMatrix(o.gate_up);
  d.down_proj = BindMatrix(o.down);
  d.q_norm = fb + o.qn;
  d.k_norm = fb + o.kn;
  d.input_norm = fb + o.in;
  d.post_attention_norm = fb + o.post_attn;
  d.pre_feedforward_norm = fb + o.pre_ff;
  d.post_feedforward_norm = fb + o.post_ff;
  d.layer_scalar = fb + o.scalar;
  deferred_at_[l] = {o.qkv.deferred ? o.qkv.data : -1, o.o.deferred ? o.o.data : -1,
                     o.gate_up.deferred ? o.gate_up.data : -1, o.down.deferred ? o.down.data : -1};
}

absl::Status DeviceWeights::Plan(const ModelConfig& c, const ModelWeights* w) {
  if (w && w->has_fp8 && dtype_ != WeightDType::kFP8) {
    return absl::InvalidArgumentError(
        "the checkpoint's linear weights are FP8 (F8_E4M3): run with --weights fp8 (they are not "
        "dequantized to bf16)");
  }
  if (w && w->has_int4 && dtype_ != WeightDType::kINT4) {
    return absl::InvalidArgumentError("the checkpoint's linear weights are W4A16 (pack-quantized): they run as int4");
  }
  vocab_ = c.vocab_size;
  hidden_ = c.hidden_size;
  Planner pl(&pieces_, dtype_ == WeightDType::kFP8);
  const int64_t embed =
      pl.Bf16Matrix(w ? &w->embed_tokens : nullptr, int64_t{c.vocab_size} * c.hidden_size);
  const int64_t final_norm = pl.Vector(w ? &w->final_norm : nullptr, c.hidden_size, 1.0f, 0.1f);
  std::vector<LayerOffsets> offsets;
  for (int l = 0; l < c.num_layers; ++l) {
    offsets.push_back(PlanLayer(pl, c, l, w ? &w->layers[l] : nullptr, defer_linears_));
  }
  GEMMA_STATUS_RETURN_IF_ERROR(bf16_.Allocate(pl.bf16_used() * 2));
  GEMMA_STATUS_RETURN_IF_ERROR(f32_.Allocate(pl.f32_used() * 4));
  if (pl.fp8_used() > 0) GEMMA_STATUS_RETURN_IF_ERROR(fp8_.Allocate(pl.fp8_used()));
  embed_ = bf16_.get<__nv_bfloat16>() + embed;
  final_norm_ = f32_.get<float>() + final_norm;
  layers_.resize(c.num_layers);
  deferred_at_.assign(c.num_layers, {-1, -1, -1, -1});
  for (int l = 0; l < c.num_layers; ++l) BindLayer(c, l, offsets[l]);
  return absl::OkStatus();
}

int64_t DeviceWeights::MaxFp8PieceCount() const {
  int64_t most = 0;
  for (const Piece& p : pieces_) {
    if (p.arena == Arena::kFp8) most = std::max(most, p.count);
  }
  return most;
}

// Two pinned host buffers used in turn: Next() waits until the copy that last
// read the buffer is done.
struct DeviceWeights::Staging {
  DeviceBuffer buffer[2];
  cudaEvent_t done[2] = {nullptr, nullptr};
  int turn = 0;
  ~Staging() {
    for (cudaEvent_t e : done) {
      if (e) cudaEventDestroy(e);
    }
  }
  absl::Status Init() {
    for (int i = 0; i < 2; ++i) {
      GEMMA_STATUS_RETURN_IF_ERROR(buffer[i].Allocate(kStagingBytes, /*pinned=*/true));
      GEMMA_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&done[i], cudaEventDisableTiming));
    }
    return absl::OkStatus();
  }
  absl::StatusOr<char*> Next() {
    turn ^= 1;
    GEMMA_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(done[turn]));
    return buffer[turn].get<char>();
  }
  absl::Status Upload(void* dst, size_t bytes, cudaStream_t stream) {
    GEMMA_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(dst, buffer[turn].get(), bytes, cudaMemcpyHostToDevice, stream));
    return CudaStatus(cudaEventRecord(done[turn], stream), "cudaEventRecord");
  }
};

void DeviceWeights::StagingFree::operator()(Staging* s) const { delete s; }

// The random draw of piece `i` (no output set): the same values whether the
// piece is drawn at load (FillRandom) or when it is quantized (FillDeferred).
kernels::RandomFillParams DeviceWeights::RandomPiece(const Piece& p, size_t i, uint64_t seed) {
  kernels::RandomFillParams rp;
  rp.count = p.count;
  rp.seed = seed * 1000003ULL + i;
  rp.mean = p.mean;
  rp.stddev = p.stddev;
  return rp;
}

DeviceWeights::~DeviceWeights() = default;

absl::Status DeviceWeights::UploadConverted(const Piece& p, void* dst, bool to_f32, Staging& staging,
                                            cudaStream_t stream) {
  const int64_t esize = to_f32 ? 4 : 2, step = kStagingBytes / esize;
  for (int64_t first = 0; first < p.count; first += step) {
    const int64_t n = std::min(p.count - first, step);
    MODEL_ASSIGN_OR_RETURN(char* buf, staging.Next());
    ConvertRange(*p.source, first, n, to_f32, buf);
    GEMMA_STATUS_RETURN_IF_ERROR(staging.Upload(static_cast<char*>(dst) + first * esize, n * esize, stream));
  }
  return absl::OkStatus();
}

absl::Status DeviceWeights::FillDeferred(int64_t begin, int64_t count, __nv_bfloat16* dst, cudaStream_t stream) {
  for (size_t i = 0; i < pieces_.size(); ++i) {
    const Piece& p = pieces_[i];
    if (p.arena != Arena::kDeferred || p.offset < begin || p.offset >= begin + count) continue;
    if (p.offset + p.count > begin + count) return absl::InternalError("int4: a deferred piece crosses its matrix");
    __nv_bfloat16* out = dst + (p.offset - begin);
    if (random_) {
      kernels::RandomFillParams rp = RandomPiece(p, i, random_seed_);
      rp.out_bf16 = out;
      GEMMA_KERNEL_RETURN_IF_ERROR(kernels::LaunchRandomFill(rp, stream));
      continue;
    }
    if (p.source == nullptr || p.source->info == nullptr) continue;  // pack-quantized: uploaded as codes
    if (!deferred_staging_) {
      deferred_staging_.reset(new Staging());
      GEMMA_STATUS_RETURN_IF_ERROR(deferred_staging_->Init());
    }
    GEMMA_STATUS_RETURN_IF_ERROR(UploadConverted(p, out, false, *deferred_staging_, stream));
  }
  return absl::OkStatus();
}

// An FP8 checkpoint's matrix: E4M3 bytes as they are, then its scales as
// fp32 (a per-tensor scale repeated for every row).
absl::Status DeviceWeights::CopyFp8Piece(const Piece& p, Staging& staging, cudaStream_t stream) {
  for (int64_t first = 0; first < p.count; first += kStagingBytes) {
    const int64_t n = std::min(p.count - first, kStagingBytes);
    MODEL_ASSIGN_OR_RETURN(char* buf, staging.Next());
    std::memcpy(buf, p.source->data() + first, n);
    GEMMA_STATUS_RETURN_IF_ERROR(staging.Upload(fp8_.get<uint8_t>() + p.offset + first, n, stream));
  }
  const int64_t rows = p.count / p.cols;
  std::vector<float> scales(static_cast<size_t>(p.scale_source->info->num_elements()));
  ConvertToFloat(*p.scale_source, scales);
  MODEL_ASSIGN_OR_RETURN(char* buf, staging.Next());
  float* out = reinterpret_cast<float*>(buf);
  for (int64_t r = 0; r < rows; ++r) out[r] = scales.size() == 1 ? scales[0] : scales[r];
  return staging.Upload(f32_.get<float>() + p.scale_offset, rows * sizeof(float), stream);
}

// Streams every piece through two pinned staging buffers. An fp8 piece goes
// as bf16 in chunks of whole rows into a device buffer, from which the
// quantizer writes its E4M3 rows and row scales (stream order keeps the
// buffer's reuse safe).
absl::Status DeviceWeights::CopyPieces(cudaStream_t stream) {
  Staging staging;
  GEMMA_STATUS_RETURN_IF_ERROR(staging.Init());
  DeviceBuffer quant_src;
  if (MaxFp8PieceCount() > 0) GEMMA_STATUS_RETURN_IF_ERROR(quant_src.Allocate(kStagingBytes));
  int64_t total = 0;
  for (const Piece& p : pieces_) {
    if (p.arena != Arena::kDeferred) total += p.count * (p.arena == Arena::kF32 ? 4 : 2);
  }
  Progress progress(total);
  for (const Piece& p : pieces_) {
    if (p.arena == Arena::kDeferred) continue;  // read when QuantizeLinearsInt4 quantizes it
    const bool f32 = p.arena == Arena::kF32, fp8 = p.arena == Arena::kFp8;
    if (p.source->info == nullptr) {  // pack-quantized: QuantizeLinearsInt4 uploads its codes
      progress.Add(p.count * 2);
      continue;
    }
    if (fp8 && p.source->info->dtype == DType::kF8E4M3) {
      GEMMA_STATUS_RETURN_IF_ERROR(CopyFp8Piece(p, staging, stream));
      progress.Add(p.count * 2);
      continue;
    }
    const int64_t esize = f32 ? 4 : 2;
    if (!fp8) {
      char* base = f32 ? f32_.get<char>() : bf16_.get<char>();
      GEMMA_STATUS_RETURN_IF_ERROR(UploadConverted(p, base + p.offset * esize, f32, staging, stream));
      progress.Add(p.count * esize);
      continue;
    }
    const int64_t step = kStagingBytes / esize / p.cols * p.cols;
    for (int64_t first = 0; first < p.count; first += step) {
      const int64_t n = std::min(p.count - first, step);
      MODEL_ASSIGN_OR_RETURN(char* buf, staging.Next());
      ConvertRange(*p.source, first, n, false, buf);
      GEMMA_STATUS_RETURN_IF_ERROR(staging.Upload(quant_src.get(), n * esize, stream));
      kernels::QuantizeRowsFp8Params qp;
      qp.x = quant_src.get<__nv_bfloat16>();
      qp.out = fp8_.get<uint8_t>() + p.offset + first;
      qp.scale = f32_.get<float>() + p.scale_offset + first / p.cols;
      qp.rows = n / p.cols;
      qp.cols = p.cols;
      GEMMA_KERNEL_RETURN_IF_ERROR(kernels::LaunchQuantizeRowsFp8(qp, stream));
      progress.Add(n * esize);
    }
  }
  return CudaStatus(cudaStreamSynchronize(stream), "weight upload sync");
}

// fp8 pieces are drawn in bf16 (the same values as --weights bf16 with the
// same seed) into a scratch buffer, then quantized like a checkpoint's.
absl::Status DeviceWeights::FillRandom(uint64_t seed, cudaStream_t stream) {
  DeviceBuffer scratch;
  if (const int64_t most = MaxFp8PieceCount(); most > 0) GEMMA_STATUS_RETURN_IF_ERROR(scratch.Allocate(most * 2));
  for (size_t i = 0; i < pieces_.size(); ++i) {
    const Piece& p = pieces_[i];
    if (p.arena == Arena::kDeferred) continue;  // drawn when QuantizeLinearsInt4 quantizes it (FillDeferred)
    kernels::RandomFillParams rp = RandomPiece(p, i, seed);
    if (p.arena == Arena::kF32) {
      rp.out_f32 = f32_.get<float>() + p.offset;
    } else {
      rp.out_bf16 = p.arena == Arena::kBf16 ? bf16_.get<__nv_bfloat16>() + p.offset : scratch.get<__nv_bfloat16>();
    }
    GEMMA_KERNEL_RETURN_IF_ERROR(kernels::LaunchRandomFill(rp, stream));
    if (p.arena != Arena::kFp8) continue;
    kernels::QuantizeRowsFp8Params qp;
    qp.x = scratch.get<__nv_bfloat16>();
    qp.out = fp8_.get<uint8_t>() + p.offset;
    qp.scale = f32_.get<float>() + p.scale_offset;
    qp.rows = p.count / p.cols;
    qp.cols = p.cols;
    GEMMA_KERNEL_RETURN_IF_ERROR(kernels::LaunchQuantizeRowsFp8(qp, stream));
  }
  return CudaStatus(cudaStreamSynchronize(stream), "random weights");
}

absl::StatusOr<std::unique_ptr<DeviceWeights>> DeviceWeights::Upload(const ModelConfig& config,
                                                                     const ModelWeights& weights,
                                                                     cudaStream_t stream,
                                                                     WeightDType dtype, bool defer_int4_linears) {
  std::unique_ptr<DeviceWeights> dw(new DeviceWeights());
  dw->dtype_ = dtype;
  dw->defer_linears_ = defer_int4_linears && dtype == WeightDType::kINT4;
  GEMMA_STATUS_RETURN_IF_ERROR(dw->Plan(config, &weights));
  GEMMA_STATUS_RETURN_IF_ERROR(dw->CopyPieces(stream));
  dw->AttachWgmmaMaps(config);
  return dw;
}

absl::StatusOr<std::unique_ptr<DeviceWeights>> DeviceWeights::Random(const ModelConfig& config,
                                                                     uint64_t seed,
                                                                     cudaStream_t stream,
                                                                     WeightDType dtype, bool defer_int4_linears) {
  std::unique_ptr<DeviceWeights> dw(new DeviceWeights());
  dw->dtype_ = dtype;
  dw->defer_linears_ = defer_int4_linears && dtype == WeightDType::kINT4;
  dw->random_ = true;
  dw->random_seed_ = seed;
  GEMMA_STATUS_RETURN_IF_ERROR(dw->Plan(config, nullptr));
  GEMMA_STATUS_RETURN_IF_ERROR(dw->FillRandom(seed, stream));
  dw->AttachWgmmaMaps(config);
  spdlog::info("cuda: random {} weights, {:.2f} GB on the device{}", WeightDTypeName(dtype), dw->bytes() / 1e9,
               dw->defer_linears_ ? " (the layer matrices drawn as they are quantized to int4)" : "");
  return dw;
}

}  // namespace gemma::cuda
