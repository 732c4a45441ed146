#include "engine/tokenizer/detokenizer.h"

#include <algorithm>
#include <string_view>

#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/utf8.h"

namespace gemma {
namespace {

// Context tokens kept before the first output token, and tokens a window
// keeps before its unread part: enough for every decoder rule that looks at a
// neighbour (leading-space strip, byte-fallback grouping).
constexpr size_t kWindowTokens = 6;

bool EndsWithReplacement(std::string_view text) { return text.ends_with(utf8::kReplacement); }

}  // namespace

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer* tokenizer,
                                               bool skip_special_tokens)
    : tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens) {}

void IncrementalDetokenizer::SetContext(std::span<const int32_t> context_ids) {
  // Keep a generous tail: WindowStart may need to look further back than
  // kWindowTokens for a run of bytes or of special tokens.
  constexpr size_t kContextTail = 64;
  const size_t keep = std::min(context_ids.size(), kContextTail);
  ids_.assign(context_ids.end() - keep, context_ids.end());
  read_offset_ = ids_.size();
  MoveWindow();
}

void IncrementalDetokenizer::MoveWindow() {
  prefix_offset_ = WindowStart(read_offset_ - std::min(read_offset_, kWindowTokens), read_offset_, &prefix_text_);
}

std::string IncrementalDetokenizer::DecodeRange(size_t begin, size_t end) const {
  return tokenizer_->Decode(std::span<const int32_t>(ids_.data() + begin, end - begin),
                            skip_special_tokens_);
}

size_t IncrementalDetokenizer::WindowStart(size_t start, size_t read, std::string* text) const {
  // Bounded, so that a long run of skipped tokens costs O(1) per token.
  constexpr size_t kMaxLookBack = 64;
  const size_t floor = start - std::min(start, kMaxLookBack);
  while (start > floor && tokenizer_->IsByteToken(ids_[start])) --start;
  *text = DecodeRange(start, read);
  if (start == floor || !text->empty()) return start;
  // The largest s in [floor, start) whose window [s, read) decodes to some
  // text, else floor. Tokens added in front never empty a decoded text, so
  // the empty windows are the ones starting past that s: bisection finds it
  // in ~6 decodes where a step-by-step scan took up to 64 (each of up to ~70
  // tokens) for every token of a run that decodes to nothing.
  size_t lo = floor, hi = start;  // [hi, read) decodes empty; lo is floor or not empty
  bool have_lo_text = false;      // *text holds the decode of [lo, read)
  while (hi - lo > 1) {
    const size_t mid = lo + (hi - lo) / 2;
    std::string mid_text = DecodeRange(mid, read);
    if (mid_text.empty()) {
      hi = mid;
    } else {
      lo = mid;
      *text = std::move(mid_text);
      have_lo_text = true;
    }
  }
  if (!have_lo_text) *text = DecodeRange(lo, read);
  return lo;
}

std::string IncrementalDetokenizer::Push(int32_t token_id) {
  ids_.push_back(token_id);
  const std::string new_text = DecodeRange(prefix_offset_, ids_.size());
  if (new_text.size() <= prefix_text_.size() || EndsWithReplacement(new_text)) return "";
  std::string delta = new_text.substr(prefix_text_.size());
  read_offset_ = ids_.size();
  MoveWindow();
  return delta;
}

std::string IncrementalDetokenizer::Flush() {
  const std::string new_text = DecodeRange(prefix_offset_, ids_.size());
  const size_t done = prefix_text_.size();
  read_offset_ = ids_.size();
  MoveWindow();
  if (new_text.size() <= done) return "";
  return new_text.substr(done);
}

}  // namespace gemma
