// IncrementalDetokenizer: Tokenizer::Decode is defined as running one of these
// over all ids, so streamed deltas always concatenate to the full decode.
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/utf8.h"

namespace gemma {

std::string IncrementalDetokenizer::Push(int32_t token_id) {
  if (tokenizer_->IsControl(token_id)) return "";
  std::string bytes = tokenizer_->TokenBytes(token_id);
  // Like SentencePiece: only the first visible piece loses its leading "▁",
  // the space the normalizer's dummy prefix put there.
  if (at_start_ && tokenizer_->StripsFirstSpace(token_id)) bytes.erase(0, 1);
  at_start_ = false;
  pending_ += bytes;
  std::string out;
  utf8::DrainValid(pending_, out, /*flush=*/false);
  return out;
}

std::string IncrementalDetokenizer::Flush() {
  std::string out;
  utf8::DrainValid(pending_, out, /*flush=*/true);
  return out;
}

}  // namespace gemma
