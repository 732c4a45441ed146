#include "engine/tokenizer/utf8.h"

#include <cstdint>

namespace gemma::utf8 {
namespace {

bool IsContinuation(uint8_t byte) { return (byte & 0xC0) == 0x80; }

// Length of the character a lead byte announces, 0 when it cannot lead.
size_t LeadLength(uint8_t byte) {
  if (byte < 0x80) return 1;
  if (byte >= 0xC2 && byte <= 0xDF) return 2;
  if (byte >= 0xE0 && byte <= 0xEF) return 3;
  if (byte >= 0xF0 && byte <= 0xF4) return 4;
  return 0;  // continuation bytes, C0/C1 (always overlong), F5..FF
}

// The second byte's allowed range is narrower after some lead bytes: this is
// what rules out overlong forms, surrogates and code points above U+10FFFF.
bool SecondByteOk(uint8_t lead, uint8_t second) {
  switch (lead) {
    case 0xE0: return second >= 0xA0 && second <= 0xBF;
    case 0xED: return second >= 0x80 && second <= 0x9F;
    case 0xF0: return second >= 0x90 && second <= 0xBF;
    case 0xF4: return second >= 0x80 && second <= 0x8F;
    default: return IsContinuation(second);
  }
}

}  // namespace

CharScan ScanChar(std::string_view text, size_t pos) {
  const auto lead = static_cast<uint8_t>(text[pos]);
  const size_t length = LeadLength(lead);
  if (length == 0) return {CharStatus::kInvalid, 0};
  for (size_t i = 1; i < length; ++i) {
    if (pos + i >= text.size()) return {CharStatus::kNeedMore, 0};
    const auto byte = static_cast<uint8_t>(text[pos + i]);
    const bool ok = i == 1 ? SecondByteOk(lead, byte) : IsContinuation(byte);
    if (!ok) return {CharStatus::kInvalid, 0};
  }
  return {CharStatus::kComplete, length};
}

size_t FirstInvalidByte(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    const CharScan scan = ScanChar(text, pos);
    if (scan.status != CharStatus::kComplete) return pos;
    pos += scan.length;
  }
  return std::string_view::npos;
}

void DrainValid(std::string& pending, std::string& out, bool flush) {
  size_t pos = 0;
  while (pos < pending.size()) {
    const CharScan scan = ScanChar(pending, pos);
    if (scan.status == CharStatus::kComplete) {
      out.append(pending, pos, scan.length);
      pos += scan.length;
    } else if (scan.status == CharStatus::kNeedMore && !flush) {
      break;
    } else {
      // One replacement per byte (not per maximal subpart): this is what
      // SentencePiece's own decoder does, so our text matches its Decode.
      out.append(kReplacement);
      ++pos;
    }
  }
  pending.erase(0, pos);
}

}  // namespace gemma::utf8
