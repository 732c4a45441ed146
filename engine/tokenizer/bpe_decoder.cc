#include "engine/tokenizer/bpe_decoder.h"

#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "engine/tokenizer/utf8.h"

namespace gemma {
namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::vector<std::string> ReplaceAll(std::vector<std::string> tokens, const DecoderStep& step) {
  if (step.pattern.empty()) return tokens;
  for (std::string& token : tokens) token = absl::StrReplaceAll(token, {{step.pattern, step.content}});
  return tokens;
}

// A run of byte pieces becomes its bytes when they are valid UTF-8, else one
// U+FFFD per byte.
void FlushBytes(std::string& bytes, std::vector<std::string>& out) {
  if (bytes.empty()) return;
  if (utf8::FirstInvalidByte(bytes) == std::string_view::npos) {
    out.push_back(bytes);
  } else {
    for (size_t i = 0; i < bytes.size(); ++i) out.emplace_back(utf8::kReplacement);
  }
  bytes.clear();
}

std::vector<std::string> ByteFallback(std::vector<std::string> tokens) {
  std::vector<std::string> out;
  out.reserve(tokens.size());
  std::string bytes;
  for (std::string& token : tokens) {
    const int byte = ParseBytePiece(token);
    if (byte >= 0) {
      bytes += static_cast<char>(byte);
      continue;
    }
    FlushBytes(bytes, out);
    out.push_back(std::move(token));
  }
  FlushBytes(bytes, out);
  return out;
}

// Strips up to `strip_start` leading and `strip_stop` trailing copies of the
// character from each token.
std::vector<std::string> Strip(std::vector<std::string> tokens, const DecoderStep& step) {
  const std::string_view c = step.strip_char;
  if (c.empty()) return tokens;
  for (std::string& token : tokens) {
    std::string_view view = token;
    for (size_t i = 0; i < step.strip_start && view.starts_with(c); ++i) view.remove_prefix(c.size());
    for (size_t i = 0; i < step.strip_stop && view.ends_with(c); ++i) view.remove_suffix(c.size());
    token = std::string(view);
  }
  return tokens;
}

}  // namespace

int ParseBytePiece(std::string_view piece) {
  if (piece.size() != 6 || !piece.starts_with("<0x") || piece.back() != '>') return -1;
  // Rust's u8::from_str_radix, which also takes a leading "+".
  const char high = piece[3], low = piece[4];
  if (high == '+') return HexDigit(low);
  if (HexDigit(high) < 0 || HexDigit(low) < 0) return -1;
  return HexDigit(high) * 16 + HexDigit(low);
}

std::string BpeDecoder::Decode(std::vector<std::string> tokens) const {
  if (steps_.empty()) return absl::StrJoin(tokens, " ");
  for (const DecoderStep& step : steps_) {
    switch (step.kind) {
      case DecoderStep::Kind::kReplace: tokens = ReplaceAll(std::move(tokens), step); break;
      case DecoderStep::Kind::kByteFallback: tokens = ByteFallback(std::move(tokens)); break;
      case DecoderStep::Kind::kFuse: tokens = {absl::StrJoin(tokens, "")}; break;
      case DecoderStep::Kind::kStrip: tokens = Strip(std::move(tokens), step); break;
    }
  }
  return absl::StrJoin(tokens, "");
}

std::string BpeDecoder::TokenText(std::string_view piece) const {
  std::string text(piece);
  for (const DecoderStep& step : steps_) {
    if (step.kind == DecoderStep::Kind::kByteFallback) {
      const int byte = ParseBytePiece(text);
      if (byte >= 0) return std::string(1, static_cast<char>(byte));
    } else if (step.kind == DecoderStep::Kind::kReplace && !step.pattern.empty()) {
      text = absl::StrReplaceAll(text, {{step.pattern, step.content}});
    }
  }
  return text;
}

bool BpeDecoder::HasByteFallback() const {
  for (const DecoderStep& step : steps_) {
    if (step.kind == DecoderStep::Kind::kByteFallback) return true;
  }
  return false;
}

bool BpeDecoder::StripsLeadingSpace() const {
  bool fused = false;
  for (const DecoderStep& step : steps_) {
    if (step.kind == DecoderStep::Kind::kFuse) fused = true;
    if (step.kind == DecoderStep::Kind::kStrip && fused && step.strip_char == " " &&
        step.strip_start > 0) {
      return true;
    }
  }
  return false;
}

}  // namespace gemma
