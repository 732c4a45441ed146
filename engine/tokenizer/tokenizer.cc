#include "engine/tokenizer/tokenizer.h"

#include <filesystem>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/tokenizer/bpe_tokenizer_model.h"
#include "engine/tokenizer/sentencepiece_tokenizer_model.h"
#include "engine/tokenizer/utf8.h"

namespace gemma {
namespace {

namespace fs = std::filesystem;

absl::StatusOr<std::unique_ptr<TokenizerModel>> LoadModel(const std::string& path) {
  std::error_code error;
  fs::path file(path);
  if (fs::is_directory(file, error)) {
    const fs::path json = file / "tokenizer.json", model = file / "tokenizer.model";
    if (fs::is_regular_file(json, error)) {
      file = json;
    } else if (fs::is_regular_file(model, error)) {
      file = model;
    } else {
      return absl::NotFoundError(absl::StrCat("no tokenizer in ", path, ": neither ",
                                              json.string(), " nor ", model.string(), " exists"));
    }
  } else if (!fs::is_regular_file(file, error)) {
    return absl::NotFoundError(absl::StrCat("tokenizer model not found: ", path));
  }
  if (file.extension() == ".json") {
    auto bpe = BpeTokenizerModel::Load(file.string());
    if (!bpe.ok()) return bpe.status();
    return std::unique_ptr<TokenizerModel>(std::move(*bpe));
  }
  auto sentencepiece = SentencePieceTokenizerModel::Load(file.string());
  if (!sentencepiece.ok()) return sentencepiece.status();
  return std::unique_ptr<TokenizerModel>(std::move(*sentencepiece));
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
  auto model = LoadModel(model_path);
  if (!model.ok()) return model.status();
  model_ = std::move(*model);
  special_ = model_->FindSpecialTokens();
  for (auto [piece, id] : {std::pair{"<bos>", special_.bos}, std::pair{"<eos>", special_.eos}}) {
    if (id < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer ", model_path, " has no ", piece, " token"));
    }
  }
  return absl::OkStatus();
}

const std::string& Tokenizer::chat_template() const { return model_->chat_template(); }

int Tokenizer::vocab_size() const { return model_->num_pieces(); }

int32_t Tokenizer::PieceToId(std::string_view piece) const { return model_->PieceToId(piece); }

std::string Tokenizer::IdToPiece(int32_t id) const { return model_->IdToPiece(id); }

absl::StatusOr<std::vector<int32_t>> Tokenizer::Encode(std::string_view text) const {
  const size_t bad = utf8::FirstInvalidByte(text);
  if (bad != std::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("prompt is not valid UTF-8 at byte ", bad));
  }
  return model_->Encode(text);
}

absl::StatusOr<std::vector<int32_t>> Tokenizer::EncodePrompt(std::string_view text) const {
  auto ids = Encode(text);
  if (!ids.ok()) return ids.status();
  ids->insert(ids->begin(), special_.bos);
  return ids;
}

absl::StatusOr<std::vector<int32_t>> Tokenizer::EncodeSegment(std::string_view text) const {
  const size_t bad = utf8::FirstInvalidByte(text);
  if (bad != std::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("prompt is not valid UTF-8 at byte ", bad));
  }
  return model_->EncodeSegment(text);
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

std::string Tokenizer::TokenBytes(int32_t id) const { return model_->TokenBytes(id); }

std::string Tokenizer::TokenText(int32_t id) const { return model_->TokenText(id); }

bool Tokenizer::IsControl(int32_t id) const { return model_->IsControl(id); }

bool Tokenizer::IsSpecial(int32_t id) const { return model_->IsSpecial(id); }

bool Tokenizer::IsByteToken(int32_t id) const { return model_->IsByteToken(id); }

bool Tokenizer::StripsFirstSpace(int32_t id) const { return model_->StripsFirstSpace(id); }

std::string Tokenizer::Decode(std::span<const int32_t> ids) const {
  return model_->Decode(ids, /*skip_special_tokens=*/true);
}

std::string Tokenizer::Decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  return model_->Decode(ids, skip_special_tokens);
}

}  // namespace gemma
