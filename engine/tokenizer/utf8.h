// Strict UTF-8 scanning shared by prompt validation and detokenization.
// "Strict" means what RFC 3629 allows: no overlong forms, no surrogates,
// nothing above U+10FFFF.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace gemma::utf8 {

enum class CharStatus {
  kComplete,   // a whole valid character of `length` bytes starts here
  kNeedMore,   // the bytes present are a valid but unfinished prefix
  kInvalid,    // the byte here cannot start a valid character
};

struct CharScan {
  CharStatus status;
  size_t length;  // bytes of the character when kComplete, else 0
};

// Classifies the character starting at text[pos]. REQUIRES: pos < text.size().
CharScan ScanChar(std::string_view text, size_t pos);

// Offset of the first byte that is not part of a valid character (a character
// cut off by the end counts as invalid), or npos when all of `text` is valid.
size_t FirstInvalidByte(std::string_view text);

// U+FFFD, which replaces each invalid byte.
inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// Moves the longest decidable prefix of `pending` to `out`, replacing each
// invalid byte with U+FFFD. With `flush`, an unfinished trailing character is
// decided too (each of its bytes becomes U+FFFD); otherwise it stays pending.
void DrainValid(std::string& pending, std::string& out, bool flush);

}  // namespace gemma::utf8
