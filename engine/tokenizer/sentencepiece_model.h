// A thin std-only facade over sentencepiece::SentencePieceProcessor.
//
// Why: Debian's sentencepiece header declares `absl::string_view` as an alias
// of std::string_view, while Debian's Abseil defines its own class of that
// name, so no file may include both. Only sentencepiece_model.cc includes the
// SentencePiece header; everything else talks to this class.
//
// Thread-safety: const methods are safe to call concurrently.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sentencepiece { class SentencePieceProcessor; }

namespace gemma {

class SentencePieceModel {
 public:
  // nullptr and a message in `error` when the file cannot be loaded.
  static std::unique_ptr<SentencePieceModel> Load(const std::string& path, std::string* error);
  ~SentencePieceModel();

  int num_pieces() const;
  int unk_id() const;
  std::string IdToPiece(int id) const;   // REQUIRES: 0 <= id < num_pieces()
  int PieceToId(std::string_view piece) const;  // unk_id() when absent
  bool IsControl(int id) const;
  bool IsUnknown(int id) const;
  bool IsByte(int id) const;
  // False and a message in `error` on failure.
  bool Encode(std::string_view text, std::vector<int>* ids, std::string* error) const;
  std::string SerializedModelProto() const;
  // SentencePiece's own decoding: the reference our decoder is tested against.
  std::string ReferenceDecode(const std::vector<int>& ids) const;

 private:
  SentencePieceModel();
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
};

}  // namespace gemma
