// compressed-tensors pack-quantized W4A16 checkpoints (the layout vLLM serves
// from llm-compressor's W4A16 preset): binding a linear layer's
// `weight_packed` / `weight_scale` / `weight_shape` with every check the
// loaders rely on (dtypes, shapes, weight_shape's values, each scale an fp16
// value; zero points and g_idx refused by name), and reading the layer as
// Q4_0 blocks, the representation every int4 path loads from (a group of 128
// becomes four blocks of 32 with its scale: codes and scales as they are).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/quantization_int4.h"
#include "engine/model/safetensors.h"
#include "engine/model/weights.h"

namespace gemma {

// Binds `<module>.weight_packed` (and its scale and shape) of a [rows, cols]
// linear layer quantized with `group` (quantization_config's group_size);
// appends the tensor names it bound to *bound. Errors name the tensor.
absl::StatusOr<PackedInt4Ref> BindPackedInt4(const Checkpoint& checkpoint, const std::string& module, int64_t rows,
                                             int64_t cols, int group, std::vector<std::string>* bound);

// A bound layer's codes and scales as Q4_0 blocks (group 32).
absl::StatusOr<quant::Int4Matrix> ReadInt4Blocks(const PackedInt4Ref& ref);

// The same, straight into the device layout (quant::PackQuantizedForDevice:
// read from the mapped checkpoint, no byte-per-code copy, rows over threads).
absl::StatusOr<quant::W4DeviceMatrix> ReadInt4ForDevice(const PackedInt4Ref& ref);

}  // namespace gemma
