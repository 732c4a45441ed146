// Reads the few facts the tokenizer needs from a serialized SentencePiece
// ModelProto that the SentencePiece C++ API (0.1.97, as Debian ships it) does
// not expose: which pieces are user-defined, and the normalizer flags that
// decide whether decoding drops the first piece's leading space. Debian ships
// no sentencepiece_model.pb.h, so this walks the protobuf wire format itself.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace gemma {

// Values of sentencepiece.ModelProto.SentencePiece.Type.
enum class PieceType : uint8_t {
  kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6,
};

struct ModelProtoFacts {
  std::vector<PieceType> piece_types;  // indexed by id
  bool add_dummy_prefix = true;        // NormalizerSpec defaults
  bool remove_extra_whitespaces = true;
  std::string normalizer_name;         // "identity", "nmt_nfkc", ...; empty when unset
};

// INVALID_ARGUMENT when the bytes are not a well-formed ModelProto.
absl::StatusOr<ModelProtoFacts> ReadModelProtoFacts(std::string_view serialized);

}  // namespace gemma
