#include "engine/tokenizer/sentencepiece_tokenizer_model.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/tokenizer/model_proto.h"
#include "engine/tokenizer/sentencepiece_model.h"
#include "engine/tokenizer/utf8.h"

namespace gemma {
namespace {

constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";  // "▁"
// What SentencePiece prints for <unk>; we keep it so Decode matches its own.
constexpr std::string_view kUnknownSurface = " \xE2\x81\x87 ";

// User-defined pieces that are markers of the chat/tool protocol rather than
// text. Gemma 4's markers all have a "|" on the inside of an angle bracket;
// other user-defined pieces ("\n", "\t", HTML tags in the real vocabulary) are
// text and must decode as such.
bool IsMarkerPiece(std::string_view piece) {
  return piece == "<mask>" || piece.starts_with("<|") || piece.ends_with("|>");
}

// Converts "<0xAB>" to its byte; false when the piece is not of that form.
bool ParseBytePiece(std::string_view piece, char& byte) {
  if (piece.size() != 6 || !piece.starts_with("<0x") || piece.back() != '>') return false;
  int value = 0;
  for (char c : piece.substr(3, 2)) {
    int digit = (c >= '0' && c <= '9') ? c - '0' : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
    if (digit < 0) return false;
    value = value * 16 + digit;
  }
  byte = static_cast<char>(value);
  return true;
}

}  // namespace

SentencePieceTokenizerModel::SentencePieceTokenizerModel() = default;
SentencePieceTokenizerModel::~SentencePieceTokenizerModel() = default;

absl::StatusOr<std::unique_ptr<SentencePieceTokenizerModel>> SentencePieceTokenizerModel::Load(
    const std::string& path) {
  std::unique_ptr<SentencePieceTokenizerModel> model(new SentencePieceTokenizerModel());
  std::string error_message;
  model->sp_ = SentencePieceModel::Load(path, &error_message);
  if (model->sp_ == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot load tokenizer model ", path, ": ", error_message));
  }
  auto facts = ReadModelProtoFacts(model->sp_->SerializedModelProto());
  if (!facts.ok() || facts->piece_types.size() != static_cast<size_t>(model->num_pieces())) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read piece types of tokenizer model ", path));
  }
  model->adds_dummy_prefix_ = facts->add_dummy_prefix || facts->remove_extra_whitespaces;
  model->control_.assign(facts->piece_types.size(), false);
  bool has_byte_pieces = false;
  size_t longest_piece_bytes = 0;
  for (size_t id = 0; id < model->control_.size(); ++id) {
    const PieceType type = facts->piece_types[id];
    has_byte_pieces |= type == PieceType::kByte;
    longest_piece_bytes =
        std::max(longest_piece_bytes, model->sp_->IdToPiece(static_cast<int>(id)).size());
    model->control_[id] = type == PieceType::kControl ||
                          (type == PieceType::kUserDefined &&
                           IsMarkerPiece(model->sp_->IdToPiece(static_cast<int>(id))));
    if (type == PieceType::kControl) {
      model->control_pieces_.emplace_back(model->sp_->IdToPiece(static_cast<int>(id)),
                                          static_cast<int32_t>(id));
    }
  }
  const bool keeps_text = facts->normalizer_name == "identity" && !facts->remove_extra_whitespaces;
  model->max_bytes_per_token_ = keeps_text && has_byte_pieces ? longest_piece_bytes : 0;
  return model;
}

int SentencePieceTokenizerModel::num_pieces() const { return sp_->num_pieces(); }

int32_t SentencePieceTokenizerModel::PieceToId(std::string_view piece) const {
  const int id = sp_->PieceToId(piece);
  if (id < 0) return -1;
  // SentencePiece answers unknown pieces with the <unk> id; tell them apart.
  if (id == sp_->unk_id() && piece != sp_->IdToPiece(id)) return -1;
  return id;
}

std::string SentencePieceTokenizerModel::IdToPiece(int32_t id) const {
  if (id < 0 || id >= num_pieces()) return "";
  return sp_->IdToPiece(id);
}

SpecialTokens SentencePieceTokenizerModel::FindSpecialTokens() const {
  SpecialTokens special;
  special.pad = PieceToId("<pad>");
  special.eos = PieceToId("<eos>");
  special.bos = PieceToId("<bos>");
  special.unk = PieceToId("<unk>");
  special.turn_start = PieceToId("<|turn>");
  special.turn_end = PieceToId("<turn|>");
  return special;
}

// Control pieces (<bos>, <eos>, <pad>) written in the text are those tokens,
// as Hugging Face tokenizers match special tokens before the model sees the
// text (SentencePiece alone would spell them out); the text after one is a
// new segment, with no dummy prefix. A chat template writes "<bos>" this way.
absl::StatusOr<std::vector<int32_t>> SentencePieceTokenizerModel::Encode(
    std::string_view text) const {
  std::vector<int32_t> out;
  size_t start = 0;
  while (true) {
    size_t found = std::string_view::npos;
    int32_t found_id = -1;
    for (const auto& [piece, id] : control_pieces_) {
      const size_t at = text.find(piece, start);
      if (at < found) {
        found = at;
        found_id = id;
      }
    }
    const std::string_view segment = text.substr(start, found - start);
    if (!segment.empty()) {
      auto ids = start == 0 ? EncodeRaw(segment) : EncodeSegment(segment);
      if (!ids.ok()) return ids.status();
      out.insert(out.end(), ids->begin(), ids->end());
    }
    if (found == std::string_view::npos) return out;
    out.push_back(found_id);
    start = found + IdToPiece(found_id).size();
  }
}

absl::StatusOr<std::vector<int32_t>> SentencePieceTokenizerModel::EncodeRaw(
    std::string_view text) const {
  std::vector<int> ids;
  std::string error_message;
  if (!sp_->Encode(text, &ids, &error_message)) {
    return absl::InternalError(absl::StrCat("encode failed: ", error_message));
  }
  return std::vector<int32_t>(ids.begin(), ids.end());
}

// SentencePiece only adds its dummy prefix at the start of the whole input,
// so text right after a special token is encoded with no "▁" in front. To get
// exactly that, encode the segment behind a "<|turn>" (a user-defined piece,
// always matched whole) and drop everything up to it.
absl::StatusOr<std::vector<int32_t>> SentencePieceTokenizerModel::EncodeSegment(
    std::string_view text) const {
  const int32_t marker_id = PieceToId("<|turn>");
  if (marker_id < 0) return absl::FailedPreconditionError("tokenizer lacks the <|turn> piece");
  auto ids = EncodeRaw(IdToPiece(marker_id).append(text));
  if (!ids.ok()) return ids.status();
  size_t marker = 0;
  while (marker < ids->size() && marker < 2 && (*ids)[marker] != marker_id) ++marker;
  if (marker == ids->size() || (*ids)[marker] != marker_id) {
    return absl::InternalError("tokenizer does not match \"<|turn>\" as one piece");
  }
  ids->erase(ids->begin(), ids->begin() + marker + 1);
  return ids;
}

std::string SentencePieceTokenizerModel::Decode(std::span<const int32_t> ids,
                                                bool skip_special_tokens) const {
  std::string pending, text;
  bool at_start = true;
  for (int32_t id : ids) {
    if (IsControl(id)) {
      if (skip_special_tokens) continue;
      utf8::DrainValid(pending, text, /*flush=*/true);
      text += TokenText(id);
      continue;
    }
    std::string bytes = TokenBytes(id);
    if (at_start && StripsFirstSpace(id)) bytes.erase(0, 1);
    at_start = false;
    pending += bytes;
    utf8::DrainValid(pending, text, /*flush=*/false);
  }
  utf8::DrainValid(pending, text, /*flush=*/true);
  return text;
}

std::string SentencePieceTokenizerModel::TokenBytes(int32_t id) const {
  if (id < 0 || id >= num_pieces() || control_[id]) return "";
  if (sp_->IsUnknown(id)) return std::string(kUnknownSurface);
  const std::string piece = sp_->IdToPiece(id);
  char byte = 0;
  if (sp_->IsByte(id) && ParseBytePiece(piece, byte)) return std::string(1, byte);
  std::string text;
  for (size_t pos = 0; pos < piece.size();) {
    if (std::string_view(piece).substr(pos).starts_with(kSpaceSymbol)) {
      text += ' ';
      pos += kSpaceSymbol.size();
    } else {
      text += piece[pos++];
    }
  }
  return text;
}

std::string SentencePieceTokenizerModel::TokenText(int32_t id) const {
  return IsControl(id) ? IdToPiece(id) : TokenBytes(id);
}

bool SentencePieceTokenizerModel::IsControl(int32_t id) const {
  return id >= 0 && id < num_pieces() && control_[id];
}

bool SentencePieceTokenizerModel::IsByteToken(int32_t id) const {
  return id >= 0 && id < num_pieces() && sp_->IsByte(id);
}

bool SentencePieceTokenizerModel::StripsFirstSpace(int32_t id) const {
  return adds_dummy_prefix_ && id >= 0 && id < num_pieces() && !sp_->IsByte(id) &&
         !sp_->IsUnknown(id) && !control_[id] && sp_->IdToPiece(id).starts_with(kSpaceSymbol);
}

}  // namespace gemma
