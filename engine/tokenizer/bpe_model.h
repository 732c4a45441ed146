// The BPE model of a Hugging Face `tokenizer.json` ("model": {"type": "BPE"}),
// with the semantics of `tokenizers`: a word starts as one symbol per
// character (characters missing from the vocabulary become byte-fallback
// "<0xXX>" symbols, or the unknown token), then the adjacent pair of lowest
// merge rank is merged until none is left.
//
// Speed: a word is cut into independent chunks before each "▁" run that
// follows another character, unless a merge could join across such a cut
// (checked once at load time, so the result is exactly that of the whole
// word). Each chunk is merged with a priority queue over a linked list,
// O(n log n) in its length.
//
// Thread-safety: immutable after Create(); const methods are safe to call
// concurrently.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "engine/tokenizer/string_hash.h"

namespace gemma {

struct BpeSpec {
  std::vector<std::pair<std::string, int32_t>> vocab;  // piece, id
  std::vector<std::pair<std::string, std::string>> merges;  // by rank
  std::string unk_token;  // empty when none
  bool byte_fallback = false;
  bool fuse_unk = false;
  bool ignore_merges = false;
};

class BpeModel {
 public:
  // INVALID_ARGUMENT (prefixed by `context`, e.g. "tokenizer.json") when a
  // merge names a piece the vocabulary lacks, or ids are out of range.
  static absl::StatusOr<std::unique_ptr<BpeModel>> Create(BpeSpec spec, std::string_view context);

  // One past the largest id of the vocabulary.
  int num_ids() const { return static_cast<int>(pieces_.size()); }
  // -1 when absent.
  int32_t PieceToId(std::string_view piece) const;
  // Empty for ids the vocabulary lacks. REQUIRES: 0 <= id < num_ids().
  const std::string& IdToPiece(int32_t id) const { return pieces_[id]; }
  // The byte of a "<0xXX>" piece of the vocabulary, or -1.
  int ByteOf(int32_t id) const;
  int32_t unk_id() const { return unk_id_; }

  // Appends the ids of one pre-tokenized word. REQUIRES: valid UTF-8.
  void TokenizeWord(std::string_view word, std::vector<int32_t>& ids) const;

 private:
  struct Merge {
    int32_t rank;
    int32_t new_id;
  };
  BpeModel() = default;
  absl::Status BuildMerges(const BpeSpec& spec, std::string_view context);
  void FindCutRule(const BpeSpec& spec);
  // Buffers reused across the chunks of one word.
  struct Scratch;
  void TokenizeChunk(std::string_view chunk, Scratch& scratch, std::vector<int32_t>& ids) const;
  void AddCharSymbols(std::string_view chunk, Scratch& scratch) const;
  const Merge* FindMerge(int32_t left, int32_t right) const;
  bool CanCutBefore(std::string_view word, size_t pos) const;

  absl::flat_hash_map<std::string, int32_t, StringViewHash, StringViewEq> vocab_;
  std::vector<std::string> pieces_;                   // by id
  absl::flat_hash_map<uint64_t, Merge> merges_;       // (left id << 32 | right id)
  std::array<int32_t, 128> ascii_ids_;                // id of each ASCII character, or -1
  std::array<int32_t, 256> byte_ids_;                 // id of "<0xXX>", or -1
  int32_t unk_id_ = -1;
  bool byte_fallback_ = false, fuse_unk_ = false, ignore_merges_ = false;
  // Chunk cuts: before a "▁" that follows a character other than "▁", unless
  // that character ends the left side of a merge whose right side starts with
  // "▁" (Gemma 3 has one: ">" + "▁</").
  bool cuts_enabled_ = false;
  std::vector<std::string> uncuttable_left_chars_;
};

}  // namespace gemma
