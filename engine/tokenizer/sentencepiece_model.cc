// The only file that includes the SentencePiece header (see the .h for why):
// it must not include any Abseil header either.
#include "engine/tokenizer/sentencepiece_model.h"

#include <sentencepiece_processor.h>

namespace gemma {

SentencePieceModel::SentencePieceModel()
    : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {}
SentencePieceModel::~SentencePieceModel() = default;

std::unique_ptr<SentencePieceModel> SentencePieceModel::Load(const std::string& path,
                                                             std::string* error) {
  std::unique_ptr<SentencePieceModel> model(new SentencePieceModel());
  const auto status = model->sp_->Load(path);
  if (!status.ok()) {
    *error = status.ToString();
    return nullptr;
  }
  return model;
}

int SentencePieceModel::num_pieces() const { return sp_->GetPieceSize(); }
int SentencePieceModel::unk_id() const { return sp_->unk_id(); }
std::string SentencePieceModel::IdToPiece(int id) const { return sp_->IdToPiece(id); }
int SentencePieceModel::PieceToId(std::string_view piece) const { return sp_->PieceToId(piece); }
bool SentencePieceModel::IsControl(int id) const { return sp_->IsControl(id); }
bool SentencePieceModel::IsUnknown(int id) const { return sp_->IsUnknown(id); }
bool SentencePieceModel::IsByte(int id) const { return sp_->IsByte(id); }

bool SentencePieceModel::Encode(std::string_view text, std::vector<int>* ids,
                                std::string* error) const {
  const auto status = sp_->Encode(text, ids);
  if (!status.ok()) *error = status.ToString();
  return status.ok();
}

std::string SentencePieceModel::SerializedModelProto() const {
  return sp_->serialized_model_proto();
}

std::string SentencePieceModel::ReferenceDecode(const std::vector<int>& ids) const {
  return sp_->DecodeIds(ids);
}

}  // namespace gemma
