#include "engine/model/int4_checkpoint.h"

#include <cassert>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_join.h"
#include "engine/model/status_macros.h"
#include "engine/model/str_cat.h"

namespace gemma {
namespace {

std::string Shape(const std::vector<int64_t>& shape) {
  return model_internal::Cat("[", absl::StrJoin(shape, ", "), "]");
}

absl::Status Wrong(const TensorRef& t, std::string_view what) {
  return absl::InvalidArgumentError(model_internal::Cat("tensor ", t.info->name, " in ", t.file->path(), ": ", what));
}

absl::StatusOr<TensorRef> Find(const Checkpoint& checkpoint, const std::string& name, std::string_view expected) {
  const TensorRef* ref = checkpoint.Find(name);
  if (ref == nullptr) {
    return absl::NotFoundError(
        model_internal::Cat("tensor ", name, " is missing from the W4A16 checkpoint (expected ", expected, ")"));
  }
  return *ref;
}

// weight_shape holds [rows, cols] as I64 (or I32) values.
absl::Status CheckShapeTensor(const TensorRef& t, int64_t rows, int64_t cols) {
  const DType d = t.info->dtype;
  if ((d != DType::kI64 && d != DType::kI32) || t.info->shape != std::vector<int64_t>{2}) {
    return Wrong(t,
                 model_internal::Cat("expected I64 or I32 [2], got ", t.info->dtype_name, " ", Shape(t.info->shape)));
  }
  int64_t v[2];
  for (int i = 0; i < 2; ++i) {
    if (d == DType::kI64) {
      std::memcpy(&v[i], t.data() + 8 * i, 8);
    } else {
      int32_t x;
      std::memcpy(&x, t.data() + 4 * i, 4);
      v[i] = x;
    }
  }
  if (v[0] != rows || v[1] != cols) {
    return Wrong(t, model_internal::Cat("holds [", v[0], ", ", v[1], "], expected [", rows, ", ", cols, "]"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PackedInt4Ref> BindPackedInt4(const Checkpoint& checkpoint, const std::string& module, int64_t rows,
                                             int64_t cols, int group, std::vector<std::string>* bound) {
  // Variants the format can express but the int4 path does not run: named.
  for (const auto& [suffix, why] : {std::pair<const char*, const char*>{".weight_zero_point",
                                                                        "asymmetric int4 (zero points) is not "
                                                                        "supported: symmetric only"},
                                    {".weight_g_idx", "activation reordering (g_idx) is not supported"}}) {
    if (const TensorRef* t = checkpoint.Find(module + suffix)) return Wrong(*t, why);
  }
  if (cols % quant::kQ4BlockSize != 0) {
    return absl::InvalidArgumentError(
        model_internal::Cat(module, ": int4 needs the input dimension a multiple of 32, got [", rows, ", ", cols, "]"));
  }
  const std::vector<int64_t> packed_shape = {rows, (cols + 7) / 8};
  const std::vector<int64_t> scale_shape = {rows, (cols + group - 1) / group};
  PackedInt4Ref r;
  r.rows = rows;
  r.cols = cols;
  r.group = group;
  MODEL_ASSIGN_OR_RETURN(r.packed, Find(checkpoint, module + ".weight_packed", "I32 " + Shape(packed_shape)));
  MODEL_ASSIGN_OR_RETURN(r.scale, Find(checkpoint, module + ".weight_scale", Shape(scale_shape)));
  MODEL_ASSIGN_OR_RETURN(const TensorRef shape, Find(checkpoint, module + ".weight_shape", "[2]"));
  if (r.packed.info->dtype != DType::kI32 || r.packed.info->shape != packed_shape) {
    return Wrong(r.packed, model_internal::Cat("expected I32 ", Shape(packed_shape), ", got ",
                                               r.packed.info->dtype_name, " ", Shape(r.packed.info->shape)));
  }
  const DType sd = r.scale.info->dtype;
  if ((sd != DType::kBF16 && sd != DType::kF16 && sd != DType::kF32) || r.scale.info->shape != scale_shape) {
    return Wrong(r.scale, model_internal::Cat("expected BF16, F16 or F32 ", Shape(scale_shape), " (group_size ", group,
                                              "), got ", r.scale.info->dtype_name, " ", Shape(r.scale.info->shape)));
  }
  MODEL_RETURN_IF_ERROR(CheckShapeTensor(shape, rows, cols));
  if (absl::Status s = quant::CheckFp16Scales(ToFloatVector(r.scale), scale_shape[1]); !s.ok()) {
    return Wrong(r.scale, std::string(s.message()));
  }
  bound->push_back(r.packed.info->name);
  bound->push_back(r.scale.info->name);
  bound->push_back(shape.info->name);
  return r;
}

absl::StatusOr<quant::Int4Matrix> ReadInt4Blocks(const PackedInt4Ref& ref) {
  std::vector<int32_t> words(static_cast<size_t>(ref.packed.info->num_elements()));
  std::memcpy(words.data(), ref.packed.data(), words.size() * sizeof(int32_t));
  MODEL_ASSIGN_OR_RETURN(quant::Int4Matrix m,
                         quant::UnpackPackQuantized(words, ToFloatVector(ref.scale), ref.rows, ref.cols, ref.group));
  return quant::ToQ4_0Blocks(std::move(m));
}

absl::StatusOr<quant::W4DeviceMatrix> ReadInt4ForDevice(const PackedInt4Ref& ref) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(ref.packed.data());
  return quant::PackQuantizedForDevice({bytes, static_cast<size_t>(ref.packed.info->num_elements()) * 4},
                                       ToFloatVector(ref.scale), ref.rows, ref.cols, ref.group);
}

std::vector<float> LinearToFloat(const TensorRef& weight, const PackedInt4Ref& packed) {
  if (!packed.present()) return ToFloatVector(weight);
  // BindPackedInt4 checked everything UnpackPackQuantized refuses.
  absl::StatusOr<quant::Int4Matrix> m = ReadInt4Blocks(packed);
  assert(m.ok());
  if (!m.ok()) return {};
  std::vector<float> out(static_cast<size_t>(m->rows * m->cols));
  for (int64_t r = 0; r < m->rows; ++r) {
    for (int64_t c = 0; c < m->cols; ++c)
      out[static_cast<size_t>(r * m->cols + c)] = static_cast<float>(m->Value(r, c));
  }
  return out;
}

}  // namespace gemma
