#include "engine/tokenizer/added_vocabulary.h"

#include <algorithm>

namespace gemma {
namespace {

constexpr char32_t kWhitespace[] = {0x09,   0x0A,   0x0B,   0x0C,   0x0D,   0x20,   0x85,
                                    0xA0,   0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004,
                                    0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200A, 0x2028,
                                    0x2029, 0x202F, 0x205F, 0x3000};

// Decodes the (valid) UTF-8 character at text[pos]; its length in `length`.
char32_t DecodeAt(std::string_view text, size_t pos, size_t& length) {
  const unsigned char lead = static_cast<unsigned char>(text[pos]);
  length = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
  if (pos + length > text.size()) {
    length = 1;
    return 0xFFFD;
  }
  char32_t value = length == 1 ? lead : lead & (0x7F >> length);
  for (size_t i = 1; i < length; ++i) value = (value << 6) | (text[pos + i] & 0x3F);
  return value;
}

bool IsWhitespace(char32_t c) {
  return std::find(std::begin(kWhitespace), std::end(kWhitespace), c) != std::end(kWhitespace);
}

}  // namespace

size_t WhitespaceLengthAt(std::string_view text, size_t pos) {
  size_t length = 0;
  return IsWhitespace(DecodeAt(text, pos, length)) ? length : 0;
}

size_t WhitespaceLengthBefore(std::string_view text, size_t end) {
  if (end == 0) return 0;
  size_t start = end - 1;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
  const size_t length = WhitespaceLengthAt(text, start);
  return start + length == end ? length : 0;
}

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedToken>& tokens,
                                     const std::vector<std::string>& patterns) {
  terminal_.push_back(-1);
  for (size_t t = 0; t < tokens.size(); ++t) {
    tokens_.push_back(Flags{tokens[t].id, tokens[t].lstrip, tokens[t].rstrip});
    const std::string& pattern = patterns[t];
    if (pattern.empty()) continue;
    int32_t node = 0;
    for (unsigned char byte : pattern) {
      auto [it, inserted] = edges_.try_emplace((uint64_t{uint32_t(node)} << 8) | byte,
                                               static_cast<int32_t>(terminal_.size()));
      if (inserted) terminal_.push_back(-1);
      node = it->second;
    }
    // Of two tokens with the same text, the first added one is found.
    if (terminal_[node] < 0) terminal_[node] = static_cast<int32_t>(t);
    first_bytes_[static_cast<unsigned char>(pattern[0])] = true;
    ++num_patterns_;
  }
}

int32_t AddedTokenMatcher::Child(int32_t node, unsigned char byte) const {
  auto it = edges_.find((uint64_t{uint32_t(node)} << 8) | byte);
  return it == edges_.end() ? -1 : it->second;
}

AddedTokenMatcher::Match AddedTokenMatcher::LongestAt(std::string_view text, size_t pos) const {
  Match match;
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    node = Child(node, static_cast<unsigned char>(text[i]));
    if (node < 0) break;
    if (terminal_[node] >= 0) match = Match{i + 1, terminal_[node]};
  }
  return match;
}

void AddedTokenMatcher::Split(std::string_view text, std::vector<TextSplit>& splits) const {
  size_t done = 0;  // text before this offset is already in `splits`
  for (size_t pos = 0; pos < text.size(); ++pos) {
    if (!first_bytes_[static_cast<unsigned char>(text[pos])]) continue;
    const Match match = LongestAt(text, pos);
    if (match.token < 0) continue;
    const Flags& token = tokens_[match.token];
    size_t start = pos, stop = match.end;
    if (token.lstrip) {
      while (size_t length = WhitespaceLengthBefore(text, start)) start -= length;
      start = std::max(start, done);
    }
    if (token.rstrip) {
      while (stop < text.size())
        if (size_t length = WhitespaceLengthAt(text, stop)) stop += length; else break;
    }
    if (done < start) splits.push_back(TextSplit{done, start, -1});
    splits.push_back(TextSplit{start, stop, token.id});
    done = stop;
    pos = stop - 1;
  }
  if (done < text.size()) splits.push_back(TextSplit{done, text.size(), -1});
}

}  // namespace gemma
