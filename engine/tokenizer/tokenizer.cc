#include "engine/tokenizer/tokenizer.h"

#include <filesystem>

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

Tokenizer::~Tokenizer() = default;

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Load(const std::string& model_path) {
  std::unique_ptr<Tokenizer> tokenizer(new Tokenizer());
  absl::Status status = tokenizer->Init(model_path);
  if (!status.ok()) return status;
  return tokenizer;
}

absl::Status Tokenizer::Init(const std::string& model_path) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(model_path, error)) {
    return absl::NotFoundError(absl::StrCat("tokenizer model not found: ", model_path));
  }
  std::string error_message;
  sp_ = SentencePieceModel::Load(model_path, &error_message);
  if (sp_ == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot load tokenizer model ", model_path, ": ", error_message));
  }
  auto facts = ReadModelProtoFacts(sp_->SerializedModelProto());
  if (!facts.ok() || facts->piece_types.size() != static_cast<size_t>(sp_->num_pieces())) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read piece types of tokenizer model ", model_path));
  }
  adds_dummy_prefix_ = facts->add_dummy_prefix || facts->remove_extra_whitespaces;
  control_.assign(facts->piece_types.size(), false);
  for (size_t id = 0; id < control_.size(); ++id) {
    const PieceType type = facts->piece_types[id];
    control_[id] = type == PieceType::kControl ||
                   (type == PieceType::kUserDefined &&
                    IsMarkerPiece(sp_->IdToPiece(static_cast<int>(id))));
  }
  special_.pad = PieceToId("<pad>");
  special_.eos = PieceToId("<eos>");
  special_.bos = PieceToId("<bos>");
  special_.unk = PieceToId("<unk>");
  special_.turn_start = PieceToId("<|turn>");
  special_.turn_end = PieceToId("<turn|>");
  for (auto [piece, id] : {std::pair{"<bos>", special_.bos}, std::pair{"<eos>", special_.eos}}) {
    if (id < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer model ", model_path, " has no ", piece, " piece"));
    }
  }
  return absl::OkStatus();
}

int Tokenizer::vocab_size() const { return sp_->num_pieces(); }

int32_t Tokenizer::PieceToId(std::string_view piece) const {
  const int id = sp_->PieceToId(piece);
  if (id < 0) return -1;
  // SentencePiece answers unknown pieces with the <unk> id; tell them apart.
  if (id == sp_->unk_id() && piece != sp_->IdToPiece(id)) return -1;
  return id;
}

std::string Tokenizer::IdToPiece(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return "";
  return sp_->IdToPiece(id);
}

absl::StatusOr<std::vector<int32_t>> Tokenizer::Encode(std::string_view text) const {
  const size_t bad = utf8::FirstInvalidByte(text);
  if (bad != std::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("prompt is not valid UTF-8 at byte ", bad));
  }
  std::vector<int> ids;
  std::string error_message;
  if (!sp_->Encode(text, &ids, &error_message)) {
    return absl::InternalError(absl::StrCat("encode failed: ", error_message));
  }
  return std::vector<int32_t>(ids.begin(), ids.end());
}

absl::StatusOr<std::vector<int32_t>> Tokenizer::EncodePrompt(std::string_view text) const {
  auto ids = Encode(text);
  if (!ids.ok()) return ids.status();
  ids->insert(ids->begin(), special_.bos);
  return ids;
}

// SentencePiece only adds its dummy prefix at the start of the whole input,
// so text right after a special token is encoded with no "▁" in front. To get
// exactly that, encode the segment behind a "<|turn>" (a user-defined piece,
// always matched whole) and drop everything up to it.
absl::StatusOr<std::vector<int32_t>> Tokenizer::EncodeSegment(std::string_view text) const {
  auto ids = Encode(IdToPiece(special_.turn_start).append(text));
  if (!ids.ok()) return ids.status();
  size_t marker = 0;
  while (marker < ids->size() && marker < 2 && (*ids)[marker] != special_.turn_start) ++marker;
  if (marker == ids->size() || (*ids)[marker] != special_.turn_start) {
    return absl::InternalError("tokenizer does not match \"<|turn>\" as one piece");
  }
  ids->erase(ids->begin(), ids->begin() + marker + 1);
  return ids;
}

absl::StatusOr<std::vector<int32_t>> Tokenizer::RenderChat(
    std::span<const ChatMessage> messages) const {
  if (special_.turn_start < 0 || special_.turn_end < 0) {
    return absl::FailedPreconditionError("tokenizer lacks the <|turn> / <turn|> pieces");
  }
  std::vector<int32_t> ids = {special_.bos};
  auto append_turn = [&](std::string_view role, std::string_view content,
                         bool close) -> absl::Status {
    auto text = EncodeSegment(std::string(role).append("\n").append(content));
    if (!text.ok()) return text.status();
    ids.push_back(special_.turn_start);
    ids.insert(ids.end(), text->begin(), text->end());
    if (!close) return absl::OkStatus();
    auto newline = EncodeSegment("\n");
    if (!newline.ok()) return newline.status();
    ids.push_back(special_.turn_end);
    ids.insert(ids.end(), newline->begin(), newline->end());
    return absl::OkStatus();
  };
  for (const ChatMessage& message : messages) {
    std::string_view role = message.role;
    if (role == "assistant") role = "model";
    if (role != "system" && role != "user" && role != "model") {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown chat role \"", message.role, "\" (expected system, user, assistant or model)"));
    }
    if (auto status = append_turn(role, message.content, true); !status.ok()) return status;
  }
  if (auto status = append_turn("model", "", false); !status.ok()) return status;
  return ids;
}

std::string Tokenizer::TokenBytes(int32_t id) const {
  if (id < 0 || id >= vocab_size() || control_[id]) return "";
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

bool Tokenizer::IsControl(int32_t id) const {
  return id >= 0 && id < vocab_size() && control_[id];
}

bool Tokenizer::StripsFirstSpace(int32_t id) const {
  return adds_dummy_prefix_ && id >= 0 && id < vocab_size() && !sp_->IsByte(id) &&
         !sp_->IsUnknown(id) && !control_[id] && sp_->IdToPiece(id).starts_with(kSpaceSymbol);
}

std::string Tokenizer::Decode(std::span<const int32_t> ids) const {
  IncrementalDetokenizer detokenizer(this);
  std::string text;
  for (int32_t id : ids) text += detokenizer.Push(id);
  text += detokenizer.Flush();
  return text;
}

}  // namespace gemma
