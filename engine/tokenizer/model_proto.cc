#include "engine/tokenizer/model_proto.h"

#include <optional>

#include "absl/status/status.h"

namespace gemma {
namespace {

// Field numbers from sentencepiece_model.proto.
constexpr uint32_t kModelPieces = 1;
constexpr uint32_t kModelNormalizerSpec = 3;
constexpr uint32_t kPieceType = 3;
constexpr uint32_t kNormalizerName = 1;
constexpr uint32_t kNormalizerAddDummyPrefix = 3;
constexpr uint32_t kNormalizerRemoveExtraWhitespaces = 4;

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

struct Field {
  uint32_t number = 0;
  uint32_t wire_type = 0;
  uint64_t varint = 0;       // for kVarint
  std::string_view bytes;    // for kLengthDelimited
};

// Minimal forward-only protobuf reader over one message's bytes.
class WireReader {
 public:
  explicit WireReader(std::string_view data) : data_(data) {}
  bool done() const { return pos_ >= data_.size(); }

  // nullopt on malformed input.
  std::optional<Field> Next() {
    auto key = ReadVarint();
    if (!key) return std::nullopt;
    Field field;
    field.number = static_cast<uint32_t>(*key >> 3);
    field.wire_type = static_cast<uint32_t>(*key & 7);
    switch (field.wire_type) {
      case kVarint: {
        auto value = ReadVarint();
        if (!value) return std::nullopt;
        field.varint = *value;
        return field;
      }
      case kFixed64: return Skip(8) ? std::optional(field) : std::nullopt;
      case kFixed32: return Skip(4) ? std::optional(field) : std::nullopt;
      case kLengthDelimited: {
        auto length = ReadVarint();
        if (!length || *length > data_.size() - pos_) return std::nullopt;
        field.bytes = data_.substr(pos_, *length);
        pos_ += *length;
        return field;
      }
      default: return std::nullopt;  // groups never appear in this proto
    }
  }

 private:
  std::optional<uint64_t> ReadVarint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64 && pos_ < data_.size(); shift += 7) {
      const auto byte = static_cast<uint8_t>(data_[pos_++]);
      value |= static_cast<uint64_t>(byte & 0x7F) << shift;
      if ((byte & 0x80) == 0) return value;
    }
    return std::nullopt;
  }
  bool Skip(size_t n) {
    if (n > data_.size() - pos_) return false;
    pos_ += n;
    return true;
  }

  std::string_view data_;
  size_t pos_ = 0;
};

std::optional<PieceType> ReadPieceType(std::string_view piece_message) {
  PieceType type = PieceType::kNormal;  // the proto's default
  WireReader reader(piece_message);
  while (!reader.done()) {
    auto field = reader.Next();
    if (!field) return std::nullopt;
    if (field->number == kPieceType && field->wire_type == kVarint) {
      type = static_cast<PieceType>(field->varint);
    }
  }
  return type;
}

bool ReadNormalizer(std::string_view spec, ModelProtoFacts& facts) {
  WireReader reader(spec);
  while (!reader.done()) {
    auto field = reader.Next();
    if (!field) return false;
    if (field->number == kNormalizerName && field->wire_type == kLengthDelimited) {
      facts.normalizer_name = std::string(field->bytes);
    }
    if (field->wire_type != kVarint) continue;
    if (field->number == kNormalizerAddDummyPrefix) facts.add_dummy_prefix = field->varint != 0;
    if (field->number == kNormalizerRemoveExtraWhitespaces) {
      facts.remove_extra_whitespaces = field->varint != 0;
    }
  }
  return true;
}

}  // namespace

absl::StatusOr<ModelProtoFacts> ReadModelProtoFacts(std::string_view serialized) {
  ModelProtoFacts facts;
  WireReader reader(serialized);
  while (!reader.done()) {
    auto field = reader.Next();
    if (!field) return absl::InvalidArgumentError("malformed SentencePiece model proto");
    if (field->wire_type != kLengthDelimited) continue;
    if (field->number == kModelPieces) {
      auto type = ReadPieceType(field->bytes);
      if (!type) return absl::InvalidArgumentError("malformed piece in SentencePiece model proto");
      facts.piece_types.push_back(*type);
    } else if (field->number == kModelNormalizerSpec && !ReadNormalizer(field->bytes, facts)) {
      return absl::InvalidArgumentError("malformed normalizer spec in SentencePiece model proto");
    }
  }
  return facts;
}

}  // namespace gemma
